/* bench_trace.c — what ddprun-bench does inside its timed loops, seen from the calls it makes.
 * tests/meson.build links it into ddprun-bench-traced (launcher/bench/bench_main.c, emulated build) with
 * -Wl,--wrap for the calls below. A timed region begins when the harness's MPI_Barrier on
 * MPI_COMM_WORLD returns and ends at its next MPI_Allreduce there (the ranks' times combined);
 * inside, every allocation, copy, free and cross-stream wait is counted, and every stream an NCCL
 * call or event record uses. At MPI_Finalize each rank prints one line for test_bench.py:
 *   # trace rank R: regions N nccl K streams S allocs A copies C frees F waits W
 * (the NCCL shim's own MPI traffic uses its own communicator, so it never opens or closes one).
 * It must not change what any call does. */
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>
#include <stdbool.h>
#include <stdio.h>

static bool in_region;
static int regions, nccl_calls, allocs, copies, frees, waits, n_streams;
static cudaStream_t streams[8];
static bool more_streams;

static void use_stream(cudaStream_t s)
{
    if (!in_region)
        return;
    for (int i = 0; i < n_streams; i++)
        if (streams[i] == s)
            return;
    if (n_streams < 8)
        streams[n_streams++] = s;
    else
        more_streams = true;
}

static void count(int *what)
{
    if (in_region)
        (*what)++;
}

int __real_MPI_Barrier(MPI_Comm comm);
int __wrap_MPI_Barrier(MPI_Comm comm);
int __wrap_MPI_Barrier(MPI_Comm comm)
{
    int rc = __real_MPI_Barrier(comm);
    if (comm == MPI_COMM_WORLD) {
        in_region = true;
        regions++;
    }
    return rc;
}

int __real_MPI_Allreduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm comm);
int __wrap_MPI_Allreduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm comm);
int __wrap_MPI_Allreduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm comm)
{
    if (comm == MPI_COMM_WORLD)
        in_region = false;
    return __real_MPI_Allreduce(s, r, n, t, op, comm);
}

int __real_MPI_Finalize(void);
int __wrap_MPI_Finalize(void);
int __wrap_MPI_Finalize(void)
{
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    fprintf(stderr, "# trace rank %d: regions %d nccl %d streams %d%s allocs %d copies %d frees %d waits %d\n", rank,
            regions, nccl_calls, n_streams, more_streams ? "+" : "", allocs, copies, frees, waits);
    return __real_MPI_Finalize();
}

#define WRAP_CUDA(name, counter, params, args)                                                     \
    cudaError_t __real_##name params;                                                              \
    cudaError_t __wrap_##name params;                                                              \
    cudaError_t __wrap_##name params                                                               \
    {                                                                                              \
        count(&counter);                                                                           \
        return __real_##name args;                                                                 \
    }
WRAP_CUDA(cudaMalloc, allocs, (void **p, size_t n), (p, n))
WRAP_CUDA(cudaMallocHost, allocs, (void **p, size_t n), (p, n))
WRAP_CUDA(cudaFree, frees, (void *p), (p))
WRAP_CUDA(cudaFreeHost, frees, (void *p), (p))
WRAP_CUDA(cudaMemcpy, copies, (void *d, const void *s, size_t n, enum cudaMemcpyKind k), (d, s, n, k))

cudaError_t __real_cudaMallocAsync(void **p, size_t n, cudaStream_t s);
cudaError_t __wrap_cudaMallocAsync(void **p, size_t n, cudaStream_t s);
cudaError_t __wrap_cudaMallocAsync(void **p, size_t n, cudaStream_t s)
{
    count(&allocs);
    use_stream(s);
    return __real_cudaMallocAsync(p, n, s);
}

cudaError_t __real_cudaFreeAsync(void *p, cudaStream_t s);
cudaError_t __wrap_cudaFreeAsync(void *p, cudaStream_t s);
cudaError_t __wrap_cudaFreeAsync(void *p, cudaStream_t s)
{
    count(&frees);
    use_stream(s);
    return __real_cudaFreeAsync(p, s);
}

cudaError_t __real_cudaMemcpyAsync(void *d, const void *src, size_t n, enum cudaMemcpyKind k, cudaStream_t s);
cudaError_t __wrap_cudaMemcpyAsync(void *d, const void *src, size_t n, enum cudaMemcpyKind k, cudaStream_t s);
cudaError_t __wrap_cudaMemcpyAsync(void *d, const void *src, size_t n, enum cudaMemcpyKind k, cudaStream_t s)
{
    count(&copies);
    use_stream(s);
    return __real_cudaMemcpyAsync(d, src, n, k, s);
}

cudaError_t __real_cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags);
cudaError_t __wrap_cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags);
cudaError_t __wrap_cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags)
{
    count(&waits);
    use_stream(s);
    return __real_cudaStreamWaitEvent(s, e, flags);
}

cudaError_t __real_cudaEventRecord(cudaEvent_t e, cudaStream_t s);
cudaError_t __wrap_cudaEventRecord(cudaEvent_t e, cudaStream_t s);
cudaError_t __wrap_cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    use_stream(s);
    return __real_cudaEventRecord(e, s);
}

/* The NCCL calls that move data: each counts, and its stream is noted. */
#define WRAP_NCCL(name, params, args, stream)                                                      \
    ncclResult_t __real_##name params;                                                             \
    ncclResult_t __wrap_##name params;                                                             \
    ncclResult_t __wrap_##name params                                                              \
    {                                                                                              \
        count(&nccl_calls);                                                                        \
        use_stream(stream);                                                                        \
        return __real_##name args;                                                                 \
    }
WRAP_NCCL(ncclAllReduce, (const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c,
                          cudaStream_t st), (s, r, n, t, op, c, st), st)
WRAP_NCCL(ncclBroadcast, (const void *s, void *r, size_t n, ncclDataType_t t, int root, ncclComm_t c, cudaStream_t st),
          (s, r, n, t, root, c, st), st)
WRAP_NCCL(ncclReduce, (const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op, int root, ncclComm_t c,
                       cudaStream_t st), (s, r, n, t, op, root, c, st), st)
WRAP_NCCL(ncclAllGather, (const void *s, void *r, size_t n, ncclDataType_t t, ncclComm_t c, cudaStream_t st),
          (s, r, n, t, c, st), st)
WRAP_NCCL(ncclReduceScatter, (const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c,
                              cudaStream_t st), (s, r, n, t, op, c, st), st)
WRAP_NCCL(ncclSend, (const void *s, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t st),
          (s, n, t, peer, c, st), st)
WRAP_NCCL(ncclRecv, (void *r, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t st),
          (r, n, t, peer, c, st), st)
