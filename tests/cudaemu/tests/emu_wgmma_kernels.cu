/* emu_wgmma_kernels.cu — small kernels that exercise the warpgroup matrix instructions (tests only),
 * through runtime/device/kernels/wgmma.cuh, so the same file runs under the emulator (suite cudaemu)
 * and on an sm_90 GPU (suite gpu, built for sm_90a): the GPU is the referee of the emulator's
 * layouts. Each has an extern "C" entry point returning the launch status; the C driver is
 * test_cudaemu_wgmma.c. Kernels named *_broken break a rule of the ISA on purpose.
 *
 * The operand tiles are laid out here from their shape, independently of the emulator's descriptor
 * arithmetic: K-major without swizzle as 8x16-byte core matrices (M- or N-neighbours 128 bytes
 * apart, K-neighbours a column of them apart); K-major swizzled as rows of the swizzle's width (the
 * whole K extent), 8-row atoms; MN-major swizzled as k-rows of the swizzle's width holding
 * consecutive M or N elements, 8-k-row atoms, the K groups before the next MN atom; MN-major
 * without swizzle as 8 k-rows x 16 bytes core matrices. Swizzling XORs byte-offset bits 4.. with
 * bits 7.. of the offset from the 1024-byte-aligned dynamic shared memory. */
#include "runtime/device/kernels/wgmma.cuh"

using namespace ddp_kernels;

#if defined(__CUDACC__) && !defined(DDP_CUDA_EMULATION)
#define DDP_WG_UNROLL _Pragma("unroll")
#else
#define DDP_WG_UNROLL
#endif

/* An operand tile: its rows (M or N), K, whether MN-major, the swizzle. */
struct wg_tile {
    int rows, k, mn_major;
    wgmma_swizzle swizzle;
};

__device__ inline unsigned swizzle_bytes(wgmma_swizzle s)
{
    return s == WGMMA_SWIZZLE_128B ? 128u : s == WGMMA_SWIZZLE_64B ? 64u : s == WGMMA_SWIZZLE_32B ? 32u : 16u;
}

/* Byte offset of element (mn, k) in the tile. */
__device__ inline unsigned tile_byte(wg_tile t, int mn, int k)
{
    const unsigned wb = swizzle_bytes(t.swizzle), per_row = wb / 2; /* elements in a swizzled row */
    const unsigned m = (unsigned)mn, kk = (unsigned)k, rows = (unsigned)t.rows, kgroups = (unsigned)t.k / 8u;
    unsigned off;
    if (t.swizzle == WGMMA_INTERLEAVE && t.mn_major)
        off = m / 8u * 128u + kk % 8u * 16u + kk / 8u * rows * 16u + m % 8u * 2u;
    else if (t.swizzle == WGMMA_INTERLEAVE)
        off = kk / 8u * rows * 16u + m / 8u * 128u + m % 8u * 16u + kk % 8u * 2u;
    else if (!t.mn_major)
        off = m * wb + kk * 2u; /* the whole K in one row: 8-row atoms follow each other */
    else
        off = m / per_row * kgroups * 8u * wb + kk * wb + m % per_row * 2u;
    const unsigned mask = wb / 16u - 1u;
    return off ^ (((off >> 7) & mask) << 4);
}

/* The descriptor of k-step s (k 16s .. 16s + 15) of a tile at `base`. */
__device__ inline uint64_t tile_desc(const char *base, wg_tile t, int s)
{
    const unsigned wb = swizzle_bytes(t.swizzle);
    if (t.swizzle == WGMMA_INTERLEAVE) {
        const unsigned column = (unsigned)t.rows * 16u; /* bytes between K-neighbour core matrices */
        return wgmma_desc(base + 2 * column * s, column, 128, t.swizzle); /* SBO: M- or N-neighbours */
    }
    if (!t.mn_major) return wgmma_desc(base + 32 * s, 16, 8 * wb, t.swizzle);
    return wgmma_desc(base + 2 * 8 * wb * s, (unsigned)(t.k / 8) * 8u * wb, 8 * wb, t.swizzle);
}

/* Bytes a tile takes, rounded up to 1024. */
__host__ __device__ inline unsigned tile_bytes(int rows, int k)
{
    return ((unsigned)(rows * k * 2) + 1023u) / 1024u * 1024u;
}

/* Fence, S k-steps, commit: a straight run of wgmmas with nothing between them (a branch or a
 * register move there makes ptxas serialise them). */
template <int N, int AR, int TA, int TB, int S>
__device__ inline void issue_steps(float (&acc)[N / 2], uint32_t (&ra)[4][4], const uint64_t *desc_a,
                                   const uint64_t *desc_b, int accumulate)
{
    wgmma_fence();
    DDP_WG_UNROLL
    for (int s = 0; s < S; s++) {
        const int scale_d = s > 0 || accumulate;
        if constexpr (AR) wgmma_rs<N, TB>(acc, ra[s], desc_b[s], scale_d);
        else wgmma_ss<N, TA, TB>(acc, desc_a[s], desc_b[s], scale_d);
    }
    wgmma_commit();
}

/* d[64][N] = A[64][K] · B[K][N] (+ c when accumulate), row-major bf16 bits and floats, by each
 * warpgroup of the block into its own slice of d; A from shared memory, or (AR) from registers. TA
 * and TB: MN-major A and B, compile-time (as the instruction's immediates are), so each k-step is one
 * wgmma and nothing else touches the accumulators between the fence and the wait. */
template <int N, int AR, int TA, int TB>
__global__ void wgmma_gemm_kernel(const uint16_t *a, const uint16_t *b, const float *c, float *d, int K, wg_tile ta,
                                  wg_tile tb, int accumulate)
{
    DDP_DYNAMIC_SHARED(char, dyn);
    char *sa = wgmma_align_1024(dyn), *sb = sa + tile_bytes(64, K);
    for (int i = threadIdx.x; i < 64 * K; i += blockDim.x)
        *reinterpret_cast<uint16_t *>(sa + tile_byte(ta, i / K, i % K)) = a[i];
    for (int i = threadIdx.x; i < K * N; i += blockDim.x)
        *reinterpret_cast<uint16_t *>(sb + tile_byte(tb, i % N, i / N)) = b[i];
    wgmma_fence_proxy();
    __syncthreads();
    const int group = threadIdx.x / 128, warp = threadIdx.x / 32 % 4, lane = threadIdx.x % 32;
    const int g = lane / 4, t = lane % 4;
    float acc[N / 2];
    for (int j = 0; j < N / 2; j++)
        acc[j] = c[(16 * warp + g + 8 * (j % 4 / 2)) * N + 8 * (j / 4) + 2 * t + j % 2];
    /* A's fragments for every k-step: registers a wgmma reads stay untouched until its wait */
    uint32_t ra[4][4] = {};
    for (int s = 0; s < K / 16 && AR; s++)
        for (int r = 0; r < 4; r++) {
            const int row = 16 * warp + g + 8 * (r % 2), col = 16 * s + 2 * t + 8 * (r / 2);
            ra[s][r] = (uint32_t)a[row * K + col] | (uint32_t)a[row * K + col + 1] << 16;
        }
    uint64_t desc_a[4] = {}, desc_b[4] = {};
    for (int s = 0; s < K / 16; s++) {
        desc_a[s] = tile_desc(sa, ta, s);
        desc_b[s] = tile_desc(sb, tb, s);
    }
    wgmma_hold(acc);
    for (int s = 0; s < 4; s++) wgmma_hold(ra[s]);
    if (K == 64) issue_steps<N, AR, TA, TB, 4>(acc, ra, desc_a, desc_b, accumulate);
    else if (K == 32) issue_steps<N, AR, TA, TB, 2>(acc, ra, desc_a, desc_b, accumulate);
    else issue_steps<N, AR, TA, TB, 1>(acc, ra, desc_a, desc_b, accumulate);
    wgmma_wait<0>();
    wgmma_hold(acc);
    for (int s = 0; s < 4; s++) wgmma_hold(ra[s]);
    for (int j = 0; j < N / 2; j++)
        d[group * 64 * N + (16 * warp + g + 8 * (j % 4 / 2)) * N + 8 * (j / 4) + 2 * t + j % 2] = acc[j];
}

template <int N, int AR, int TA, int TB>
static int launch_gemm(const uint16_t *a, const uint16_t *b, const float *c, float *d, int k, wg_tile ta, wg_tile tb,
                       int accumulate, int groups)
{
    const unsigned smem = 1024 + tile_bytes(64, k) + tile_bytes(N, k); /* 1024: room to align the tiles */
    auto kernel = wgmma_gemm_kernel<N, AR, TA, TB>;
    const cudaError_t e = cudaFuncSetAttribute(reinterpret_cast<const void *>(kernel),
                                               cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess) return (int)e;
    DDP_LAUNCH(kernel, 1, 128 * groups, smem, 0, a, b, c, d, k, ta, tb, accumulate);
    return (int)DDP_LAUNCH_STATUS();
}

template <int N>
static int launch_gemm_n(const uint16_t *a, const uint16_t *b, const float *c, float *d, int k, wg_tile ta, wg_tile tb,
                         int a_regs, int accumulate, int groups)
{
    if (a_regs)
        return tb.mn_major ? launch_gemm<N, 1, 0, 1>(a, b, c, d, k, ta, tb, accumulate, groups)
                           : launch_gemm<N, 1, 0, 0>(a, b, c, d, k, ta, tb, accumulate, groups);
    if (ta.mn_major)
        return tb.mn_major ? launch_gemm<N, 0, 1, 1>(a, b, c, d, k, ta, tb, accumulate, groups)
                           : launch_gemm<N, 0, 1, 0>(a, b, c, d, k, ta, tb, accumulate, groups);
    return tb.mn_major ? launch_gemm<N, 0, 0, 1>(a, b, c, d, k, ta, tb, accumulate, groups)
                       : launch_gemm<N, 0, 0, 0>(a, b, c, d, k, ta, tb, accumulate, groups);
}

extern "C" int emu_wgmma_gemm(const uint16_t *a, const uint16_t *b, const float *c, float *d, int n, int k,
                              int a_mn, int a_swizzle, int b_mn, int b_swizzle, int a_regs, int accumulate,
                              int groups)
{
    const wg_tile ta = {64, k, a_mn, (wgmma_swizzle)a_swizzle}, tb = {n, k, b_mn, (wgmma_swizzle)b_swizzle};
    return n == 64 ? launch_gemm_n<64>(a, b, c, d, k, ta, tb, a_regs, accumulate, groups)
                   : launch_gemm_n<128>(a, b, c, d, k, ta, tb, a_regs, accumulate, groups);
}

#ifdef DDP_CUDA_EMULATION
/* Emulator only (on a GPU reading the accumulators before the wait is undefined): out_early gets
 * the accumulators between the commit and the wait, out the finished product. */
__global__ void wgmma_early_read_kernel(const uint16_t *a, const uint16_t *b, float *out_early, float *out)
{
    DDP_DYNAMIC_SHARED(char, dyn);
    char *smem = wgmma_align_1024(dyn);
    const wg_tile t = {64, 16, 0, WGMMA_INTERLEAVE};
    for (int i = threadIdx.x; i < 64 * 16; i += blockDim.x) {
        *reinterpret_cast<uint16_t *>(smem + tile_byte(t, i / 16, i % 16)) = a[i];
        *reinterpret_cast<uint16_t *>(smem + 2048 + tile_byte(t, i % 64, i / 64)) = b[i];
    }
    wgmma_fence_proxy();
    __syncthreads();
    float acc[32];
    for (int j = 0; j < 32; j++) acc[j] = -1.0f;
    wgmma_fence();
    wgmma_ss<64, 0, 0>(acc, tile_desc(smem, t, 0), tile_desc(smem + 2048, t, 0), 0);
    wgmma_commit();
    for (int j = 0; j < 32; j++) out_early[threadIdx.x * 32 + j] = acc[j];
    wgmma_wait<0>();
    for (int j = 0; j < 32; j++) out[threadIdx.x * 32 + j] = acc[j];
}

extern "C" int emu_wgmma_early_read(const uint16_t *a, const uint16_t *b, float *out_early, float *out)
{
    DDP_LAUNCH(wgmma_early_read_kernel, 1, 128, 1024 + 4096, 0, a, b, out_early, out);
    return (int)DDP_LAUNCH_STATUS();
}

/* The broken ones: each must abort with a message naming the rule. */
__global__ void wgmma_broken_kernel(int which, float *gmem)
{
    DDP_DYNAMIC_SHARED(char, dyn);
    char *smem = wgmma_align_1024(dyn);
    __shared__ __align__(16) uint16_t static_tile[64 * 16];
    for (int i = threadIdx.x; i < 4096; i += blockDim.x) smem[i] = 0;
    for (int i = threadIdx.x; i < 64 * 16; i += blockDim.x) static_tile[i] = 0;
    if (which != 6)
        wgmma_fence_proxy();
    __syncthreads();
    float acc[32] = {};
    const wg_tile t = {64, 16, 0, WGMMA_INTERLEAVE};
    const uint64_t desc = tile_desc(smem, t, 0);
    switch (which) {
    case 0: wgmma_ss<64, 0, 0>(acc, desc, desc, 0); break; /* no fence */
    case 1: wgmma_fence(); wgmma_ss<64, 0, 0>(acc, wgmma_desc(static_tile, 1024, 128, WGMMA_INTERLEAVE), desc, 0);
        break; /* a static __shared__ operand */
    case 2: wgmma_fence(); wgmma_ss<64, 0, 0>(acc, desc, desc, 0); break; /* 96 threads: a partial warpgroup */
    case 3: /* lanes of one warp give different descriptors */
        wgmma_fence();
        wgmma_ss<64, 0, 0>(acc, tile_desc(smem + (threadIdx.x % 2) * 128, t, 0), desc, 0);
        break;
    case 4: wgmma_fence(); wgmma_ss<64, 0, 0>(acc, desc, desc + (1ull << 49), 0); break; /* a base offset */
    case 5: wgmma_fence(); wgmma_ss<64, 0, 0>(acc, desc, desc, 0); wgmma_commit(); return; /* never waited for */
    case 6: wgmma_fence(); wgmma_ss<64, 0, 0>(acc, desc, desc, 0); break; /* the stores not fenced for wgmma */
    }
    wgmma_commit();
    wgmma_wait<0>();
    gmem[threadIdx.x] = acc[0];
}

extern "C" int emu_wgmma_broken(int which, float *gmem)
{
    DDP_LAUNCH(wgmma_broken_kernel, 1, which == 2 ? 96 : 128, 1024 + 4096, 0, which, gmem);
    return (int)DDP_LAUNCH_STATUS();
}
#endif
