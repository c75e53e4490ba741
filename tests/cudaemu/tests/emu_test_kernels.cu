/* emu_test_kernels.cu — small CUDA kernels that exercise the emulator (tests only).
 *
 * Written as ordinary CUDA through runtime/device/kernels/cuda_kernel.h, so the same file builds
 * with nvcc. Each kernel has an extern "C" entry point that launches it and returns the launch
 * status, so the C test driver (test_cudaemu_kernels.c) needs no C++. Some kernels are wrong on
 * purpose (named *_racy, *_after_exit, *_divergent, ...): they prove the emulator catches the bug. */
#include "runtime/device/kernels/cuda_kernel.h"
#include "runtime/device/kernels/tensor_core.cuh"

/* ---- block reduction through static shared memory (template: the symbol-table path) ---- */
template <int BLOCK> __global__ void block_sum(const float *x, float *partial, int n)
{
    __shared__ float s[BLOCK];
    int i = blockIdx.x * BLOCK + threadIdx.x;
    s[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (int stride = BLOCK / 2; stride > 0; stride >>= 1) {
        if ((int)threadIdx.x < stride)
            s[threadIdx.x] += s[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        partial[blockIdx.x] = s[0];
}

/* The same reduction with the barrier after the loads removed: a data race. Non-template, so its
 * shared array sits in the poisoned section. */
__global__ void block_sum_racy(const float *x, float *partial, int n)
{
    __shared__ float s[256];
    int i = blockIdx.x * 256 + threadIdx.x;
    s[threadIdx.x] = i < n ? x[i] : 0.0f;
    for (int stride = 128; stride > 0; stride >>= 1) {
        if ((int)threadIdx.x < stride)
            s[threadIdx.x] += s[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        partial[blockIdx.x] = s[0];
}

extern "C" int emu_block_sum(const float *x, float *partial, int n)
{
    DDP_LAUNCH(block_sum<256>, (n + 255) / 256, 256, 0, 0, x, partial, n);
    return (int)DDP_LAUNCH_STATUS();
}

extern "C" int emu_block_sum_racy(const float *x, float *partial, int n)
{
    DDP_LAUNCH(block_sum_racy, (n + 255) / 256, 256, 0, 0, x, partial, n);
    return (int)DDP_LAUNCH_STATUS();
}

/* ---- shared memory nobody wrote reads as NaN, in every block ---- */
template <int BLOCK> __global__ void read_unwritten_tmpl(float *out)
{
    __shared__ float s[BLOCK];
    if (blockIdx.x == 0)
        s[threadIdx.x] = 1.0f;
    __syncthreads();
    out[blockIdx.x * BLOCK + threadIdx.x] = s[threadIdx.x];
}

__global__ void read_unwritten_plain(float *out)
{
    __shared__ float s[64];
    if (blockIdx.x == 0)
        s[threadIdx.x] = 1.0f;
    __syncthreads();
    out[blockIdx.x * 64 + threadIdx.x] = s[threadIdx.x];
}

__global__ void read_unwritten_dynamic(float *out)
{
    DDP_DYNAMIC_SHARED(float, s);
    if (blockIdx.x == 0)
        s[threadIdx.x] = 1.0f;
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = s[threadIdx.x];
}

/* shared memory declared in an inline device function (a comdat static, unlike the ones above) */
__device__ __forceinline__ float helper_read_unwritten()
{
    __shared__ float s[64];
    if (blockIdx.x == 0)
        s[threadIdx.x] = 1.0f;
    __syncthreads();
    return s[threadIdx.x];
}

__global__ void read_unwritten_helper(float *out)
{
    out[blockIdx.x * 64 + threadIdx.x] = helper_read_unwritten();
}

/* which: 0 template static, 1 plain static, 2 dynamic, 3 in a device function; out holds 2 blocks
 * of 64 */
extern "C" int emu_read_unwritten(int which, float *out)
{
    if (which == 3)
        DDP_LAUNCH(read_unwritten_helper, 2, 64, 0, 0, out);
    else if (which == 0)
        DDP_LAUNCH(read_unwritten_tmpl<64>, 2, 64, 0, 0, out);
    else if (which == 1)
        DDP_LAUNCH(read_unwritten_plain, 2, 64, 0, 0, out);
    else
        DDP_LAUNCH(read_unwritten_dynamic, 2, 64, 64 * sizeof(float), 0, out);
    return (int)DDP_LAUNCH_STATUS();
}

/* ---- warp intrinsics ---- */
__device__ float warp_sum(float v)
{
    for (int offset = 16; offset > 0; offset >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, offset);
    return v;
}

/* Block sum over any multiple-of-32 block size: warp shuffles, then one warp over the warp sums. */
__global__ void warp_block_sum(const float *x, float *partial, int n)
{
    __shared__ float warp_sums[32];
    int i = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    float v = warp_sum(i < n ? x[i] : 0.0f);
    if (lane == 0)
        warp_sums[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < (int)(blockDim.x / 32) ? warp_sums[lane] : 0.0f;
        for (int m = 16; m > 0; m >>= 1)
            v += __shfl_xor_sync(0xffffffffu, v, m);
        if (lane == 0)
            partial[blockIdx.x] = v;
    }
}

extern "C" int emu_warp_block_sum(const float *x, float *partial, int n, int block)
{
    DDP_LAUNCH(warp_block_sum, (n + block - 1) / block, block, 0, 0, x, partial, n);
    return (int)DDP_LAUNCH_STATUS();
}

/* Per lane (one warp): out[0..31] inclusive prefix sum by __shfl_up_sync, out[32..63] lane 7's
 * value by __shfl_sync, out[64] ballot of odd values, out[65] any(v > 30), out[66] all(v > 0),
 * out[67] __syncthreads_count(v odd), out[68..] 16-wide segment sums by __shfl_xor_sync. */
__global__ void warp_intrinsics(const int *in, int *out)
{
    int lane = threadIdx.x, v = in[lane], scan = v;
    for (int d = 1; d < 32; d <<= 1) {
        int up = __shfl_up_sync(0xffffffffu, scan, d);
        if (lane >= d)
            scan += up;
    }
    out[lane] = scan;
    out[32 + lane] = __shfl_sync(0xffffffffu, v, 7);
    unsigned odd = __ballot_sync(0xffffffffu, v & 1);
    int any = __any_sync(0xffffffffu, v > 30), all = __all_sync(0xffffffffu, v > 0);
    int count = __syncthreads_count(v & 1);
    int seg = v;
    for (int m = 8; m > 0; m >>= 1)
        seg += __shfl_xor_sync(0xffffffffu, seg, m, 16);
    __syncwarp();
    if (lane == 0) {
        out[64] = (int)odd;
        out[65] = any;
        out[66] = all;
        out[67] = count;
    }
    out[68 + lane] = seg;
}

extern "C" int emu_warp_intrinsics(const int *in, int *out)
{
    DDP_LAUNCH(warp_intrinsics, 1, 32, 0, 0, in, out);
    return (int)DDP_LAUNCH_STATUS();
}

/* ---- geometry: every thread writes its coordinates, multi-dimensional grid and block ---- */
__global__ void coordinates(int *out)
{
    int bx = blockIdx.x, by = blockIdx.y, bz = blockIdx.z;
    int block_linear = (bz * gridDim.y + by) * gridDim.x + bx;
    int thread_linear = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
    int threads = blockDim.x * blockDim.y * blockDim.z;
    int code = ((((bx * 8 + by) * 8 + bz) * 64 + (int)threadIdx.x) * 64 + (int)threadIdx.y) * 64 + (int)threadIdx.z;
    out[block_linear * threads + thread_linear] = code;
}

extern "C" int emu_coordinates(int *out, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                               unsigned bz)
{
    DDP_LAUNCH(coordinates, dim3(gx, gy, gz), dim3(bx, by, bz), 0, 0, out);
    return (int)DDP_LAUNCH_STATUS();
}

__global__ void dynamic_fill(float *out)
{
    DDP_DYNAMIC_SHARED(float, s);
    s[threadIdx.x] = (float)threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = s[blockDim.x - 1 - threadIdx.x];
}

extern "C" int emu_dynamic_fill(float *out, int threads, size_t smem_bytes, cudaStream_t stream)
{
    DDP_LAUNCH(dynamic_fill, 1, threads, smem_bytes, stream, out);
    return (int)DDP_LAUNCH_STATUS();
}

extern "C" int emu_dynamic_fill_set_limit(int bytes)
{
    return (int)cudaFuncSetAttribute(reinterpret_cast<const void *>(&dynamic_fill),
                                     cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
}

/* ---- bugs the emulator must report (each aborts the process: run in a child) ---- */
__global__ void shfl_after_exit(float *out)
{
    if (threadIdx.x == 5)
        return;
    out[threadIdx.x] = __shfl_down_sync(0xffffffffu, 1.0f, 1);
}

__global__ void shfl_partial_warp(float *out)
{
    out[threadIdx.x] = __shfl_down_sync(0xffffffffu, 1.0f, 1);
}

__global__ void barrier_after_exit(float *out)
{
    if (threadIdx.x == 3)
        return;
    __syncthreads();
    out[threadIdx.x] = 1.0f;
}

__global__ void barrier_divergent(float *out)
{
    if (threadIdx.x < 16)
        __syncthreads();
    else
        __syncthreads();
    out[threadIdx.x] = 1.0f;
}

__global__ void stack_overflow(float *out)
{
    volatile char big[256 * 1024];
    for (int i = (int)sizeof big - 1; i >= 0; i -= 1024)
        big[i] = (char)i;
    out[threadIdx.x] = big[threadIdx.x];
}

/* 16-byte vectors read 8 bytes past a 16-byte boundary: an x86 CPU reads them, a GPU faults. */
__global__ void misaligned_uint4(float *out)
{
    reinterpret_cast<uint4 *>(out)[threadIdx.x] = reinterpret_cast<const uint4 *>(out + 2)[threadIdx.x + 4];
}

/* Every block adds its count into out[0]: right when blocks run one after another, a lost update
 * when they run at once. */
__global__ void blocks_add_up(float *out)
{
    if (threadIdx.x == 0)
        out[0] += 1.0f;
}

/* Block b reads what block b - 1 wrote: right in the emulator's order, not in a GPU's. */
__global__ void block_reads_previous(float *out)
{
    if (threadIdx.x == 0)
        out[blockIdx.x + 1] = blockIdx.x > 0 ? out[blockIdx.x] + 1.0f : 1.0f;
}

/* Every block reads out[0] and the last one rescales it: right when the last block runs last, not
 * when it runs before another reader. */
__global__ void last_block_rescales(float *out)
{
    if (threadIdx.x == 0) {
        const float v = out[0];
        out[blockIdx.x + 1] = v;
        if (blockIdx.x == gridDim.x - 1)
            out[0] = 2.0f * v;
    }
}

/* Block b copies into shared memory, by cp.async, the 16 bytes block b - 1 wrote. */
__global__ void block_copies_previous(float *out)
{
    using namespace ddp_kernels;
    __shared__ __align__(16) float tile[4];
    if (threadIdx.x == 0) {
        if (blockIdx.x > 0) {
            cp_async_16(tile, out + 4 * blockIdx.x, 16);
            cp_async_commit();
            cp_async_wait<0>();
        }
        for (int i = 0; i < 4; i++)
            out[4 * blockIdx.x + 4 + i] = blockIdx.x > 0 ? tile[i] + 1.0f : 1.0f;
    }
}

/* Block b reads its input, then what block b - 1 wrote: the race is in the second allocation the
 * grid touches, which the report must name (not the input, found first). */
__global__ void block_reads_previous_past_input(const float *in, float *out)
{
    if (threadIdx.x == 0) {
        const float x = in[blockIdx.x];
        out[blockIdx.x + 1] = blockIdx.x > 0 ? out[blockIdx.x] + x : x;
    }
}

/* which: 0 exited lane in a shuffle mask, 1 mask naming lanes past a 40-thread block,
 * 2 thread exits before a barrier, 3 divergent barriers, 4 stack overflow, 5 a misaligned read,
 * 6 blocks adding into one element, 7 a block reading another's output, 8 a block writing what
 * earlier blocks read, 9 a block's cp.async reading another's output, 10 as 7 after reading `in` */
extern "C" int emu_broken_kernel(int which, const float *in, float *out)
{
    switch (which) {
    case 10: DDP_LAUNCH(block_reads_previous_past_input, 4, 32, 0, 0, in, out); break;
    case 6: DDP_LAUNCH(blocks_add_up, 4, 32, 0, 0, out); break;
    case 7: DDP_LAUNCH(block_reads_previous, 4, 32, 0, 0, out); break;
    case 8: DDP_LAUNCH(last_block_rescales, 4, 32, 0, 0, out); break;
    case 9: DDP_LAUNCH(block_copies_previous, 4, 32, 0, 0, out); break;
    case 5: DDP_LAUNCH(misaligned_uint4, 1, 4, 0, 0, out); break;
    case 0: DDP_LAUNCH(shfl_after_exit, 1, 32, 0, 0, out); break;
    case 1: DDP_LAUNCH(shfl_partial_warp, 1, 40, 0, 0, out); break;
    case 2: DDP_LAUNCH(barrier_after_exit, 1, 64, 0, 0, out); break;
    case 3: DDP_LAUNCH(barrier_divergent, 1, 64, 0, 0, out); break;
    default: DDP_LAUNCH(stack_overflow, 1, 4, 0, 0, out); break;
    }
    return (int)DDP_LAUNCH_STATUS();
}

/* ---- a trivial element-wise kernel for the timing benchmark ---- */
__global__ void scale_add(const float *x, float *y, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * x[i] + y[i];
}

extern "C" int emu_scale_add(const float *x, float *y, float a, int n)
{
    DDP_LAUNCH(scale_add, (n + 255) / 256, 256, 0, 0, x, y, a, n);
    return (int)DDP_LAUNCH_STATUS();
}

extern "C" int emu_barrier_loop(float *out, int threads, int iterations);
__global__ void barrier_loop(float *out, int iterations)
{
    float v = 0.0f;
    for (int i = 0; i < iterations; i++) {
        v += 1.0f;
        __syncthreads();
    }
    out[threadIdx.x] = v;
}

extern "C" int emu_barrier_loop(float *out, int threads, int iterations)
{
    DDP_LAUNCH(barrier_loop, 1, threads, 0, 0, out, iterations);
    return (int)DDP_LAUNCH_STATUS();
}

/* ---- memory checking: one thread writes one element, wherever it is told ---- */
__global__ void write_at(float *out, long long index, float value)
{
    out[index] = value;
}

extern "C" int emu_write_at(float *out, long long index, float value, cudaStream_t stream)
{
    DDP_LAUNCH(write_at, 1, 1, 0, stream, out, index, value);
    return (int)DDP_LAUNCH_STATUS();
}

/* One 16-byte load of in[index] (a float4: aligned to 16) into out[0]. */
__global__ void read_float4_at(const float4 *in, long long index, float4 *out)
{
    *out = in[index];
}

extern "C" int emu_read_float4_at(const float *in, long long index, float *out, cudaStream_t stream)
{
    DDP_LAUNCH(read_float4_at, 1, 1, 0, stream, (const float4 *)in, index, (float4 *)out);
    return (int)DDP_LAUNCH_STATUS();
}

/* One thread fills two static shared arrays, then writes a[index] (write) or copies it to out[0]:
 * an index past a's 32 floats reaches the guard the emulator keeps after each such array. */
__global__ void shared_at(float *out, int index, int write)
{
    __shared__ float a[32];
    __shared__ float b[32];
    for (int i = 0; i < 32; i++)
        a[i] = b[i] = (float)i;
    if (write)
        a[index] = 1.0f;
    else
        out[0] = a[index] + b[0];
}

extern "C" int emu_shared_at(float *out, int index, int write, cudaStream_t stream)
{
    DDP_LAUNCH(shared_at, 1, 1, 0, stream, out, index, write);
    return (int)DDP_LAUNCH_STATUS();
}

/* ---- stream order: copies n floats, reading the source when the kernel runs ---- */
__global__ void copy_floats(const float *in, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = in[i];
}

extern "C" int emu_copy_floats(const float *in, float *out, int n, cudaStream_t stream)
{
    DDP_LAUNCH(copy_floats, (n + 127) / 128, 128, 0, stream, in, out, n);
    return (int)DDP_LAUNCH_STATUS();
}
