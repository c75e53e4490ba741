#!/usr/bin/env bash
# Ranks started by srun itself, with the environment set as srun sets it (SLURM_PROCID,
# SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID; mpirun stands in for srun's PMIx, and the tasks do not
# see mpirun's OMPI_COMM_WORLD_* variables, as under srun): MPI ranks and local ranks matching
# Slurm's train normally; a task Slurm numbered differently from MPI is refused (exit 2) naming
# both; two tasks that each initialise MPI alone (srun without --mpi=pmix) are refused (exit 2)
# saying what to run; and under mpirun, where SLURM_* are inherited from the allocation and
# describe mpirun's daemons, they are ignored.
source "$(dirname "$0")/../lib.sh"
# srun_like PROCID_EXPR: a wrapper that gives the worker Slurm's variables and hides mpirun's
srun_like() {
    cat >"$TMP/srun_$2.sh" <<WRAP
#!/usr/bin/env bash
r=\$OMPI_COMM_WORLD_RANK n=\$OMPI_COMM_WORLD_SIZE l=\$OMPI_COMM_WORLD_LOCAL_RANK
export SLURM_PROCID=\$(( $1 )) SLURM_NTASKS=\$n SLURM_LOCALID=\$l SLURM_NODEID=0
unset OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE OMPI_COMM_WORLD_LOCAL_RANK OMPI_COMM_WORLD_LOCAL_SIZE
exec "\$@"
WRAP
    chmod +x "$TMP/srun_$2.sh"
}
srun_like 'r' same
srun_like 'n - 1 - r' reversed
mpi() { mpirun -np 2 --oversubscribe --bind-to none "$@"; }

mpi "$TMP/srun_same.sh" "$DDPRUN_WORKER" "$SMALL" run.dir="$TMP/same" >"$TMP/same.log" 2>&1
rc=$?
check "srun tasks numbered as MPI numbers them: the job trains (exit $rc)" [ $rc -eq 0 ]
check "... and says it was started by srun" grep -q "started by srun: 2 tasks" "$TMP/same.log"
check "... with a final checkpoint" [ -n "$(last_ckpt "$TMP/same")" ]

mpi "$TMP/srun_reversed.sh" "$DDPRUN_WORKER" "$SMALL" run.dir="$TMP/rev" >"$TMP/rev.log" 2>&1
rc=$?
check "srun task ids that are not MPI's ranks are refused (exit 2, got $rc)" [ $rc -eq 2 ]
check "... naming the task and the rank" grep -q "srun task 1 (local id 0 on node 0) became MPI rank 0" "$TMP/rev.log"
check "... before anything is written" [ ! -d "$TMP/rev/checkpoints" ]

for t in 0 1; do
    SLURM_PROCID=$t SLURM_NTASKS=2 SLURM_LOCALID=$t SLURM_NODEID=0 \
        "$DDPRUN_WORKER" "$SMALL" run.dir="$TMP/alone$t" >"$TMP/alone$t.log" 2>&1 &
done
wait %1; rc0=$?
wait %2; rc1=$?
check "srun without PMIx (each task MPI's rank 0 of 1): both refused with exit 2 (got $rc0 $rc1)" \
    eval '[ $rc0 -eq 2 ] && [ $rc1 -eq 2 ]'
check "... saying to use srun --mpi=pmix" grep -q "started by srun as task 1 of 2 (node 0), but MPI sees 1 rank(s)" \
    "$TMP/alone1.log"
check "... or to start with ddprun or mpirun" grep -q "srun --mpi=pmix" "$TMP/alone0.log"

SLURM_PROCID=0 SLURM_NTASKS=1 SLURM_LOCALID=0 SLURM_NODEID=0 mpi "$DDPRUN_WORKER" "$SMALL" run.dir="$TMP/inherit" \
    >"$TMP/inherit.log" 2>&1
rc=$?
check "under mpirun, SLURM_* inherited from an allocation are ignored (exit $rc)" [ $rc -eq 0 ]
check "... and no srun line" bash -c "! grep -q 'started by srun' '$TMP/inherit.log'"
finish
