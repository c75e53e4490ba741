#!/usr/bin/env bash
# checkpoint.init_from with a Hugging Face `save_pretrained` folder (tests/fixtures/hf-gpt2-tiny,
# or the same fixture under $DDP_TEST_FIXTURES), on byte tokens: at np=2 a step that changes nothing
# leaves exactly the folder's parameters, checked through `ddprun ckpt export --format llmc`
# against the safetensors file read here independently (wte's rows and padding, a Conv1D weight
# transposed, ln_f); two real training steps from it; and a model.gpt2 shape other than
# config.json's refused with exit 2 naming both shapes, nothing written. A config without
# model.gpt2 keys takes config.json's shape (the resolved config shows it) and resumes from the same
# config; a key it sets to another value is refused naming it, both values and config.json; a
# data.seq_len over n_positions is refused naming both. Every shape comes from the fixture's
# config.json.
source "$(dirname "$0")/../../lib.sh"
TINY=$DDP_SRC/tests/launcher/trainer/gpt2_tiny.yaml
HF=${DDP_TEST_FIXTURES:-$DDP_SRC/tests/fixtures}/hf-gpt2-tiny
DATA=$TMP/data
read -r L NH C NPOS V < <(hf_gpt2_shape "$HF")
SHAPE=(model.gpt2.n_layer="$L" model.gpt2.n_head="$NH" model.gpt2.n_embd="$C" model.gpt2.block_size="$NPOS"
       model.gpt2.vocab_size="$V" data.seq_len="$NPOS")
gpt2() { # NP RUNDIR [overrides...]
    local np=$1 dir=$2; shift 2
    mpirun -np "$np" --oversubscribe --bind-to none "$DDPRUN_WORKER" "$TINY" run.dir="$dir" data.path="$DATA" \
        "${SHAPE[@]}" "$@"
}
STILL=(train.max_steps=1 optimizer.kind=sgd optimizer.lr=1e-300 optimizer.momentum=0 optimizer.weight_decay=0)

"$DDP_SRC/scripts/prepare-text" --tokenizer bytes "$DDP_SRC/README.md" "$DATA" >/dev/null
check "prepare-text: byte-token data" [ -f "$DATA/tokenizer.bin" ]

gpt2 2 "$TMP/a" "${STILL[@]}" checkpoint.init_from="$HF" >"$TMP/a.log" 2>&1
check "np=2 run from the Hugging Face folder" [ $? -eq 0 ]
check "saying where the parameters came from" grep -q "parameters from the Hugging Face folder $HF" "$TMP/a.log"
"$DDPRUN" ckpt export --format llmc "$TMP/a/checkpoints/ckpt-00000001.ddp" "$TMP/a.bin" >/dev/null 2>&1
check "ckpt export --format llmc" [ $? -eq 0 ]
python3 - "$HF/model.safetensors" "$TMP/a.bin" "$L" "$C" "$NPOS" "$V" <<'PY'
import json, struct, sys
st, llmc = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read()
L, C, NPOS, V = map(int, sys.argv[3:7])
n = struct.unpack("<Q", st[:8])[0]
head, data = json.loads(st[8:8 + n]), st[8 + n:]
def hf(name):
    e = head.get("transformer." + name) or head[name]
    assert e["dtype"] == "F32"
    b, end = e["data_offsets"]
    return e["shape"], struct.unpack(f"<{(end - b) // 4}f", data[b:end])
Vp = (V + 127) // 128 * 128
def ours(offset, count):  # floats at this float offset of llm.c's parameter area
    return struct.unpack(f"<{count}f", llmc[1024 + 4 * offset:1024 + 4 * (offset + count)])
_, wte = hf("wte.weight")
got = ours(0, Vp * C)
assert got[:V * C] == wte, "wte rows"
assert not any(got[V * C:]), "wte padding rows not zero"
# llm.c order: wte, wpe, ln1w (L x C), ln1b (L x C), qkvw (L x 3C x C): layer 0's c_attn.weight [out, in]
(cin, cout), w = hf("h.0.attn.c_attn.weight")
got = ours(Vp * C + NPOS * C + 2 * L * C, 3 * C * C)
assert (cin, cout) == (C, 3 * C)
assert all(got[o * C + i] == w[i * cout + o] for o in range(cout) for i in range(cin)), "c_attn transposed"
_, lnfb = hf("ln_f.bias")
assert ours(len(llmc) // 4 - 256 - C, C) == lnfb, "ln_f.bias"
PY
check "the run's parameters are the folder's (wte padded, Conv1D transposed)" [ $? -eq 0 ]

gpt2 1 "$TMP/b" checkpoint.init_from="$HF" train.max_steps=2 >"$TMP/b.log" 2>&1
check "two training steps from the folder" [ $? -eq 0 ]
check "both steps logged" grep -q "step 2" "$TMP/b.log"

gpt2 1 "$TMP/c" model.gpt2.n_layer=$((L + 1)) checkpoint.init_from="$HF" >"$TMP/c.log" 2>&1
rc=$?
check "a model.gpt2 shape other than config.json's: exit 2 (got $rc)" [ $rc -eq 2 ]
check "naming both shapes" grep -q "config.json describes gpt2 n_layer=$L .*, the model is gpt2 n_layer=$((L + 1))" "$TMP/c.log"
check "and no checkpoint written" [ -z "$(ls "$TMP/c/checkpoints" 2>/dev/null)" ]

# A config that leaves the shape out: the folder's, in every rank's model and the resolved config.
NOSHAPE=$TMP/noshape.yaml
sed '/gpt2: {/d' "$TINY" >"$NOSHAPE"
check "the shapeless config has no model.gpt2 keys" bash -c "! grep -q 'n_layer\|gpt2:' '$NOSHAPE'"
noshape() { # NP RUNDIR [overrides...]
    local np=$1 dir=$2; shift 2
    mpirun -np "$np" --oversubscribe --bind-to none "$DDPRUN_WORKER" "$NOSHAPE" run.dir="$dir" data.path="$DATA" \
        checkpoint.init_from="$HF" "$@"
}
noshape 2 "$TMP/d" train.max_steps=2 >"$TMP/d.log" 2>&1
check "np=2, no model.gpt2 keys: two steps from the folder" [ $? -eq 0 ]
check "both steps logged" grep -q "step 2" "$TMP/d.log"
check "the resolved config holds config.json's shape ($(resolved_gpt2_shape "$TMP/d"))" \
    [ "$(resolved_gpt2_shape "$TMP/d")" = "$L $NH $C $NPOS $V" ]
check "the run says where its shape came from" grep -q "model.gpt2 shape from checkpoint.init_from $HF/config.json" \
    "$TMP/d.log"
noshape 2 "$TMP/d" train.max_steps=3 checkpoint.resume=auto >"$TMP/d2.log" 2>&1
check "resumed from the same config: exit 0" [ $? -eq 0 ]
check "from step 2" grep -q "resumed from .*ckpt-00000002.ddp: step 2" "$TMP/d2.log"
check "and trained step 3" grep -q "step 3" "$TMP/d2.log"

noshape 2 "$TMP/e" model.gpt2.n_layer=$((L + 1)) >"$TMP/e.log" 2>&1
rc=$?
check "model.gpt2.n_layer other than config.json's: exit 2 (got $rc)" [ $rc -eq 2 ]
check "naming the key, both values and the file" grep -q \
    "model.gpt2.n_layer is $((L + 1)), but checkpoint.init_from's $HF/config.json has n_layer $L" "$TMP/e.log"
check "and no checkpoint written" [ -z "$(ls "$TMP/e/checkpoints" 2>/dev/null)" ]

# Longer than the folder's n_positions and than the default block_size: ddprun's own check of the
# config cannot judge it (the shape is the folder's), the ranks refuse it once they know the shape.
SEQ=$(( (NPOS > 1024 ? NPOS : 1024) + 1 ))
"$DDPRUN" -np 1 "$NOSHAPE" run.dir="$TMP/f" data.path="$DATA" checkpoint.init_from="$HF" data.seq_len=$SEQ \
    >"$TMP/f.log" 2>&1
rc=$?
check "data.seq_len $SEQ over config.json's n_positions: exit 2 (got $rc)" [ $rc -eq 2 ]
check "naming both and the file" grep -q "data.seq_len: expected data.seq_len <= model.gpt2.block_size, got \
data.seq_len $SEQ with model.gpt2.block_size $NPOS (n_positions $NPOS of checkpoint.init_from's $HF/config.json)" \
    "$TMP/f.log"
finish
