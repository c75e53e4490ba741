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

/* Cases 20-26 of race_kernel, on m (shared memory, zero), and 20-25 as global_race_kernel's 12-17
 * (device memory): accesses to parts of a float, which the race checks' shadows (a record per 4-byte word
 * while its bytes share one) must keep apart, and whole ones after them. Only lane 0 of each warp
 * takes part; v is what it read; `freed` is an mbarrier expecting one arrival (case 26's). */
__device__ inline float granule_case(int which, float *m, uint64_t *freed)
{
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    unsigned char *bytes = reinterpret_cast<unsigned char *>(m);
    float v = 0.0f;
    if (lane != 0)
        return v;
    switch (which) {
    case 20: /* warp 1 reads byte 2 of m[1] while warp 0 writes its bytes 0-1 and 3: different bytes */
        if (warp == 1) v = bytes[6];
        else { *reinterpret_cast<unsigned short *>(bytes + 4) = 7; bytes[7] = 1; }
        break;
    case 21: /* race: the same, but warp 0 writes bytes 2-3 (byte 6 is the one both touch) */
        if (warp == 1) v = bytes[6];
        else *reinterpret_cast<unsigned short *>(bytes + 6) = 7;
        break;
    case 22: /* race: warp 1 reads byte 3 of m[3] alone, warp 0 reads all of it and overwrites it (the
              * granule must stay split while byte 3's record differs from the others') */
        if (warp == 1) v = bytes[15];
        else { v = m[3]; m[3] = v + 1.0f; }
        break;
    case 23: /* race: warp 1 reads m[2] byte by byte, then whole (the granule merges with warp 1's read in
              * it), warp 0 overwrites it */
        if (warp == 1) { v = bytes[8] + bytes[9] + bytes[10] + bytes[11]; v += m[2]; }
        else m[2] = 1.0f;
        break;
    case 24: /* warp 0 writes m[2] byte by byte, then whole; after the barrier (race_kernel's: every
              * thread must reach it) warp 1 reads it */
        if (warp == 0) { bytes[8] = 1; bytes[9] = 2; bytes[10] = 3; bytes[11] = 4; m[2] = 2.0f; }
        break;
    case 25: /* race: warp 1 reads all of m[4], warp 0 writes its byte 1 (the split must keep warp 1's read) */
        if (warp == 1) v = m[4];
        else bytes[17] = 1;
        break;
    case 26: /* race: warp 1 reads byte 0 of m[5], frees it (an arrival), then reads its bytes 1-3; warp 0
              * waits for the arrival, reads all of m[5] and overwrites it (the four bytes' records agree,
              * but warp 1's reads of bytes 1-3 came after the arrival: the granule must stay split) */
        if (warp == 1) {
            v = bytes[20];
            mbarrier_arrive(freed);
            v += bytes[21] + bytes[22] + bytes[23];
        } else {
            mbarrier_wait_parity(freed, 0);
            v = m[5];
            m[5] = v + 1.0f;
        }
        break;
    }
    return v;
}

__global__ void race_kernel(int which, const float *src, float *out)
{
    __shared__ __align__(16) float s[64];
    __shared__ __align__(8) uint64_t freed;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    s[threadIdx.x] = 0.0f;
    if (((which >= 16 && which <= 18) || which >= 26) && threadIdx.x == 0) { /* the cases that use it */
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
    case 27: /* warp 1's lane 0 writes s[1] and arrives; warp 0's lane 0 waits, passes what it acquired on
              * to lane 1 (__syncwarp(0x3)) and then to every lane (__syncwarp()); lane 2 reads s[1] */
        if (warp == 1 && lane == 0) {
            s[1] = 4.0f;
            mbarrier_arrive(&freed);
        } else if (warp == 0) {
            if (lane == 0) mbarrier_wait_parity(&freed, 0);
            if (lane < 2) __syncwarp(0x3u);
            __syncwarp();
            if (lane == 2) v = s[1];
        }
        break;
    case 20: case 21: case 22: case 23: case 24: case 25: case 26:
        v = granule_case(which, s, &freed);
        if (which == 24) {
            __syncthreads();
            if (warp == 1 && lane == 0) v = s[2];
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
    case 12: case 13: case 14: case 15: case 16: case 17: /* parts of a float: race_kernel's 20-25 */
        v = granule_case(which + 8, g, nullptr);
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
