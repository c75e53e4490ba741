#!/usr/bin/env bash
# The MPI backend's deadline (ddp.timeout_s) through the real launcher, at np 3 on the CPU: a rank
# stopped with SIGSTOP, a rank sleeping before a collective, rank 0 itself stopped, and a rank that
# exits with status 0 between collectives without MPI_Finalize each end the job with exit 1 within
# the timeout plus 30 s from the job's start; the message names the rank that did not arrive, its host, the collective,
# its label and the step, and says where the other ranks wait. A rank that is late by less than the
# timeout, and checkpoints written every few steps, end normally. A rank whose config read never
# returns (a FIFO nobody writes, as a mount that stopped answering) ends the job at the start-up's
# deadline, the command line's ddp.timeout_s, named; so does one whose program never starts (its
# exec stalled), which holds the others in MPI_Init. Rank 0's text sample longer than the deadline
# is no hung rank.
source "$(dirname "$0")/../../lib.sh"
HOST=$(hostname)
TIMEOUT=3
# The clock starts with the job: the slack covers three ranks' start and five steps on a loaded
# 2-vCPU machine (13 s seen), while a missed deadline runs to the 120 s limit below.
LIMIT=$((TIMEOUT + 30))

# timed TAG COMMAND...: COMMAND within the test's 120 s limit, its output in $TMP/TAG.log; sets rc
# and took (s)
timed() {
    local tag=$1 t0; shift
    t0=$(date +%s.%N)
    timeout 120 "$@" >"$TMP/$tag.log" 2>&1
    rc=$?
    took=$(python3 -c "print(round($(date +%s.%N) - $t0, 1))")
    echo "$tag: exit $rc after $took s"
}
# run TAG FAULT [overrides...]: the job at np 3 with DDP_TEST_FAULT=FAULT
run() {
    local tag=$1 fault=$2; shift 2
    timed "$tag" env DDP_TEST_FAULT="$fault" "$DDPRUN" -np 3 "$SMALL" run.dir="$TMP/$tag" ddp.timeout_s=$TIMEOUT "$@"
}
in_time() { python3 -c "import sys; sys.exit(0 if $took < $LIMIT else 1)"; }
ended() { [ $rc -ne 0 ] && [ $rc -ne 124 ]; } # by the job, not by the test's own limit
said() { grep -qF -- "$2" "$TMP/$1.log"; }

run stopped sigstop:1:5
check "a stopped rank ends the job with exit 1 (got $rc)" [ "$rc" -eq 1 ]
check "within ddp.timeout_s + 30 s of the start (took $took s)" in_time
check "the message names rank 1 and its host" said stopped "Not arrived: rank 1 (host $HOST)"
check "... the collective and its label" said stopped "all-reduce #"
check "... and the step" said stopped "(stop agreement, step 5)"
check "... and where the other ranks wait" said stopped "Waiting: rank 2 in all-reduce #"
# rank 0, the lowest rank that timed out, gives the verdict; another rank adds its own only when
# rank 0's MPI_Abort has not ended it 3 s later (a loaded machine: comm_mpi_watch.c's expire)
check "rank 0 gives the verdict, first" bash -c "grep -m1 'did not complete within' '$TMP/stopped.log' | grep -q 'on rank 0 '"

run sleeping sleep:2:5:60
check "a rank sleeping before a collective ends the job with exit 1 (got $rc)" [ "$rc" -eq 1 ]
check "within ddp.timeout_s + 30 s of the start (took $took s)" in_time
check "the message names rank 2 and its host" said sleeping "Not arrived: rank 2 (host $HOST)"

run root_stopped sigstop:0:5
check "rank 0 stopped ends the job with exit 1 (got $rc)" [ "$rc" -eq 1 ]
check "within ddp.timeout_s + 30 s of the start (took $took s)" in_time
check "rank 1 names rank 0" said root_stopped "on rank 1 (host $HOST). Not arrived: rank 0 (host $HOST)"

run quit quit:1:5
check "a rank exiting 0 without MPI_Finalize ends the job with exit 1 (got $rc)" [ "$rc" -eq 1 ]
check "within ddp.timeout_s + 30 s of the start (took $took s)" in_time
check "the output names rank 1" grep -q "rank 1" "$TMP/quit.log"

run late sleep:1:5:1.5 checkpoint.every_steps=4
check "a rank late by less than the timeout, with checkpoints every 4 steps: the job ends normally (got $rc)" \
    [ "$rc" -eq 0 ]
check "... and no deadline message" bash -c "! grep -q 'ddp.timeout_s:' '$TMP/late.log'"
check "... its checkpoints were written" [ -n "$(last_ckpt "$TMP/late")" ]

# rank 0's text sample (a GPT on byte-level tokens) of 8 tokens slowed to 0.8 s each: 6.4 s, more
# than twice the deadline, while the other ranks wait in the stop agreement; rank 0 answers them
# that it is busy, and the job ends normally (a verdict naming rank 0 without that)
"$DDP_SRC/scripts/prepare-text" --tokenizer bytes "$DDP_SRC/README.md" "$TMP/bytes" >"$TMP/prepare.log" 2>&1
timed sample env DDP_TEST_FAULT=slow-sample:0:2:0.8 "$DDPRUN" -np 3 "$DDP_SRC/tests/launcher/trainer/gpt2_tiny.yaml" \
    run.dir="$TMP/sample" data.path="$TMP/bytes" ddp.timeout_s=$TIMEOUT train.max_steps=4 train.sample_every=2 \
    train.sample_tokens=8
check "rank 0's text sample longer than the deadline: the job ends normally (got $rc)" [ "$rc" -eq 0 ]
check "... the slow sample printed, no deadline message" \
    bash -c "grep -q 'sample at step 2' '$TMP/sample.log' && ! grep -q 'ddp.timeout_s:' '$TMP/sample.log'"

# rank 1 (mpirun's second app context) reads its config from a FIFO that no one opens for writing
mkfifo "$TMP/stalled.yaml"
timed stall mpirun --oversubscribe --bind-to none -np 1 "$DDPRUN_WORKER" "$SMALL" run.dir="$TMP/stall" \
    ddp.timeout_s=$TIMEOUT : -np 1 "$DDPRUN_WORKER" "$TMP/stalled.yaml" run.dir="$TMP/stall" ddp.timeout_s=$TIMEOUT \
    : -np 1 "$DDPRUN_WORKER" "$SMALL" run.dir="$TMP/stall" ddp.timeout_s=$TIMEOUT
check "a rank whose config read never returns ends the job (got $rc; 124 is the test's own limit)" ended
check "within ddp.timeout_s + 30 s of the start (took $took s)" in_time
check "the message names rank 1 and its host" said stall "Not arrived: rank 1 (host $HOST)"
check "... and the start-up's config agreement" said stall "(config agreement, start-up) did not complete within $TIMEOUT s"

# under ddprun, rank 1's program stalls before it starts (its exec held 60 s after its wrapper said
# "started"): the others, held in MPI_Init, end the job at the start-up's deadline, the config
# file's ddp.timeout_s (which ddprun read and hands the ranks)
sed "s/^ddp: {/ddp: {timeout_s: $TIMEOUT, /" "$SMALL" >"$TMP/timeout.yaml"
check "the config file sets ddp.timeout_s $TIMEOUT" grep -q "^ddp: {timeout_s: $TIMEOUT, " "$TMP/timeout.yaml"
timed noexec env DDP_TEST_FAULT=slow-exec:1:0:60 "$DDPRUN" -np 3 "$TMP/timeout.yaml" run.dir="$TMP/noexec"
check "a rank whose program never starts ends the job (got $rc; 124 is the test's own limit)" ended
check "within ddp.timeout_s + 30 s of the start, not the stalled exec's 60 s (took $took s)" in_time
check "... saying MPI's start-up did not finish" said noexec "MPI's start-up (MPI_Init, the first collectives) did not finish within $TIMEOUT s"

finish
