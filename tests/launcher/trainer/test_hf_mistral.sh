#!/usr/bin/env bash
# Mistral and Hugging Face folders through the launcher, from tests/fixtures/hf-mistral-tiny (or the
# same fixture under $DDP_TEST_FIXTURES), on byte tokens, with test_hf_qwen2.sh's config naming
# model.kind mistral only (the shape is the folder's config.json):
#  - checkpoint.init_from the fixture, a step that changes nothing, `ckpt export --format hf`:
#    model.safetensors is the fixture's byte for byte, its tensors and config.json's keys the
#    fixture's (read with the `safetensors` package); the resolved config holds config.json's shape
#    and `ddprun ckpt info` names the model mistral;
#  - np=2 training steps from the fixture, exported as MistralForCausalLM; `ddprun generate` draws;
#  - Mistral-7B-v0.1's kind of folder (the fixture with sliding_window set): at the sequence's
#    length it trains, the window in the resolved config, the checkpoint's description and the
#    exported config.json; a sequence one longer, or a config's window other than the folder's,
#    refused with exit 2 naming the keys;
#  - Mistral-Nemo's kind of folder (hf-mistral-nemo-tiny: head_dim not hidden_size / heads): a
#    step that changes nothing exports the same files, head_dim in the resolved config and the
#    description (hf-mistral-tiny's, the quotient, resolves to 0, set by a config or not); a
#    config's other head_dim refused with exit 2 naming both;
#  - refused with exit 2: a Llama folder for a mistral model (its model_type named).
source "$(dirname "$0")/../../lib.sh"
TINY=$DDP_SRC/tests/launcher/trainer/qwen2_tiny.yaml
FIX=${DDP_TEST_FIXTURES:-$DDP_SRC/tests/fixtures}
HF=$FIX/hf-mistral-tiny
DATA=$TMP/data
read -r L NH NKV C FFN NPOS V < <(python3 -c 'import json, sys; c = json.load(open(sys.argv[1]))
print(c["num_hidden_layers"], c["num_attention_heads"], c["num_key_value_heads"], c["hidden_size"],
      c["intermediate_size"], c["max_position_embeddings"], c["vocab_size"])' "$HF/config.json")
mistral() { # NP RUNDIR [overrides...]
    local np=$1 dir=$2; shift 2
    mpirun -np "$np" --oversubscribe --bind-to none "$DDPRUN_WORKER" "$TINY" model.kind=mistral run.dir="$dir" \
        data.path="$DATA" data.seq_len="$NPOS" "$@"
}
STILL=(train.max_steps=1 optimizer.kind=sgd optimizer.lr=1e-300 optimizer.momentum=0 optimizer.weight_decay=0)
python3 -c 'import safetensors' 2>/dev/null || { echo "SKIP: python3 lacks safetensors (scripts/setup --text)"; exit 77; }
"$DDP_SRC/scripts/prepare-text" --tokenizer bytes "$DDP_SRC/README.md" "$DATA" >/dev/null
check "prepare-text: byte-token data" [ -f "$DATA/tokenizer.bin" ]

mistral 1 "$TMP/f" "${STILL[@]}" checkpoint.init_from="$HF" >"$TMP/f.log" 2>&1
check "a still step from the fixture" [ $? -eq 0 ]
F=$TMP/f/checkpoints/ckpt-00000001.ddp
got=$(resolved_model_keys "$TMP/f" mistral n_layer n_head n_kv_head n_embd ffn_hidden block_size vocab_size head_dim)
check "the resolved config holds config.json's shape, head_dim $C / $NH as 0 ($got)" \
    [ "$got" = "$L $NH $NKV $C $FFN $NPOS $V 0" ]
check "ckpt info names the model mistral" bash -c "'$DDPRUN' ckpt info '$F' | grep -q '^model mistral n_layer=$L '"
mistral 1 "$TMP/q" "${STILL[@]}" checkpoint.init_from="$HF" model.mistral.head_dim=$((C / NH)) >"$TMP/q.log" 2>&1
check "a config's head_dim $((C / NH)), the folder's $C / $NH: taken (exit $?)" [ $? -eq 0 ]
check "resolved as 0" [ "$(resolved_model_keys "$TMP/q" mistral head_dim)" = 0 ]
"$DDPRUN" ckpt export --format hf "$F" "$TMP/fx" >"$TMP/fx.log" 2>&1
check "ckpt export --format hf of the Mistral" [ $? -eq 0 ]
check "saying what it wrote" grep -q "Hugging Face MistralForCausalLM, float32, 1 safetensors file" "$TMP/fx.log"
check "model.safetensors is the fixture's file byte for byte" cmp "$TMP/fx/model.safetensors" "$HF/model.safetensors"
"$DDP_SRC/tests/launcher/trainer/hf_same_tensors.py" "$TMP/fx" "$HF"
check "read with safetensors: the fixture's tensors and config.json's keys" [ $? -eq 0 ]

mistral 2 "$TMP/t" checkpoint.init_from="$HF" >"$TMP/t.log" 2>&1
check "np=2: two training steps from the fixture" [ $? -eq 0 ]
"$DDPRUN" ckpt export --format hf "$TMP/t/checkpoints/ckpt-00000002.ddp" "$TMP/tx" >/dev/null 2>&1
check "exported" [ $? -eq 0 ]
check "training changed the weights" bash -c "! cmp -s '$TMP/tx/model.safetensors' '$HF/model.safetensors'"
check "a MistralForCausalLM folder" grep -q '"MistralForCausalLM"' "$TMP/tx/config.json"
"$DDPRUN" generate "$TMP/t/checkpoints/ckpt-00000002.ddp" --tokenizer "$DATA/tokenizer.bin" --prompt "In the" \
    --tokens 8 --seed 1 >"$TMP/gen.txt" 2>"$TMP/gen.err"
check "generate draws from the trained Mistral (exit $?)" [ -s "$TMP/gen.txt" ]

# the fixture with sliding_window W, half its max_position_embeddings (the tensors linked, not copied)
W=$((NPOS / 2))
mkdir "$TMP/win"
ln -s "$HF/model.safetensors" "$TMP/win/model.safetensors"
sed "s/\"sliding_window\": null/\"sliding_window\": $W/" "$HF/config.json" >"$TMP/win/config.json"
check "the variant sets sliding_window $W" grep -q "\"sliding_window\": $W," "$TMP/win/config.json"
mistral 1 "$TMP/w" "${STILL[@]}" checkpoint.init_from="$TMP/win" data.seq_len=$W >"$TMP/w.log" 2>&1
check "sliding_window $W, data.seq_len $W: a step from the folder" [ $? -eq 0 ]
check "the resolved config holds the window" [ "$(resolved_model_keys "$TMP/w" mistral sliding_window)" = "$W" ]
check "the checkpoint's description holds it" \
    bash -c "'$DDPRUN' ckpt info '$TMP/w/checkpoints/ckpt-00000001.ddp' | grep -q ' sliding_window=$W seq_len='"
"$DDPRUN" ckpt export --format hf "$TMP/w/checkpoints/ckpt-00000001.ddp" "$TMP/wx" >/dev/null 2>&1
check "exported: config.json is the folder's, window and all" \
    diff <(grep -v transformers_version "$TMP/win/config.json") <(grep -v transformers_version "$TMP/wx/config.json")
mistral 1 "$TMP/w2" "${STILL[@]}" checkpoint.init_from="$TMP/win" data.seq_len=$((W + 1)) >"$TMP/w2.log" 2>&1
check "data.seq_len $((W + 1)) over the window: exit 2 (got $?)" [ $? -eq 2 ]
check "naming the window and the folder's sliding_window" \
    grep -q "expected data.seq_len <= model.mistral.sliding_window, got data.seq_len $((W + 1)) with model.mistral.sliding_window $W (sliding_window $W of" "$TMP/w2.log"
mistral 1 "$TMP/w3" "${STILL[@]}" checkpoint.init_from="$TMP/win" data.seq_len=$W model.mistral.sliding_window=0 \
    >"$TMP/w3.log" 2>&1
check "a config without the folder's window: exit 2 (got $?)" [ $? -eq 2 ]
check "naming both" grep -q "model.mistral.sliding_window is 0, but checkpoint.init_from's .* has sliding_window $W" \
    "$TMP/w3.log"

# heads of their own size (as Mistral-Nemo's 128 over 5120 / 32)
NEMO=$FIX/hf-mistral-nemo-tiny
HD=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["head_dim"])' "$NEMO/config.json")
mistral 1 "$TMP/n" "${STILL[@]}" checkpoint.init_from="$NEMO" >"$TMP/n.log" 2>&1
check "head_dim $HD: a still step from the folder" [ $? -eq 0 ]
check "the resolved config holds head_dim $HD" [ "$(resolved_model_keys "$TMP/n" mistral head_dim)" = "$HD" ]
check "the checkpoint's description holds it" \
    bash -c "'$DDPRUN' ckpt info '$TMP/n/checkpoints/ckpt-00000001.ddp' | grep -q ' head_dim=$HD seq_len='"
"$DDPRUN" ckpt export --format hf "$TMP/n/checkpoints/ckpt-00000001.ddp" "$TMP/nx" >/dev/null 2>&1
check "exported: model.safetensors is the folder's byte for byte" cmp "$TMP/nx/model.safetensors" "$NEMO/model.safetensors"
check "exported: config.json is the folder's, head_dim and all" \
    diff <(grep -v transformers_version "$NEMO/config.json") <(grep -v transformers_version "$TMP/nx/config.json")
mistral 1 "$TMP/n2" "${STILL[@]}" checkpoint.init_from="$NEMO" model.mistral.head_dim=$((HD + 2)) >"$TMP/n2.log" 2>&1
check "a config's head_dim other than the folder's: exit 2 (got $?)" [ $? -eq 2 ]
check "naming both" grep -q "model.mistral.head_dim is $((HD + 2)), but checkpoint.init_from's .* has head_dim $HD" \
    "$TMP/n2.log"

mistral 1 "$TMP/x1" "${STILL[@]}" checkpoint.init_from="$FIX/hf-llama-tiny" >"$TMP/x1.log" 2>&1
check "a Llama folder for a mistral model: exit 2 (got $?)" [ $? -eq 2 ]
check "naming model_type" grep -q 'model_type is "llama"; ddprun imports Mistral' "$TMP/x1.log"
finish
