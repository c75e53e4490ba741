#!/usr/bin/env bash
# The Llama (model.kind llama: grouped-query attention, RoPE, SwiGLU) under real mpirun, on
# byte-level tokens of the Debian license texts, with what test_gpt2_train.sh and test_zero.sh
# prove for GPT-2:
#  - DDP equivalence: np=2 at batch 8 and np=1 at batch 8 x grad_accum 2 end 20 steps with the
#    parameters of np=1 at batch 16 (within 1e-4, test_gpt2_train's tolerance); batch 12 does not;
#  - the header's memory plan, and val_loss evaluations that fall;
#  - a stop at a non-checkpoint step resumes bit-identically at the same world size (np=1, np=2);
#  - ZeRO-1: np=2 and np=3 end with the parameters of ZeRO-0 at np=1 (1e-4) and AdamW's moments
#    of ZeRO-0 at the same world size; a ZeRO-1 resume at np=2 is bit-identical; the chain
#    np=2 ZeRO-1 -> np=3 ZeRO-1 -> np=1 ZeRO-0 equals the same chain with ZeRO-0 throughout, step
#    by step (1e-4, test_zero's tolerance: the two differ only in the order of float sums);
#  - precision bf16 refused on a rank that runs on the CPU, as GPT-2's is;
#  - `ddprun generate` on a Llama checkpoint: the tokenizer from the run, the same text per seed,
#    another seed another text.
source "$(dirname "$0")/../../lib.sh"
SMALL=$DDP_SRC/tests/launcher/trainer/llama_small.yaml
DATA=$TMP/bytes
cat /usr/share/common-licenses/{GPL-3,Apache-2.0,LGPL-3,MPL-2.0,Artistic} >"$TMP/corpus.txt"
"$DDP_SRC/scripts/prepare-text" --tokenizer bytes "$TMP/corpus.txt" "$DATA" >"$TMP/prepare.log" 2>&1
check "prepare-text writes the byte-level shards" eval '[ -f "$DATA/train_000000.bin" ] && [ -f "$DATA/val_000000.bin" ]'
D=(data.path="$DATA")
ckpt() { echo "$TMP/$1/checkpoints/ckpt-$(printf %08d "$2").ddp"; }
close() { # what A B PREFIX TOLERANCE: checkpoints A and B agree on PREFIX within TOLERANCE
    check "$1" "$CKPT_COMPARE" "$2" "$3" "$4" "$5"
}
differ() { # what A B PREFIX TOLERANCE: they do not (the referee can fail)
    check "$1" bash -c "! '$CKPT_COMPARE' '$2' '$3' '$4' '$5' >/dev/null"
}

# --- DDP equivalence at global batch 16 (AdamW, weight decay on 2-D tensors, clipping) ---
worker 1 "$TMP/np1" "${D[@]}" data.batch_size=16 >"$TMP/np1.log" 2>&1
check "np=1 batch 16 runs" [ $? -eq 0 ]
worker 2 "$TMP/np2" "${D[@]}" data.batch_size=8 >"$TMP/np2.log" 2>&1
check "np=2 batch 8 runs" [ $? -eq 0 ]
worker 1 "$TMP/acc2" "${D[@]}" data.batch_size=8 train.grad_accum=2 >"$TMP/acc2.log" 2>&1
check "np=1 batch 8 x grad_accum 2 runs" [ $? -eq 0 ]
check "the model is the config's Llama" grep -qF "model: llama n_layer=2 n_head=4 n_kv_head=2 n_embd=32 ffn_hidden=88" "$TMP/np2.log"
ref=$(ckpt np1 20)
for v in np2 acc2; do
    close "$v params equal np=1 within 1e-4" "$ref" "$(ckpt $v 20)" param/ 1e-4
done
worker 1 "$TMP/other" "${D[@]}" data.batch_size=12 >/dev/null 2>&1
differ "batch 12 differs from batch 16 (the referee can fail)" "$ref" "$(ckpt other 20)" param/ 1e-4
check "the header prints the memory plan" grep -q "memory per rank: parameters .* activations .* in all" "$TMP/np1.log"

# --- evaluation: val_loss at every eval_every, falling ---
worker 2 "$TMP/eval" "${D[@]}" train.max_steps=60 train.eval=true train.eval_every=20 >"$TMP/eval.log" 2>&1
check "training with evaluations runs" [ $? -eq 0 ]
check "val_loss recorded at steps 20, 40, 60 and falling" python3 - "$TMP/eval/metrics.jsonl" <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if '"eval"' in l]
steps = [e["step"] for e in ev]
loss = [e["val_loss"] for e in ev]
print(steps, loss)
sys.exit(0 if steps[:3] == [20, 40, 60] and loss[2] < loss[0] < 5.55 else 1)
PY

# --- bit-identical resume after a stop at a non-checkpoint step ---
R=("${D[@]}" train.max_steps=30 checkpoint.every_steps=10)
for np in 1 2; do
    worker $np "$TMP/ref$np" "${R[@]}" >/dev/null 2>&1
    check "np=$np: uninterrupted 30-step run" [ $? -eq 0 ]
    DDP_TEST_FAULT=stop:$((np - 1)):13 worker $np "$TMP/run$np" "${R[@]}" >/dev/null 2>&1
    check "np=$np: stop on rank $((np - 1)) -> exit 75" [ $? -eq 75 ]
    worker $np "$TMP/run$np" "${R[@]}" checkpoint.resume=auto >"$TMP/run$np.log" 2>&1
    check "np=$np: resumed run completes" [ $? -eq 0 ]
    check "np=$np: resumed from step 13" grep -q "resumed from .*ckpt-00000013.ddp" "$TMP/run$np.log"
    check "np=$np: bit-identical to the uninterrupted run (ckpt diff)" "$DDPRUN" ckpt diff "$(ckpt ref$np 30)" \
        "$(ckpt run$np 30)"
done

# --- ZeRO-1, gradient accumulation 2, global batch 2 x 12 ---
ADAM_STATE=(param/ optim/exp_avg/ optim/exp_avg_sq/)
G=("${D[@]}" train.grad_accum=2 checkpoint.keep_last=10)
worker 1 "$TMP/z-ref" "${G[@]}" data.batch_size=12 >/dev/null 2>&1
check "zero: np=1 ZeRO-0 batch 12 x 2 runs" [ -f "$(ckpt z-ref 20)" ]
for np in 2 3; do
    worker $np "$TMP/z$np" "${G[@]}" data.batch_size=$((12 / np)) ddp.zero=1 >"$TMP/z$np.log" 2>&1
    close "zero: np=$np ZeRO-1 params equal np=1 ZeRO-0 within 1e-4" "$(ckpt z-ref 20)" "$(ckpt z$np 20)" param/ 1e-4
    worker $np "$TMP/r$np" "${G[@]}" data.batch_size=$((12 / np)) >/dev/null 2>&1
    for what in optim/exp_avg/ optim/exp_avg_sq/; do
        close "zero: np=$np ZeRO-1 $what equals np=$np ZeRO-0 within 1e-4" "$(ckpt r$np 20)" "$(ckpt z$np 20)" \
            "$what" 1e-4
    done
done
check "zero: the memory plan shows ZeRO's state and the replicated one" \
    grep -qE "optimizer state .* \(ZeRO-1 over 3 ranks; without: .* MiB\)" "$TMP/z3.log"
DDP_TEST_FAULT=stop:0:8 worker 2 "$TMP/zs" "${G[@]}" data.batch_size=6 ddp.zero=1 >/dev/null 2>&1
check "zero: the stopped np=2 run saved step 8" [ -f "$(ckpt zs 8)" ]
worker 2 "$TMP/zs" "${G[@]}" data.batch_size=6 ddp.zero=1 checkpoint.resume=auto >"$TMP/zs.log" 2>&1
check "zero: resumed from step 8" grep -q "resumed from .*ckpt-00000008.ddp" "$TMP/zs.log"
check "zero: np=2 ZeRO-1 resume is bit-identical to the uninterrupted run (ckpt diff)" \
    "$DDPRUN" ckpt diff "$(ckpt z2 20)" "$(ckpt zs 20)"

# the chain: np=2 stops at step 8, np=3 resumes and stops at 14, np=1 resumes to 20; ZeRO per part
chain() { # NAME ZERO_A ZERO_B ZERO_C
    local n=$1
    DDP_TEST_FAULT=stop:1:8 worker 2 "$TMP/$n" "${G[@]}" data.batch_size=4 ddp.zero="$2" >>"$TMP/$n.log" 2>&1
    check "chain $n: np=2 ddp.zero=$2 stops at step 8" [ -f "$(ckpt "$n" 8)" ]
    DDP_TEST_FAULT=stop:2:14 worker 3 "$TMP/$n" "${G[@]}" data.batch_size=4 ddp.zero="$3" checkpoint.resume=auto \
        >>"$TMP/$n.log" 2>&1
    check "chain $n: np=3 ddp.zero=$3 resumes and stops at step 14" [ -f "$(ckpt "$n" 14)" ]
    worker 1 "$TMP/$n" "${G[@]}" data.batch_size=4 ddp.zero="$4" checkpoint.resume=auto >>"$TMP/$n.log" 2>&1
    check "chain $n: np=1 ddp.zero=$4 resumes and ends at step 20" [ -f "$(ckpt "$n" 20)" ]
    check "chain $n: the np=3 part resumed from step 8 at another world size" \
        grep -q "world size changed from 2 to 3" "$TMP/$n.log"
}
chain zero 1 1 0
chain rep 0 0 0
for s in 8 14 20; do
    for what in "${ADAM_STATE[@]}"; do
        close "chain: ZeRO-1 np=2 -> ZeRO-1 np=3 -> ZeRO-0 np=1 equals ZeRO-0 throughout: step $s $what" \
            "$(ckpt rep "$s")" "$(ckpt zero "$s")" "$what" 1e-4
    done
done

# --- precision bf16 is the GPU path: refused on a rank that runs on the CPU ---
CUDA_VISIBLE_DEVICES= worker 1 "$TMP/bf16" "${D[@]}" device=auto precision=bf16 >"$TMP/bf16.log" 2>&1
rc=$?
check "precision bf16 on the CPU backend: refused as a usage error (rc $rc)" [ $rc -eq 2 ]
check "... saying why, at the override that set it" \
    grep -qE "<override [0-9]+>:1:11: precision: bf16 needs a GPU \(the CPU backend computes in float32\)" "$TMP/bf16.log"
check "... before training" [ ! -e "$TMP/bf16/checkpoints" ]

# --- ddprun generate on a Llama checkpoint ---
E=$(ckpt eval 60)
GEN=(--prompt "The " --tokens 40 --seed 5)
"$DDPRUN" generate "$E" "${GEN[@]}" >"$TMP/g1" 2>"$TMP/g1.err"
check "generate from the Llama checkpoint (exit 0)" [ $? -eq 0 ]
check "... says it rebuilt the Llama" grep -qF "generate: llama n_layer=2 n_head=4 n_kv_head=2" "$TMP/g1.err"
check "... prints the prompt and 40 drawn bytes" [ "$(head -c 4 "$TMP/g1")" = "The " -a "$(wc -c <"$TMP/g1")" -ge 44 ]
"$DDPRUN" generate "$E" "${GEN[@]}" >"$TMP/g2" 2>/dev/null
check "the same seed draws the same text" cmp "$TMP/g1" "$TMP/g2"
"$DDPRUN" generate "$E" --prompt "The " --tokens 40 --seed 6 >"$TMP/g3" 2>/dev/null
check "another seed draws another text" bash -c "! cmp -s '$TMP/g1' '$TMP/g3'"
finish
