/* comm_mpi.c — the MPI backend of the communicator (comm.h) over a duplicate of MPI_COMM_WORLD,
 * on host buffers.
 *
 * It owns: mapping comm.h types and ops onto MPI (half and bfloat16 travel as a 2-byte MPI type
 * reduced by our own MPI_Ops in float math, rounded to nearest-even back), splitting what passes
 * the chunk limit (INT_MAX, or DDP_COMM_MAX_CHUNK elements for tests; for the block-per-rank
 * collectives all blocks of a call together) into several MPI calls, blocking and non-blocking
 * forms (a comm_req holds every MPI request of one call plus the work to do once they complete),
 * and every MPI return code as a ddp_err with file:line and MPI's error string (MPI_ERRORS_RETURN).
 * OP_AVG is a sum followed by a division by the number of ranks: exact float division for
 * floating types, C integer division (truncating toward zero) for integer types.
 * In place: allreduce/reduce/alltoall/sendrecv when send == recv; allgather when
 * send == recv + rank*count; reducescatter when recv == send + rank*count (nccl-tests' layout).
 * It must not know about models, buckets, training or benchmarks. */
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "runtime/base/avg.h"
#include "runtime/base/half_mpi.h"
#include "runtime/base/max_chunk.h"
#include "mpi_check.h"
#include "mpi_identity.h"
#include "comm_mpi_watch.h"

typedef struct mpi_impl {
    MPI_Comm comm;             /* our own duplicate, so nothing else's traffic can match ours */
    MPI_Datatype two_byte;     /* half and bfloat16 */
    MPI_Op half_op[OP_AVG];    /* sum prod min max in float math */
    MPI_Op bf16_op[OP_AVG];
    size_t max_chunk;          /* elements per MPI call */
    mpi_watch *watch;          /* the deadline (comm_mpi_set_timeout), or NULL: MPI_Wait as is */
} mpi_impl;

struct comm_req {
    bool blocking;             /* a stack request of a blocking call: no MPI requests */
    uint64_t seq;              /* with a deadline: the collective's number, its name and label */
    const char *what;
    char label[sizeof ((comm *)0)->label];
    MPI_Request *reqs;
    int n, cap;
    /* work once every request completed, in this order */
    void *move_dst;            /* memmove(move_dst, move_src, move_bytes) */
    const void *move_src;
    size_t move_bytes;
    void *avg_buf;             /* divide avg_count elements by the number of ranks */
    size_t avg_count;
    comm_dtype avg_dt;
    void *scratch;             /* freed last */
};

static mpi_impl *impl_of(comm *c) { return c->impl; }

static MPI_Datatype mpi_type(const mpi_impl *m, comm_dtype dt)
{
    switch (dt) {
    case DT_FLOAT: return MPI_FLOAT;
    case DT_DOUBLE: return MPI_DOUBLE;
    case DT_INT32: return MPI_INT32_T;
    case DT_INT8: return MPI_INT8_T;
    case DT_UINT8: return MPI_UINT8_T;
    case DT_INT64: return MPI_INT64_T;
    case DT_UINT64: return MPI_UINT64_T;
    default: return m->two_byte;
    }
}

static MPI_Op mpi_op(const mpi_impl *m, comm_dtype dt, comm_op op)
{
    comm_op base = op == OP_AVG ? OP_SUM : op;
    if (dt == DT_HALF)
        return m->half_op[base];
    if (dt == DT_BFLOAT16)
        return m->bf16_op[base];
    static const MPI_Op native[OP_AVG] = {[OP_SUM] = MPI_SUM, [OP_PROD] = MPI_PROD, [OP_MIN] = MPI_MIN, [OP_MAX] = MPI_MAX};
    return native[base];
}

/* OP_AVG's division after the sum (runtime/base/avg.h, shared with the emulated NCCL). */
static void divide_by_ranks(void *buf, size_t n, comm_dtype dt, int ranks)
{
    static const avg_elem elem[DT_COUNT] = {
        [DT_FLOAT] = AVG_F32, [DT_DOUBLE] = AVG_F64, [DT_HALF] = AVG_F16, [DT_BFLOAT16] = AVG_BF16,
        [DT_INT32] = AVG_I32, [DT_INT8] = AVG_I8, [DT_UINT8] = AVG_U8, [DT_INT64] = AVG_I64, [DT_UINT64] = AVG_U64,
    };
    avg_divide(buf, n, elem[dt], ranks);
}

/* ---- requests ---- */

static size_t chunks_of(const mpi_impl *m, size_t count) { return (count + m->max_chunk - 1) / m->max_chunk; }

static size_t chunk_len(const mpi_impl *m, size_t count, size_t off)
{
    return count - off < m->max_chunk ? count - off : m->max_chunk;
}

/* Whether an all-gather, all-to-all or reduce-scatter of count elements a block goes in chunks: all
 * blocks together must fit, as Open MPI multiplies a block's count by the ranks in int inside them. */
static bool blocks_in_chunks(const comm *c, const mpi_impl *m, size_t count)
{
    return count > m->max_chunk / (size_t)c->size;
}

/* Validates dt (and op when has_op). Blocking calls use *stack, unless a deadline watches them:
 * those, like non-blocking ones, get a heap request with room for n_mpi MPI requests. */
static int req_begin(comm *c, const char *what, comm_dtype dt, comm_op op, bool has_op, comm_req **req, size_t n_mpi,
                     comm_req *stack, comm_req **out, ddp_err *err)
{
    mpi_impl *m = impl_of(c);
    memset(stack, 0, sizeof *stack);
    stack->blocking = true;
    *out = stack;
    if ((unsigned)dt >= DT_COUNT)
        return ddp_fail(err, DDP_EUSAGE, "comm_mpi: unknown data type %d", (int)dt);
    if (has_op && (unsigned)op >= OP_COUNT)
        return ddp_fail(err, DDP_EUSAGE, "comm_mpi: unknown reduction %d", (int)op);
    if (!req && !m->watch)
        return DDP_OK;
    if (n_mpi > INT_MAX)
        return ddp_fail(err, DDP_EUSAGE, "comm_mpi: %zu MPI requests needed; raise DDP_COMM_MAX_CHUNK", n_mpi);
    comm_req *r = calloc(1, sizeof *r);
    MPI_Request *q = calloc(n_mpi ? n_mpi : 1, sizeof *q);
    if (!r || !q) {
        free(r);
        free(q);
        return ddp_fail(err, DDP_ERUNTIME, "comm_mpi: out of memory for a request of %zu MPI requests", n_mpi);
    }
    r->reqs = q;
    r->cap = (int)n_mpi;
    r->what = what;
    snprintf(r->label, sizeof r->label, "%s", c->label);
    r->seq = m->watch ? mpi_watch_enter(m->watch) : 0;
    *out = r;
    return DDP_OK;
}

static MPI_Request *next_req(comm_req *r) { return &r->reqs[r->n++]; }

static void req_free(comm_req *r)
{
    free(r->scratch);
    if (!r->blocking) {
        free(r->reqs);
        free(r);
    }
}

/* After a failed issue or wait: freed, or left to MPI (the job is ending) if MPI may hold a request
 * of it (a slot next_req gave): a non-blocking collective and its r->scratch cannot be freed. */
static void req_drop(comm_req *r) { if (r->blocking || r->n == 0) req_free(r); }

static void req_finish(comm *c, comm_req *r)
{
    if (r->move_bytes && r->move_dst != r->move_src)
        memmove(r->move_dst, r->move_src, r->move_bytes);
    if (r->avg_buf)
        divide_by_ranks(r->avg_buf, r->avg_count, r->avg_dt, c->size);
    req_free(r);
}

static int mpi_wait(comm *c, comm_req *r, ddp_err *err);

/* Ends a collective: on failure drops r (req_drop); blocking calls finish now (waiting under the
 * deadline when one watches them), others hand r out. */
static int req_end(comm *c, comm_req *r, comm_req **req, int rc, ddp_err *err)
{
    if (rc != DDP_OK)
        req_drop(r);
    else if (r->blocking)
        req_finish(c, r);
    else if (!req)
        return mpi_wait(c, r, err);
    else
        *req = r;
    return rc;
}

/* A type of n contiguous elements whose extent is `stride` elements: one block of a
 * [ranks][count] buffer, so a chunk of every block moves in one collective. */
static int block_type(MPI_Datatype base, size_t n, size_t stride, size_t esz, MPI_Datatype *out, ddp_err *err)
{
    MPI_Datatype run;
    MPI_TRY(MPI_Type_contiguous((int)n, base, &run));
    int rc = MPI_Type_create_resized(run, 0, (MPI_Aint)(stride * esz), out);
    MPI_Type_free(&run);
    if (rc != MPI_SUCCESS)
        return mpi_fail(err, rc, "MPI_Type_create_resized", __FILE__, __LINE__);
    MPI_TRY(MPI_Type_commit(out));
    return DDP_OK;
}

/* ---- collectives ---- */

static int issue_allreduce(comm *c, comm_req *r, const void *send, void *recv, size_t count, comm_dtype dt, comm_op op, ddp_err *err)
{
    mpi_impl *m = impl_of(c);
    size_t esz = comm_dtype_size(dt);
    MPI_Datatype t = mpi_type(m, dt);
    MPI_Op o = mpi_op(m, dt, op);
    for (size_t off = 0; off < count; off += m->max_chunk) {
        int n = (int)chunk_len(m, count, off);
        char *rb = (char *)recv + off * esz;
        const void *sb = send == recv ? MPI_IN_PLACE : (const char *)send + off * esz;
        if (r->blocking)
            MPI_TRY(MPI_Allreduce(sb, rb, n, t, o, m->comm));
        else
            MPI_TRY(MPI_Iallreduce(sb, rb, n, t, o, m->comm, next_req(r)));
    }
    if (op == OP_AVG)
        r->avg_buf = recv, r->avg_count = count, r->avg_dt = dt;
    return DDP_OK;
}

static int mpi_allreduce(comm *c, const void *send, void *recv, size_t count, comm_dtype dt, comm_op op, comm_req **req, ddp_err *err)
{
    mpi_impl *m = impl_of(c);
    /* The small all-reduce's call (blocking, unwatched, one chunk, no division after) goes
     * straight to MPI: the request bookkeeping below cost it ~200 instructions, 8 % of Open MPI's
     * own at 8 bytes (docs/performance-model.md). */
    if (!req && !m->watch && count <= m->max_chunk && (unsigned)dt < DT_COUNT && (unsigned)op < OP_AVG) {
        MPI_TRY(MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, (int)count, mpi_type(m, dt), mpi_op(m, dt, op),
                              m->comm));
        return DDP_OK;
    }
    comm_req stack, *r;
    int rc = req_begin(c, "all-reduce", dt, op, true, req, chunks_of(m, count), &stack, &r, err);
    if (rc)
        return rc;
    return req_end(c, r, req, issue_allreduce(c, r, send, recv, count, dt, op, err), err);
}

static int issue_broadcast(comm *c, comm_req *r, void *buf, size_t count, comm_dtype dt, int root, ddp_err *err)
{
    mpi_impl *m = impl_of(c);
    size_t esz = comm_dtype_size(dt);
    MPI_Datatype t = mpi_type(m, dt);
    for (size_t off = 0; off < count; off += m->max_chunk) {
        int n = (int)chunk_len(m, count, off);
        char *b = (char *)buf + off * esz;
        if (r->blocking)
            MPI_TRY(MPI_Bcast(b, n, t, root, m->comm));
        else
            MPI_TRY(MPI_Ibcast(b, n, t, root, m->comm, next_req(r)));
    }
    return DDP_OK;
}

static int mpi_broadcast(comm *c, void *buf, size_t count, comm_dtype dt, int root, comm_req **req, ddp_err *err)
{
    comm_req stack, *r;
    int rc = req_begin(c, "broadcast", dt, OP_SUM, false, req, chunks_of(impl_of(c), count), &stack, &r, err);
    if (rc)
        return rc;
    return req_end(c, r, req, issue_broadcast(c, r, buf, count, dt, root, err), err);
}

static int issue_reduce(comm *c, comm_req *r, const void *send, void *recv, size_t count, comm_dtype dt, comm_op op, int root, ddp_err *err)
{
    mpi_impl *m = impl_of(c);
    size_t esz = comm_dtype_size(dt);
    MPI_Datatype t = mpi_type(m, dt);
    MPI_Op o = mpi_op(m, dt, op);
    bool in_place = send == recv && c->rank == root;
    for (size_t off = 0; off < count; off += m->max_chunk) {
        int n = (int)chunk_len(m, count, off);
        char *rb = (char *)recv + off * esz;
        const void *sb = in_place ? MPI_IN_PLACE : (const char *)send + off * esz;
        if (r->blocking)
            MPI_TRY(MPI_Reduce(sb, rb, n, t, o, root, m->comm));
        else
            MPI_TRY(MPI_Ireduce(sb, rb, n, t, o, root, m->comm, next_req(r)));
    }
    if (op == OP_AVG && c->rank == root)
        r->avg_buf = recv, r->avg_count = count, r->avg_dt = dt;
    return DDP_OK;
}

static int mpi_reduce(comm *c, const void *send, void *recv, size_t count, comm_dtype dt, comm_op op, int root, comm_req **req, ddp_err *err)
{
    comm_req stack, *r;
    int rc = req_begin(c, "reduce", dt, op, true, req, chunks_of(impl_of(c), count), &stack, &r, err);
    if (rc)
        return rc;
    return req_end(c, r, req, issue_reduce(c, r, send, recv, count, dt, op, root, err), err);
}

/* Allgather / alltoall past blocks_in_chunks: chunk k (up to max_chunk elements) of every block
 * moves in one call, through a block type whose extent skips to the same chunk of the next block. */
static int issue_block_chunks(comm *c, comm_req *r, bool alltoall, const void *send, void *recv, size_t count,
                              comm_dtype dt, bool in_place, ddp_err *err)
{
    mpi_impl *m = impl_of(c);
    size_t esz = comm_dtype_size(dt);
    MPI_Datatype t = mpi_type(m, dt);
    for (size_t off = 0; off < count; off += m->max_chunk) {
        size_t n = chunk_len(m, count, off);
        MPI_Datatype block;
        int rc = block_type(t, n, count, esz, &block, err);
        if (rc)
            return rc;
        const void *sb = in_place ? MPI_IN_PLACE : (const char *)send + off * esz;
        char *rb = (char *)recv + off * esz;
        if (alltoall) /* a chunk of every send block too */
            rc = r->blocking ? MPI_Alltoall(sb, 1, block, rb, 1, block, m->comm)
                             : MPI_Ialltoall(sb, 1, block, rb, 1, block, m->comm, next_req(r));
        else /* one plain chunk of our own block */
            rc = r->blocking ? MPI_Allgather(sb, (int)n, t, rb, 1, block, m->comm)
                             : MPI_Iallgather(sb, (int)n, t, rb, 1, block, m->comm, next_req(r));
        MPI_Type_free(&block); /* a pending operation keeps its own reference */
        if (rc != MPI_SUCCESS)
            return mpi_fail(err, rc, alltoall ? "MPI_(I)alltoall" : "MPI_(I)allgather", __FILE__, __LINE__);
    }
    return DDP_OK;
}

/* Allgather and alltoall: block-per-rank collectives. In place means, for allgather, that send is
 * this rank's block of recv; for alltoall, that send is recv. */
static int issue_block_collective(comm *c, comm_req *r, bool alltoall, const void *send, void *recv, size_t count,
                                  comm_dtype dt, ddp_err *err)
{
    mpi_impl *m = impl_of(c);
    MPI_Datatype t = mpi_type(m, dt);
    bool in_place = alltoall ? send == recv
                             : (const char *)send == (char *)recv + (size_t)c->rank * count * comm_dtype_size(dt);
    if (blocks_in_chunks(c, m, count))
        return issue_block_chunks(c, r, alltoall, send, recv, count, dt, in_place, err);
    const void *sb = in_place ? MPI_IN_PLACE : send;
    int n = (int)count;
    if (alltoall && r->blocking)
        MPI_TRY(MPI_Alltoall(sb, n, t, recv, n, t, m->comm));
    else if (alltoall)
        MPI_TRY(MPI_Ialltoall(sb, n, t, recv, n, t, m->comm, next_req(r)));
    else if (r->blocking)
        MPI_TRY(MPI_Allgather(sb, n, t, recv, n, t, m->comm));
    else
        MPI_TRY(MPI_Iallgather(sb, n, t, recv, n, t, m->comm, next_req(r)));
    return DDP_OK;
}

static int mpi_allgather(comm *c, const void *send, void *recv, size_t count, comm_dtype dt, comm_req **req, ddp_err *err)
{
    comm_req stack, *r;
    int rc = req_begin(c, "all-gather", dt, OP_SUM, false, req, chunks_of(impl_of(c), count), &stack, &r, err);
    if (rc)
        return rc;
    return req_end(c, r, req, issue_block_collective(c, r, false, send, recv, count, dt, err), err);
}

/* Counts beyond the chunk limit: one reduce per (chunk, destination rank), since
 * MPI_Reduce_scatter_block needs each rank's block contiguous in the send buffer. */
static int issue_reducescatter_chunked(comm *c, comm_req *r, const char *send, char *recv, size_t count, comm_dtype dt, comm_op op, ddp_err *err)
{
    mpi_impl *m = impl_of(c);
    size_t esz = comm_dtype_size(dt);
    MPI_Datatype t = mpi_type(m, dt);
    MPI_Op o = mpi_op(m, dt, op);
    for (size_t off = 0; off < count; off += m->max_chunk) {
        int n = (int)chunk_len(m, count, off);
        for (int root = 0; root < c->size; root++) {
            const char *sb = send + ((size_t)root * count + off) * esz;
            char *rb = recv + off * esz;
            const void *s = root == c->rank && sb == rb ? MPI_IN_PLACE : sb;
            if (r->blocking)
                MPI_TRY(MPI_Reduce(s, rb, n, t, o, root, m->comm));
            else
                MPI_TRY(MPI_Ireduce(s, rb, n, t, o, root, m->comm, next_req(r)));
        }
    }
    return DDP_OK;
}

static int issue_reducescatter(comm *c, comm_req *r, const void *send, void *recv, size_t count, comm_dtype dt, comm_op op, ddp_err *err)
{
    mpi_impl *m = impl_of(c);
    size_t esz = comm_dtype_size(dt);
    if (op == OP_AVG)
        r->avg_buf = recv, r->avg_count = count, r->avg_dt = dt;
    if (blocks_in_chunks(c, m, count))
        return issue_reducescatter_chunked(c, r, send, recv, count, dt, op, err);
    MPI_Datatype t = mpi_type(m, dt);
    MPI_Op o = mpi_op(m, dt, op);
    bool in_place = (char *)recv == (const char *)send + (size_t)c->rank * count * esz;
    /* MPI's in-place form leaves the result at the start of the buffer: move it to recv after */
    const void *sb = in_place ? MPI_IN_PLACE : send;
    void *rb = in_place ? (void *)send : recv;
    if (in_place)
        r->move_dst = recv, r->move_src = send, r->move_bytes = count * esz;
    if (r->blocking)
        MPI_TRY(MPI_Reduce_scatter_block(sb, rb, (int)count, t, o, m->comm));
    else
        MPI_TRY(MPI_Ireduce_scatter_block(sb, rb, (int)count, t, o, m->comm, next_req(r)));
    return DDP_OK;
}

static int mpi_reducescatter(comm *c, const void *send, void *recv, size_t count, comm_dtype dt, comm_op op, comm_req **req, ddp_err *err)
{
    comm_req stack, *r;
    mpi_impl *m = impl_of(c);
    size_t n_mpi = blocks_in_chunks(c, m, count) ? chunks_of(m, count) * (size_t)c->size : 1;
    int rc = req_begin(c, "reduce-scatter", dt, op, true, req, n_mpi, &stack, &r, err);
    if (rc)
        return rc;
    if (count == 0)
        return req_end(c, r, req, DDP_OK, err);
    return req_end(c, r, req, issue_reducescatter(c, r, send, recv, count, dt, op, err), err);
}

static int mpi_alltoall(comm *c, const void *send, void *recv, size_t count, comm_dtype dt, comm_req **req, ddp_err *err)
{
    comm_req stack, *r;
    int rc = req_begin(c, "all-to-all", dt, OP_SUM, false, req, chunks_of(impl_of(c), count), &stack, &r, err);
    if (rc)
        return rc;
    return req_end(c, r, req, issue_block_collective(c, r, true, send, recv, count, dt, err), err);
}

static int issue_sendrecv(comm *c, comm_req *r, const void *send, int to, void *recv, int from, size_t count, comm_dtype dt, ddp_err *err)
{
    mpi_impl *m = impl_of(c);
    size_t esz = comm_dtype_size(dt);
    MPI_Datatype t = mpi_type(m, dt);
    char *rbuf = recv;
    if (send == recv && count) { /* receive aside, then copy over what was sent */
        if (!(r->scratch = malloc(count * esz)))
            return ddp_fail(err, DDP_ERUNTIME, "comm_mpi: out of memory for an in-place sendrecv of %zu bytes", count * esz);
        rbuf = r->scratch;
        r->move_dst = recv, r->move_src = rbuf, r->move_bytes = count * esz;
    }
    const int tag = 0; /* our communicator carries nothing else; same-order issue keeps matches */
    for (size_t off = 0; off < count; off += m->max_chunk) {
        int n = (int)chunk_len(m, count, off);
        const char *sb = (const char *)send + off * esz;
        char *rb = rbuf + off * esz;
        if (r->blocking) {
            MPI_TRY(MPI_Sendrecv(sb, n, t, to, tag, rb, n, t, from, tag, m->comm, MPI_STATUS_IGNORE));
        } else {
            MPI_TRY(MPI_Irecv(rb, n, t, from, tag, m->comm, next_req(r)));
            MPI_TRY(MPI_Isend(sb, n, t, to, tag, m->comm, next_req(r)));
        }
    }
    return DDP_OK;
}

static int mpi_sendrecv(comm *c, const void *send, int to, void *recv, int from, size_t count, comm_dtype dt, comm_req **req, ddp_err *err)
{
    comm_req stack, *r;
    int rc = req_begin(c, "sendrecv", dt, OP_SUM, false, req, 2 * chunks_of(impl_of(c), count), &stack, &r, err);
    if (rc)
        return rc;
    return req_end(c, r, req, issue_sendrecv(c, r, send, to, recv, from, count, dt, err), err);
}

static int mpi_barrier(comm *c, ddp_err *err)
{
    mpi_impl *m = impl_of(c);
    if (!m->watch) {
        MPI_TRY(MPI_Barrier(m->comm));
        return DDP_OK;
    }
    MPI_Request r;
    uint64_t seq = mpi_watch_enter(m->watch);
    MPI_TRY(MPI_Ibarrier(m->comm, &r));
    return mpi_watch_wait(m->watch, c, 1, &r, &(mpi_watched){seq, "barrier", c->label}, err);
}

static int mpi_wait(comm *c, comm_req *r, ddp_err *err)
{
    mpi_impl *m = impl_of(c);
    int rc = DDP_OK;
    if (m->watch)
        rc = mpi_watch_wait(m->watch, c, r->n, r->reqs, &(mpi_watched){r->seq, r->what, r->label}, err);
    else if ((rc = MPI_Waitall(r->n, r->reqs, MPI_STATUSES_IGNORE)) != MPI_SUCCESS)
        rc = mpi_fail(err, rc, "MPI_Waitall", __FILE__, __LINE__);
    if (rc != DDP_OK)
        req_drop(r);
    else
        req_finish(c, r);
    return rc;
}

static int mpi_test(comm *c, comm_req *r, bool *done, ddp_err *err)
{
    (void)c;
    int flag = 0;
    MPI_TRY(MPI_Testall(r->n, r->reqs, &flag, MPI_STATUSES_IGNORE));
    *done = flag != 0;
    return DDP_OK;
}

/* Must run before MPI_Finalize; after it, MPI objects are gone and only memory is freed. */
static void mpi_destroy(comm *c)
{
    if (!c)
        return;
    mpi_impl *m = c->impl;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (m)
        mpi_watch_destroy(m->watch);
    if (m && !finalized) {
        fp16_mpi_ops_free(OP_AVG, &m->two_byte, m->half_op, m->bf16_op);
        if (m->comm != MPI_COMM_NULL)
            MPI_Comm_free(&m->comm);
    }
    free(m);
    free(c);
}

static const struct comm_ops mpi_comm_ops = {
    .name = "mpi",
    .allreduce = mpi_allreduce,
    .broadcast = mpi_broadcast,
    .reduce = mpi_reduce,
    .allgather = mpi_allgather,
    .reducescatter = mpi_reducescatter,
    .alltoall = mpi_alltoall,
    .sendrecv = mpi_sendrecv,
    .barrier = mpi_barrier,
    .wait = mpi_wait,
    .test = mpi_test,
    .destroy = mpi_destroy,
    .abort = mpi_destroy, /* MPI_Comm_free does not wait for pending operations */
};

static int create_ops(mpi_impl *m, ddp_err *err)
{
    static const enum fp16_mpi_op as_fp16[OP_AVG] = {[OP_SUM] = FP16_SUM, [OP_PROD] = FP16_PROD,
                                                     [OP_MIN] = FP16_MIN, [OP_MAX] = FP16_MAX};
    MPI_TRY(fp16_mpi_ops_create(as_fp16, OP_AVG, &m->two_byte, m->half_op, m->bf16_op));
    return DDP_OK;
}

static int fill_identity(comm *c, mpi_impl *m, ddp_err *err)
{
    MPI_TRY(MPI_Comm_dup(MPI_COMM_WORLD, &m->comm));
    MPI_TRY(MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN));
    mpi_identity id;
    MPI_TRY(mpi_identity_of(m->comm, &id));
    c->rank = id.rank, c->size = id.size, c->local_rank = id.local_rank, c->local_size = id.local_size;
    snprintf(c->host, sizeof c->host, "%s", id.host);
    return DDP_OK;
}

int comm_mpi_create(comm **out, ddp_err *err)
{
    *out = NULL;
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized)
        return ddp_fail(err, DDP_ERUNTIME, "comm_mpi_create: MPI is not initialised (call MPI_Init first)");
    comm *c = calloc(1, sizeof *c);
    mpi_impl *m = calloc(1, sizeof *m);
    if (!c || !m) {
        free(c);
        free(m);
        return ddp_fail(err, DDP_ERUNTIME, "comm_mpi_create: out of memory");
    }
    c->ops = &mpi_comm_ops;
    c->impl = m;
    m->comm = MPI_COMM_NULL;
    m->two_byte = MPI_DATATYPE_NULL;
    for (int i = 0; i < OP_AVG; i++)
        m->half_op[i] = m->bf16_op[i] = MPI_OP_NULL;
    int rc = max_chunk_read(&m->max_chunk, err);
    if (!rc)
        rc = fill_identity(c, m, err);
    if (!rc)
        rc = create_ops(m, err);
    if (rc) {
        mpi_destroy(c);
        return ddp_prefix(err, "comm_mpi_create");
    }
    *out = c;
    return DDP_OK;
}

int comm_mpi_set_timeout(comm *c, double timeout_s, ddp_err *err)
{
    if (c->ops != &mpi_comm_ops)
        return ddp_fail(err, DDP_EUSAGE, "comm_mpi_set_timeout: communicator %s is not the MPI one", c->ops->name);
    mpi_impl *m = impl_of(c);
    if (m->watch)
        mpi_watch_set_timeout(m->watch, timeout_s);
    if (m->watch || timeout_s <= 0)
        return DDP_OK;
    return mpi_watch_create(c, m->comm, timeout_s, &m->watch, err);
}

void comm_mpi_busy(comm *c, const char *what)
{
    if (c->ops == &mpi_comm_ops && impl_of(c)->watch)
        mpi_watch_busy(impl_of(c)->watch, c, what);
}
