#!/usr/bin/env bash
# Nothing stuck: a stop request reaches a job whose ranks are held where the stop agreement cannot
# reach them. A FIFO (or a folder) named as a file of checkpoint.init_from is refused before it is
# opened, naming it, so the job ends with exit 2 instead of blocking a rank in open(). Ranks held
# outside the agreement (DDP_TEST_FAULT: every rank sleeping while the data loads, as on a mount
# that stopped answering; every rank sleeping after a step) end the job once the stop request is
# ddp.timeout_s old, naming the rank and what it was doing: exit 1 with no checkpoint of the job,
# exit 75 when one is complete (also when rank 1 alone is held: rank 0's knowledge of a complete
# checkpoint reaches every rank at each step's agreement) — and the job resumes from it. A stop during an evaluation that
# takes longer than the deadline ends the evaluation (the ranks agree between its passes). A stop
# during the final save, after the loop, does not cut it short. A checkpoint write the storage takes
# nothing of is given up and named, by rank 0 for a file, by the rank whose shard it is for a set;
# one on storage slow but working holds the other ranks past the deadline without a verdict. A set's
# prune runs in the background while the ranks train on; one that stalls is named at the next save
# or at the job's end.
source "$(dirname "$0")/../../lib.sh"
TINY=$DDP_SRC/tests/launcher/trainer/gpt2_tiny.yaml
HF_SRC=${DDP_TEST_FIXTURES:-$DDP_SRC/tests/fixtures}/hf-gpt2-tiny
DATA=$TMP/data
read -r L NH C NPOS V < <(hf_gpt2_shape "$HF_SRC")
SHAPE=(model.gpt2.n_layer="$L" model.gpt2.n_head="$NH" model.gpt2.n_embd="$C" model.gpt2.block_size="$NPOS"
       model.gpt2.vocab_size="$V" data.seq_len="$NPOS")
"$DDP_SRC/scripts/prepare-text" --tokenizer bytes "$DDP_SRC/README.md" "$DATA" >/dev/null
check "prepare-text: byte-token data" [ -f "$DATA/tokenizer.bin" ]

# run_stopped LOG WAIT_FOR_CMD -- ddprun args...: starts ddprun, waits until WAIT_FOR_CMD succeeds (at
# most 60 s), sends SIGTERM, and gives ddprun 40 s more before killing it. Sets rc and took (seconds
# from the SIGTERM to the exit); rc 124 when it had to be killed.
run_stopped() {
    local log=$1 ready=$2; shift 3
    "$DDPRUN" "$@" >"$log" 2>&1 &
    local pid=$! i
    for i in $(seq 600); do eval "$ready" && break; kill -0 $pid 2>/dev/null || break; sleep 0.1; done
    local t0=$SECONDS
    kill -TERM $pid 2>/dev/null
    for i in $(seq 400); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
    if kill -0 $pid 2>/dev/null; then
        kill -TERM $pid; sleep 1; kill -TERM $pid; kill -KILL $pid 2>/dev/null
        wait $pid; rc=124
    else
        wait $pid; rc=$?
    fi
    took=$((SECONDS - t0))
}

for name in model.safetensors config.json; do
    rm -rf "$TMP/hf" && cp -r "$HF_SRC" "$TMP/hf" && rm "$TMP/hf/$name" && mkfifo "$TMP/hf/$name"
    run_stopped "$TMP/fifo.log" "sleep 3; true" -- -np 2 "$TINY" run.dir="$TMP/fifo" data.path="$DATA" \
        "${SHAPE[@]}" checkpoint.init_from="$TMP/hf" ddp.timeout_s=5
    check "$name a FIFO under init_from: exit 2 (got $rc)" [ $rc -eq 2 ]
    check "$name a FIFO: named as one" grep -q "$TMP/hf/$name: is a FIFO, expected a regular file" "$TMP/fifo.log"
done
rm -rf "$TMP/hf" && cp -r "$HF_SRC" "$TMP/hf" && rm "$TMP/hf/model.safetensors" && mkdir "$TMP/hf/model.safetensors"
"$DDPRUN" -np 2 "$TINY" run.dir="$TMP/dir" data.path="$DATA" "${SHAPE[@]}" checkpoint.init_from="$TMP/hf" \
    >"$TMP/dir.log" 2>&1
rc=$?
check "a folder named model.safetensors: exit 2 (got $rc)" [ $rc -eq 2 ]
check "a folder: named as one" grep -q "model.safetensors: is a folder, expected a regular file" "$TMP/dir.log"

# every rank held while the data loads: no checkpoint of this job, exit 1 naming what it did
export DDP_TEST_FAULT=setup-sleep:-1:0:300
run_stopped "$TMP/held.log" "sleep 4; true" -- -np 2 "$SMALL" \
    run.dir="$TMP/held" ddp.timeout_s=4
check "held in setup: SIGTERM ends the job with exit 1 (got $rc)" [ $rc -eq 1 ]
check "held in setup: within ddp.timeout_s and a few seconds (took $took s)" [ $took -le 15 ]
check "held in setup: the rank and what it was doing named" \
    grep -q "\[rank 0 [^]]*\] error: the stop request was not answered within [45] s (ddp.timeout_s): this rank was loading the data (data.path" "$TMP/held.log"
check "held in setup: no checkpoint to resume from, said" grep -q "no checkpoint of this job to resume from" "$TMP/held.log"
unset DDP_TEST_FAULT

# a stop during an evaluation longer than ddp.timeout_s (every pass slowed): the ranks agree
# between passes, so the evaluation ends at once, unrecorded, and the job saves and exits 75
DDP_TEST_FAULT=slow-eval:-1:3:0.3 run_stopped "$TMP/eval.log" "grep -q 'step 2/' $TMP/eval.log && sleep 2" \
    -- -np 2 "$SMALL" run.dir="$TMP/eval" train.max_steps=8 train.eval=true train.eval_every=3 train.log_every=1 \
    ddp.timeout_s=3
check "stopped in a long evaluation: exit 75 (got $rc)" [ $rc -eq 75 ]
check "stopped in a long evaluation: within ddp.timeout_s and a few seconds (took $took s)" [ $took -le 15 ]
check "stopped in a long evaluation: said, and not recorded" \
    grep -q "eval epoch 1 step 3: stopped by the stop request, not recorded" "$TMP/eval.log"
check "stopped in a long evaluation: step 3's checkpoint saved" [ -f "$TMP/eval/checkpoints/ckpt-00000003.ddp" ]

# every rank held after step 5, checkpoints at steps 2 and 4: the one of step 4 is complete, exit 75
LONG=(train.max_steps=8 checkpoint.every_steps=2 checkpoint.resume=auto ddp.timeout_s=4 train.log_every=1)
DDP_TEST_FAULT=sleep:-1:5:300 run_stopped "$TMP/late.log" "[ -f $TMP/late/checkpoints/ckpt-00000004.ddp ] && sleep 1" \
    -- -np 2 "$SMALL" run.dir="$TMP/late" "${LONG[@]}"
check "held after a checkpoint: SIGTERM ends the job with exit 75 (got $rc)" [ $rc -eq 75 ]
check "held after a checkpoint: within ddp.timeout_s and a few seconds (took $took s)" [ $took -le 15 ]
check "held after a checkpoint: resumable, said" grep -q "the last checkpoint is complete" "$TMP/late.log"
"$DDPRUN" -np 2 "$SMALL" run.dir="$TMP/late" "${LONG[@]}" >"$TMP/late2.log" 2>&1
check "the job resumes and completes" [ $? -eq 0 ]
check "from the checkpoint of step 4" grep -q "resumed from .*ckpt-00000004.ddp" "$TMP/late2.log"

# rank 1 alone held after step 7 (rank 0 waits for it in the agreement): rank 1 ends the job first,
# and knows from rank 0 that a checkpoint is complete (step 2's, done at the latest when step 4's
# save was submitted; the agreements of steps 5 and 6 carried it): exit 75
DDP_TEST_FAULT=sleep:1:7:300 run_stopped "$TMP/one.log" "[ -f $TMP/one/checkpoints/ckpt-00000004.ddp ] && sleep 1" \
    -- -np 2 "$SMALL" run.dir="$TMP/one" "${LONG[@]}"
check "rank 1 held after a checkpoint: SIGTERM ends the job with exit 75 (got $rc)" [ $rc -eq 75 ]
check "rank 1 held after a checkpoint: rank 1 says it is resumable" \
    grep -q "rank 1.*the stop request was not answered.*the last checkpoint is complete" "$TMP/one.log"

# a stop while the run's final checkpoint is written (slowed to about 4.5 s, the storage taking a
# chunk every 0.3 s), past the last agreement: the job's end answers it, so the deadline (2 s) does
# not cut the write short, nor does the stall watch (no byte for 2 s); the job ends done (0)
DDP_CKPT_TEST_SLOW_WRITE_MS=300 run_stopped "$TMP/final.log" "grep -q 'step 8/8' $TMP/final.log && sleep 1" \
    -- -np 2 "$SMALL" run.dir="$TMP/final" train.max_steps=8 train.log_every=1 ddp.timeout_s=2
check "a stop during the final save: the job ends 0 (got $rc)" [ $rc -eq 0 ]
check "... its final checkpoint written whole" "$DDPRUN" ckpt info "$TMP/final/checkpoints/ckpt-00000008.ddp"
check "... which took longer than ddp.timeout_s" grep -qE "ckpt-00000008.ddp \(.*\) written in ([2-9][0-9]{3}|[0-9]{5,})\.[0-9] ms" \
    "$TMP/final.log"
check "... and no deadline said" bash -c "! grep -q 'not answered' '$TMP/final.log'"

# the same stop while the storage takes no byte of the final checkpoint (slow-write: 60 s before its
# first): the write is given up after ddp.timeout_s (2 s, the job's end: no collective follows)
# without progress, and the job ends 1 (its state unsaved, so not 75) naming it; step 4's
# checkpoint is as it was
STALL=(train.max_steps=8 train.log_every=1 checkpoint.every_steps=4 ddp.timeout_s=2)
DDP_TEST_FAULT=slow-write:0:8:60 run_stopped "$TMP/stall.log" "grep -q 'step 8/8' $TMP/stall.log" \
    -- -np 2 "$SMALL" run.dir="$TMP/stall" "${STALL[@]}"
check "a stop during a stalled final save: exit 1 (got $rc)" [ $rc -eq 1 ]
check "... within ddp.timeout_s and a few seconds (took $took s)" [ $took -le 15 ]
check "... the write named, given up" grep -q "error: checkpoint write given up: step 8 in $TMP/stall/checkpoints: the \
storage took no byte of it for 2 s (the checkpoints written before it are as they were); the limit is \
ddp.timeout_s" \
    "$TMP/stall.log"
check "... step 4's checkpoint whole, none of step 8" bash -c "'$DDPRUN' ckpt info '$TMP/stall/checkpoints/ckpt-00000004.ddp' \
    >/dev/null && [ ! -e '$TMP/stall/checkpoints/ckpt-00000008.ddp' ]"

# no stop: step 4's write stalls (the storage takes its first chunk, then nothing for 60 s),
# training goes on past it, and step 8's save, which waits for it, gives it up: the job ends 1 in
# seconds. Rank 1 meanwhile waits for rank 0 in the save's agreement under the deadline
# (6 s), counted from before rank 0's wait began, as rank 0 first copies the state from the device
# (slowed to 6.5 s, as a large model's copy might be); past its deadline, rank 1 gives the other
# ranks min(6, 5) s to answer before its verdict, at 11 s. Rank 0 names the storage first, at
# 6.5 + 3 s (with the whole deadline as the write's limit it would speak after the verdict, at
# 12.5 s, and the verdict would name rank 0 as the late one)
t0=$SECONDS
DDP_CKPT_TEST_SLOW_WRITE_MS=60000 DDP_TEST_FAULT=slow-snapshot:0:8:6.5 "$DDPRUN" -np 2 "$SMALL" \
    run.dir="$TMP/stall4" train.max_steps=12 train.log_every=1 checkpoint.every_steps=4 ddp.timeout_s=6 \
    >"$TMP/stall4.log" 2>&1
rc=$?
check "a stalled save mid-run: exit 1 (got $rc)" [ $rc -eq 1 ]
check "... in seconds (took $((SECONDS - t0)) s)" [ $((SECONDS - t0)) -le 30 ]
check "... after training on past it" grep -q "step 8/12" "$TMP/stall4.log"
check "... step 4's write named, given up after half the deadline" grep -q "error: checkpoint write given up: step 4 \
in .*: the storage took no byte of it for 3 s (.*); the limit is half of ddp.timeout_s" "$TMP/stall4.log"
check "... before any deadline's verdict" bash -c "! sed '/checkpoint write given up/q' '$TMP/stall4.log' | \
    grep -q 'ddp.timeout_s: '"

# storage slow but working: step 4's write takes 0.6 s a chunk (about 16 of them), and step 8's save
# waits for it on rank 0, about 9 s, while rank 1 waits in the save's agreement under a deadline of
# 3 s. Rank 0 answers rank 1's question at the deadline (it looks every 0.75 s while bytes move) that
# it is busy, and rank 1's deadline starts over: the job ends 0. Without the answers the verdict
# would name rank 0 as late at 3 + 3 s
DDP_TEST_FAULT=slow-chunks:0:4:0.6 "$DDPRUN" -np 2 "$SMALL" run.dir="$TMP/crawl" train.max_steps=12 \
    train.log_every=1 checkpoint.every_steps=4 ddp.timeout_s=3 >"$TMP/crawl.log" 2>&1
rc=$?
check "a slow write held rank 0 past the deadline: exit 0 (got $rc)" [ $rc -eq 0 ]
check "... for more than ddp.timeout_s and its grace" \
    grep -qE "step 8 snapshot taken in ([6-9][0-9]{3}|[0-9]{5,})\.[0-9] ms" "$TMP/crawl.log"
check "... and no deadline's verdict" bash -c "! grep -q 'ddp.timeout_s: ' '$TMP/crawl.log'"
check "... step 4's checkpoint whole" "$DDPRUN" ckpt info "$TMP/crawl/checkpoints/ckpt-00000004.ddp"
# the same with checkpoint.sharded, rank 1's shard slow (1 s a 4 MiB chunk, about 13 s for 46 MB of a
# wider model) and rank 0 waiting for it in the agreement after the writes (deadline 4 s, verdict at
# 4 + 4 s without rank 1's answers)
DDP_TEST_FAULT=slow-chunks:1:4:1 "$DDPRUN" -np 2 "$SMALL" run.dir="$TMP/crawl2" train.max_steps=8 \
    model.mlp.hidden="[4096, 2048]" checkpoint.every_steps=4 checkpoint.sharded=true ddp.timeout_s=4 \
    >"$TMP/crawl2.log" 2>&1
rc=$?
check "a slow shard on rank 1: exit 0 (got $rc)" [ $rc -eq 0 ]
check "... for more than ddp.timeout_s and its grace" grep -qE "ckpt-00000004 \(.* in 2 shards\) written and \
committed in ([89][0-9]{3}|[0-9]{5,})\.[0-9] ms" "$TMP/crawl2.log"
check "... and no deadline's verdict" bash -c "! grep -q 'ddp.timeout_s: ' '$TMP/crawl2.log'"
check "... step 4's set whole" "$DDPRUN" ckpt info "$TMP/crawl2/checkpoints/ckpt-00000004"

# stalled_sets NAME NP FAULT TIMEOUT ARGS...: a sharded job of 4-step saves on NP ranks under
# DDP_TEST_FAULT=FAULT, ddp.timeout_s TIMEOUT (the writer's limit half of it), logged to $TMP/NAME.log;
# checks that it ends with exit 1 in seconds, before any deadline's verdict
stalled_sets() {
    local name=$1 np=$2 fault=$3 timeout=$4; shift 4
    local t0=$SECONDS
    DDP_TEST_FAULT=$fault "$DDPRUN" -np "$np" "$SMALL" run.dir="$TMP/$name" checkpoint.every_steps=4 \
        checkpoint.sharded=true ddp.timeout_s="$timeout" "$@" >"$TMP/$name.log" 2>&1
    local rc=$?
    check "$name ($fault on $np rank(s)): exit 1 (got $rc)" [ $rc -eq 1 ]
    check "... in seconds (took $((SECONDS - t0)) s)" [ $((SECONDS - t0)) -le 30 ]
    check "... and no deadline's verdict" bash -c "! grep -q 'ddp.timeout_s: ' '$TMP/$name.log'"
}

# checkpoint.sharded: each rank writes its shard synchronously, watched as rank 0's file is. One
# rank alone, its storage taking nothing of the shard (slow-write: 60 s before the first byte):
# given up after half the deadline, 2 s, instead of holding the job for the write
stalled_sets shard1 1 slow-write:0:4:60 4 train.max_steps=8
check "... the shard named, given up after half the deadline" grep -q "checkpoint write given up: \
.*/ckpt-00000004/shard-00000-of-00001.ddp (step 4): the storage took no byte of it for 2 s; the limit is half of \
ddp.timeout_s" "$TMP/shard1.log"
# two ranks, rank 1's storage stalled: rank 1 names its shard at 3 s, while rank 0 waits for its
# verdict in the agreement after the writes, under the whole deadline of 6 s (+ grace), so no
# deadline names rank 1 as late; rank 0 says the set is not committed
stalled_sets shard2 2 slow-write:1:4:60 6 train.max_steps=8
check "... rank 1 names its shard" grep -q "rank 1 .*checkpoint write given up: \
.*/ckpt-00000004/shard-00001-of-00002.ddp (step 4): the storage took no byte of it for 3 s" "$TMP/shard2.log"
check "... rank 0: the set not committed" grep -q "1 rank(s) could not write their shard" "$TMP/shard2.log"
# rank 0's commit of the set (its manifest) on storage that stopped: given up at 3 s as well, while
# rank 1 waits for the verdict under the whole deadline
stalled_sets commit 2 slow-commit:0:4:60 6 train.max_steps=8
check "... rank 0 names the commit" grep -q "rank 0 .*checkpoint write given up: the commit of \
.*/ckpt-00000004 (step 4) made no progress for 3 s; the limit is half of ddp.timeout_s" "$TMP/commit.log"
check "... rank 1: rank 0 could not commit" grep -q "rank 1 .*rank 0 could not commit the set" "$TMP/commit.log"
# the prune after step 8's commit (keep_last 1 removes step 4's set) on storage that stopped: it
# runs in the background while both ranks train on; step 12's save waits for it, and rank 0 names
# it, with step 8's set committed
stalled_sets prune 2 slow-prune:0:8:60 6 train.max_steps=12 checkpoint.keep_last=1
check "... rank 0 names it, the set committed" grep -q "rank 0 .*checkpoint write given up: step 8 is committed \
(.*/ckpt-00000008), but removing older ones beyond checkpoint.keep_last made no progress for 3 s" "$TMP/prune.log"
check "... step 8's set is whole" "$DDPRUN" ckpt info "$TMP/prune/checkpoints/ckpt-00000008"
# the same after the job's last save (step 8): the job's end waits for it under the whole deadline
stalled_sets endprune 2 slow-prune:0:8:60 4 train.max_steps=8 checkpoint.keep_last=1
check "... rank 0 names it at the job's end" grep -q "rank 0 .*checkpoint write given up: step 8 is committed \
(.*/ckpt-00000008), but removing older ones beyond checkpoint.keep_last made no progress for 4 s; the limit is \
ddp.timeout_s" "$TMP/endprune.log"
# a slow prune (2 s before its first file) after step 8's commit, removing step 4's set: rank 0
# trains on meanwhile, so steps 9 to 11 are logged before the prune's end; step 12's save waits for
# what is left of it (and says so), the job's end for step 12's own prune
DDP_TEST_FAULT=slow-prune:0:8:2 "$DDPRUN" -np 2 "$SMALL" run.dir="$TMP/bgprune" train.max_steps=12 train.log_every=1 \
    checkpoint.every_steps=4 checkpoint.sharded=true checkpoint.keep_last=1 ddp.timeout_s=10 >"$TMP/bgprune.log" 2>&1
rc=$?
check "a slow prune of sets: exit 0 (got $rc)" [ $rc -eq 0 ]
check "... rank 0 trained on while it ran" bash -c "grep -e 'step 11/12' -e 'after .*ckpt-00000008, older sets' \
    '$TMP/bgprune.log' | head -n 1 | grep -q 'step 11/12'"
check "... which removed step 4's set" grep -q "after .*/ckpt-00000008, older sets beyond checkpoint.keep_last removed \
in the background ([1-9][0-9]* files, [0-9.]* ms)" "$TMP/bgprune.log"
check "... step 12's save waited for it, timed apart" grep -q "ckpt-00000012 (.*) written and committed in [0-9.]* ms, \
after [0-9.]* ms waiting for the previous save's prune" "$TMP/bgprune.log"
check "... and step 12's set alone is left" bash -c "[ \"\$(ls '$TMP/bgprune/checkpoints' | grep ckpt-)\" = ckpt-00000012 ]"
finish
