/* backend.h — what the device layer's parts see of each other, and nothing outside
 * runtime/device/ includes: every backend function the ops tables name (generated from the op
 * families of device.h, so the CPU backend's `device_cpu_fill` and the CUDA backend's
 * `device_cuda_fill` are declared with exactly the signature of the `fill` field), and the
 * backends' create functions that device.c wraps.
 *
 * A backend function may assume the arguments passed device.c's checks (see device.h); it must
 * not be called from anywhere but a backend's table. C and C++ (the .cu files) both include it. */
#ifndef DDP_DEVICE_BACKEND_H
#define DDP_DEVICE_BACKEND_H

#include "runtime/device/device.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DEVICE_CPU_OP_DECL(name, params) int device_cpu_##name(DEVICE_UNPAREN params, ddp_err *err);
#define DEVICE_CUDA_OP_DECL(name, params) int device_cuda_##name(DEVICE_UNPAREN params, ddp_err *err);
DEVICE_OPS(DEVICE_CPU_OP_DECL)
DEVICE_OPS(DEVICE_CUDA_OP_DECL)

/* The epilogue GEMMs unfused (gemm_epilogue.c): the GEMM, then the element-wise op, through
 * d->backend. The CPU backend's implementation, and the CUDA backend's fallback. */
#define DEVICE_UNFUSED_OP_DECL(name, params) int device_unfused_##name(DEVICE_UNPAREN params, ddp_err *err);
DEVICE_GEMM_EPILOGUE_OPS(DEVICE_UNFUSED_OP_DECL)

/* The stamp slots of device.h's stamp ops: their number, which ones were stamped (set by the
 * backend's stamp), and the backend's own storage for them (CPU: a double of monotonic seconds
 * per slot; CUDA: a timing event per slot). */
struct device_stamps {
    uint32_t capacity;
    bool *stamped;
    void *slots;
};

/* A device with d->backend set to the backend's table; device.c adds the checking table. */
int device_cpu_backend_create(device **out, ddp_err *err);
int device_cuda_backend_create(int local_rank, const device_opts *opts, device **out, ddp_err *err);

#ifdef __cplusplus
}
#endif

#endif
