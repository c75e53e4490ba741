#!/usr/bin/env bash
# train.recompute through the training job: GPT-2, the Llama and Qwen2 (tests/launcher/trainer/
# {gpt2,llama,qwen2}_small.yaml) on byte tokens at np 2 with ZeRO-1, gradient accumulation 2 and
# clipping: 8 steps with recompute selective and full end with checkpoints bit-identical to
# recompute none's (`ddprun ckpt diff`: parameters, AdamW's moments, everything), and so does
# recompute full with ZeRO-2 and with ZeRO-3 against none with ZeRO-2 (gradients in unit windows,
# ZeRO-3's parameters gathered into them), the header's
# plan line names the mode, and `ddprun plan` gives each less activation memory (full < selective
# < none). With `cuda` (the emulated build): the same for GPT-2 and the Llama on the emulated GPU
# with NCCL in bf16 (Qwen2 runs the Llama's passes). The referee can fail: another seed differs.
source "$(dirname "$0")/../../lib.sh"
DATA=$TMP/bytes
cat /usr/share/common-licenses/{GPL-3,Apache-2.0} >"$TMP/corpus.txt"
"$DDP_SRC/scripts/prepare-text" --tokenizer bytes "$TMP/corpus.txt" "$DATA" >"$TMP/prepare.log" 2>&1
check "prepare-text writes the byte-level shards" [ -f "$DATA/train_000000.bin" ]
RUN=(data.path="$DATA" data.batch_size=4 train.grad_accum=2 train.max_steps=8 optimizer.grad_clip=1.0 ddp.zero=1
     checkpoint.every_steps=8)
DEVICES=("fp32")
GPU=()
MODELS=(gpt2 llama qwen2)
if [ "${1:-}" = cuda ]; then
    GPU=(device=cuda ddp.backend=nccl)
    DEVICES=("bf16") # fp32 on the emulated GPU: test_gpt and test_llama --cuda (gfx_check_recompute)
    MODELS=(gpt2 llama) # Qwen2's passes are the Llama's (llama_pass.c): its CPU runs cover its biases
fi
# run NAME CONFIG PRECISION [overrides...]
run() {
    local name=$1 config=$2 precision=$3; shift 3
    OMP_NUM_THREADS=1 DDP_CUDA_EMU_DEVICES=2 mpirun -np 2 --oversubscribe --bind-to none "$DDPRUN_WORKER" "$config" \
        run.dir="$TMP/$name" "${RUN[@]}" "${GPU[@]}" precision="$precision" "$@" >"$TMP/$name.log" 2>&1
}
act_mib() { sed -n 's/.*activations \([0-9.]*\) MiB.*/\1/p' "$TMP/$1" | head -n 1; }
last() { last_ckpt "$TMP/$1"; }

for model in "${MODELS[@]}"; do
    config=$DDP_SRC/tests/launcher/trainer/${model}_small.yaml
    # the plan at a batch whose activations the MiB figure resolves
    for mode in none selective full; do
        "$DDPRUN" plan "$config" data.batch_size=1024 train.recompute=$mode >"$TMP/$model-$mode.plan" 2>&1
    done
    n=$(act_mib "$model-none.plan") s=$(act_mib "$model-selective.plan") f=$(act_mib "$model-full.plan")
    check "$model: activations full $f < selective $s < none $n MiB (ddprun plan, 1024 rows)" \
        python3 -c 'import sys; n, s, f = map(float, sys.argv[1:]); sys.exit(not f < s < n)' "${n:-0}" "${s:-0}" "${f:-0}"
    for precision in "${DEVICES[@]}"; do
        base=$model-$precision
        run "$base-none" "$config" "$precision"
        check "$base: recompute none runs" [ $? -eq 0 ]
        for mode in selective full; do
            run "$base-$mode" "$config" "$precision" train.recompute=$mode
            check "$base: recompute $mode runs" [ $? -eq 0 ]
            check "$base: the plan line names recompute $mode" grep -q "rows, recompute $mode)" "$TMP/$base-$mode.log"
            check "$base: recompute $mode's step-8 checkpoint is none's, bit for bit" \
                "$DDPRUN" ckpt diff "$(last "$base-none")" "$(last "$base-$mode")"
        done
        run "$base-z2none" "$config" "$precision" ddp.zero=2
        run "$base-z2full" "$config" "$precision" ddp.zero=2 train.recompute=full
        check "$base: ZeRO-2 with recompute full ends bit for bit as ZeRO-2 with none" \
            "$DDPRUN" ckpt diff "$(last "$base-z2none")" "$(last "$base-z2full")"
        run "$base-z3full" "$config" "$precision" ddp.zero=3 train.recompute=full
        check "$base: ZeRO-3 with recompute full ends bit for bit as ZeRO-2 with none" \
            "$DDPRUN" ckpt diff "$(last "$base-z2none")" "$(last "$base-z3full")"
    done
done
run seed "$DDP_SRC/tests/launcher/trainer/llama_small.yaml" fp32 train.recompute=full run.seed=8
check "another seed runs" [ $? -eq 0 ]
check "another seed's checkpoint differs (ckpt diff can fail)" \
    bash -c "! '$DDPRUN' ckpt diff '$(last llama-fp32-none)' '$(last seed)' >/dev/null"
finish
