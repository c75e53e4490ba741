/* slurm_task.c — srun tasks against MPI's ranks (slurm_task.h). */
#include "slurm_task.h"

#include <stdlib.h>

static bool env_int(const char *name, int *out)
{
    const char *v = getenv(name);
    char *end = NULL;
    long x = v ? strtol(v, &end, 10) : -1;
    if (!v || end == v || *end || x < 0 || x > 1 << 30)
        return false;
    *out = (int)x;
    return true;
}

bool slurm_task_from_env(slurm_task *out)
{
    if (getenv("OMPI_COMM_WORLD_SIZE"))
        return false;
    out->nodeid = 0;
    env_int("SLURM_NODEID", &out->nodeid);
    return env_int("SLURM_PROCID", &out->procid) && env_int("SLURM_NTASKS", &out->ntasks) &&
           env_int("SLURM_LOCALID", &out->localid);
}

int slurm_task_check(const slurm_task *t, int rank, int size, int local_rank, ddp_err *err)
{
    if (size != t->ntasks)
        return ddp_fail(err, DDP_EUSAGE, "started by srun as task %d of %d (node %d), but MPI sees %d rank(s): "
                        "Open MPI joins srun's tasks only through PMIx or PMI2; run `srun --mpi=pmix` (see `srun "
                        "--mpi=list`), or start the job with ddprun or mpirun instead", t->procid, t->ntasks,
                        t->nodeid, size);
    if (rank != t->procid || local_rank != t->localid)
        return ddp_fail(err, DDP_EUSAGE, "srun task %d (local id %d on node %d) became MPI rank %d with local rank "
                        "%d: ranks or GPUs would not be the ones Slurm assigned; run one srun step per job, with "
                        "--mpi=pmix", t->procid, t->localid, t->nodeid, rank, local_rank);
    return DDP_OK;
}
