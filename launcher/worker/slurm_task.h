/* slurm_task.h — a rank started by srun itself (no mpirun): what Slurm says it is, and the check
 * that MPI agrees. Open MPI joins srun's tasks into one job only through PMIx or PMI2 (srun
 * --mpi=pmix); without it every task initialises MPI alone as rank 0 of 1 and would train a model
 * of its own. Under mpirun, inside an sbatch allocation too, the SLURM_* variables describe
 * mpirun's daemons rather than the ranks, so they are ignored there (OMPI_COMM_WORLD_SIZE is set).
 * Must not print: the caller reports. */
#ifndef DDP_SLURM_TASK_H
#define DDP_SLURM_TASK_H

#include <stdbool.h>

#include "runtime/base/err.h"

typedef struct slurm_task {
    int procid, ntasks, localid, nodeid; /* SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID */
} slurm_task;

/* True, filling *out, when this process is an srun task not under mpirun. */
bool slurm_task_from_env(slurm_task *out);

/* DDP_EUSAGE, saying what to do, unless MPI's rank, size and local rank are Slurm's task id,
 * task count and local id. */
int slurm_task_check(const slurm_task *t, int rank, int size, int local_rank, ddp_err *err);

#endif
