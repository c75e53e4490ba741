#!/usr/bin/env bash
# Checkpoints that survive preemption, end to end under real mpirun:
# bit-exact resume after a stop at a non-checkpoint step (np=1, np=2, stop seen by one rank
# only; and inside a warmup-stable-decay schedule's decay, whose logged lr is checked against its
# definition), resume from the previous checkpoint when the newest is corrupt or truncated,
# a world-size change that uses every sample of the interrupted epoch exactly once, a
# checkpoint of another model refused naming both models, one saved with other settings refused
# naming each setting that differs, one of the previous format version refused saying why, and a
# start from an older checkpoint, or fresh, into a checkpoint.dir with later ones refused; a stop
# at the last step evaluated on the resume; a warm-up checked against the resumed run's horizon;
# a wsd decay of one step refused; temporaries of a killed write removed at the resume; a
# checkpoint.dir not shared, with rank 0 on a host without the newest checkpoint, refused (one of
# other settings there left alone).
source "$(dirname "$0")/../../lib.sh"
COMMON=(optimizer.kind=adamw optimizer.nesterov=false optimizer.lr=2e-3 train.max_steps=40 checkpoint.every_steps=15)

for np in 1 2; do
    ref=$TMP/ref$np run=$TMP/run$np
    worker $np "$ref" "${COMMON[@]}" >"$ref.log" 2>&1
    check "np=$np: uninterrupted 40-step run" [ $? -eq 0 ]
    DDP_TEST_FAULT=stop:$((np - 1)):22 worker $np "$run" "${COMMON[@]}" >"$run.log" 2>&1
    rc=$?
    check "np=$np: stop requested on rank $((np - 1)) only -> all ranks exit 75 (got $rc)" [ $rc -eq 75 ]
    check "np=$np: checkpoint saved at step 22 (not a checkpoint step)" [ -f "$run/checkpoints/ckpt-00000022.ddp" ]
    check "np=$np: no step past 22 was taken" [ "$(basename "$(last_ckpt "$run")")" = ckpt-00000022.ddp ]
    worker $np "$run" "${COMMON[@]}" checkpoint.resume=auto >"$run.resume.log" 2>&1
    check "np=$np: resumed run completes" [ $? -eq 0 ]
    grep -q "resumed from .*ckpt-00000022.ddp" "$run.resume.log"
    check "np=$np: resume log names the checkpoint" [ $? -eq 0 ]
    check "np=$np: resumed result is bit-identical to the uninterrupted run (ckpt diff)" \
        "$DDPRUN" ckpt diff "$ref/checkpoints/ckpt-00000040.ddp" "$run/checkpoints/ckpt-00000040.ddp"
done

# warmup-stable-decay: the logged lr is the peak through the stable part and then the straight
# line to min_lr its definition gives (5 warm-up steps, a quarter of the 35 after them decaying:
# from step index 31.25 on), and a job stopped inside the decay resumes bit-identically.
WSD=(train.max_steps=40 train.log_every=1 optimizer.schedule.kind=wsd optimizer.schedule.decay_fraction=0.25
     optimizer.schedule.min_lr=1e-4)
worker 1 "$TMP/wsd-ref" "${WSD[@]}" >"$TMP/wsd-ref.log" 2>&1
check "wsd: uninterrupted 40-step run" [ $? -eq 0 ]
lr_ok=$(python3 - "$TMP/wsd-ref/metrics.jsonl" <<'PY'
import json, sys
lrs = {r["step"]: r["lr"] for r in map(json.loads, open(sys.argv[1])) if "lr" in r}
def want(i):  # step index i (0-based): the lr the schedule defines
    if i < 5: return 0.05 * (i + 1) / 5
    p = (i - 31.25) / 8.75
    return 0.05 if p <= 0 else 1e-4 + (0.05 - 1e-4) * (1 - min(p, 1.0))
bad = [s for s in range(1, 41) if s not in lrs or abs(lrs[s] - want(s - 1)) > 1e-5 * want(s - 1)]
print("ok" if not bad and lrs[32] == 0.05 and lrs[33] < 0.05 else "steps %s: %s" % (bad, lrs))
PY
)
check "wsd: logged lr follows warm-up, stable peak and decay ($lr_ok)" [ "$lr_ok" = ok ]
DDP_TEST_FAULT=stop:0:36 worker 1 "$TMP/wsd" "${WSD[@]}" >/dev/null 2>&1
check "wsd: stopped at step 36, inside the decay" [ -f "$TMP/wsd/checkpoints/ckpt-00000036.ddp" ]
# the stop's attempt as if killed inside two whole-file writes: their temporaries go at the resume
touch "$TMP/wsd/.trace-rank0.json.tmp.4194305" "$TMP/wsd/.config.resolved.yaml.tmp.4194305"
worker 1 "$TMP/wsd" "${WSD[@]}" checkpoint.resume=auto >"$TMP/wsd.log" 2>&1
check "wsd: resumed run completes" [ $? -eq 0 ]
check "the temporaries an attempt killed in a write left are removed, named" bash -c \
    "[ -z \"\$(ls -A '$TMP/wsd' | grep -F .tmp.)\" ] && [ \$(grep -c 'tmp.4194305: removed' '$TMP/wsd.log') -eq 2 ]"
check "wsd: resumed result bit-identical to the uninterrupted run" \
    "$DDPRUN" ckpt diff "$TMP/wsd-ref/checkpoints/ckpt-00000040.ddp" "$TMP/wsd/checkpoints/ckpt-00000040.ddp"
# A decay of one step (a quarter of the 4 after warm-up) decays no step: refused at the override that
# set it; 1.2 steps run.
SHORT=(train.max_steps=6 optimizer.schedule.warmup_steps=2 optimizer.schedule.kind=wsd)
worker 1 "$TMP/wsd-one" "${SHORT[@]}" optimizer.schedule.decay_fraction=0.25 >"$TMP/wsd-one.log" 2>&1
check "wsd: a one-step decay is refused (exit $?)" bash -c "[ $? -eq 2 ] && grep -q \
    '<override [0-9]*>:1:35: optimizer.schedule.decay_fraction 0.25 of the 4 steps after warm-up (train.max_steps 6) is 1 step.*no step would decay' \
    '$TMP/wsd-one.log'"
worker 1 "$TMP/wsd-more" "${SHORT[@]}" optimizer.schedule.decay_fraction=0.3 >/dev/null 2>&1
check "wsd: a decay of 1.2 steps runs (exit $?)" [ $? -eq 0 ]

# Newest checkpoint corrupt (one byte flipped inside a tensor) or truncated: the previous one is
# used, reported, and the result is still bit-identical to the uninterrupted run.
for damage in flip truncate; do
    d=$TMP/$damage
    mkdir -p "$d/checkpoints"
    DDP_TEST_FAULT=stop:0:22 worker 1 "$d" "${COMMON[@]}" >/dev/null 2>&1
    f=$d/checkpoints/ckpt-00000022.ddp
    size=$(stat -c %s "$f")
    if [ $damage = flip ]; then
        python3 -c 'import sys; f = open(sys.argv[1], "r+b"); f.seek(int(sys.argv[2])); b = f.read(1)
f.seek(int(sys.argv[2])); f.write(bytes([b[0] ^ 0x10]))' "$f" $((size - 1000))
    else
        truncate -s $((size / 2)) "$f"
    fi
    worker 1 "$d" "${COMMON[@]}" checkpoint.resume=auto >"$d.log" 2>&1
    check "$damage: resumed run completes" [ $? -eq 0 ]
    grep -q "ckpt-00000022.ddp" "$d.log" && grep -q "resumed from .*ckpt-00000015.ddp" "$d.log"
    check "$damage: newest checkpoint reported, previous one (step 15) used" [ $? -eq 0 ]
    check "$damage: result bit-identical to the uninterrupted run" \
        "$DDPRUN" ckpt diff "$TMP/ref1/checkpoints/ckpt-00000040.ddp" "$d/checkpoints/ckpt-00000040.ddp"
done

# A finished run extended later (more max_steps mid-epoch, or more epochs across an epoch
# boundary) continues exactly where it ended: bit-identical to one uninterrupted run.
EXT=(optimizer.kind=sgd optimizer.schedule.kind=constant optimizer.schedule.warmup_steps=0)
for how in "train.max_steps=25 train.max_steps=40" "train.max_steps=0+train.epochs=1 train.max_steps=0+train.epochs=2"; do
    first=${how% *} second=${how#* }
    name=$(echo "$second" | tr -c 'a-z0-9' _)
    worker 1 "$TMP/ext-ref-$name" "${EXT[@]}" ${second//+/ } >/dev/null 2>&1
    check "extend ($first -> $second): uninterrupted reference run" [ $? -eq 0 ]
    worker 1 "$TMP/ext-$name" "${EXT[@]}" ${first//+/ } >/dev/null 2>&1 &&
        worker 1 "$TMP/ext-$name" "${EXT[@]}" ${second//+/ } checkpoint.resume=auto >"$TMP/ext-$name.log" 2>&1
    check "extend ($first -> $second): both parts complete" [ $? -eq 0 ]
    check "extend ($first -> $second): bit-identical to the uninterrupted run" \
        "$DDPRUN" ckpt diff "$(last_ckpt "$TMP/ext-ref-$name")" "$(last_ckpt "$TMP/ext-$name")"
done

# The extended run again, with nothing left to train: says so, with the steps it holds.
d=$TMP/ext-$(echo "train.max_steps=0+train.epochs=2" | tr -c 'a-z0-9' _)
worker 1 "$d" "${EXT[@]}" train.max_steps=0 train.epochs=2 checkpoint.resume=auto >"$d.again.log" 2>&1
check "every epoch done: exit 0" [ $? -eq 0 ]
check "... nothing to train, the steps it holds named ($(grep -m1 'schedule:' "$d.again.log"))" \
    grep -q "nothing to train: .* already holds step \([0-9]*\) of \1;" "$d.again.log"

# A stop agreed at the run's last step saves it before the run's last evaluation: the resumed run,
# with nothing left to train, evaluates the saved step as the uninterrupted run did.
EV=(train.eval=true train.max_steps=20 checkpoint.every_steps=0)
worker 1 "$TMP/evref" "${EV[@]}" >"$TMP/evref.log" 2>&1
DDP_TEST_FAULT=stop:0:20 worker 1 "$TMP/evstop" "${EV[@]}" >"$TMP/evstop.log" 2>&1
check "a stop at the last step: exit 75 (got $?), before the run's last evaluation" \
    bash -c "[ $? -eq 75 ] && ! grep -q 'eval epoch' '$TMP/evstop.log'"
worker 1 "$TMP/evstop" "${EV[@]}" checkpoint.resume=auto >"$TMP/evstop.b.log" 2>&1
ev_ref=$(grep -o 'eval epoch 1 step 20: .*' "$TMP/evref.log")
check "... resumed with nothing to train, it evaluates step 20 as the uninterrupted run ($ev_ref)" \
    bash -c "[ -n '$ev_ref' ] && [ \"\$(grep -o 'eval epoch 1 step 20: .*' '$TMP/evstop.b.log')\" = '$ev_ref' ]"
check "... and its last line gives the accuracy" grep -q "done: 20 steps .*final test accuracy" "$TMP/evstop.b.log"

# elapsed_s is the run's training time over its attempts: a first part slowed by 0.05 s a step
# (DDP_TEST_FAULT slow) to step 22, extended to step 40 without the fault
elapsed() { "$DDPRUN" ckpt info "$1" | sed -n 's/.*elapsed_s \([0-9.]*\).*/\1/p'; }
DDP_TEST_FAULT=slow:0:1:0.05 worker 1 "$TMP/elapsed" "${COMMON[@]}" train.max_steps=22 >/dev/null 2>&1
worker 1 "$TMP/elapsed" "${COMMON[@]}" checkpoint.resume=auto >/dev/null 2>&1
e22=$(elapsed "$TMP/elapsed/checkpoints/ckpt-00000022.ddp") e40=$(elapsed "$TMP/elapsed/checkpoints/ckpt-00000040.ddp")
check "elapsed_s: step 22's ($e22 s) holds the slowed steps, step 40's ($e40 s) adds the second part's" \
    python3 -c "import sys; sys.exit(0 if 21 * 0.05 <= $e22 < $e40 else 1)"

# A warm-up longer than an epoch on more ranks, finished before the resume there: the resumed run
# goes on (the check is against its re-planned horizon, 510 + 213 steps at np=2).
WU=(train.max_steps=0 train.epochs=1 checkpoint.every_steps=0 data.batch_size=64 optimizer.schedule.warmup_steps=500)
DDP_TEST_FAULT=stop:0:510 worker 1 "$TMP/warm" "${WU[@]}" >"$TMP/warm.a.log" 2>&1
check "warm-up 500: np=1 (937 steps an epoch) stops at step 510 with 75 (got $?)" [ $? -eq 75 ]
worker 2 "$TMP/warm" "${WU[@]}" checkpoint.resume=auto >"$TMP/warm.b.log" 2>&1
check "... np=2 (468 steps an epoch) resumes it past its warm-up and completes (got $?)" [ $? -eq 0 ]
worker 2 "$TMP/warm-fresh" "${WU[@]}" >"$TMP/warm-fresh.log" 2>&1
check "... while a fresh np=2 run with it is refused (exit $?)" \
    bash -c "[ $? -eq 2 ] && grep -q 'warmup_steps 500 is more than the run.s 468 steps' '$TMP/warm-fresh.log'"

# checkpoint.dir on a disk each host has of its own: rank R runs in its own mount namespace with an
# empty folder bound over run.dir/checkpoints, as on another host. Rank 0 there (a restart that
# placed it elsewhere) is refused before any step, naming rank 1's host and step, where it would
# have started over from step 0; rank 1 there (rank 0 still on the saving host) resumes.
cat >"$TMP/elsewhere.sh" <<'EOF'
#!/bin/bash
# elsewhere.sh RANK EMPTY DIR CMD...: rank RANK sees EMPTY at DIR; every other rank DIR as it is
if [ "$OMPI_COMM_WORLD_RANK" = "$1" ]; then
    exec unshare -m bash -c 'mount --bind "$0" "$1" && shift && exec "$@"' "${@:2}"
fi
exec "${@:4}"
EOF
mkdir -p "$TMP/empty"
if unshare -m mount --bind "$TMP/empty" "$TMP/empty" 2>/dev/null; then
    LOCAL=(train.max_steps=12 checkpoint.every_steps=6)
    worker 2 "$TMP/local" "${LOCAL[@]}" train.max_steps=6 >/dev/null 2>&1
    cp "$TMP/local/checkpoints/ckpt-00000006.ddp" "$TMP/ck6"
    elsewhere() { # RANK [OVERRIDES...]: the resume with rank RANK elsewhere
        local rank=$1; shift
        mpirun -np 2 --oversubscribe --bind-to none bash "$TMP/elsewhere.sh" "$rank" "$TMP/empty" \
            "$TMP/local/checkpoints" "$DDPRUN_WORKER" "$SMALL" run.dir="$TMP/local" "${LOCAL[@]}" \
            checkpoint.resume=auto "$@"
    }
    elsewhere 0 >"$TMP/local0.log" 2>&1
    check "rank 0 on a host without the checkpoints: refused (exit $?)" bash -c "[ $? -eq 2 ] && grep -qE \
        'checkpoint.dir .* on this host \(($(hostname)|$(hostname -s)), rank 1\) holds ckpt-00000006.ddp of this config, newer than step 0' \
        '$TMP/local0.log'"
    check "... before any step or save: nothing written on either host, step 6's checkpoint as it was" bash -c \
        "[ -z \"\$(ls -A '$TMP/empty')\" ] && [ '$(basename "$(last_ckpt "$TMP/local")")' = ckpt-00000006.ddp ] &&
         cmp -s '$TMP/ck6' '$TMP/local/checkpoints/ckpt-00000006.ddp'"
    # a checkpoint of other settings on that host is no run's own: left alone
    elsewhere 0 optimizer.lr=0.04 >"$TMP/local-other.log" 2>&1
    check "... while one of other settings there is left alone: a fresh start completes (exit $?)" [ $? -eq 0 ]
    rm -rf "${TMP:?}/empty/"*
    elsewhere 1 >"$TMP/local1.log" 2>&1
    check "rank 1 on a host without them: rank 0 resumes step 6 and completes (exit $?)" bash -c \
        "[ $? -eq 0 ] && grep -q 'resumed from .*ckpt-00000006.ddp' '$TMP/local1.log'"
else
    echo "note: node-local checkpoint.dir cases skipped (a bind mount in a mount namespace is not allowed here)"
fi

# World size change mid-epoch: save at np=2 after 30 steps, resume at np=1 and at np=3; every
# sample of the epoch is used at most once and the total is what drop_last promises; without
# train.global_batch a warning says a step's samples changed with the ranks.
WS=(train.max_steps=0 train.epochs=1 checkpoint.every_steps=0 data.batch_size=64)
for np2 in 1 3; do
    d=$TMP/ws$np2
    mkdir -p "$d/trace"
    DDP_TEST_TRACE_DIR=$d/trace DDP_TEST_FAULT=stop:1:30 worker 2 "$d" "${WS[@]}" >"$d.a.log" 2>&1
    check "world size 2 -> $np2: first part stops with 75" [ $? -eq 75 ]
    DDP_TEST_TRACE_DIR=$d/trace worker $np2 "$d" "${WS[@]}" checkpoint.resume=auto >"$d.b.log" 2>&1
    check "world size 2 -> $np2: resumed run completes" [ $? -eq 0 ]
    grep -q "warning: resume: world size changed from 2 to $np2 ranks, so a step now takes $((64 * np2)) samples, not 128, at \
the same learning rate; train.global_batch keeps" "$d.b.log"
    check "world size 2 -> $np2: a warning says the world size, and with it a step's samples, changed" [ $? -eq 0 ]
    total=$(cat "$d"/trace/*.txt | wc -l)
    uniq=$(cat "$d"/trace/*.txt | sort -u | wc -l)
    expect=$((30 * 128 + (60000 - 30 * 128) / (64 * np2) * (64 * np2)))
    check "world size 2 -> $np2: no sample used twice ($total trained, $uniq distinct)" [ "$total" -eq "$uniq" ]
    check "world size 2 -> $np2: $expect samples used, as drop_last promises (got $total)" [ "$total" -eq "$expect" ]
done

# A checkpoint records the model it was written for; resuming it into another model shape is
# a usage error naming both, and the refused run writes nothing into its run.dir.
ckpt40=$TMP/ref1/checkpoints/ckpt-00000040.ddp
worker 1 "$TMP/other-model" "${COMMON[@]}" model.mlp.hidden=[64] checkpoint.resume="$ckpt40" >"$TMP/other-model.log" 2>&1
rc=$?
check "checkpoint of another model: resume refused as a usage error (rc $rc)" [ $rc -eq 2 ]
check "the refusal names the checkpoint's model and this run's" grep -qF \
    "checkpoint was written for mlp hidden=[64,32] activation=relu in=784 classes=10, this run builds mlp hidden=[64] activation=relu in=784 classes=10" \
    "$TMP/other-model.log"
check "the refused run wrote nothing into its run.dir" [ ! -e "$TMP/other-model" ]

# A checkpoint saved with other settings (of those config_hash covers) is refused naming each
# setting that differs, with the value it was saved with and this run's.
worker 1 "$TMP/other-settings" "${COMMON[@]}" optimizer.lr=3e-3 run.seed=7 optimizer.kind=sgd optimizer.momentum=0.5 \
    checkpoint.resume="$ckpt40" >"$TMP/other-settings.log" 2>&1
rc=$?
check "checkpoint of other settings: resume refused as a usage error (rc $rc)" [ $rc -eq 2 ]
for named in "run.seed 42 (this run: 7)" "optimizer.kind adamw (this run: sgd)" "optimizer.lr 0.002 (this run: 0.003)" \
    "optimizer.betas [0.9, 0.999] (not used by this run)" "optimizer.momentum (not used by the saved run; this run: 0.5)"; do
    check "the refusal names $named" grep -qF "$named" "$TMP/other-settings.log"
done
check "and nothing that did not change" bash -c "! grep -q 'data.batch_size' '$TMP/other-settings.log'"

# The previous format version (1) recorded the model kind only; this build refuses it, saying
# why. The version-1 file is this run's checkpoint with its version field set to 1 and the
# header CRC recomputed (the reader decides on the version before reading anything else); the
# same rewrite keeping version 2 must still be accepted, so the rewrite itself is sound.
rewrite_version() { # SRC DST VERSION
    python3 - "$@" <<'PY'
import struct, sys, zlib
b = bytearray(open(sys.argv[1], "rb").read())
struct.pack_into("<I", b, 8, int(sys.argv[3]))
header_len = struct.unpack_from("<I", b, 12)[0]
struct.pack_into("<I", b, 24, zlib.crc32(bytes(b[:24]) + bytes(b[32:32 + header_len])))
open(sys.argv[2], "wb").write(b)
PY
}
rewrite_version "$ckpt40" "$TMP/v1.ddp" 1 && rewrite_version "$ckpt40" "$TMP/v2.ddp" 2
check "the version rewrite keeping version 2 is still a valid checkpoint" "$DDPRUN" ckpt info "$TMP/v2.ddp"
worker 1 "$TMP/v1-run" "${COMMON[@]}" checkpoint.resume="$TMP/v1.ddp" >"$TMP/v1-run.log" 2>&1
rc=$?
check "format version 1: resume refused (rc $rc)" [ $rc -ne 0 ]
check "format version 1: the refusal says why" grep -qF \
    "unsupported format version 1 (this build reads 2; older versions do not record the model's shape" "$TMP/v1-run.log"
"$DDPRUN" ckpt info "$TMP/v1.ddp" >"$TMP/v1-info.log" 2>&1
rc=$?
check "format version 1: ckpt info reports it unreadable (rc $rc)" [ $rc -eq 1 ]
check "format version 1: ckpt info says why" grep -qF "unsupported format version 1" "$TMP/v1-info.log"

# A first attempt that does not continue checkpoint.dir's newest checkpoint (checkpoint.resume: a
# path, or never) into a checkpoint.dir holding checkpoints a restart would resume instead (those
# beyond the path's step when it lies there, else any) is refused naming them, and they are left
# as they were: pruning would also keep them before the run's own. The dir's newest is resumed
# as ever, and a set without a manifest (a save that did not finish) counts for nothing.
ref=$TMP/ref1
sums=$(cd "$ref/checkpoints" && ls && cksum ckpt-*)
worker 1 "$ref" "${COMMON[@]}" checkpoint.resume="$ref/checkpoints/ckpt-00000015.ddp" >"$TMP/rollback.log" 2>&1
rc=$?
check "resume of an older checkpoint of checkpoint.dir: refused as a usage error (rc $rc)" [ $rc -eq 2 ]
check "the refusal names how many a restart would take instead, and the newest" grep -qF \
    "holds 2 checkpoint(s) that a restart would resume instead of step 15 of $ref/checkpoints/ckpt-00000015.ddp (the newest ckpt-00000040.ddp)" \
    "$TMP/rollback.log"
worker 1 "$ref" "${COMMON[@]}" checkpoint.resume=never >"$TMP/fresh-over.log" 2>&1
rc=$?
check "a fresh start into a checkpoint.dir holding checkpoints: refused as a usage error (rc $rc)" [ $rc -eq 2 ]
check "the refusal names them" grep -qF \
    "holds 3 checkpoint(s) that a restart would resume instead of this fresh start (checkpoint.resume: never)" \
    "$TMP/fresh-over.log"
worker 1 "$ref" "${COMMON[@]}" checkpoint.resume="$TMP/ref2/checkpoints/ckpt-00000015.ddp" >"$TMP/elsewhere.log" 2>&1
rc=$?
check "a path outside checkpoint.dir, which holds checkpoints: refused whatever their steps (rc $rc)" [ $rc -eq 2 ]
check "the refusal counts every one" grep -qF "holds 3 checkpoint(s) that a restart would resume instead of step 15" \
    "$TMP/elsewhere.log"
check "the refused runs left checkpoint.dir as it was" [ "$(cd "$ref/checkpoints" && ls && cksum ckpt-*)" = "$sums" ]
mkdir "$ref/checkpoints/ckpt-00000045" # a set whose save did not finish: no manifest
worker 1 "$ref" "${COMMON[@]}" train.max_steps=41 checkpoint.resume="$ref/checkpoints/ckpt-00000040.ddp" \
    >"$TMP/newest.log" 2>&1
check "resume of checkpoint.dir's newest by its path still runs, beside an unfinished set (exit $?)" [ $? -eq 0 ]
finish
