#!/usr/bin/env bash
# Multi-node jobs on one machine: simulated hosts h1, h2 are network namespaces joined by veth
# links, each with its own host name and its own run directory, and Open MPI starts its daemons
# there with its real rsh launcher (tests/launcher/netns_hosts.sh). Proves, through ddprun -H:
#   cpu:  np 4 over h1:2,h2:2 ends bit-identical to np 4 on one host; a checkpoint rank 0 wrote on
#         h1 resumes a job whose other ranks run on h2, which never sees the file, and the result
#         is bit-identical to an uninterrupted run; when h2's link goes down mid-run the job ends
#         within ddp.timeout_s + 10 s naming h2's ranks and host, and with --max-restarts 1 it
#         resumes on h1 alone with fewer ranks from the last checkpoint;
#   cuda: (emulated build, 2 GPUs per host) local rank, and so the GPU, is counted per host: np 4
#         over two hosts trains, while np 4 on one host with 2 GPUs is refused.
# Skipped (exit 77), never passed, where namespaces cannot be made.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/netns_hosts.sh"
mode=${1:-cpu}
netns_up 2
echo "simulated hosts: ${NS_PREFIX}h1 ${NS_PREFIX}h2 on ${NS_NET}0/24"
STEPS=(train.max_steps=30 checkpoint.every_steps=10)
ddp() { timeout 120 "$DDPRUN" "$@"; } # a launcher that hangs fails the test instead

if [ "$mode" = cuda ]; then
    export DDP_CUDA_EMU_DEVICES=2
    CUDA=(device=cuda ddp.backend=nccl)
    ddp -np 4 -H h1:2,h2:2 "${NS_MPI[@]}" -x DDP_CUDA_EMU_DEVICES "$SMALL" run.dir="$NS_RUNROOT/gpu" \
        "${CUDA[@]}" train.max_steps=6 >"$TMP/gpu2.log" 2>&1
    rc=$?
    check "np 4 over two hosts with 2 GPUs each trains on cuda+NCCL (exit $rc)" [ $rc -eq 0 ]
    ddp -np 4 -x DDP_CUDA_EMU_DEVICES "$SMALL" run.dir="$TMP/gpu1" "${CUDA[@]}" train.max_steps=6 \
        >"$TMP/gpu1.log" 2>&1
    rc=$?
    check "np 4 on one host with 2 GPUs is refused (exit $rc)" [ $rc -eq 2 ]
    check "... naming two ranks that would share a GPU" grep -q "ranks 0 and 2 would both use GPU 0" "$TMP/gpu1.log"
    finish
    exit
fi

# the same job on one host, and over two
ddp -np 4 "$SMALL" run.dir="$TMP/one" "${STEPS[@]}" >"$TMP/one.log" 2>&1
check "np 4 on one host (exit $?)" [ -n "$(last_ckpt "$TMP/one")" ]
ddp -np 4 -H h1:2,h2:2 "${NS_MPI[@]}" "$SMALL" run.dir="$NS_RUNROOT/two" "${STEPS[@]}" >"$TMP/two.log" 2>&1
rc=$?
check "np 4 over h1:2,h2:2 (exit $rc)" [ $rc -eq 0 ]
ddp -np 4 -H h1:2,h2:2 "${NS_MPI[@]}" topo >"$TMP/topo.log" 2>&1
check "... ranks 0 1 ran on h1 and 2 3 on h2 (ddprun topo)" \
    bash -c "grep -q 'Host h1: .*ranks 0 1;' '$TMP/topo.log' && grep -q 'Host h2: .*ranks 2 3;' '$TMP/topo.log'"
two=$(last_ckpt "$NS_STORE/h1/two")
check "... rank 0 wrote its checkpoints on h1 only" eval '[ -n "$two" ] && [ ! -d "$NS_STORE/h2/two/checkpoints" ]'
check "... bit-identical to np 4 on one host" "$DDPRUN" ckpt diff "$(last_ckpt "$TMP/one")" "$two"

# no shared filesystem: stopped at step 10 on h1 alone, resumed with three of four ranks on h2
DDP_TEST_FAULT=stop:0:10 ddp -np 4 -H h1:4 "${NS_MPI[@]}" "$SMALL" run.dir="$NS_RUNROOT/res" \
    "${STEPS[@]}" \
    >"$TMP/res1.log" 2>&1
check "the first part stops at step 10 with a checkpoint (exit $?)" \
    [ -f "$NS_STORE/h1/res/checkpoints/ckpt-00000010.ddp" ]
ddp -np 4 -H h1:1,h2:3 "${NS_MPI[@]}" "$SMALL" run.dir="$NS_RUNROOT/res" "${STEPS[@]}" checkpoint.resume=auto \
    >"$TMP/res2.log" 2>&1
rc=$?
check "resumed with ranks 1-3 on h2, which has no copy of the checkpoint (exit $rc)" [ $rc -eq 0 ]
check "... from step 10" grep -q "resumed from .*ckpt-00000010.ddp: step 10" "$TMP/res2.log"
check "... h2 never saw a checkpoint" [ ! -d "$NS_STORE/h2/res/checkpoints" ]
check "... and ends bit-identical to the uninterrupted run" \
    "$DDPRUN" ckpt diff "$(last_ckpt "$TMP/one")" "$(last_ckpt "$NS_STORE/h1/res")"

# h2's link goes down mid-run: the deadline names h2, ddprun ends mpirun (which waits for h2's
# daemon forever) and the restart leaves h2 out, resuming from the last checkpoint on h1 alone
CUT=(train.max_steps=300 train.epochs=10 checkpoint.every_steps=20 checkpoint.resume=auto ddp.timeout_s=3)
ddp -np 4 -H h1:2,h2:2 --max-restarts 1 "${NS_MPI[@]}" "$SMALL" run.dir="$NS_RUNROOT/cut" "${CUT[@]}" \
    >"$TMP/cut.log" 2>&1 &
pid=$!
for _ in $(seq 600); do
    grep -q '"step":60,' "$NS_STORE/h1/cut/metrics.jsonl" 2>/dev/null && break
    sleep 0.05
done
ip link set "${NS_LINK[2]}" down
t0=$(date +%s.%N)
t1=0
for _ in $(seq 1200); do
    grep -q "leaving out the host" "$TMP/cut.log" && t1=$(date +%s.%N) && break
    sleep 0.05
done
wait $pid
rc=$?
took=$(python3 -c "print(round($t1 - $t0, 1))")
check "h2's link down: the attempt ends within ddp.timeout_s + 10 s (took $took s)" \
    python3 -c "import sys; sys.exit(0 if 0 < $took < 13 else 1)"
check "... naming h2's ranks and host" grep -q "Not arrived: rank 2 (host h2), rank 3 (host h2)" "$TMP/cut.log"
check "... --max-restarts 1 goes on with h1 alone" \
    grep -qF "leaving out the host(s) whose ranks did not arrive: -np 2 -H h1:2" "$TMP/cut.log"
check "... from the last checkpoint" grep -q "resum" "$TMP/cut.log"
check "... to the end (exit $rc)" eval '[ $rc -eq 0 ] && [ -f "$NS_STORE/h1/cut/checkpoints/ckpt-00000300.ddp" ]'

finish
