#!/usr/bin/env bash
# Qwen2 and Hugging Face folders through the launcher, from tests/fixtures/hf-qwen2-tiny (or the
# same fixture under $DDP_TEST_FIXTURES), on byte tokens, with a config that names the kind only
# (tests/launcher/trainer/qwen2_tiny.yaml: the shape is the folder's config.json):
#  - checkpoint.init_from the fixture, a step that changes nothing, `ckpt export --format hf`:
#    model.safetensors is the fixture's byte for byte, its tensors (read with the `safetensors`
#    package) the fixture's, config.json every key of the fixture's (transformers_version aside);
#    the same from bf16/ exported with --dtype bf16 is bf16/'s model.safetensors byte for byte;
#  - the resolved config holds config.json's shape; `ddprun ckpt info` names the model qwen2;
#  - np=2 training steps from the fixture lower nothing in the weights' format: exported, imported
#    back (a still step) and exported again, the same files; `ddprun generate` draws from it;
#  - refused with exit 2: a Llama folder named for a qwen2 model (its model_type named), a file.
source "$(dirname "$0")/../../lib.sh"
source "$(dirname "$0")/hf_family.sh"
TINY=$DDP_SRC/tests/launcher/trainer/qwen2_tiny.yaml
FIX=${DDP_TEST_FIXTURES:-$DDP_SRC/tests/fixtures}
HF=$FIX/hf-qwen2-tiny
DATA=$TMP/data
read -r L NH NKV C FFN NPOS V TIE < <(python3 -c 'import json, sys; c = json.load(open(sys.argv[1]))
print(c["num_hidden_layers"], c["num_attention_heads"], c["num_key_value_heads"], c["hidden_size"],
      c["intermediate_size"], c["max_position_embeddings"], c["vocab_size"],
      str(c.get("tie_word_embeddings", False)).lower())' "$HF/config.json")
qwen2() { # NP RUNDIR [overrides...]
    local np=$1 dir=$2; shift 2
    mpirun -np "$np" --oversubscribe --bind-to none "$DDPRUN_WORKER" "$TINY" run.dir="$dir" data.path="$DATA" \
        data.seq_len="$NPOS" "$@"
}
STILL=(train.max_steps=1 optimizer.kind=sgd optimizer.lr=1e-300 optimizer.momentum=0 optimizer.weight_decay=0)
export_hf() { "$DDPRUN" ckpt export --format hf "$@"; }
python3 -c 'import safetensors' 2>/dev/null || { echo "SKIP: python3 lacks safetensors (scripts/setup --text)"; exit 77; }

"$DDP_SRC/scripts/prepare-text" --tokenizer bytes "$DDP_SRC/README.md" "$DATA" >/dev/null
check "prepare-text: byte-token data" [ -f "$DATA/tokenizer.bin" ]

same_tensors() { "$DDP_SRC/tests/launcher/trainer/hf_same_tensors.py" "$@"; }

# ---- the fixture, unchanged ----------------------------------------------------------------
qwen2 1 "$TMP/f" "${STILL[@]}" checkpoint.init_from="$HF" >"$TMP/f.log" 2>&1
check "a still step from the fixture" [ $? -eq 0 ]
F=$TMP/f/checkpoints/ckpt-00000001.ddp
got=$(resolved_model_keys "$TMP/f" qwen2 n_layer n_head n_kv_head n_embd ffn_hidden block_size vocab_size tie_embeddings)
check "the resolved config holds config.json's shape ($got)" [ "$got" = "$L $NH $NKV $C $FFN $NPOS $V $TIE" ]
check "ckpt info names the model qwen2" bash -c "'$DDPRUN' ckpt info '$F' | grep -q '^model qwen2 n_layer=$L '"
export_hf "$F" "$TMP/fx" >"$TMP/fx.log" 2>&1
check "ckpt export --format hf of the Qwen2" [ $? -eq 0 ]
check "saying what it wrote" grep -q "Hugging Face Qwen2ForCausalLM, float32, 1 safetensors file" "$TMP/fx.log"
check "model.safetensors is the fixture's file byte for byte" cmp "$TMP/fx/model.safetensors" "$HF/model.safetensors"
same_tensors "$TMP/fx" "$HF"
check "read with safetensors: the fixture's tensors and config.json's keys" [ $? -eq 0 ]
check "... the q/k/v biases among them" python3 -c 'import sys, safetensors
names = dict(safetensors.deserialize(open(sys.argv[1], "rb").read()))
sys.exit(not any(n.endswith("self_attn.k_proj.bias") for n in names))' "$TMP/fx/model.safetensors"

qwen2 1 "$TMP/b" "${STILL[@]}" checkpoint.init_from="$HF/bf16" >"$TMP/b.log" 2>&1
check "a still step from the bf16 folder" [ $? -eq 0 ]
export_hf --dtype bf16 "$TMP/b/checkpoints/ckpt-00000001.ddp" "$TMP/bx" >/dev/null 2>&1
check "exported as bf16: bf16/model.safetensors byte for byte" cmp "$TMP/bx/model.safetensors" "$HF/bf16/model.safetensors"

# ---- trained at np=2, exported, imported back, exported again ---------------------------------
trained_round_trip qwen2 Qwen2 "$HF" "$DATA"

# ---- refusals ------------------------------------------------------------------------------
qwen2 1 "$TMP/x1" "${STILL[@]}" checkpoint.init_from="$FIX/hf-llama-tiny" >"$TMP/x1.log" 2>&1
check "a Llama folder for a qwen2 model: exit 2 (got $?)" [ $? -eq 2 ]
check "naming model_type" grep -q "model_type" "$TMP/x1.log"
qwen2 1 "$TMP/x2" "${STILL[@]}" checkpoint.init_from="$HF/model.safetensors" >"$TMP/x2.log" 2>&1
check "a file for a Qwen2: exit 2 (got $?)" [ $? -eq 2 ]
check "saying a Qwen2 starts from a folder" grep -q "a Qwen2 starts from a Hugging Face folder" "$TMP/x2.log"
finish
