/* emu_tma_kernels.cu — one tensor-map box loaded into shared memory by the tensor memory accelerator
 * (runtime/device/kernels/mbarrier.cuh's tma_load_*), waited for on an mbarrier, and copied out byte
 * for byte, so the C driver (test_cudaemu_tma.c) sees the box's layout: the swizzle, the order of
 * dimensions, the out-of-bounds fill. Built for the emulator and, unchanged, by nvcc for sm_90a, where
 * the hardware referees the emulator's reading of the ISA. `mode` breaks the hand-over on purpose
 * (emulator only). */
#include "runtime/device/kernels/mbarrier.cuh"
#include "runtime/device/kernels/wgmma.cuh"

using namespace ddp_kernels;

/* TMA_STORED_FIRST: the tile zeroed by ordinary stores, fenced for the async proxy, before the copy
 * overwrites it (right on a GPU too); the others are broken: no wait, a misaligned destination, a
 * phase expecting 16 bytes too few, no fence.mbarrier_init, the stores not fenced, the stores fenced
 * only after the barrier (too late for the copy another thread issues), and (two blocks) the source
 * tensor zeroed by one block while the other copies from it. */
enum tma_mode { TMA_RIGHT, TMA_STORED_FIRST, TMA_NO_WAIT, TMA_MISALIGNED, TMA_SHORT_TX, TMA_NO_INIT_FENCE,
                TMA_STORES_UNFENCED, TMA_FENCED_LATE, TMA_SOURCE_WRITTEN };

__global__ void tma_kernel(int mode, const __grid_constant__ CUtensorMap map, int rank, int c0, int c1, int c2,
                           int c3, unsigned box_bytes, unsigned char *out, unsigned char *src, unsigned src_bytes)
{
    if (mode == TMA_SOURCE_WRITTEN && blockIdx.x == 0) {
        for (unsigned i = threadIdx.x; i < src_bytes; i += blockDim.x)
            src[i] = 0;
        return;
    }
    DDP_DYNAMIC_SHARED(char, dyn);
    char *tile = wgmma_align_1024(dyn);
    __shared__ __align__(8) uint64_t full;
    if (threadIdx.x == 0) {
        mbarrier_init(&full, 1);
        if (mode != TMA_NO_INIT_FENCE)
            mbarrier_fence_init();
    }
    if (mode == TMA_STORED_FIRST || mode == TMA_STORES_UNFENCED || mode == TMA_FENCED_LATE) {
        for (unsigned i = threadIdx.x; i < box_bytes; i += blockDim.x)
            tile[i] = 0;
        if (mode == TMA_STORED_FIRST)
            wgmma_fence_proxy(); /* fence.proxy.async: the stores before the async proxy's writes */
    }
    __syncthreads();
    if (mode == TMA_FENCED_LATE)
        wgmma_fence_proxy();
    if (threadIdx.x == 0) {
        char *dst = mode == TMA_MISALIGNED ? tile + 16 : tile;
        mbarrier_arrive_expect_tx(&full, mode == TMA_SHORT_TX ? box_bytes - 16 : box_bytes);
        if (rank == 2)
            tma_load_2d(dst, &map, c0, c1, &full);
        else if (rank == 3)
            tma_load_3d(dst, &map, c0, c1, c2, &full);
        else
            tma_load_4d(dst, &map, c0, c1, c2, c3, &full);
    }
    if (mode != TMA_NO_WAIT)
        mbarrier_wait_parity(&full, 0);
    for (unsigned i = 16 * threadIdx.x; i < box_bytes; i += 16 * blockDim.x) {
        const uint4 chunk = *reinterpret_cast<const uint4 *>(tile + i);
        *reinterpret_cast<uint4 *>(out + i) = chunk;
    }
}

extern "C" int emu_tma(int mode, const CUtensorMap *map, int rank, const int *coords, unsigned box_bytes,
                       unsigned char *out)
{
    const size_t smem = box_bytes + 1024; /* room to align the tile to the swizzle window; boxes here are small */
    DDP_LAUNCH(tma_kernel, 1, 128, smem, 0, mode, *map, rank, coords[0], coords[1], coords[2], coords[3], box_bytes,
               out, (unsigned char *)nullptr, 0u);
    return (int)DDP_LAUNCH_STATUS();
}

/* TMA_SOURCE_WRITTEN: block 0 zeroes the map's tensor (src, src_bytes) while block 1 copies a box of it. */
extern "C" int emu_tma_source_written(const CUtensorMap *map, int rank, const int *coords, unsigned box_bytes,
                                      unsigned char *out, unsigned char *src, unsigned src_bytes)
{
    const size_t smem = box_bytes + 1024;
    DDP_LAUNCH(tma_kernel, 2, 128, smem, 0, (int)TMA_SOURCE_WRITTEN, *map, rank, coords[0], coords[1], coords[2],
               coords[3], box_bytes, out, src, src_bytes);
    return (int)DDP_LAUNCH_STATUS();
}
