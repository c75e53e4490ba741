#!/usr/bin/env bash
# Preemption through the real launcher: SIGTERM to ddprun mid-run makes every rank save and exit
# 75, and the resumed job ends bit-identical to an uninterrupted one; a rank killed with SIGKILL
# between checkpoints ends the job naming the rank, and with --max-restarts 1 the job restarts
# from the last checkpoint and still ends bit-identical.
source "$(dirname "$0")/../../lib.sh"
LONG=(model.mlp.hidden=[512,512] optimizer.kind=adamw optimizer.nesterov=false train.max_steps=400
      checkpoint.every_steps=100 train.log_every=5)
ddprun_np2() { "$DDPRUN" -np 2 "$SMALL" "$@"; }

ddprun_np2 run.dir="$TMP/ref" "${LONG[@]}" >"$TMP/ref.log" 2>&1
check "uninterrupted 400-step run" [ $? -eq 0 ]

# SIGTERM once training is under way (a step that is not a checkpoint step, whatever it is)
"$DDPRUN" -np 2 "$SMALL" run.dir="$TMP/pre" "${LONG[@]}" >"$TMP/pre.log" 2>&1 &
pid=$!
for _ in $(seq 600); do
    grep -q '"step":20,' "$TMP/pre/metrics.jsonl" 2>/dev/null && break
    sleep 0.05
done
t0=$(date +%s.%N)
kill -TERM $pid
wait $pid
rc=$?
t1=$(date +%s.%N)
echo "SIGTERM -> ddprun exit took $(python3 -c "print(f'{$t1 - $t0:.2f}')") s"
check "SIGTERM to ddprun: job exits 75 (got $rc)" [ $rc -eq 75 ]
saved=$(last_ckpt "$TMP/pre")
check "a checkpoint was saved before exiting ($saved)" [ -n "$saved" ]
check "both ranks stopped at the same step (checkpoint is the latest state)" \
    grep -q "stopped by signal, checkpoint saved" "$TMP/pre.log"
ddprun_np2 run.dir="$TMP/pre" "${LONG[@]}" checkpoint.resume=auto >"$TMP/pre2.log" 2>&1
check "resumed job completes" [ $? -eq 0 ]
check "it resumed the checkpoint the stop saved" grep -q "resumed from $saved" "$TMP/pre2.log"
check "resumed job is bit-identical to the uninterrupted run" \
    "$DDPRUN" ckpt diff "$TMP/ref/checkpoints/ckpt-00000400.ddp" "$TMP/pre/checkpoints/ckpt-00000400.ddp"

# kill -9 of rank 1 after step 250 (checkpoints at 100, 200): without restarts the job fails fast
DDP_TEST_FAULT=kill:1:250 ddprun_np2 run.dir="$TMP/k0" "${LONG[@]}" >"$TMP/k0.log" 2>&1
rc=$?
check "SIGKILL of a rank: ddprun exits non-zero (got $rc)" eval '[ $rc -ne 0 ] && [ $rc -ne 75 ]'
check "the failure message names rank 1" grep -qi "rank 1" "$TMP/k0.log"
# ... and with --max-restarts 1 it resumes from step 200 and completes
DDP_TEST_FAULT=kill:1:250 "$DDPRUN" -np 2 --max-restarts 1 "$SMALL" run.dir="$TMP/k1" "${LONG[@]}" >"$TMP/k1.log" 2>&1
check "--max-restarts 1 after a SIGKILL: job completes" [ $? -eq 0 ]
check "the restart is announced" grep -q "attempt 2" "$TMP/k1.log"
# step 200's checkpoint, or step 100's where the background write of 200 had not ended when rank 0
# was killed too (a loaded machine)
check "the restarted attempt resumed from step 200 (or 100)" grep -qE "resumed from .*ckpt-00000[12]00.ddp" "$TMP/k1.log"
check "restarted job is bit-identical to the uninterrupted run" \
    "$DDPRUN" ckpt diff "$TMP/ref/checkpoints/ckpt-00000400.ddp" "$TMP/k1/checkpoints/ckpt-00000400.ddp"
finish
