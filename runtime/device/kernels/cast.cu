/* cast.cu — the CUDA code of the bfloat16 cast family (CPU: cast_cpu.c), used by
 * ddp.grad_dtype: bf16 (fp32 gradients are cast to a bf16 shadow before the all-reduce and the
 * reduced bf16 values cast back, times a scale, into the fp32 gradients) and by precision: bf16
 * (the stochastically rounded bf16 copy of the fp32 master weights); each op's kernel and its
 * host launcher.
 *
 * Grid-stride loops over size_t indices. Rounding is the hardware's round-to-nearest-even, the
 * CPU code's too, or stochastic through bf16_stochastic.h, the very functions cast_cpu.c calls,
 * whose random bits depend on (seed, step, first + i) alone: any grid, fiber order or slicing
 * gives the CPU backend's bits. Arguments arrive checked by device.c. This file must not hold
 * other kernels. */
#include "kernel_common.cuh"

#include "runtime/device/kernels/bf16_stochastic.h"

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

/* Writes the bf16 bits as uint16_t: ddp_bf16_stochastic works on bits, as the CPU code does. */
__global__ void ddp_cast_f32_to_bf16_stochastic_kernel(const float *src, uint16_t *dst, size_t n, uint64_t seed,
                                                       uint64_t step, uint64_t first)
{
    for (size_t i = global_index(); i < n; i += grid_stride())
        dst[i] = ddp_bf16_stochastic(src[i], ddp_bf16_sr_bits(seed, step, first + i));
}

extern "C" int device_cuda_cast_f32_to_bf16(device *d, const float *src, uint16_t *dst, size_t n, ddp_err *err)
{
    DDP_LAUNCH_OP(ddp_cast_f32_to_bf16_kernel, grid_for(n, kBlock), kBlock, 0, src,
                  reinterpret_cast<__nv_bfloat16 *>(dst), n);
    return DDP_OK;
}

extern "C" int device_cuda_cast_bf16_to_f32(device *d, const uint16_t *src, float *dst, size_t n, float scale,
                                            ddp_err *err)
{
    DDP_LAUNCH_OP(ddp_cast_bf16_to_f32_kernel, grid_for(n, kBlock), kBlock, 0,
                  reinterpret_cast<const __nv_bfloat16 *>(src), dst, n, scale);
    return DDP_OK;
}

extern "C" int device_cuda_cast_f32_to_bf16_stochastic(device *d, const float *src, uint16_t *dst, size_t n,
                                                       uint64_t seed, uint64_t step, uint64_t first, ddp_err *err)
{
    DDP_LAUNCH_OP(ddp_cast_f32_to_bf16_stochastic_kernel, grid_for(n, kBlock), kBlock, 0, src, dst, n, seed, step,
                  first);
    return DDP_OK;
}
