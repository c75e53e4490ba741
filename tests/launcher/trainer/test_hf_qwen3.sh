#!/usr/bin/env bash
# Qwen3 and Hugging Face folders through the launcher, from tests/fixtures/hf-qwen3-tiny (or the
# same fixture under $DDP_TEST_FIXTURES), on byte tokens, with test_hf_qwen2.sh's config naming
# model.kind qwen3 only (the shape is the folder's config.json):
#  - checkpoint.init_from the fixture, a step that changes nothing, `ckpt export --format hf`:
#    model.safetensors is the fixture's byte for byte, its tensors (q_norm and k_norm among them)
#    and config.json's keys the fixture's; the same from bf16/ with --dtype bf16; the resolved
#    config holds config.json's shape, head_dim and all, and `ddprun ckpt info` names the model
#    qwen3 with its head_dim;
#  - np=2 training steps from the fixture, exported, imported back and exported again, the same
#    files; `ddprun generate` draws from it;
#  - np 3 ZeRO-3, each rank reading its own pieces of the folder, ends bit-identical to ZeRO-2,
#    and train.recompute full to none;
#  - refused with exit 2: a config's other head_dim (naming both), a Qwen2 folder for a qwen3 model
#    (its model_type named).
source "$(dirname "$0")/../../lib.sh"
source "$(dirname "$0")/hf_family.sh"
TINY=$DDP_SRC/tests/launcher/trainer/qwen2_tiny.yaml
FIX=${DDP_TEST_FIXTURES:-$DDP_SRC/tests/fixtures}
HF=$FIX/hf-qwen3-tiny
DATA=$TMP/data
read -r L NH NKV C FFN NPOS V TIE HD < <(python3 -c 'import json, sys; c = json.load(open(sys.argv[1]))
print(c["num_hidden_layers"], c["num_attention_heads"], c["num_key_value_heads"], c["hidden_size"],
      c["intermediate_size"], c["max_position_embeddings"], c["vocab_size"],
      str(c.get("tie_word_embeddings", False)).lower(), c["head_dim"])' "$HF/config.json")
qwen3() { # NP RUNDIR [overrides...]
    local np=$1 dir=$2; shift 2
    mpirun -np "$np" --oversubscribe --bind-to none "$DDPRUN_WORKER" "$TINY" model.kind=qwen3 run.dir="$dir" \
        data.path="$DATA" data.seq_len="$NPOS" "$@"
}
STILL=(train.max_steps=1 optimizer.kind=sgd optimizer.lr=1e-300 optimizer.momentum=0 optimizer.weight_decay=0)
export_hf() { "$DDPRUN" ckpt export --format hf "$@"; }
same_tensors() { "$DDP_SRC/tests/launcher/trainer/hf_same_tensors.py" "$@"; }
python3 -c 'import safetensors' 2>/dev/null || { echo "SKIP: python3 lacks safetensors (scripts/setup --text)"; exit 77; }

"$DDP_SRC/scripts/prepare-text" --tokenizer bytes "$DDP_SRC/README.md" "$DATA" >/dev/null
check "prepare-text: byte-token data" [ -f "$DATA/tokenizer.bin" ]

# ---- the fixture, unchanged ----------------------------------------------------------------
qwen3 1 "$TMP/f" "${STILL[@]}" checkpoint.init_from="$HF" >"$TMP/f.log" 2>&1
check "a still step from the fixture" [ $? -eq 0 ]
F=$TMP/f/checkpoints/ckpt-00000001.ddp
if [ "$HD" -eq $((C / NH)) ] && [ $((C % NH)) -eq 0 ]; then OWN=0; else OWN=$HD; fi
got=$(resolved_model_keys "$TMP/f" qwen3 n_layer n_head n_kv_head n_embd ffn_hidden block_size vocab_size \
    tie_embeddings head_dim)
check "the resolved config holds config.json's shape, head_dim $OWN ($got)" \
    [ "$got" = "$L $NH $NKV $C $FFN $NPOS $V $TIE $OWN" ]
check "ckpt info names the model qwen3" bash -c "'$DDPRUN' ckpt info '$F' | grep -q '^model qwen3 n_layer=$L '"
[ "$OWN" -eq 0 ] || check "... with its head_dim" bash -c "'$DDPRUN' ckpt info '$F' | grep -q ' head_dim=$HD '"
export_hf "$F" "$TMP/fx" >"$TMP/fx.log" 2>&1
check "ckpt export --format hf of the Qwen3" [ $? -eq 0 ]
check "saying what it wrote" grep -q "Hugging Face Qwen3ForCausalLM, float32, 1 safetensors file" "$TMP/fx.log"
check "model.safetensors is the fixture's file byte for byte" cmp "$TMP/fx/model.safetensors" "$HF/model.safetensors"
same_tensors "$TMP/fx" "$HF"
check "read with safetensors: the fixture's tensors and config.json's keys" [ $? -eq 0 ]
check "... q_norm and k_norm among them" python3 -c 'import sys, safetensors
names = dict(safetensors.deserialize(open(sys.argv[1], "rb").read()))
sys.exit(not all(any(n.endswith(f"self_attn.{w}.weight") for n in names) for w in ("q_norm", "k_norm")))' \
    "$TMP/fx/model.safetensors"
qwen3 1 "$TMP/b" "${STILL[@]}" checkpoint.init_from="$HF/bf16" >"$TMP/b.log" 2>&1
check "a still step from the bf16 folder" [ $? -eq 0 ]
export_hf --dtype bf16 "$TMP/b/checkpoints/ckpt-00000001.ddp" "$TMP/bx" >/dev/null 2>&1
check "exported as bf16: bf16/model.safetensors byte for byte" \
    cmp "$TMP/bx/model.safetensors" "$HF/bf16/model.safetensors"

# ---- trained at np=2, exported, imported back, exported again ---------------------------------
trained_round_trip qwen3 Qwen3 "$HF" "$DATA"

# ---- ZeRO-3 reading its own pieces; recompute ---------------------------------------------------
qwen3 3 "$TMP/z3" checkpoint.init_from="$HF" ddp.zero=3 >"$TMP/z3.log" 2>&1
check "np 3 ZeRO-3 from the folder: two steps" [ $? -eq 0 ]
check "each rank read its own pieces" grep -q "(checkpoint.init_from, each rank its own pieces)" "$TMP/z3.log"
qwen3 3 "$TMP/z2" checkpoint.init_from="$HF" ddp.zero=2 >"$TMP/z2.log" 2>&1
check "np 3 ZeRO-2 from the folder" [ $? -eq 0 ]
check "the two end bit-identical (ckpt diff)" "$DDPRUN" ckpt diff "$(last_ckpt "$TMP/z3")" "$(last_ckpt "$TMP/z2")"
qwen3 2 "$TMP/rc" checkpoint.init_from="$HF" train.recompute=full >"$TMP/rc.log" 2>&1
check "np=2 with train.recompute full" [ $? -eq 0 ]
check "ends bit-identical to none's (ckpt diff)" "$DDPRUN" ckpt diff "$(last_ckpt "$TMP/rc")" "$(last_ckpt "$TMP/t")"

# ---- refusals ------------------------------------------------------------------------------
qwen3 1 "$TMP/x1" "${STILL[@]}" checkpoint.init_from="$HF" model.qwen3.head_dim=$((HD + 2)) >"$TMP/x1.log" 2>&1
check "a config's head_dim other than the folder's: exit 2 (got $?)" [ $? -eq 2 ]
check "naming both" grep -q "model.qwen3.head_dim is $((HD + 2)), but checkpoint.init_from's .* has head_dim $OWN" \
    "$TMP/x1.log"
qwen3 1 "$TMP/x2" "${STILL[@]}" checkpoint.init_from="$FIX/hf-qwen2-tiny" >"$TMP/x2.log" 2>&1
check "a Qwen2 folder for a qwen3 model: exit 2 (got $?)" [ $? -eq 2 ]
check "naming model_type" grep -q 'model_type is "qwen2"; ddprun imports Qwen3' "$TMP/x2.log"
finish
