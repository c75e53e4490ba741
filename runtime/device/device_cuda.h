/* device_cuda.h — the CUDA backend's internals that its op families' host launchers
 * (kernels/FAMILY.cu) share with device_cuda.c and device_cuda_lt.c: the check macros for CUDA
 * runtime and cuBLAS calls, the compute stream, per-device scratch memory, and the backend
 * function declarations (backend.h).
 *
 * Included from C (device_cuda.c) and C++ (the .cu files, compiled by nvcc or, for the
 * emulator, by g++). Nothing outside runtime/device/ includes it; it must not hold kernels. */
#ifndef DDP_DEVICE_CUDA_H
#define DDP_DEVICE_CUDA_H

#include <cuda_runtime_api.h>

#include "runtime/device/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Evaluates `call`, a CUDA runtime call, once. When it returns anything but cudaSuccess, sets
 * `err` (a `ddp_err *` in scope) to DDP_ERUNTIME with "FILE:LINE: call: the runtime's error string"
 * and returns DDP_ERUNTIME from the calling function. It does nothing else: no state is marked
 * failed and CUDA's last-error is left as the call left it. */
#define CUDA_TRY(call)                                                                              \
    do {                                                                                            \
        cudaError_t cuda_status_ = (call);                                                          \
        if (cuda_status_ != cudaSuccess)                                                            \
            return ddp_fail(err, DDP_ERUNTIME, "%s:%d: %s: %s", __FILE__, __LINE__, #call,          \
                            cudaGetErrorString(cuda_status_));                                      \
    } while (0)

/* CUDA_TRY for cuBLAS and cuBLASLt calls (both return cublasStatus_t): when `call` returns anything
 * but CUBLAS_STATUS_SUCCESS, sets `err` to DDP_ERUNTIME with "FILE:LINE: call: cuBLAS's status
 * string" and returns DDP_ERUNTIME from the calling function. For files that include cublas_v2.h or
 * cublasLt.h (this header does not). */
#define CUBLAS_TRY(call)                                                                            \
    do {                                                                                            \
        cublasStatus_t cublas_status_ = (call);                                                     \
        if (cublas_status_ != CUBLAS_STATUS_SUCCESS)                                                \
            return ddp_fail(err, DDP_ERUNTIME, "%s:%d: %s: %s", __FILE__, __LINE__, #call,          \
                            cublasGetStatusString(cublas_status_));                                 \
    } while (0)

/* What the kernels' launchers choose by, read once when the device is created (a launcher runs per
 * op, and asking the runtime or the environment there costs every step): the compute capability's
 * major number; DDP_ATTENTION_MMA_SYNC=1, which keeps attention on the mma.sync kernels where
 * Hopper's wgmma ones could run; DDP_ATTENTION_TMA=0, which keeps Hopper's forward on cp.async
 * loads instead of the warp-specialised one fed by the tensor memory accelerator (both: the
 * benchmark's comparisons); and the driver's cuTensorMapEncodeTiled (a CUresult (*)(CUtensorMap *,
 * ...), NULL on GPUs before Hopper or where the driver lacks it), which the TMA kernels' launchers
 * call. */
typedef struct cuda_traits {
    int cc_major;
    bool attention_mma_sync, attention_tma;
    void *encode_tensor_map;
} cuda_traits;
const cuda_traits *device_cuda_traits(const device *d);
/* The device's compute stream, on which every op is enqueued. */
static inline cudaStream_t device_cuda_stream(const device *d) { return (cudaStream_t)d->stream; }

/* Device memory of at least `bytes` for one op's intermediate results, valid until the next
 * call. Ops run in stream order, so one op's use ends before the next op's kernels start; when
 * it grows, the old buffer is freed and the new one allocated in stream order (cudaFreeAsync,
 * cudaMallocAsync on the compute stream: no host wait). */
int device_cuda_scratch(device *d, size_t bytes, void **out, ddp_err *err);

/* A release (a free, a destroy: nothing to return its failure to) of device d that failed with
 * failure (NULL: it did not; d NULL: a device not made, nothing said): the first on a device is
 * logged, later ones would repeat it; CUDA's last-error is consumed, so that the next kernel
 * launch's check does not report it as its own (device_cuda.c). */
void device_cuda_release_failed(device *d, const char *call, const char *failure);

/* cuBLASLt's handle and workspace for the epilogue GEMMs (device_cuda_lt.c), one per device:
 * created with the device (tf32: cuda.tf32), reached through device_cuda_lt(); destroyed with d
 * (NULL where the device was not made), its failures said as d's releases. */
typedef struct cuda_lt cuda_lt;
int device_cuda_lt_create(bool tf32, cuda_lt **out, ddp_err *err);
void device_cuda_lt_destroy(device *d, cuda_lt *lt);
cuda_lt *device_cuda_lt(device *d);

#ifdef __cplusplus
}
#endif

#endif
