#!/usr/bin/env bash
# tests/scripts/test_prepare_text.sh [PROJECT_ROOT] — scripts/prepare-text: llm.c shard and tokenizer.bin
# headers, train+val decoding back to the input bytes through tokenizer.bin, the val split, shard
# rollover, --force (also stopped part-way by a file-size limit: OUT_DIR left as it was, the error
# a "prepare-text: error: FILE: reason" line), and the refusals; uint32 shards (magic 20240801,
# version 7) for a vocabulary above 65,535 (a test tokenizer handed to prepare-text's main), which
# ddprun-worker trains on and whose ids it reads back at their exact shard positions. A Hugging
# Face tokenizer.json of three kinds (byte-level, sentencepiece-style, and one above 65,535 ids),
# made by make_hf_tokenizer.py with the tokenizers package: each one's shards decode back to the
# inputs; refusals. Without tokenizers those checks are skipped (exit 77 at the end). The gpt2
# checks need tiktoken and the GPT-2 ranks file (scripts/setup --text); without them it exits 77
# (skipped) after the others.
# DDPRUN_WORKER names the worker; without it (tests/meson.build leaves it unset in sanitized builds,
# whose suites run no MPI jobs) the worker checks are skipped.
set -euo pipefail
ROOT=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
PREP=$ROOT/scripts/prepare-text
WORKER=${DDPRUN_WORKER:-}
TMP=$(mktemp -d /tmp/ddptest.XXXXXX)
source "$(dirname "$0")/../lib_mounts.sh"

fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok - $*"; }

# check.py OUT_DIR VOCAB EOT VAL_FRACTION SHARD_TOKENS INPUT...: every file in OUT_DIR against the
# llm.c formats (uint16 shards up to 65,535 tokens of vocabulary, uint32 above), and the decoded
# train+val stream against the inputs (each preceded by the end-of-text token's bytes when EOT >= 0:
# <|endoftext|>, or $CHECK_SEP), and tokenizer.bin's pre-tokenizer code: 1 (GPT-2's) or $CHECK_SPLIT.
# It prints how many distinct ids above 65,535 the stream holds.
cat > "$TMP/check.py" <<'EOF'
import os, re, struct, sys
from array import array
from fractions import Fraction
out, vocab, eot, frac, shard = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), Fraction(sys.argv[4]), int(sys.argv[5])
inputs = sys.argv[6:]
magic, version, width, code = (20240801, 7, 4, "I") if vocab > 65535 else (20240520, 1, 2, "H")
def die(msg):
    sys.exit(f"check: {out}: {msg}")
names = sorted(os.listdir(out))
extra = [n for n in names if n != "tokenizer.bin" and not re.match(r"^(train|val)_\d{6}\.bin$", n)]
if extra:
    die(f"unexpected files (temporaries left behind?): {extra}")
tb = open(os.path.join(out, "tokenizer.bin"), "rb").read()
h = struct.unpack("<256i", tb[:1024])
split = int(os.environ.get("CHECK_SPLIT", "1"))  # the pre-tokenizer code: GPT-2's unless said
if h[:5] != (20240328, 2, vocab, eot, split) or h[7] not in (0, 1) or any(h[8:]) or (h[7] == 0 and any(h[5:7])):
    die(f"tokenizer.bin header {h[:8]}, expected {(20240328, 2, vocab, eot, split)}, a fingerprint or none, and zeros")
if "CHECK_FINGERPRINT" in os.environ:  # the vocabulary's fingerprint, hex, or none
    got = f"{struct.unpack('<Q', struct.pack('<ii', h[5], h[6]))[0]:016x}" if h[7] else "none"
    if got != os.environ["CHECK_FINGERPRINT"]:
        die(f"tokenizer.bin's vocabulary fingerprint {got}, expected {os.environ['CHECK_FINGERPRINT']}")
table, pos = [], 1024
for i in range(vocab):
    n = tb[pos]
    if n == 0:
        die(f"tokenizer.bin: token {i} has length 0 (ddprun's reader wants 1..255)")
    table.append(tb[pos + 1:pos + 1 + n])
    pos += 1 + n
if pos != len(tb):
    die(f"tokenizer.bin has {len(tb) - pos} trailing bytes after {vocab} tokens")
sep_want = os.environ.get("CHECK_SEP", "<|endoftext|>").encode()
if eot >= 0 and table[eot] != sep_want:
    die(f"tokenizer.bin: end-of-text token {eot} is {table[eot]!r}, expected {sep_want!r}")
streams = {}
for split in ("train", "val"):
    files = [n for n in names if n.startswith(split + "_")]
    if files != [f"{split}_{k:06d}.bin" for k in range(len(files))]:
        die(f"{split} shards not numbered 0..{len(files) - 1}: {files}")
    toks = array(code)
    for k, name in enumerate(files):
        d = open(os.path.join(out, name), "rb").read()
        hh = struct.unpack("<256i", d[:1024])
        if hh[:2] != (magic, version) or any(hh[3:]):
            die(f"{name} header {hh[:3]}, expected magic {magic}, version {version}, then zeros")
        if len(d) != 1024 + width * hh[2]:
            die(f"{name} header says {hh[2]} tokens, file holds {(len(d) - 1024) / width}")
        last = k == len(files) - 1
        if not (hh[2] == shard or (last and 0 < hh[2] <= shard)):
            die(f"{name} holds {hh[2]} tokens; shards hold {shard} except a non-empty last one")
        t = array(code, d[1024:])
        if sys.byteorder != "little":
            t.byteswap()
        toks.extend(t)
    if not toks:
        die(f"no {split} tokens")
    streams[split] = toks
stream = streams["train"] + streams["val"]
want_val = max(1, int(len(stream) * frac))
if len(streams["val"]) != want_val:
    die(f"{len(streams['val'])} val tokens of {len(stream)}, expected {want_val} (fraction {frac})")
if max(stream) >= vocab:
    die(f"token {max(stream)} outside the vocabulary of {vocab}")
sep = table[eot] if eot >= 0 else b""
want = b"".join(sep + open(p, "rb").read() for p in inputs)
got = b"".join(table[t] for t in stream)
if got != want:
    i = next((i for i in range(min(len(got), len(want))) if got[i] != want[i]), min(len(got), len(want)))
    die(f"decoded stream ({len(got)} bytes) differs from the input ({len(want)} bytes) at byte {i}")
if eot >= 0 and stream[0] != eot:
    die(f"first token {stream[0]}, expected end-of-text {eot}")
print(f"{len(streams['train'])} train + {len(streams['val'])} val tokens decode to the input, "
      f"ids up to {max(stream)}, {len(set(t for t in stream if t > 65535))} distinct above 65535")
EOF
check() { python3 "$TMP/check.py" "$@" || fail "check.py $*"; }

# expect_refusal WHAT PATTERN command...: the command fails and its stderr matches PATTERN
expect_refusal() {
    local what=$1 pattern=$2; shift 2
    if "$@" >"$TMP/out" 2>"$TMP/err"; then fail "$what: accepted ($(cat "$TMP/out"))"; fi
    grep -qE -- "$pattern" "$TMP/err" || fail "$what: stderr lacks /$pattern/: $(cat "$TMP/err")"
    ok "$what: $(tail -n 1 "$TMP/err")"
}

A=$TMP/a.txt
B=$TMP/b.txt
printf 'A naïve café — 日本語のテキスト, emoji 🙂.\nSecond line\twith a tab.\n' > "$A"
for i in $(seq 1 40); do printf 'Line %d: the quick brown fox — ünïcödé %d.\n' "$i" $((i * i)); done > "$B"

# bytes tokenizer: headers, exact decoding, val split
"$PREP" --tokenizer bytes --val-fraction 0.25 "$A" "$TMP/b1" >/dev/null
check "$TMP/b1" 256 -1 0.25 100000000 "$A"
ok "bytes: one document, 25% val"
"$PREP" --tokenizer bytes "$A" "$B" "$TMP/b2" >"$TMP/b2.log"
check "$TMP/b2" 256 -1 0.05 100000000 "$A" "$B"
grep -q "^prepare-text: note: the bytes tokenizer has no document separator .*: the 2 documents are joined end to end" \
    "$TMP/b2.log" || fail "bytes: two documents joined without a note: $(cat "$TMP/b2.log")"
ok "bytes: two documents, default 5% val, a note that nothing separates them"
# a UTF-8 byte-order mark is no text: left out (check.py compares with the file without it)
printf '\xef\xbb\xbfWith a mark.\r\n' > "$TMP/bom.txt"
printf 'With a mark.\r\n' > "$TMP/nobom.txt"
"$PREP" --tokenizer bytes --val-fraction 0.3 "$TMP/bom.txt" "$TMP/bom" >/dev/null
check "$TMP/bom" 256 -1 0.3 100000000 "$TMP/nobom.txt"
ok "bytes: a leading byte-order mark left out"

# shard rollover, then --force with bigger shards leaves no stale shard behind
"$PREP" --tokenizer bytes --val-fraction 0.3 --shard-tokens 97 "$A" "$B" "$TMP/b3" >/dev/null
check "$TMP/b3" 256 -1 0.3 97 "$A" "$B"
shards=("$TMP"/b3/train_*.bin)
n=${#shards[@]}
[ "$n" -ge 10 ] || fail "rollover: $n train shards of 97 tokens"
ok "rollover: $n train shards of 97 tokens"
sum_before=$(cat "$TMP"/b3/*.bin | cksum)
expect_refusal "existing shards without --force" "--force" "$PREP" --tokenizer bytes "$A" "$TMP/b3"
[ "$(cat "$TMP"/b3/*.bin | cksum)" = "$sum_before" ] || fail "refused run changed $TMP/b3"
cp "$TMP/b3/train_000000.bin" "$TMP/b3/train_1000000.bin" # an output past shard 999999: seven digits
"$PREP" --tokenizer bytes --val-fraction 0.3 --shard-tokens 1000 --force "$A" "$B" "$TMP/b3" >/dev/null
check "$TMP/b3" 256 -1 0.3 1000 "$A" "$B"
[ ! -e "$TMP/b3/train_1000000.bin" ] || fail "--force carried train_1000000.bin into the new outputs"
ok "--force replaces the shards and removes stale ones (train_1000000.bin too)"
mkdir -p "$TMP/tok-only" && cp "$TMP/b3/tokenizer.bin" "$TMP/tok-only/"
expect_refusal "a folder holding only tokenizer.bin, without --force" "already holds outputs \\(tokenizer\\.bin\\)" \
    "$PREP" --tokenizer bytes "$A" "$TMP/tok-only"
cmp -s "$TMP/b3/tokenizer.bin" "$TMP/tok-only/tokenizer.bin" && [ "$(ls "$TMP/tok-only")" = tokenizer.bin ] ||
    fail "refused run changed $TMP/tok-only"
ok "... its tokenizer.bin left as it was"

# refusals
printf 'valid start\n\xc3\xa9 then a bad byte \xff here\n' > "$TMP/bad.txt"
expect_refusal "invalid UTF-8" "bad\\.txt.*byte offset 31" "$PREP" --tokenizer bytes "$A" "$TMP/bad.txt" "$TMP/b4"
[ ! -e "$TMP/b4" ] || fail "invalid UTF-8 left $TMP/b4 behind"
printf 'x' > "$TMP/one.txt"
expect_refusal "one-token stream" "too short" "$PREP" --tokenizer bytes "$TMP/one.txt" "$TMP/b5"
expect_refusal "--val-fraction 1" "between 0 and 1" "$PREP" --tokenizer bytes --val-fraction 1 "$A" "$TMP/b6"
expect_refusal "--val-fraction 0" "between 0 and 1" "$PREP" --tokenizer bytes --val-fraction 0 "$A" "$TMP/b6"
expect_refusal "missing input" "nope\\.txt" "$PREP" --tokenizer bytes "$TMP/nope.txt" "$TMP/b6"

# wide.py PREP [--bad-id] ARGS...: prepare-text's main with a tokenizer of 65,792 ids, more than
# uint16 holds: byte b is id b (even b) or 65536 + b (odd b), 256 is end-of-text and 257..65535 are
# one-byte fillers; --bad-id makes it also emit id 65792, outside its vocabulary.
cat > "$TMP/wide.py" <<'EOF'
import importlib.machinery, importlib.util, sys
loader = importlib.machinery.SourceFileLoader("prepare_text", sys.argv[1])
prep = importlib.util.module_from_spec(importlib.util.spec_from_loader("prepare_text", loader))
loader.exec_module(prep)
bad = sys.argv[2] == "--bad-id"
class Wide:
    name, vocab_size, eot, split = "wide", 65536 + 256, 256, prep.SPLIT_OTHER
    def encode(self, data, text):
        return [65536 + b if b % 2 else b for b in data] + ([self.vocab_size] if bad else [])
    def token_bytes(self, i):
        if i == self.eot:
            return b"<|endoftext|>"
        return bytes([i - 65536 if i >= 65536 else i if i < 256 else ord("?")])
try:
    prep.main(sys.argv[2 + bad:], tokenizer=Wide())
except prep.Fail as e:
    sys.exit(f"prepare-text: error: {e}")
EOF
wide() { python3 "$TMP/wide.py" "$PREP" "$@"; }

# uint32 shards: headers, sizes and exact decoding through tokenizer.bin, with rollover
wide --val-fraction 0.3 --shard-tokens 97 "$A" "$B" "$TMP/w1" >"$TMP/w1.log"
grep -q "; uint32 tokens, vocabulary 65792 (wide)" "$TMP/w1.log" || fail "wide: summary line: $(cat "$TMP/w1.log")"
CHECK_SPLIT=4 check "$TMP/w1" 65792 256 0.3 97 "$A" "$B" | tee "$TMP/w1.check"
grep -q "^prepare-text: note: wide's pre-tokenizer is not GPT-2's, Llama 3's, Qwen2's or sentencepiece's" "$TMP/w1.log" ||
    fail "wide: no note that ddprun generate splits its prompts as GPT-2's: $(cat "$TMP/w1.log")"
grep -qE "ids up to 65[5-9][0-9]{2}" "$TMP/w1.check" || fail "wide: no id above 65535 in the stream"
ok "uint32 shards for a vocabulary of 65792 decode to the input"
expect_refusal "an id outside the tokenizer's vocabulary" "token id 65792, outside its vocabulary of 65792" \
    wide --bad-id "$A" "$TMP/w2"
[ ! -e "$TMP/w2" ] || fail "a refused wide run left $TMP/w2 behind"

# --force stopped part-way by a file-size limit (write fails with EFBIG, as on a full disk) over
# the wide tokenizer's folder: the bytes tokenizer's tokenizer.bin (1,536 bytes, the old one's
# differs) fits under `ulimit -f 4`, the first shard of a 10,000-byte input does not. OUT_DIR,
# with a file and a folder of the user's, stays byte for byte as it was (not the new tokenizer
# beside the old shards); no temporary folder is left; the error names the shard, no traceback.
# Then an unhindered --force replaces the outputs (the old uint32 shards of 97 tokens gone), keeps
# the user's file and folder, and keeps a linked OUT_DIR a link.
wide --shard-tokens 97 "$A" "$B" "$TMP/b7" >/dev/null
echo keep > "$TMP/b7/notes.txt"
mkdir "$TMP/b7/sub" && echo sub > "$TMP/b7/sub/x"
cp -a "$TMP/b7" "$TMP/b7.before"
python3 -c 'print("0123456789" * 1000, end="")' > "$TMP/big.txt"
if (trap '' XFSZ; ulimit -f 4; "$PREP" --tokenizer bytes --force "$TMP/big.txt" "$TMP/b7") \
    >"$TMP/out" 2>"$TMP/err"; then
    fail "--force past the file-size limit succeeded"
fi
grep -qE "^prepare-text: error: .*/b7/train_000000\.bin: File too large$" "$TMP/err" ||
    fail "--force past the file-size limit: expected 'prepare-text: error: FILE: reason': $(cat "$TMP/err")"
! grep -q Traceback "$TMP/err" || fail "--force past the file-size limit: a traceback: $(cat "$TMP/err")"
diff -r "$TMP/b7.before" "$TMP/b7" >&2 || fail "--force past the file-size limit changed $TMP/b7"
[ -z "$(ls -A "$TMP" | grep '^\.b7\.')" ] || fail "temporary folder left: $(ls -A "$TMP" | grep '^\.b7\.')"
ok "--force stopped part-way: OUT_DIR as it was, no temporary folder: $(cat "$TMP/err")"
# SIGTERM (a timeout's, a CI cancel's) while the folder is being written: the temporary folder goes
rc=0
python3 - "$PREP" "$TMP/sig" <<'PY' || rc=$?
import importlib.machinery, importlib.util, os, signal, sys
loader = importlib.machinery.SourceFileLoader("prepare_text", sys.argv[1])
prep = importlib.util.module_from_spec(importlib.util.spec_from_loader("prepare_text", loader))
loader.exec_module(prep)
def write(tmp):
    with open(os.path.join(tmp, "train_000000.bin"), "wb") as f:
        f.write(b"x" * 100)
    os.kill(os.getpid(), signal.SIGTERM)
prep.replace_folder(sys.argv[2], write)
PY
[ $rc -eq 143 ] || fail "SIGTERM while writing: exit $rc, expected 143"
[ ! -e "$TMP/sig" ] && [ -z "$(ls -A "$TMP" | grep '^\.sig\.')" ] ||
    fail "SIGTERM while writing left: $(ls -A "$TMP" | grep 'sig')"
ok "SIGTERM while writing: exit 143, no folder and no temporary folder left"
ln -s b7 "$TMP/b7-link"
"$PREP" --tokenizer bytes --force "$TMP/big.txt" "$TMP/b7-link" >/dev/null
[ -L "$TMP/b7-link" ] || fail "--force through a link replaced the link"
cmp -s "$TMP/b7/notes.txt" "$TMP/b7.before/notes.txt" && diff -r "$TMP/b7/sub" "$TMP/b7.before/sub" ||
    fail "--force lost the user's notes.txt or sub/"
rm -r "$TMP/b7/notes.txt" "$TMP/b7/sub"
check "$TMP/b7" 256 -1 0.05 100000000 "$TMP/big.txt"
[ -z "$(ls -A "$TMP" | grep '^\.b7')" ] || fail "temporary or old folder left: $(ls -A "$TMP" | grep '^\.b7')"
ok "--force through a link: outputs replaced, stale shards gone, the user's file and folder kept"
# a temporary folder a killed run left, named as this run's would be by pid (in a container every
# run has the same pid): named in a warning, left alone, not in the way
(mkdir "$TMP/.b7.tmp.$BASHPID" && echo moved >"$TMP/.b7.tmp.$BASHPID/x" &&
    exec "$PREP" --tokenizer bytes --force "$TMP/big.txt" "$TMP/b7") >/dev/null 2>"$TMP/err" ||
    fail "--force beside a leftover temporary folder of its own pid's name: $(cat "$TMP/err")"
grep -q "warning: $TMP/.b7.tmp.[0-9]* was left by an earlier write of b7" "$TMP/err" ||
    fail "the leftover not named: $(cat "$TMP/err")"
[ "$(cat "$TMP"/.b7.tmp.[0-9]*/x)" = moved ] || fail "the leftover's contents touched"
rm -r "$TMP"/.b7.tmp.[0-9]*
ok "a leftover temporary folder of this run's pid: named, left alone, not in the way"
# OUT_DIR a mount point (a tmpfs; a bind mount of a folder of the same filesystem) or in a folder
# no entry can be made in (chattr +i): written in place, file by file; --force with other shards
# replaces them and removes the stale ones, the user's file stays. A rename that fails (a folder in
# the way) before the first file is in leaves OUT_DIR as it was; one after leaves it without
# tokenizer.bin, saying so.
in_place() { # DIR WHAT: DIR holds notes.txt
    local dir=$1 what=$2
    "$PREP" --tokenizer bytes --shard-tokens 97 "$A" "$B" "$dir" >/dev/null 2>"$TMP/err" ||
        fail "$what: $(cat "$TMP/err")"
    [ -e "$dir/train_000001.bin" ] || fail "$what: no second shard"
    "$PREP" --tokenizer bytes --force "$TMP/big.txt" "$dir" >/dev/null 2>"$TMP/err" ||
        fail "$what, --force: $(cat "$TMP/err")"
    [ "$(cat "$dir/notes.txt")" = keep ] || fail "$what: the user's file lost"
    rm "$dir/notes.txt"
    check "$dir" 256 -1 0.05 100000000 "$TMP/big.txt"
    echo keep >"$dir/notes.txt"
    ok "$what: written in place, stale shards gone, the user's file kept, no temporary left"
}
if tmpfs_at "$TMP/vol" 16m; then
    echo keep >"$TMP/vol/notes.txt"
    in_place "$TMP/vol" "OUT_DIR a mount point"
    rm "$TMP/vol/train_000000.bin" && mkdir "$TMP/vol/train_000000.bin" && touch "$TMP/vol/train_000000.bin/x"
    cp -a "$TMP/vol" "$TMP/vol.before"
    if "$PREP" --tokenizer bytes --shard-tokens 97 --force "$A" "$B" "$TMP/vol" >/dev/null 2>"$TMP/err"; then
        fail "a rename that fails first: succeeded"
    fi
    diff -r "$TMP/vol.before" "$TMP/vol" >&2 || fail "a rename that fails first changed OUT_DIR: $(cat "$TMP/err")"
    rm -r "$TMP/vol/train_000000.bin" && mkdir "$TMP/vol/train_000001.bin" && touch "$TMP/vol/train_000001.bin/x"
    if "$PREP" --tokenizer bytes --shard-tokens 97 --force "$A" "$B" "$TMP/vol" >/dev/null 2>"$TMP/err"; then
        fail "a rename that fails later: succeeded"
    fi
    grep -q "vol is left without tokenizer.bin, with part of the new outputs" "$TMP/err" ||
        fail "a rename that fails later: expected it to say OUT_DIR lacks tokenizer.bin: $(cat "$TMP/err")"
    [ ! -e "$TMP/vol/tokenizer.bin" ] && [ -z "$(ls -A "$TMP/vol" | grep '^\.')" ] ||
        fail "a rename that fails later left: $(ls -A "$TMP/vol")"
    ok "in place, a rename that fails: first, OUT_DIR as it was; later, OUT_DIR without tokenizer.bin: $(cat "$TMP/err")"
else
    echo "note: tmpfs mount-point case skipped (cannot mount a tmpfs here)"
fi
in_place_cases in_place "OUT_DIR"

# ddprun reads them (when DDPRUN_WORKER is set): a tiny GPT-2 over the 65792 ids counts every
# train window and trains three steps. Then the reader's ids and positions: a third document whose
# 倀 (E5 80 80) gives the stream's only id of 65536 + 0xE5, in the last of several val shards; with
# tokenizer.bin cut to that id, the worker names it at the shard and index where prepare-text put
# it (train passes: its largest id is 65536 + 0xE3). Last, train and val of two formats are refused.
train_wide() { # DATA_DIR RUN_DIR
    mpirun -np 1 --oversubscribe --bind-to none "$WORKER" "$ROOT/tests/launcher/trainer/gpt2_small.yaml" \
        run.dir="$2" data.path="$1" model.gpt2.vocab_size=65792 model.gpt2.n_layer=1 model.gpt2.n_embd=8 \
        data.seq_len=8 data.batch_size=2 train.max_steps=3 >"$2.log" 2>&1
}
# cut_vocab DIR LIMIT: tokenizer.bin keeps its first LIMIT ids; prints the error the reader must give
# for the first id >= LIMIT, train shards first, then val
cat > "$TMP/cut_vocab.py" <<'EOF'
import os, struct, sys
from array import array
d, limit = sys.argv[1], int(sys.argv[2])
tb = open(os.path.join(d, "tokenizer.bin"), "rb").read()
pos = 1024
for _ in range(limit):
    pos += 1 + tb[pos]
h = list(struct.unpack("<256i", tb[:1024]))
h[2] = limit
open(os.path.join(d, "tokenizer.bin"), "wb").write(struct.pack("<256i", *h) + tb[1024:pos])
for name in sorted((n for n in os.listdir(d) if n != "tokenizer.bin"), key=lambda n: (n[0] != "t", n)):
    t = array("I", open(os.path.join(d, name), "rb").read()[1024:])
    bad = [i for i, v in enumerate(t) if v >= limit]
    if bad:
        print(f"token {t[bad[0]]} at {d}/{name}:{bad[0]} is >= vocab_size {limit}")
        break
EOF
worker_checks() {
    train_wide "$TMP/w1" "$TMP/w1run" || fail "ddprun-worker on uint32 shards: $(grep -m 1 error "$TMP/w1run.log")"
    local tokens windows
    tokens=$(($(cat "$TMP"/w1/train_*.bin | wc -c) / 4 - 256 * $(ls "$TMP"/w1/train_*.bin | wc -l)))
    windows=$(((tokens - 1) / 8))
    grep -q "data: tokens/train $windows samples" "$TMP/w1run.log" ||
        fail "ddprun-worker: expected tokens/train $windows samples: $(grep 'data:' "$TMP/w1run.log")"
    ok "ddprun-worker trains on the uint32 shards ($windows windows of 8)"

    printf 'the odd one: \xe5\x80\x80\n' > "$TMP/c.txt"
    wide --shard-tokens 37 "$A" "$B" "$TMP/c.txt" "$TMP/w3" >/dev/null
    local limit=$((65536 + 0xe5)) want
    want=$(python3 "$TMP/cut_vocab.py" "$TMP/w3" "$limit")
    [ -n "$want" ] || fail "no id >= $limit in the shards"
    case $want in
        *"/val_000000.bin:"* | *"/train_"*) fail "expected the id >= $limit in a later val shard: '$want'" ;;
    esac
    if train_wide "$TMP/w3" "$TMP/w3run"; then fail "ddprun-worker accepted ids beyond tokenizer.bin's $limit"; fi
    grep -qF "$want" "$TMP/w3run.log" || fail "ddprun-worker: expected '$want': $(grep -m 1 error "$TMP/w3run.log")"
    ok "ddprun-worker names $want"

    # train and val of two formats: uint16 train (the bytes tokenizer's) beside a uint32 val
    cp -r "$TMP/b1" "$TMP/mixed"
    python3 - "$TMP/mixed/val_000000.bin" <<'EOF'
import struct, sys
from array import array
d = open(sys.argv[1], "rb").read()
h = list(struct.unpack("<256i", d[:1024]))
h[0], h[1] = 20240801, 7
open(sys.argv[1], "wb").write(struct.pack("<256i", *h) + array("I", array("H", d[1024:])).tobytes())
EOF
    if train_wide "$TMP/mixed" "$TMP/mixedrun"; then fail "ddprun-worker accepted uint16 train beside uint32 val"; fi
    grep -qF "$TMP/mixed/val_000000.bin holds uint32 tokens but $TMP/mixed/train_000000.bin holds uint16" \
        "$TMP/mixedrun.log" || fail "ddprun-worker on mixed formats: $(grep -m 1 error "$TMP/mixedrun.log")"
    ok "ddprun-worker refuses uint16 train beside uint32 val, naming both"
}
if [ -n "$WORKER" ]; then
    worker_checks
else
    echo "SKIP: ddprun-worker checks: DDPRUN_WORKER is not set"
fi

# Hugging Face tokenizer.json (needs the tokenizers package): tokenizers of three kinds built by
# make_hf_tokenizer.py with that package, each giving shards whose ids decode to the inputs through
# tokenizer.bin, the separator each kind puts before a text first; then the refusals.
hf_id() { # FILE TOKEN: the token's id in tokenizer.json FILE, read by the tokenizers package
    python3 -c 'import sys, tokenizers
print(tokenizers.Tokenizer.from_file(sys.argv[1]).token_to_id(sys.argv[2]))' "$@"
}
hf_vocab() { # FILE: its vocabulary size, added tokens included
    python3 -c 'import sys, tokenizers
print(tokenizers.Tokenizer.from_file(sys.argv[1]).get_vocab_size())' "$1"
}
hf_fingerprint() { # FILE: FNV-1a 64 of its tokens by id (runtime/data/tokenizer.h), as the
    # tokenizers package lists them (its model's vocabulary and the added tokens), hex
    python3 -c 'import struct, sys, tokenizers
t = tokenizers.Tokenizer.from_file(sys.argv[1])
h = 0xCBF29CE484222325
for s, i in sorted(t.get_vocab(with_added_tokens=True).items(), key=lambda e: e[1]):
    for b in struct.pack("<I", i) + s.encode() + bytes(1):
        h = ((h ^ b) * 0x100000001B3) % 2**64
print(f"{h:016x}")' "$1"
}
hf_checks() {
    local make=$ROOT/tests/scripts/make_hf_tokenizer.py k v
    for k in bytelevel sentencepiece wide wordpiece gap llama3 qwen2 othersplit; do
        python3 "$make" $k "$TMP/$k.json" || fail "make_hf_tokenizer.py $k"
    done
    "$PREP" --tokenizer "$TMP/bytelevel.json" --val-fraction 0.3 "$A" "$B" "$TMP/h1" >"$TMP/h1.log"
    grep -q "; uint16 tokens, vocabulary [0-9]* (.*bytelevel.json)" "$TMP/h1.log" ||
        fail "hf bytelevel: summary line: $(cat "$TMP/h1.log")"
    CHECK_FINGERPRINT=$(hf_fingerprint "$TMP/bytelevel.json") \
        check "$TMP/h1" "$(hf_vocab "$TMP/bytelevel.json")" "$(hf_id "$TMP/bytelevel.json" "<|endoftext|>")" \
        0.3 100000000 "$A" "$B"
    # the added token is one id spelling its UTF-8 (tokenizers' own decode garbles it through ByteLevel)
    k=$(hf_id "$TMP/bytelevel.json" "naïve café")
    python3 -c 'import sys
from array import array
sys.exit(int(sys.argv[2]) not in array("H", open(sys.argv[1], "rb").read()[1024:]))' "$TMP/h1/train_000000.bin" "$k" ||
        fail "hf bytelevel: id $k of the added token 'naïve café' is not in the stream"
    ok "hf byte-level BPE (GPT-2's kind): <|endoftext|> first, the input back through tokenizer.bin"

    # a special token's text inside a document is text: the one <|endoftext|> id is the separator
    printf 'before <|endoftext|> after\n' >"$TMP/special.txt"
    "$PREP" --tokenizer "$TMP/bytelevel.json" "$TMP/special.txt" "$TMP/h6" >/dev/null || fail "hf special text"
    k=$(hf_id "$TMP/bytelevel.json" "<|endoftext|>")
    python3 -c 'import sys, glob
from array import array
ids = [i for f in glob.glob(sys.argv[1] + "/*_000000.bin") for i in array("H", open(f, "rb").read()[1024:])]
sys.exit(f"<|endoftext|> {ids.count(int(sys.argv[2]))} times in {ids}" if ids.count(int(sys.argv[2])) != 1 else 0)' \
        "$TMP/h6" "$k" || fail "hf bytelevel: a document's '<|endoftext|>' text became the control id"
    ok "hf: a special token's text in a document is encoded as text, not as the token"

    # a tokenizer.json saved with truncation and padding on (as transformers saves one after a call
    # with truncation=True): neither cuts nor pads a document, the shards are the plain one's
    python3 -c 'import sys, tokenizers
t = tokenizers.Tokenizer.from_file(sys.argv[1]); t.enable_truncation(8); t.enable_padding(length=64)
t.save(sys.argv[2])' "$TMP/bytelevel.json" "$TMP/truncating.json" || fail "writing truncating.json"
    "$PREP" --tokenizer "$TMP/truncating.json" --val-fraction 0.3 "$A" "$B" "$TMP/h5" >/dev/null
    for f in train_000000.bin val_000000.bin; do
        cmp -s "$TMP/h1/$f" "$TMP/h5/$f" || fail "hf truncation/padding in tokenizer.json changed $f"
    done
    ok "hf tokenizer.json with truncation and padding: documents whole, unpadded"

    # the separator is the post-processor's <s> (id 1); byte fallback spells 日本語 and the emoji
    "$PREP" --tokenizer "$TMP/sentencepiece.json" "$A" "$B" "$TMP/h2" >/dev/null
    CHECK_SEP="<s>" CHECK_SPLIT=4 CHECK_FINGERPRINT=$(hf_fingerprint "$TMP/sentencepiece.json") \
        check "$TMP/h2" "$(hf_vocab "$TMP/sentencepiece.json")" 1 0.05 100000000 "$A" "$B"
    ok "hf sentencepiece-style BPE with byte fallback (Llama 2's kind): <s> first, the input back"
    # a post-processor putting </s> after a text too (Llama 2's with add_eos_token, RoBERTa's): still <s>
    python3 - "$TMP/sentencepiece.json" "$TMP/bos-eos.json" <<'PY'
import sys, tokenizers
from tokenizers import processors
t = tokenizers.Tokenizer.from_file(sys.argv[1])
t.post_processor = processors.TemplateProcessing(single="<s> $A </s>", special_tokens=[
    ("<s>", t.token_to_id("<s>")), ("</s>", t.token_to_id("</s>"))])
t.save(sys.argv[2])
PY
    "$PREP" --tokenizer "$TMP/bos-eos.json" "$A" "$B" "$TMP/h2e" >"$TMP/h2e.log"
    CHECK_SEP="<s>" CHECK_SPLIT=4 check "$TMP/h2e" "$(hf_vocab "$TMP/sentencepiece.json")" 1 0.05 100000000 "$A" "$B"
    ! grep -q "no document separator" "$TMP/h2e.log" || fail "hf <s> \$A </s>: $(cat "$TMP/h2e.log")"
    ok "hf: a post-processor writing <s> before a text and </s> after: <s> the separator"

    # uint32: ids above 65,535 from the merges and <|begin_of_text|>; --tokenizer given the folder
    mkdir "$TMP/wide"
    cp "$TMP/wide.json" "$TMP/wide/tokenizer.json"
    "$PREP" --tokenizer "$TMP/wide" --shard-tokens 29 "$A" "$B" "$TMP/h3" >"$TMP/h3.log"
    grep -q "; uint32 tokens, vocabulary 659[0-9][0-9] " "$TMP/h3.log" || fail "hf wide: summary line: $(cat "$TMP/h3.log")"
    v=$(hf_vocab "$TMP/wide.json")
    CHECK_SEP="<|begin_of_text|>" check "$TMP/h3" "$v" $((v - 1)) 0.05 29 "$A" "$B" | tee "$TMP/h3.check"
    grep -qE ", ([2-9]|[1-9][0-9]+) distinct above 65535" "$TMP/h3.check" ||
        fail "hf wide: expected merged ids above 65535 besides <|begin_of_text|>"
    ok "hf uint32 shards (Llama 3's kind): <|begin_of_text|> first, the input back"

    # the pre-tokenizer recorded for ddprun generate's prompts: Llama 3's and Qwen2's split regexes
    # (Qwen2's only after NFC); a Split of another regex is 4, with a note
    for ks in llama3:2 qwen2:3 othersplit:4; do
        k=${ks%:*}
        "$PREP" --tokenizer "$TMP/$k.json" "$A" "$B" "$TMP/s-$k" >"$TMP/s-$k.log"
        CHECK_SPLIT=${ks#*:} check "$TMP/s-$k" "$(hf_vocab "$TMP/$k.json")" "$(hf_id "$TMP/$k.json" "<|endoftext|>")" \
            0.05 100000000 "$A" "$B"
        [ "$k" != othersplit ] ||
            grep -q "^prepare-text: note: .*othersplit.json's pre-tokenizer is not" "$TMP/s-$k.log" ||
            fail "hf othersplit: no note on the prompt split: $(cat "$TMP/s-$k.log")"
        ok "hf $k: tokenizer.bin's pre-tokenizer is ${ks#*:}"
    done
    # a document past prepare-text's piece size (2^18 characters) is encoded in pieces cut after a
    # newline before a letter or digit: the same ids as the tokenizers package's one call on it
    python3 - "$TMP/long.txt" "$TMP/gpt2nl.json" <<'PY'
import random, sys
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
random.seed(7)
words = ["the", "naïve", "café", "1999", "x²", "日本語", "🙂", "don't", "HELLO", "a-b", "...", "\t", "  "]
ends = ["\n", "\n\n", "\n\n\n", " \n", "\r\n", ".\n\n", "\n \n", "\n\t"]
paras = [" ".join(random.choice(words) for _ in range(random.randint(1, 60))) + random.choice(ends)
         for _ in range(30000)]
open(sys.argv[1], "w", encoding="utf-8", newline="").write("".join(paras))
# GPT-2's split with merges of newline runs ("\n\n", " \n" one token each, which the tokenizers
# above, trained on lines, lack): a piece ending in such a run must end where the whole text's does
t = Tokenizer(models.BPE())
t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
t.decoder = decoders.ByteLevel()
t.train_from_iterator(paras[:3000], trainers.BpeTrainer(vocab_size=1500, special_tokens=["<|endoftext|>"],
                      show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
assert len(t.encode("\n\n").ids) == 1 and len(t.encode(" \n").ids) == 1, "no merges of newline runs"
t.save(sys.argv[2])
PY
    for k in bytelevel llama3 qwen2 gpt2nl; do
        "$PREP" --tokenizer "$TMP/$k.json" "$TMP/long.txt" "$TMP/p-$k" >/dev/null
        python3 - "$TMP/$k.json" "$TMP/long.txt" "$TMP/p-$k" <<'PY' || fail "hf $k: a long document's ids differ from one call's"
import glob, sys, tokenizers
from array import array
t = tokenizers.Tokenizer.from_file(sys.argv[1])
t.encode_special_tokens = True
text = open(sys.argv[2], encoding="utf-8", newline="").read()
assert len(text) > 3 * (1 << 18), len(text)
want = [t.token_to_id("<|endoftext|>")] + t.encode(text, add_special_tokens=False).ids
code = "I" if t.get_vocab_size() > 65535 else "H"
got = [i for s in ("train", "val") for f in sorted(glob.glob(f"{sys.argv[3]}/{s}_*.bin"))
       for i in array(code, open(f, "rb").read()[1024:])]
sys.exit(0 if got == want else f"{len(got)} ids, {len(want)} wanted; first difference at "
         f"{next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))}")
PY
        ok "hf $k: a document of $(wc -c <"$TMP/long.txt") bytes, encoded in pieces, has the whole call's ids"
    done
    python3 - "$TMP/qwen2.json" "$TMP/q-nonfc.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["normalizer"] = None
json.dump(d, open(sys.argv[2], "w"))
PY
    "$PREP" --tokenizer "$TMP/q-nonfc.json" "$A" "$TMP/s-nonfc" >/dev/null
    CHECK_SPLIT=4 check "$TMP/s-nonfc" "$(hf_vocab "$TMP/qwen2.json")" "$(hf_id "$TMP/qwen2.json" "<|endoftext|>")" \
        0.05 100000000 "$A"
    ok "hf: Qwen2's regex without its NFC normalizer is another pre-tokenizer (4)"
    python3 - "$TMP/llama3.json" "$TMP/l3-swapped.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
m = d["model"]["merges"]
m[0], m[-1] = m[-1], m[0]  # the first merge now forms the last id: ids are no longer merge ranks
json.dump(d, open(sys.argv[2], "w"))
PY
    "$PREP" --tokenizer "$TMP/l3-swapped.json" "$A" "$TMP/s-swapped" >"$TMP/s-swapped.log"
    CHECK_SPLIT=4 check "$TMP/s-swapped" "$(hf_vocab "$TMP/llama3.json")" "$(hf_id "$TMP/llama3.json" "<|endoftext|>")" \
        0.05 100000000 "$A"
    grep -q "or its merges are not in the order of its ids" "$TMP/s-swapped.log" ||
        fail "hf: merges out of id order: no note: $(cat "$TMP/s-swapped.log")"
    ok "hf: Llama 3's regex with merges out of the order of their ids is another pre-tokenizer (4), with a note"

    python3 - "$ROOT/scripts/prepare-text" <<'PY' || fail "hf: merges_follow_ids on a merge whose pieces do not concatenate to its token"
import importlib.machinery, sys
prep = importlib.machinery.SourceFileLoader("prepare_text", sys.argv[1]).load_module()
follow = prep.HFTokenizer.merges_follow_ids
# with continuing_subword_prefix "##", the merge a ##b forms "ab": its concatenation is no token
assert follow({"vocab": {"a": 0, "##b": 1, "ab": 2}, "merges": [["a", "##b"]]}) is False
assert follow({"vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}) is True
PY
    ok "hf: a merge whose pieces do not concatenate to a token (a subword prefix) makes merges not follow the ids"

    expect_refusal "a WordPiece decoder" "decoder 'WordPiece' is not supported" \
        "$PREP" --tokenizer "$TMP/wordpiece.json" "$A" "$TMP/h4"
    expect_refusal "ids with no token" "gap\\.json has no token for id [0-9]+ of its [0-9]+ ids" \
        "$PREP" --tokenizer "$TMP/gap.json" "$A" "$TMP/h4"
    expect_refusal "a text file as tokenizer.json" "a\\.txt is not a Hugging Face tokenizer.json" \
        "$PREP" --tokenizer "$A" "$A" "$TMP/h4"
    expect_refusal "a misspelt tokenizer" "--tokenizer gtp2: neither gpt2, bytes nor an existing tokenizer.json" \
        "$PREP" --tokenizer gtp2 "$A" "$TMP/h4"
    [ ! -e "$TMP/h4" ] || fail "a refused tokenizer.json left $TMP/h4 behind"
}
hf_skipped=
if python3 -c 'import tokenizers' 2>/dev/null; then
    hf_checks
else
    echo "SKIP: tokenizer.json checks: python3 cannot import tokenizers (scripts/setup --text installs it)"
    hf_skipped=1
fi

# gpt2: needs tiktoken and the ranks file
RANKS=${DDPRUN_GPT2_RANKS:-${XDG_CACHE_HOME:-$HOME/.cache}/ddprun/gpt2.tiktoken}
if ! python3 -c 'import tiktoken' 2>/dev/null; then
    echo "SKIP: gpt2 checks: python3 cannot import tiktoken (scripts/setup --text installs it)"
    exit 77
fi
if [ ! -f "$RANKS" ]; then
    echo "SKIP: gpt2 checks: no GPT-2 ranks file at $RANKS (scripts/setup --text fetches it)"
    exit 77
fi
"$PREP" --ranks "$RANKS" "$A" "$B" "$TMP/g1" >/dev/null
check "$TMP/g1" 50257 50256 0.05 100000000 "$A" "$B"
ok "gpt2: two documents decode through tokenizer.bin, end-of-text first"
printf 'Hello world' > "$TMP/hello.txt"
"$PREP" --ranks "$RANKS" --val-fraction 0.3 "$TMP/hello.txt" "$TMP/g2" >/dev/null
ids=$(python3 -c 'import sys
from array import array
print(*[t for s in sys.argv[1:] for t in array("H", open(s, "rb").read()[1024:])])' "$TMP/g2/train_000000.bin" "$TMP/g2/val_000000.bin")
[ "$ids" = "50256 15496 995" ] || fail "gpt2: 'Hello world' -> $ids, expected 50256 15496 995"
ok "gpt2: 'Hello world' -> $ids"
head -n 1000 "$RANKS" > "$TMP/short.tiktoken"
expect_refusal "truncated ranks file" "not GPT-2's ranks" "$PREP" --ranks "$TMP/short.tiktoken" "$A" "$TMP/g3"
# every rank present, but 'Hello' and ' world' trade places
sed -e 's/ 15496$/ SWAP/' -e 's/ 995$/ 15496/' -e 's/ SWAP$/ 995/' "$RANKS" > "$TMP/swapped.tiktoken"
expect_refusal "scrambled ranks file" "does not reproduce GPT-2" "$PREP" --ranks "$TMP/swapped.tiktoken" "$A" "$TMP/g3"
[ -z "$hf_skipped" ] || exit 77
echo "all prepare-text checks passed"
