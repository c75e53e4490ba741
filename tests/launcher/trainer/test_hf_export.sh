#!/usr/bin/env bash
# `ddprun ckpt export --format hf` on GPT-2 checkpoints started from tests/fixtures/hf-gpt2-tiny (or
# the same fixture under $DDP_TEST_FIXTURES), on byte tokens:
#  - the fixture through a step that changes nothing, exported: model.safetensors is the fixture's
#    file byte for byte, its tensors (read with the `safetensors` package) the fixture's by name,
#    shape, dtype and bytes, and config.json holds every key of the fixture's (transformers_version
#    aside) at the same value; a source folder's tokenizer files come along byte for byte;
#    --force over another model's folder (also a mount point, written in place) leaves none of its
#    tokenizer's files (where the source has a tokenizer; the set whole where it has none) nor its
#    weights in other formats or adapter, and keeps its README and original/ folder, with no
#    temporary left; without --force, a folder with weights in another format or a tokenizer's file
#    is refused;
#  - two training steps, exported in float32 and imported back (checkpoint.init_from, a still step):
#    every parameter byte-identical (compared through `ckpt export --format llmc`); in bf16 every
#    re-imported parameter is the float32 one rounded to nearest even (rounded here independently);
#    sharded (--max-shard-mb) into the files and index huggingface_hub's split names (the split
#    computed here), each read back, and imported back byte-identical; --force replacing a sharded
#    export by one file removes the stale shards and index;
#  - --force stopped part-way (a file-size limit) leaves the earlier export and the user's files in
#    DIR byte for byte as they were, no temporary folder; an unhindered one keeps the user's files,
#    also through a symbolic link to DIR; a temporary folder a killed export left, even one of the
#    name a pid-based scheme would give this export, is named in a warning and not in the way;
#  - DIR a mount point (a tmpfs, a bind mount of a folder of the same filesystem) and DIR in a
#    folder no entry can be made in (chattr +i): the export is written inside DIR and its files
#    renamed in, those of an export elsewhere byte for byte, the user's file kept, no temporary
#    left; --force from sharded to one file removes the stale shards and index there too; a rename
#    that fails before the first file is in (a folder in the way) leaves DIR as it was, one that
#    fails after it leaves DIR without config.json, saying so;
#  - refused with exit 2, nothing written: a folder already holding config.json or a shard, a path
#    that is a file, a folder in a missing one (before the checkpoint is read), an MLP checkpoint
#    (and the missing folder is not created), bad flag values (--max-shard-mb out of range saying
#    the range).
source "$(dirname "$0")/../../lib.sh"
source "$(dirname "$0")/../../lib_mounts.sh"
TINY=$DDP_SRC/tests/launcher/trainer/gpt2_tiny.yaml
HF=${DDP_TEST_FIXTURES:-$DDP_SRC/tests/fixtures}/hf-gpt2-tiny
DATA=$TMP/data
read -r L NH C NPOS V < <(hf_gpt2_shape "$HF")
SHAPE=(model.gpt2.n_layer="$L" model.gpt2.n_head="$NH" model.gpt2.n_embd="$C" model.gpt2.block_size="$NPOS"
       model.gpt2.vocab_size="$V" data.seq_len="$NPOS")
gpt2() { # RUNDIR [overrides...]
    local dir=$1; shift
    mpirun -np 1 --oversubscribe --bind-to none "$DDPRUN_WORKER" "$TINY" run.dir="$dir" data.path="$DATA" \
        "${SHAPE[@]}" "$@"
}
STILL=(train.max_steps=1 optimizer.kind=sgd optimizer.lr=1e-300 optimizer.momentum=0 optimizer.weight_decay=0)
export_hf() { "$DDPRUN" ckpt export --format hf "$@"; }
# llmc CKPT OUT: the checkpoint's parameters as llm.c's file (every float, padding rows included)
llmc() { "$DDPRUN" ckpt export --format llmc "$1" "$2" >/dev/null; }
# reimport NAME FOLDER: a still step from FOLDER, its parameters as $TMP/NAME.bin
reimport() {
    gpt2 "$TMP/r-$1" "${STILL[@]}" checkpoint.init_from="$2" >"$TMP/r-$1.log" 2>&1 &&
        llmc "$TMP/r-$1/checkpoints/ckpt-00000001.ddp" "$TMP/$1.bin"
}
python3 -c 'import safetensors' 2>/dev/null || { echo "SKIP: python3 lacks safetensors (scripts/setup --text)"; exit 77; }

"$DDP_SRC/scripts/prepare-text" --tokenizer bytes "$DDP_SRC/README.md" "$DATA" >/dev/null
check "prepare-text: byte-token data" [ -f "$DATA/tokenizer.bin" ]

# ---- the fixture, unchanged ----------------------------------------------------------------
gpt2 "$TMP/f" "${STILL[@]}" checkpoint.init_from="$HF" >"$TMP/f.log" 2>&1
check "a still step from the fixture" [ $? -eq 0 ]
F=$TMP/f/checkpoints/ckpt-00000001.ddp
export_hf "$F" "$TMP/fx" >"$TMP/fx.log" 2>&1
check "ckpt export --format hf into a new folder" [ $? -eq 0 ]
check "saying what it wrote" grep -q "Hugging Face GPT2LMHeadModel, float32, 1 safetensors file" "$TMP/fx.log"
check "model.safetensors is the fixture's file byte for byte" cmp "$TMP/fx/model.safetensors" "$HF/model.safetensors"
check "no index for one file" [ ! -e "$TMP/fx/model.safetensors.index.json" ]
python3 - "$HF" "$TMP/fx" <<'PY'
import json, sys, safetensors
a, b = (dict(safetensors.deserialize(open(d + "/model.safetensors", "rb").read())) for d in sys.argv[1:3])
assert sorted(a) == sorted(b), (sorted(a), sorted(b))
for name in a:
    for field in ("dtype", "shape", "data"):
        assert a[name][field] == b[name][field], (name, field)
ca, cb = (json.load(open(d + "/config.json")) for d in sys.argv[1:3])
diff = {k: (v, cb.get(k)) for k, v in ca.items() if k != "transformers_version" and cb.get(k, "absent") != v}
assert not diff, diff
assert cb["n_ctx"] == cb["n_positions"] and cb["torch_dtype"] == "float32", cb
PY
check "read with the safetensors package: the fixture's names, shapes, dtypes and bytes; its config keys" [ $? -eq 0 ]
check "a source without a tokenizer: none in the export" bash -c "! ls '$TMP/fx' | grep -q -e tokenizer -e chat_template"
# the source folder's tokenizer files (the chat template among them) come along byte for byte, so
# transformers and vLLM load the export with the tokenizer it was trained with
cp -r "$HF" "$TMP/hftok"
for name in tokenizer.json tokenizer_config.json chat_template.jinja; do
    head -c 3000 /dev/urandom | base64 >"$TMP/hftok/$name"
done
gpt2 "$TMP/ftok" "${STILL[@]}" checkpoint.init_from="$TMP/hftok" >"$TMP/ftok.log" 2>&1
export_hf "$TMP/ftok/checkpoints/ckpt-00000001.ddp" "$TMP/ftokx" >"$TMP/ftokx.log" 2>&1
check "a source with a tokenizer: its files in the export, byte for byte" \
    bash -c "for n in tokenizer.json tokenizer_config.json chat_template.jinja; do cmp '$TMP/hftok/'\$n '$TMP/ftokx/'\$n || exit 1; done"
# --force over another model's folder: its tokenizer's files go with its weights in any format and
# an adapter (a tokenizer.model or vocab.json beside the new tokenizer.json, or a pytorch_model.bin
# or adapter beside the new weights, would load as the other model's); the user's README and the
# folders (Meta's original/) stay, and no temporary is left
OLD_FILES="config.json tokenizer.model tokenizer.model.v3 tekken.json vocab.json merges.txt tokenizer.json
           pytorch_model.bin consolidated.safetensors params.json adapter_config.json adapter_model.safetensors
           README.md original/consolidated.00.pth"
old_model() { # DIR: another model's folder, as the Hub gives it
    mkdir -p "$1/original"
    for name in $OLD_FILES; do echo old >"$1/$name"; done
}
old_model "$TMP/old"
refused() { # DESCRIPTION PATTERN ARGS...: exit 2, stderr matching PATTERN
    local what=$1 pattern=$2; shift 2
    export_hf "$@" >/dev/null 2>"$TMP/err"
    local rc=$?
    check "$what: exit 2 (got $rc)" [ $rc -eq 2 ]
    check "$what: saying so" grep -q -- "$pattern" "$TMP/err"
}
mkdir "$TMP/bin" && echo old >"$TMP/bin/pytorch_model.bin"
refused "a folder holding another format's weights" "already holds pytorch_model.bin; give --force" \
    "$TMP/ftok/checkpoints/ckpt-00000001.ddp" "$TMP/bin"
mkdir "$TMP/tokonly" && echo old >"$TMP/tokonly/tokenizer.model"
refused "a folder holding a tokenizer's files" "already holds tokenizer.model; give --force" \
    "$TMP/ftok/checkpoints/ckpt-00000001.ddp" "$TMP/tokonly"
NEW_FOLDER="README.md chat_template.jinja config.json generation_config.json model.safetensors original tokenizer.json \
tokenizer_config.json "
over_old_model() { # DIR WHAT: --force over old_model's DIR, from the source with a tokenizer
    export_hf --force "$TMP/ftok/checkpoints/ckpt-00000001.ddp" "$1" >/dev/null 2>"$TMP/err"
    check "$2: exit 0 (got $?)" [ $? -eq 0 ]
    check "$2: the old tokenizer, weights and adapter gone, the source's tokenizer, README and original/ there: $(ls "$1" | tr '\n' ' ')" \
        [ "$(ls "$1" | LC_ALL=C sort | tr '\n' ' ')" = "$NEW_FOLDER" ]
    check "$2: original/ as it was" [ "$(cat "$1/original/consolidated.00.pth")" = old ]
    check "$2: the tokenizer the source's" cmp "$TMP/hftok/tokenizer.json" "$1/tokenizer.json"
    check "$2: no temporary left, no warning ($(head -c 300 "$TMP/err"))" \
        bash -c '[ -z "$(ls -A "$1" "$(dirname "$1")" | grep "^\.")" ] && [ ! -s "$2" ]' _ "$1" "$TMP/err"
}
over_old_model "$TMP/old" "--force over another model's folder"
old_model "$TMP/old2"
export_hf --force "$F" "$TMP/old2" >/dev/null 2>&1
check "--force from a source without a tokenizer: exit 0" [ $? -eq 0 ]
check "the folder's tokenizer kept whole: $(ls "$TMP/old2" | tr '\n' ' ')" \
    [ "$(ls "$TMP/old2" | LC_ALL=C sort | tr '\n' ' ')" = "README.md config.json generation_config.json \
merges.txt model.safetensors original tekken.json tokenizer.json tokenizer.model tokenizer.model.v3 vocab.json " ]

# ---- trained, exported, imported back ------------------------------------------------------
gpt2 "$TMP/a" checkpoint.init_from="$HF" train.max_steps=2 >"$TMP/a.log" 2>&1
check "two training steps from the fixture" [ $? -eq 0 ]
A=$TMP/a/checkpoints/ckpt-00000002.ddp
llmc "$A" "$TMP/a.bin" && llmc "$F" "$TMP/f.bin"
check "its parameters moved" bash -c '! cmp -s "$1" "$2"' _ "$TMP/a.bin" "$TMP/f.bin"
export_hf "$A" "$TMP/h32" >/dev/null 2>&1 && reimport f32 "$TMP/h32"
check "exported in float32 and imported back" [ $? -eq 0 ]
check "every parameter byte-identical" cmp "$TMP/a.bin" "$TMP/f32.bin"

export_hf --dtype bf16 "$A" "$TMP/h16" >"$TMP/h16.log" 2>&1 && reimport bf16 "$TMP/h16"
check "exported in bf16 and imported back" [ $? -eq 0 ]
python3 - "$TMP/a.bin" "$TMP/bf16.bin" "$TMP/h16" <<'PY'
import json, struct, sys, safetensors
a, b = (open(p, "rb").read()[1024:] for p in sys.argv[1:3])
n = len(a) // 4
ua, ub = struct.unpack(f"<{n}I", a), struct.unpack(f"<{n}I", b)
def bf16(u):  # float32 bits rounded to bfloat16 (nearest, ties to even), widened back
    if (u & 0x7FFFFFFF) > 0x7F800000:
        return None
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16 & 0xFFFF) << 16
bad = [i for i in range(n) if bf16(ua[i]) != ub[i]]
assert not bad, f"{len(bad)} parameters differ, first at {bad[0]}"
assert sum(ua[i] != ub[i] for i in range(n)) > n // 2, "bf16 rounding changed almost nothing"
t = safetensors.deserialize(open(sys.argv[3] + "/model.safetensors", "rb").read())
assert {v["dtype"] for _, v in t} == {"BF16"}, {v["dtype"] for _, v in t}
assert json.load(open(sys.argv[3] + "/config.json"))["torch_dtype"] == "bfloat16"
PY
check "bf16: every re-imported parameter the float32 one rounded to nearest even; BF16 tensors" [ $? -eq 0 ]

# ---- sharded -------------------------------------------------------------------------------
LIMIT=0.06 # MB: wte and the MLP weights above it (each alone, numbered when met), the rest in shards
export_hf --max-shard-mb $LIMIT "$A" "$TMP/hs" >"$TMP/hs.log" 2>&1 && reimport shards "$TMP/hs"
check "exported in shards of $LIMIT MB and imported back" [ $? -eq 0 ]
check "every parameter byte-identical" cmp "$TMP/a.bin" "$TMP/shards.bin"
check "no model.safetensors beside the shards" [ ! -e "$TMP/hs/model.safetensors" ]
python3 - "$TMP/h32" "$TMP/hs" "$L" "$LIMIT" <<'PY'
import json, os, sys, safetensors
one, dir, L, limit = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]) * 1e6
whole = dict(safetensors.deserialize(open(one + "/model.safetensors", "rb").read()))
# GPT2LMHeadModel's state_dict order (lm_head dropped: tied), split as huggingface_hub splits it
block = ["ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
         "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight",
         "mlp.c_proj.bias"]
order = ["wte.weight", "wpe.weight"] + [f"h.{l}.{n}" for l in range(L) for n in block] + ["ln_f.weight", "ln_f.bias"]
order = ["transformer." + n for n in order]
assert sorted(order) == sorted(whole), sorted(set(order) ^ set(whole))
shards, cur, size, jumped = [], [], 0, 0
for n in order:
    b = len(whole[n]["data"])
    if b > limit:
        shards.append([n])
        jumped += len(cur) > 0  # numbered before the shard still open
        continue
    if size + b > limit:
        shards.append(cur)
        cur, size = [], 0
    cur.append(n)
    size += b
shards += [cur] if cur else []
assert len(shards) > 2 and jumped, (len(shards), jumped)
want = {n: f"model-{k + 1:05d}-of-{len(shards):05d}.safetensors" for k, s in enumerate(shards) for n in s}
index = json.load(open(dir + "/model.safetensors.index.json"))
assert index["weight_map"] == want, index["weight_map"]
assert list(index["weight_map"]) == sorted(want), "weight_map not in name order"
assert index["metadata"] == {"total_size": sum(len(v["data"]) for v in whole.values())}, index["metadata"]
files = sorted(f for f in os.listdir(dir) if f.endswith(".safetensors"))
assert files == sorted(set(want.values())), files
for f in files:
    got = dict(safetensors.deserialize(open(f"{dir}/{f}", "rb").read()))
    assert sorted(got) == sorted(n for n, v in want.items() if v == f), f
    assert all(got[n] == whole[n] for n in got), f
PY
check "the shards and index huggingface_hub's split names; each file's tensors the unsharded export's" [ $? -eq 0 ]

export_hf --force "$A" "$TMP/hs" >/dev/null 2>&1
check "--force: one file over a sharded export" [ $? -eq 0 ]
check "the stale shards and index removed (the run's folder's generation_config.json carried)" \
    [ "$(ls "$TMP/hs")" = "$(printf 'config.json\ngeneration_config.json\nmodel.safetensors')" ]
check "generation_config.json: the folder the run started from's, byte for byte" \
    cmp "$TMP/hs/generation_config.json" "$HF/generation_config.json"
check "the file the float32 export's" cmp "$TMP/hs/model.safetensors" "$TMP/h32/model.safetensors"

# ---- --force writes the whole folder beside DIR and renames it into place ------------------
# DIR of an earlier export and the user's own files (a file, a folder) as the test's snapshot;
# a --force export that a file-size limit stops part-way (SIGXFSZ ignored: write fails with
# EFBIG, as on a full disk; the first shard fits, a later one does not) leaves DIR byte for byte as
# it was and no temporary folder; then one that succeeds replaces the export, keeping the user's
# files, also through a symbolic link to DIR (the link stays a link).
K=$TMP/keep
export_hf "$A" "$K" >/dev/null 2>&1 && echo keep >"$K/notes.txt" && mkdir "$K/sub" && echo sub >"$K/sub/x"
check "an export beside the user's files" [ $? -eq 0 ]
cp -a "$K" "$TMP/keep.before"
LIMIT2=0.2 # MB: three shards, the second the largest (the limit: the first one's size)
export_hf --max-shard-mb $LIMIT2 "$A" "$TMP/probe" >/dev/null 2>&1
KB=$(( ($(stat -c %s "$TMP"/probe/model-00001-of-*.safetensors) + 1023) / 1024 ))
largest=$(stat -c %s "$TMP"/probe/model-*.safetensors | sort -n | tail -n 1)
check "a later shard above the first's $KB KiB" [ "$largest" -gt $((KB * 1024)) ]
(trap '' XFSZ; ulimit -f $KB; export_hf --force --max-shard-mb $LIMIT2 "$A" "$K") >/dev/null 2>"$TMP/err"
rc=$?
check "--force stopped part-way by a file-size limit: exit 1 (got $rc)" [ $rc -eq 1 ]
check "naming a later shard and the reason" grep -qE "model-0000[2-9]-of-.*File too large" "$TMP/err"
check "DIR byte for byte as it was" diff -r "$TMP/keep.before" "$K"
check "no temporary folder left" [ -z "$(ls -A "$TMP" | grep '^\.keep\.')" ]
ln -s keep "$TMP/keep-link"
export_hf --force --max-shard-mb $LIMIT2 "$A" "$TMP/keep-link" >/dev/null 2>"$TMP/err"
check "--force through a link to DIR, sharded: exit 0" [ $? -eq 0 ]
check "the link still a link" [ -L "$TMP/keep-link" ]
check "the earlier model.safetensors gone, shards and index there" \
    bash -c '[ ! -e "$1/model.safetensors" ] && [ -f "$1/model.safetensors.index.json" ]' _ "$K"
check "the user's file and folder kept" bash -c 'cmp "$1/notes.txt" "$2/notes.txt" && diff -r "$1/sub" "$2/sub"' \
    _ "$TMP/keep.before" "$K"
check "no temporary or old folder left" [ -z "$(ls -A "$TMP" | grep '^\.keep')" ]
# a temporary folder a killed export left, named as this process's own would be by pid (in a
# container every run has the same pid): not in the way, named in a warning, left alone
(mkdir "$TMP/.keep.tmp.$BASHPID" && echo moved >"$TMP/.keep.tmp.$BASHPID/x" &&
    exec "$DDPRUN" ckpt export --format hf --force "$A" "$K") >/dev/null 2>"$TMP/err"
check "--force beside a leftover temporary folder of its own pid's name: exit 0 (got $?)" [ $? -eq 0 ]
check "naming the leftover" grep -q "$TMP/.keep.tmp.[0-9]* was left by an earlier write of it that did not finish" \
    "$TMP/err"
check "and leaving what it holds" [ "$(cat "$TMP"/.keep.tmp.[0-9]*/x)" = moved ]
rm -r "$TMP"/.keep.tmp.[0-9]*
check "a new folder has mkdir's mode under the umask ($(umask))" \
    [ "$(stat -c %a "$TMP/h32")" = "$(printf %o $((0777 & ~$(umask))))" ]

# ---- in place: DIR a mount point, or in a folder this process may not write -----------------
same_files() { # REF DIR: each of REF's files in DIR byte for byte
    local f
    for f in "$1"/*; do cmp "$f" "$2/$(basename "$f")" || return 1; done
}
in_place() { # DIR WHAT: DIR holds notes.txt; a sharded export, then --force to one file
    local dir=$1 what=$2
    export_hf --max-shard-mb $LIMIT2 "$A" "$dir" >/dev/null 2>"$TMP/err"
    check "$what, sharded: exit 0 (got $?)" [ $? -eq 0 ]
    check "$what: the files an export elsewhere writes" same_files "$TMP/probe" "$dir"
    check "$what: the user's file kept, no temporary left" \
        [ "$(ls -A "$dir" | grep -v '^model-0' | tr '\n' ' ')" = \
          "config.json generation_config.json model.safetensors.index.json notes.txt " ]
    export_hf --force "$A" "$dir" >/dev/null 2>>"$TMP/err"
    check "$what, --force to one file: exit 0 (got $?)" [ $? -eq 0 ]
    check "$what: the stale shards and index removed" \
        [ "$(ls -A "$dir" | tr '\n' ' ')" = "config.json generation_config.json model.safetensors notes.txt " ]
    check "$what: the file the float32 export's" cmp "$dir/model.safetensors" "$TMP/h32/model.safetensors"
}
if tmpfs_at "$TMP/vol" 64m; then
    echo keep >"$TMP/vol/notes.txt"
    in_place "$TMP/vol" "DIR a mount point"
    # a rename that fails (a folder in the way): before the first new file is in, DIR as it was
    rm "$TMP/vol/generation_config.json" && mkdir "$TMP/vol/generation_config.json" &&
        touch "$TMP/vol/generation_config.json/x" && cp -a "$TMP/vol" "$TMP/vol.before"
    export_hf --force --max-shard-mb $LIMIT2 "$A" "$TMP/vol" >/dev/null 2>"$TMP/err"
    check "a rename that fails first: exit 1 (got $?)" [ $? -eq 1 ]
    check "DIR as it was, no temporary left" diff -r "$TMP/vol.before" "$TMP/vol"
    # after it: DIR without config.json (no loader takes the mix for a model), saying so
    rm -r "$TMP/vol/generation_config.json" && mkdir "$TMP/vol/model-00002-of-00003.safetensors" &&
        touch "$TMP/vol/model-00002-of-00003.safetensors/x"
    export_hf --force --max-shard-mb $LIMIT2 "$A" "$TMP/vol" >/dev/null 2>"$TMP/err"
    check "a rename that fails later: exit 1 (got $?)" [ $? -eq 1 ]
    check "saying DIR is left without config.json" \
        grep -q "vol is left without config.json, with part of the new files: .*model-00002-of-00003.safetensors" \
        "$TMP/err"
    check "DIR without config.json, no temporary left" \
        bash -c '[ ! -e "$1/config.json" ] && [ -z "$(ls -A "$1" | grep "^\.")" ]' _ "$TMP/vol"
    rm -r "$TMP/vol/model-00002-of-00003.safetensors"
    export_hf --force "$A" "$TMP/vol" >/dev/null 2>"$TMP/err"
    check "then an export that completes: exit 0 (got $?)" [ $? -eq 0 ]
    check "the folder whole again" \
        [ "$(ls -A "$TMP/vol" | tr '\n' ' ')" = "config.json generation_config.json model.safetensors notes.txt " ]
    # another model's folder on a mount point: written in place, its folders kept
    rm -r "$TMP/vol"/* && old_model "$TMP/vol"
    over_old_model "$TMP/vol" "--force over another model's folder on a mount point"
else
    echo "note: tmpfs mount-point case skipped (cannot mount a tmpfs here)"
fi
in_place_cases in_place "DIR"

# ---- refusals ------------------------------------------------------------------------------
sum_h32() { cat "$TMP/h32"/* | cksum; }
before=$(sum_h32)
refused "a folder holding an export" "$TMP/h32 already holds .*--force" "$A" "$TMP/h32"
check "left as it was" [ "$(sum_h32)" = "$before" ]
mkdir "$TMP/part" && touch "$TMP/part/model-00002-of-00003.safetensors"
refused "a folder holding a shard" "already holds model-00002-of-00003.safetensors" "$A" "$TMP/part"
refused "a file as DIR" "is not a directory" "$A" "$A"
refused "DIR in a missing folder, before the checkpoint is read" "its parent $TMP/nowhere is missing" \
    "$TMP/no-such.ddp" "$TMP/nowhere/hf"
mkdir "$TMP/other" && echo keep >"$TMP/other/notes.txt"
export_hf "$A" "$TMP/other" >/dev/null 2>&1
check "a folder holding other files: exported into it" [ $? -eq 0 ]
check "beside them" [ -f "$TMP/other/model.safetensors" ]
check "which stay" grep -q keep "$TMP/other/notes.txt"

mpirun -np 1 --oversubscribe --bind-to none "$DDPRUN_WORKER" "$SMALL" run.dir="$TMP/mlp" data.kind=synthetic \
    data.synthetic.train=256 data.synthetic.test=64 train.max_steps=5 >/dev/null 2>&1
M=$(last_ckpt "$TMP/mlp")
check "an MLP run's checkpoint" [ -n "$M" ]
refused "an MLP checkpoint" "checkpoint of mlp .*only language models' checkpoints can be exported to Hugging Face" "$M" "$TMP/mlp-hf"
check "and the folder not created" [ ! -e "$TMP/mlp-hf" ]
for bad in "--dtype f16" "--max-shard-mb 0" "--max-shard-mb x" "--max-shard-mb"; do
    refused "ckpt export --format hf $bad" "usage:" $bad "$A" "$TMP/bad"
done
for bad in 0 -1 1e30 nan inf 1e12x; do
    refused "--max-shard-mb $bad" "--max-shard-mb $bad: expected a number of MB in (0, 1e12]" \
        --max-shard-mb $bad "$A" "$TMP/bad"
done
"$DDPRUN" ckpt export --format llmc --dtype bf16 "$A" "$TMP/bad.bin" >/dev/null 2>"$TMP/err"
check "--dtype with --format llmc: exit 2" [ $? -eq 2 ]
check "nothing written by the refusals" [ ! -e "$TMP/bad" ]
check "nor by the llmc one" [ ! -e "$TMP/bad.bin" ]
finish
