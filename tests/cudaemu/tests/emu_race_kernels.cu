/* emu_race_kernels.cu — small kernels with and without shared-memory races, for the emulator's
 * race check (tests only; the C driver is test_cudaemu_race.c). One kernel, 64 threads (two
 * warps), one case per `which`; cases marked "race" must abort naming the hazard, the others must
 * run. Written through tensor_core.cuh so the same file builds with nvcc. */
#include "runtime/device/kernels/tensor_core.cuh"

using namespace ddp_kernels;

__global__ void race_kernel(int which, const float *src, float *out)
{
    __shared__ __align__(16) float s[64];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    s[threadIdx.x] = 0.0f;
    __syncthreads();
    float v = 0.0f;
    switch (which) {
    case 0: /* race, RAW: warp 1 reads what warp 0 wrote, no barrier */
        if (warp == 0) s[lane] = 1.0f;
        else v = s[lane];
        break;
    case 1: /* the same with the barrier */
        if (warp == 0) s[lane] = 1.0f;
        __syncthreads();
        if (warp == 1) v = s[lane];
        break;
    case 2: /* race, WAR under the forward order (warp 0 runs first): warp 1 overwrites what warp 0 read */
        if (warp == 0) v = s[lane];
        else s[lane] = 2.0f;
        break;
    case 3: /* race, WAW: both warps write s[lane] */
        s[lane] = (float)warp;
        break;
    case 4: /* one warp's lanes write and read each other's words after __syncwarp: no inter-warp hazard */
        s[32 * warp + lane] = 1.0f;
        __syncwarp();
        v = s[32 * warp + (lane + 1) % 32];
        break;
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
    }
    out[threadIdx.x] = v;
}

extern "C" int emu_race(int which, const float *src, float *out)
{
    DDP_LAUNCH(race_kernel, 1, 64, 0, 0, which, src, out);
    return (int)DDP_LAUNCH_STATUS();
}
