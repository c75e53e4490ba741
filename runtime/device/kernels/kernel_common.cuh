/* kernel_common.cuh — launch geometry and block reductions shared by the kernel .cu files.
 *
 * Grid sizes are computed in size_t and capped (kernels use grid-stride loops), so no element
 * count overflows an int. Reductions combine values in a fixed tree order that depends only on
 * blockDim, never on timing, so results are bit-for-bit repeatable. Everything here stays inside
 * the subset the CUDA-on-CPU emulator runs (runtime/device/kernels/cuda_kernel.h): static shared memory,
 * __syncthreads reached by every thread of the block, full-mask warp shuffles. Block sizes must
 * be multiples of 32 and at most 1024. This file must not hold kernels or host API calls. */
#ifndef DDP_CUDA_KERNEL_COMMON_CUH
#define DDP_CUDA_KERNEL_COMMON_CUH

#include "cuda_kernel.h"

#include <stddef.h>
#include <stdint.h>

#include "kernels.h"

namespace ddp_kernels {

constexpr unsigned kBlock = 256;        /* threads per block for element-wise kernels */
/* Grid cap; kernels grid-stride past it. On a GPU: about one wave of 256-thread blocks on an H100
 * (132 SMs x 8). Under the emulator every thread is a fiber whose start costs far more than an
 * element, so it runs the same loops with fewer, longer-lived threads (the tests use sizes past
 * both caps, so the strided path is exercised in the emulated build too). */
#ifdef DDP_CUDA_EMULATION
constexpr size_t kMaxGrid = 64;
#else
constexpr size_t kMaxGrid = 1024;
#endif
constexpr unsigned kFullMask = 0xffffffffu;

/* Blocks for n items at `per_block` items per block, at least 1, at most cap. */
static inline unsigned grid_for(size_t n, size_t per_block, size_t cap = kMaxGrid)
{
    size_t blocks = n / per_block + (n % per_block != 0);
    if (blocks < 1) blocks = 1;
    return (unsigned)(blocks < cap ? blocks : cap);
}

/* This thread's global index and the grid-wide stride, in size_t. */
__device__ inline size_t global_index() { return (size_t)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ inline size_t grid_stride() { return (size_t)gridDim.x * blockDim.x; }

__device__ inline double warp_sum(double v)
{
    /* butterfly: every lane ends with the same bits (each step adds the same two values) */
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(kFullMask, v, offset);
    return v;
}

__device__ inline float warp_sum(float v)
{
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(kFullMask, v, offset);
    return v;
}

/* Sum over the block; every thread gets the result. scratch: __shared__ T[33]. */
template <typename T>
__device__ T block_sum(T v, T *scratch)
{
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
    v = warp_sum(v);
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    if (warp == 0) {
        T w = lane < n_warps ? scratch[lane] : T(0);
        w = warp_sum(w);
        if (lane == 0) scratch[32] = w;
    }
    __syncthreads();
    T total = scratch[32];
    __syncthreads(); /* scratch may be reused by the caller's next reduction */
    return total;
}

/* Larger value wins; ties go to the smaller index (PyTorch's argmax returns the first maximum). */
__device__ inline void argmax_merge(float *best, long long *idx, float other, long long other_idx)
{
    if (other > *best || (other == *best && other_idx < *idx)) {
        *best = other;
        *idx = other_idx;
    }
}

/* Max and first argmax over the block; every thread gets both. scratch_v/scratch_i: [33]. */
__device__ inline void block_argmax(float *best, long long *idx, float *scratch_v, long long *scratch_i)
{
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
    for (int offset = 16; offset > 0; offset >>= 1)
        argmax_merge(best, idx, __shfl_xor_sync(kFullMask, *best, offset),
                     __shfl_xor_sync(kFullMask, *idx, offset));
    if (lane == 0) {
        scratch_v[warp] = *best;
        scratch_i[warp] = *idx;
    }
    __syncthreads();
    if (warp == 0) {
        float v = lane < n_warps ? scratch_v[lane] : -INFINITY;
        long long i = lane < n_warps ? scratch_i[lane] : (long long)INT64_MAX;
        for (int offset = 16; offset > 0; offset >>= 1)
            argmax_merge(&v, &i, __shfl_xor_sync(kFullMask, v, offset), __shfl_xor_sync(kFullMask, i, offset));
        if (lane == 0) {
            scratch_v[32] = v;
            scratch_i[32] = i;
        }
    }
    __syncthreads();
    *best = scratch_v[32];
    *idx = scratch_i[32];
    __syncthreads();
}

} // namespace ddp_kernels

#endif
