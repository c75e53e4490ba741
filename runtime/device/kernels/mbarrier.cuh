/* mbarrier.cuh — the synchronisation of warp-specialised kernels, one spelling for both builds:
 * named barriers, mbarriers and the bulk and tensor (TMA) copies that complete on them. Inline PTX
 * under nvcc, the emulator's implementation under DDP_CUDA_EMULATION (tests/cudaemu/cudaemu_sync.cpp
 * and cudaemu_tma.cpp, which block a waiting thread until its barrier completes, report a wait
 * nothing can end as a deadlock, and give the race check what each arrival releases and each wait
 * acquires). The try_wait, the expect_tx arrival and the copies need sm_90; elsewhere they trap.
 *
 *   named_barrier_sync(id, threads)    bar.sync id, threads: wait until `threads` (a multiple of 32)
 *                                      have arrived at barrier id (1..15; 0 is __syncthreads's)
 *   named_barrier_arrive(id, threads)  bar.arrive: arrive without waiting (a producer's signal)
 *   mbarrier_init(bar, count)          mbarrier.init: `count` arrivals complete a phase
 *   mbarrier_fence_init()              fence.mbarrier_init: the inits visible to bulk copies (before
 *                                      the __syncthreads that publishes them)
 *   mbarrier_arrive(bar)               one arrival
 *   mbarrier_arrive_expect_tx(bar, n)  n more bytes expected this phase, then one arrival
 *   mbarrier_wait_parity(bar, parity)  until the phase with that parity (phases alternate 0, 1, 0 ...)
 *                                      is complete: a consumer waits for "full" with the phase it
 *                                      expects, a producer for "empty" with the opposite parity, which
 *                                      a fresh mbarrier reports complete
 *   cp_async_bulk(dst, src, bytes, bar)  cp.async.bulk global -> shared, bytes a multiple of 16, both
 *                                      ends 16-byte aligned; completes `bytes` on bar's expected count
 *   tma_load_{2,3,4}d(dst, map, c0, c1, ..., bar)  cp.async.bulk.tensor tile mode: the box of tensor
 *                                      map `map` (a __grid_constant__ CUtensorMap kernel parameter made
 *                                      by cuTensorMapEncodeTiled) starting at element (c0, c1, ...),
 *                                      dimension 0 innermost, into dst (128-byte aligned; inside the
 *                                      1024-byte-aligned swizzle window when swizzled), elements outside
 *                                      the tensor zero-filled; completes the whole box's bytes on bar
 *   setmaxnreg_dec<N>() / _inc<N>()    setmaxnreg.{dec,inc}.sync.aligned (sm_90a): this warpgroup's
 *                                      registers a thread become N (24..256, a multiple of 8), all 128
 *                                      threads together; dec returns registers to the block's pool,
 *                                      inc waits until the pool holds enough (so a warp-specialised
 *                                      kernel's producer gives up what its consumers take). The pool
 *                                      starts empty: the launch gives each thread what the kernel's
 *                                      __launch_bounds__(threads, 1) allows, 65536 / threads rounded
 *                                      down to 8 (ptxas's count for a kernel that uses setmaxnreg)
 *
 * A phase completes when all its arrivals and all its expected bytes are in. A wait acquires what
 * the phase's arrivals released (their earlier shared-memory accesses) and the bulk copies that
 * completed on it. This header must not hold kernels. */
#ifndef DDP_MBARRIER_CUH
#define DDP_MBARRIER_CUH

#include "cuda_kernel.h"

#include <cuda.h>
#include <stdint.h>

namespace ddp_kernels {

#if defined(DDP_CUDA_EMULATION)

#define DDP_MB_SITE const char *file = __builtin_FILE(), int line = __builtin_LINE()
__device__ inline void named_barrier_sync(int id, int threads, DDP_MB_SITE)
{
    ::ddp_cudaemu::named_barrier(id, threads, true, file, line);
}
__device__ inline void named_barrier_arrive(int id, int threads, DDP_MB_SITE)
{
    ::ddp_cudaemu::named_barrier(id, threads, false, file, line);
}
__device__ inline void mbarrier_init(uint64_t *bar, unsigned count, DDP_MB_SITE)
{
    ::ddp_cudaemu::mbarrier_init(bar, count, file, line);
}
__device__ inline void mbarrier_fence_init() { ::ddp_cudaemu::fence_mbarrier_init(); }
__device__ inline void mbarrier_arrive(uint64_t *bar, DDP_MB_SITE)
{
    ::ddp_cudaemu::mbarrier_arrive(bar, 1, 0, file, line);
}
__device__ inline void mbarrier_arrive_expect_tx(uint64_t *bar, unsigned bytes, DDP_MB_SITE)
{
    ::ddp_cudaemu::mbarrier_arrive(bar, 1, bytes, file, line);
}
__device__ inline void mbarrier_wait_parity(uint64_t *bar, unsigned parity, DDP_MB_SITE)
{
    while (!::ddp_cudaemu::mbarrier_try_wait_parity(bar, parity, file, line)) {
    }
}
__device__ inline void cp_async_bulk(void *dst, const void *src, unsigned bytes, uint64_t *bar, DDP_MB_SITE)
{
    ::ddp_cudaemu::cp_async_bulk(dst, src, bytes, bar, file, line);
}
__device__ inline void tma_load_2d(void *dst, const CUtensorMap *map, int c0, int c1, uint64_t *bar, DDP_MB_SITE)
{
    const int c[2] = {c0, c1};
    ::ddp_cudaemu::cp_async_bulk_tensor(dst, map, 2, c, bar, file, line);
}
__device__ inline void tma_load_3d(void *dst, const CUtensorMap *map, int c0, int c1, int c2, uint64_t *bar,
                                   DDP_MB_SITE)
{
    const int c[3] = {c0, c1, c2};
    ::ddp_cudaemu::cp_async_bulk_tensor(dst, map, 3, c, bar, file, line);
}
__device__ inline void tma_load_4d(void *dst, const CUtensorMap *map, int c0, int c1, int c2, int c3, uint64_t *bar,
                                   DDP_MB_SITE)
{
    const int c[4] = {c0, c1, c2, c3};
    ::ddp_cudaemu::cp_async_bulk_tensor(dst, map, 4, c, bar, file, line);
}
template <int N> __device__ inline void setmaxnreg_dec(DDP_MB_SITE)
{
    ::ddp_cudaemu::setmaxnreg(false, N, file, line);
}
template <int N> __device__ inline void setmaxnreg_inc(DDP_MB_SITE)
{
    ::ddp_cudaemu::setmaxnreg(true, N, file, line);
}
#undef DDP_MB_SITE

#else

__device__ inline uint32_t mbarrier_smem(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

__device__ inline void named_barrier_sync(int id, int threads)
{
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ inline void named_barrier_arrive(int id, int threads)
{
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ inline void mbarrier_init(uint64_t *bar, unsigned count)
{
    asm volatile("mbarrier.init.shared.b64 [%0], %1;\n" ::"r"(mbarrier_smem(bar)), "r"(count) : "memory");
}
__device__ inline void mbarrier_arrive(uint64_t *bar)
{
    asm volatile("mbarrier.arrive.shared.b64 _, [%0];\n" ::"r"(mbarrier_smem(bar)) : "memory");
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ inline void mbarrier_fence_init() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
__device__ inline void mbarrier_arrive_expect_tx(uint64_t *bar, unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;\n" ::"r"(mbarrier_smem(bar)), "r"(bytes)
                 : "memory");
}
__device__ inline void mbarrier_wait_parity(uint64_t *bar, unsigned parity)
{
    uint32_t done = 0;
    while (!done)
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done) : "r"(mbarrier_smem(bar)), "r"(parity) : "memory");
}
__device__ inline void cp_async_bulk(void *dst, const void *src, unsigned bytes, uint64_t *bar)
{
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
                 ::"r"(mbarrier_smem(dst)), "l"(src), "r"(bytes), "r"(mbarrier_smem(bar)) : "memory");
}
__device__ inline void tma_load_2d(void *dst, const CUtensorMap *map, int c0, int c1, uint64_t *bar)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, "
                 "%3}], [%4];\n" ::"r"(mbarrier_smem(dst)), "l"(map), "r"(c0), "r"(c1), "r"(mbarrier_smem(bar))
                 : "memory");
}
__device__ inline void tma_load_3d(void *dst, const CUtensorMap *map, int c0, int c1, int c2, uint64_t *bar)
{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, "
                 "%3, %4}], [%5];\n" ::"r"(mbarrier_smem(dst)), "l"(map), "r"(c0), "r"(c1), "r"(c2),
                 "r"(mbarrier_smem(bar)) : "memory");
}
__device__ inline void tma_load_4d(void *dst, const CUtensorMap *map, int c0, int c1, int c2, int c3, uint64_t *bar)
{
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, "
                 "%3, %4, %5}], [%6];\n" ::"r"(mbarrier_smem(dst)), "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3),
                 "r"(mbarrier_smem(bar)) : "memory");
}
#else
__device__ inline void mbarrier_fence_init() { __trap(); }
__device__ inline void mbarrier_arrive_expect_tx(uint64_t *, unsigned) { __trap(); }
__device__ inline void mbarrier_wait_parity(uint64_t *, unsigned) { __trap(); }
__device__ inline void cp_async_bulk(void *, const void *, unsigned, uint64_t *) { __trap(); }
__device__ inline void tma_load_2d(void *, const CUtensorMap *, int, int, uint64_t *) { __trap(); }
__device__ inline void tma_load_3d(void *, const CUtensorMap *, int, int, int, uint64_t *) { __trap(); }
__device__ inline void tma_load_4d(void *, const CUtensorMap *, int, int, int, int, uint64_t *) { __trap(); }
#endif

/* sm_90a alone (attention_tma.cu is built for it alone) */
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
template <int N> __device__ inline void setmaxnreg_dec()
{
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N> __device__ inline void setmaxnreg_inc()
{
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}
#else
template <int N> __device__ inline void setmaxnreg_dec() { __trap(); }
template <int N> __device__ inline void setmaxnreg_inc() { __trap(); }
#endif

#endif

} // namespace ddp_kernels

#endif
