#!/usr/bin/env bash
# ddprun's -np default, seen through --dry-run: without -np it starts one rank per GPU on this
# node, and says so; with no GPU, one rank; an explicit -np always wins. Inside a Slurm allocation,
# its tasks, with a warning when a node has fewer tasks than this node has GPUs.
#   test_ddprun_np.sh none   GPUs hidden (CUDA_VISIBLE_DEVICES= on real CUDA, DDP_CUDA_EMU_DEVICES=0
#                            when emulated): -np 1, "no GPUs on this node"
#   test_ddprun_np.sh N      emulated build with DDP_CUDA_EMU_DEVICES=N: -np N, "N GPUs ... N ranks"
source "$(dirname "$0")/../lib.sh"
config=$DDP_SRC/configs/fashion_mlp.yaml
unset SLURM_JOB_ID SLURM_JOBID SLURM_TASKS_PER_NODE # this node alone: no allocation names slots

# dry NAME ARGS...: ddprun --dry-run, stdout and stderr in $TMP/NAME.out / .err
dry() {
    local name=$1; shift
    "$DDPRUN" --dry-run "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
}

if [ "$1" = none ]; then
    CUDA_VISIBLE_DEVICES= DDP_CUDA_EMU_DEVICES=0 dry nogpu "$config"
    check "no -np, no GPU: dry run exits 0" [ $? -eq 0 ]
    check "no -np, no GPU: mpirun gets -np 1" grep -q -- " -np 1 " "$TMP/nogpu.out"
    check "no -np, no GPU: ddprun says why" grep -q "^ddprun: -np not given: no GPUs on this node (.*) -> 1 rank$" \
        "$TMP/nogpu.err"
else
    n=$1
    DDP_CUDA_EMU_DEVICES=$n dry gpus "$config"
    check "no -np, $n GPUs: dry run exits 0" [ $? -eq 0 ]
    check "no -np, $n GPUs: mpirun gets -np $n" grep -q -- " -np $n " "$TMP/gpus.out"
    check "no -np, $n GPUs: ddprun says why" grep -qx "ddprun: -np not given: $n GPUs on this node -> $n ranks" \
        "$TMP/gpus.err"
    # inside a Slurm allocation: its tasks, with a warning where a node has fewer than this node's GPUs
    SLURM_JOB_ID=7 SLURM_TASKS_PER_NODE="$n,$((n - 1))" DDP_CUDA_EMU_DEVICES=$n dry slurm "$config"
    check "no -np, Slurm tasks $n,$((n - 1)): mpirun gets -np $((2 * n - 1))" grep -q -- " -np $((2 * n - 1)) " \
        "$TMP/slurm.out"
    check "warning of the idle GPU" grep -qx "ddprun: warning: the Slurm allocation (SLURM_TASKS_PER_NODE) has \
$((n - 1)) tasks\{0,1\} on a node, and this node has $n GPUs: 1 of each such node's GPUs stay idle; ask for \
--ntasks-per-node=$n" "$TMP/slurm.err"
    SLURM_JOB_ID=7 SLURM_TASKS_PER_NODE="$n(x2)" DDP_CUDA_EMU_DEVICES=$n dry slurm_full "$config"
    check "no -np, Slurm tasks $n(x2): -np $((2 * n)), no warning" eval \
        'grep -q -- " -np $((2 * n)) " "$TMP/slurm_full.out" && ! grep -q warning "$TMP/slurm_full.err"'
    DDP_CUDA_EMU_DEVICES=$n dry explicit -np 2 "$config"
    check "explicit -np 2 wins over $n GPUs" grep -q -- " -np 2 " "$TMP/explicit.out"
    check "explicit -np: no default message" bash -c "! grep -q 'np not given' '$TMP/explicit.err'"
fi
finish
