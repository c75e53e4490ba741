#!/usr/bin/env bash
# The files a run writes, when they cannot be written: a checkpoint.dir that cannot be created or
# written is refused before the first step (not found at the second save); a save that fails is
# never reported "written"; a run.dir on a full disk ends the job (exit 1) naming metrics.jsonl
# and the system's reason, with no line of it cut short. The full-disk cases use small tmpfs
# mounts where this process may mount (the job runs as root here, so permissions alone cannot
# make a directory unwritable); a metrics.jsonl that is a link to /dev/full (every write: ENOSPC)
# covers the metrics case everywhere. A background save that fails is a warning once, and ends the
# job when the next fails too (a directory standing where a checkpoint's file goes); the last
# step's, which no later save makes good, is written once more (DDP_TEST_FAULT fail-write), and an
# earlier step's found failed at the job's end is the same warning.
# checkpoint.final false leaves out the end-of-run save only. A prune that fails after a save
# (DDP_TEST_FAULT prune-fail) is a warning: the job goes on. The progress line's rates leave an
# evaluation's time out (DDP_TEST_FAULT slow-eval).
source "$(dirname "$0")/../../lib.sh"
RUN=(train.max_steps=20 train.log_every=1 checkpoint.every_steps=5)
np1() { "$DDPRUN" -np 1 "$SMALL" "$@"; }
mounts=()
trap 'for m in "${mounts[@]}"; do umount "$m" 2>/dev/null; done; rm -rf "$TMP"' EXIT

# small_fs DIR SIZE [ro]: a tmpfs at DIR; false where mounting is not allowed
small_fs() {
    mkdir -p "$1"
    mount -t tmpfs -o "size=$2${3:+,$3}" tmpfs "$1" 2>/dev/null || return 1
    mounts+=("$1")
}

# refused_at_start TAG DIR: the job with checkpoint.dir=DIR stops before its first step
refused_at_start() {
    local tag=$1 dir=$2
    np1 run.dir="$TMP/$tag" "${RUN[@]}" checkpoint.dir="$dir" >"$TMP/$tag.log" 2>&1
    local rc=$?
    check "$tag: the job fails (exit 1, got $rc)" [ $rc -eq 1 ]
    check "$tag: naming checkpoint.dir and why" grep -q "checkpoint.dir $dir: .*$3" "$TMP/$tag.log"
    check "$tag: before the first step" bash -c "! grep -q 'step 1/' '$TMP/$tag.log'"
    check "$tag: no save is said to be written" bash -c "! grep -q 'written' '$TMP/$tag.log'"
}

touch "$TMP/a-file"
refused_at_start uncreatable "$TMP/a-file/ckpts" "Not a directory"
if small_fs "$TMP/ro" 1m ro; then
    refused_at_start read-only "$TMP/ro" "Read-only file system"
else
    echo "note: read-only checkpoint.dir case skipped (cannot mount a tmpfs here)"
fi

# a background save that fails once (a directory stands where step 5's file goes) is a warning:
# the job goes on and the next save writes anew, a stop's included; a second failure in a row
# ends the job naming both, and so does a failed save of the job's last step (a stop's)
blocked() { # TAG STEP...: a run.dir whose checkpoints directory has those steps' names taken
    local tag=$1; shift
    for s in "$@"; do mkdir -p "$TMP/$tag/checkpoints/$(printf 'ckpt-%08d.ddp' "$s")/taken"; done
}
blocked once 5
np1 run.dir="$TMP/once" "${RUN[@]}" >"$TMP/once.log" 2>&1
rc=$?
check "one failed save: the job runs to its end (exit 0, got $rc)" [ $rc -eq 0 ]
check "one failed save: a warning names step 5 and why" \
    grep -q "warning: checkpoint of step 5 failed: .*ckpt-00000005.ddp.*; training goes on" "$TMP/once.log"
check "one failed save: the later saves are written" [ -f "$TMP/once/checkpoints/ckpt-00000020.ddp" ]
blocked stop 5
DDP_TEST_FAULT=stop:0:7 np1 run.dir="$TMP/stop" "${RUN[@]}" >"$TMP/stop.log" 2>&1
rc=$?
check "one failed save, then a stop: the stop's save is written (exit 75, got $rc)" \
    [ $rc -eq 75 -a -f "$TMP/stop/checkpoints/ckpt-00000007.ddp" ]
blocked stopsave 7
DDP_TEST_FAULT=stop:0:7 np1 run.dir="$TMP/stopsave" "${RUN[@]}" >"$TMP/stopsave.log" 2>&1
rc=$?
check "a stop whose own save fails: the job fails (exit 1, not 75: got $rc)" [ $rc -eq 1 ]
check "a stop whose own save fails: nothing says the checkpoint was saved" \
    bash -c "! grep -q 'checkpoint saved' '$TMP/stopsave.log'"
blocked twice 5 10
np1 run.dir="$TMP/twice" "${RUN[@]}" >"$TMP/twice.log" 2>&1
rc=$?
check "two failed saves in a row: the job fails (exit 1, got $rc)" [ $rc -eq 1 ]
check "two failed saves in a row: naming the second" \
    grep -q "checkpoint of step 10 failed, as the save before it did" "$TMP/twice.log"
check "two failed saves in a row: no step after the second is saved" \
    [ ! -e "$TMP/twice/checkpoints/ckpt-00000015.ddp" ]

# a disk that stays full: the second failed save ends the job naming it, and nothing says "written"
if small_fs "$TMP/tiny" 64k; then
    np1 run.dir="$TMP/full-ckpt" "${RUN[@]}" checkpoint.dir="$TMP/tiny" >"$TMP/full-ckpt.log" 2>&1
    rc=$?
    check "full checkpoint.dir: the job fails (exit 1, got $rc)" [ $rc -eq 1 ]
    check "full checkpoint.dir: naming the file and ENOSPC" \
        grep -q "checkpoint $TMP/tiny/.ckpt-00000005.ddp.tmp.*No space left on device" "$TMP/full-ckpt.log"
    check "full checkpoint.dir: no save is said to be written" bash -c "! grep -q 'written' '$TMP/full-ckpt.log'"
    check "full checkpoint.dir: no temporary left" [ -z "$(ls -A "$TMP/tiny")" ]
else
    echo "note: full checkpoint.dir case skipped (cannot mount a tmpfs here)"
fi

# run.dir on a full disk: the resolved config fits, metrics.jsonl does not for long
# (tmpfs counts 4 KiB pages: 12 of them, 9 taken by a filler and 1 by the run.dir lock; 60 lines of
# metrics need 3)
metrics_full() { # TAG RUNDIR
    local tag=$1 dir=$2
    np1 run.dir="$dir" "${RUN[@]}" train.max_steps=60 checkpoint.dir="$TMP/$tag-ckpts" >"$TMP/$tag.log" 2>&1
    local rc=$?
    check "$tag: the job fails (exit 1, got $rc)" [ $rc -eq 1 ]
    check "$tag: naming metrics.jsonl and ENOSPC" \
        grep -q "$dir/metrics.jsonl: write failed: No space left on device" "$TMP/$tag.log"
    check "$tag: no step after the failed write is trained" bash -c "! grep -q 'step 60/' '$TMP/$tag.log'"
}
if small_fs "$TMP/full-run" 48k; then
    head -c $((9 * 4096)) /dev/zero >"$TMP/full-run/filler"
    metrics_full full-run "$TMP/full-run"
    check "full run.dir: the resolved config was written whole" \
        grep -q "^checkpoint:" "$TMP/full-run/config.resolved.yaml"
    check "full run.dir: some metrics lines were written" [ -s "$TMP/full-run/metrics.jsonl" ]
    check "full run.dir: every metrics line is whole JSON" python3 -c "
import json, sys
data = open(sys.argv[1]).read()
assert data.endswith('\n'), 'cut mid-line'
[json.loads(l) for l in data.splitlines()]" "$TMP/full-run/metrics.jsonl"
else
    echo "note: full run.dir case skipped (cannot mount a tmpfs here)"
fi
mkdir -p "$TMP/dev-full"
ln -s /dev/full "$TMP/dev-full/metrics.jsonl"
metrics_full dev-full "$TMP/dev-full"
# the same at np 2 with an upload still running when rank 0 fails (the first metrics line, step
# 5's, after step 4's save): its message comes first, and the upload is ended rather than waited
# for (rank 1's deadline ended the job meanwhile, naming rank 0 as not arrived, and the message
# was lost)
mkdir -p "$TMP/dev-full-np2"
ln -s /dev/full "$TMP/dev-full-np2/metrics.jsonl"
# (a deadline of 20 s: rank 0's exit waits for step 4's write first, slow on a loaded machine)
timeout 180 "$DDPRUN" -np 2 "$SMALL" run.dir="$TMP/dev-full-np2" "${RUN[@]}" train.log_every=5 checkpoint.every_steps=2 \
    checkpoint.dir="$TMP/dev-full-np2-ckpts" ddp.timeout_s=20 'checkpoint.upload_cmd="sleep 120 # {path}"' \
    >"$TMP/dev-full-np2.log" 2>&1
rc=$?
check "full run.dir at np 2, an upload running: the job fails (exit 1, got $rc)" [ $rc -eq 1 ]
check "... rank 0 names metrics.jsonl and ENOSPC" \
    grep -q "rank 0.*metrics.jsonl: write failed: No space left on device" "$TMP/dev-full-np2.log"
check "... and the upload is ended, so rank 0's exit ends the job, not rank 1's deadline" \
    bash -c "! grep -q 'collective deadline\|ddp.timeout_s:' '$TMP/dev-full-np2.log'"
# checkpoint.final: a 7-step job saving every 5 steps also saves step 7 when it ends (true, the
# default), or keeps step 5's only (false)
for final in true false; do
    np1 run.dir="$TMP/final-$final" "${RUN[@]}" train.max_steps=7 checkpoint.final=$final >"$TMP/final-$final.log" 2>&1
    check "checkpoint.final $final: the job runs" [ $? -eq 0 ]
done
check "checkpoint.final true: step 5's and step 7's checkpoints" \
    [ -e "$TMP/final-true/checkpoints/ckpt-00000005.ddp" -a -e "$TMP/final-true/checkpoints/ckpt-00000007.ddp" ]
check "checkpoint.final false: step 5's and no step 7's" \
    [ -e "$TMP/final-false/checkpoints/ckpt-00000005.ddp" -a ! -e "$TMP/final-false/checkpoints/ckpt-00000007.ddp" ]
# a prune that fails after step 5's save (DDP_TEST_FAULT prune-fail) is a warning, not the save's
# error: the job runs to its end and the later saves prune (keep_last 1 leaves step 20's alone)
DDP_TEST_FAULT=prune-fail:0:5 np1 run.dir="$TMP/prune" "${RUN[@]}" checkpoint.keep_last=1 >"$TMP/prune.log" 2>&1
rc=$?
check "prune-fail: the job runs to its end (exit 0, got $rc)" [ $rc -eq 0 ]
check "prune-fail: a warning names step 5's checkpoint" \
    grep -q "ckpt-00000005.ddp is written, but older ones were not pruned" "$TMP/prune.log"
check "prune-fail: the later saves pruned step 5's" \
    [ "$(ls "$TMP/prune/checkpoints")" = "ckpt-00000020.ddp" ]

# the final save's write fails once (DDP_TEST_FAULT fail-write): no later save would make it good,
# so it is written once more, and the job ends done with it whole
DDP_TEST_FAULT=fail-write:0:7 np1 run.dir="$TMP/again" train.max_steps=7 >"$TMP/again.log" 2>&1
check "fail-write at the last step: the job ends 0 (got $?)" [ $? -eq 0 ]
check "... saying it writes it once more" grep -q "checkpoint of step 7, the job's last step, was not written (DDP_TEST_FAULT fail-write.*); writing it once more" "$TMP/again.log"
check "... and step 7's checkpoint is whole" "$DDPRUN" ckpt info "$TMP/again/checkpoints/ckpt-00000007.ddp"
# an earlier save's write fails once, 3 s after it began: with checkpoint.final false the job's end
# finds it, not a poll, and judges it as a poll would (a first failure: a warning), not by timing
DDP_TEST_FAULT=fail-write:0:5:3 np1 run.dir="$TMP/late" train.max_steps=7 checkpoint.every_steps=5 \
    checkpoint.final=false >"$TMP/late.log" 2>&1
check "fail-write of step 5 found at the end: the job ends 0 (got $?)" [ $? -eq 0 ]
check "... warning that the last step is not saved" grep -q "checkpoint of step 5 failed: DDP_TEST_FAULT \
fail-write.*; the job's last step is not saved (checkpoint.final: false): its newest checkpoint is the one before" \
    "$TMP/late.log"
check "... and no checkpoint is said to be written" bash -c "! grep -q 'written in' '$TMP/late.log'"

# metrics.jsonl's rates leave evaluations out: each pass of step 5's evaluation sleeps 0.01 s
# (DDP_TEST_FAULT slow-eval), and the line at step 5, which follows it, shows a step far below
# the 5 steps' share of that sleep (a step of this MLP takes a few ms)
DDP_TEST_FAULT=slow-eval:0:5:0.01 np1 run.dir="$TMP/evalrate" train.max_steps=5 train.log_every=5 \
    train.eval=true train.eval_every=5 >"$TMP/evalrate.log" 2>&1
check "slow-eval: the job ends (exit $?)" [ $? -eq 0 ]
check "slow-eval: step 5's ms_per_step is below half the evaluation's sleep per step" python3 - "$TMP/evalrate" <<'PY'
import json, math, sys
lines = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl")]
train = [l for l in lines if l.get("kind") == "train" and l["step"] == 5]
ev = [l for l in lines if l.get("kind") == "eval" and l["step"] == 5]
passes = math.ceil(ev[0]["samples"] / 64)  # ddp_small.yaml's data.batch_size
slept_per_step_ms = passes * 10.0 / 5
print(f"ms_per_step {train[0]['ms_per_step']:.2f}, the sleep's share {slept_per_step_ms:.0f}")
sys.exit(0 if train[0]["ms_per_step"] < slept_per_step_ms / 2 else 1)
PY
finish
