#!/usr/bin/env bash
# Checkpoints off the instance's disk: checkpoint.dir elsewhere, checkpoint.upload_cmd after each
# save (in the background, never blocking training; a sharded set whole, then downloaded; a
# failing, a slow and a hanging command, and one whose rank is killed by SIGKILL; none inherits the
# rank's open files), and
# checkpoint.download_cmd fetching the newest checkpoint when a fresh machine resumes (a stop
# request ends it at once), or when
# what an interrupted download left is no valid checkpoint, or its marker says it did not finish (under
# run.dir's lock: a second job into the same new run.dir is refused before downloading; its time
# is not training time for checkpoint.every_minutes); placeholder
# values with shell syntax in them, inside double, single or no quotes. Local commands stand in for
# `aws s3 cp`.
source "$(dirname "$0")/../../lib.sh"
RUN=(train.max_steps=40 checkpoint.every_steps=10 checkpoint.keep_last=1 checkpoint.resume=auto)
np2() { "$DDPRUN" -np 2 "$SMALL" "$@"; }
remote=$TMP/remote
mkdir -p "$remote"

# checkpoint.dir outside run.dir, every save uploaded (a space in the path: {path} is quoted)
np2 run.dir="$TMP/up" "${RUN[@]}" checkpoint.dir="$TMP/disk two/ckpts" \
    checkpoint.upload_cmd="cp {path} $remote/ && echo uploaded {name} step {step}" >"$TMP/up.log" 2>&1
check "upload run completes" [ $? -eq 0 ]
check "checkpoints go to checkpoint.dir" [ -f "$TMP/disk two/ckpts/ckpt-00000040.ddp" ]
check "nothing in run.dir/checkpoints" [ ! -e "$TMP/up/checkpoints" ]
check "keep_last 1 holds locally after the uploads" [ "$(ls "$TMP/disk two/ckpts" | grep -c '^ckpt-')" -eq 1 ]
# an upload still running when two more saves came makes the older of those a skipped one
uploaded=$(ls "$remote" | grep -c '^ckpt-')
skipped=$(grep -c 'upload of ckpt-.* skipped' "$TMP/up.log")
check "every save (10, 20, 30, 40) was uploaded ($uploaded) or reported skipped ($skipped)" \
    [ $((uploaded + skipped)) -eq 4 ]
check "the last save was uploaded, bit for bit" cmp "$remote/ckpt-00000040.ddp" "$TMP/disk two/ckpts/ckpt-00000040.ddp"
# the command inherits none of the files the rank keeps open (metrics.jsonl, the event file)
np2 run.dir="$TMP/fds" "${RUN[@]}" train.max_steps=10 run.tensorboard=true \
    checkpoint.upload_cmd="ls -l /proc/self/fd/ >$TMP/fds.txt" >"$TMP/fds.log" 2>&1
check "an upload's open files: none of the rank's (exit $?)" bash -c \
    "[ $? -eq 0 ] && grep -q ' 2 -> ' '$TMP/fds.txt' && ! grep -qE 'metrics.jsonl|tfevents' '$TMP/fds.txt'"
check "each upload is reported" [ "$(grep -c 'uploaded in' "$TMP/up.log")" -eq "$uploaded" ]
check "command output goes to run.dir/checkpoint-commands.log" \
    grep -q "uploaded ckpt-00000040.ddp step 40" "$TMP/up/checkpoint-commands.log"

# a slow upload: training goes on, only the newest waiting checkpoint is uploaded next, the job
# waits for the last one at the end, and nothing an upload reads is pruned under it
mkdir -p "$TMP/slow-remote"
np2 run.dir="$TMP/slow" "${RUN[@]}" checkpoint.every_steps=5 \
    checkpoint.upload_cmd="sleep 2; cp {path} $TMP/slow-remote/" >"$TMP/slow.log" 2>&1
check "slow upload: job completes" [ $? -eq 0 ]
check "slow upload: training finished while an upload still ran" grep -q "waiting for the upload of" "$TMP/slow.log"
check "slow upload: older waiting checkpoints were skipped" grep -q "upload of ckpt-.* skipped" "$TMP/slow.log"
check "slow upload: no upload failed (none lost its file to pruning)" bash -c "! grep -q 'failed' '$TMP/slow.log'"
check "slow upload: the final checkpoint was uploaded" cmp "$TMP/slow-remote/ckpt-00000040.ddp" \
    "$TMP/slow/checkpoints/ckpt-00000040.ddp"
check "slow upload: what uploads held was pruned at the end" \
    [ "$(ls "$TMP/slow/checkpoints" | grep -c '^ckpt-')" -eq 1 ]

# a sharded set is uploaded whole once committed, a slow upload holding the set it reads from the
# prune; a fresh machine downloads it and resumes as the machine that wrote it does
mkdir -p "$TMP/set-remote"
np2 run.dir="$TMP/sets" "${RUN[@]}" checkpoint.every_steps=5 checkpoint.sharded=true \
    checkpoint.upload_cmd="sleep 2; cp -r {path} $TMP/set-remote/" >"$TMP/sets.log" 2>&1
check "sharded upload: job completes" [ $? -eq 0 ]
check "sharded upload: newer sets came while an upload ran" grep -q "upload of ckpt-.* skipped" "$TMP/sets.log"
check "sharded upload: no upload failed (none lost its set to pruning)" bash -c "! grep -q 'failed' '$TMP/sets.log'"
check "sharded upload: the last set was uploaded whole" \
    diff -r "$TMP/set-remote/ckpt-00000040" "$TMP/sets/checkpoints/ckpt-00000040"
check "sharded upload: what uploads held was pruned at the end" \
    [ "$(ls "$TMP/sets/checkpoints" | grep -c '^ckpt-')" -eq 1 ]
np2 run.dir="$TMP/sets" "${RUN[@]}" train.max_steps=50 checkpoint.sharded=true >"$TMP/sets-ref.log" 2>&1
check "sharded: the uploading machine resumes to step 50 (exit $?)" [ -d "$TMP/sets/checkpoints/ckpt-00000050" ]
np2 run.dir="$TMP/sets-fresh" "${RUN[@]}" train.max_steps=50 checkpoint.sharded=true \
    checkpoint.download_cmd="cp -r $TMP/set-remote/ckpt-00000040 {dir}/" >"$TMP/sets-fresh.log" 2>&1
check "sharded download: resumed from the downloaded set (exit $?)" \
    grep -q "resumed from .*/ckpt-00000040: step 40" "$TMP/sets-fresh.log"
check "sharded download: result bit-identical to the uninterrupted run" \
    "$DDPRUN" ckpt diff "$TMP/sets/checkpoints/ckpt-00000050" "$TMP/sets-fresh/checkpoints/ckpt-00000050"

# a failing upload is reported, not fatal
printf '#!/bin/sh\necho "denied: no credentials" >&2\nexit 3\n' >"$TMP/no-credentials"
chmod +x "$TMP/no-credentials"
np2 run.dir="$TMP/fail" "${RUN[@]}" checkpoint.upload_cmd="$TMP/no-credentials {path}" >"$TMP/fail.log" 2>&1
check "failing upload: job still completes" [ $? -eq 0 ]
check "failing upload: reported with its status and last line" \
    grep -q "upload of ckpt-00000040.ddp failed: .* exited with status 3: denied: no credentials" "$TMP/fail.log"
check "failing upload: the checkpoint stays" [ -f "$TMP/fail/checkpoints/ckpt-00000040.ddp" ]

# a job that resumed past a damaged newest checkpoint and failed before saving one of its own
# prunes nothing at its end: the older checkpoint it resumed from is the only good one left
np2 run.dir="$TMP/damaged" train.max_steps=20 checkpoint.every_steps=10 checkpoint.keep_last=3 >/dev/null 2>&1
check "damaged newest: first run completes" [ $? -eq 0 ]
python3 -c "import sys; f = open(sys.argv[1], 'r+b'); f.seek(-100, 2); b = f.read(1); f.seek(-100, 2); \
f.write(bytes([b[0] ^ 0xFF]))" "$TMP/damaged/checkpoints/ckpt-00000020.ddp"
DDP_TEST_FAULT=nan:0:13 np2 run.dir="$TMP/damaged" train.max_steps=40 checkpoint.every_steps=10 \
    checkpoint.keep_last=1 checkpoint.resume=auto checkpoint.upload_cmd=true >"$TMP/damaged.log" 2>&1
rc=$?
check "damaged newest: the resumed job fails on its non-finite loss (exit 65, got $rc)" [ $rc -eq 65 ]
check "damaged newest: it resumed from step 10" grep -q "resum.*ckpt-00000010" "$TMP/damaged.log"
check "damaged newest: the checkpoint it resumed from is still there" \
    [ -f "$TMP/damaged/checkpoints/ckpt-00000010.ddp" ]

# a hanging upload is ended at checkpoint.command_timeout_s
t0=$(date +%s)
np2 run.dir="$TMP/hang" "${RUN[@]}" checkpoint.every_steps=40 checkpoint.command_timeout_s=1 \
    checkpoint.upload_cmd="sleep 60" >"$TMP/hang.log" 2>&1
rc=$?
t1=$(date +%s)
check "hanging upload: job completes (rc $rc)" [ $rc -eq 0 ]
check "hanging upload: ended after 1 s and reported" grep -q "did not finish within 1 s" "$TMP/hang.log"
check "hanging upload: the job did not wait for it (took $((t1 - t0)) s)" [ $((t1 - t0)) -lt 30 ]

# a rank killed by SIGKILL while its upload runs takes the whole upload with it (before, the upload
# ran on, orphaned, possibly beside a restarted job's): the command tells its rank's pid ($PPID)
np2 run.dir="$TMP/orphan" "${RUN[@]}" checkpoint.command_timeout_s=100 \
    checkpoint.upload_cmd="echo \$PPID >$TMP/orphan-rank; sleep 120 & echo \$! >>$TMP/orphan-pids; wait" \
    >"$TMP/orphan.log" 2>&1 &
job=$!
for _ in $(seq 600); do [ -s "$TMP/orphan-pids" ] && break; sleep 0.1; done
upload_pids=$(cat "$TMP/orphan-pids" 2>/dev/null)
check "killed uploader: the upload started" [ -n "$upload_pids" ]
kill -KILL "$(cat "$TMP/orphan-rank")"
wait $job
rc=$?
check "killed uploader: the job fails (exit $rc)" [ $rc -ne 0 ]
alive_pids() { for p in $upload_pids; do s=$(ps -o stat= -p "$p"); [ -n "$s" ] && [ "${s#Z}" = "$s" ] && echo "$p"; done; }
for _ in $(seq 100); do [ -z "$(alive_pids)" ] && break; sleep 0.1; done
left=$(alive_pids)
check "killed uploader: nothing of its upload runs on (left: ${left:-none})" [ -z "$left" ]
[ -z "$left" ] || kill -KILL $left

# a fresh machine: no checkpoint locally, download_cmd brings the newest one; the run equals the
# one resumed from the local checkpoint on the machine that wrote it
np2 run.dir="$TMP/up" "${RUN[@]}" train.max_steps=60 checkpoint.dir="$TMP/disk two/ckpts" >"$TMP/ref.log" 2>&1
check "the uploading machine resumes to step 60 from its own checkpoint" [ $? -eq 0 ]
np2 run.dir="$TMP/fresh" "${RUN[@]}" train.max_steps=60 \
    checkpoint.download_cmd="cp $remote/ckpt-00000040.ddp {dir}/" >"$TMP/fresh.log" 2>&1
check "download: job completes" [ $? -eq 0 ]
check "download: resumed from the downloaded checkpoint" grep -q "resumed from .*ckpt-00000040.ddp" "$TMP/fresh.log"
check "download: result bit-identical to the uninterrupted run" \
    "$DDPRUN" ckpt diff "$TMP/disk two/ckpts/ckpt-00000060.ddp" "$TMP/fresh/checkpoints/ckpt-00000060.ddp"
np2 run.dir="$TMP/fresh" "${RUN[@]}" train.max_steps=70 checkpoint.download_cmd="exit 9" >"$TMP/local.log" 2>&1
check "download_cmd is not run when checkpoint.dir has a checkpoint" [ $? -eq 0 ]
# an interrupted download (the machine taken mid-copy) left the checkpoint cut short: none valid, so
# the next attempt downloads again and resumes from it whole
mkdir -p "$TMP/cut/checkpoints" && head -c 3000 "$remote/ckpt-00000040.ddp" >"$TMP/cut/checkpoints/ckpt-00000040.ddp"
np2 run.dir="$TMP/cut" "${RUN[@]}" checkpoint.download_cmd="cp $remote/ckpt-00000040.ddp {dir}/" >"$TMP/cut.log" 2>&1
check "a download cut short: downloaded again, resumed, completes (exit $?)" \
    bash -c "[ $? -eq 0 ] && grep -q 'resumed from .*ckpt-00000040.ddp' '$TMP/cut.log'"
check "... saying why it downloaded" grep -q "none valid.*running checkpoint.download_cmd" "$TMP/cut.log"
# a download past its time limit after an older checkpoint came, the newest not yet (as `aws s3
# sync` leaves it): its marker stays, so the next attempt fetches again instead of resuming the older
DDP_TEST_FAULT=stop:0:20 np2 run.dir="$TMP/older" "${RUN[@]}" >/dev/null 2>&1
mkdir -p "$TMP/partial/checkpoints"
np2 run.dir="$TMP/partial" "${RUN[@]}" checkpoint.command_timeout_s=1 \
    checkpoint.download_cmd="cp $TMP/older/checkpoints/ckpt-00000020.ddp {dir}/ && sleep 30 && cp $remote/ckpt-00000040.ddp {dir}/" \
    >"$TMP/partial.a.log" 2>&1
check "a download past its time limit: the job fails (exit $?), the older checkpoint and the marker left" \
    bash -c "[ $? -ne 0 ] && [ -f '$TMP/partial/checkpoints/ckpt-00000020.ddp' ] &&
             [ -e '$TMP/partial/checkpoints/.download-unfinished' ]"
check "... with a warning that what the folder holds waits for a download" \
    grep -q "download-unfinished stays: what the folder holds (the newest ckpt-00000020.ddp)" "$TMP/partial.a.log"
np2 run.dir="$TMP/partial" "${RUN[@]}" checkpoint.download_cmd="cp $remote/ckpt-00000040.ddp {dir}/" \
    >"$TMP/partial.b.log" 2>&1
check "... the next attempt fetches again and resumes the newest (exit $?)" \
    bash -c "[ $? -eq 0 ] && grep -q 'did not finish (.download-unfinished); fetching again' '$TMP/partial.b.log' &&
             grep -q 'resumed from .*ckpt-00000040.ddp' '$TMP/partial.b.log'"
check "... and the marker is gone" [ ! -e "$TMP/partial/checkpoints/.download-unfinished" ]
# a marker a later run finds without downloading (no download_cmd now) goes with its first save
touch "$TMP/partial/checkpoints/.download-unfinished"
np2 run.dir="$TMP/partial" "${RUN[@]}" train.max_steps=50 >"$TMP/partial.c.log" 2>&1
check "a run that saves without downloading removes an old download's marker (exit $?)" \
    bash -c "[ $? -eq 0 ] && grep -q 'resumed from .*ckpt-00000040.ddp' '$TMP/partial.c.log' &&
             [ ! -e '$TMP/partial/checkpoints/.download-unfinished' ]"
# a stop request (Ctrl-C, SIGTERM, a notice) during a download ends it at once: the job exits 75
# naming the stop, the marker stays for the next start, and nothing of the command runs on (it
# waited up to checkpoint.command_timeout_s, here the command's 60 s, before)
"$DDPRUN" -np 2 "$SMALL" run.dir="$TMP/dlstop" "${RUN[@]}" checkpoint.download_cmd="sleep 60; echo late >{dir}/late" \
    >"$TMP/dlstop.log" 2>&1 &
pid=$!
for _ in $(seq 600); do grep -q "download" "$TMP/dlstop/checkpoint-commands.log" 2>/dev/null && break; sleep 0.05; done
t0=$(date +%s)
kill -TERM $pid
wait $pid
rc=$?
took=$(($(date +%s) - t0))
check "a download stopped: exit 75 (got $rc) within 30 s of the stop, not the command's 60 s (took $took s)" \
    bash -c "[ $rc -eq 75 ] && [ $took -lt 30 ]"
check "... said, with the marker kept" grep -q "download_cmd was stopped.*download-unfinished stays" "$TMP/dlstop.log"
check "... the marker is there" [ -e "$TMP/dlstop/checkpoints/.download-unfinished" ]
check "... the rank's last line says nothing was saved" grep -q "stopped while resuming, before any step" "$TMP/dlstop.log"
sleep 1
check "... nothing of the command ran on" [ ! -e "$TMP/dlstop/checkpoints/late" ]

# a failed download stops the job before training: starting from step 0 would silently lose the run
printf '#!/bin/sh\necho "bucket not found" >&2\nexit 4\n' >"$TMP/no-bucket"
chmod +x "$TMP/no-bucket"
np2 run.dir="$TMP/dlfail" "${RUN[@]}" checkpoint.download_cmd="$TMP/no-bucket {dir}" >"$TMP/dlfail.log" 2>&1
rc=$?
check "failed download: job fails (rc $rc)" [ $rc -ne 0 ]
check "failed download: says which command and why" \
    grep -q "checkpoint.download_cmd: .*exited with status 4: bucket not found" "$TMP/dlfail.log"
check "failed download: no training happened" [ ! -e "$TMP/dlfail/checkpoints/ckpt-00000010.ddp" ]
# two jobs started into one new run.dir: the first one's download holds run.dir's lock, so the
# second is refused before downloading (it used to download too, and take the lock from the first)
np2 run.dir="$TMP/dltwo" "${RUN[@]}" \
    checkpoint.download_cmd="touch $TMP/dl-a; for i in \$(seq 600); do [ -e $TMP/dl-go ] && break; sleep 0.1; done; cp $remote/ckpt-00000040.ddp {dir}/" \
    >"$TMP/dl-a.log" 2>&1 &
a=$!
for _ in $(seq 600); do [ -e "$TMP/dl-a" ] && break; sleep 0.1; done
np2 run.dir="$TMP/dltwo" "${RUN[@]}" checkpoint.download_cmd="touch $TMP/dl-b" >"$TMP/dl-b.log" 2>&1
rc=$?
check "a second job into a new run.dir whose first job is downloading: refused with exit 2 (got $rc)" [ $rc -eq 2 ]
check "... naming the lock" grep -q "run.dir: $TMP/dltwo is in use by another job" "$TMP/dl-b.log"
check "... before its own download ran" [ ! -e "$TMP/dl-b" ]
touch "$TMP/dl-go" # the first job's download ends only now
wait $a
rc=$?
check "... and the first job resumes from its download and completes (exit $rc)" \
    bash -c "[ $rc -eq 0 ] && grep -q 'resumed from .*ckpt-00000040.ddp' '$TMP/dl-a.log'"
# a resume from a path (no download can run) that is refused leaves a new run.dir uncreated
np2 run.dir="$TMP/dlpath" "${RUN[@]}" checkpoint.resume="$TMP/no-such.ddp" checkpoint.download_cmd="true" \
    >"$TMP/dlpath.log" 2>&1
rc=$?
check "download_cmd set, a refused resume from a path: exit 2 (got $rc), run.dir not created" \
    bash -c "[ $rc -eq 2 ] && [ ! -e '$TMP/dlpath' ]"
np2 run.dir="$TMP/dlnone" "${RUN[@]}" checkpoint.download_cmd="true" >"$TMP/dlnone.log" 2>&1
check "download with nothing to fetch: starts fresh" [ $? -eq 0 ]
check "download with nothing to fetch: said so" grep -q "brought no checkpoint" "$TMP/dlnone.log"

# a placeholder's value reaches the command as one word, unchanged, whatever quotes the user put
# around it: a directory named like a command substitution runs nothing, and '{path}' works
mkdir -p "$TMP/cwd" "$TMP/q-remote"
for quoted in '"{path}"' "'{path}'" '{path}'; do
    tag=$(echo "$quoted" | tr -d '{}' | tr "\"'" 'dq')
    rm -rf "$TMP/q-remote/"* "$TMP/cwd/"*
    (cd "$TMP/cwd" && np2 run.dir="$TMP/q-$tag" train.max_steps=5 checkpoint.keep_last=1 \
        checkpoint.dir="$TMP/q-$tag/ck \$(touch pwned) \`touch pwned2\`" \
        checkpoint.upload_cmd="cp $quoted $TMP/q-remote/ && echo got $quoted") >"$TMP/q-$tag.log" 2>&1
    check "upload_cmd with $quoted: job completes" [ $? -eq 0 ]
    check "upload_cmd with $quoted: uploaded" [ -f "$TMP/q-remote/ckpt-00000005.ddp" ]
    check "upload_cmd with $quoted: no upload failed" bash -c "! grep -q 'upload of .* failed' '$TMP/q-$tag.log'"
    check "upload_cmd with $quoted: the name's command substitutions did not run" \
        bash -c "[ -z \"\$(ls -A '$TMP/cwd')\" ]"
    check "upload_cmd with $quoted: the command saw the path as it is" \
        grep -qF "got $TMP/q-$tag/ck \$(touch pwned) \`touch pwned2\`/ckpt-00000005.ddp" \
        "$TMP/q-$tag/checkpoint-commands.log"
done

# checkpoint.every_minutes counts minutes of training: a 4 s download_cmd (bringing nothing) before
# the first step does not make the first step's save due on a 0.05-minute (3 s) clock
np2 run.dir="$TMP/clock" train.max_steps=10 checkpoint.resume=auto checkpoint.every_minutes=0.05 \
    checkpoint.download_cmd="sleep 4" >"$TMP/clock.log" 2>&1
check "every_minutes after a slow download: the job completes (exit $?)" [ $? -eq 0 ]
check "... and saved no checkpoint at step 1" [ ! -e "$TMP/clock/checkpoints/ckpt-00000001.ddp" ]

# a placeholder typo is a config error naming where it is
np2 run.dir="$TMP/typo" checkpoint.upload_cmd="cp {paht} /x" >"$TMP/typo.log" 2>&1
check "unknown placeholder: exit 2" [ $? -eq 2 ]
check "unknown placeholder: names the override, the key and the placeholder" \
    grep -q "<override 2>:1:.*checkpoint.upload_cmd.*{paht}" "$TMP/typo.log"
finish
