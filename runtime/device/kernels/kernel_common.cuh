/* kernel_common.cuh — what every op family's .cu file includes: the backend's internals its host
 * launchers need (device_cuda.h: stream, scratch, CUDA_TRY, the device_cuda_* declarations), the
 * checked launch, the switch from a tensor_dtype to a storage type, the loads and stores of that
 * type, launch geometry and block reductions.
 *
 * Kernels of ops that take a tensor_dtype are templates on their storage type T (float or
 * __nv_bfloat16): they widen every element they read with to_float (exact), compute in float or
 * double exactly as the float kernel always did, and narrow each result once with from_float<T>
 * (round to nearest-even for bf16; nothing at all for float, so float results keep their bits).
 *
 * Grid sizes are computed in size_t and capped (kernels use grid-stride loops), so no element
 * count overflows an int. Reductions combine values in a fixed tree order that depends only on
 * blockDim, never on timing, so results are bit-for-bit repeatable. Everything here stays inside
 * the subset the CUDA-on-CPU emulator runs (cuda_kernel.h): static shared memory, __syncthreads
 * reached by every thread of the block, full-mask warp shuffles. Block sizes must be multiples of
 * 32 and at most 1024. This file must not hold kernels or ops. */
#ifndef DDP_CUDA_KERNEL_COMMON_CUH
#define DDP_CUDA_KERNEL_COMMON_CUH

#include "cuda_kernel.h"

#include <stddef.h>
#include <stdint.h>

#include "runtime/device/device_cuda.h"

/* Launches `kernel` on device d's compute stream from a device_cuda_* op; when the runtime
 * refuses the launch (a bad configuration) the op returns that error, naming the kernel. Faults
 * inside the kernel surface at the next synchronising call. Expects `device *d` and
 * `ddp_err *err` in scope. */
#define DDP_LAUNCH_OP(kernel, grid, block, smem_bytes, ...)                                         \
    do {                                                                                            \
        DDP_LAUNCH(kernel, grid, block, smem_bytes, device_cuda_stream(d), __VA_ARGS__);           \
        cudaError_t launch_status_ = DDP_LAUNCH_STATUS();                                           \
        if (launch_status_ != cudaSuccess)                                                          \
            return ddp_fail(err, DDP_ERUNTIME, "%s:%d: launching %s: %s", __FILE__, __LINE__, #kernel, \
                            cudaGetErrorString(launch_status_));                                    \
    } while (0)

/* Runs the statements after T once, with T the storage type of tensor_dtype t: float or
 * __nv_bfloat16. It is a launcher's one switch on its type; the statements may return (a failed
 * launch). No default: a new tensor_dtype must be handled here (-Wswitch), and device.c lets no
 * other value through. */
#define DDP_DTYPE_SWITCH(t, T, ...)                                                                 \
    switch (t) {                                                                                    \
    case TENSOR_F32: {                                                                              \
        using T = float;                                                                            \
        __VA_ARGS__;                                                                                \
    } break;                                                                                        \
    case TENSOR_BF16: {                                                                             \
        using T = __nv_bfloat16;                                                                    \
        __VA_ARGS__;                                                                                \
    } break;                                                                                        \
    }

namespace ddp_kernels {

/* An element of storage type float or __nv_bfloat16 as float: exact either way. */
__device__ inline float to_float(float x) { return x; }
__device__ inline float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

/* A float result stored as T: itself, or bf16 rounded to nearest-even (the only rounding a bf16
 * output gets beyond the float kernel's own). A result computed in double is converted to float
 * first, as the float kernel stores it, so a bf16 output is exactly bf16(the float output), the
 * CPU backend's reference rounded; that differs from rounding the double directly only when the
 * float lands exactly on a bf16 midpoint, and then by one ulp. */
template <typename T> __device__ inline T from_float(float v);
template <> __device__ inline float from_float<float>(float v) { return v; }
template <> __device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

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
