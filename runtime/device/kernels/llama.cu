/* llama.cu — the CUDA code of the Llama family (CPU: llama_cpu.c). Not yet written: every op
 * refuses with a clear error until its kernels land. This file must not hold other ops. */
#include "kernel_common.cuh"

static int not_yet(const char *op, ddp_err *err)
{
    return ddp_fail(err, DDP_ERUNTIME, "%s: not yet implemented on the CUDA backend", op);
}

extern "C" int device_cuda_rmsnorm_forward(device *, tensor_dtype, void *, float *, const void *, const void *,
                                           int64_t, int64_t, float, ddp_err *err)
{
    return not_yet("rmsnorm_forward", err);
}

extern "C" int device_cuda_residual_rmsnorm_forward(device *, tensor_dtype, void *, void *, float *, const void *,
                                                    const void *, const void *, int64_t, int64_t, float, ddp_err *err)
{
    return not_yet("residual_rmsnorm_forward", err);
}

extern "C" int device_cuda_rmsnorm_backward(device *, tensor_dtype, void *, float *, const void *, const void *,
                                            const void *, const float *, int64_t, int64_t, ddp_err *err)
{
    return not_yet("rmsnorm_backward", err);
}

extern "C" int device_cuda_rope_forward(device *, tensor_dtype, void *, int64_t, int64_t, int64_t, int64_t, int64_t,
                                        const float *, const float *, ddp_err *err)
{
    return not_yet("rope_forward", err);
}

extern "C" int device_cuda_rope_backward(device *, tensor_dtype, void *, int64_t, int64_t, int64_t, int64_t, int64_t,
                                         const float *, const float *, ddp_err *err)
{
    return not_yet("rope_backward", err);
}

extern "C" int device_cuda_swiglu_forward(device *, tensor_dtype, void *, const void *, int64_t, int64_t, ddp_err *err)
{
    return not_yet("swiglu_forward", err);
}

extern "C" int device_cuda_swiglu_backward(device *, tensor_dtype, void *, const void *, const void *, int64_t,
                                           int64_t, ddp_err *err)
{
    return not_yet("swiglu_backward", err);
}
