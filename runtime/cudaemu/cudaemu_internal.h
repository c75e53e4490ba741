/* cudaemu_internal.h — what the emulator's parts (scheduler, runtime shim, cuBLAS shim) share.
 *
 * Not for kernels or host code outside runtime/cudaemu/: they see the real CUDA headers only.
 * Holds the error state hooks, the registry of emulated device and pinned allocations, and the
 * per-kernel launch attributes. */
#ifndef DDP_CUDAEMU_INTERNAL_H
#define DDP_CUDAEMU_INTERNAL_H

#include <cuda_runtime_api.h>
#include <stddef.h>

namespace ddp_cudaemu {

/* Records err as the last error (cudaGetLastError) and prints "cudaemu: <message>" to stderr.
 * Returns err so callers can `return fail(...)`. */
cudaError_t fail(cudaError_t err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* True when stream is 0, a legacy/per-thread handle, or a live stream from cudaStreamCreate. */
bool stream_is_valid(cudaStream_t stream);

enum alloc_kind { ALLOC_DEVICE, ALLOC_PINNED_HOST };
/* Finds the allocation holding [p, p+bytes): returns true and its kind, or false with the
 * distance past the end in *overrun_bytes (0 when p is in no allocation at all). */
bool alloc_lookup(const void *p, size_t bytes, alloc_kind *kind, size_t *overrun_bytes);

/* Dynamic shared memory limit of a kernel (48 KiB unless raised by cudaFuncSetAttribute). */
size_t kernel_max_dynamic_smem(const void *fn);

/* Every static __shared__ object in the executable: the writable static locals of each function
 * that declares a shared-memory marker (see cudaemu_kernel.h), found once in the symbol table. */
struct memory_range {
    void *addr;
    size_t bytes;
};
const memory_range *static_shared_objects(size_t *count);

enum { MAX_THREADS_PER_BLOCK = 1024, DEFAULT_DYNAMIC_SMEM = 48 * 1024,
       MAX_DYNAMIC_SMEM_OPTIN = 227 * 1024, EMULATED_SM_COUNT = 132 };

} /* namespace ddp_cudaemu */

#endif
