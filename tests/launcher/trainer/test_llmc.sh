#!/usr/bin/env bash
# llm.c model files and text generation end to end, on a tiny GPT-2 trained for 2 steps on byte
# tokens (scripts/prepare-text --tokenizer bytes of README.md): `ddprun ckpt export --format llmc`
# writes llm.c's header and size, refuses an existing output without --force and the checkpoint
# itself always; a run at np=2 started from that file by checkpoint.init_from
# (with a learning rate too small to move a float) exports byte-identical parameters and generates
# the same text; init_from of another shape is refused naming both, nothing written; a config
# without model.gpt2 keys takes the file's shape, and one key set otherwise is refused; a resumed run
# does not read init_from; an MLP checkpoint is refused by export and generate; `ddprun generate`
# finds the tokenizer through the run's config.resolved.yaml (run from another directory than the
# job's, whose relative data.path the record holds whole), is deterministic per seed, slides a
# long prompt, takes --top-p (1: the default's text, below any one chance: the greedy text, outside
# (0, 1] refused), names an unknown flag wherever it stands, and says what to do when the tokenizer
# cannot be found.
source "$(dirname "$0")/../../lib.sh"
TINY=$DDP_SRC/tests/launcher/trainer/gpt2_tiny.yaml
DATA=$TMP/data
# gpt2 NP RUNDIR [overrides...]
gpt2() {
    local np=$1 dir=$2; shift 2
    mpirun -np "$np" --oversubscribe --bind-to none "$DDPRUN_WORKER" "$TINY" run.dir="$dir" data.path="$DATA" "$@"
}
# a step without effect: SGD's float32 step lr * g is 0 for lr 1e-300, and nothing else changes a weight
STILL=(train.max_steps=1 optimizer.kind=sgd optimizer.lr=1e-300 optimizer.momentum=0 optimizer.weight_decay=0)

"$DDP_SRC/scripts/prepare-text" --tokenizer bytes "$DDP_SRC/README.md" "$DATA" >/dev/null
check "prepare-text: byte-token data" [ -f "$DATA/tokenizer.bin" ]

(cd "$TMP" && gpt2 1 a data.path=data) >"$TMP/a.log" 2>&1
check "2-step tiny GPT-2 run, its run.dir and data.path relative to the job's directory" [ $? -eq 0 ]
A=$TMP/a/checkpoints/ckpt-00000002.ddp
"$DDPRUN" ckpt export --format llmc "$A" "$TMP/out/a.bin" >"$TMP/export.log" 2>&1
rc=$?
check "export into a missing folder: exit 2 (got $rc)" [ $rc -eq 2 ]
check "naming it" grep -q "$TMP/out/.a.bin.tmp.*cannot create" "$TMP/export.log"
mkdir -p "$TMP/out"
"$DDPRUN" ckpt export --format llmc "$A" "$TMP/out/a.bin" >"$TMP/export.log" 2>&1
check "ckpt export --format llmc" [ $? -eq 0 ]
check "export leaves only the file (no temporary)" [ "$(ls -A "$TMP/out")" = a.bin ]
# header: magic, version 3, block_size 48, vocab 256, 2 layers, 2 heads, 32 channels, padded 256;
# size: 1024 + 4 x (wte 256x32 + wpe 48x32 + 2 blocks x 12608 + ln_f 2x32)
python3 - "$TMP/out/a.bin" <<'EOF'
import os, struct, sys
d = open(sys.argv[1], "rb").read()
h = struct.unpack("<256i", d[:1024])
C, L = 32, 2
block = 4 * C + 3 * C * C + 3 * C + C * C + C + 4 * C * C + 4 * C + 4 * C * C + C
want = 1024 + 4 * (256 * C + 48 * C + L * block + 2 * C)
sys.exit(0 if h[:8] == (20240326, 3, 48, 256, 2, 2, 32, 256) and not any(h[8:]) and len(d) == want else
         f"header {h[:8]}, {len(d)} bytes, expected {want}")
EOF
check "llm.c header and size" [ $? -eq 0 ]

# an existing output is refused unless --force; the checkpoint itself never, by any path to it
cp "$A" "$TMP/a.copy"
for same in "$A" "$TMP/a/checkpoints/../checkpoints/ckpt-00000002.ddp"; do
    for force in "" --force; do
        "$DDPRUN" ckpt export --format llmc $force "$A" "$same" >/dev/null 2>"$TMP/err"
        rc=$?
        check "export onto the checkpoint itself ($force $same): exit 2 (got $rc)" [ $rc -eq 2 ]
        check "saying so" grep -q "is the checkpoint being exported" "$TMP/err"
    done
done
ln -s "$A" "$TMP/a.link"
"$DDPRUN" ckpt export --format llmc --force "$TMP/a.link" "$A" >/dev/null 2>"$TMP/err"
check "export of a link onto its target: exit 2" [ $? -eq 2 ]
check "the checkpoint is unchanged" cmp "$A" "$TMP/a.copy"
cp "$TMP/out/a.bin" "$TMP/a.bin.copy"
printf 'keep me' >"$TMP/out/other.bin"
"$DDPRUN" ckpt export --format llmc "$A" "$TMP/out/other.bin" >/dev/null 2>"$TMP/err"
check "export onto an existing file: exit 2" [ $? -eq 2 ]
check "naming --force" grep -q "other.bin exists.*--force" "$TMP/err"
check "the file is unchanged" [ "$(cat "$TMP/out/other.bin")" = "keep me" ]
"$DDPRUN" ckpt export --format llmc --force "$A" "$TMP/out/other.bin" >/dev/null 2>&1
check "--force replaces it" cmp "$TMP/out/other.bin" "$TMP/a.bin.copy"
rm -f "$TMP/out/other.bin"

for bad in "--format onnx $A x.bin" "$A $TMP/out/b.bin" "--format llmc $A"; do
    "$DDPRUN" ckpt export $bad >/dev/null 2>"$TMP/err"
    check "ckpt export $bad: usage error (exit 2)" [ $? -eq 2 ]
done

# started from the file at np=2 (rank 0 reads, all get its parameters), one step that changes nothing
gpt2 2 "$TMP/b" "${STILL[@]}" checkpoint.init_from="$TMP/out/a.bin" >"$TMP/b.log" 2>&1
check "np=2 run with checkpoint.init_from" [ $? -eq 0 ]
check "its log names the file" grep -q "parameters from the llm.c model file $TMP/out/a.bin" "$TMP/b.log"
"$DDPRUN" ckpt export --format llmc "$TMP/b/checkpoints/ckpt-00000001.ddp" "$TMP/out/b.bin" >/dev/null
check "export -> init_from -> export: byte-identical" cmp "$TMP/out/a.bin" "$TMP/out/b.bin"

# resuming its own checkpoint wins: the init file is not even read
gpt2 1 "$TMP/b" "${STILL[@]}" train.max_steps=2 checkpoint.resume=auto checkpoint.init_from="$TMP/missing.bin" \
    >"$TMP/b2.log" 2>&1
check "a resumed run ignores checkpoint.init_from" [ $? -eq 0 ]
check "and says so" grep -q "checkpoint.init_from $TMP/missing.bin not used" "$TMP/b2.log"

gpt2 1 "$TMP/c" model.gpt2.n_layer=3 checkpoint.init_from="$TMP/out/a.bin" >"$TMP/c.log" 2>&1
rc=$?
check "init_from of another shape: exit 2 (got $rc)" [ $rc -eq 2 ]
check "naming both shapes" grep -q "holds gpt2 n_layer=2 .*, the model is gpt2 n_layer=3" "$TMP/c.log"
check "and no checkpoint written" [ -z "$(ls "$TMP/c/checkpoints" 2>/dev/null)" ]

# a config without model.gpt2 keys takes the file's shape (its header, read here); one that sets a
# key to another value is refused naming it, both values and the file
sed '/gpt2: {/d' "$TINY" >"$TMP/noshape.yaml"
read -r HL HNH HC HNPOS HV < <(python3 -c 'import struct, sys
h = struct.unpack("<256i", open(sys.argv[1], "rb").read(1024))
print(h[4], h[5], h[6], h[2], h[3])' "$TMP/out/a.bin")
mpirun -np 2 --oversubscribe --bind-to none "$DDPRUN_WORKER" "$TMP/noshape.yaml" run.dir="$TMP/d" data.path="$DATA" \
    "${STILL[@]}" checkpoint.init_from="$TMP/out/a.bin" >"$TMP/d.log" 2>&1
check "np=2, no model.gpt2 keys, from the llm.c file" [ $? -eq 0 ]
check "the resolved config holds the header's shape" [ "$(resolved_gpt2_shape "$TMP/d")" = "$HL $HNH $HC $HNPOS $HV" ]
mpirun -np 1 "$DDPRUN_WORKER" "$TMP/noshape.yaml" run.dir="$TMP/e" data.path="$DATA" model.gpt2.n_head=$((HNH * 2)) \
    checkpoint.init_from="$TMP/out/a.bin" >"$TMP/e.log" 2>&1
check "model.gpt2.n_head other than the header's: exit 2" [ $? -eq 2 ]
check "naming the key, both values and the file" grep -q \
    "model.gpt2.n_head is $((HNH * 2)), but checkpoint.init_from's $TMP/out/a.bin has num_heads $HNH" "$TMP/e.log"

# generate: the tokenizer from the run's config.resolved.yaml; deterministic per seed
G=(--prompt "The checkpoint" --tokens 40)
(cd / && "$DDPRUN" generate "$A" "${G[@]}") >"$TMP/g1" 2>"$TMP/g1.err"
check "generate from another directory (exit 0)" [ $? -eq 0 ]
check "prints the prompt, then the continuation" grep -q "^The checkpoint" "$TMP/g1"
"$DDPRUN" generate "$A" "${G[@]}" >"$TMP/g2" 2>/dev/null
check "same seed, same text" cmp "$TMP/g1" "$TMP/g2"
"$DDPRUN" generate "$TMP/b/checkpoints/ckpt-00000001.ddp" "${G[@]}" >"$TMP/g3" 2>/dev/null
check "the init_from run's checkpoint generates the same text" cmp "$TMP/g1" "$TMP/g3"
"$DDPRUN" generate "$A" --prompt "$(head -c 200 "$DDP_SRC/README.md" | tr -d '\0')" --tokens 5 --temperature 0 \
    >/dev/null 2>&1
check "a prompt longer than seq_len slides (greedy)" [ $? -eq 0 ]
"$DDPRUN" generate "$A" --tokens 8 --top-k 0 --seed 9 >/dev/null 2>&1
check "no prompt: starts from a newline (byte tokenizer)" [ $? -eq 0 ]
# --top-p: 1 draws the default's text; below any one token's chance, the greedy text; outside (0, 1]
# refused naming the flag
"$DDPRUN" generate "$A" "${G[@]}" --top-p 1 >"$TMP/p1" 2>"$TMP/p1.err"
check "--top-p 1: the same text as without it" cmp "$TMP/g1" "$TMP/p1"
check "--top-p is said with the other settings" grep -q "top-k 40, top-p 1, seed 1337" "$TMP/p1.err"
"$DDPRUN" generate "$A" "${G[@]}" --temperature 0 >"$TMP/greedy" 2>/dev/null &&
    "$DDPRUN" generate "$A" "${G[@]}" --top-p 1e-9 --seed 4 >"$TMP/p0" 2>/dev/null
check "--top-p 1e-9: the greedy text" cmp "$TMP/greedy" "$TMP/p0"
for bad in 0 1.5 -0.1 x; do
    "$DDPRUN" generate "$A" "${G[@]}" --top-p "$bad" >/dev/null 2>"$TMP/pbad.err"
    check "--top-p $bad: exit 2" [ $? -eq 2 ]
    check "--top-p $bad: named" grep -q "top-p: expected a number in (0, 1\], got \"$bad\"" "$TMP/pbad.err"
done
# an unknown flag is named as such, last (not "needs a value") or before CHECKPOINT (not taking it)
for args in "$A --greedy" "--greedy $A"; do
    # shellcheck disable=SC2086 # $args is the argument list
    "$DDPRUN" generate $args >/dev/null 2>"$TMP/flag.err"
    check "generate $args: exit 2 (got $?)" [ $? -eq 2 ]
    check "generate $args: naming the unknown flag" grep -q "unknown flag --greedy" "$TMP/flag.err"
done
mkdir -p "$TMP/lone"
cp "$A" "$TMP/lone/"
"$DDPRUN" generate "$TMP/lone/ckpt-00000002.ddp" --tokens 4 >/dev/null 2>"$TMP/lone.err"
check "no run directory: exit 2" [ $? -eq 2 ]
check "and it asks for --tokenizer" grep -q "give --tokenizer PATH" "$TMP/lone.err"
"$DDPRUN" generate "$TMP/lone/ckpt-00000002.ddp" --tokens 4 --tokenizer "$DATA/tokenizer.bin" >/dev/null 2>&1
check "--tokenizer PATH" [ $? -eq 0 ]
"$DDPRUN" generate "$A" --prompt "$(printf 'ok \xff')" >/dev/null 2>"$TMP/utf8.err"
check "invalid UTF-8 prompt: exit 2, byte offset named" grep -q "invalid UTF-8 at byte offset 3" "$TMP/utf8.err"

# an MLP checkpoint: refused by both, naming the model
mpirun -np 1 --oversubscribe --bind-to none "$DDPRUN_WORKER" "$SMALL" run.dir="$TMP/mlp" data.kind=synthetic \
    data.synthetic.train=256 data.synthetic.test=64 train.max_steps=5 >/dev/null 2>&1
M=$(last_ckpt "$TMP/mlp")
check "an MLP run's checkpoint" [ -n "$M" ]
"$DDPRUN" ckpt export --format llmc "$M" "$TMP/out/mlp.bin" >/dev/null 2>"$TMP/mlp.err"
check "export of an MLP checkpoint: exit 2" [ $? -eq 2 ]
check "naming the model" grep -q "checkpoint of mlp hidden=\[64,32\].*only GPT-2" "$TMP/mlp.err"
check "and writing nothing" [ ! -e "$TMP/out/mlp.bin" ]
"$DDPRUN" generate "$M" --tokenizer "$DATA/tokenizer.bin" >/dev/null 2>"$TMP/mlpg.err"
check "generate from an MLP checkpoint: exit 2" [ $? -eq 2 ]
check "naming the model" grep -q "checkpoint of mlp hidden=.*only language models' checkpoints can be generated from" "$TMP/mlpg.err"
finish
