/* kernel_common.cuh — what every op family's .cu file includes: the backend's internals its host
 * launchers need (device_cuda.h: stream, scratch, CUDA_TRY, the device_cuda_* declarations), the
 * checked launch and the dynamic shared-memory grant before it, the switch from a tensor_dtype to a
 * storage type, the loads and stores of that type (one element, or a 16-byte pack of them), launch
 * geometry, block reductions and the second stage of the deterministic column sums.
 *
 * Kernels of ops that take a tensor_dtype are templates on their storage type T (float or
 * __nv_bfloat16): they widen every element they read with to_float (exact), compute in float or
 * double exactly as the float kernel always did, and narrow each result once with from_float<T>
 * (round to nearest-even for bf16; nothing at all for float, so float results keep their bits).
 *
 * Memory-bound kernels move 16 bytes per access where they can (pack<T, W>: 4 floats or 8 bf16;
 * 128-bit loads and stores on a GPU) and fall back to one element per access where a pointer is
 * not aligned for it: ops get offset pointers (a tensor inside the flat parameter buffer, a
 * ZeRO part), and a misaligned vector access is a fault on a GPU. The host launcher decides
 * (vec_width); under the emulator every pack access checks its alignment, so a launcher that
 * decides wrongly fails there too. The arithmetic per element is the same either way, so the
 * pack width never changes a result.
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

#include <initializer_list>
#include <stddef.h>
#include <stdint.h>
#ifdef DDP_CUDA_EMULATION
#include <stdio.h>
#include <stdlib.h>
#endif

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

/* Lets a kernel have smem bytes of dynamic shared memory (past the default 48 KiB): a launcher's
 * step before a launch that needs more. */
static inline int allow_smem(const void *kernel, size_t smem, ddp_err *err)
{
    CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    return DDP_OK;
}

/* Runs the statements after T once, with T the storage type of tensor_dtype t: float or
 * __nv_bfloat16. It is a launcher's one switch on its type; the statements may return (a failed
 * launch). No default: a new tensor_dtype must be handled here (-Wswitch), and the contracts let no
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

/* `#pragma unroll` for the loop that follows (nvcc); g++ does not know the pragma, and the emulator
 * gains nothing from it. */
#if defined(__CUDACC__) && !defined(DDP_CUDA_EMULATION)
#define DDP_UNROLL _Pragma("unroll")
#else
#define DDP_UNROLL
#endif

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

/* Threads for a block that owns one row of `cols` elements (or packs): the row rounded up to whole
 * warps, at most `cap` (a multiple of 32), so short rows do not leave most of a block idle. */
static inline unsigned row_block(size_t cols, size_t cap = kBlock)
{
    const size_t threads = (cols / 32 + (cols % 32 != 0)) * 32;
    return (unsigned)(threads < 32 ? 32 : threads > cap ? cap : threads);
}

/* Item counts below this are indexed in 32 bits (DDP_INDEX_SWITCH): a GPU divides 32-bit integers in a
 * few instructions and 64-bit ones in dozens, which a memory-bound kernel that splits each item's
 * index into (row, column) would feel. 2^31 leaves a grid-stride step room before it could wrap a
 * uint32_t. The emulated build moves the line down, as it does kMaxGrid, so the tests' sizes take
 * both index types. */
#ifdef DDP_CUDA_EMULATION
constexpr size_t kNarrowIndexLimit = (size_t)1 << 12;
#else
constexpr size_t kNarrowIndexLimit = (size_t)1 << 31;
#endif

/* Runs the statements after I once, with I the index type for n items: uint32_t below
 * kNarrowIndexLimit, else size_t. */
#define DDP_INDEX_SWITCH(n, I, ...)                                                                 \
    do {                                                                                            \
        if ((size_t)(n) < ddp_kernels::kNarrowIndexLimit) {                                         \
            using I = uint32_t;                                                                     \
            __VA_ARGS__;                                                                            \
        } else {                                                                                    \
            using I = size_t;                                                                       \
            __VA_ARGS__;                                                                            \
        }                                                                                           \
    } while (0)

/* This thread's global index and the grid-wide stride, in size_t. */
__device__ inline size_t global_index() { return (size_t)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ inline size_t grid_stride() { return (size_t)gridDim.x * blockDim.x; }

/* ---- 16-byte packs ----------------------------------------------------------------------
 * pack<T, W>: W consecutive elements read or written in one access of sizeof(T)·W bytes, which
 * must be that many bytes aligned. kVec<T> elements make 16 bytes: the widest access a GPU thread
 * makes (ld.global.v4). */
template <typename T, int W> struct alignas(sizeof(T) * W) pack {
    T v[W];
};
template <typename T> constexpr int kVec = (int)(16 / sizeof(T));

/* Whether every pointer is aligned for packs of `bytes` bytes (host side, for launchers). */
static inline bool all_aligned(size_t bytes, std::initializer_list<const void *> ptrs)
{
    for (const void *p : ptrs)
        if ((uintptr_t)p % bytes != 0) return false;
    return true;
}

/* The pack width W for a kernel over rows of `row_elems` elements of T (0 for a flat array):
 * kVec<T> when every pointer and every row start is 16-byte aligned, else 1. */
template <typename T> static inline int vec_width(size_t row_elems, std::initializer_list<const void *> ptrs)
{
    return row_elems % (size_t)kVec<T> == 0 && all_aligned(16, ptrs) ? kVec<T> : 1;
}

#ifdef DDP_CUDA_EMULATION
/* A GPU faults on a misaligned vector access ("misaligned address"); x86 would not, so the
 * emulated build checks every pack access and ends the process as the GPU would end the kernel. */
__device__ inline void check_pack_aligned(const void *p, size_t bytes)
{
    if ((uintptr_t)p % bytes != 0) {
        fprintf(stderr, "misaligned address: a %zu-byte pack access at %p\n", bytes, p);
        abort();
    }
}
#endif

/* Pack k of p (elements k·W .. k·W + W - 1). */
template <int W, typename T> __device__ inline pack<T, W> load_pack(const T *p, size_t k)
{
    const pack<T, W> *q = reinterpret_cast<const pack<T, W> *>(p) + k;
#ifdef DDP_CUDA_EMULATION
    check_pack_aligned(q, sizeof *q);
#endif
    return *q;
}

template <int W, typename T> __device__ inline void store_pack(T *p, size_t k, const pack<T, W> &v)
{
    pack<T, W> *q = reinterpret_cast<pack<T, W> *>(p) + k;
#ifdef DDP_CUDA_EMULATION
    check_pack_aligned(q, sizeof *q);
#endif
    *q = v;
}

/* y[i] = f(x[i], i) for i in [0, n): whole packs of W, grid-striding, then the n % W tail
 * elements one at a time (the first threads of the grid take one each). y may be x itself. */
template <int W, typename TY, typename TX, typename F>
__device__ inline void map_packs(TY *y, const TX *x, size_t n, F f)
{
    const size_t packs = n / W;
    for (size_t k = global_index(); k < packs; k += grid_stride()) {
        const pack<TX, W> a = load_pack<W>(x, k);
        pack<TY, W> r;
DDP_UNROLL
        for (int j = 0; j < W; j++) r.v[j] = f(a.v[j], k * W + j);
        store_pack<W>(y, k, r);
    }
    for (size_t i = packs * W + global_index(); i < n; i += grid_stride()) y[i] = f(x[i], i);
}

/* y[i] = f(a[i], b[i], i), as map_packs above; y may be a or b itself. */
template <int W, typename TY, typename TA, typename TB, typename F>
__device__ inline void map_packs(TY *y, const TA *a, const TB *b, size_t n, F f)
{
    const size_t packs = n / W;
    for (size_t k = global_index(); k < packs; k += grid_stride()) {
        const pack<TA, W> u = load_pack<W>(a, k);
        const pack<TB, W> v = load_pack<W>(b, k);
        pack<TY, W> r;
DDP_UNROLL
        for (int j = 0; j < W; j++) r.v[j] = f(u.v[j], v.v[j], k * W + j);
        store_pack<W>(y, k, r);
    }
    for (size_t i = packs * W + global_index(); i < n; i += grid_stride()) y[i] = f(a[i], b[i], i);
}

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

/* ---- deterministic column sums -------------------------------------------------------------
 * A sum over many rows of each column (a bias or LayerNorm parameter gradient) runs in two
 * stages whose order depends only on the number of rows: stage 1, each op's own kernel, gives
 * one thread to each (chunk of kSumChunkRows consecutive rows, pack of columns) and adds the
 * chunk's rows in order into double partials part[chunk][col]; stage 2, sum_chunk_partials,
 * adds each column's partials. Stage 1 has rows/64 · cols/W threads (GPT-2's 65,536 x 768:
 * 98,304), stage 2 reads one double per chunk and column. */
constexpr size_t kSumChunkRows = 64;
constexpr unsigned kSumLanes = 8; /* stage 2: chunk lanes per column; its block is (32, kSumLanes) */

static inline size_t sum_chunks(size_t rows) { return rows / kSumChunkRows + (rows % kSumChunkRows != 0); }

/* Stage 2, in a block of (32, kSumLanes) threads that grid-strides over tiles of 32 columns:
 * column c's total is, for lanes y = 0, 1, ... kSumLanes - 1 in turn, the sum of chunks y,
 * y + kSumLanes, ... in order; thread (c, 0) then calls finish(c, total). */
template <typename Finish>
__device__ inline void sum_chunk_partials(const double *part, size_t n_chunks, size_t cols, Finish finish)
{
    __shared__ double lane_sums[kSumLanes][32];
    const size_t n_tiles = cols / 32 + (cols % 32 != 0);
    for (size_t tile = blockIdx.x; tile < n_tiles; tile += gridDim.x) {
        const size_t c = tile * 32 + threadIdx.x;
        double acc = 0.0;
        if (c < cols)
            for (size_t chunk = threadIdx.y; chunk < n_chunks; chunk += kSumLanes) acc += part[chunk * cols + c];
        lane_sums[threadIdx.y][threadIdx.x] = acc;
        __syncthreads();
        if (threadIdx.y == 0 && c < cols) {
            double total = 0.0;
            for (unsigned y = 0; y < kSumLanes; y++) total += lane_sums[y][threadIdx.x];
            finish(c, total);
        }
        __syncthreads(); /* lane_sums is rewritten by the next tile */
    }
}

} // namespace ddp_kernels

#endif
