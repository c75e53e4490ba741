#!/usr/bin/env bash
# A Llama and Hugging Face folders through the launcher, from tests/fixtures/hf-llama-tiny (or the
# same fixture under $DDP_TEST_FIXTURES), on byte tokens, the model.llama shape read from the
# fixture's config.json:
#  - checkpoint.init_from the fixture, a step that changes nothing, `ckpt export --format hf`:
#    model.safetensors is the fixture's byte for byte, its tensors (read with the `safetensors`
#    package) the fixture's by name, shape, dtype and bytes, and config.json holds every key of the
#    fixture's (transformers_version aside) at the same value; the same from bf16/ exported with
#    --dtype bf16 is bf16/'s model.safetensors byte for byte;
#  - two training steps exported, imported back (a still step) and exported again: the same files;
#  - np 3 ZeRO-3, each rank reading its own pieces of the folder, ends bit-identical to ZeRO-2 (rank 0
#    reads the whole folder and broadcasts it); a shape other than the folder's refused there too,
#    and at np 2 the folder where rank 0 runs but not where rank 1 does (exit 2, rank 1 named);
#  - refused with exit 2: a model.llama shape other than the folder's (both named), an llm.c file
#    (not a folder) for a Llama;
#  - a config with no model.llama keys: config.json's shape on both ranks of an np=2 run and in the
#    resolved config (ffn_hidden intermediate_size, not the multiple_of rule's), resumed from the same
#    config; a key set to another value than the folder's (rope_theta, tie_embeddings) refused naming
#    it, both values and config.json, and a data.seq_len over max_position_embeddings naming both;
#  - hf-llama-scaled-tiny (rope_scaling llama3): its stretch in the resolved config and the
#    checkpoint's model, exported as the fixture's files; a config's factor other than the folder's
#    refused naming both;
#  - bos/eos token ids: a copy of the fixture with ids of its own (eos a list of three), named by a
#    path relative to the job's directory, exported from another directory with them, config.json
#    as save_pretrained writes it, its generation_config.json byte for byte (one that is no JSON
#    object, or a FIFO, refused); --token-ids-from another folder's; the checkpoint
#    copied without its run exported with a warning that its ids are the class's defaults (none
#    with --token-ids-from); the run's folder gone refused (exit 2, nothing written) until --token-ids-from names where it went; a
#    string among the ids refused naming FILE:LINE:COL; from scratch, LlamaConfig's 1 and 2.
source "$(dirname "$0")/../../lib.sh"
TINY=$DDP_SRC/tests/launcher/trainer/llama_tiny.yaml
HF=${DDP_TEST_FIXTURES:-$DDP_SRC/tests/fixtures}/hf-llama-tiny
DATA=$TMP/data
read -r L NH NKV C FFN NPOS V THETA EPS TIE < <(python3 -c 'import json, sys; c = json.load(open(sys.argv[1]))
print(c["num_hidden_layers"], c["num_attention_heads"], c["num_key_value_heads"], c["hidden_size"],
      c["intermediate_size"], c["max_position_embeddings"], c["vocab_size"], c["rope_theta"], c["rms_norm_eps"],
      str(c.get("tie_word_embeddings", False)).lower())' "$HF/config.json")
SHAPE=(model.llama.n_layer="$L" model.llama.n_head="$NH" model.llama.n_kv_head="$NKV" model.llama.n_embd="$C"
       model.llama.ffn_hidden="$FFN" model.llama.block_size="$NPOS" model.llama.vocab_size="$V"
       model.llama.rope_theta="$THETA" model.llama.norm_eps="$EPS" model.llama.tie_embeddings="$TIE"
       data.seq_len="$NPOS")
llama() { # RUNDIR [overrides...]
    local dir=$1; shift
    mpirun -np 1 --oversubscribe --bind-to none "$DDPRUN_WORKER" "$TINY" run.dir="$dir" data.path="$DATA" \
        "${SHAPE[@]}" "$@"
}
STILL=(train.max_steps=1 optimizer.kind=sgd optimizer.lr=1e-300 optimizer.momentum=0 optimizer.weight_decay=0)
export_hf() { "$DDPRUN" ckpt export --format hf "$@"; }
python3 -c 'import safetensors' 2>/dev/null || { echo "SKIP: python3 lacks safetensors (scripts/setup --text)"; exit 77; }

"$DDP_SRC/scripts/prepare-text" --tokenizer bytes "$DDP_SRC/README.md" "$DATA" >/dev/null
check "prepare-text: byte-token data" [ -f "$DATA/tokenizer.bin" ]

same_tensors() { "$DDP_SRC/tests/launcher/trainer/hf_same_tensors.py" "$@"; }

# ---- the fixture, unchanged ----------------------------------------------------------------
llama "$TMP/f" "${STILL[@]}" checkpoint.init_from="$HF" >"$TMP/f.log" 2>&1
check "a still step from the fixture" [ $? -eq 0 ]
F=$TMP/f/checkpoints/ckpt-00000001.ddp
export_hf "$F" "$TMP/fx" >"$TMP/fx.log" 2>&1
check "ckpt export --format hf of the Llama" [ $? -eq 0 ]
check "saying what it wrote" grep -q "Hugging Face LlamaForCausalLM, float32, 1 safetensors file" "$TMP/fx.log"
check "model.safetensors is the fixture's file byte for byte" cmp "$TMP/fx/model.safetensors" "$HF/model.safetensors"
same_tensors "$TMP/fx" "$HF"
check "read with safetensors: the fixture's tensors and config.json's keys" [ $? -eq 0 ]

llama "$TMP/b" "${STILL[@]}" checkpoint.init_from="$HF/bf16" >"$TMP/b.log" 2>&1
check "a still step from the bf16 folder" [ $? -eq 0 ]
export_hf --dtype bf16 "$TMP/b/checkpoints/ckpt-00000001.ddp" "$TMP/bx" >/dev/null 2>&1
check "exported as bf16: bf16/model.safetensors byte for byte" cmp "$TMP/bx/model.safetensors" "$HF/bf16/model.safetensors"
same_tensors "$TMP/bx" "$HF/bf16"
check "read with safetensors: bf16/'s tensors and config.json's keys" [ $? -eq 0 ]

# ---- trained, exported, imported back, exported again ----------------------------------------
llama "$TMP/t" checkpoint.init_from="$HF" >"$TMP/t.log" 2>&1
check "two training steps from the fixture" [ $? -eq 0 ]
export_hf "$TMP/t/checkpoints/ckpt-00000002.ddp" "$TMP/tx" >/dev/null 2>&1
check "exported" [ $? -eq 0 ]
differs() { ! cmp -s "$1" "$2"; }
check "training changed the weights" differs "$TMP/tx/model.safetensors" "$HF/model.safetensors"
llama "$TMP/r" "${STILL[@]}" checkpoint.init_from="$TMP/tx" >"$TMP/r.log" 2>&1
check "imported back" [ $? -eq 0 ]
export_hf "$TMP/r/checkpoints/ckpt-00000001.ddp" "$TMP/rx" >/dev/null 2>&1
check "exported again: the same model.safetensors" cmp "$TMP/rx/model.safetensors" "$TMP/tx/model.safetensors"
check "and config.json" cmp "$TMP/rx/config.json" "$TMP/tx/config.json"

# ---- ZeRO-3: every rank reads only its own pieces of the folder --------------------------------
llama3() { # ZERO RUNDIR [overrides...]
    local zero=$1 dir=$2; shift 2
    mpirun -np 3 --oversubscribe --bind-to none "$DDPRUN_WORKER" "$TINY" run.dir="$dir" data.path="$DATA" \
        "${SHAPE[@]}" checkpoint.init_from="$HF" ddp.zero="$zero" "$@"
}
llama3 3 "$TMP/z3" >"$TMP/z3.log" 2>&1
check "np 3 ZeRO-3 from the folder: two steps" [ $? -eq 0 ]
check "each rank read its own pieces" grep -q "(checkpoint.init_from, each rank its own pieces)" "$TMP/z3.log"
llama3 2 "$TMP/z2" >"$TMP/z2.log" 2>&1
check "np 3 ZeRO-2 from the folder (rank 0 reads, broadcasts)" [ $? -eq 0 ]
check "the two end bit-identical (ckpt diff)" "$DDPRUN" ckpt diff "$(last_ckpt "$TMP/z3")" "$(last_ckpt "$TMP/z2")"
llama3 3 "$TMP/z3x" model.llama.n_kv_head="$NH" >"$TMP/z3x.log" 2>&1
check "ZeRO-3, another n_kv_head: exit 2 (got $?)" [ $? -eq 2 ]
check "naming the key, both values and the file" grep -q "model.llama.n_kv_head is $NH, but \
checkpoint.init_from's $HF/config.json has num_key_value_heads $NKV" "$TMP/z3x.log"
# the folder where rank 0 runs but not where rank 1 does (a tmpfs over its parent in rank 1's own
# mount namespace): rank 1 is named, and no rank goes the other way (rank 0's view decides)
mkdir -p "$TMP/only0" && cp -r "$HF" "$TMP/only0/hf"
if unshare -m --propagation private mount -t tmpfs tmpfs "$TMP/only0" 2>/dev/null; then
    Z3=("$TINY" run.dir="$TMP/z3h" data.path="$DATA" "${SHAPE[@]}" checkpoint.init_from="$TMP/only0/hf" ddp.zero=3)
    timeout 120 mpirun --oversubscribe --bind-to none -np 1 "$DDPRUN_WORKER" "${Z3[@]}" : -np 1 \
        unshare -m --propagation private sh -c 'mount -t tmpfs tmpfs "$0" && exec "$@"' "$TMP/only0" \
        "$DDPRUN_WORKER" "${Z3[@]}" >"$TMP/z3h.log" 2>&1
    check "ZeRO-3, the folder on rank 0's host alone: exit 2 (got $?)" [ $? -eq 2 ]
    check "rank 1 says the folder is not on its host" grep -q "$TMP/only0/hf is a folder where rank 0 runs but not \
on this rank's host: under ZeRO-3 every rank reads its own pieces of it, so every host needs it" "$TMP/z3h.log"
    check "rank 0 names rank 1" grep -q "rank 1 could not load its pieces of checkpoint.init_from $TMP/only0/hf" \
        "$TMP/z3h.log"
else
    echo "note: the folder-on-one-host case skipped (no tmpfs in a mount namespace of its own here)"
fi

# ---- refusals ------------------------------------------------------------------------------
llama "$TMP/x1" "${STILL[@]}" checkpoint.init_from="$HF" model.llama.n_kv_head="$NH" >"$TMP/x1.log" 2>&1
check "another n_kv_head: exit 2 (got $?)" [ $? -eq 2 ]
check "naming the key, both values and the file" grep -q "model.llama.n_kv_head is $NH, but \
checkpoint.init_from's $HF/config.json has num_key_value_heads $NKV" "$TMP/x1.log"
llama "$TMP/x2" "${STILL[@]}" checkpoint.init_from="$HF/model.safetensors" >"$TMP/x2.log" 2>&1
check "a file for a Llama: exit 2 (got $?)" [ $? -eq 2 ]
check "saying a Llama starts from a folder" grep -q "is not a directory: a Llama starts from a Hugging Face folder" "$TMP/x2.log"

# ---- a config without model.llama keys: the folder's shape -----------------------------------
NOSHAPE=$TMP/noshape.yaml
sed '/llama: {/d' "$TINY" >"$NOSHAPE"
check "the shapeless config has no model.llama keys" bash -c "! grep -q 'n_layer\|llama: {' '$NOSHAPE'"
noshape() { # NP RUNDIR [overrides...]
    local np=$1 dir=$2; shift 2
    mpirun -np "$np" --oversubscribe --bind-to none "$DDPRUN_WORKER" "$NOSHAPE" run.dir="$dir" data.path="$DATA" \
        checkpoint.init_from="$HF" "$@"
}
noshape 2 "$TMP/n" >"$TMP/n.log" 2>&1
check "np=2, no model.llama keys: two steps from the folder" [ $? -eq 0 ]
check "both steps logged" grep -q "step 2" "$TMP/n.log"
got=$(resolved_model_keys "$TMP/n" llama n_layer n_head n_kv_head n_embd ffn_hidden block_size vocab_size tie_embeddings)
check "the resolved config holds config.json's shape ($got)" [ "$got" = "$L $NH $NKV $C $FFN $NPOS $V $TIE" ]
read -r RTHETA REPS < <(resolved_model_keys "$TMP/n" llama rope_theta norm_eps)
check "and its rope_theta and rms_norm_eps ($RTHETA $REPS)" \
    python3 -c 'import sys; a = [float(x) for x in sys.argv[1:]]; sys.exit(a[:2] != a[2:])' "$RTHETA" "$REPS" "$THETA" "$EPS"
check "the run says where its shape came from" \
    grep -q "model.llama shape from checkpoint.init_from $HF/config.json: llama n_layer=$L n_head=$NH n_kv_head=$NKV" \
    "$TMP/n.log"
noshape 2 "$TMP/n" train.max_steps=3 checkpoint.resume=auto >"$TMP/n2.log" 2>&1
check "resumed from the same config: exit 0" [ $? -eq 0 ]
check "from step 2" grep -q "resumed from .*ckpt-00000002.ddp: step 2" "$TMP/n2.log"

noshape 1 "$TMP/y1" model.llama.rope_theta=123 >"$TMP/y1.log" 2>&1
rc=$?
check "model.llama.rope_theta other than config.json's: exit 2 (got $rc)" [ $rc -eq 2 ]
check "naming the key, both values and the file" grep -q \
    "model.llama.rope_theta is 123, but checkpoint.init_from's $HF/config.json has rope_theta " "$TMP/y1.log"
check "and no checkpoint written" [ -z "$(ls "$TMP/y1/checkpoints" 2>/dev/null)" ]
noshape 1 "$TMP/y2" model.llama.tie_embeddings=$([ "$TIE" = true ] && echo false || echo true) >"$TMP/y2.log" 2>&1
check "model.llama.tie_embeddings other than config.json's: exit 2" [ $? -eq 2 ]
check "naming both values" grep -q "model.llama.tie_embeddings is .*, but .* has tie_word_embeddings $TIE" "$TMP/y2.log"

SEQ=$(( (NPOS > 1024 ? NPOS : 1024) + 1 ))
"$DDPRUN" -np 1 "$NOSHAPE" run.dir="$TMP/y3" data.path="$DATA" checkpoint.init_from="$HF" data.seq_len=$SEQ \
    >"$TMP/y3.log" 2>&1
rc=$?
check "data.seq_len $SEQ over config.json's max_position_embeddings: exit 2 (got $rc)" [ $rc -eq 2 ]
check "naming both and the file" grep -q "data.seq_len: expected data.seq_len <= model.llama.block_size, got \
data.seq_len $SEQ with model.llama.block_size $NPOS (max_position_embeddings $NPOS of checkpoint.init_from's \
$HF/config.json)" "$TMP/y3.log"

# ---- Llama 3.1's stretched RoPE: hf-llama-scaled-tiny (hf-llama-tiny's weights, rope_scaling llama3) --
HFS=${DDP_TEST_FIXTURES:-$DDP_SRC/tests/fixtures}/hf-llama-scaled-tiny
read -r RF RLOW RHIGH RORIG < <(python3 -c 'import json, sys; r = json.load(open(sys.argv[1]))["rope_scaling"]
print(r["factor"], r["low_freq_factor"], r["high_freq_factor"], r["original_max_position_embeddings"])' \
    "$HFS/config.json")
mpirun -np 1 --oversubscribe --bind-to none "$DDPRUN_WORKER" "$NOSHAPE" run.dir="$TMP/s" data.path="$DATA" \
    checkpoint.init_from="$HFS" "${STILL[@]}" >"$TMP/s.log" 2>&1
check "a still step from the stretched folder, no model.llama keys" [ $? -eq 0 ]
got=$(resolved_model_keys "$TMP/s" llama factor low_freq_factor high_freq_factor original_max_position_embeddings)
check "the resolved config holds config.json's rope_scaling ($got)" python3 -c 'import sys
sys.exit([float(x) for x in sys.argv[1].split()] != [float(x) for x in sys.argv[2:]])' "$got" "$RF" "$RLOW" "$RHIGH" "$RORIG"
# (bash -c: without pipefail, grep -q leaving before ckpt info has written all is no failure)
check "the checkpoint's model holds the stretch" \
    bash -c '"$1" ckpt info "$2" | grep -q "tie_embeddings=[01] rope_scaling=[0-9.]*,"' _ "$DDPRUN" \
    "$TMP/s/checkpoints/ckpt-00000001.ddp"
export_hf "$TMP/s/checkpoints/ckpt-00000001.ddp" "$TMP/sx" >/dev/null 2>&1
check "exported: the stretched fixture's model.safetensors byte for byte" cmp "$TMP/sx/model.safetensors" \
    "$HFS/model.safetensors"
same_tensors "$TMP/sx" "$HFS"
check "and its config.json's keys, rope_scaling among them" [ $? -eq 0 ]
mpirun -np 1 --oversubscribe --bind-to none "$DDPRUN_WORKER" "$NOSHAPE" run.dir="$TMP/s1" data.path="$DATA" \
    checkpoint.init_from="$HFS" model.llama.rope_scaling.factor=1 "${STILL[@]}" >"$TMP/s1.log" 2>&1
check "model.llama.rope_scaling.factor 1 against the stretched folder: exit 2" [ $? -eq 2 ]
check "naming both values and the file" grep -q \
    "model.llama.rope_scaling.factor is 1, but checkpoint.init_from's $HFS/config.json has rope_scaling.factor " \
    "$TMP/s1.log"
# ---- bos/eos token ids: the folder the run started from, --token-ids-from, from scratch, refusals --
IDS=$(cd "$TMP" && pwd -P)/ids-src
mkdir -p "$IDS" && cp "$HF/model.safetensors" "$IDS/"
python3 - "$HF/config.json" "$IDS/config.json" "$V" <<'PYIDS'
import json, sys
c, v = json.load(open(sys.argv[1])), int(sys.argv[3])
c.update(bos_token_id=v - 3, eos_token_id=[v - 1, 0, v - 2])  # Llama 3.1 Instruct's kind: three ids
open(sys.argv[2], "w").write(json.dumps(c, indent=2, sort_keys=True) + "\n")
PYIDS
# an Instruct model's generate() defaults: its end ids and sampling settings
printf '{\n  "do_sample": true,\n  "eos_token_id": [%d, 0],\n  "temperature": 0.6,\n  "top_p": 0.9\n}\n' \
    $((V - 1)) >"$IDS/generation_config.json"
(cd "$TMP" && llama i "${STILL[@]}" checkpoint.init_from=ids-src) >"$TMP/i.log" 2>&1
check "a still step from a folder with ids of its own, named relative to the job's directory" [ $? -eq 0 ]
check "the run's record names it whole" grep -q "init_from: \"$IDS\"" "$TMP/i/config.resolved.yaml"
I=$TMP/i/checkpoints/ckpt-00000001.ddp
(cd / && export_hf "$I" "$TMP/ix") >"$TMP/ix.log" 2>&1
check "exported from another directory" [ $? -eq 0 ]
check "saying whose ids it wrote" grep -q "token ids from $IDS)" "$TMP/ix.log"
# config_text OUT SRC: OUT/config.json is SRC/config.json as save_pretrained writes it (json.dumps,
# indent 2, sorted keys), transformers_version aside and OUT's torch_dtype
config_text() {
    python3 - "$1/config.json" "$2/config.json" <<'PYIDS'
import json, sys
out, src = open(sys.argv[1]).read(), json.load(open(sys.argv[2]))
src.pop("transformers_version", None)
src["torch_dtype"] = json.loads(out)["torch_dtype"]
want = json.dumps(src, indent=2, sort_keys=True) + "\n"
print({k: v for k, v in json.loads(out).items() if k.endswith("token_id")})
sys.exit(out != want)
PYIDS
}
check "config.json: the folder's, its ids and the list as save_pretrained writes them" config_text "$TMP/ix" "$IDS"
check "generation_config.json: the folder's, byte for byte" cmp "$TMP/ix/generation_config.json" \
    "$IDS/generation_config.json"
export_hf --token-ids-from "$HF" "$I" "$TMP/ix2" >"$TMP/ix2.log" 2>&1
check "--token-ids-from another folder: its ids" config_text "$TMP/ix2" "$HF"
check "--token-ids-from another folder: its generation_config.json" cmp "$TMP/ix2/generation_config.json" \
    "$HF/generation_config.json"
mkdir -p "$TMP/badgen" && cp "$HF/config.json" "$TMP/badgen/" && echo '[1, 2]' >"$TMP/badgen/generation_config.json"
export_hf --token-ids-from "$TMP/badgen" "$I" "$TMP/ix5" >"$TMP/ix5.log" 2>&1
check "a generation_config.json that is no JSON object: exit 2 (got $?)" [ $? -eq 2 ]
check "naming it" grep -q "$TMP/badgen/generation_config.json: expected a JSON object" "$TMP/ix5.log"
check "and writing nothing" [ ! -e "$TMP/ix5" ]
mkdir -p "$TMP/fifogen" && cp "$HF/config.json" "$TMP/fifogen/" && mkfifo "$TMP/fifogen/generation_config.json"
timeout 60 "$DDPRUN" ckpt export --format hf --token-ids-from "$TMP/fifogen" "$I" "$TMP/ix6" >"$TMP/ix6.log" 2>&1
check "a generation_config.json that is a FIFO: exit 2 at once, not held in open() (got $?)" [ $? -eq 2 ]
check "naming it" grep -q "$TMP/fifogen/generation_config.json: is a FIFO" "$TMP/ix6.log"
mkdir -p "$TMP/lone/checkpoints" && cp "$I" "$TMP/lone/checkpoints/"
export_hf "$TMP/lone/checkpoints/${I##*/}" "$TMP/ix7" >"$TMP/ix7.log" 2>&1
check "a checkpoint copied without its run: exported (got $?)" [ $? -eq 0 ]
check "warning that the ids it wrote are the class's defaults, as whose they are cannot be told" grep -q \
    "warning: .* has no run config beside it ($TMP/lone/checkpoints/../config.resolved.yaml).*give --token-ids-from" \
    "$TMP/ix7.log"
export_hf --token-ids-from "$IDS" "$TMP/lone/checkpoints/${I##*/}" "$TMP/ix8" >"$TMP/ix8.log" 2>&1
check "--token-ids-from: no warning, the folder's ids" eval '! grep -q warning "$TMP/ix8.log" && config_text "$TMP/ix8" "$IDS"'
mv "$IDS" "$IDS.moved"
export_hf "$I" "$TMP/ix3" >"$TMP/ix3.log" 2>&1
check "the run's folder gone: exit 2 (got $?)" [ $? -eq 2 ]
check "naming it and the way out" grep -q "checkpoint.init_from $IDS (.*config.resolved.yaml), which is gone \
.*give --token-ids-from SRC" "$TMP/ix3.log"
check "and writing nothing" [ ! -e "$TMP/ix3" ]
export_hf --token-ids-from "$IDS.moved" "$I" "$TMP/ix3" >/dev/null 2>&1
check "--token-ids-from where it went: the same config.json" cmp "$TMP/ix3/config.json" "$TMP/ix/config.json"
mkdir -p "$TMP/badids" && printf '{\n  "bos_token_id": 1,\n  "eos_token_id": [2, "</s>"]\n}\n' >"$TMP/badids/config.json"
export_hf --token-ids-from "$TMP/badids" "$I" "$TMP/ix4" >"$TMP/ix4.log" 2>&1
check "a string among the ids: exit 2 (got $?)" [ $? -eq 2 ]
check "naming FILE:LINE:COL and the key" grep -q "$TMP/badids/config.json:3:23: eos_token_id is \"</s>\"" "$TMP/ix4.log"
check "and writing nothing" [ ! -e "$TMP/ix4" ]
llama "$TMP/o" "${STILL[@]}" >"$TMP/o.log" 2>&1
check "a still step from scratch" [ $? -eq 0 ]
export_hf "$TMP/o/checkpoints/ckpt-00000001.ddp" "$TMP/ox" >"$TMP/ox.log" 2>&1
check "exported from scratch: LlamaConfig's ids, said so" grep -q "token ids the config class's defaults)" "$TMP/ox.log"
check "bos 1, eos 2" python3 -c 'import json, sys; c = json.load(open(sys.argv[1]))
sys.exit((c["bos_token_id"], c["eos_token_id"]) != (1, 2))' "$TMP/ox/config.json"
check "and no generation_config.json (transformers derives one from config.json)" \
    [ ! -e "$TMP/ox/generation_config.json" ]
finish
