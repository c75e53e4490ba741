#!/usr/bin/env bash
# The log's exposed-communication time (progress line "ms comm exposed", metrics.jsonl
# comm_exposed_ms) under real mpirun, np=2:
#  - CPU + MPI: every logged value is a number >= 0; with the test-only DDP_TEST_COMM_DELAY_MS=50
#    (the reducer sleeps 50 ms before waiting for its buckets, as a collective that slow would)
#    every value is >= 40 ms per step, so the measurement really covers the wait for gradients;
#  - with argument `cuda` (emulated build): the same on device=cuda ddp.backend=nccl, where the
#    time is taken with timing events on the compute stream instead of the host clock.
# Lower bounds only (the delay is inside the measured window by construction): no timing race.
source "$(dirname "$0")/../../lib.sh"

# values RUNDIR: the comm_exposed_ms of every progress record, one per line
values() {
    python3 -c 'import json,sys; [print(json.loads(l)["comm_exposed_ms"]) for l in open(sys.argv[1]) if "\"train\"" in l]' \
        "$1/metrics.jsonl"
}
# all_at_least RUNDIR MIN: four progress records (20 steps, log_every 5), each >= MIN
all_at_least() {
    values "$1" >"$1.values" || return 1
    echo "# $(basename "$1"): comm_exposed_ms per step: $(tr '\n' ' ' <"$1.values")"
    [ "$(wc -l <"$1.values")" -eq 4 ] && awk -v min="$2" '!($1 >= min) { bad = 1 } END { exit bad }' "$1.values"
}

# run NAME NP [overrides...]: the worker on the small job, 20 steps, a progress line every 5
run() {
    local name=$1 np=$2; shift 2
    timeout 300 mpirun -np "$np" --oversubscribe --bind-to none "$DDPRUN_WORKER" "$SMALL" run.dir="$TMP/$name" \
        "$@" >"$TMP/$name.log" 2>&1
}

run cpu 2
check "cpu+mpi np=2 runs" [ $? -eq 0 ]
check "the progress line reports ms comm exposed" grep -q "ms/step [0-9.]* ms comm exposed" "$TMP/cpu.log"
check "cpu+mpi: comm_exposed_ms logged 4 times, each >= 0" all_at_least "$TMP/cpu" 0
DDP_TEST_COMM_DELAY_MS=50 run cpu_slow 2
check "cpu+mpi np=2 with 50 ms slower collectives runs" [ $? -eq 0 ]
check "cpu+mpi: 50 ms slower collectives show >= 40 ms exposed per step" all_at_least "$TMP/cpu_slow" 40

if [ "${1:-}" = cuda ]; then
    export DDP_CUDA_EMU_DEVICES=2
    GPU=(device=cuda ddp.backend=nccl)
    run gpu 2 "${GPU[@]}"
    check "cuda+nccl np=2 runs" [ $? -eq 0 ]
    check "cuda+nccl: comm_exposed_ms logged 4 times, each >= 0" all_at_least "$TMP/gpu" 0
    DDP_TEST_COMM_DELAY_MS=50 run gpu_slow 2 "${GPU[@]}"
    check "cuda+nccl np=2 with 50 ms slower collectives runs" [ $? -eq 0 ]
    check "cuda+nccl: 50 ms slower collectives show >= 40 ms exposed per step" all_at_least "$TMP/gpu_slow" 40
fi
finish
