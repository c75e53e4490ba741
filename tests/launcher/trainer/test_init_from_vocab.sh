#!/usr/bin/env bash
# Token data against checkpoint.init_from's tokenizer.json (launcher/trainer/train_data.c), a Llama
# from tests/fixtures/hf-llama-tiny (or the same fixture under $DDP_TEST_FIXTURES) with tokenizer.json
# files made by tests/scripts/make_hf_tokenizer.py: data prepared with the folder's tokenizer trains,
# also where the folder's lists one of its own tokens again as an added token (at its id); with
# another vocabulary of the same size (two ids swapped), one more added token (Llama 3.1's beside
# Llama 3's), or byte tokens, the job is refused before its first step (exit 2) naming both files
# and their fingerprints (the swapped one at np 2 too: rank 0 compares, rank 1 learns its verdict);
# an unreadable tokenizer.json (an added token without an id), or a tokenizer.bin that records no
# fingerprint (an older prepare-text's), is said not to be checked and trains.
source "$(dirname "$0")/../../lib.sh"
TINY=$DDP_SRC/tests/launcher/trainer/llama_tiny.yaml
FIX=${DDP_TEST_FIXTURES:-$DDP_SRC/tests/fixtures}/hf-llama-tiny
MAKE=$DDP_SRC/tests/scripts/make_hf_tokenizer.py
PREP=$DDP_SRC/scripts/prepare-text
python3 -c 'import tokenizers' 2>/dev/null || { echo "SKIP: python3 lacks tokenizers (scripts/setup --text)"; exit 77; }
read -r NPOS < <(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["max_position_embeddings"])' \
    "$FIX/config.json")
for k in small small-swapped small-added small-marked; do python3 "$MAKE" $k "$TMP/$k.json" || exit 1; done
folder() { # NAME TOKENIZER_JSON: the fixture with that tokenizer.json beside its weights
    cp -r "$FIX" "$TMP/$1" && cp "$2" "$TMP/$1/tokenizer.json"
}
llama() { # DATA FOLDER LOG [NP]: one step from the folder on the data
    mpirun -np "${4:-1}" --oversubscribe --bind-to none "$DDPRUN_WORKER" "$TINY" run.dir="$TMP/run-$(basename "$3")" \
        data.path="$1" data.seq_len="$NPOS" checkpoint.init_from="$2" train.max_steps=1 >"$3" 2>&1
}
"$PREP" --tokenizer "$TMP/small.json" "$DDP_SRC/README.md" "$TMP/data" >/dev/null &&
    "$PREP" --tokenizer bytes "$DDP_SRC/README.md" "$TMP/bytes" >/dev/null
check "prepare-text: the data, of the small tokenizer and of bytes" [ $? -eq 0 ]
folder same "$TMP/small.json"; folder swapped "$TMP/small-swapped.json"; folder added "$TMP/small-added.json"
folder marked "$TMP/small-marked.json"

llama "$TMP/data" "$TMP/same" "$TMP/same.log"
check "the folder's own tokenizer: trains" [ $? -eq 0 ]
check "and nothing is said of it" bash -c "! grep -q 'tokenizer.json' '$TMP/same.log'"

llama "$TMP/data" "$TMP/swapped" "$TMP/swapped.log"
check "another vocabulary of the same size: refused (exit 2)" [ $? -eq 2 ]
cat "$TMP/swapped.log" | grep -m1 "another vocabulary"
check "the refusal names the data, the file, both fingerprints and the fix" \
    grep -Eq "data.path $TMP/data was tokenized with another vocabulary than checkpoint.init_from's $TMP/swapped/tokenizer.json \(vocabulary fingerprints [0-9a-f]{16} in its tokenizer.bin, [0-9a-f]{16}\): its token ids stand for other text to this model; prepare it with scripts/prepare-text \(or prepare-chat\) --tokenizer $TMP/swapped/tokenizer.json" "$TMP/swapped.log"
check "before any step" bash -c "! ls '$TMP/run-swapped.log/checkpoints' 2>/dev/null | grep -q ckpt"
llama "$TMP/data" "$TMP/swapped" "$TMP/swapped2.log" 2
check "np 2: refused (exit 2)" [ $? -eq 2 ]
check "np 2: rank 0 compared and said why, rank 1 learned its verdict" \
    eval 'grep -q "rank 0 .*another vocabulary" "$TMP/swapped2.log" && grep -q "rank 1 .*rank 0 could not take data.path" "$TMP/swapped2.log"'

llama "$TMP/bytes" "$TMP/same" "$TMP/bytes.log"
check "byte tokens for the folder's model: refused (exit 2)" [ $? -eq 2 ]
check "naming the byte data" grep -q "data.path $TMP/bytes was tokenized with another vocabulary" "$TMP/bytes.log"

llama "$TMP/data" "$TMP/added" "$TMP/added.log"
check "a tokenizer with one more added token: refused (exit 2)" [ $? -eq 2 ]
llama "$TMP/data" "$TMP/marked" "$TMP/marked.log"
check "one of its own tokens listed again as added, at its id: trains" [ $? -eq 0 ]
check "... and nothing is said of it" bash -c "! grep -q 'tokenizer.json' '$TMP/marked.log'"

folder junk "$TMP/small.json"
python3 - "$TMP/junk/tokenizer.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
del d["added_tokens"][0]["id"]
json.dump(d, open(sys.argv[1], "w"))
PY
llama "$TMP/data" "$TMP/junk" "$TMP/junk.log"
check "a tokenizer.json whose added token has no id: trains" [ $? -eq 0 ]
check "and says it was not checked, naming why" \
    grep -q "warning: data.path $TMP/data: not checked against checkpoint.init_from's $TMP/junk/tokenizer.json: $TMP/junk/tokenizer.json:1:[0-9]*: a token id must be an integer in 0..2147483647" "$TMP/junk.log"

cp -r "$TMP/data" "$TMP/old"
python3 - "$TMP/old/tokenizer.bin" <<'PY'
import sys
with open(sys.argv[1], "r+b") as f:  # header int32 5..7: the fingerprint and its flag, as before them
    f.seek(20)
    f.write(bytes(12))
PY
llama "$TMP/old" "$TMP/swapped" "$TMP/old.log"
check "a tokenizer.bin without a fingerprint: trains" [ $? -eq 0 ]
check "and says it was not checked" \
    grep -q "not checked against checkpoint.init_from's $TMP/swapped/tokenizer.json: its tokenizer.bin records no vocabulary fingerprint" "$TMP/old.log"
finish
