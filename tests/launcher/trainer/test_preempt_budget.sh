#!/usr/bin/env bash
# The preemption budget (launcher/trainer/train_budget.c) through the real launcher at np 2, with a
# local stand-in for the clouds' metadata services (tests/launcher/metadata_server.py): after the
# first checkpoint is durable, a save on AWS's 120 s notice fits and is said to; on GCP (found by
# checkpoint.preemption_notice auto), whose notice is 30 s, a checkpoint write made 31 s slower by
# DDP_TEST_FAULT=slow-write does not fit, and the warning says so and what would; a sharded save
# whose shards take 16 s fits, its write counted once; with checkpoint.upload_cmd, the first upload
# measured checks the save and the upload together: a quick copy fits AWS's notice, and an upload
# of 31 s after a save that fits GCP's does not, said with what would fit; on no cloud nothing is
# said.
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

# checkpoint.upload_cmd: the save that fits, then with the upload's time (a quick copy on AWS)
mkdir -p "$TMP/remote"
start_server aws "$TMP/aws-meta-upload"
"$DDPRUN" -np 2 "$SMALL" run.dir="$TMP/aws-upload" "${RUN[@]}" "$POLL" checkpoint.preemption_notice=aws \
    checkpoint.upload_cmd="cp {path} $TMP/remote/" >"$TMP/aws-upload.log" 2>&1
check "aws, upload: the job completes" [ $? -eq 0 ]
stop_server
check "aws, upload: the save and the upload fit the 120 s notice, and are said to" \
    grep -Eq "preemption budget: with checkpoint.upload_cmd, a checkpoint saved on AWS's notice is uploaded after about [0-9.]+ s \(the save [0-9.]+ s, the upload [0-9.]+ s as the last took\) of its 120 s notice" "$TMP/aws-upload.log"
check "aws, upload: the total is its parts'" python3 - "$TMP/aws-upload.log" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
m = re.search(r"uploaded after about ([0-9.]+) s \(the save ([0-9.]+) s, the upload ([0-9.]+) s", text)
save = re.search(r"a save on AWS's notice takes about ([0-9.]+) s", text)
total, parts = float(m.group(1)), float(m.group(2)) + float(m.group(3))
print(f"total {total}, parts {parts:.2f}, the save's own line {save.group(1)}")
# three %.1f roundings; the save is the one the first check measured
sys.exit(0 if abs(total - parts) <= 0.15 and abs(float(m.group(2)) - float(save.group(1))) <= 0.051 else 1)
PY
check "aws, upload: each check said once" [ "$(grep -c 'preemption budget' "$TMP/aws-upload.log")" -eq 2 ]

# an upload of 31 s after GCP's save that fits: one save (the job's last), its upload waited for
start_server gcp "$TMP/gcp-meta-upload"
"$DDPRUN" -np 2 "$SMALL" run.dir="$TMP/gcp-upload" train.max_steps=10 checkpoint.every_steps=10 "$POLL" \
    checkpoint.preemption_notice=gcp checkpoint.every_minutes=30 \
    checkpoint.upload_cmd="sleep 31; cp {path} $TMP/remote/" >"$TMP/gcp-upload.log" 2>&1
check "gcp, slow upload: the job completes" [ $? -eq 0 ]
stop_server
line=$(grep "preemption budget: with" "$TMP/gcp-upload.log")
echo "$line"
check "gcp, slow upload: the save alone fits" grep -q "a save on GCP's notice takes about" "$TMP/gcp-upload.log"
check "gcp, slow upload: the warning names the total, its parts and the 30 s notice" \
    grep -Eq "warning: preemption budget: with checkpoint.upload_cmd, a checkpoint saved on GCP's notice would be uploaded after about 3[1-9]\.[0-9] s \(the save [0-9.]+ s, the upload 3[1-9]\.[0-9] s as the last took\), more than its 30 s notice" <<<"$line"
check "gcp, slow upload: it says what would fit" \
    grep -Eq "up to checkpoint.every_minutes \(now 30\) older. What fits: an upload of [0-9.]+ MB in (29|30) s \([0-9.]+ MB/s or faster\), or checkpoint.dir on storage that outlives the machine" <<<"$line"
check "gcp, slow upload: the checkpoint was uploaded" [ -f "$TMP/remote/ckpt-00000010.ddp" ]

export DDPRUN_METADATA_URL=http://127.0.0.1:9   # discard port: no cloud answers
"$DDPRUN" -np 2 "$SMALL" run.dir="$TMP/none" "${RUN[@]}" "$POLL" checkpoint.preemption_notice=auto >"$TMP/none.log" 2>&1
check "no cloud: the job completes" [ $? -eq 0 ]
check "no cloud: no budget line" bash -c "! grep -q 'preemption budget' '$TMP/none.log'"
"$DDPRUN" -np 2 "$SMALL" run.dir="$TMP/off" "${RUN[@]}" >"$TMP/off.log" 2>&1
check "preemption_notice off: the job completes" [ $? -eq 0 ]
check "preemption_notice off: no budget line" bash -c "! grep -q 'preemption budget' '$TMP/off.log'"
finish
