#!/usr/bin/env bash
# checkpoint.sharded under real mpirun (GPT-2, AdamW with clipping, train.global_batch 12 so that
# every world size trains the same samples):
#  - the chain np=4 ZeRO-1 (stopped at step 7: exit 75, a committed set of 4 shards) -> np=2 ZeRO-0
#    (stopped at 14: 2 shards) -> np=3 ZeRO-1 to step 20 (3 shards) ends, at every step saved,
#    bit-identical (`ckpt diff`) to the same chain with single-file checkpoints (only its fresh start
#    draws the initial parameters, as does ZeRO-3's, never a resume): a set holds the
#    same tensors as the file of the same step, for ZeRO's parts and for the replicated state's
#    equal slices; and within 6.9e-5 (test_global_batch.sh's bound) of the uninterrupted np=4 run;
#    the set chain's resumes read the sets in parallel (each rank what it holds), the file chain's
#    are rank 0's whole reads;
#  - a rank that exits after writing its shard, before the manifest (DDP_TEST_FAULT shard-exit),
#    leaves a directory without a manifest: the next job warns naming it, resumes the previous set
#    and ends bit-identical to an uninterrupted run;
#  - a shard with one byte flipped: named in the warning (which file, what is wrong), the previous
#    complete set resumed, never the damaged one (test_ckpt_set: truncated and missing shards); the
#    step saved again writes the alternate shard names while the passed-over manifest stands; a
#    damaged set newer than a single file is tried and named once, the file resumed as the walk
#    read it; every set damaged and a download leaving none: a fresh start with nothing of the
#    sets read in its optimizer state, bit-identical to the uninterrupted run;
#  - ZeRO-3 (parameters sharded too) at np=3: its set equals its single file, and np=2 ZeRO-2
#    resumes it to the single-file chain's step 20 bit for bit; so does np=2 ZeRO-3, each rank
#    reading only its own pieces of the set, also of a set checkpoint.download_cmd brings and of
#    checkpoint.resume's set on a restart that saved none of its own; under ZeRO-3 a flipped byte is named by the rank that
#    read it and the previous set is resumed by pieces, ending bit-identical, and so is a missing
#    shard (not taken for a refusal of the settings); a damaged single file newer than the sets
#    is passed over, the set before it still read by pieces; a set resumed on other (re-prepared,
#    larger) training data is refused naming both sample counts, by pieces and whole, and one
#    whose tensor table lays the model out otherwise by pieces, naming the tensor;
#  - keep_last removes old sets whole, and a prune that fails after a commit (DDP_TEST_FAULT
#    prune-fail) is a warning: the job goes on and the next save prunes; a read that fails for want
#    of memory ends the job instead of resuming an older checkpoint; checkpoint.resume names a
#    set's directory; a resume from a single file at np 3 raises no rank but rank 0's memory by
#    the whole state (the broadcast goes a chunk at a time);
#  - a rank whose host has another folder at checkpoint.dir's path ends the job at the start, on a
#    restart before the resume reads (and calls damaged) the sets rank 0 sees;
#  - `ckpt info` lists a set's shards (BAD naming the damaged one, exit 1), names a folder of
#    checkpoints as such, `ckpt export --format
#    hf|llmc` of a set is byte for byte the export of the single file of the same step, and
#    `ddprun generate` draws the same text from both; an export into the set, a folder in it or one
#    holding it is refused.
source "$(dirname "$0")/../../lib.sh"
GPT=$DDP_SRC/tests/launcher/trainer/gpt2_small.yaml
DATA=$TMP/bytes
cat /usr/share/common-licenses/{GPL-3,Apache-2.0} >"$TMP/corpus.txt"
"$DDP_SRC/scripts/prepare-text" --tokenizer bytes "$TMP/corpus.txt" "$DATA" >"$TMP/prepare.log" 2>&1
check "prepare-text writes the byte-level shards" [ -f "$DATA/train_000000.bin" ]

# run NAME NP [overrides...]: one job under mpirun, its log appended to $TMP/NAME.log
run() {
    local name=$1 np=$2; shift 2
    timeout 300 mpirun -np "$np" --oversubscribe --bind-to none "$DDPRUN_WORKER" "$GPT" run.dir="$TMP/$name" \
        "${G[@]}" "$@" >>"$TMP/$name.log" 2>&1
}
file() { echo "$TMP/$1/checkpoints/ckpt-$(printf %08d "$2").ddp"; }
set_of() { echo "$TMP/$1/checkpoints/ckpt-$(printf %08d "$2")"; }
shards() { ls "$1"/shard-*.ddp 2>/dev/null | wc -l; }
same() { "$DDPRUN" ckpt diff "$1" "$2" >/dev/null; }
G=(data.path="$DATA" train.global_batch=12 data.batch_size=4 train.micro_batch=auto train.max_steps=20
   checkpoint.keep_last=10)
S=(checkpoint.sharded=true)

# ---- (a, b) the chain np=4 ZeRO-1 -> np=2 ZeRO-0 -> np=3 ZeRO-1, sharded and single-file ----------
for kind in set file; do
    more=()
    [ $kind = set ] && more=("${S[@]}")
    DDP_TEST_FAULT=stop:0:7 run "$kind" 4 ddp.zero=1 "${more[@]}"
    check "$kind chain: np=4 ZeRO-1 stops at step 7 with exit 75 (got $?)" [ $? -eq 75 ]
    # a set's replicated buffers are read in chunks of 997 floats (a prime: the last one short)
    DDP_COMM_MAX_CHUNK=997 DDP_TEST_FAULT=stop:1:14 run "$kind" 2 ddp.zero=0 checkpoint.resume=auto "${more[@]}"
    run "$kind" 3 ddp.zero=1 checkpoint.resume=auto "${more[@]}"
    check "$kind chain: the np=3 part resumed step 14 at another world size" \
        grep -q "world size changed from 2 to 3" "$TMP/$kind.log"
done
for step in 7 14 20; do
    check "set chain: step $step is a committed set" [ -f "$(set_of set $step)/manifest.ddp" ]
    check "set chain: step $step's set equals the single file of the same chain (ckpt diff)" \
        same "$(set_of set $step)" "$(file file $step)"
done
check "set chain: 4, 2 and 3 shards" [ "$(shards "$(set_of set 7)") $(shards "$(set_of set 14)") $(shards "$(set_of set 20)")" = "4 2 3" ]
check "set chain: the np=2 part resumed the set of step 7" grep -q "resumed from .*/ckpt-00000007:" "$TMP/set.log"
check "set chain: ZeRO-0 and ZeRO-1 read the sets in parallel, no rank the whole state" \
    bash -c "grep -q 'each rank read what it holds of $(set_of set 7)' '$TMP/set.log' &&
             grep -q 'each rank read what it holds of $(set_of set 14)' '$TMP/set.log'"
check "file chain: single files are read whole by rank 0" bash -c "! grep -q 'each rank read' '$TMP/file.log'"
check "set chain: no single file written" [ -z "$(ls "$TMP/set/checkpoints/" | grep '\.ddp$')" ]
check "set chain: only the fresh start draws the initial parameters (once in three jobs), no resume" \
    [ "$(grep -c 'drawn from run.seed' "$TMP/set.log")" -eq 1 ]
run frompath 1 checkpoint.resume="$(set_of set 14)" train.max_steps=15
check "checkpoint.resume naming a set's directory resumes it at np=1" \
    grep -q "resumed from $(set_of set 14): step 14" "$TMP/frompath.log"
run ref 4 ddp.zero=1
check "the chain's parameters within 6.9e-5 of the uninterrupted np=4 run" \
    "$CKPT_COMPARE" "$(file ref 20)" "$(set_of set 20)" param/ 6.9e-5
check "... and its AdamW moments within 6.9e-5" "$CKPT_COMPARE" "$(file ref 20)" "$(set_of set 20)" optim/exp_avg/ 6.9e-5

# ---- ZeRO-3: parameters sharded too; its set equals its single file, and another stage resumes it --
for kind in set file; do
    more=()
    [ $kind = set ] && more=("${S[@]}")
    DDP_TEST_FAULT=stop:0:7 run "z3$kind" 3 ddp.zero=3 "${more[@]}"
    run "z3$kind" 2 ddp.zero=2 checkpoint.resume=auto "${more[@]}"
done
check "ZeRO-3 np=3: step 7's set equals its single file (ckpt diff)" same "$(set_of z3set 7)" "$(file z3file 7)"
check "ZeRO-3 np=3 -> ZeRO-2 np=2: step 20's set equals the single-file chain's (ckpt diff)" \
    same "$(set_of z3set 20)" "$(file z3file 20)"
run z3pieces 2 ddp.zero=3 checkpoint.resume="$(set_of z3set 7)" "${S[@]}"
check "ZeRO-3 np=2 resumes the np=3 set, each rank reading its own pieces" \
    grep -q "each rank read what it holds of $(set_of z3set 7)" "$TMP/z3pieces.log"
check "... drawing no initial parameters (ZeRO-3's fresh start does: each rank the whole stream)" \
    bash -c "! grep -q 'drawn from run.seed' '$TMP/z3pieces.log' && grep -q 'drawn from run.seed' '$TMP/z3set.log'"
check "... and ends at step 20 bit-identical to the ZeRO-2 chain (ckpt diff)" \
    same "$(set_of z3pieces 20)" "$(file z3file 20)"
run z3download 2 ddp.zero=3 checkpoint.resume=auto "${S[@]}" checkpoint.download_cmd="cp -r '$(set_of z3set 7)' {dir}/"
check "ZeRO-3: a set checkpoint.download_cmd brings is read by pieces too, never whole" \
    grep -q "each rank read what it holds of $(set_of z3download 7)" "$TMP/z3download.log"
check "... and the run ends at step 20 bit-identical to the ZeRO-2 chain" \
    same "$(set_of z3download 20)" "$(file z3file 20)"
DDPRUN_RESTART_COUNT=1 run z3restart 2 ddp.zero=3 checkpoint.resume="$(set_of z3set 7)" "${S[@]}" train.max_steps=9
check "ZeRO-3: a restart with none of its own reads checkpoint.resume's set by pieces" \
    grep -q "each rank read what it holds of $(set_of z3set 7)" "$TMP/z3restart.log"
cat "$TMP/corpus.txt" /usr/share/common-licenses/MPL-2.0 >"$TMP/more.txt"
"$DDP_SRC/scripts/prepare-text" --tokenizer bytes "$TMP/more.txt" "$TMP/more" >>"$TMP/prepare.log" 2>&1
run moredata 2 ddp.zero=3 checkpoint.resume="$(set_of z3set 7)" "${S[@]}" data.path="$TMP/more"
check "a set resumed by pieces on other (larger) training data: refused (exit $?)" [ $? -eq 2 ]
run moredata 1 checkpoint.resume="$(set_of set 14)" data.path="$TMP/more"
check "... and assembled whole (exit $?)" [ $? -eq 2 ]
check "... each naming both sample counts" [ "$(grep -cE "ckpt-0+(7|14) was saved training on [0-9]+ samples, this run's training data has [0-9]+" "$TMP/moredata.log")" -ge 2 ]
# a set whose tensor table lays the model out otherwise (two tensors of one size at each other's
# offsets: ckpt_relayout) would be read by pieces at this model's offsets, the two swapped: refused
mkdir -p "$TMP/relaid" && cp -r "$(set_of set 14)" "$TMP/relaid/"
SWAPPED=$("$CKPT_RELAYOUT" "$TMP/relaid/ckpt-00000014")
run relaid 2 checkpoint.resume="$TMP/relaid/ckpt-00000014" "${S[@]}"
check "a set laid out otherwise, read by pieces: refused (exit $?), naming ${SWAPPED%% *}" \
    bash -c "[ $? -eq 2 ] && grep -q 'ckpt-00000014: tensor ${SWAPPED%% *} is elsewhere or of another size in the set' \
             '$TMP/relaid.log'"

# ---- (c) a save killed after one rank's shard, before the manifest -------------------------------
E=(ddp.zero=1 checkpoint.every_steps=4 "${S[@]}")
run whole 2 "${E[@]}" checkpoint.keep_last=2
check "keep_last 2: only the sets of steps 16 and 20 are left, whole" \
    [ "$(ls "$TMP/whole/checkpoints" | tr '\n' ' ')" = "ckpt-00000016 ckpt-00000020 " ]
DDP_TEST_FAULT=prune-fail:0:8 run prunefail 2 "${E[@]}" checkpoint.keep_last=2
check "prune-fail: a prune that fails after step 8's set is committed does not fail the job (exit $?)" [ $? -eq 0 ]
check "prune-fail: ... it is a warning naming the set" \
    grep -q "ckpt-00000008 is written, but older ones were not pruned" "$TMP/prunefail.log"
check "prune-fail: ... the next saves prune again, and it ends as the run without the fault" \
    bash -c "[ \"\$(ls '$TMP/prunefail/checkpoints' | tr '\n' ' ')\" = 'ckpt-00000016 ckpt-00000020 ' ] &&
             '$DDPRUN' ckpt diff '$(set_of whole 20)' '$(set_of prunefail 20)' >/dev/null"
DDP_TEST_FAULT=shard-exit:1:8 run killed 2 "${E[@]}"
check "shard-exit: the job fails (exit $?)" [ $? -ne 0 ]
check "shard-exit: step 8's directory holds rank 1's shard but no manifest" \
    bash -c "[ -f '$(set_of killed 8)/shard-00001-of-00002.ddp' ] && [ ! -e '$(set_of killed 8)/manifest.ddp' ]"
run killed 2 "${E[@]}" checkpoint.resume=auto
check "shard-exit: the next job names the uncommitted set" \
    grep -q "ckpt-00000008: no manifest.ddp (a save that did not finish): not a checkpoint" "$TMP/killed.log"
check "shard-exit: ... and resumes step 4's set" grep -q "resumed from .*/ckpt-00000004:" "$TMP/killed.log"
check "shard-exit: it ends bit-identical to the uninterrupted run" same "$(set_of whole 20)" "$(set_of killed 20)"

# ---- (d) a damaged shard: named, the previous complete set resumed -------------------------------
damage() { # NAME [FROM]: a copy of FROM's (whole's) sets, one byte of step 20's shard 1 flipped
    mkdir -p "$TMP/$1"
    cp -r "$TMP/${2:-whole}/checkpoints" "$TMP/$1/"
    local f
    f=$(set_of "$1" 20)/shard-00001-of-00002.ddp
    printf '\x5a' | dd of="$f" bs=1 seek=$(($(stat -c %s "$f") - 5)) conv=notrunc status=none
}
damage flip
run flip 2 "${E[@]}" checkpoint.resume=auto
check "flip: the rank that read the damaged piece names the shard file and says CRC mismatch" grep -q \
    "warning: .*ckpt-00000020/shard-00001-of-00002.ddp: CRC mismatch in tensor" "$TMP/flip.log"
check "flip: rank 0 falls back to the previous set" \
    grep -q "could not read what it holds of .*ckpt-00000020; falling back to the previous checkpoint" "$TMP/flip.log"
check "flip: the previous set (step 16) resumed" grep -q "resumed from .*/ckpt-00000016:" "$TMP/flip.log"
check "flip: the resumed run ends bit-identical to the uninterrupted one" same "$(set_of whole 20)" "$(set_of flip 20)"
check "flip: step 20 saved again under the alternate names, the passed-over set's shards removed" \
    bash -c "[ -f '$(set_of flip 20)/shard-00001-of-00002-alt.ddp' ] && [ ! -e '$(set_of flip 20)/shard-00001-of-00002.ddp' ]"
# a read that fails for want of memory (DDP_TEST_FAULT read-local) is this machine's failure, not
# the checkpoint's: the job ends naming it, and no older checkpoint is resumed in its place (the
# newest would then be pruned); by pieces (rank 1) and whole (rank 0, a single file)
mkdir -p "$TMP/local" "$TMP/localfile"
cp -r "$TMP/whole/checkpoints" "$TMP/local/"
cp -r "$TMP/file/checkpoints" "$TMP/localfile/"
DDP_TEST_FAULT=read-local:1:20 run local 2 "${E[@]}" checkpoint.resume=auto
check "read-local, a set by pieces: the job fails (exit $?)" [ $? -eq 1 ]
DDP_TEST_FAULT=read-local:0:20 run localfile 2 ddp.zero=1 checkpoint.resume=auto
check "read-local, a single file whole: the job fails (exit $?)" [ $? -eq 1 ]
for name in local localfile; do
    check "$name: named as this machine's failure, step 20 not passed over" \
        grep -q "ckpt-00000020[^ ]* is not passed over for it: the failure is this machine's" "$TMP/$name.log"
    check "$name: no older checkpoint resumed" bash -c "! grep -q 'resumed from' '$TMP/$name.log'"
done
# a damaged set newer than a single file: the walk passes over the set and ends at the file, which
# rank 0 resumes as the walk read it: the set is tried (and named) once, not again by a second walk
damage walkfile
rm -r "$(set_of walkfile 16)"
cp "$(file file 14)" "$TMP/walkfile/checkpoints/"
run walkfile 2 "${E[@]}" checkpoint.resume=auto train.max_steps=16
check "a damaged set, then a single file: the file resumed" \
    grep -q "resumed from $(file walkfile 14): step 14" "$TMP/walkfile.log"
check "... the damaged set tried and named once (no second walk)" \
    [ "$(grep -c 'ckpt-00000020/shard-00001-of-00002.ddp: CRC mismatch' "$TMP/walkfile.log")" -eq 1 ]
# every set damaged, and a checkpoint.download_cmd that leaves none (a sync deleting what the store
# lacks): a fresh start, with nothing of the set whose pieces rank 0 read before the ranks' verdict
# left in its optimizer state: it ends as the uninterrupted run
damage fresh
rm -r "$(set_of fresh 16)"
run fresh 2 "${E[@]}" checkpoint.keep_last=2 checkpoint.resume=auto checkpoint.download_cmd="rm -r {dir}/ckpt-00000020"
check "every set damaged, the download leaves none: a fresh start (exit $?)" \
    bash -c "[ $? -eq 0 ] && grep -q 'starting fresh' '$TMP/fresh.log'"
check "... bit-identical to the uninterrupted run" same "$(set_of whole 20)" "$(set_of fresh 20)"
E3=(ddp.zero=3 checkpoint.every_steps=4 "${S[@]}")
run z3whole 2 "${E3[@]}"
damage z3flip z3whole
run z3flip 2 "${E3[@]}" checkpoint.resume=auto
check "ZeRO-3 flip: the rank that read the damaged piece names the shard file and says CRC mismatch" grep -q \
    "rank 1 .*warning: .*ckpt-00000020/shard-00001-of-00002.ddp: CRC mismatch in tensor" "$TMP/z3flip.log"
check "ZeRO-3 flip: rank 0 falls back to the previous set" \
    grep -q "rank 1 could not read what it holds of .*ckpt-00000020; falling back to the previous checkpoint" "$TMP/z3flip.log"
check "ZeRO-3 flip: step 16's set resumed, by pieces" \
    grep -q "each rank read what it holds of .*/ckpt-00000016" "$TMP/z3flip.log"
check "ZeRO-3 flip: the resumed run ends bit-identical to the uninterrupted one" \
    same "$(set_of z3whole 20)" "$(set_of z3flip 20)"
mkdir -p "$TMP/z3newer"
cp -r "$TMP/z3whole/checkpoints" "$TMP/z3newer/"
rm -r "$(set_of z3newer 20)"
head -c 5000 /dev/urandom >"$(file z3newer 18)" # a damaged single file newer than the sets
run z3newer 2 "${E3[@]}" checkpoint.resume=auto
check "ZeRO-3, a damaged single file newer than the sets: named" \
    grep -q "warning: .*ckpt-00000018.ddp.*falling back to the previous checkpoint" "$TMP/z3newer.log"
check "... step 16's set resumed by pieces, not assembled whole on rank 0" \
    grep -q "each rank read what it holds of .*/ckpt-00000016" "$TMP/z3newer.log"
mkdir -p "$TMP/z3missing"
cp -r "$TMP/z3whole/checkpoints" "$TMP/z3missing/"
rm "$(set_of z3missing 20)/shard-00001-of-00002.ddp"
run z3missing 2 "${E3[@]}" checkpoint.resume=auto
check "ZeRO-3 missing shard: the job runs, falling back (exit $?)" [ $? -eq 0 ]
check "ZeRO-3 missing shard: named" grep -q "ckpt-00000020/shard-00001-of-00002.ddp" "$TMP/z3missing.log"
check "ZeRO-3 missing shard: step 16's set resumed by pieces, ending bit-identical to the uninterrupted run" \
    bash -c "grep -q 'each rank read what it holds of .*/ckpt-00000016' '$TMP/z3missing.log' &&
             '$DDPRUN' ckpt diff '$(set_of z3whole 20)' '$(set_of z3missing 20)' >/dev/null"

# ---- (e) ckpt info / export of a set ---------------------------------------------------------------
"$DDPRUN" ckpt info "$(set_of set 7)" >"$TMP/info.txt" 2>&1
check "ckpt info on a set: exit 0, all CRCs OK" bash -c "[ $? -eq 0 ] && grep -q 'all CRCs OK' '$TMP/info.txt'"
check "ckpt info lists the 4 shards" [ "$(grep -c '^shard shard-0000[0-3]-of-00004.ddp .* OK$' "$TMP/info.txt")" -eq 4 ]
"$DDPRUN" ckpt info "$TMP/set/checkpoints" >"$TMP/info-folder.txt" 2>&1
check "ckpt info on the folder of checkpoints: exit 1 (got $?)" [ $? -eq 1 ]
check "... saying what the folder is, naming the newest checkpoint" grep -qE \
    "checkpoints is a folder of [0-9]+ checkpoints, not one checkpoint: name one of them \(the newest: .*/ckpt-" \
    "$TMP/info-folder.txt"
damage info
"$DDPRUN" ckpt info "$(set_of info 20)" >"$TMP/info-bad.txt" 2>&1
check "ckpt info on a damaged set: exit 1 (got $?)" [ $? -eq 1 ]
check "... naming the shard" grep -q "BAD SHARD: .*shard-00001-of-00002.ddp: CRC mismatch" "$TMP/info-bad.txt"
check "ckpt diff of a damaged set fails" bash -c "! '$DDPRUN' ckpt diff '$(set_of info 20)' '$(set_of whole 20)' >/dev/null 2>&1"
for step in 7 14; do
    "$DDPRUN" ckpt export --format hf "$(set_of set $step)" "$TMP/hf-set-$step" >"$TMP/export.log" 2>&1
    check "export --format hf of step $step's set" [ $? -eq 0 ]
    "$DDPRUN" ckpt export --format hf "$(file file $step)" "$TMP/hf-file-$step" >>"$TMP/export.log" 2>&1
    check "... model.safetensors byte for byte the single file's export" \
        cmp "$TMP/hf-set-$step/model.safetensors" "$TMP/hf-file-$step/model.safetensors"
    check "... config.json too" cmp "$TMP/hf-set-$step/config.json" "$TMP/hf-file-$step/config.json"
    "$DDPRUN" ckpt export --format llmc "$(set_of set $step)" "$TMP/set-$step.bin" >>"$TMP/export.log" 2>&1
    "$DDPRUN" ckpt export --format llmc "$(file file $step)" "$TMP/file-$step.bin" >>"$TMP/export.log" 2>&1
    check "export --format llmc of step $step's set equals the single file's" cmp "$TMP/set-$step.bin" "$TMP/file-$step.bin"
done
"$DDPRUN" generate "$(set_of set 7)" --tokens 16 >"$TMP/gen-set.txt" 2>"$TMP/gen.log"
"$DDPRUN" generate "$(file file 7)" --tokens 16 >"$TMP/gen-file.txt" 2>>"$TMP/gen.log"
check "ddprun generate from a set draws the single file's text" \
    bash -c "[ -s '$TMP/gen-set.txt' ] && cmp '$TMP/gen-set.txt' '$TMP/gen-file.txt'"
"$DDPRUN" generate "$(set_of set 7)/" --tokens 16 >"$TMP/gen-slash.txt" 2>>"$TMP/gen.log"
check "... and from the set's directory written with a trailing slash (finding the run's tokenizer)" \
    cmp "$TMP/gen-slash.txt" "$TMP/gen-file.txt"
"$DDPRUN" ckpt export --format llmc --force "$(set_of set 7)" "$(set_of set 7)/manifest.ddp" >"$TMP/into.log" 2>&1
check "export --force into the set's own directory is refused (exit $?)" grep -q "lies in the checkpoint being exported" \
    "$TMP/into.log"
check "... and the set is left whole" "$DDPRUN" ckpt info "$(set_of set 7)"
for into in "$(set_of set 7)" "$(set_of set 7)/hf/" "$TMP/set/checkpoints"; do
    "$DDPRUN" ckpt export --format hf --force "$(set_of set 7)" "$into" >"$TMP/into-hf.log" 2>&1
    check "export --format hf --force into $into (the set, a folder in it, one holding it) is refused (exit $?)" \
        grep -q "the checkpoint being exported" "$TMP/into-hf.log"
done
check "... and the set is left whole, nothing written in it" \
    bash -c "'$DDPRUN' ckpt info '$(set_of set 7)' >/dev/null && [ ! -e '$(set_of set 7)/config.json' ] && [ ! -e '$(set_of set 7)/hf' ]"
check "export of a damaged set is refused" \
    bash -c "! '$DDPRUN' ckpt export --format llmc '$(set_of info 20)' '$TMP/bad.bin' >/dev/null 2>&1 && [ ! -e '$TMP/bad.bin' ]"

# ---- a resume from a single file: rank 0 reads it whole, no other rank holds the whole state -------
# A 12.7M-parameter GPT at np 3 under ZeRO-1, the broadcast in chunks of 1M floats: another rank
# holds a chunk and its third of the state; its resident memory rises by less than the whole state
# (the model and AdamW's two moments), which it held before (and besides, it first touches its
# device copy of the parameters and its state shard: about two-thirds of that bound in all).
BIG=(model.gpt2.n_embd=512 model.gpt2.n_head=8 model.gpt2.n_layer=4 ddp.zero=1 ddp.bucket_mb=25
     ddp.first_bucket_mb=1 checkpoint.every_steps=2 optimizer.schedule.warmup_steps=1)
run big 3 "${BIG[@]}" train.max_steps=2
DDP_COMM_MAX_CHUNK=1048576 run big 3 "${BIG[@]}" train.max_steps=3 checkpoint.resume=auto
rose=$(grep "start, the resume of a checkpoint rank 0 read whole" "$TMP/big.log")
others=$(sed -n 's/.* \([0-9]*\) MiB on any rank but 0.*/\1/p' <<<"$rose")
model=$(sed -n 's/.*(the model \([0-9]*\) MiB.*/\1/p' <<<"$rose")
check "single-file resume: resumed step 2 at np 3" grep -q "resumed from .*ckpt-00000002.ddp: step 2" "$TMP/big.log"
check "... a rank other than 0 rose by ${others:-?} MiB, under the whole state ($((3 * ${model:-0})) MiB)" \
    bash -c "[ -n '$others' ] && [ -n '$model' ] && [ '$others' -lt $((3 * ${model:-0})) ]"

# ---- a rank whose host has another folder at checkpoint.dir's path --------------------------------
# rank 1 in a mount namespace of its own with a tmpfs over that path (a share not mounted on its
# host): the job ends at the start, exit 2, rank 1 naming the folder and rank 0's file, rank 0
# naming rank 1, no step trained and rank 0's file gone; one that sees the folder read-only ends it
# too (exit 1); not sharded, rank 0 alone writes there; a restart with a set saved ends before its
# resume names the set.
if unshare -m true 2>/dev/null; then
    mkdir -p "$TMP/unshared/ckpt"
    # rank 1's view of the folder: another one (a tmpfs over it), or (mount_ro set) the same read-only
    mount_tmpfs='mount -t tmpfs none "$0" && exec "$@"'
    unshared() {
        timeout 120 mpirun --bind-to none -np 1 "$DDPRUN_WORKER" "$GPT" "${G[@]}" run.dir="$TMP/unshared/run" \
            checkpoint.dir="$TMP/unshared/ckpt" "$@" : -np 1 unshare -m sh -c "${mount_ro:-$mount_tmpfs}" \
            "$TMP/unshared/ckpt" "$DDPRUN_WORKER" "$GPT" "${G[@]}" run.dir="$TMP/unshared/run" \
            checkpoint.dir="$TMP/unshared/ckpt" "$@" >"$TMP/unshared.log" 2>&1
    }
    unshared "${S[@]}" train.max_steps=4
    rc=$?
    check "a rank that does not see checkpoint.dir as rank 0 does ends the start (exit $rc)" [ $rc -eq 2 ]
    check "... rank 1 naming the folder and rank 0's file" grep -qE "\[rank 1 [^]]*\] error: checkpoint directory \
$TMP/unshared/ckpt on this rank's host \([^)]*\) is not the one rank 0 writes: rank 0's file \.ddprun-shared-[0-9a-f]{16} is \
not there" "$TMP/unshared.log"
    check "... rank 0 naming rank 1" grep -qE "\[rank 0 [^]]*\] error: rank 1 could not take checkpoint.dir for the \
sharded checkpoints" "$TMP/unshared.log"
    check "... before any step, rank 0's file removed" \
        bash -c "! grep -q ' step [0-9]*/' '$TMP/unshared.log' && [ -z \"\$(ls -A '$TMP/unshared/ckpt')\" ]"
    mount_ro='mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"' unshared "${S[@]}" train.max_steps=4
    rc=$?
    check "... one that sees it read-only ends the start too (exit $rc)" [ $rc -eq 1 ]
    check "... rank 1 naming the folder and why" grep -qE "\[rank 1 [^]]*\] error: checkpoint directory $TMP/unshared/ckpt \
on this rank's host \([^)]*\), where it writes its shard: cannot make \.ddprun-shared-[0-9a-f]{16}-r1 in it: Read-only" \
        "$TMP/unshared.log"
    check "... rank 0's file removed" [ -z "$(ls -A "$TMP/unshared/ckpt")" ]
    unshared train.max_steps=4
    rc=$?
    check "... not sharded, rank 0 alone writes there: the job trains and saves (exit $rc)" \
        bash -c "[ $rc -eq 0 ] && [ -f '$TMP/unshared/ckpt/ckpt-00000004.ddp' ]"
    # a restart onto such a host where a set is saved ends before the resume, whose walk would find
    # the set damaged on rank 1 (and pass over it, and run checkpoint.download_cmd)
    rm -rf "$TMP/unshared/ckpt"/*
    run unshared-set 2 "${S[@]}" checkpoint.dir="$TMP/unshared/ckpt" train.max_steps=4
    set_saved=$(ls "$TMP/unshared/ckpt")
    unshared "${S[@]}" train.max_steps=8 checkpoint.resume=auto
    rc=$?
    check "... a restart onto it, a set ${set_saved:-?} saved, ends before the resume (exit $rc)" \
        bash -c "[ $rc -eq 2 ] && [ -n '$set_saved' ] && grep -q 'is not the one rank 0 writes' '$TMP/unshared.log'"
    check "... the set neither read nor called damaged" bash -c "! grep -q '$set_saved' '$TMP/unshared.log'"
else
    echo "note: the unshared checkpoint.dir case skipped (unshare -m is not allowed here)"
fi
finish
