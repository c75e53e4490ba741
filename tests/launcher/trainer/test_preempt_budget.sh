#!/usr/bin/env bash
# The preemption budget (launcher/trainer/train_budget.c) through the real launcher at np 2, with a
# local stand-in for the clouds' metadata services (tests/launcher/metadata_server.py): after the
# first checkpoint is durable, a save on AWS's 120 s notice fits and is said to; on GCP (found by
# checkpoint.preemption_notice auto), whose notice is 30 s, a checkpoint write made 31 s slower by
# DDP_TEST_FAULT=slow-write does not fit, and the warning says so and what would; a sharded save
# whose shards take 16 s fits, its write counted once; on no cloud nothing is said.
source "$(dirname "$0")/../../lib.sh"
SERVER=$DDP_SRC/tests/launcher/metadata_server.py
RUN=(train.max_steps=20 checkpoint.every_steps=10)
POLL=checkpoint.notice_poll_s=0.5 # with a notice only: without one the key has no effect, and is refused
server_pid=
start_server() { # provider dir
    mkdir -p "$2"
    python3 "$SERVER" "$1" "$2" &
    server_pid=$!
    for _ in $(seq 100); do [ -f "$2/port" ] && break; sleep 0.05; done
    export DDPRUN_METADATA_URL=http://127.0.0.1:$(cat "$2/port")
}
stop_server() { kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null; }
trap 'stop_server; rm -rf "$TMP"' EXIT

start_server aws "$TMP/aws-meta"
"$DDPRUN" -np 2 "$SMALL" run.dir="$TMP/aws" "${RUN[@]}" "$POLL" checkpoint.preemption_notice=aws >"$TMP/aws.log" 2>&1
check "aws: the job completes" [ $? -eq 0 ]
stop_server
check "aws: a save fits the 120 s notice, and is said to" \
    grep -Eq "preemption budget: a save on AWS's notice takes about [0-9.]+ s \(the notice seen up to 0\.5 s late, a step [0-9.]+ s, the snapshot [0-9.]+ s, the write [0-9.]+ s\) of its 120 s notice" "$TMP/aws.log"
check "aws: the total is its parts', the poll interval's included" python3 - "$TMP/aws.log" <<'PY'
import re, sys
m = re.search(r"takes about ([0-9.]+) s \(the notice seen up to ([0-9.]+) s late, a step ([0-9.]+) s, "
              r"the snapshot ([0-9.]+) s, the write ([0-9.]+) s\)", open(sys.argv[1]).read())
total, parts = float(m.group(1)), sum(float(m.group(i)) for i in range(2, 6))
print(f"total {total}, parts {parts:.3f}")
sys.exit(0 if abs(total - parts) <= 0.06 else 1)  # %.1f's and three %.2f's roundings
PY
check "aws: said once" [ "$(grep -c 'preemption budget' "$TMP/aws.log")" -eq 1 ]

start_server gcp "$TMP/gcp-meta"
DDP_TEST_FAULT=slow-write:0:10:31 "$DDPRUN" -np 2 "$SMALL" run.dir="$TMP/gcp" "${RUN[@]}" "$POLL" \
    checkpoint.preemption_notice=auto checkpoint.every_minutes=30 >"$TMP/gcp.log" 2>&1
check "gcp, slow write: the job completes" [ $? -eq 0 ]
stop_server
line=$(grep "preemption budget" "$TMP/gcp.log")
echo "$line"
check "gcp, slow write: the warning names the cloud, the time and its parts, and the 30 s notice" \
    grep -Eq "warning: preemption budget: a save on GCP's notice would take about 3[1-9]\.[0-9] s \(the notice seen up to 0\.5 s late, a step [0-9.]+ s, the snapshot [0-9.]+ s, the write of [0-9.]+ MB 3[1-9]\.[0-9] s at [0-9.]+ MB/s\), more than its 30 s notice" <<<"$line"
check "gcp, slow write: it says what would fit" \
    grep -Eq "What fits: storage that writes [0-9.]+ MB in [0-9]+ s \([0-9.]+ MB/s or faster.*a smaller checkpoint.every_minutes \(now 30\)" <<<"$line"
check "gcp, slow write: the slow checkpoint was still written" [ -f "$TMP/gcp/checkpoints/ckpt-00000010.ddp" ]

# checkpoint.sharded: the shards are written inside the save's stall, counted once (a 16 s write
# fits the 30 s notice; counted twice, it would not)
start_server gcp "$TMP/gcp-meta-sharded"
DDP_TEST_FAULT=slow-write:-1:10:16 "$DDPRUN" -np 2 "$SMALL" run.dir="$TMP/gcp-sharded" "${RUN[@]}" "$POLL" \
    checkpoint.sharded=true checkpoint.preemption_notice=gcp >"$TMP/gcp-sharded.log" 2>&1
check "gcp, sharded, slow write: the job completes" [ $? -eq 0 ]
stop_server
check "gcp, sharded, slow write: the save fits, its write counted once" \
    grep -Eq "preemption budget: a save on GCP's notice takes about 1[6-9]\.[0-9] s \(the notice seen up to 0\.5 s late, a step [0-9.]+ s, the rest of the save [0-9.]+ s, the write 1[6-9]\.[0-9]+ s\) of its 30 s notice" "$TMP/gcp-sharded.log"

export DDPRUN_METADATA_URL=http://127.0.0.1:9   # discard port: no cloud answers
"$DDPRUN" -np 2 "$SMALL" run.dir="$TMP/none" "${RUN[@]}" "$POLL" checkpoint.preemption_notice=auto >"$TMP/none.log" 2>&1
check "no cloud: the job completes" [ $? -eq 0 ]
check "no cloud: no budget line" bash -c "! grep -q 'preemption budget' '$TMP/none.log'"
"$DDPRUN" -np 2 "$SMALL" run.dir="$TMP/off" "${RUN[@]}" >"$TMP/off.log" 2>&1
check "preemption_notice off: the job completes" [ $? -eq 0 ]
check "preemption_notice off: no budget line" bash -c "! grep -q 'preemption budget' '$TMP/off.log'"
finish
