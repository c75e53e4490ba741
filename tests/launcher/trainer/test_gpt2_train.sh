#!/usr/bin/env bash
# GPT-2 under real mpirun, on byte-level tokens of the Debian license texts: DDP equivalence
# (np=2, np=4 and gradient accumulation match np=1 at the same global batch), bit-identical resume
# after a stop at np=1 and np=2, a world-size change that trains every window of the epoch at most
# once, val_loss evaluations that fall, a checkpoint of another shape or of other training data
# (re-prepared, more samples) refused naming both, and
# bad input (foreign shard, vocabulary too small, seq_len over block_size, n_embd not divisible by
# n_head) refused with a clear error before training.
source "$(dirname "$0")/../../lib.sh"
SMALL=$DDP_SRC/tests/launcher/trainer/gpt2_small.yaml
DATA=$TMP/bytes
cat /usr/share/common-licenses/{GPL-3,Apache-2.0,LGPL-3,MPL-2.0,Artistic} >"$TMP/corpus.txt"
"$DDP_SRC/scripts/prepare-text" --tokenizer bytes "$TMP/corpus.txt" "$DATA" >"$TMP/prepare.log" 2>&1
check "prepare-text writes the byte-level shards" eval '[ -f "$DATA/train_000000.bin" ] && [ -f "$DATA/val_000000.bin" ]'
D=(data.path="$DATA")

# --- DDP equivalence at global batch 16 (AdamW, weight decay on 2-D tensors, clipping) ---
worker 1 "$TMP/np1" "${D[@]}" data.batch_size=16 >"$TMP/np1.log" 2>&1
check "np=1 batch 16 runs" [ $? -eq 0 ]
worker 2 "$TMP/np2" "${D[@]}" data.batch_size=8 >"$TMP/np2.log" 2>&1
check "np=2 batch 8 runs" [ $? -eq 0 ]
worker 4 "$TMP/np4" "${D[@]}" data.batch_size=4 >"$TMP/np4.log" 2>&1
check "np=4 batch 4 runs" [ $? -eq 0 ]
worker 1 "$TMP/acc2" "${D[@]}" data.batch_size=8 train.grad_accum=2 >"$TMP/acc2.log" 2>&1
check "np=1 batch 8 x grad_accum 2 runs" [ $? -eq 0 ]
ref=$(last_ckpt "$TMP/np1")
check "final checkpoint at step 20" [ "$(basename "$ref")" = ckpt-00000020.ddp ]
for v in np2 np4 acc2; do
    check "$v params equal np=1 within 1e-4" "$CKPT_COMPARE" "$ref" "$(last_ckpt "$TMP/$v")" param/ 1e-4
done
worker 1 "$TMP/other" "${D[@]}" data.batch_size=12 >/dev/null 2>&1
check "batch 12 differs from batch 16 (the referee can fail)" \
    bash -c "! '$CKPT_COMPARE' '$ref' '$(last_ckpt "$TMP/other")' param/ 1e-4 >/dev/null"
check "the header prints the memory plan" grep -q "memory per rank: parameters .* activations .* in all" "$TMP/np1.log"

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
    check "np=$np: bit-identical to the uninterrupted run (ckpt diff)" \
        "$DDPRUN" ckpt diff "$TMP/ref$np/checkpoints/ckpt-00000030.ddp" "$TMP/run$np/checkpoints/ckpt-00000030.ddp"
done

# --- world size 2 -> 3 mid-epoch: every window at most once, as many as drop_last promises ---
d=$TMP/ws
mkdir -p "$d/trace"
WS=("${D[@]}" train.max_steps=0 train.epochs=1 data.batch_size=32)
DDP_TEST_TRACE_DIR=$d/trace DDP_TEST_FAULT=stop:1:6 worker 2 "$d" "${WS[@]}" >"$d.a.log" 2>&1
check "world size 2 -> 3: first part stops with 75" [ $? -eq 75 ]
DDP_TEST_TRACE_DIR=$d/trace worker 3 "$d" "${WS[@]}" checkpoint.resume=auto >"$d.b.log" 2>&1
check "world size 2 -> 3: resumed run completes" [ $? -eq 0 ]
windows=$(sed -n 's/.*data: tokens\/train \([0-9]*\) samples.*/\1/p' "$d.a.log" | head -n 1)
total=$(cat "$d"/trace/*.txt | wc -l)
uniq=$(cat "$d"/trace/*.txt | sort -u | wc -l)
expect=$((6 * 64 + (windows - 6 * 64) / 96 * 96))
check "world size 2 -> 3: no window used twice ($total trained, $uniq distinct)" [ "$total" -eq "$uniq" ]
check "world size 2 -> 3: $expect windows of $windows used, as drop_last promises (got $total)" [ "$total" -eq "$expect" ]

# --- evaluation: val_loss in metrics.jsonl at every eval_every, falling ---
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
check "the progress line shows val loss and tokens/s" grep -q "loss .* val loss .* tokens/s" "$TMP/eval.log"

# --- refusals ---
worker 1 "$TMP/shape" "${D[@]}" model.gpt2.n_layer=3 checkpoint.resume="$ref" >"$TMP/shape.log" 2>&1
check "checkpoint of another shape: refused as a usage error" [ $? -eq 2 ]
check "the refusal names both shapes" grep -qF "checkpoint was written for gpt2 n_layer=2 n_head=2 n_embd=32 block_size=32 vocab_size=256 seq_len=24, this run builds gpt2 n_layer=3" "$TMP/shape.log"
# data.path is no setting the config hash covers: the same settings on re-prepared, larger data
cat "$TMP/corpus.txt" /usr/share/common-licenses/GPL-2 >"$TMP/more.txt"
"$DDP_SRC/scripts/prepare-text" --tokenizer bytes "$TMP/more.txt" "$TMP/more" >>"$TMP/prepare.log" 2>&1
worker 1 "$TMP/moredata" data.path="$TMP/more" data.batch_size=16 checkpoint.resume="$ref" >"$TMP/moredata.log" 2>&1
check "a checkpoint resumed on other training data: refused as a usage error (rc $?)" [ $? -eq 2 ]
check "... naming both sample counts" grep -qE "ckpt-00000020.ddp was saved training on [0-9]+ samples, this run's training data has [0-9]+: its position" "$TMP/moredata.log"

worker 1 "$TMP/warm" "${D[@]}" train.max_steps=0 train.epochs=1 optimizer.schedule.warmup_steps=100000 \
    >"$TMP/warm.log" 2>&1
check "an epoch-based run shorter than its warm-up: refused as a usage error (rc $?)" \
    grep -qE "optimizer.schedule.warmup_steps 100000 is more than the run's [0-9]+ steps \(train.epochs 1 x" "$TMP/warm.log"
worker 1 "$TMP/vocab" "${D[@]}" model.gpt2.vocab_size=200 >"$TMP/vocab.log" 2>&1
check "vocabulary too small for the data: refused (rc $?)" grep -qF "the data's vocabulary of 256 tokens is larger than model.gpt2.vocab_size 200" "$TMP/vocab.log"
worker 1 "$TMP/seq" "${D[@]}" data.seq_len=40 >"$TMP/seq.log" 2>&1
check "seq_len over block_size: a config error naming both keys" grep -qE "<override [0-9]+>:1:[0-9]+: data.seq_len: expected data.seq_len <= model.gpt2.block_size" "$TMP/seq.log"
worker 1 "$TMP/heads" "${D[@]}" model.gpt2.n_head=3 >"$TMP/heads.log" 2>&1
check "n_embd not divisible by n_head: a config error" grep -qF "expected model.gpt2.n_embd divisible by model.gpt2.n_head" "$TMP/heads.log"
# precision bf16 is GPT-2's GPU path: on a rank that runs on the CPU (device auto without a GPU, as
# here, or CUDA_VISIBLE_DEVICES hiding them) the job stops at startup instead of training in fp32
CUDA_VISIBLE_DEVICES= worker 1 "$TMP/bf16" "${D[@]}" device=auto precision=bf16 >"$TMP/bf16.log" 2>&1
check "precision bf16 on the CPU backend: refused as a usage error (rc $?)" \
    grep -qF "precision: bf16 needs a GPU (the CPU backend computes in float32)" "$TMP/bf16.log"
bad=$TMP/bad
cp -r "$DATA" "$bad"
printf '\x01' | dd of="$bad/val_000000.bin" bs=1 seek=0 conv=notrunc 2>/dev/null
worker 1 "$TMP/foreign" data.path="$bad" >"$TMP/foreign.log" 2>&1
check "a shard with a bad magic: refused naming the file" grep -q "$bad/val_000000.bin" "$TMP/foreign.log"
check "... and nothing was trained" [ ! -e "$TMP/foreign/checkpoints" ]
finish
