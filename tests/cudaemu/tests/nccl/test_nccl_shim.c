/* test_nccl_shim.c — the emulated build's NCCL shim (tests/cudaemu/nccl) called directly, under
 * real mpirun: it must reject what real NCCL rejects, with NCCL's result codes, so code that
 * passes here does not fail on a GPU for an argument error.
 * Covers: NULL comm / outputs, bad and unsupported (fp8) types, bad reduction ops, root and peer
 * out of range, NULL and host (not cudaMalloc'd) buffers, a buffer shorter than count, a dead
 * stream, ncclGroupEnd without ncclGroupStart, a failure inside a group reported again by
 * ncclGroupEnd; identity queries, version, the async-error query; that collectives run in stream
 * order (a missing wait reads unwritten memory); destroy runs queued work; two ranks on one GPU
 * refused; and that
 * ncclCommAbort drops queued calls and makes a later call fail instead of hanging. Results of valid calls are compared with MPI by
 * test_nccl_comm; the half and bfloat16 averages here are checked to be NCCL's (a sum of inputs
 * pre-multiplied by 1/ranks rounded to the type), which at 3 ranks is not the mean. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <mpi.h>
#include <nccl.h>
#include <stdint.h>
#include <stdlib.h>

#include "runtime/base/mpi_thread.h"
#include "tests/check.h"
#include "runtime/base/half.h"

#define EXPECT(call, want)                                                                        \
    do {                                                                                          \
        ncclResult_t got_ = (call);                                                               \
        CHECK(got_ == (want), "%s returned %d (%s), expected %d", #call, (int)got_,               \
              ncclGetErrorString(got_), (int)(want));                                             \
    } while (0)

static int g_rank, g_size;

static void bad_arguments(ncclComm_t comm, cudaStream_t s, float *d, float *host)
{
    EXPECT(ncclAllReduce(d, d, 4, ncclFloat, ncclSum, NULL, s), ncclInvalidArgument);
    EXPECT(ncclAllReduce(d, d, 4, ncclNumTypes, ncclSum, comm, s), ncclInvalidArgument);
    EXPECT(ncclAllReduce(d, d, 4, ncclFloat8e4m3, ncclSum, comm, s), ncclInvalidArgument);
    EXPECT(ncclAllReduce(d, d, 4, ncclFloat, ncclNumOps, comm, s), ncclInvalidArgument);
    EXPECT(ncclAllReduce(NULL, d, 4, ncclFloat, ncclSum, comm, s), ncclInvalidArgument);
    EXPECT(ncclAllReduce(host, host, 4, ncclFloat, ncclSum, comm, s), ncclInvalidArgument);
    EXPECT(ncclAllReduce(d, d, 5, ncclFloat, ncclSum, comm, s), ncclInvalidArgument); /* 4 allocated */
    EXPECT(ncclBroadcast(d, d, 4, ncclFloat, g_size, comm, s), ncclInvalidArgument);
    EXPECT(ncclBroadcast(d, d, 4, ncclFloat, -1, comm, s), ncclInvalidArgument);
    EXPECT(ncclReduce(d, d, 4, ncclFloat, ncclSum, g_size, comm, s), ncclInvalidArgument);
    EXPECT(ncclAllGather(d, d, 4, ncclFloat, comm, s), ncclInvalidArgument);  /* needs size*4 */
    EXPECT(ncclReduceScatter(d, d, 4, ncclFloat, ncclSum, comm, s), ncclInvalidArgument);
    EXPECT(ncclSend(d, 4, ncclFloat, g_size, comm, s), ncclInvalidArgument);
    EXPECT(ncclRecv(d, 4, ncclFloat, -1, comm, s), ncclInvalidArgument);
    cudaStream_t dead;
    cudaStreamCreate(&dead);
    cudaStreamDestroy(dead);
    EXPECT(ncclAllReduce(d, d, 4, ncclFloat, ncclSum, comm, dead), ncclUnhandledCudaError);
    CHECK(ncclGetLastError(comm)[0] != '\0', "ncclGetLastError says nothing after a failure");
}

static void groups(ncclComm_t comm, cudaStream_t s, float *d)
{
    EXPECT(ncclGroupEnd(), ncclInvalidUsage);
    /* a bad call inside a group fails, and ncclGroupEnd reports it again */
    EXPECT(ncclGroupStart(), ncclSuccess);
    EXPECT(ncclSend(d, 4, ncclFloat, g_size + 3, comm, s), ncclInvalidArgument);
    EXPECT(ncclGroupEnd(), ncclInvalidArgument);
    /* a ring exchange inside a group completes (a lone blocking send would deadlock) */
    float *r = NULL;
    cudaMalloc((void **)&r, 4 * sizeof *r);
    float h[4] = {(float)g_rank, 1, 2, 3};
    cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice);
    EXPECT(ncclGroupStart(), ncclSuccess);
    EXPECT(ncclSend(d, 4, ncclFloat, (g_rank + 1) % g_size, comm, s), ncclSuccess);
    EXPECT(ncclRecv(r, 4, ncclFloat, (g_rank + g_size - 1) % g_size, comm, s), ncclSuccess);
    EXPECT(ncclGroupEnd(), ncclSuccess);
    cudaStreamSynchronize(s); /* s is non-blocking: cudaMemcpy on the default stream does not wait for it */
    cudaMemcpy(h, r, sizeof h, cudaMemcpyDeviceToHost);
    CHECK(h[0] == (float)((g_rank + g_size - 1) % g_size) && h[3] == 3, "ring exchange got %g %g", h[0], h[3]);
    cudaFree(r);
}

/* A collective runs in its stream's order, when the stream runs: issued after a fill queued on
 * another stream, it reads the fill's result only if its stream waits for that one. */
static void stream_order(ncclComm_t comm, cudaStream_t s)
{
    float *d = NULL, h[4];
    cudaStream_t other;
    cudaEvent_t filled;
    cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking);
    cudaEventCreateWithFlags(&filled, cudaEventDisableTiming);
    cudaMalloc((void **)&d, sizeof h);
    for (int waits = 0; waits < 2; waits++) {
        cudaMemsetAsync(d, 0, sizeof h, other); /* 0.0f */
        cudaEventRecord(filled, other);
        if (waits)
            cudaStreamWaitEvent(s, filled, 0);
        EXPECT(ncclAllReduce(d, d, 4, ncclFloat, ncclSum, comm, s), ncclSuccess);
        cudaStreamSynchronize(s);
        cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost); /* the default stream waits for neither */
        cudaStreamSynchronize(other);
        if (waits)
            CHECK(h[0] == 0.0f && h[3] == 0.0f, "with the wait: sum %g, expected 0", h[0]);
        else
            CHECK(h[0] != h[0], "without the wait the all-reduce read the unwritten (NaN) buffer, got %g", h[0]);
        cudaMemsetAsync(d, 0xff, sizeof h, s); /* back to NaN for the next round */
        cudaStreamSynchronize(s);
    }
    cudaFree(d);
    cudaEventDestroy(filled);
    cudaStreamDestroy(other);
}

/* ncclCommDestroy waits for the communicator's queued work, as NCCL's does. */
static void destroy_waits(cudaStream_t s)
{
    ncclUniqueId id;
    if (g_rank == 0)
        EXPECT(ncclGetUniqueId(&id), ncclSuccess);
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t c = NULL;
    EXPECT(ncclCommInitRank(&c, g_size, id, g_rank), ncclSuccess);
    float h[4] = {(float)g_rank + 1, 1, 1, 1}, *d = NULL;
    cudaMalloc((void **)&d, sizeof h);
    cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice);
    EXPECT(ncclAllReduce(d, d, 4, ncclFloat, ncclSum, c, s), ncclSuccess);
    EXPECT(ncclCommDestroy(c), ncclSuccess); /* the all-reduce has not run yet: destroy runs it */
    cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    CHECK(h[0] == (float)(g_size * (g_size + 1) / 2) && h[1] == (float)g_size,
          "after destroy: %g %g, expected the reduced values", h[0], h[1]);
    cudaFree(d);
}

/* Two ranks on one GPU: NCCL refuses the communicator ("Duplicate GPU detected"). */
static void duplicate_gpu(void)
{
    ncclUniqueId id;
    if (g_rank == 0)
        EXPECT(ncclGetUniqueId(&id), ncclSuccess);
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    cudaSetDevice(0);
    ncclComm_t dup = NULL;
    EXPECT(ncclCommInitRank(&dup, g_size, id, g_rank), ncclInvalidUsage);
    CHECK(dup == NULL, "a refused communicator was returned");
    cudaSetDevice(g_rank);
}

/* One 2-byte float type's conversions, so one check covers half and bfloat16. */
typedef struct two_byte_type {
    const char *name;
    ncclDataType_t dt;
    double u;                          /* unit roundoff */
    uint16_t (*from_float)(float);
    float (*to_float)(uint16_t);
} two_byte_type;

/* ncclAvg of positive rank-dependent values in a 2-byte float type is NCCL's PreMulSum: every
 * rank's input times 1/ranks rounded to the type, then summed. So each result is within the
 * rounding of products and sums ((ranks + 1)·u) of ranks·q·mean, q the rounded 1/ranks, and
 * over N elements the rounding errors average out: the mean of result/mean lands near ranks·q
 * (bfloat16 at 3 ranks: 1.00195), not near 1 as a sum divided afterwards would, unless q is
 * exact (2 ranks). The noise of that mean is about u/sqrt(N), far below half the gap. */
static void average_is_premulsum(ncclComm_t comm, cudaStream_t s, const two_byte_type *t)
{
    enum { N = 4096 };
    uint16_t *h = malloc(N * sizeof *h), *d = NULL;
    CHECK(h && cudaMalloc((void **)&d, N * sizeof *h) == cudaSuccess, "allocating %d elements", N);
    for (int i = 0; i < N; i++)
        h[i] = t->from_float((1.0f + (float)((i * 37 + g_rank * 11) % 997) / 997.0f) * (float)(1 << (i % 5)));
    cudaMemcpy(d, h, N * sizeof *h, cudaMemcpyHostToDevice);
    EXPECT(ncclAllReduce(d, d, N, t->dt, ncclAvg, comm, s), ncclSuccess);
    cudaStreamSynchronize(s);
    cudaMemcpy(h, d, N * sizeof *h, cudaMemcpyDeviceToHost);
    double q = t->to_float(t->from_float((float)(1.0 / g_size))), scale = g_size * q, ratio_sum = 0;
    int bad = 0;
    for (int i = 0; i < N; i++) {
        double mean = 0;
        for (int r = 0; r < g_size; r++)
            mean += t->to_float(t->from_float((1.0f + (float)((i * 37 + r * 11) % 997) / 997.0f) * (float)(1 << (i % 5))));
        mean /= g_size;
        double got = t->to_float(h[i]);
        bad += !(fabs(got - scale * mean) <= (g_size + 1) * t->u * scale * mean * 1.01);
        ratio_sum += got / mean;
    }
    double ratio = ratio_sum / N, gap = fabs(scale - 1);
    CHECK(bad == 0, "%s: %d of %d averages are further from %d·q·mean than rounding allows", t->name, bad, N, g_size);
    CHECK(fabs(ratio - scale) <= (gap > 0 ? gap / 2 : t->u / 4), "%s at %d ranks: results average %.6f times the "
          "mean, expected %.6f (1/ranks rounded to the type, then a sum, as NCCL's ncclAvg)", t->name, g_size,
          ratio, scale);
    cudaFree(d);
    free(h);
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, DDP_MPI_THREAD_LEVEL, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    cudaSetDevice(g_rank); /* one emulated GPU per rank (DDP_CUDA_EMU_DEVICES = ranks) */
    int version = 0;
    EXPECT(ncclGetVersion(&version), ncclSuccess);
    CHECK(version == NCCL_VERSION_CODE, "version %d", version);
    EXPECT(ncclGetUniqueId(NULL), ncclInvalidArgument);
    ncclUniqueId id;
    if (g_rank == 0)
        EXPECT(ncclGetUniqueId(&id), ncclSuccess);
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t comm = NULL;
    EXPECT(ncclCommInitRank(&comm, g_size, id, g_size), ncclInvalidArgument);
    EXPECT(ncclCommInitRank(&comm, g_size, id, g_rank), ncclSuccess);
    int n = -1, me = -1;
    EXPECT(ncclCommCount(comm, &n), ncclSuccess);
    EXPECT(ncclCommUserRank(comm, &me), ncclSuccess);
    CHECK(n == g_size && me == g_rank, "count %d rank %d", n, me);
    ncclResult_t async = ncclInternalError;
    EXPECT(ncclCommGetAsyncError(comm, &async), ncclSuccess);
    CHECK(async == ncclSuccess, "fresh communicator reports async error %d", (int)async);

    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    float *d = NULL, host[8];
    cudaMalloc((void **)&d, 4 * sizeof *d);
    bad_arguments(comm, s, d, host);
    groups(comm, s, d);
    const two_byte_type bf16 = {"bfloat16", ncclBfloat16, 0x1p-8, float_to_bf16, bf16_to_float};
    const two_byte_type half = {"half", ncclFloat16, 0x1p-11, float_to_half, half_to_float};
    average_is_premulsum(comm, s, &bf16);
    average_is_premulsum(comm, s, &half);
    stream_order(comm, s);
    destroy_waits(s);
    duplicate_gpu();

    /* ncclCommAbort drops queued calls: a collective only this rank issued does not hang */
    float *lone = NULL;
    cudaMalloc((void **)&lone, 4 * sizeof *lone);
    if (g_rank == 0) {
        cudaStream_t q;
        cudaStreamCreateWithFlags(&q, cudaStreamNonBlocking);
        EXPECT(ncclAllReduce(lone, lone, 4, ncclFloat, ncclSum, comm, q), ncclSuccess);
        EXPECT(ncclCommAbort(comm), ncclSuccess);
        CHECK(cudaStreamSynchronize(q) == cudaSuccess, "stream of an aborted communicator");
        cudaStreamDestroy(q);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    cudaFree(lone);

    /* after ncclCommAbort, calls fail at once rather than waiting for peers */
    EXPECT(ncclCommAbort(comm), ncclSuccess);
    EXPECT(ncclAllReduce(d, d, 4, ncclFloat, ncclSum, comm, s), ncclInvalidUsage);
    EXPECT(ncclCommDestroy(comm), ncclSuccess);
    cudaFree(d);
    cudaStreamDestroy(s);
    int status = check_done(g_rank == 0 ? "test_nccl_shim" : "test_nccl_shim (other rank)");
    int worst = status;
    MPI_Allreduce(&status, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return worst;
}
