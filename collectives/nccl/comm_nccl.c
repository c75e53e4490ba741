/* comm_nccl.c — the NCCL backend's collectives (comm.h) over device buffers, and its comm_ops.
 *
 * It owns issuing every collective on the communication stream ordered after the device's
 * compute stream (an event recorded on the compute stream, waited for by the communication
 * stream; with single_stream collectives run on the compute stream itself and stream order is all
 * the ordering). Completion is an event recorded after the collective: ops->wait makes the
 * compute stream wait for it (no host synchronisation), ops->test queries it. Every issued
 * collective occupies a slot of a ring that the watchdog (comm_nccl_watchdog.c) polls, so a
 * stalled or failed collective ends the process with a message naming it instead of hanging;
 * ddp.debug cross-checks each collective's fingerprint first (comm_nccl_check.c). Each kind of
 * collective is a row of one table (what is checked, its launch), and every collective takes the
 * one path through checks, slot, launch and completion (issue()). all-to-all and sendrecv are
 * grouped ncclSend/ncclRecv (in place: sent from a copy in a staging buffer kept for the
 * communicator's life); barrier is a one-int all-reduce the host waits for. Counts are size_t
 * throughout (NCCL takes size_t). Every NCCL and CUDA call is checked with file:line and the
 * library's own error string, and a failed one marks the communicator failed, so that its end
 * (comm_nccl_teardown.c) aborts instead of waiting. Creation is comm_nccl_create.c.
 * It must not know about models, buckets or training, and never picks the GPU: the caller has. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/clock.h"
#include "comm_nccl_internal.h"

struct comm_req {
    int slot;
    ncclcomm_fingerprint fp;
};

static ncclcomm_impl *impl_of(comm *c) { return c->impl; }

int ncclcomm_fail(comm *c, ncclResult_t rc, const char *call, const char *file, int line, ddp_err *err)
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
        CUDA_TRY_MARK_FAILED(cudaPointerGetAttributes(&a, ends[i]));
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

/* With one rank every reduction is its input. Copying it here also avoids NCCL 2.28.3's one-rank
 * ncclAvg, which on an H100 left the last element of some out-of-place results wrong (double
 * n = 3001 and 65537, float n = 4097). */
static int one_rank_reduction(comm *c, const void *send, void *recv, const ncclcomm_fingerprint *fp, ddp_err *err)
{
    ncclcomm_impl *im = impl_of(c);
    if (send != recv && fp->count)
        CUDA_TRY_MARK_FAILED(cudaMemcpyAsync(recv, send, fp->count * comm_dtype_size(fp->dtype),
                                             cudaMemcpyDeviceToDevice, im->stream));
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
        CUDA_TRY_MARK_FAILED(cudaEventSynchronize(s->done)); /* 256 in flight: wait for the oldest */
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
    worker_lock(&im->watchdog);
    s->fp = *fp;
    snprintf(s->label, sizeof s->label, "%s", c->label);
    s->issued_s = monotonic_s();
    atomic_store(&s->state, SLOT_ISSUING);
    worker_unlock(&im->watchdog);
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
    cudaError_t e = cudaEventRecord(s->done, im->stream);
    if (e != cudaSuccess) { /* the event holds an earlier record: no watch may take it for this one's */
        atomic_store(&s->state, SLOT_FREE);
        im->failed = true;
        char what[160];
        ncclcomm_fingerprint_describe(fp, what, sizeof what);
        return ddp_fail(err, DDP_ERUNTIME, "%s:%d: recording the completion of collective #%llu (%s): %s", __FILE__,
                        __LINE__, (unsigned long long)fp->seq, what, cudaGetErrorString(e));
    }
    atomic_store(&s->state, SLOT_LAUNCHED);
    if (!req) {
        if (im->own_stream)
            CUDA_TRY_MARK_FAILED(cudaStreamWaitEvent(im->compute, s->done, 0));
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

/* ---- collectives: a launch each, one row each, one path through the checks ------------------- */

/* One collective call as the path below takes it. Counts are what each buffer must hold (0:
 * unchecked); launches read fp (after begin_collective: ncclcomm_faults_apply may change count). */
typedef struct coll_call {
    ncclcomm_fingerprint fp;
    const void *send;
    void *recv;
    size_t send_count, recv_count;
    int to, from;              /* sendrecv's peers */
    int slot;                  /* set by issue() */
} coll_call;

static int launch_allreduce(comm *c, const coll_call *a, ddp_err *err)
{
    ncclcomm_impl *im = impl_of(c);
    NCCL_TRY_MARK_FAILED(c, ncclAllReduce(a->send, a->recv, a->fp.count, ncclcomm_type(a->fp.dtype),
                                          ncclcomm_op(a->fp.op), im->nccl, im->stream));
    return DDP_OK;
}

static int launch_broadcast(comm *c, const coll_call *a, ddp_err *err)
{
    ncclcomm_impl *im = impl_of(c);
    NCCL_TRY_MARK_FAILED(c, ncclBroadcast(a->recv, a->recv, a->fp.count, ncclcomm_type(a->fp.dtype), a->fp.root,
                                          im->nccl, im->stream));
    return DDP_OK;
}

static int launch_reduce(comm *c, const coll_call *a, ddp_err *err)
{
    ncclcomm_impl *im = impl_of(c);
    NCCL_TRY_MARK_FAILED(c, ncclReduce(a->send, a->recv, a->fp.count, ncclcomm_type(a->fp.dtype),
                                       ncclcomm_op(a->fp.op), a->fp.root, im->nccl, im->stream));
    return DDP_OK;
}

static int launch_allgather(comm *c, const coll_call *a, ddp_err *err)
{
    ncclcomm_impl *im = impl_of(c);
    NCCL_TRY_MARK_FAILED(c, ncclAllGather(a->send, a->recv, a->fp.count, ncclcomm_type(a->fp.dtype), im->nccl,
                                          im->stream));
    return DDP_OK;
}

static int launch_reducescatter(comm *c, const coll_call *a, ddp_err *err)
{
    ncclcomm_impl *im = impl_of(c);
    NCCL_TRY_MARK_FAILED(c, ncclReduceScatter(a->send, a->recv, a->fp.count, ncclcomm_type(a->fp.dtype),
                                              ncclcomm_op(a->fp.op), im->nccl, im->stream));
    return DDP_OK;
}

static int launch_barrier(comm *c, const coll_call *a, ddp_err *err)
{
    ncclcomm_impl *im = impl_of(c);
    (void)a;
    NCCL_TRY_MARK_FAILED(c, ncclAllReduce(im->barrier_buf, im->barrier_buf, 1, ncclInt32, ncclSum, im->nccl,
                                          im->stream));
    return DDP_OK;
}

/* In-place point-to-point exchanges read what they overwrite: they send from a copy, made on the
 * stream into a buffer that only grows (freed and allocated in stream order, so an exchange
 * still in flight keeps the old one), so repeated exchanges allocate nothing. */
static int stage_copy(comm *c, const void *src, size_t bytes, void **copy, ddp_err *err)
{
    ncclcomm_impl *im = impl_of(c);
    if (bytes > im->stage_bytes) {
        if (im->stage)
            CUDA_TRY_MARK_FAILED(cudaFreeAsync(im->stage, im->stream));
        im->stage = NULL;
        im->stage_bytes = 0;
        CUDA_TRY_MARK_FAILED(cudaMallocAsync(&im->stage, bytes, im->stream));
        im->stage_bytes = bytes;
    }
    CUDA_TRY_MARK_FAILED(cudaMemcpyAsync(im->stage, src, bytes, cudaMemcpyDeviceToDevice, im->stream));
    *copy = im->stage;
    return DDP_OK;
}

/* Grouped sends and receives: all-to-all sends block j of send to rank j and receives block j of
 * recv from rank j; sendrecv sends to a->to while receiving from a->from. */
static int launch_exchange(comm *c, const coll_call *a, ddp_err *err)
{
    ncclcomm_impl *im = impl_of(c);
    bool all = a->fp.kind == NK_ALLTOALL;
    size_t count = a->fp.count, esz = comm_dtype_size(a->fp.dtype);
    size_t bytes = all ? count * esz * (size_t)c->size : count * esz;
    const char *send = a->send;
    char *recv = a->recv;
    void *copy = NULL;
    if (send == recv && bytes) {
        int rc = stage_copy(c, send, bytes, &copy, err);
        if (rc)
            return rc;
        send = copy;
    }
    ncclDataType_t t = ncclcomm_type(a->fp.dtype);
    NCCL_TRY_MARK_FAILED(c, ncclGroupStart());
    /* the group is always closed: the first failure is reported, by ncclGroupEnd at the latest */
    ncclResult_t first = ncclSuccess;
    for (int j = 0; all && j < c->size && first == ncclSuccess; j++) {
        first = ncclSend(send + (size_t)j * count * esz, count, t, j, im->nccl, im->stream);
        if (first == ncclSuccess)
            first = ncclRecv(recv + (size_t)j * count * esz, count, t, j, im->nccl, im->stream);
    }
    if (!all) {
        first = ncclSend(send, count, t, a->to, im->nccl, im->stream);
        if (first == ncclSuccess)
            first = ncclRecv(recv, count, t, a->from, im->nccl, im->stream);
    }
    ncclResult_t end = ncclGroupEnd();
    if (first != ncclSuccess)
        return ncclcomm_fail(c, first, "ncclSend/ncclRecv", __FILE__, __LINE__, err);
    if (end != ncclSuccess)
        return ncclcomm_fail(c, end, "ncclGroupEnd", __FILE__, __LINE__, err);
    return DDP_OK;
}

/* What the path checks and launches for each kind of collective. */
typedef struct coll_kind {
    bool reduction;            /* takes an op (checked); with one rank, the result is a copy of the input */
    bool rooted;               /* takes a root (checked) */
    bool peers;                /* takes sendrecv's peers (checked) */
    const char *recv_name;     /* the receive buffer in messages; NULL: "receive" */
    int (*launch)(comm *c, const coll_call *a, ddp_err *err);
} coll_kind;

static const coll_kind kinds[] = {
    [NK_ALLREDUCE] = {.reduction = true, .launch = launch_allreduce},
    [NK_BROADCAST] = {.rooted = true, .recv_name = "broadcast", .launch = launch_broadcast},
    [NK_REDUCE] = {.reduction = true, .rooted = true, .launch = launch_reduce},
    [NK_ALLGATHER] = {.launch = launch_allgather},
    [NK_REDUCESCATTER] = {.reduction = true, .launch = launch_reducescatter},
    [NK_ALLTOALL] = {.launch = launch_exchange},
    [NK_SENDRECV] = {.peers = true, .launch = launch_exchange},
    [NK_BARRIER] = {.launch = launch_barrier},
};

static int check_call(comm *c, const coll_kind *k, const coll_call *a, ddp_err *err)
{
    comm_dtype dt = (comm_dtype)a->fp.dtype;
    int rc = check_args(dt, (comm_op)a->fp.op, k->reduction, err);
    if (!rc && k->rooted)
        rc = check_root(c, a->fp.root, err);
    if (!rc && k->peers && (a->to < 0 || a->to >= c->size || a->from < 0 || a->from >= c->size))
        rc = ddp_fail(err, DDP_EUSAGE, "comm_nccl: sendrecv peers %d/%d outside [0, %d)", a->to, a->from, c->size);
    if (!rc)
        rc = check_buffer(c, "send", a->send, a->send_count, dt, err);
    if (!rc)
        rc = check_buffer(c, k->recv_name ? k->recv_name : "receive", a->recv, a->recv_count, dt, err);
    return rc;
}

/* Every collective's one path: its arguments checked, then begin_collective (slot, ddp.debug,
 * ordering), its kind's launch (a reduction on one rank: a copy) and end_collective. */
static int issue(comm *c, coll_call *a, comm_req **req, ddp_err *err)
{
    const coll_kind *k = &kinds[a->fp.kind];
    int rc = check_call(c, k, a, err);
    if (!rc)
        rc = begin_collective(c, &a->fp, &a->slot, err);
    if (rc)
        return rc;
    int launched = k->reduction && c->size == 1 ? one_rank_reduction(c, a->send, a->recv, &a->fp, err)
                                                : k->launch(c, a, err);
    return end_collective(c, a->slot, &a->fp, launched, req, err);
}

static int ncclcomm_allreduce(comm *c, const void *send, void *recv, size_t count, comm_dtype dt, comm_op op,
                              comm_req **req, ddp_err *err)
{
    coll_call a = {.fp = {.kind = NK_ALLREDUCE, .op = op, .dtype = dt, .root = -1, .count = count},
                   .send = send, .recv = recv, .send_count = count, .recv_count = count};
    return issue(c, &a, req, err);
}

static int ncclcomm_broadcast(comm *c, void *buf, size_t count, comm_dtype dt, int root, comm_req **req, ddp_err *err)
{
    coll_call a = {.fp = {.kind = NK_BROADCAST, .op = -1, .dtype = dt, .root = root, .count = count},
                   .send = buf, .recv = buf, .recv_count = count};
    return issue(c, &a, req, err);
}

static int ncclcomm_reduce(comm *c, const void *send, void *recv, size_t count, comm_dtype dt, comm_op op, int root,
                           comm_req **req, ddp_err *err)
{
    coll_call a = {.fp = {.kind = NK_REDUCE, .op = op, .dtype = dt, .root = root, .count = count},
                   .send = send, .recv = recv, .send_count = count, .recv_count = c->rank == root ? count : 0};
    return issue(c, &a, req, err);
}

static int ncclcomm_allgather(comm *c, const void *send, void *recv, size_t count, comm_dtype dt, comm_req **req,
                              ddp_err *err)
{
    coll_call a = {.fp = {.kind = NK_ALLGATHER, .op = -1, .dtype = dt, .root = -1, .count = count},
                   .send = send, .recv = recv, .send_count = count, .recv_count = count * (size_t)c->size};
    return issue(c, &a, req, err);
}

static int ncclcomm_reducescatter(comm *c, const void *send, void *recv, size_t count, comm_dtype dt, comm_op op,
                                  comm_req **req, ddp_err *err)
{
    coll_call a = {.fp = {.kind = NK_REDUCESCATTER, .op = op, .dtype = dt, .root = -1, .count = count},
                   .send = send, .recv = recv, .send_count = count * (size_t)c->size, .recv_count = count};
    return issue(c, &a, req, err);
}

static int ncclcomm_alltoall(comm *c, const void *send, void *recv, size_t count, comm_dtype dt, comm_req **req,
                             ddp_err *err)
{
    coll_call a = {.fp = {.kind = NK_ALLTOALL, .op = -1, .dtype = dt, .root = -1, .count = count},
                   .send = send, .recv = recv, .send_count = count * (size_t)c->size,
                   .recv_count = count * (size_t)c->size};
    return issue(c, &a, req, err);
}

static int ncclcomm_sendrecv(comm *c, const void *send, int to, void *recv, int from, size_t count, comm_dtype dt,
                             comm_req **req, ddp_err *err)
{
    coll_call a = {.fp = {.kind = NK_SENDRECV, .op = -1, .dtype = dt, .root = -1, .count = count},
                   .send = send, .recv = recv, .send_count = count, .recv_count = count, .to = to, .from = from};
    return issue(c, &a, req, err);
}

/* A one-int all-reduce the host waits for (the watchdog guards the wait). */
static int ncclcomm_barrier(comm *c, ddp_err *err)
{
    ncclcomm_impl *im = impl_of(c);
    coll_call a = {.fp = {.kind = NK_BARRIER, .op = OP_SUM, .dtype = DT_INT32, .root = -1, .count = 1}};
    int rc = issue(c, &a, NULL, err);
    if (rc)
        return rc;
    CUDA_TRY_MARK_FAILED(cudaEventSynchronize(im->slots[a.slot].done));
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
    cudaError_t e = cuda_event_query(im->slots[r->slot].done);
    if (e == cudaErrorNotReady) {
        *done = false;
        return DDP_OK;
    }
    CUDA_TRY_MARK_FAILED(e);
    return DDP_OK;
}

/* ---- lifecycle (the end: comm_nccl_teardown.c) ------------------------------------------------ */

static void ncclcomm_destroy(comm *c) { ncclcomm_free(c, false); }
static void ncclcomm_abort(comm *c) { ncclcomm_free(c, true); }

const struct comm_ops ncclcomm_ops = {
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
