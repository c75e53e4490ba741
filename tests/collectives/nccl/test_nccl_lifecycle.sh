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

finish
