/* cudaemu.h — the CUDA-on-CPU emulator's own C interface, beyond the CUDA runtime it implements.
 *
 * For the emulated build's NCCL shim and for tests: queueing host work in stream order (like
 * cudaLaunchHostFunc, but allowed to run only on the issuing thread, which MPI needs), waiting
 * for every stream, the count of calls that blocked the host, and the count of cuBLASLt matmuls
 * queued and of tensor-core instructions run. Real-CUDA builds never include it. */
#ifndef DDP_CUDAEMU_H
#define DDP_CUDAEMU_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef void (*cudaemu_host_fn)(void *arg);

/* Queues run(arg) on stream, to run in stream order when something waits for it; with
 * issuer_only set it runs only on the calling thread (a query from another thread reports it
 * not ready). run owns arg. */
cudaError_t cudaemu_enqueue_host_work(cudaStream_t stream, const char *what, cudaemu_host_fn run, void *arg,
                                      int issuer_only);
/* Blocks until every stream of every device has run everything queued so far. */
cudaError_t cudaemu_synchronize_all(void);
/* Calls so far, in this process, that blocked the host until the device caught up: stream, event
 * and device synchronisation, blocking copies, cudaFree. DDP_CUDA_EMU_TRACE_BLOCKING=1 prints
 * each with the function that called it. */
unsigned long long cudaemu_host_blocking_calls(void);
/* cublasLtMatmul calls so far, in this process, that passed every check and were queued on their
 * stream (refused calls are not counted): lets a test prove the fused cuBLASLt path ran, not a
 * fallback. */
uint64_t cudaemu_cublaslt_matmuls(void);
/* Warp-wide mma.sync instructions executed so far, in this process: lets a test prove a kernel took
 * the tensor-core path, not a fallback. */
uint64_t cudaemu_mma_count(void);
/* wgmma.mma_async instructions issued so far, in this process, counted once per warp of the
 * warpgroup (each computes 16 of its 64 rows). */
uint64_t cudaemu_wgmma_count(void);
/* cp.async.bulk.tensor copies (TMA boxes) issued so far, in this process. */
uint64_t cudaemu_tma_count(void);

#ifdef __cplusplus
}
#endif

#endif
