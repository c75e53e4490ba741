#!/usr/bin/env bash
# Non-finite training is caught, under real mpirun, with the test-only faults DDP_TEST_FAULT=nan|inf
# (one rank's gradient becomes NaN / +inf at a step, before it is reduced):
#  - through ddprun --max-restarts 2 at np=2 (clipping on): the job exits 65 at the next progress
#    line naming the step whose gradient norm was not finite, is not restarted, saves nothing after
#    the fault (the finite checkpoints stay, none is pruned for it), every metrics.jsonl line is
#    strict JSON (null for the non-finite loss), and a resume from the last checkpoint without the
#    fault ends bit-identical to an uninterrupted run;
#  - clipping off, +inf at a checkpoint step: the check before the save finds the parameters not
#    finite and refuses that save; ZeRO-1 with AdamW and gradient accumulation: the global norm;
#    progress lines 5000 steps apart: the step records are read when all 4096 are used;
#  - GPT-2: the text sample (train.sample_every) refuses NaN logits and the job stops (it used to
#    loop forever), an evaluation's NaN loss stops it too, the end-of-run one also with no save after it; `ddprun generate` on a checkpoint with a
#    NaN parameter exits 65 naming the logits (it used to loop forever), and SIGTERM ends a long
#    generate; scripts/plot draws a GPT-2 run's metrics (loss, val_loss, tokens/s) and nulls;
#  - with argument `cuda` (emulated build): the ddprun case and ZeRO on device=cuda ddp.backend=nccl.
# Every run is bounded by `timeout` so a regression into the endless loop fails instead of hanging.
source "$(dirname "$0")/../../lib.sh"
GPT_TINY=$DDP_SRC/tests/launcher/trainer/gpt2_tiny.yaml
COMMON=(train.max_steps=40 train.log_every=5 checkpoint.every_steps=10 checkpoint.keep_last=2)

# strict_json FILE: every line parses as JSON without NaN/Infinity extensions
strict_json() {
    python3 - "$1" <<'PY'
import json, sys
def refuse(c):
    raise ValueError(f"{c} is not JSON")
for n, line in enumerate(open(sys.argv[1]), 1):
    try:
        json.loads(line, parse_constant=refuse)
    except ValueError as e:
        sys.exit(f"{sys.argv[1]}:{n}: {e}: {line.strip()}")
PY
}
# last_train FILE KEY: KEY of the last progress record ("None" for null)
last_train() {
    python3 -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1]) if "\"train\"" in l]; print(r[-1][sys.argv[2]])' "$1" "$2"
}
ckpts() { ls "$1/checkpoints" 2>/dev/null | tr '\n' ' '; }

# ddp_nan TAG DEVICE_ARGS...: the ddprun case (nan on rank 1 at step 23, clipping on)
ddp_nan() {
    local tag=$1; shift
    DDP_TEST_FAULT=nan:1:23 timeout 300 "$DDPRUN" -np 2 --max-restarts 2 "$SMALL" run.dir="$TMP/$tag" "${COMMON[@]}" \
        "$@" >"$TMP/$tag.log" 2>&1
    local rc=$?
    check "$tag: NaN gradient at step 23: ddprun exits 65 (got $rc)" [ $rc -eq 65 ]
    check "$tag: naming the step whose gradient norm was not finite" \
        grep -q "non-finite training: the gradient norm of step 23 was not finite; stopped at step 25" "$TMP/$tag.log"
    check "$tag: not restarted" bash -c "! grep -q 'attempt 2' '$TMP/$tag.log'"
    check "$tag: ddprun says why" grep -q "ddprun: job stopped on a non-finite value" "$TMP/$tag.log"
    check "$tag: only the finite checkpoints 10 and 20 exist ($(ckpts "$TMP/$tag"))" \
        [ "$(ckpts "$TMP/$tag")" = "ckpt-00000010.ddp ckpt-00000020.ddp " ]
    check "$tag: every metrics.jsonl line is strict JSON" strict_json "$TMP/$tag/metrics.jsonl"
    check "$tag: the last progress record is step 25 with loss null" \
        [ "$(last_train "$TMP/$tag/metrics.jsonl" step) $(last_train "$TMP/$tag/metrics.jsonl" loss)" = "25 None" ]
    check "$tag: ... and grad_norm null, not left out (clipping measures it)" \
        [ "$(last_train "$TMP/$tag/metrics.jsonl" grad_norm)" = "None" ]
    check "$tag: ... its log line says grad norm nan" grep -q "step 25/40 .* grad norm nan" "$TMP/$tag.log"
}

# --- ddprun, np=2, clipping on ---
"$DDPRUN" -np 2 "$SMALL" run.dir="$TMP/ref" "${COMMON[@]}" >"$TMP/ref.log" 2>&1
check "uninterrupted reference run" [ $? -eq 0 ]
ddp_nan nan
"$DDPRUN" -np 2 "$SMALL" run.dir="$TMP/nan" "${COMMON[@]}" checkpoint.resume=auto >"$TMP/nan.resume.log" 2>&1
check "resumed without the fault: completes" [ $? -eq 0 ]
check "... from step 20" grep -q "resumed from .*ckpt-00000020.ddp" "$TMP/nan.resume.log"
check "... bit-identical to the uninterrupted run" \
    "$DDPRUN" ckpt diff "$TMP/ref/checkpoints/ckpt-00000040.ddp" "$TMP/nan/checkpoints/ckpt-00000040.ddp"
check "... and metrics.jsonl is still strict JSON" strict_json "$TMP/nan/metrics.jsonl"

# --- clipping off, +inf on rank 0 at checkpoint step 20: the save is refused ---
DDP_TEST_FAULT=inf:0:20 timeout 300 "$DDPRUN" -np 2 "$SMALL" run.dir="$TMP/inf" "${COMMON[@]}" optimizer.grad_clip=0 \
    >"$TMP/inf.log" 2>&1
rc=$?
check "inf gradient at a checkpoint step, clipping off: exit 65 (got $rc)" [ $rc -eq 65 ]
# step 10's background write may still be running at step 20 on a loaded machine: then it is named
# as being written, not as saved
check "... the check before the save names the parameters after step 20 and step 10's checkpoint" \
    grep -Eq "the parameters after step 20 were not finite; stopped at step 20 without saving \((the newest checkpoint is step 10's;|no checkpoint was saved before; step 10's is still being written;)" "$TMP/inf.log"
check "... and only step 10 was saved ($(ckpts "$TMP/inf"))" [ "$(ckpts "$TMP/inf")" = "ckpt-00000010.ddp " ]

# --- a save that failed is not named as the newest checkpoint: step 20's write fails (a directory
# where its file goes), then a NaN at step 23 ---
mkdir -p "$TMP/lost/checkpoints/ckpt-00000020.ddp"
DDP_TEST_FAULT=nan:0:23 timeout 300 "$DDPRUN" -np 2 "$SMALL" run.dir="$TMP/lost" "${COMMON[@]}" >"$TMP/lost.log" 2>&1
rc=$?
check "a failed save of step 20, NaN at step 23: exit 65 (got $rc)" [ $rc -eq 65 ]
check "... the save's failure was a warning" grep -q "checkpoint of step 20 failed" "$TMP/lost.log"
check "... the newest checkpoint named is step 10's, the one on disk" \
    grep -q "stopped at step [0-9]* without saving (the newest checkpoint is step 10's;" "$TMP/lost.log"

# --- the same under ZeRO-3: the parameters are sharded, so the message names the rank's shard ---
DDP_TEST_FAULT=inf:0:20 timeout 300 "$DDPRUN" -np 2 "$SMALL" run.dir="$TMP/inf3" "${COMMON[@]}" optimizer.grad_clip=0 \
    ddp.zero=3 >"$TMP/inf3.log" 2>&1
rc=$?
check "ZeRO-3: inf gradient at a checkpoint step, clipping off: exit 65 (got $rc)" [ $rc -eq 65 ]
check "... naming the shard that holds it" \
    grep -q "the parameters after step 20 were not finite in rank 0's shard; stopped at step 20" "$TMP/inf3.log"

# --- ZeRO-1, AdamW, gradient accumulation: the norm all-reduced over the shards ---
ZERO=(ddp.zero=1 optimizer.kind=adamw optimizer.nesterov=false train.grad_accum=2)
DDP_TEST_FAULT=nan:0:7 timeout 300 mpirun -np 2 --oversubscribe --bind-to none "$DDPRUN_WORKER" "$SMALL" \
    run.dir="$TMP/zero" "${COMMON[@]}" "${ZERO[@]}" >"$TMP/zero.log" 2>&1
rc=$?
check "ZeRO-1 np=2: exit 65 (got $rc)" [ $rc -eq 65 ]
check "... naming the gradient norm of step 7" grep -q "the gradient norm of step 7 was not finite; stopped at step 10" "$TMP/zero.log"
check "... nothing saved ($(ckpts "$TMP/zero"))" [ -z "$(ckpts "$TMP/zero")" ]

# --- progress lines further apart than the 4096 recorded steps: the records are read when full ---
DDP_TEST_FAULT=nan:0:4000 timeout 300 mpirun -np 1 --oversubscribe --bind-to none "$DDPRUN_WORKER" "$SMALL" \
    run.dir="$TMP/far" model.mlp.hidden=[8] data.batch_size=8 train.max_steps=4200 train.log_every=5000 >"$TMP/far.log" 2>&1
rc=$?
check "train.log_every 5000: exit 65 (got $rc)" [ $rc -eq 65 ]
check "... when the 4096 records are full, naming step 4000" \
    grep -q "the gradient norm of step 4000 was not finite; stopped at step 4096" "$TMP/far.log"

# --- GPT-2 (clipping off): the text sample and the evaluation ---
DATA=$TMP/data
"$DDP_SRC/scripts/prepare-text" --tokenizer bytes "$DDP_SRC/README.md" "$DATA" >/dev/null
GPT=(data.path="$DATA" train.max_steps=8 train.log_every=2 checkpoint.every_steps=2)
DDP_TEST_FAULT=nan:0:4 timeout 120 mpirun -np 2 --oversubscribe --bind-to none "$DDPRUN_WORKER" "$GPT_TINY" \
    run.dir="$TMP/sample" "${GPT[@]}" train.sample_every=4 train.sample_tokens=8 >"$TMP/sample.log" 2>&1
rc=$?
check "GPT-2 sample from NaN parameters: exit 65, no endless loop (got $rc)" [ $rc -eq 65 ]
check "... naming the sample's logits" \
    grep -q "the logits of the text sample after step 4 were not finite on rank 0; stopped at step 4" "$TMP/sample.log"
check "... step 4 not saved ($(ckpts "$TMP/sample"))" [ "$(ckpts "$TMP/sample")" = "ckpt-00000002.ddp " ]
DDP_TEST_FAULT=nan:1:4 timeout 120 mpirun -np 2 --oversubscribe --bind-to none "$DDPRUN_WORKER" "$GPT_TINY" \
    run.dir="$TMP/eval" "${GPT[@]}" train.eval=true train.eval_every=4 >"$TMP/eval.log" 2>&1
rc=$?
check "GPT-2 evaluation of NaN parameters: exit 65 (got $rc)" [ $rc -eq 65 ]
check "... naming the evaluation loss" grep -q "the evaluation loss after step 4 was not finite; stopped at step 4" "$TMP/eval.log"
check "... the eval record's val_loss is null, every line strict JSON" python3 - "$TMP/eval/metrics.jsonl" <<'PY'
import json, sys
ev = [json.loads(l, parse_constant=lambda c: sys.exit(f"{c} in {l}")) for l in open(sys.argv[1]) if '"eval"' in l]
sys.exit(0 if ev and ev[-1]["val_loss"] is None else f"eval records: {ev}")
PY
# the end-of-run evaluation, after the last step's agreement, with no save left to check anything
DDP_TEST_FAULT=nan:1:8 timeout 120 mpirun -np 2 --oversubscribe --bind-to none "$DDPRUN_WORKER" "$GPT_TINY" \
    run.dir="$TMP/final" "${GPT[@]}" checkpoint.every_steps=0 checkpoint.final=false train.eval=true \
    >"$TMP/final.log" 2>&1
rc=$?
check "GPT-2 final evaluation of NaN parameters, no final save: exit 65 (got $rc)" [ $rc -eq 65 ]
check "... naming the evaluation loss" grep -q "the evaluation loss after step 8 was not finite; stopped at step 8" "$TMP/final.log"
check "scripts/plot draws the GPT-2 run (val_loss null, no acc)" \
    bash -c "'$DDP_SRC/scripts/plot' '$TMP/eval' '$TMP/eval.png' >'$TMP/plot.log' 2>&1 && [ -s '$TMP/eval.png' ]"

# --- ddprun generate: a NaN parameter, and SIGTERM ---
GOOD=$TMP/sample/checkpoints/ckpt-00000002.ddp
mkdir -p "$TMP/bad/checkpoints"
cp "$TMP/sample/config.resolved.yaml" "$TMP/bad/"
BAD=$TMP/bad/checkpoints/ckpt-00000002.ddp
# poison CKPT TENSOR VALUE OUT: CKPT with TENSOR's first element set to VALUE, every CRC recomputed
python3 - "$GOOD" param/wte.weight nan "$BAD" <<'PY'
import struct, sys, zlib
src, name, value, out = sys.argv[1], sys.argv[2].encode(), float(sys.argv[3]), sys.argv[4]
d = bytearray(open(src, "rb").read())
header_len = struct.unpack_from("<I", d, 12)[0]
p = 104 + 2 + struct.unpack_from("<H", d, 104)[0]           # past the model description
assert struct.unpack_from("<I", d, p)[0] == 0; p += 4        # no RNG streams
n_tensors = struct.unpack_from("<I", d, p)[0]; p += 4
for _ in range(n_tensors):
    n = struct.unpack_from("<H", d, p)[0]; tname = bytes(d[p + 2:p + 2 + n]); p += 2 + n
    ndim = d[p + 1]; p += 4 + 8 * ndim
    offset, nbytes = struct.unpack_from("<QQ", d, p); p += 16
    if tname == name:
        struct.pack_into("<f", d, offset, value)
        struct.pack_into("<I", d, p, zlib.crc32(d[offset:offset + nbytes]))
    p += 4
assert p == 32 + header_len
struct.pack_into("<I", d, 24, zlib.crc32(bytes(d[:24]) + bytes(d[32:32 + header_len])))
open(out, "wb").write(d)
PY
check "a checkpoint with a NaN parameter (CRCs recomputed) reads as valid" bash -c "'$DDPRUN' ckpt info '$BAD' >/dev/null"
for flags in "" "--temperature 0" "--top-k 0"; do
    timeout 60 "$DDPRUN" generate "$BAD" --tokens 4 $flags >/dev/null 2>"$TMP/gen.err"
    rc=$?
    check "generate ${flags:-(top-k 40)} from NaN parameters: exit 65, no endless loop (got $rc)" [ $rc -eq 65 ]
    check "... naming the logits" grep -q "the logits for token 1 are not finite (id 0: -\?nan)" "$TMP/gen.err"
done
"$DDPRUN" generate "$GOOD" --tokens 1048576 >/dev/null 2>"$TMP/long.err" &
pid=$!
for _ in $(seq 600); do grep -q "to draw" "$TMP/long.err" && break; sleep 0.05; done
kill -TERM $pid
for _ in $(seq 600); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
kill -KILL $pid 2>/dev/null # the hang guard: only a generate that outlived SIGTERM by a minute is left
wait $pid
rc=$?
check "SIGTERM ends a long generate (status $rc: 143 is SIGTERM, 137 the hang guard)" [ $rc -eq 143 ]

if [ "${1:-}" = cuda ]; then
    export DDP_CUDA_EMU_DEVICES=2
    GPU=(device=cuda ddp.backend=nccl)
    ddp_nan gpu "${GPU[@]}"
    check "gpu: no host wait inside a step before the fault (host_waits 0)" python3 - "$TMP/gpu/metrics.jsonl" <<'PY'
import json, sys
waits = [json.loads(l)["host_waits"] for l in open(sys.argv[1]) if '"train"' in l]
sys.exit(0 if len(waits) == 5 and not any(waits) else f"host waits per log interval: {waits}")
PY
    DDP_TEST_FAULT=nan:1:7 timeout 300 mpirun -np 2 --oversubscribe --bind-to none "$DDPRUN_WORKER" "$SMALL" \
        run.dir="$TMP/gpu_zero" "${COMMON[@]}" "${ZERO[@]}" "${GPU[@]}" >"$TMP/gpu_zero.log" 2>&1
    rc=$?
    check "gpu ZeRO-1 np=2: exit 65 naming the gradient norm of step 7 (got $rc)" \
        bash -c "[ $rc -eq 65 ] && grep -q 'the gradient norm of step 7 was not finite' '$TMP/gpu_zero.log'"
fi
finish
