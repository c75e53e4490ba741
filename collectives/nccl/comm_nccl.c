/* comm_nccl.c — the NCCL backend of the communicator (comm.h) over device buffers.
 *
 * It owns: creating the NCCL communicator (rank 0's ncclUniqueId travels by MPI_Bcast), one
 * non-blocking communication stream of the device's greatest priority (so queued backward
 * kernels do not hold up a ready all-reduce), and issuing every collective on it ordered after
 * the device's compute stream (an event recorded on the compute stream, waited for by the
 * communication stream). With single_stream (the benchmark) collectives run on the compute
 * stream itself and stream order is all the ordering. Completion is an event recorded after the
 * collective: ops->wait makes the compute stream wait for it (no host synchronisation), ops->test
 * queries it. Every issued collective occupies a slot of a ring that the watchdog
 * (comm_nccl_watchdog.c) polls, so a stalled or failed collective ends the process with a
 * message naming it instead of hanging; ddp.debug cross-checks each collective's fingerprint
 * first (comm_nccl_check.c). all-to-all and sendrecv are grouped ncclSend/ncclRecv (in place:
 * sent from a copy in a staging buffer kept for the communicator's life); barrier is a one-int
 * all-reduce the host waits for. Counts are size_t throughout (NCCL takes size_t). Every NCCL
 * and CUDA call is checked with file:line and the library's own error string, and a failed one
 * marks the communicator failed, so that its end (comm_nccl_teardown.c) aborts instead of waiting.
 * It must not know about models, buckets or training, and never picks the GPU: the caller has. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/clock.h"
#include "runtime/base/mpi_check.h"
#include "runtime/base/mpi_identity.h"
#include "comm_nccl_internal.h"

/* Expects `im` (ncclcomm_impl *) and `err` in scope; a failure marks the communicator failed. */
#define CUDA_TRY(call)                                                                          \
    do {                                                                                        \
        cudaError_t cuda_rc_ = (call);                                                          \
        if (cuda_rc_ != cudaSuccess) {                                                          \
            im->failed = true;                                                                  \
            return ddp_fail(err, DDP_ERUNTIME, "%s:%d: %s: %s", __FILE__, __LINE__, #call,      \
                            cudaGetErrorString(cuda_rc_));                                      \
        }                                                                                       \
    } while (0)

struct comm_req {
    int slot;
    ncclcomm_fingerprint fp;
};

static ncclcomm_impl *impl_of(comm *c) { return c->impl; }

static int ncclcomm_fail(comm *c, ncclResult_t rc, const char *call, const char *file, int line, ddp_err *err)
{
    ncclcomm_impl *im = impl_of(c);
    if (atomic_load(&im->aborting))
        ncclcomm_watchdog_await_exit(); /* the watchdog aborted the call and is reporting why */
    im->failed = true;
    const char *last = im->nccl ? ncclGetLastError(im->nccl) : "";
    int name_len = (int)strcspn(call, "(");
    return ddp_fail(err, DDP_ERUNTIME, "%s:%d: %.*s: %s%s%s", file, line, name_len, call, ncclGetErrorString(rc),
                    last && *last ? ": " : "", last ? last : "");
}

#define NCCL_TRY(c, call)                                                                       \
    do {                                                                                        \
        ncclResult_t ncclcomm_rc_ = (call);                                                     \
        if (ncclcomm_rc_ != ncclSuccess)                                                        \
            return ncclcomm_fail((c), ncclcomm_rc_, #call, __FILE__, __LINE__, err);            \
    } while (0)

static ncclDataType_t ncclcomm_type(comm_dtype dt)
{
    static const ncclDataType_t map[DT_COUNT] = {
        [DT_FLOAT] = ncclFloat32, [DT_DOUBLE] = ncclFloat64, [DT_HALF] = ncclFloat16,
        [DT_BFLOAT16] = ncclBfloat16, [DT_INT32] = ncclInt32, [DT_INT8] = ncclInt8,
        [DT_UINT8] = ncclUint8, [DT_INT64] = ncclInt64, [DT_UINT64] = ncclUint64,
    };
    return map[dt];
}

static ncclRedOp_t ncclcomm_op(comm_op op)
{
    static const ncclRedOp_t map[OP_COUNT] = {
        [OP_SUM] = ncclSum, [OP_PROD] = ncclProd, [OP_MIN] = ncclMin, [OP_MAX] = ncclMax, [OP_AVG] = ncclAvg,
    };
    return map[op];
}

static int check_args(comm_dtype dt, comm_op op, bool has_op, ddp_err *err)
{
    if ((unsigned)dt >= DT_COUNT)
        return ddp_fail(err, DDP_EUSAGE, "comm_nccl: unknown data type %d", (int)dt);
    if (has_op && (unsigned)op >= OP_COUNT)
        return ddp_fail(err, DDP_EUSAGE, "comm_nccl: unknown reduction %d", (int)op);
    return DDP_OK;
}

/* NCCL needs memory of this communicator's GPU; with one rank NCCL 2.28 does not check, and pageable
 * host memory passed by mistake ran without an error on an H100. So each buffer is checked here,
 * first and last byte, with the CUDA runtime's own bookkeeping (no device synchronisation). */
static int check_buffer(comm *c, const char *what, const void *p, size_t count, comm_dtype dt, ddp_err *err)
{
    ncclcomm_impl *im = impl_of(c);
    if (count == 0)
        return DDP_OK;
    if (!p || count > SIZE_MAX / comm_dtype_size(dt))
        return ddp_fail(err, DDP_EUSAGE, "comm_nccl: %s buffer %p of %zu elements is NULL or too large", what, p,
                        count);
    size_t bytes = count * comm_dtype_size(dt);
    const void *ends[2] = {p, (const char *)p + bytes - 1};
    for (int i = 0; i < 2; i++) {
        struct cudaPointerAttributes a;
        CUDA_TRY(cudaPointerGetAttributes(&a, ends[i]));
        bool ours = a.type == cudaMemoryTypeManaged || (a.type == cudaMemoryTypeDevice && a.device == im->device);
        const char *is = a.type == cudaMemoryTypeDevice ? "on another GPU"
                       : a.type == cudaMemoryTypeHost   ? "pinned host memory"
                                                        : "not CUDA memory (pageable host memory, or past an allocation)";
        if (!ours)
            return ddp_fail(err, DDP_EUSAGE, "comm_nccl: %s buffer %p + %zu bytes is not (all) memory of GPU %d: its "
                            "%s byte is %s", what, p, bytes, im->device, i ? "last" : "first", is);
    }
    return DDP_OK;
}

static int check_root(const comm *c, int root, ddp_err *err)
{
    if (root < 0 || root >= c->size)
        return ddp_fail(err, DDP_EUSAGE, "comm_nccl: root %d outside [0, %d)", root, c->size);
    return DDP_OK;
}

static int check_buffers(comm *c, const void *send, size_t n_send, const void *recv, size_t n_recv, comm_dtype dt,
                         ddp_err *err)
{
    int rc = check_buffer(c, "send", send, n_send, dt, err);
    return rc ? rc : check_buffer(c, "receive", recv, n_recv, dt, err);
}

/* With one rank every reduction is its input. Copying it here also avoids NCCL 2.28.3's one-rank
 * ncclAvg, which on an H100 left the last element of some out-of-place results wrong (double
 * n = 3001 and 65537, float n = 4097). */
static int one_rank_reduction(comm *c, const void *send, void *recv, const ncclcomm_fingerprint *fp, ddp_err *err)
{
    ncclcomm_impl *im = impl_of(c);
    if (send != recv && fp->count)
        CUDA_TRY(cudaMemcpyAsync(recv, send, fp->count * comm_dtype_size(fp->dtype), cudaMemcpyDeviceToDevice,
                                 im->stream));
    return DDP_OK;
}

/* ---- issuing: slot, ordering after compute, completion event --------------------------------- */

/* The slot of collective seq, once its previous occupant has completed. */
static int take_slot(comm *c, uint64_t seq, int *out, ddp_err *err)
{
    ncclcomm_impl *im = impl_of(c);
    int i = (int)(seq % NCCLCOMM_SLOTS);
    ncclcomm_slot *s = &im->slots[i];
    if (atomic_load(&s->state) == SLOT_LAUNCHED) {
        CUDA_TRY(cudaEventSynchronize(s->done)); /* 256 in flight: wait for the oldest */
        atomic_store(&s->state, SLOT_FREE);
    }
    *out = i;
    return DDP_OK;
}

/* Registers the collective with the watchdog, cross-checks it (ddp.debug) and orders the
 * communication stream after everything already on the compute stream. */
static int begin_collective(comm *c, ncclcomm_fingerprint *fp, int *slot, ddp_err *err)
{
    ncclcomm_impl *im = impl_of(c);
    fp->seq = ++im->seq;
    ncclcomm_faults_apply(c, fp);
    int rc = take_slot(c, fp->seq, slot, err);
    if (rc)
        return rc;
    ncclcomm_slot *s = &im->slots[*slot];
    pthread_mutex_lock(&im->lock);
    s->fp = *fp;
    snprintf(s->label, sizeof s->label, "%s", c->label);
    s->issued_s = monotonic_s();
    atomic_store(&s->state, SLOT_ISSUING);
    pthread_mutex_unlock(&im->lock);
    rc = im->debug ? ncclcomm_check_fingerprint(c, fp, err) : DDP_OK;
    if (rc) {
        atomic_store(&s->state, SLOT_FREE);
        im->failed = true; /* the ranks disagree: what is in flight may never finish */
        return rc;
    }
    cudaError_t e = cudaSuccess;
    if (im->own_stream) { /* single_stream: stream order is the order */
        e = cudaEventRecord(im->compute_ready, im->compute);
        if (e == cudaSuccess)
            e = cudaStreamWaitEvent(im->stream, im->compute_ready, 0);
    }
    if (e != cudaSuccess) {
        atomic_store(&s->state, SLOT_FREE);
        im->failed = true;
        return ddp_fail(err, DDP_ERUNTIME, "%s:%d: ordering the communication stream after the compute stream: %s",
                        __FILE__, __LINE__, cudaGetErrorString(e));
    }
    return DDP_OK;
}

/* After the NCCL call(s) of a collective returned `launched`: its completion event, then a
 * request (non-blocking) or the compute stream ordered after it (blocking). */
static int end_collective(comm *c, int slot, const ncclcomm_fingerprint *fp, int launched, comm_req **req, ddp_err *err)
{
    ncclcomm_impl *im = impl_of(c);
    ncclcomm_slot *s = &im->slots[slot];
    if (launched != DDP_OK) {
        atomic_store(&s->state, SLOT_FREE);
        char what[160];
        ncclcomm_fingerprint_describe(fp, what, sizeof what);
        return ddp_prefix(err, "collective #%llu (%s)", (unsigned long long)fp->seq, what);
    }
    CUDA_TRY(cudaEventRecord(s->done, im->stream));
    atomic_store(&s->state, SLOT_LAUNCHED);
    if (!req) {
        if (im->own_stream)
            CUDA_TRY(cudaStreamWaitEvent(im->compute, s->done, 0));
        return DDP_OK;
    }
    comm_req *r = malloc(sizeof *r);
    if (!r) {
        im->failed = true; /* the collective runs, but nothing can wait for it */
        return ddp_fail(err, DDP_ERUNTIME, "comm_nccl: out of memory for a request");
    }
    r->slot = slot;
    r->fp = *fp;
    *req = r;
    return DDP_OK;
}

/* ---- collectives ------------------------------------------------------------------------------ */

static int launch_allreduce(comm *c, const void *send, void *recv, const ncclcomm_fingerprint *fp, ddp_err *err)
{
    ncclcomm_impl *im = impl_of(c);
    if (c->size == 1)
        return one_rank_reduction(c, send, recv, fp, err);
    NCCL_TRY(c, ncclAllReduce(send, recv, fp->count, ncclcomm_type(fp->dtype), ncclcomm_op(fp->op), im->nccl, im->stream));
    return DDP_OK;
}

static int ncclcomm_allreduce(comm *c, const void *send, void *recv, size_t count, comm_dtype dt,
                              comm_op op, comm_req **req, ddp_err *err)
{
    ncclcomm_fingerprint fp = {.kind = NK_ALLREDUCE, .op = op, .dtype = dt, .root = -1, .count = count};
    int slot, rc = check_args(dt, op, true, err);
    if (!rc)
        rc = check_buffers(c, send, count, recv, count, dt, err);
    if (!rc)
        rc = begin_collective(c, &fp, &slot, err);
    if (rc)
        return rc;
    return end_collective(c, slot, &fp, launch_allreduce(c, send, recv, &fp, err), req, err);
}

static int launch_broadcast(comm *c, void *buf, const ncclcomm_fingerprint *fp, ddp_err *err)
{
    ncclcomm_impl *im = impl_of(c);
    NCCL_TRY(c, ncclBroadcast(buf, buf, fp->count, ncclcomm_type(fp->dtype), fp->root, im->nccl, im->stream));
    return DDP_OK;
}

static int ncclcomm_broadcast(comm *c, void *buf, size_t count, comm_dtype dt, int root, comm_req **req, ddp_err *err)
{
    ncclcomm_fingerprint fp = {.kind = NK_BROADCAST, .op = -1, .dtype = dt, .root = root, .count = count};
    int slot, rc = check_args(dt, OP_SUM, false, err);
    if (!rc)
        rc = check_root(c, root, err);
    if (!rc)
        rc = check_buffer(c, "broadcast", buf, count, dt, err);
    if (!rc)
        rc = begin_collective(c, &fp, &slot, err);
    if (rc)
        return rc;
    return end_collective(c, slot, &fp, launch_broadcast(c, buf, &fp, err), req, err);
}

static int launch_reduce(comm *c, const void *send, void *recv, const ncclcomm_fingerprint *fp, ddp_err *err)
{
    ncclcomm_impl *im = impl_of(c);
    if (c->size == 1)
        return one_rank_reduction(c, send, recv, fp, err);
    NCCL_TRY(c, ncclReduce(send, recv, fp->count, ncclcomm_type(fp->dtype), ncclcomm_op(fp->op),
                           fp->root, im->nccl, im->stream));
    return DDP_OK;
}

static int ncclcomm_reduce(comm *c, const void *send, void *recv, size_t count, comm_dtype dt,
                           comm_op op, int root, comm_req **req, ddp_err *err)
{
    ncclcomm_fingerprint fp = {.kind = NK_REDUCE, .op = op, .dtype = dt, .root = root, .count = count};
    int slot, rc = check_args(dt, op, true, err);
    if (!rc)
        rc = check_root(c, root, err);
    if (!rc)
        rc = check_buffers(c, send, count, recv, c->rank == root ? count : 0, dt, err);
    if (!rc)
        rc = begin_collective(c, &fp, &slot, err);
    if (rc)
        return rc;
    return end_collective(c, slot, &fp, launch_reduce(c, send, recv, &fp, err), req, err);
}

static int launch_allgather(comm *c, const void *send, void *recv, const ncclcomm_fingerprint *fp, ddp_err *err)
{
    ncclcomm_impl *im = impl_of(c);
    NCCL_TRY(c, ncclAllGather(send, recv, fp->count, ncclcomm_type(fp->dtype), im->nccl, im->stream));
    return DDP_OK;
}

static int ncclcomm_allgather(comm *c, const void *send, void *recv, size_t count, comm_dtype dt, comm_req **req, ddp_err *err)
{
    ncclcomm_fingerprint fp = {.kind = NK_ALLGATHER, .op = -1, .dtype = dt, .root = -1, .count = count};
    int slot, rc = check_args(dt, OP_SUM, false, err);
    if (!rc)
        rc = check_buffers(c, send, count, recv, count * (size_t)c->size, dt, err);
    if (!rc)
        rc = begin_collective(c, &fp, &slot, err);
    if (rc)
        return rc;
    return end_collective(c, slot, &fp, launch_allgather(c, send, recv, &fp, err), req, err);
}

static int launch_reducescatter(comm *c, const void *send, void *recv, const ncclcomm_fingerprint *fp, ddp_err *err)
{
    ncclcomm_impl *im = impl_of(c);
    if (c->size == 1)
        return one_rank_reduction(c, send, recv, fp, err);
    NCCL_TRY(c, ncclReduceScatter(send, recv, fp->count, ncclcomm_type(fp->dtype),
                                  ncclcomm_op(fp->op), im->nccl, im->stream));
    return DDP_OK;
}

static int ncclcomm_reducescatter(comm *c, const void *send, void *recv, size_t count, comm_dtype dt,
                                  comm_op op, comm_req **req, ddp_err *err)
{
    ncclcomm_fingerprint fp = {.kind = NK_REDUCESCATTER, .op = op, .dtype = dt, .root = -1, .count = count};
    int slot, rc = check_args(dt, op, true, err);
    if (!rc)
        rc = check_buffers(c, send, count * (size_t)c->size, recv, count, dt, err);
    if (!rc)
        rc = begin_collective(c, &fp, &slot, err);
    if (rc)
        return rc;
    return end_collective(c, slot, &fp, launch_reducescatter(c, send, recv, &fp, err), req, err);
}

/* In-place point-to-point exchanges read what they overwrite: they send from a copy, made on the
 * stream into a buffer that only grows (freed and allocated in stream order, so an exchange
 * still in flight keeps the old one), so repeated exchanges allocate nothing. */
static int stage_copy(comm *c, const void *src, size_t bytes, void **copy, ddp_err *err)
{
    ncclcomm_impl *im = impl_of(c);
    if (bytes > im->stage_bytes) {
        if (im->stage)
            CUDA_TRY(cudaFreeAsync(im->stage, im->stream));
        im->stage = NULL;
        im->stage_bytes = 0;
        CUDA_TRY(cudaMallocAsync(&im->stage, bytes, im->stream));
        im->stage_bytes = bytes;
    }
    CUDA_TRY(cudaMemcpyAsync(im->stage, src, bytes, cudaMemcpyDeviceToDevice, im->stream));
    *copy = im->stage;
    return DDP_OK;
}

/* Grouped sends and receives: block j of send to rank j, block j of recv from rank j. */
static int launch_exchange(comm *c, const char *send, char *recv, size_t count, comm_dtype dt, int to, int from, ddp_err *err)
{
    ncclcomm_impl *im = impl_of(c);
    size_t esz = comm_dtype_size(dt), bytes = to < 0 ? count * esz * (size_t)c->size : count * esz;
    void *copy = NULL;
    if (send == recv && bytes) {
        int rc = stage_copy(c, send, bytes, &copy, err);
        if (rc)
            return rc;
        send = copy;
    }
    ncclDataType_t t = ncclcomm_type(dt);
    NCCL_TRY(c, ncclGroupStart());
    /* the group is always closed: the first failure is reported, by ncclGroupEnd at the latest */
    ncclResult_t first = ncclSuccess;
    for (int j = 0; j < c->size && to < 0 && first == ncclSuccess; j++) {
        first = ncclSend(send + (size_t)j * count * esz, count, t, j, im->nccl, im->stream);
        if (first == ncclSuccess)
            first = ncclRecv(recv + (size_t)j * count * esz, count, t, j, im->nccl, im->stream);
    }
    if (to >= 0) {
        first = ncclSend(send, count, t, to, im->nccl, im->stream);
        if (first == ncclSuccess)
            first = ncclRecv(recv, count, t, from, im->nccl, im->stream);
    }
    ncclResult_t end = ncclGroupEnd();
    if (first != ncclSuccess)
        return ncclcomm_fail(c, first, "ncclSend/ncclRecv", __FILE__, __LINE__, err);
    if (end != ncclSuccess)
        return ncclcomm_fail(c, end, "ncclGroupEnd", __FILE__, __LINE__, err);
    return DDP_OK;
}

static int ncclcomm_alltoall(comm *c, const void *send, void *recv, size_t count, comm_dtype dt, comm_req **req, ddp_err *err)
{
    ncclcomm_fingerprint fp = {.kind = NK_ALLTOALL, .op = -1, .dtype = dt, .root = -1, .count = count};
    int slot, rc = check_args(dt, OP_SUM, false, err);
    if (!rc)
        rc = check_buffers(c, send, count * (size_t)c->size, recv, count * (size_t)c->size, dt, err);
    if (!rc)
        rc = begin_collective(c, &fp, &slot, err);
    if (rc)
        return rc;
    return end_collective(c, slot, &fp, launch_exchange(c, send, recv, fp.count, dt, -1, -1, err), req, err);
}

static int ncclcomm_sendrecv(comm *c, const void *send, int to, void *recv, int from, size_t count,
                             comm_dtype dt, comm_req **req, ddp_err *err)
{
    ncclcomm_fingerprint fp = {.kind = NK_SENDRECV, .op = -1, .dtype = dt, .root = -1, .count = count};
    int slot, rc = check_args(dt, OP_SUM, false, err);
    if (!rc && (to < 0 || to >= c->size || from < 0 || from >= c->size))
        rc = ddp_fail(err, DDP_EUSAGE, "comm_nccl: sendrecv peers %d/%d outside [0, %d)", to, from, c->size);
    if (!rc)
        rc = check_buffers(c, send, count, recv, count, dt, err);
    if (!rc)
        rc = begin_collective(c, &fp, &slot, err);
    if (rc)
        return rc;
    return end_collective(c, slot, &fp, launch_exchange(c, send, recv, fp.count, dt, to, from, err), req, err);
}

static int ncclcomm_barrier(comm *c, ddp_err *err)
{
    ncclcomm_impl *im = impl_of(c);
    ncclcomm_fingerprint fp = {.kind = NK_BARRIER, .op = OP_SUM, .dtype = DT_INT32, .root = -1, .count = 1};
    int slot, rc = begin_collective(c, &fp, &slot, err);
    if (rc)
        return rc;
    int launched = DDP_OK;
    ncclResult_t nrc = ncclAllReduce(im->barrier_buf, im->barrier_buf, 1, ncclInt32, ncclSum, im->nccl, im->stream);
    if (nrc != ncclSuccess)
        launched = ncclcomm_fail(c, nrc, "ncclAllReduce", __FILE__, __LINE__, err);
    rc = end_collective(c, slot, &fp, launched, NULL, err);
    if (rc)
        return rc;
    CUDA_TRY(cudaEventSynchronize(im->slots[slot].done)); /* the watchdog guards this wait */
    return DDP_OK;
}

/* ---- requests --------------------------------------------------------------------------------- */

/* Whether the slot still holds this request's collective (else it completed long ago). */
static bool slot_holds(ncclcomm_impl *im, const comm_req *r)
{
    const ncclcomm_slot *s = &im->slots[r->slot];
    return atomic_load(&s->state) == SLOT_LAUNCHED && s->fp.seq == r->fp.seq;
}

static int ncclcomm_wait(comm *c, comm_req *r, ddp_err *err)
{
    ncclcomm_impl *im = impl_of(c);
    cudaError_t e = im->own_stream && slot_holds(im, r) ? cudaStreamWaitEvent(im->compute, im->slots[r->slot].done, 0)
                                                        : cudaSuccess;
    free(r);
    if (e != cudaSuccess) {
        im->failed = true;
        return ddp_fail(err, DDP_ERUNTIME, "%s:%d: cudaStreamWaitEvent(compute stream, collective done): %s",
                        __FILE__, __LINE__, cudaGetErrorString(e));
    }
    return DDP_OK;
}

static int ncclcomm_test(comm *c, comm_req *r, bool *done, ddp_err *err)
{
    ncclcomm_impl *im = impl_of(c);
    *done = true;
    if (!slot_holds(im, r))
        return DDP_OK;
    cudaError_t e = cudaEventQuery(im->slots[r->slot].done);
    if (e == cudaErrorNotReady) {
        *done = false;
        return DDP_OK;
    }
    CUDA_TRY(e);
    return DDP_OK;
}

/* ---- lifecycle (the end: comm_nccl_teardown.c) ------------------------------------------------ */

static void ncclcomm_destroy(comm *c) { ncclcomm_free(c, false); }
static void ncclcomm_abort(comm *c) { ncclcomm_free(c, true); }

static const struct comm_ops ncclcomm_comm_ops = {
    .name = "nccl",
    .allreduce = ncclcomm_allreduce,
    .broadcast = ncclcomm_broadcast,
    .reduce = ncclcomm_reduce,
    .allgather = ncclcomm_allgather,
    .reducescatter = ncclcomm_reducescatter,
    .alltoall = ncclcomm_alltoall,
    .sendrecv = ncclcomm_sendrecv,
    .barrier = ncclcomm_barrier,
    .wait = ncclcomm_wait,
    .test = ncclcomm_test,
    .destroy = ncclcomm_destroy,
    .abort = ncclcomm_abort,
};

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

/* Rank 0 makes the unique id and broadcasts it with its status, so a failure there is every
 * rank's failure rather than a hang in ncclCommInitRank. */
static int init_nccl(comm *c, ncclcomm_impl *im, ddp_err *err)
{
    struct { int32_t status; ncclUniqueId id; } msg;
    memset(&msg, 0, sizeof msg);
    if (c->rank == 0)
        msg.status = ncclGetUniqueId(&msg.id);
    MPI_TRY(MPI_Bcast(&msg, (int)sizeof msg, MPI_BYTE, 0, im->ctl));
    if (msg.status != ncclSuccess)
        return ddp_fail(err, DDP_ERUNTIME, "%s:%d: ncclGetUniqueId on rank 0: %s", __FILE__, __LINE__,
                        ncclGetErrorString((ncclResult_t)msg.status));
    NCCL_TRY(c, ncclCommInitRank(&im->nccl, c->size, msg.id, c->rank));
    return DDP_OK;
}

static int setup(comm *c, ncclcomm_impl *im, ddp_err *err)
{
    int rc = fill_identity(c, im, err);
    if (rc)
        return rc;
    rc = ncclcomm_faults_read(im, err);
    if (rc)
        return rc;
    CUDA_TRY(cudaSetDevice(im->device));
    if (im->own_stream) {
        /* The greatest priority: the GPU schedules a collective's blocks ahead of queued backward
         * kernels, so a bucket's all-reduce starts when it is ready, not after the compute queue. */
        int least = 0, greatest = 0;
        CUDA_TRY(cudaDeviceGetStreamPriorityRange(&least, &greatest));
        CUDA_TRY(cudaStreamCreateWithPriority(&im->stream, cudaStreamNonBlocking, greatest));
    } else {
        im->stream = im->compute;
    }
    c->stream = im->stream;
    CUDA_TRY(cudaEventCreateWithFlags(&im->compute_ready, cudaEventDisableTiming));
    for (int i = 0; i < NCCLCOMM_SLOTS; i++)
        CUDA_TRY(cudaEventCreateWithFlags(&im->slots[i].done, cudaEventDisableTiming));
    CUDA_TRY(cudaMalloc((void **)&im->barrier_buf, sizeof(int)));
    CUDA_TRY(cudaMemset(im->barrier_buf, 0, sizeof(int)));
    rc = init_nccl(c, im, err);
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
    c->ops = &ncclcomm_comm_ops;
    c->impl = im;
    im->ctl = MPI_COMM_NULL;
    im->compute = (cudaStream_t)opts->compute_stream;
    im->own_stream = !opts->single_stream;
    im->device = opts->device;
    im->timeout_s = timeout_s;
    im->debug = opts->debug;
    pthread_mutex_init(&im->lock, NULL);
    pthread_cond_init(&im->wake, NULL);
    for (int i = 0; i < NCCLCOMM_SLOTS; i++)
        atomic_init(&im->slots[i].state, SLOT_FREE);
    atomic_init(&im->aborting, false);
    im->abort_limit_s = timeout_s < 30 ? timeout_s : 30;
    int rc = setup(c, im, err);
    if (rc) {
        ncclcomm_abort(c);
        return ddp_prefix(err, "comm_nccl_create (GPU %d)", opts->device);
    }
    *out = c;
    return DDP_OK;
}
