#!/usr/bin/env bash
# Per-rank figures and the straggler line (launcher/trainer/train_ranks.c) through the real launcher
# at np 3: a rank slowed by DDP_TEST_FAULT=slow (it sleeps after every step from step 10 on) is named
# by rank 0's straggler line, with its host, within the stated 4 x 50 + 2 x train.log_every steps of
# its slow-down, and no other rank is; the same job without the fault names none; a rank stopped and
# continued from outside (SIGSTOP/SIGCONT half the time) at np 2 is named too. Every progress line of
# metrics.jsonl holds every rank's figures, the learning rate and the gradient norm (clipping on);
# MFU is left out on the CPU, whose peak is not known; without clipping there is no gradient norm.
source "$(dirname "$0")/../../lib.sh"
RUN=(train.max_steps=220 train.log_every=5)
SLOW_FROM=10

DDP_TEST_FAULT=slow:2:$SLOW_FROM:0.03 "$DDPRUN" -np 3 "$SMALL" run.dir="$TMP/slow" "${RUN[@]}" >"$TMP/slow.log" 2>&1
check "slowed rank: the job completes (exit $?)" [ $? -eq 0 ]
line=$(grep "straggler:" "$TMP/slow.log" | head -n 1)
echo "straggler line: $line"
check "the straggler line names rank 2 and its host" grep -q "straggler: rank 2 on host $(hostname -s)\|straggler: rank 2 on host $(hostname)" <<<"$line"
check "it says how much slower, over which steps, and what the others wait" \
    grep -Eq "[0-9]+ % slower than the median of the other ranks over the last [0-9]+ steps \(steps [0-9]+-[0-9]+\); the others wait [0-9.]+ ms a step for it" <<<"$line"
last=$(sed -n 's/.*(steps [0-9]*-\([0-9]*\)).*/\1/p' <<<"$line")
check "named within 4 x 50 + 2 x log_every steps of the slow-down (by step $last)" eval '[ -n "$last" ] && [ "$last" -le $((SLOW_FROM + 200 + 10)) ]'
waited=$(sed -n 's/.*the others wait \([0-9.]*\) ms.*/\1/p' <<<"$line")
check "the others' wait is about the 30 ms sleep ($waited ms)" python3 -c "exit(not 15 <= float('${waited:-0}') <= 60)"
check "no other rank is named" bash -c "! grep 'straggler:' '$TMP/slow.log' | grep -v 'rank 2 on'"

"$DDPRUN" -np 3 "$SMALL" run.dir="$TMP/even" "${RUN[@]}" >"$TMP/even.log" 2>&1
check "no fault: the job completes" [ $? -eq 0 ]
check "no fault: no straggler line" bash -c "! grep -q 'straggler' '$TMP/even.log'"

# rank 1 stopped and continued from outside, 40 ms of every 80, as a noisy neighbour would. The rule
# asks for two thirds of a window's intervals (5 steps each) to be slow, so a step must be long
# against the 80 ms cycle for every interval to take some of the stops: hidden [2048, 2048] makes a
# step tens of ms on these CPUs (with [512, 512] it was 3 ms, an interval took one stop or none and
# the rule held only now and then). The cycle goes on until the line appears (80 s at most).
"$DDPRUN" -np 2 "$SMALL" run.dir="$TMP/stopped" model.mlp.hidden=[2048,2048] train.epochs=100 train.max_steps=100000 \
    train.log_every=5 >"$TMP/stopped.log" 2>&1 &
job=$!
rank1=
for _ in $(seq 600); do
    for p in $(pgrep -f "ddprun-worker.*run.dir=$TMP/stopped"); do # this job's ranks only
        grep -qz '^OMPI_COMM_WORLD_RANK=1$' /proc/$p/environ 2>/dev/null && rank1=$p
    done
    [ -n "$rank1" ] && [ -s "$TMP/stopped/metrics.jsonl" ] && break
    sleep 0.1
done
for _ in $(seq 1000); do
    grep -q "straggler:" "$TMP/stopped.log" && break
    kill -STOP "$rank1" 2>/dev/null; sleep 0.04; kill -CONT "$rank1" 2>/dev/null; sleep 0.04
done
kill -CONT "$rank1" 2>/dev/null
kill -TERM $job; wait $job
check "a rank stopped and continued from outside is named" grep -q "straggler: rank 1 on host" "$TMP/stopped.log"
check "... and only it" bash -c "! grep 'straggler:' '$TMP/stopped.log' | grep -v 'rank 1 on'"

# metrics.jsonl: the per-rank figures, lr and grad_norm in every train line; no mfu on the CPU
check "metrics.jsonl: every train line has every rank's figures, lr and grad_norm, no mfu" python3 - "$TMP/slow/metrics.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
train = [l for l in lines if l["kind"] == "train"]
assert len(train) == 44, len(train)
for l in train:
    assert "lr" in l and l["grad_norm"] > 0 and "mfu" not in l, l
    assert [r["rank"] for r in l["ranks"]] == [0, 1, 2], l["ranks"]
    for r in l["ranks"]:
        assert set(r) == {"rank", "host", "step_ms", "wait_ms", "data_ms", "peak_mib"}, r
        assert r["host"] and r["step_ms"] > 0 and r["wait_ms"] >= 0 and r["data_ms"] > 0 and r["peak_mib"] > 0, r
# late in the run the slowed rank works longer and waits less than the others
late = train[-1]["ranks"]
assert late[2]["step_ms"] - late[2]["wait_ms"] > 20, late
assert late[0]["wait_ms"] > late[2]["wait_ms"] + 20 and late[1]["wait_ms"] > late[2]["wait_ms"] + 20, late
PY
check "the progress line shows the gradient norm and the peak memory, no MFU on the CPU" \
    bash -c "grep -Eq 'lr [0-9.e+-]+ grad norm [0-9.e+-]+ \|.* peak mem [0-9.]+ MiB' '$TMP/even.log' && ! grep -q MFU '$TMP/even.log'"

"$DDPRUN" -np 1 "$SMALL" run.dir="$TMP/noclip" train.max_steps=10 optimizer.grad_clip=0 >"$TMP/noclip.log" 2>&1
check "without clipping: no gradient norm (it is not computed)" \
    bash -c "! grep -q grad_norm '$TMP/noclip/metrics.jsonl' && ! grep -q 'grad norm' '$TMP/noclip.log'"
check "one rank: its figures, and no straggler line" \
    bash -c "grep -q '\"ranks\":\[{\"rank\":0,' '$TMP/noclip/metrics.jsonl' && ! grep -q straggler '$TMP/noclip.log'"
finish
