/* comm_nccl_create.c — making an NCCL communicator (comm_nccl_create, comm.h).
 *
 * It owns: the control communicator (our duplicate of MPI_COMM_WORLD) and the rank's identity,
 * the NCCL communicator (made only once every rank's own set-up and rank 0's ncclUniqueId are
 * known to have succeeded, which ranks agree on by MPI; then the id travels by MPI_Bcast), one
 * non-blocking communication stream of the device's greatest priority (so queued backward kernels
 * do not hold up a ready all-reduce) unless single_stream, the events and the barrier's buffer,
 * and starting the watchdog. A failure anywhere aborts what was made (comm_nccl_teardown.c) and
 * names the GPU. It must not issue collectives (comm_nccl.c does), and never picks the GPU: the
 * caller has, and the communicator selects that one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/mpi_check.h"
#include "collectives/mpi_identity.h"
#include "comm_nccl_internal.h"

static int fill_identity(comm *c, ncclcomm_impl *im, ddp_err *err)
{
    MPI_TRY(MPI_Comm_dup(MPI_COMM_WORLD, &im->ctl));
    MPI_TRY(MPI_Comm_set_errhandler(im->ctl, MPI_ERRORS_RETURN));
    mpi_identity id;
    MPI_TRY(mpi_identity_of(im->ctl, &id));
    c->rank = id.rank, c->size = id.size, c->local_rank = id.local_rank, c->local_size = id.local_size;
    snprintf(c->host, sizeof c->host, "%s", id.host);
    return DDP_OK;
}

/* Every rank learns whether any rank's own set-up (local_rc) or rank 0's unique id failed before
 * any joins ncclCommInitRank, which waits for all of them without a deadline: a rank that did not
 * come would hold the others there (and a caller's next collective, the failed rank in it). Then
 * rank 0's id goes to every rank. */
static int init_nccl(comm *c, ncclcomm_impl *im, int local_rc, ddp_err *err)
{
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    int mine[2] = {0, local_rc != DDP_OK ? c->size - c->rank : 0}, all[2]; /* status; first failed rank */
    if (c->rank == 0 && local_rc == DDP_OK)
        mine[0] = (int)ncclGetUniqueId(&id);
    MPI_TRY(MPI_Allreduce(mine, all, 2, MPI_INT, MPI_MAX, im->ctl));
    if (local_rc != DDP_OK)
        return local_rc;
    if (all[0] != ncclSuccess)
        return ddp_fail(err, DDP_ERUNTIME, "%s:%d: ncclGetUniqueId on rank 0: %s", __FILE__, __LINE__,
                        ncclGetErrorString((ncclResult_t)all[0]));
    if (all[1] > 0)
        return ddp_fail(err, DDP_ERUNTIME, "rank %d failed its own part of the NCCL communicator's set-up (its "
                        "message says why), so no communicator was made", c->size - all[1]);
    MPI_TRY(MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, im->ctl));
    NCCL_TRY_MARK_FAILED(c, ncclCommInitRank(&im->nccl, c->size, id, c->rank));
    return DDP_OK;
}

/* This rank's part before the communicator: the test faults, its GPU, the stream, the events and
 * the barrier's buffer. */
static int setup_local(ncclcomm_impl *im, comm *c, ddp_err *err)
{
    int rc = ncclcomm_faults_read(im, err);
    if (rc)
        return rc;
    CUDA_TRY_MARK_FAILED(cudaSetDevice(im->device));
    if (im->own_stream) {
        /* The greatest priority: the GPU schedules a collective's blocks ahead of queued backward
         * kernels, so a bucket's all-reduce starts when it is ready, not after the compute queue. */
        int least = 0, greatest = 0;
        CUDA_TRY_MARK_FAILED(cudaDeviceGetStreamPriorityRange(&least, &greatest));
        CUDA_TRY_MARK_FAILED(cudaStreamCreateWithPriority(&im->stream, cudaStreamNonBlocking, greatest));
    } else {
        im->stream = im->compute;
    }
    c->stream = im->stream;
    CUDA_TRY_MARK_FAILED(cudaEventCreateWithFlags(&im->compute_ready, cudaEventDisableTiming));
    for (int i = 0; i < NCCLCOMM_SLOTS; i++)
        CUDA_TRY_MARK_FAILED(cudaEventCreateWithFlags(&im->slots[i].done, cudaEventDisableTiming));
    CUDA_TRY_MARK_FAILED(cudaMalloc((void **)&im->barrier_buf, sizeof(int)));
    CUDA_TRY_MARK_FAILED(cudaMemset(im->barrier_buf, 0, sizeof(int)));
    return DDP_OK;
}

static int setup(comm *c, ncclcomm_impl *im, ddp_err *err)
{
    int rc = fill_identity(c, im, err);
    if (rc)
        return rc;
    rc = init_nccl(c, im, setup_local(im, c, err), err);
    if (rc)
        return rc;
    return ncclcomm_watchdog_start(c, err);
}

int comm_nccl_create(const comm_nccl_opts *opts, comm **out, ddp_err *err)
{
    *out = NULL;
    double timeout_s = opts->timeout_s;
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized)
        return ddp_fail(err, DDP_ERUNTIME, "comm_nccl_create: MPI is not initialised (call MPI_Init first)");
    if (!(timeout_s > 0))
        return ddp_fail(err, DDP_EUSAGE, "comm_nccl_create: ddp.timeout_s must be positive, got %g", timeout_s);
    comm *c = calloc(1, sizeof *c);
    ncclcomm_impl *im = calloc(1, sizeof *im);
    if (!c || !im) {
        free(c);
        free(im);
        return ddp_fail(err, DDP_ERUNTIME, "comm_nccl_create: out of memory");
    }
    c->ops = &ncclcomm_ops;
    c->impl = im;
    im->ctl = MPI_COMM_NULL;
    im->compute = (cudaStream_t)opts->compute_stream;
    im->own_stream = !opts->single_stream;
    im->device = opts->device;
    im->timeout_s = timeout_s;
    im->debug = opts->debug;
    worker_init(&im->watchdog);
    for (int i = 0; i < NCCLCOMM_SLOTS; i++)
        atomic_init(&im->slots[i].state, SLOT_FREE);
    atomic_init(&im->aborting, false);
    im->abort_limit_s = timeout_s < 30 ? timeout_s : 30;
    int rc = setup(c, im, err);
    if (rc) {
        ncclcomm_free(c, true);
        return ddp_prefix(err, "comm_nccl_create (GPU %d)", opts->device);
    }
    *out = c;
    return DDP_OK;
}
