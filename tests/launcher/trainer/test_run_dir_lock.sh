#!/usr/bin/env bash
# One job per run.dir: a second job started into the run.dir of a running one is refused with exit 2
# naming the holder's host and pid, before it writes anything, and the first job's metrics,
# resolved config and checkpoints stay its own. Once the first job has ended — stopped by SIGTERM,
# or killed with SIGKILL so that it could release nothing — the next job takes the run.dir and resumes.
source "$(dirname "$0")/../../lib.sh"
COMMON=(checkpoint.resume=auto checkpoint.every_steps=10 train.log_every=10)

# A: slowed (every step of rank 0 sleeps 50 ms) and long, so that it is still running whenever B
# starts, however loaded the machine; it is stopped with SIGTERM once B has been refused
DDP_TEST_FAULT=slow:0:1:0.05 "$DDPRUN" -np 2 "$SMALL" run.dir="$TMP/run" train.max_steps=100000 "${COMMON[@]}" \
    >"$TMP/a.log" 2>&1 &
a=$!
for _ in $(seq 600); do [ -s "$TMP/run/metrics.jsonl" ] && break; sleep 0.1; done
check "job A is training" [ -s "$TMP/run/metrics.jsonl" ]
"$DDPRUN" -np 2 "$SMALL" run.dir="$TMP/run" run.seed=3 train.max_steps=100 "${COMMON[@]}" >"$TMP/b.log" 2>&1
rc=$?
check "job B into A's run.dir: refused with exit 2 (got $rc)" [ $rc -eq 2 ]
holder=$(cat "$TMP/run/ddprun.lock")
check "the lock file names A's host and pid ($holder)" grep -qE "^host $(hostname) pid [0-9]+ since " "$TMP/run/ddprun.lock"
check "B's message names the run.dir and the holder" \
    grep -qF "run.dir: $TMP/run is in use by another job (${holder%$'\n'}; lock $TMP/run/ddprun.lock)" "$TMP/b.log"
pid=$(sed -n 's/.* pid \([0-9]*\) .*/\1/p' "$TMP/run/ddprun.lock")
check "the pid named is a rank of A (still running)" kill -0 "$pid"
kill -TERM $a
wait $a
rc=$?
check "job A stops on SIGTERM, saving (exit 75, got $rc)" [ $rc -eq 75 ]
stopped=$(sed -n 's/.*ckpt-0*\([0-9][0-9]*\)\.ddp.*/\1/p' <(ls "$TMP/run/checkpoints") | sort -n | tail -1)
check "metrics.jsonl holds A's steps only, in order, up to its last checkpoint ($stopped)" \
    python3 - "$TMP/run/metrics.jsonl" "$stopped" <<'PY'
import json, sys
steps = [json.loads(l)["step"] for l in open(sys.argv[1]) if '"kind":"train"' in l]
last = int(sys.argv[2])
ok = steps and steps[0] == 10 and all(a < b for a, b in zip(steps, steps[1:])) and steps[-1] <= last
sys.exit(0 if ok else f"steps {steps}")
PY
check "config.resolved.yaml is A's (run.seed 42)" grep -qE "^  seed: 42$" "$TMP/run/config.resolved.yaml"

# after A: the run.dir is free, and a longer job resumes A's last checkpoint
"$DDPRUN" -np 2 "$SMALL" run.dir="$TMP/run" train.max_steps=$((stopped + 20)) "${COMMON[@]}" >"$TMP/c.log" 2>&1
check "after A ended, the next job runs (exit $?)" [ $? -eq 0 ]
check "... resuming A's step-$stopped checkpoint" grep -q "resumed from .*ckpt-0*${stopped}.ddp" "$TMP/c.log"

# a job killed with SIGKILL (rank 0 after step 35; checkpoints at 10, 20, 30, the save of 30 having
# waited for the write of 20) holds nothing afterwards
DDP_TEST_FAULT=kill:0:35 "$DDPRUN" -np 2 "$SMALL" run.dir="$TMP/killed" train.max_steps=40 "${COMMON[@]}" \
    >"$TMP/k.log" 2>&1
rc=$?
check "the killed job failed (exit $rc)" eval '[ $rc -ne 0 ] && [ $rc -ne 2 ]'
"$DDPRUN" -np 2 "$SMALL" run.dir="$TMP/killed" train.max_steps=40 "${COMMON[@]}" >"$TMP/k2.log" 2>&1
check "the resume after a SIGKILL is not refused (exit $?)" [ $? -eq 0 ]
check "... and resumes from step 20 or 30" grep -qE "resumed from .*ckpt-000000[23]0.ddp" "$TMP/k2.log"
finish
