#!/usr/bin/env bash
# Every rank's data against rank 0's (launcher/trainer/train_data.c): ranks read data.path on their
# own hosts, and here two ranks read two folders (one config, data.path given per rank, as on two
# hosts). A copy of the same files trains, and so does the same text cut into other shard files
# (the same token stream); byte tokens of a longer text (more windows: the rank would take more
# steps per epoch and wait in a collective the other never joins) are refused before the first step
# (exit 2) with both copies' counts, and byte tokens of another text of the same length (the same
# counts, other tokens: the sampler's shards would no longer cover the data once) and Fashion-MNIST
# with one training label changed saying the counts agree but the contents do not; rank 1 says its
# copy differs, rank 0 names rank 1.
source "$(dirname "$0")/../../lib.sh"
GPT=$DDP_SRC/tests/launcher/trainer/gpt2_tiny.yaml
MLP=$DDP_SRC/tests/launcher/trainer/ddp_small.yaml
FASHION=/usr/share/datasets/fashion-mnist
PREP=$DDP_SRC/scripts/prepare-text
cp "$DDP_SRC/README.md" "$TMP/a.txt"
tr 'a-y' 'b-z' <"$TMP/a.txt" >"$TMP/other.txt"            # as many bytes, other ones
cat "$TMP/a.txt" "$TMP/a.txt" >"$TMP/longer.txt"
for d in a other longer; do "$PREP" --tokenizer bytes "$TMP/$d.txt" "$TMP/$d" >/dev/null || exit 1; done
cp -r "$TMP/a" "$TMP/copy"
"$PREP" --tokenizer bytes --shard-tokens 4000 "$TMP/a.txt" "$TMP/recut" >/dev/null || exit 1
check "the same text in more shard files" [ "$(ls "$TMP/recut"/train_*.bin | wc -l)" -gt "$(ls "$TMP/a"/train_*.bin | wc -l)" ]
check "the same length, other tokens: a tokens shard of the same size" \
    cmp -s <(stat -c %s "$TMP/a"/train_*.bin) <(stat -c %s "$TMP/other"/train_*.bin)

two() { # CONFIG DATA0 DATA1 LOG [overrides...]: rank 0 on DATA0, rank 1 on DATA1
    local cfg=$1 d0=$2 d1=$3 log=$4; shift 4
    local common=("$cfg" run.dir="$TMP/run-$(basename "$log")" train.max_steps=2 "$@")
    timeout 120 mpirun --oversubscribe --bind-to none -np 1 "$DDPRUN_WORKER" "${common[@]}" data.path="$d0" \
        : -np 1 "$DDPRUN_WORKER" "${common[@]}" data.path="$d1" >"$log" 2>&1
}
refused() { # LOG WHAT DATA1 WORDS: rank 1's words on DATA1, and rank 0's
    local log=$1 what=$2
    check "$what: rank 1 says its copy is other data" grep -q "data.path $3 on this rank's host is other data than \
rank 0's: $4; every rank must read the same data" "$log"
    check "$what: rank 0 names rank 1" grep -q "rank 1 could not take data.path for this job (its error says why)" \
        "$log"
}
OTHER="as many samples and tokens, other contents (the digest of its vocabulary, packing and sampled contents is \
[0-9a-f]* here, [0-9a-f]* there)"

two "$GPT" "$TMP/a" "$TMP/copy" "$TMP/copy.log"
check "a copy of the same files on rank 1: trains (exit $?)" [ $? -eq 0 ]
two "$GPT" "$TMP/a" "$TMP/recut" "$TMP/recut.log"
check "the same text in other shard files on rank 1: trains (exit $?)" [ $? -eq 0 ]

two "$GPT" "$TMP/a" "$TMP/longer" "$TMP/longer.log"
check "a longer text on rank 1: exit 2 (got $?)" [ $? -eq 2 ]
refused "$TMP/longer.log" "longer" "$TMP/longer" ".* here, .* there"
read -r n0 n1 < <(python3 - "$TMP/a" "$TMP/longer" <<'PY'
import glob, os, sys
# windows of gpt2_tiny's seq_len 32 in each folder's train split: (tokens - 1) // 32, the header 1 KiB
print(*[(sum(os.path.getsize(f) - 1024 for f in glob.glob(d + "/train_*.bin")) // 2 - 1) // 32 for d in sys.argv[1:]])
PY
)
check "and the counts are each copy's windows ($n1 here, $n0 there)" \
    grep -q ": $n1 train and [0-9]* val samples, [0-9]* and [0-9]* tokens, 256 classes here, $n0 train and" \
    "$TMP/longer.log"

two "$GPT" "$TMP/a" "$TMP/other" "$TMP/other.log"
check "another text of the same length on rank 1: exit 2 (got $?)" [ $? -eq 2 ]
refused "$TMP/other.log" "same length" "$TMP/other" "$OTHER"

mkdir "$TMP/fashion" && cp "$FASHION"/*.gz "$TMP/fashion/"
python3 - "$TMP/fashion/train-labels-idx1-ubyte.gz" <<'PY'
import gzip, sys
b = bytearray(gzip.open(sys.argv[1]).read())
b[-1] = (b[-1] + 1) % 10  # the last training label, another class
gzip.open(sys.argv[1], "wb").write(bytes(b))
PY
two "$MLP" "$FASHION" "$TMP/fashion" "$TMP/fashion.log" optimizer.schedule.warmup_steps=1
check "Fashion-MNIST with one label changed on rank 1: exit 2 (got $?)" [ $? -eq 2 ]
refused "$TMP/fashion.log" "one label" "$TMP/fashion" "$OTHER"
finish
