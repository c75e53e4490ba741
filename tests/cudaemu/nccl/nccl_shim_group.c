/* nccl_shim_group.c — the emulated build's NCCL, part 3: groups and running queued calls.
 *
 * A call outside a group, or the calls of a ncclGroupStart/End pair, are recorded when issued and
 * queued on their stream as one piece of host work (cudaemu.h). When the stream runs it, the calls
 * become non-blocking MPI calls (shim_issue, nccl_shim_coll.c), which it waits for, giving up if a
 * communicator is aborted, before the post steps (ncclAvg's division of integers, moves). Failures become the
 * communicator's asynchronous error, as on a GPU. Must not validate arguments: the entry points
 * did, when the calls were issued. */
#include "nccl_shim_internal.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/base/avg.h"
#include "tests/cudaemu/cudaemu.h"

/* ncclAvg on integer types: the sum divided by the number of ranks (runtime/base/avg.h, shared
 * with the MPI communicator). dt was validated when the operation was issued. */
static void divide_by_ranks(void *buf, size_t n, ncclDataType_t dt, int ranks)
{
    static const avg_elem elem[ncclNumTypes] = {
        [ncclInt8] = AVG_I8, [ncclUint8] = AVG_U8, [ncclInt32] = AVG_I32, [ncclUint32] = AVG_U32,
        [ncclInt64] = AVG_I64, [ncclUint64] = AVG_U64, [ncclFloat16] = AVG_F16, [ncclFloat32] = AVG_F32,
        [ncclFloat64] = AVG_F64, [ncclBfloat16] = AVG_BF16,
    };
    avg_divide(buf, n, elem[dt], ranks);
}

/* ---- running calls: their MPI requests and post steps ----------------------------------- */

static _Thread_local struct {
    MPI_Request *reqs;
    ncclComm_t *req_comm;
    int n_reqs, cap_reqs;
    shim_post *posts;
    int n_posts, cap_posts;
    void **scratch;
    int n_scratch, cap_scratch;
} batch;

MPI_Request *shim_batch_request(ncclComm_t comm)
{
    if (batch.n_reqs == batch.cap_reqs) {
        int cap = batch.cap_reqs ? 2 * batch.cap_reqs : 16;
        MPI_Request *r = realloc(batch.reqs, (size_t)cap * sizeof *r);
        ncclComm_t *c = r ? realloc(batch.req_comm, (size_t)cap * sizeof *c) : NULL;
        if (r)
            batch.reqs = r;
        if (!c) {
            shim_fail(comm, ncclSystemError, "out of memory for %d MPI requests", cap);
            return NULL;
        }
        batch.req_comm = c;
        batch.cap_reqs = cap;
    }
    batch.req_comm[batch.n_reqs] = comm;
    return &batch.reqs[batch.n_reqs++];
}

/* array (n used of *cap elements) with room for one more, possibly moved; NULL when memory runs
 * out (array is then untouched). */
static void *grow(void *array, int n, int *cap, size_t elem)
{
    if (n < *cap)
        return array;
    int want = *cap ? 2 * *cap : 8;
    void *bigger = realloc(array, (size_t)want * elem);
    if (bigger)
        *cap = want;
    return bigger;
}

ncclResult_t shim_batch_post(const shim_post *p)
{
    shim_post *posts = grow(batch.posts, batch.n_posts, &batch.cap_posts, sizeof *posts);
    if (!posts)
        return shim_fail(p->comm, ncclSystemError, "out of memory for the group's pending work");
    batch.posts = posts;
    batch.posts[batch.n_posts++] = *p;
    return ncclSuccess;
}

void *shim_batch_scratch(ncclComm_t comm, size_t bytes)
{
    void **list = grow(batch.scratch, batch.n_scratch, &batch.cap_scratch, sizeof *list);
    void *mem = list ? malloc(bytes) : NULL;
    if (list)
        batch.scratch = list;
    if (!mem) {
        shim_fail(comm, ncclSystemError, "out of memory for %zu bytes of an average's scaled input", bytes);
        return NULL;
    }
    batch.scratch[batch.n_scratch++] = mem;
    return mem;
}

static ncclComm_t aborted_comm(void)
{
    for (int i = 0; i < batch.n_reqs; i++)
        if (atomic_load(&batch.req_comm[i]->aborted))
            return batch.req_comm[i];
    return NULL;
}

/* MPI progresses only inside MPI calls: poll, yielding the core (CI oversubscribes ranks). */
static ncclResult_t wait_requests(void)
{
    for (long spins = 0;; spins++) {
        int done = 0;
        int rc = MPI_Testall(batch.n_reqs, batch.reqs, &done, MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS)
            return shim_mpi_fail(batch.req_comm[0], rc, "MPI_Testall", __LINE__);
        if (done)
            return ncclSuccess;
        ncclComm_t gone = aborted_comm();
        if (gone) {
            atomic_store(&gone->async_error, ncclRemoteError);
            return shim_fail(gone, ncclRemoteError, "operation abandoned: the communicator was aborted");
        }
        if (spins < 1000) {
            sched_yield();
        } else {
            struct timespec pause = {0, 100 * 1000};
            nanosleep(&pause, NULL);
        }
    }
}

static void run_post(const shim_post *p)
{
    if (p->kind == POST_MOVE)
        memmove(p->dst, p->src, p->count);
    else
        divide_by_ranks(p->dst, p->count, p->dt, p->comm->size);
}

/* ---- groups: calls recorded at issue, queued on their stream, run in stream order --------- */

typedef struct recorded_group {
    int n;
    shim_call calls[];
} recorded_group;

static _Thread_local struct {
    int depth;                    /* ncclGroupStart nesting */
    shim_call *calls;
    int n, cap;
    cudaStream_t stream;
    ncclResult_t deferred;        /* first failure inside the current group */
} group;

bool shim_in_group(void) { return group.depth > 0; }

ncclResult_t shim_record(const shim_call *call, cudaStream_t stream)
{
    if (group.n > 0 && stream != group.stream)
        return shim_fail(call->comm, ncclInvalidUsage, "a group on several streams is not emulated (stream %p, "
                         "then %p)", (void *)group.stream, (void *)stream);
    shim_call *calls = grow(group.calls, group.n, &group.cap, sizeof *calls);
    if (!calls)
        return shim_fail(call->comm, ncclSystemError, "out of memory recording a call");
    group.calls = calls;
    group.stream = stream;
    group.calls[group.n++] = *call;
    return ncclSuccess;
}

/* Runs a recorded group on the issuing thread, when its stream reaches it. Calls of an aborted
 * communicator are dropped, as NCCL drops outstanding work at abort; failures become the
 * communicator's asynchronous error (ncclCommGetAsyncError), as on a GPU. */
static void run_group(void *arg)
{
    recorded_group *g = arg;
    ncclResult_t rc = ncclSuccess;
    for (int i = 0; i < g->n && rc == ncclSuccess; i++)
        if (!atomic_load(&g->calls[i].comm->aborted))
            rc = shim_issue(&g->calls[i]);
    if (rc == ncclSuccess && batch.n_reqs)
        rc = wait_requests();
    for (int i = 0; i < batch.n_posts && rc == ncclSuccess; i++)
        run_post(&batch.posts[i]);
    for (int i = 0; i < g->n; i++) {
        if (rc != ncclSuccess)
            atomic_store(&g->calls[i].comm->async_error, rc);
        atomic_fetch_sub(&g->calls[i].comm->pending, 1);
    }
    batch.n_reqs = 0;
    batch.n_posts = 0;
    for (int i = 0; i < batch.n_scratch && rc == ncclSuccess; i++)
        free(batch.scratch[i]); /* after a failure an abandoned request may still read them: kept */
    batch.n_scratch = 0;
    free(g);
}

void shim_discard(void) { group.n = 0; }

ncclResult_t shim_submit(void)
{
    if (group.n == 0)
        return ncclSuccess;
    recorded_group *g = malloc(sizeof *g + (size_t)group.n * sizeof g->calls[0]);
    if (!g) {
        shim_discard();
        return shim_fail(NULL, ncclSystemError, "out of memory queueing %d calls", group.n);
    }
    g->n = group.n;
    memcpy(g->calls, group.calls, (size_t)group.n * sizeof g->calls[0]);
    shim_discard();
    for (int i = 0; i < g->n; i++)
        atomic_fetch_add(&g->calls[i].comm->pending, 1);
    cudaError_t e = cudaemu_enqueue_host_work(group.stream, "NCCL collective", run_group, g, 1);
    if (e != cudaSuccess) {
        ncclComm_t c = g->calls[0].comm;
        for (int i = 0; i < g->n; i++)
            atomic_fetch_sub(&g->calls[i].comm->pending, 1);
        free(g);
        return shim_fail(c, ncclUnhandledCudaError, "queueing on stream %p: %s", (void *)group.stream,
                         cudaGetErrorString(e));
    }
    return ncclSuccess;
}

ncclResult_t ncclGroupStart(void)
{
    if (group.depth++ == 0)
        group.deferred = ncclSuccess;
    return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void)
{
    if (group.depth == 0)
        return shim_fail(NULL, ncclInvalidUsage, "ncclGroupEnd: not in a group (ncclGroupStart missing)");
    if (--group.depth > 0)
        return ncclSuccess;
    if (group.deferred != ncclSuccess) {
        shim_discard();
        return group.deferred;
    }
    return shim_submit();
}

ncclResult_t shim_group_note(ncclResult_t rc)
{
    if (rc != ncclSuccess && group.depth > 0 && group.deferred == ncclSuccess)
        group.deferred = rc;
    return rc;
}
