/* cast.cu — the CUDA code of the bfloat16 cast family (CPU: cast_cpu.c), used by
 * ddp.grad_dtype: bf16 (fp32 gradients are cast to a bf16 shadow before the all-reduce and the
 * reduced bf16 values cast back, times a scale, into the fp32 gradients) and by precision: bf16
 * (the stochastically rounded bf16 copy of the fp32 master weights); each op's kernel and its
 * host launcher.
 *
 * Grid-stride loops over size_t indices, four elements per access where both pointers are aligned
 * for it (16 bytes of float, 8 of bf16; kernel_common.cuh's map_packs), else one. Rounding is the
 * hardware's round-to-nearest-even, the CPU code's too, or stochastic through bf16_stochastic.h,
 * the very functions cast_cpu.c calls, whose random bits depend on (seed, step, first + i) alone
 * (the (seed, step) half of the hash computed once per launch): any grid, pack width, fiber order
 * or slicing gives the CPU backend's bits. Arguments arrive checked (device_check_*.c). This file must
 * not hold other kernels. */
#include "kernel_common.cuh"

#include "runtime/device/kernels/bf16_stochastic.h"

using ddp_kernels::all_aligned;
using ddp_kernels::grid_for;
using ddp_kernels::kBlock;
using ddp_kernels::map_packs;

/* Elements per access of the vectorised casts: 16 bytes of float, 8 of bf16. */
constexpr int kCastVec = 4;

template <int W>
__global__ void ddp_cast_f32_to_bf16_kernel(const float *src, __nv_bfloat16 *dst, size_t n)
{
    map_packs<W>(dst, src, n, [](float v, size_t) { return __float2bfloat16_rn(v); });
}

template <int W>
__global__ void ddp_cast_bf16_to_f32_kernel(const __nv_bfloat16 *src, float *dst, size_t n, float scale)
{
    map_packs<W>(dst, src, n, [=](__nv_bfloat16 v, size_t) { return __bfloat162float(v) * scale; });
}

/* Writes the bf16 bits as uint16_t: ddp_bf16_stochastic works on bits, as the CPU code does. */
template <int W>
__global__ void ddp_cast_f32_to_bf16_stochastic_kernel(const float *src, uint16_t *dst, size_t n, uint64_t key,
                                                       uint64_t first)
{
    map_packs<W>(dst, src, n,
                 [=](float v, size_t i) { return ddp_bf16_stochastic(v, ddp_bf16_sr_bits_keyed(key, first + i)); });
}

/* Launches KERNEL<kCastVec> when src and dst are aligned for packs of kCastVec elements, else
 * KERNEL<1>, with the kernel's arguments. Expects d, src, dst, n and err in scope. */
#define DDP_LAUNCH_CAST(kernel, ...)                                                                \
    do {                                                                                            \
        if (all_aligned(kCastVec * sizeof *src, {src}) && all_aligned(kCastVec * sizeof *dst, {dst})) \
            DDP_LAUNCH_OP(kernel<kCastVec>, grid_for(n / kCastVec + 1, kBlock), kBlock, 0, __VA_ARGS__); \
        else                                                                                        \
            DDP_LAUNCH_OP(kernel<1>, grid_for(n, kBlock), kBlock, 0, __VA_ARGS__);                   \
    } while (0)

extern "C" int device_cuda_cast_f32_to_bf16(device *d, const float *src, uint16_t *dst, size_t n, ddp_err *err)
{
    DDP_LAUNCH_CAST(ddp_cast_f32_to_bf16_kernel, src, reinterpret_cast<__nv_bfloat16 *>(dst), n);
    return DDP_OK;
}

extern "C" int device_cuda_cast_bf16_to_f32(device *d, const uint16_t *src, float *dst, size_t n, float scale,
                                            ddp_err *err)
{
    DDP_LAUNCH_CAST(ddp_cast_bf16_to_f32_kernel, reinterpret_cast<const __nv_bfloat16 *>(src), dst, n, scale);
    return DDP_OK;
}

extern "C" int device_cuda_cast_f32_to_bf16_stochastic(device *d, const float *src, uint16_t *dst, size_t n,
                                                       uint64_t seed, uint64_t step, uint64_t first, ddp_err *err)
{
    DDP_LAUNCH_CAST(ddp_cast_f32_to_bf16_stochastic_kernel, src, dst, n, ddp_bf16_sr_key(seed, step), first);
    return DDP_OK;
}
