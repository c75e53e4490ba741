#!/usr/bin/env bash
# Fine-tuning on packed chat rows (data.packed) under real mpirun, from the chat JSONL the repository
# ships (configs/chat/kjv-chat.jsonl, rendered by scripts/prepare-chat with configs/chat/byte-chatml):
#  - the loss is the mean over the global batch's trainable tokens, so the update does not depend on
#    the split: np 1 x 8 rows, np 2 x 4 rows and np 4 x 1 row x accumulation 2 end within the
#    tolerance of a reordered float sum (below), and a different global batch does not; every
#    step's logged loss is the same, logged with its count of targets; GPT-2 (its position table
#    read per document) too, at np 1 x 8 rows and np 2 x 4 rows;
#  - the whole path of configs/llama_sft.yaml: a Hugging Face folder (exported from the np 1 run)
#    -> checkpoint.init_from -> fine-tuned at np 2 with evaluation on the held-out conversations
#    (the val loss ends below the first logged training loss) -> `ckpt export --format hf`, which
#    the safetensors package reads back with every tensor fine-tuning changed; `generate --chat`
#    answers from the fine-tuned checkpoint, wrapped as the run's chat.json says;
#  - the same folder with data.packed: false trains on windows, warning that its masks go unread;
#  - refusals, exit 2 and named: shards without .docs, a mask byte that is not 0 or 1, document
#    lengths that do not sum to the shard, the Llama without token data.
#
# Tolerance. The runs sum the same per-token gradients in another grouping (rows in a GEMM,
# micro-steps accumulated, ranks all-reduced), each divided by the same count. Regrouping a
# float32 sum of n terms moves it by at most about n ulps (n u sum|terms|, u = 2^-24; Higham 4.2);
# the test allows 4 n ulps of the largest parameter, n the most trainable targets a step counts
# (from the log). SGD's update is lr times the gradient, so a loss normalised per rank — each rank's
# own mean, averaged — weighs the ranks' rows unequally and moves the parameters by a share of the
# step itself, far beyond that (checked once by planting exactly that bug).
source "$(dirname "$0")/../../lib.sh"
CFG=$DDP_SRC/tests/launcher/trainer/llama_sft_tiny.yaml
CHAT=$TMP/chat
python3 -c 'import jinja2, tokenizers' 2>/dev/null || { echo "SKIP: scripts/setup --text installs jinja2 and tokenizers"; exit 77; }
"$DDP_SRC/scripts/prepare-chat" --tokenizer "$DDP_SRC/configs/chat/byte-chatml" "$DDP_SRC/configs/chat/kjv-chat.jsonl" \
    "$CHAT" >"$TMP/prepare.log" 2>&1
check "prepare-chat renders the repository's chat data" [ -f "$CHAT/train_000000.docs" ]

# run NAME NP BATCH ACCUM [overrides...]: the worker under mpirun with $RUN_CFG (default $CFG) into
# $TMP/NAME, its log $TMP/NAME.log
run() {
    local name=$1 np=$2 b=$3 a=$4
    shift 4
    timeout 300 mpirun -np "$np" --oversubscribe --bind-to none "$DDPRUN_WORKER" "${RUN_CFG:-$CFG}" \
        run.dir="$TMP/$name" data.path="$CHAT" data.batch_size="$b" train.grad_accum="$a" "$@" >"$TMP/$name.log" 2>&1
}
ckpt() { echo "$TMP/$1/checkpoints/ckpt-00000004.ddp"; }
losses() { grep -o 'step [0-9]*/[0-9]* loss [0-9.]*' "$TMP/$1.log"; }

# ---- the same update whatever the split ------------------------------------------------------
run np1 1 8 1
run np2 2 4 1
run np4 4 1 2
run other 1 6 1
for n in np1 np2 np4 other; do check "$n trains 4 steps" [ -f "$(ckpt $n)" ]; done
check "the loss is logged per trainable token with its count" grep -q 'loss [0-9.]* over [0-9]* targets' "$TMP/np1.log"
check "the data report names the packing" grep -q 'data train: 570 documents .* packed into [0-9]* rows' "$TMP/np1.log"
check "... and no unread masks" bash -c "! grep -q 'leaves unread' '$TMP/np1.log'"
run windows 1 8 1 data.packed=false train.max_steps=1
check "chat data read as windows (data.packed: false): trains" [ $? -eq 0 ]
check "... saying the masks go unread" grep -q "warning: .*data.path $CHAT holds loss masks .*data.packed: false leaves unread" \
    "$TMP/windows.log"
N=$(grep -o 'over [0-9]* targets' "$TMP/np1.log" | awk '{print $2}' | sort -n | tail -1)
check "metrics.jsonl records each step's targets as the progress line does" \
    [ "$(grep -o 'over [0-9]* targets' "$TMP/np1.log" | awk '{print $2}')" = \
      "$(grep '"kind":"train"' "$TMP/np1/metrics.jsonl" | grep -o '"targets":[0-9]*' | cut -d: -f2)" ]
TOL=$(python3 -c "print(4 * ${N:-0} * 2**-24)")
echo "# the most targets in a step: $N; tolerance $TOL of the largest parameter"
check "np 2 x 4 rows ends where np 1 x 8 rows does" "$CKPT_COMPARE" "$(ckpt np1)" "$(ckpt np2)" param/ "$TOL"
check "np 4 x 1 row x 2 accumulation ends there too" "$CKPT_COMPARE" "$(ckpt np1)" "$(ckpt np4)" param/ "$TOL"
check "a different global batch does not (the referee can fail)" \
    bash -c "! '$CKPT_COMPARE' '$(ckpt np1)' '$(ckpt other)' param/ '$TOL' >/dev/null"
L1=$(losses np1) L2=$(losses np2) L4=$(losses np4)
check "every step logs the same loss at np 1, 2 and 4" bash -c "[ -n '$L1' ] && [ '$L1' = '$L2' ] && [ '$L1' = '$L4' ]"
# tokens/s counts the positions that hold tokens, over every rank: a step's tokens per row (the
# ratio of the two rates, one line a step, each rate printed to 0.05, which bounds the ratio's
# error) is the same at np 1, 2 and 4, at most seq_len 128, and below it where the step's rows hold
# padding (the data report: 94.4% of the positions hold tokens, so some step's rows must)
tokens_per_row() { grep '"kind":"train"' "$TMP/$1/metrics.jsonl" | python3 -c '
import json, sys
for r in map(json.loads, sys.stdin):
    s, k = r["samples_per_s"], r["tokens_per_s"]
    print("%.4f:%.4f" % (k / s, k / s * (0.05 / s + 0.05 / k)), end=" ")'; }
R1=$(tokens_per_row np1) R2=$(tokens_per_row np2) R4=$(tokens_per_row np4)
echo "# tokens per row:its error bound, step by step: $R1"
check "tokens/s leaves padding out, counted over every rank" python3 -c "
import sys
r = [[tuple(map(float, x.split(':'))) for x in a.split()] for a in sys.argv[1:]]
same = all(len(x) == len(r[0]) and all(abs(a[0] - b[0]) <= a[1] + b[1] for a, b in zip(x, r[0])) for x in r)
sys.exit(not (r[0] and same and all(a - e <= 128 for a, e in r[0]) and min(a + e for a, e in r[0]) < 128))" "$R1" "$R2" "$R4"

# ---- GPT-2 on the same packed rows: its position table read per document -------------------------
GPT2_SHAPE='gpt2: {n_layer: 1, n_head: 2, n_embd: 32, block_size: 128, vocab_size: 256}'
sed "/^  llama:/d; s/kind: llama/kind: gpt2\n  $GPT2_SHAPE/" "$CFG" >"$TMP/gpt2.yaml"
RUN_CFG=$TMP/gpt2.yaml run gpt2_np1 1 8 1
RUN_CFG=$TMP/gpt2.yaml run gpt2_np2 2 4 1
for n in gpt2_np1 gpt2_np2; do check "$n trains 4 steps on packed rows" [ -f "$(ckpt $n)" ]; done
check "GPT-2: np 2 x 4 rows ends where np 1 x 8 rows does" "$CKPT_COMPARE" "$(ckpt gpt2_np1)" "$(ckpt gpt2_np2)" \
    param/ "$TOL"

# ---- configs/llama_sft.yaml: from a Hugging Face folder to a Hugging Face folder ---------------
"$DDPRUN" ckpt export --format hf "$(ckpt np1)" "$TMP/hf" >"$TMP/export1.log" 2>&1
check "the np 1 run exported as a Hugging Face folder" [ -f "$TMP/hf/model.safetensors" ]
timeout 300 "$DDPRUN" -np 2 "$DDP_SRC/configs/llama_sft.yaml" run.dir="$TMP/sft" data.path="$CHAT" \
    checkpoint.init_from="$TMP/hf" train.max_steps=35 train.eval_every=35 device=cpu >"$TMP/sft.log" 2>&1
check "configs/llama_sft.yaml fine-tunes from the folder" \
    bash -c "[ $? -eq 0 ] && grep -q 'parameters from the Hugging Face folder' '$TMP/sft.log'"
check "it evaluates on the held-out conversations" grep -q 'eval epoch 1 step 35: val loss' "$TMP/sft.log"
first=$(grep -o 'loss [0-9.]* over' "$TMP/sft.log" | head -1 | awk '{print $2}')
val=$(grep -o 'val loss [0-9.]* (' "$TMP/sft.log" | tail -1 | awk '{print $3}')
echo "# fine-tuning: first logged loss $first, val loss at the end $val"
check "the val loss ends below the first training loss" python3 -c "import sys; sys.exit(not ($val < $first))"
SFT_CKPT=$(last_ckpt "$TMP/sft")
"$DDPRUN" generate "$SFT_CKPT" --chat --prompt "John 11:35" --tokens 24 >"$TMP/answer.txt" 2>"$TMP/answer.log"
check "generate --chat answers from the fine-tuned checkpoint with the run's chat.json" \
    bash -c "[ $? -eq 0 ] && [ -s '$TMP/answer.txt' ] && grep -q 'chat: 17 + 10 + 33 ids from .*chat.json' '$TMP/answer.log'"
"$DDPRUN" ckpt export --format hf "$SFT_CKPT" "$TMP/sft-hf" >"$TMP/export2.log" 2>&1
check "the fine-tuned checkpoint exported as a Hugging Face folder" [ -f "$TMP/sft-hf/model.safetensors" ]
check "safetensors reads it back: every tensor of the source folder, each changed by fine-tuning" python3 - \
    "$TMP/hf/model.safetensors" "$TMP/sft-hf/model.safetensors" <<'PY'
import sys
import safetensors
a, b = (dict(safetensors.deserialize(open(p, "rb").read())) for p in sys.argv[1:3])
assert sorted(a) == sorted(b), (sorted(a), sorted(b))
same = [k for k in a if a[k]["shape"] != b[k]["shape"] or a[k]["dtype"] != b[k]["dtype"] or a[k]["data"] == b[k]["data"]]
assert not same, f"unchanged, reshaped or retyped: {same}"
PY

# ---- refusals ----------------------------------------------------------------------------------
refused() { # description, needle, config, overrides...: exit 2 and the message names needle
    local what=$1 needle=$2 cfg=$3
    shift 3
    timeout 120 mpirun -np 1 "$DDPRUN_WORKER" "$cfg" run.dir="$TMP/refused" "$@" >"$TMP/refused.log" 2>&1
    local rc=$?
    check "$what: exit 2, naming '$needle'" bash -c "[ $rc -eq 2 ] && grep -qF -- '$needle' '$TMP/refused.log'"
}
mkdir -p "$TMP/plain" && cp "$CHAT"/*.bin "$TMP/plain/"
refused "shards without .docs" "plain/train_000000.docs" "$CFG" data.path="$TMP/plain"
cp -r "$CHAT" "$TMP/badmask"
printf '\002' | dd of="$TMP/badmask/train_000000.mask" bs=1 seek=1100 conv=notrunc 2>/dev/null
refused "a mask byte of 2" "train_000000.mask: token 76" "$CFG" data.path="$TMP/badmask"
cp -r "$CHAT" "$TMP/baddocs"
printf '\377' | dd of="$TMP/baddocs/train_000000.docs" bs=1 seek=1024 conv=notrunc 2>/dev/null
refused "document lengths that do not sum to the shard" "train_000000.docs: document" "$CFG" data.path="$TMP/baddocs"
refused "a language model without token data" "expected data.kind tokens with a language model" "$CFG" data.kind=synthetic
finish
