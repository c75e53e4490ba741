/* wgmma.cuh — the warpgroup matrix instructions of sm_90a (Hopper) a kernel may use, one spelling for
 * both builds: inline PTX under nvcc when compiling for sm_90a, the emulator's implementation under
 * DDP_CUDA_EMULATION (tests/cudaemu/cudaemu_wgmma.cpp: the ISA's fragments and shared-memory layouts,
 * the product landing only at its wait_group). Elsewhere (sm_80, plain sm_90) each traps: a kernel
 * that uses them is launched only on an sm_90 device by a build that has sm_90a code.
 *
 *   wgmma_desc(smem, lbo, sbo, swizzle)   a shared-memory matrix descriptor (byte offsets)
 *   wgmma_align_1024(p)   p advanced to the next 1024-byte boundary of the shared window: where a
 *                         swizzled tile starts (its pattern repeats every 1024 bytes)
 *   wgmma_ss<N, TA, TB>(d, desc_a, desc_b, scale_d)   wgmma.mma_async m64nNk16 f32 += bf16·bf16
 *   wgmma_rs<N, TB>(d, a, desc_b, scale_d)            the same with A from four registers
 *   wgmma_fence(), wgmma_commit(), wgmma_wait<N>()     fence / commit_group / wait_group N
 *   wgmma_fence_proxy()   fence.proxy.async.shared::cta: this thread's ordinary shared-memory stores
 *                         and landed cp.asyncs made visible to the async proxy (wgmma's reads, bulk
 *                         and tensor copies' writes), before the barrier that publishes them
 *   wgmma_hold(d), wgmma_hold(a)   keeps the compiler from moving an accumulator or an A fragment
 *                                  across them, or reusing its registers before the wait
 *
 * N is 64 or 128; TA/TB 1 for an MN-major operand (bf16 may be either). Accumulator fragment of the
 * warpgroup's warp w (g = lane / 4, t = lane % 4): d[4i + q] is row 16w + g + 8(q / 2), column
 * 8i + 2t + q % 2. Register A holds mma.m16n8k16's A fragment of the warp's 16 rows. Descriptors:
 * start address, LBO and SBO in 16-byte units (bits 0-13, 16-29, 32-45), swizzle in bits 62-63
 * (0 none, 1 128-byte, 2 64-byte, 3 32-byte); the layouts they describe are the emulator's header.
 * This header must not hold kernels. */
#ifndef DDP_WGMMA_CUH
#define DDP_WGMMA_CUH

#include "cuda_kernel.h"

#include <stdint.h>

namespace ddp_kernels {

enum wgmma_swizzle : uint32_t { WGMMA_INTERLEAVE = 0, WGMMA_SWIZZLE_128B = 1, WGMMA_SWIZZLE_64B = 2,
                                WGMMA_SWIZZLE_32B = 3 };

__device__ inline uint64_t wgmma_desc_of(uint32_t smem_address, uint32_t lbo, uint32_t sbo, wgmma_swizzle swizzle)
{
    return (uint64_t)((smem_address & 0x3ffffu) >> 4) | (uint64_t)((lbo >> 4) & 0x3fffu) << 16 |
           (uint64_t)((sbo >> 4) & 0x3fffu) << 32 | (uint64_t)swizzle << 62;
}

#if defined(DDP_CUDA_EMULATION)

#define DDP_WG_SITE const char *file = __builtin_FILE(), int line = __builtin_LINE()
__device__ inline uint64_t wgmma_desc(const void *smem, uint32_t lbo, uint32_t sbo, wgmma_swizzle swizzle,
                                      DDP_WG_SITE)
{
    return wgmma_desc_of(::ddp_cudaemu::shared_window_offset(smem, file, line), lbo, sbo, swizzle);
}
/* p advanced to the next 1024-byte boundary of the shared window (the swizzle patterns' period). */
__device__ inline char *wgmma_align_1024(char *p, DDP_WG_SITE)
{
    return p + (1024u - ::ddp_cudaemu::shared_window_offset(p, file, line) % 1024u) % 1024u;
}
template <int N, int TA, int TB>
__device__ inline void wgmma_ss(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b, int scale_d, DDP_WG_SITE)
{
    ::ddp_cudaemu::wgmma_bf16(d, N, nullptr, desc_a, desc_b, scale_d != 0, TA, TB, file, line);
}
template <int N, int TB>
__device__ inline void wgmma_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t desc_b, int scale_d, DDP_WG_SITE)
{
    ::ddp_cudaemu::wgmma_bf16(d, N, a, 0, desc_b, scale_d != 0, 0, TB, file, line);
}
__device__ inline void wgmma_fence(DDP_WG_SITE) { ::ddp_cudaemu::wgmma_fence(file, line); }
__device__ inline void wgmma_commit(DDP_WG_SITE) { ::ddp_cudaemu::wgmma_commit(file, line); }
template <int N> __device__ inline void wgmma_wait(DDP_WG_SITE) { ::ddp_cudaemu::wgmma_wait(N, file, line); }
template <int M> __device__ inline void wgmma_hold(float (&)[M]) {}
template <int M> __device__ inline void wgmma_hold(uint32_t (&)[M]) {}
__device__ inline void wgmma_fence_proxy() { ::ddp_cudaemu::fence_proxy_async(); }
#undef DDP_WG_SITE

#else

__device__ inline uint64_t wgmma_desc(const void *smem, uint32_t lbo, uint32_t sbo, wgmma_swizzle swizzle)
{
    return wgmma_desc_of((uint32_t)__cvta_generic_to_shared(smem), lbo, sbo, swizzle);
}
__device__ inline char *wgmma_align_1024(char *p)
{
    return p + (1024u - (uint32_t)__cvta_generic_to_shared(p) % 1024u) % 1024u;
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define DDP_WG_D8(i)                                                                                               \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]),  \
        "+f"(d[i + 7])
#define DDP_WG_D32(i) DDP_WG_D8(i), DDP_WG_D8(i + 8), DDP_WG_D8(i + 16), DDP_WG_D8(i + 24)
#define DDP_WG_R32                                                                                                 \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, "  \
    "%23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define DDP_WG_R64                                                                                                 \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, "  \
    "%23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, "   \
    "%44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#endif

template <int N, int TA, int TB>
__device__ inline void wgmma_ss(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b, int scale_d)
{
    static_assert(N == 64 || N == 128, "wgmma_ss: N is 64 or 128");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    if constexpr (N == 64)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " DDP_WG_R32
                     ", %32, %33, p, 1, 1, %35, %36;\n}\n"
                     : DDP_WG_D32(0)
                     : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TA), "n"(TB));
    else
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " DDP_WG_R64
                     ", %64, %65, p, 1, 1, %67, %68;\n}\n"
                     : DDP_WG_D32(0), DDP_WG_D32(32)
                     : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TA), "n"(TB));
#else
    (void)d, (void)desc_a, (void)desc_b, (void)scale_d;
    __trap();
#endif
}

template <int N, int TB>
__device__ inline void wgmma_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t desc_b, int scale_d)
{
    static_assert(N == 64 || N == 128, "wgmma_rs: N is 64 or 128");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    if constexpr (N == 64)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " DDP_WG_R32 ", {%32, %33, %34, %35}, "
                     "%36, p, 1, 1, %38;\n}\n"
                     : DDP_WG_D32(0)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TB));
    else
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " DDP_WG_R64 ", {%64, %65, %66, %67}, "
                     "%68, p, 1, 1, %70;\n}\n"
                     : DDP_WG_D32(0), DDP_WG_D32(32)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TB));
#else
    (void)d, (void)a, (void)desc_b, (void)scale_d;
    __trap();
#endif
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#undef DDP_WG_D8
#undef DDP_WG_D32
#undef DDP_WG_R32
#undef DDP_WG_R64
__device__ inline void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ inline void wgmma_fence_proxy() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
__device__ inline void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ inline void wgmma_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
#else
__device__ inline void wgmma_fence() { __trap(); }
__device__ inline void wgmma_fence_proxy() { __trap(); }
__device__ inline void wgmma_commit() { __trap(); }
template <int N> __device__ inline void wgmma_wait() { __trap(); }
#endif

/* An empty asm that reads and writes every register of an accumulator or of an A fragment: the
 * compiler may not move their uses, nor reuse the registers, across the fence, issue and wait around
 * it (the ISA leaves both undefined until the wait). */
template <int M> __device__ inline void wgmma_hold(float (&d)[M])
{
#pragma unroll
    for (int i = 0; i < M; i++) asm volatile("" : "+f"(d[i])::"memory");
}
template <int M> __device__ inline void wgmma_hold(uint32_t (&a)[M])
{
#pragma unroll
    for (int i = 0; i < M; i++) asm volatile("" : "+r"(a[i])::"memory");
}

#endif

} // namespace ddp_kernels

#endif
