/* nccl_shim_coll.c — the emulated build's NCCL, part 2: the collectives and point-to-point calls
 * (ncclAllReduce, ncclBroadcast, ncclReduce, ncclAllGather, ncclReduceScatter, ncclSend,
 * ncclRecv). Each is validated and recorded when called (nccl_shim_group.c queues it on its stream),
 * and issued as non-blocking MPI calls when the stream runs it (shim_issue).
 * Every argument is validated first as NCCL does (ncclInvalidArgument naming it). Counts above
 * INT_MAX (or DDP_COMM_MAX_CHUNK) are split into several MPI calls. ncclAvg is what NCCL makes
 * of it: on floating types a PreMulSum (every rank's input times 1/ranks, that factor rounded to the
 * type first, then summed: bfloat16's 1/3 is 0.333984375), on integer types a sum divided by the
 * number of ranks afterwards. It must not keep state beyond the batch. */
#include "nccl_shim_internal.h"

#include <stdint.h>
#include <string.h>

#include "runtime/base/half.h"

#define TRY_MPI(comm, call)                                                  \
    do {                                                                     \
        int mpi_rc_ = (call);                                                \
        if (mpi_rc_ != MPI_SUCCESS)                                          \
            return shim_mpi_fail((comm), mpi_rc_, #call, __LINE__);          \
    } while (0)

/* An MPI request slot of the batch, or return the out-of-memory failure it recorded. */
#define NEXT_REQ(comm, var)                                                  \
    MPI_Request *var = shim_batch_request(comm);                             \
    if (!var)                                                                \
        return ncclSystemError

static size_t chunk_len(const struct ncclComm *c, size_t count, size_t off)
{
    return count - off < c->max_chunk ? count - off : c->max_chunk;
}

/* The end of every entry point: records the call; outside a group it is queued on its stream
 * now, inside one at ncclGroupEnd. */
static ncclResult_t end_call(ncclResult_t rc, const shim_call *call, cudaStream_t stream)
{
    if (rc == ncclSuccess)
        rc = shim_record(call, stream);
    if (shim_in_group())
        return shim_group_note(rc);
    if (rc != ncclSuccess) {
        shim_discard();
        return rc;
    }
    return shim_submit();
}

static ncclResult_t check_common(ncclComm_t comm, ncclDataType_t dt, cudaStream_t stream, const char *fn)
{
    ncclResult_t rc = shim_check_comm(comm, fn);
    if (rc == ncclSuccess)
        rc = shim_check_type(comm, dt, fn);
    if (rc == ncclSuccess)
        rc = shim_check_stream(comm, stream, fn);
    return rc;
}

static ncclResult_t post_average(ncclComm_t comm, void *buf, size_t count, ncclDataType_t dt)
{
    shim_post p = {.kind = POST_DIVIDE, .comm = comm, .dst = buf, .count = count, .dt = dt};
    return shim_batch_post(&p);
}

/* Whether NCCL averages dt by pre-multiplying: every floating type (hostToDevRedOp in NCCL's
 * enqueue.cc); integer types divide the sum instead. */
static bool premultiplied(ncclDataType_t dt, ncclRedOp_t op)
{
    return op == ncclAvg && (dt == ncclFloat16 || dt == ncclBfloat16 || dt == ncclFloat32 || dt == ncclFloat64);
}

/* PreMulSum's first half: count elements of src times 1/ranks into dst, the factor and each
 * product rounded to dt as the GPU's multiply in that type does (a product of two half or
 * bfloat16 values is exact in float, so rounding it once is the typed multiply). */
static void scale_by_ranks(void *dst, const void *src, size_t count, ncclDataType_t dt, int ranks)
{
    float f = (float)(1.0 / ranks);
    if (dt == ncclFloat64) {
        for (size_t i = 0; i < count; i++)
            ((double *)dst)[i] = ((const double *)src)[i] * (1.0 / ranks);
    } else if (dt == ncclFloat32) {
        for (size_t i = 0; i < count; i++)
            ((float *)dst)[i] = ((const float *)src)[i] * f;
    } else if (dt == ncclBfloat16) {
        float s = bf16_to_float(float_to_bf16(f));
        for (size_t i = 0; i < count; i++)
            ((uint16_t *)dst)[i] = float_to_bf16(bf16_to_float(((const uint16_t *)src)[i]) * s);
    } else {
        float s = half_to_float(float_to_half(f));
        for (size_t i = 0; i < count; i++)
            ((uint16_t *)dst)[i] = float_to_half(half_to_float(((const uint16_t *)src)[i]) * s);
    }
}

/* What this rank contributes to a reduction of count elements and how MPI combines it: send as
 * is, or under a pre-multiplied ncclAvg a scaled copy that lives until the batch ends, summed;
 * divide_after: an integer ncclAvg, whose sum the post step divides. */
typedef struct reduction_input {
    const void *buf;
    MPI_Op op;
    bool divide_after;
} reduction_input;

static ncclResult_t reduction_input_of(ncclComm_t comm, const void *send, size_t count, ncclDataType_t dt,
                                       ncclRedOp_t op, reduction_input *in)
{
    *in = (reduction_input){send, shim_mpi_op(comm, dt, op), op == ncclAvg};
    if (!premultiplied(dt, op) || count == 0)
        return ncclSuccess;
    void *scaled = shim_batch_scratch(comm, count * shim_type_size(dt));
    if (!scaled)
        return ncclSystemError;
    scale_by_ranks(scaled, send, count, dt, comm->size);
    *in = (reduction_input){scaled, shim_mpi_op(comm, dt, ncclSum), false};
    return ncclSuccess;
}

/* ---- all-reduce -------------------------------------------------------------------------- */

static ncclResult_t issue_allreduce(const void *send, void *recv, size_t count, ncclDataType_t dt,
                                    ncclRedOp_t op, ncclComm_t comm)
{
    size_t esz = shim_type_size(dt);
    MPI_Datatype t = shim_mpi_type(comm, dt);
    reduction_input in;
    ncclResult_t rc = reduction_input_of(comm, send, count, dt, op, &in);
    for (size_t off = 0; off < count && rc == ncclSuccess; off += comm->max_chunk) {
        int n = (int)chunk_len(comm, count, off);
        const void *sb = in.buf == recv ? MPI_IN_PLACE : (const char *)in.buf + off * esz;
        NEXT_REQ(comm, req);
        TRY_MPI(comm, MPI_Iallreduce(sb, (char *)recv + off * esz, n, t, in.op, comm->mpi, req));
    }
    return rc == ncclSuccess && in.divide_after ? post_average(comm, recv, count, dt) : rc;
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    static const char fn[] = "ncclAllReduce";
    ncclResult_t rc = check_common(comm, datatype, stream, fn);
    if (rc == ncclSuccess)
        rc = shim_check_op(comm, op, fn);
    if (rc == ncclSuccess)
        rc = shim_check_buffer(comm, sendbuff, count, datatype, "sendbuff", fn);
    if (rc == ncclSuccess)
        rc = shim_check_buffer(comm, recvbuff, count, datatype, "recvbuff", fn);
    shim_call call = {CALL_ALLREDUCE, comm, sendbuff, recvbuff, count, datatype, op, -1};
    return end_call(rc, &call, stream);
}

/* ---- broadcast and reduce ------------------------------------------------------------------ */

static ncclResult_t issue_broadcast(const void *send, void *buf, size_t count, ncclDataType_t dt, int root,
                                    ncclComm_t comm)
{
    size_t esz = shim_type_size(dt);
    MPI_Datatype t = shim_mpi_type(comm, dt);
    if (comm->rank == root && send != buf && count)
        memmove(buf, send, count * esz); /* the root's own copy */
    for (size_t off = 0; off < count; off += comm->max_chunk) {
        NEXT_REQ(comm, req);
        TRY_MPI(comm, MPI_Ibcast((char *)buf + off * esz, (int)chunk_len(comm, count, off), t, root,
                                 comm->mpi, req));
    }
    return ncclSuccess;
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                           int root, ncclComm_t comm, cudaStream_t stream)
{
    static const char fn[] = "ncclBroadcast";
    ncclResult_t rc = check_common(comm, datatype, stream, fn);
    if (rc == ncclSuccess)
        rc = shim_check_rank(comm, root, "root", fn);
    if (rc == ncclSuccess && comm->rank == root)
        rc = shim_check_buffer(comm, sendbuff, count, datatype, "sendbuff", fn);
    if (rc == ncclSuccess)
        rc = shim_check_buffer(comm, recvbuff, count, datatype, "recvbuff", fn);
    shim_call call = {CALL_BROADCAST, comm, sendbuff, recvbuff, count, datatype, ncclSum, root};
    return end_call(rc, &call, stream);
}

static ncclResult_t issue_reduce(const void *send, void *recv, size_t count, ncclDataType_t dt,
                                 ncclRedOp_t op, int root, ncclComm_t comm)
{
    size_t esz = shim_type_size(dt);
    MPI_Datatype t = shim_mpi_type(comm, dt);
    reduction_input in;
    ncclResult_t rc = reduction_input_of(comm, send, count, dt, op, &in);
    bool in_place = comm->rank == root && in.buf == recv;
    for (size_t off = 0; off < count && rc == ncclSuccess; off += comm->max_chunk) {
        int n = (int)chunk_len(comm, count, off);
        const void *sb = in_place ? MPI_IN_PLACE : (const char *)in.buf + off * esz;
        char *rb = comm->rank == root ? (char *)recv + off * esz : NULL;
        NEXT_REQ(comm, req);
        TRY_MPI(comm, MPI_Ireduce(sb, rb, n, t, in.op, root, comm->mpi, req));
    }
    return rc == ncclSuccess && in.divide_after && comm->rank == root ? post_average(comm, recv, count, dt) : rc;
}

ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream)
{
    static const char fn[] = "ncclReduce";
    ncclResult_t rc = check_common(comm, datatype, stream, fn);
    if (rc == ncclSuccess)
        rc = shim_check_op(comm, op, fn);
    if (rc == ncclSuccess)
        rc = shim_check_rank(comm, root, "root", fn);
    if (rc == ncclSuccess)
        rc = shim_check_buffer(comm, sendbuff, count, datatype, "sendbuff", fn);
    if (rc == ncclSuccess && comm->rank == root)
        rc = shim_check_buffer(comm, recvbuff, count, datatype, "recvbuff", fn);
    shim_call call = {CALL_REDUCE, comm, sendbuff, recvbuff, count, datatype, op, root};
    return end_call(rc, &call, stream);
}

/* ---- all-gather and reduce-scatter ----------------------------------------------------------- */

/* count elements from every rank into recv[rank * count]; in place when send is our own block. */
static ncclResult_t issue_allgather(const void *send, void *recv, size_t count, ncclDataType_t dt, ncclComm_t comm)
{
    size_t esz = shim_type_size(dt);
    MPI_Datatype t = shim_mpi_type(comm, dt);
    char *own = (char *)recv + (size_t)comm->rank * count * esz;
    bool in_place = (const char *)send == own;
    if (count <= comm->max_chunk / (size_t)comm->size) { /* all blocks within one call's limit (comm_mpi.c) */
        NEXT_REQ(comm, req);
        TRY_MPI(comm, MPI_Iallgather(in_place ? MPI_IN_PLACE : send, (int)count, t, recv, (int)count, t,
                                     comm->mpi, req));
        return ncclSuccess;
    }
    /* Larger than one MPI call: every rank broadcasts its own block, chunk by chunk. */
    if (!in_place)
        memmove(own, send, count * esz);
    for (int r = 0; r < comm->size; r++) {
        char *block = (char *)recv + (size_t)r * count * esz;
        for (size_t off = 0; off < count; off += comm->max_chunk) {
            NEXT_REQ(comm, req);
            TRY_MPI(comm, MPI_Ibcast(block + off * esz, (int)chunk_len(comm, count, off), t, r, comm->mpi, req));
        }
    }
    return ncclSuccess;
}

static ncclResult_t check_total(ncclComm_t comm, size_t count, size_t *total, const char *fn)
{
    if (count > SIZE_MAX / (size_t)comm->size)
        return shim_fail(comm, ncclInvalidArgument, "%s: count %zu x %d ranks overflows", fn, count, comm->size);
    *total = count * (size_t)comm->size;
    return ncclSuccess;
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream)
{
    static const char fn[] = "ncclAllGather";
    size_t total = 0;
    ncclResult_t rc = check_common(comm, datatype, stream, fn);
    if (rc == ncclSuccess)
        rc = check_total(comm, sendcount, &total, fn);
    if (rc == ncclSuccess)
        rc = shim_check_buffer(comm, sendbuff, sendcount, datatype, "sendbuff", fn);
    if (rc == ncclSuccess)
        rc = shim_check_buffer(comm, recvbuff, total, datatype, "recvbuff", fn);
    shim_call call = {CALL_ALLGATHER, comm, sendbuff, recvbuff, sendcount, datatype, ncclSum, -1};
    return end_call(rc, &call, stream);
}

/* Block r of send, reduced over ranks, lands in rank r's recv: one reduce per (rank, chunk),
 * which also covers the in-place layout (recv == send + rank * count). */
static ncclResult_t issue_reducescatter(const void *send, void *recv, size_t count, ncclDataType_t dt,
                                        ncclRedOp_t op, ncclComm_t comm)
{
    size_t esz = shim_type_size(dt);
    MPI_Datatype t = shim_mpi_type(comm, dt);
    reduction_input in;
    ncclResult_t rc = reduction_input_of(comm, send, count * (size_t)comm->size, dt, op, &in);
    for (int r = 0; r < comm->size && rc == ncclSuccess; r++) {
        const char *block = (const char *)in.buf + (size_t)r * count * esz;
        for (size_t off = 0; off < count; off += comm->max_chunk) {
            const void *sb = block + off * esz;
            char *rb = r == comm->rank ? (char *)recv + off * esz : NULL;
            NEXT_REQ(comm, req);
            TRY_MPI(comm, MPI_Ireduce(sb == rb ? MPI_IN_PLACE : sb, rb, (int)chunk_len(comm, count, off), t, in.op,
                                      r, comm->mpi, req));
        }
    }
    return rc == ncclSuccess && in.divide_after ? post_average(comm, recv, count, dt) : rc;
}

ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    static const char fn[] = "ncclReduceScatter";
    size_t total = 0;
    ncclResult_t rc = check_common(comm, datatype, stream, fn);
    if (rc == ncclSuccess)
        rc = shim_check_op(comm, op, fn);
    if (rc == ncclSuccess)
        rc = check_total(comm, recvcount, &total, fn);
    if (rc == ncclSuccess)
        rc = shim_check_buffer(comm, sendbuff, total, datatype, "sendbuff", fn);
    if (rc == ncclSuccess)
        rc = shim_check_buffer(comm, recvbuff, recvcount, datatype, "recvbuff", fn);
    shim_call call = {CALL_REDUCESCATTER, comm, sendbuff, recvbuff, recvcount, datatype, op, -1};
    return end_call(rc, &call, stream);
}

/* ---- point to point ------------------------------------------------------------------------- */

/* NCCL matches sends and receives between two ranks in issue order; so does MPI on one tag. */
enum { P2P_TAG = 0 };

static ncclResult_t issue_p2p(const shim_call *c)
{
    size_t esz = shim_type_size(c->dt);
    MPI_Datatype t = shim_mpi_type(c->comm, c->dt);
    for (size_t off = 0; off < c->count; off += c->comm->max_chunk) {
        NEXT_REQ(c->comm, req);
        int n = (int)chunk_len(c->comm, c->count, off);
        if (c->kind == CALL_SEND)
            TRY_MPI(c->comm, MPI_Isend((const char *)c->send + off * esz, n, t, c->root, P2P_TAG, c->comm->mpi, req));
        else
            TRY_MPI(c->comm, MPI_Irecv((char *)c->recv + off * esz, n, t, c->root, P2P_TAG, c->comm->mpi, req));
    }
    return ncclSuccess;
}

ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream)
{
    static const char fn[] = "ncclSend";
    ncclResult_t rc = check_common(comm, datatype, stream, fn);
    if (rc == ncclSuccess)
        rc = shim_check_rank(comm, peer, "peer", fn);
    if (rc == ncclSuccess)
        rc = shim_check_buffer(comm, sendbuff, count, datatype, "sendbuff", fn);
    shim_call call = {CALL_SEND, comm, sendbuff, NULL, count, datatype, ncclSum, peer};
    return end_call(rc, &call, stream);
}

ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream)
{
    static const char fn[] = "ncclRecv";
    ncclResult_t rc = check_common(comm, datatype, stream, fn);
    if (rc == ncclSuccess)
        rc = shim_check_rank(comm, peer, "peer", fn);
    if (rc == ncclSuccess)
        rc = shim_check_buffer(comm, recvbuff, count, datatype, "recvbuff", fn);
    shim_call call = {CALL_RECV, comm, NULL, recvbuff, count, datatype, ncclSum, peer};
    return end_call(rc, &call, stream);
}

/* ---- running a recorded call ------------------------------------------------------------------ */

ncclResult_t shim_issue(const shim_call *c)
{
    switch (c->kind) {
    case CALL_ALLREDUCE: return issue_allreduce(c->send, c->recv, c->count, c->dt, c->op, c->comm);
    case CALL_BROADCAST: return issue_broadcast(c->send, c->recv, c->count, c->dt, c->root, c->comm);
    case CALL_REDUCE: return issue_reduce(c->send, c->recv, c->count, c->dt, c->op, c->root, c->comm);
    case CALL_ALLGATHER: return issue_allgather(c->send, c->recv, c->count, c->dt, c->comm);
    case CALL_REDUCESCATTER:
        return c->count ? issue_reducescatter(c->send, c->recv, c->count, c->dt, c->op, c->comm) : ncclSuccess;
    case CALL_SEND: case CALL_RECV: return issue_p2p(c);
    }
    return ncclInternalError;
}
