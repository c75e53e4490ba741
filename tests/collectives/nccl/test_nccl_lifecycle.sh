#!/usr/bin/env bash
# test_nccl_lifecycle.sh — runs each scenario of test_nccl_lifecycle (the NCCL communicator's
# CUDA/NCCL calls seen through link-time wrappers; see its header) under mpirun, in the emulated
# build, and checks what each must show: exit status, messages, and how long it took.
# Usage: test_nccl_lifecycle.sh PROGRAM
source "$(dirname "$0")/../../lib.sh"
PROG=$1

# scenario NAME NP [VAR=VALUE...]: runs it with `timeout 60` (a hang fails instead of blocking
# the suite); output in $TMP/NAME.log, exit status returned, seconds taken in $ELAPSED.
scenario() {
    local name=$1 np=$2; shift 2
    local t0=$(date +%s.%N)
    env "$@" timeout 60 mpirun -np "$np" --oversubscribe --bind-to none "$PROG" "$name" >"$TMP/$name.log" 2>&1
    local rc=$?
    ELAPSED=$(echo "$(date +%s.%N) - $t0" | bc)
    echo "# $name: exit $rc after $ELAPSED s"
    [ $rc -eq 0 ] || sed 's/^/#   /' "$TMP/$name.log"
    return $rc
}

scenario priority 1
check "communication stream: non-blocking, greatest priority" [ $? -eq 0 ]
# 3 emulated GPUs, rank r on GPU r+1: a thread left on GPU 0 shows
scenario threads 2 DDP_CUDA_EMU_DEVICES=3
check "every CUDA call, the watchdog's too, runs on the rank's GPU" [ $? -eq 0 ]
scenario setdevice 1
check "a watchdog that cannot select its GPU fails creation with cudaSetDevice's error" [ $? -eq 0 ]
scenario staging 2 DDP_CUDA_EMU_DEVICES=2
check "in-place exchanges reuse one staging buffer" [ $? -eq 0 ]

# Teardown. Without bounds each of these hangs until `timeout 60` (exit 124).
scenario stuck 1
check "destroy: a collective that never finishes is waited for the timeout, then aborted" [ $? -eq 0 ]
check "destroy says why it aborts" \
    grep -q "warning: NCCL teardown: collective #1 did not complete within 2 s; aborting the communicator" "$TMP/stuck.log"
scenario failed 1
check "destroy after a failed call aborts without waiting" [ $? -eq 0 ]
scenario abort 1
check "ops->abort does not wait" [ $? -eq 0 ]
scenario wedged 1
rc=$?
check "destroy on a wedged GPU: the process ends with exit 1 (rc $rc)" [ $rc -eq 1 ]
check "... within timeout 1 s + abort limit 1 s, plus start-up (took $ELAPSED s)" [ "$(echo "$ELAPSED < 15" | bc)" = 1 ]
check "... saying the teardown did not finish" \
    grep -q "error: NCCL teardown: destroying the NCCL communicator did not finish within 2 s (a wedged GPU or a hung NCCL call?); exiting" "$TMP/wedged.log"
scenario watchdog 1
rc=$?
check "watchdog on a wedged GPU: the process ends with exit 1 (rc $rc)" [ $rc -eq 1 ]
check "... the watchdog names the stalled collective" \
    grep -q "error: NCCL watchdog: collective allreduce #1 (64 x float, sum) did not complete within 1 s; aborting" "$TMP/watchdog.log"
check "... and gives up on ncclCommAbort after 1 s" \
    grep -q "error: NCCL watchdog: ncclCommAbort did not return within 1 s (a wedged GPU?); exiting without it" "$TMP/watchdog.log"
scenario hungquery 1
rc=$?
check "an event query that never returns on the watchdog's thread: the process ends with exit 1 (rc $rc)" [ $rc -eq 1 ]
check "... within timeout 1 s + abort limit 1 s, plus start-up (took $ELAPSED s)" [ "$(echo "$ELAPSED < 15" | bc)" = 1 ]
check "... the watchdog's monitor saying a call hangs" grep -Eq "error: NCCL watchdog: its last pass ended [0-9]+ s \
ago, past ddp.timeout_s 1 s and the abort's 1 s: a CUDA or NCCL call hangs \(a wedged GPU\?\); exiting" "$TMP/hungquery.log"
(sleep 1.5; p=$(pgrep -x test_nccl_lifecycle | head -n 1); kill -STOP "$p"; sleep 4; kill -CONT "$p") &
scenario paused 1
check "stopped for 4 s and continued: not taken for a hung watchdog (exit $?)" [ $? -eq 0 ]
wait
scenario connecting 1
rc=$?
check "watchdog while an NCCL call holds the rank (a peer that never connects): exit 1 (rc $rc)" [ $rc -eq 1 ]
check "... the watchdog names the collective" \
    grep -q "error: NCCL watchdog: collective allgather #1 (.*) did not complete within 1 s; aborting" "$TMP/connecting.log"
check "... and ends the process without ncclCommAbort, which would free the communicator under the call" \
    bash -c "grep -q 'inside an NCCL call on the communicator, which ncclCommAbort would free under it; exiting without the abort' '$TMP/connecting.log' && ! grep -q 'ncclCommAbort called' '$TMP/connecting.log'"

finish
