/* cast.cu — float <-> bfloat16 conversion kernels for bf16 gradient reduction
 * (ddp.grad_dtype: bf16): fp32 gradients are cast to a bf16 shadow before the all-reduce and the
 * reduced bf16 values are cast back (times a scale) into the fp32 gradients.
 * Grid-stride loops over size_t indices; rounding is the hardware's round-to-nearest-even, the
 * CPU backend's (runtime/device/device_cpu.c) too. This file must not hold other kernels. */
#include "kernel_common.cuh"

#include "cast.h"

using ddp_kernels::global_index;
using ddp_kernels::grid_for;
using ddp_kernels::grid_stride;
using ddp_kernels::kBlock;

__global__ void ddp_cast_f32_to_bf16_kernel(const float *src, __nv_bfloat16 *dst, size_t n)
{
    for (size_t i = global_index(); i < n; i += grid_stride()) dst[i] = __float2bfloat16_rn(src[i]);
}

__global__ void ddp_cast_bf16_to_f32_kernel(const __nv_bfloat16 *src, float *dst, size_t n, float scale)
{
    for (size_t i = global_index(); i < n; i += grid_stride()) dst[i] = __bfloat162float(src[i]) * scale;
}

extern "C" cudaError_t ddp_cuda_cast_f32_to_bf16(const float *src, uint16_t *dst, size_t n, cudaStream_t stream)
{
    if (n == 0) return cudaSuccess;
    DDP_LAUNCH(ddp_cast_f32_to_bf16_kernel, grid_for(n, kBlock), kBlock, 0, stream, src,
               reinterpret_cast<__nv_bfloat16 *>(dst), n);
    return DDP_LAUNCH_STATUS();
}

extern "C" cudaError_t ddp_cuda_cast_bf16_to_f32(const uint16_t *src, float *dst, size_t n, float scale,
                                                 cudaStream_t stream)
{
    if (n == 0) return cudaSuccess;
    DDP_LAUNCH(ddp_cast_bf16_to_f32_kernel, grid_for(n, kBlock), kBlock, 0, stream,
               reinterpret_cast<const __nv_bfloat16 *>(src), dst, n, scale);
    return DDP_LAUNCH_STATUS();
}
