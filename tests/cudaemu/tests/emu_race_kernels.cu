/* emu_race_kernels.cu — small kernels with and without races, for the emulator's race checks
 * (tests only; the C driver is test_cudaemu_race.c): race_kernel's in shared memory, and
 * global_race_kernel's in device memory between the threads of one block. Each has 64 threads (two
 * warps) and one case per `which`; cases marked "race" must abort naming the hazard, the others must
 * run. Written through tensor_core.cuh and mbarrier.cuh so the same file builds with nvcc. */
#include "runtime/device/kernels/mbarrier.cuh"
#include "runtime/device/kernels/tensor_core.cuh"

using namespace ddp_kernels;

/* Cases 0-4 of both kernels, on m (64 floats, shared or device memory, zero): v is what the
 * thread read. */
__device__ inline float hazard_case(int which, float *m)
{
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    float v = 0.0f;
    switch (which) {
    case 0: /* race, RAW: warp 1 reads what warp 0 wrote, no barrier */
        if (warp == 0) m[lane] = 1.0f;
        else v = m[lane];
        break;
    case 1: /* the same with the barrier */
        if (warp == 0) m[lane] = 1.0f;
        __syncthreads();
        if (warp == 1) v = m[lane];
        break;
    case 2: /* race, WAR under the forward order (warp 0 runs first): warp 1 overwrites what warp 0 read */
        if (warp == 0) v = m[lane];
        else m[lane] = 2.0f;
        break;
    case 3: /* race, WAW: both warps write m[lane] */
        m[lane] = (float)warp;
        break;
    case 4: /* one warp's lanes write and read each other's words after __syncwarp: no inter-warp hazard */
        m[32 * warp + lane] = 1.0f;
        __syncwarp();
        v = m[32 * warp + (lane + 1) % 32];
        break;
    }
    return v;
}

/* Lane syncs with partial masks, on m[0] (shared or device memory): whether lane 0's write reaches
 * lane 1's read depends on a chain of syncs from lane 0 to lane 1. v is what the thread read. */
__device__ inline float partial_sync_case(bool chained, float *m)
{
    const int lane = threadIdx.x % 32;
    float v = 0.0f;
    if (threadIdx.x >= 4)
        return v;
    if (lane == 0)
        m[0] = 1.0f;
    if (lane == 0 || lane == 2)
        __syncwarp(0x5u);
    if (chained ? lane == 1 || lane == 2 : lane == 1 || lane == 3)
        __syncwarp(chained ? 0x6u : 0xau);
    if (lane == 1)
        v = m[0];
    return v;
}

__global__ void race_kernel(int which, const float *src, float *out)
{
    __shared__ __align__(16) float s[64];
    __shared__ __align__(8) uint64_t freed;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    s[threadIdx.x] = 0.0f;
    if (which >= 16 && which <= 18 && threadIdx.x == 0) { /* the cases that free s[0] through it */
        mbarrier_init(&freed, which == 18 ? 32 : 1);
        mbarrier_fence_init();
    }
    __syncthreads();
    float v = hazard_case(which, s);
    switch (which) {
    case 5: /* atomics from both warps, read after the barrier */
        atomicAdd(&s[lane], 1.0f);
        __syncthreads();
        v = s[lane];
        break;
    case 6: /* race: warp 1 reads what warp 0 adds atomically, no barrier */
        if (warp == 0) atomicAdd(&s[lane], 1.0f);
        else v = s[lane];
        break;
    case 7: /* warp 0 copies with cp.async, waits, barrier, warp 1 reads */
        if (warp == 0 && lane < 16) cp_async_16(s + 4 * lane, src + 4 * lane, 16);
        cp_async_commit();
        cp_async_wait<0>();
        __syncthreads();
        if (warp == 1) v = s[lane];
        break;
    case 8: /* race: the same, but warp 1 reads after the wait with no barrier */
        if (warp == 0 && lane < 16) cp_async_16(s + 4 * lane, src + 4 * lane, 16);
        cp_async_commit();
        cp_async_wait<0>();
        if (warp == 1) v = s[lane];
        break;
    case 9: /* race: warp 1 reads s while warp 0's cp.async into it is in flight (before any wait) */
        if (warp == 0 && lane < 16) cp_async_16(s + 4 * lane, src + 4 * lane, 16);
        cp_async_commit();
        if (warp == 1) v = s[lane];
        cp_async_wait<0>();
        break;
    case 11: /* race within a warp: lane 0 writes a word the other lanes of its warp read, no __syncwarp */
        if (warp == 0 && lane == 0) s[0] = 1.0f;
        if (warp == 0) v = s[0];
        break;
    case 10: { /* race, WAR: warp 1 overwrites rows warp 0's ldmatrix reads, no barrier */
        uint32_t r[1] = {0};
        if (warp == 0) {
            ldmatrix_x1(r, s + 8 * (lane % 8)); /* 8 rows of 8 bf16 = s[0..32) */
            v = (float)(r[0] & 1u);
        } else {
            s[lane] = 3.0f;
        }
        break;
    }
    case 12: /* race within a warp: lanes 0 and 2 sync, then lanes 1 and 3; lane 1 reads lane 0's write */
        v = partial_sync_case(false, s);
        break;
    case 13: /* the same, but lanes 1 and 2 sync second: lane 2 passes lane 0's write on to lane 1 */
        v = partial_sync_case(true, s);
        break;
    case 14: /* lanes 1 and 3 hand a word over by __syncwarp(0xa) while lanes 0 and 2 exchange by a shuffle */
        if (threadIdx.x < 4 && lane % 2 == 0) {
            v = __shfl_sync(0x5u, (float)lane, 2);
        } else if (threadIdx.x < 4) {
            if (lane == 3)
                s[1] = 1.0f;
            __syncwarp(0xau);
            if (lane == 1)
                v = s[1];
        }
        break;
    case 15: /* race within a warp, WAR: warp 0's lanes read s[0], then lane 31 overwrites it, no __syncwarp */
        if (warp == 0) v = s[0];
        if (warp == 0 && lane == 31) s[0] = v + 1.0f;
        break;
    case 16: /* race, WAR: warp 0's lanes read s[0], lane 31 alone frees it (no __syncwarp first: its arrival
              * releases its own read only), warp 1 waits for that and its lane 0 overwrites s[0] */
    case 17: /* the same with the __syncwarp: lane 31's arrival releases every lane's read */
    case 18: /* the same without it, but every lane arrives (count 32) after its own read */
        if (warp == 0) {
            v = s[0];
            if (which == 17) __syncwarp();
            if (which == 18 || lane == 31) mbarrier_arrive(&freed);
        } else {
            mbarrier_wait_parity(&freed, 0);
            if (lane == 0) s[0] = 2.0f;
        }
        break;
    case 19: /* warp 0's lanes read s[0], __syncwarp, then lane 31 reads it again and overwrites it */
        if (warp == 0) {
            v = s[0];
            __syncwarp();
            if (lane == 31) s[0] = v + s[0];
        }
        break;
    }
    out[threadIdx.x] = v;
}

/* The hazards of race_kernel in device memory: g holds 64 floats, zeroed by the host. */
__global__ void global_race_kernel(int which, float *g, float *out)
{
    __shared__ __align__(16) float s[64];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    float v = hazard_case(which, g);
    switch (which) {
    case 5: /* race within a warp: lane 0 writes a word the other lanes of its warp read, no __syncwarp */
        if (warp == 0 && lane == 0) g[0] = 1.0f;
        if (warp == 0) v = g[0];
        break;
    case 6: /* warp 0 writes and arrives at named barrier 1, warp 1 syncs on it and reads */
        if (warp == 0) {
            g[lane] = 1.0f;
            named_barrier_arrive(1, 64);
        } else {
            named_barrier_sync(1, 64);
            v = g[lane];
        }
        break;
    case 7: /* race: threads 0 and 32 read g[0], then thread 32 writes it (WAR where thread 0 ran first) */
        if (lane == 0) v = g[0];
        if (threadIdx.x == 32) g[0] = v + 1.0f;
        break;
    case 9: /* race, WAR: thread 0 reads g[0], waits at named barrier 2 for warp 1's arrival and writes
             * g[0]; thread 32 reads it after arriving, so that read is ordered before nothing */
        if (warp == 0) {
            if (lane == 0) v = g[0];
            named_barrier_sync(2, 64);
            if (lane == 0) g[0] = v + 1.0f;
        } else {
            named_barrier_arrive(2, 64);
            if (lane == 0) v = g[0];
        }
        break;
    case 8: /* race, RAW: warp 1's cp.async copies from what warp 0 wrote, no barrier */
        if (warp == 0) g[lane] = 1.0f;
        else if (lane < 8) cp_async_16(s + 4 * lane, g + 4 * lane, 16);
        cp_async_commit();
        cp_async_wait<0>();
        __syncthreads();
        v = s[lane];
        break;
    case 10: /* race within a warp: lanes 0 and 2 sync, then lanes 1 and 3; lane 1 reads lane 0's write */
        v = partial_sync_case(false, g);
        break;
    case 11: /* the same, but lanes 1 and 2 sync second: lane 2 passes lane 0's write on to lane 1 */
        v = partial_sync_case(true, g);
        break;
    }
    out[threadIdx.x] = v;
}

extern "C" int emu_race(int which, const float *src, float *out)
{
    DDP_LAUNCH(race_kernel, 1, 64, 0, 0, which, src, out);
    return (int)DDP_LAUNCH_STATUS();
}

extern "C" int emu_global_race(int which, float *g, float *out)
{
    DDP_LAUNCH(global_race_kernel, 1, 64, 0, 0, which, g, out);
    return (int)DDP_LAUNCH_STATUS();
}
