# tests/launcher/trainer/kjv_cuda.sh — what the emulated-GPU tests on a configs/*_kjv.yaml share
# (sourced, never run; test_gpt2_cuda.sh, test_llama_cuda.sh and test_qwen2_cuda.sh): the
# byte-level KJV tokens (skipped, exit 77, without the corpus), the overrides every run takes, one
# run of the config on 2 ranks, the last step's loss comparisons, the CPU-against-emulated-GPU pair
# of runs every such test begins with, and the bf16 run with its resume that may follow. The test
# sets KJV (the config) and KJV_BATCH (the per-rank data.batch_size, lowered from the config's to
# keep the emulator's runs short) before sourcing it, and may set KJV_STEPS (the steps of every run
# and the step compared, default 50), KJV_SAVE (the step of the checkpoint resumes start from,
# default 40) and KJV_MORE (further overrides of every run, e.g. a shorter warm-up for fewer steps).
source "$DDP_SRC/tests/lib.sh"
T_START=$SECONDS
DATA=$TMP/kjv-bytes

# The corpus comes from Debian's bible-kjv + bible-kjv-text (scripts/setup --text installs them);
# without them there is nothing to train on: skipped, not failed.
"$DDP_SRC/scripts/prepare-text" --tokenizer bytes "$DATA" >"$TMP/prepare.log" 2>&1
rc=$?
if [ $rc -ne 0 ] && grep -Eq 'needs the `bible` program|`bible -f [^`]*` failed' "$TMP/prepare.log"; then
    echo "SKIP: no KJV text to train on: $(cat "$TMP/prepare.log")"
    exit 77
fi
check "prepare-text writes the KJV byte shards (rc $rc)" [ $rc -eq 0 -a -f "$DATA/train_000000.bin" ]

KJV_STEPS=${KJV_STEPS:-50}
KJV_SAVE=${KJV_SAVE:-40}
RUN=(data.path="$DATA" data.batch_size="$KJV_BATCH" train.max_steps="$KJV_STEPS" train.log_every=1 train.eval=false
     train.sample_every=0 checkpoint.every_steps="$KJV_SAVE" checkpoint.every_minutes=0 "${KJV_MORE[@]}")
GPU=(device=cuda ddp.backend=nccl)

# kjv NAME LIMIT_S [overrides...]: the config $KJV on 2 ranks (one emulated GPU each) under
# mpirun with RUN's overrides. OMP_NUM_THREADS=1 is what ddprun gives 2 ranks on 2 cores; unset,
# each rank's second OpenMP thread only spins against the other rank (~15% slower on the
# emulator). `timeout` turns a hang into a failure; mpirun takes the ranks down on its SIGTERM.
kjv() {
    local name=$1 limit=$2; shift 2
    local t0=$SECONDS
    OMP_NUM_THREADS=1 DDP_CUDA_EMU_DEVICES=2 timeout "$limit" mpirun -np 2 --oversubscribe --bind-to none \
        "$DDPRUN_WORKER" "$KJV" run.dir="$TMP/$name" "${RUN[@]}" "$@" >"$TMP/$name.log" 2>&1
    local rc=$?
    echo "# $name: exit $rc after $((SECONDS - t0)) s"
    return $rc
}

# losses RUN: "step loss" per line of RUN's metrics.jsonl, as written (6 significant digits)
losses() {
    python3 -c 'import json, sys
for l in open(sys.argv[1]):
    e = json.loads(l)
    if e.get("kind") == "train":
        print(e["step"], e["loss"])' "$TMP/$1/metrics.jsonl"
}
# loss_at RUN STEP: RUN's logged training loss at STEP (empty when not logged)
loss_at() { losses "$1" | awk -v s="$2" '$1 == s { print $2 }'; }

# within RUN_A RUN_B TOL: |a - b| / |a| <= TOL for the last step's (KJV_STEPS) losses (printing
# both); exits 1 when beyond TOL, 2 when such a loss is missing
within() {
    local a b
    a=$(loss_at "$1" "$KJV_STEPS") b=$(loss_at "$2" "$KJV_STEPS")
    python3 - "$1" "${a:-nan}" "$2" "${b:-nan}" "$3" "$KJV_STEPS" <<'PY'
import math, sys
na, a, nb, b, tol, step = sys.argv[1], float(sys.argv[2]), sys.argv[3], float(sys.argv[4]), float(sys.argv[5]), sys.argv[6]
if not (math.isfinite(a) and math.isfinite(b)):
    sys.exit(f"# no finite step-{step} loss: {na} {a}, {nb} {b}")
rel = abs(a - b) / abs(a)
print(f"# step-{step} loss {na} {a:.6g}, {nb} {b:.6g}: relative difference {rel:.2e} (tolerance {tol:.0e})")
sys.exit(0 if rel <= tol else 1)
PY
}
# beyond CMD...: CMD (within or ckpt_compare) says its two runs differ beyond its tolerance (exit 1),
# not that it could not compare them (2), so a referee run that wrote nothing cannot pass for different
beyond() { "$@"; [ $? -eq 1 ]; }

# cpu_and_cuda MODEL_TEXT: the config on the CPU backend (MPI) and on the emulated GPU (NCCL),
# KJV_STEPS steps each: both run, the cuda run on the emulator and NCCL with the model whose
# description begins MODEL_TEXT, its loss falling more than 1 nat/byte, and its last step's loss
# within 1e-4 relative of the CPU's (the parameters are each test's to compare).
cpu_and_cuda() {
    kjv cpu 300 device=cpu
    check "cpu+mpi np=2 runs" [ $? -eq 0 ]
    kjv cuda 600 "${GPU[@]}"
    check "cuda+nccl np=2 runs" [ $? -eq 0 ]
    check "the cuda run used the CUDA emulator and NCCL" grep -q "device CUDA emulator.*gradient backend nccl" \
        "$TMP/cuda.log"
    check "... on the config's model" grep -qF "model: $1" "$TMP/cuda.log"
    local l1 ln
    l1=$(loss_at cuda 1) ln=$(loss_at cuda "$KJV_STEPS")
    echo "# cuda loss: step 1 ${l1:-missing}, step $KJV_STEPS ${ln:-missing}"
    check "the cuda run trained: step-$KJV_STEPS loss more than 1 nat/byte below step 1's" \
        python3 -c 'import sys; sys.exit(0 if float(sys.argv[2]) < float(sys.argv[1]) - 1 else 1)' "${l1:-nan}" \
        "${ln:-nan}"
    check "step-$KJV_STEPS training loss: cuda within 1e-4 relative of cpu" within cpu cuda 1e-4
}

# bf16_and_resume TOL: the config in precision bf16 on the emulated GPU, KJV_STEPS steps: it runs
# with bf16 gradients on the wire, trains (its last loss more than 1 nat/byte below step 1's), ends
# within TOL relative of the CPU fp32 run's loss but not within 1e-5 of the emulated fp32 run's,
# and a run resumed from its step-KJV_SAVE checkpoint ends bit-identical to it (ckpt diff: every
# tensor). Needs cpu_and_cuda's runs first.
bf16_and_resume() {
    kjv bf16 600 "${GPU[@]}" precision=bf16
    check "cuda+nccl np=2 precision bf16 runs" [ $? -eq 0 ]
    check "... with bf16 gradients on the wire (ddp.grad_dtype follows precision)" \
        grep -q "grad_dtype: bf16" "$TMP/bf16/config.resolved.yaml"
    local b1 bn save last
    b1=$(loss_at bf16 1) bn=$(loss_at bf16 "$KJV_STEPS")
    echo "# bf16 loss: step 1 ${b1:-missing}, step $KJV_STEPS ${bn:-missing}"
    check "the bf16 run trained: step-$KJV_STEPS loss more than 1 nat/byte below step 1's" \
        python3 -c 'import sys; sys.exit(0 if float(sys.argv[2]) < float(sys.argv[1]) - 1 else 1)' "${b1:-nan}" \
        "${bn:-nan}"
    check "step-$KJV_STEPS training loss: bf16 within $1 relative of cpu fp32" within cpu bf16 "$1"
    check "bf16 is not fp32 (the step-$KJV_STEPS losses differ by more than 1e-5)" beyond within cuda bf16 1e-5
    save=$TMP/bf16/checkpoints/ckpt-$(printf %08d "$KJV_SAVE").ddp
    last=$TMP/bf16/checkpoints/ckpt-$(printf %08d "$KJV_STEPS").ddp
    kjv bf16resumed 300 "${GPU[@]}" precision=bf16 checkpoint.resume="$save"
    check "bf16 run resumed from step $KJV_SAVE runs" [ $? -eq 0 ]
    check "bf16 resumed step $KJV_STEPS: every tensor bit-identical to the uninterrupted bf16 run (ckpt diff)" \
        "$DDPRUN" ckpt diff "$last" "$(last_ckpt "$TMP/bf16resumed")"
}
