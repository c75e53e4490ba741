/* attention_wgmma.cu — causal flash attention's forward and backward on Hopper's warpgroup
 * instructions (sm_90a; built for sm_90a alone, taken on compute capability 9.0 devices): bf16
 * storage, fp32 accumulation, head sizes 64 and 128, the same algorithm, masks and outputs as
 * attention_tc.cu's mma.sync kernels.
 *
 * A block of two warpgroups (8 warps) owns 128 rows of one head; each warpgroup 64 of them, a warp
 * 16. Tiles of 64 rows of the other side stream through shared memory, copied with cp.async one
 * tile ahead (three stages in the forward and dQ, two in dK/dV). Every tile is stored in the ISA's
 * 128-byte-swizzled K-major layout (rows of 64 elements, 128 bytes, chunk c of row r at c ^ (r % 8);
 * an HS of 128 as two such column blocks),
 * which serves a tile as the K-major operand of a product over HS (S = Q·Kᵀ) and as the MN-major B
 * operand of one over its rows (O = P·V), so no tile is transposed. Per tile of the forward: S by
 * HS/16 wgmma m64n64k16 with both operands in shared memory; the causal and document masks and the
 * online softmax in base 2 on S's accumulator fragment, which is mma.sync's (so the code is
 * attention_tc.cu's); P rounded to bf16 into the A-register fragments of O's four wgmma m64nHSk16,
 * which accumulate in registers. Each batch of wgmmas is fenced, committed and waited for before its
 * results are read, and its accumulators and A registers are held untouched until then; every pass
 * keeps one batch in flight while the CUDA cores work on the other's results. Ordinary shared-memory writes
 * (cp.async) reach the wgmma's reads through a proxy fence before the barrier that publishes them.
 * Rows past T are zero-filled on load and never stored; the log-sum-exp is the natural-log one the
 * backward reads. The backward's dQ and dK/dV passes follow the forward. Arguments arrive
 * checked by attention.cu's op (and attention_wgmma_supports). This file must not hold the mma.sync
 * kernels. */
#include "kernel_common.cuh"
#include "tensor_core.cuh"
#include "wgmma.cuh"
#include "attention_internal.h"

using ddp_kernels::cp_async_16;
using ddp_kernels::cp_async_commit;
using ddp_kernels::cp_async_wait;
using ddp_kernels::pack_bf16x2;
using ddp_kernels::WGMMA_SWIZZLE_128B;
using ddp_kernels::wgmma_align_1024;
using ddp_kernels::wgmma_commit;
using ddp_kernels::wgmma_desc;
using ddp_kernels::wgmma_fence;
using ddp_kernels::wgmma_fence_proxy;
using ddp_kernels::wgmma_hold;
using ddp_kernels::wgmma_rs;
using ddp_kernels::wgmma_ss;
using ddp_kernels::wgmma_wait;

typedef __nv_bfloat16 bf16;

constexpr int kWgRows = 128, kWgKeys = 64, kWgThreads = 256;
constexpr float kWgLog2e = 1.4426950408889634f, kWgLn2 = 0.6931471805599453f;

/* Chunk c (8 elements) of row r of a ROWS x HS tile: column block c / 8 (ROWS rows of 64
 * elements), then the row, then the chunk swapped by the row's place in its 8-row group. */
template <int ROWS> __device__ inline bf16 *wg_chunk(bf16 *tile, int r, int c)
{
    return tile + (c / 8) * ROWS * 64 + r * 64 + (((c % 8) ^ (r % 8)) * 8);
}

/* ROWS rows from row0 of a head (g: its row 0, stride ld) into a tile; rows at or past `valid`
 * zero-filled. Every thread of the block issues its share. */
template <int HS, int ROWS>
__device__ inline void wg_load_tile(bf16 *tile, const bf16 *g, int64_t ld, int64_t row0, int64_t valid)
{
    constexpr int kChunks = HS / 8;
    for (int i = threadIdx.x; i < ROWS * kChunks; i += kWgThreads) {
        const int r = i / kChunks, c = i % kChunks;
        const bool in = r < valid;
        cp_async_16(wg_chunk<ROWS>(tile, r, c), in ? g + (row0 + r) * ld + c * 8 : g, in ? 16 : 0);
    }
}

/* The K-major descriptor of columns 16s .. 16s + 15 of rows r0 .. of a ROWS-row tile: 8-row groups
 * 1024 bytes apart, the 16 columns 32 bytes into their 128-byte rows. */
template <int ROWS> __device__ inline uint64_t k_major_desc(bf16 *tile, int r0, int s)
{
    return wgmma_desc(tile + (s / 4) * ROWS * 64 + r0 * 64 + (s % 4) * 16, 16, 1024, WGMMA_SWIZZLE_128B);
}

/* The MN-major descriptor of key rows 16kk .. 16kk + 15 of a value tile: the HS columns in blocks of
 * 64 (LBO apart), 8-key groups 1024 bytes apart. */
__device__ inline uint64_t value_desc(bf16 *tile, int kk)
{
    return wgmma_desc(tile + kk * 16 * 64, kWgKeys * 128, 1024, WGMMA_SWIZZLE_128B);
}

/* Row of accumulator element i for this thread, in a warp whose 16 rows start at r0; column of
 * element i of n-tile n (the fragment of mma.sync and of a warp's rows of a wgmma). */
__device__ inline int64_t wg_row(int64_t r0, int i) { return r0 + ((threadIdx.x & 31) >> 2) + 8 * (i >> 1); }
__device__ inline int wg_col(int n, int i) { return 8 * n + 2 * (threadIdx.x & 3) + (i & 1); }

/* Adds to acc = this warpgroup's 64 rows of a 128-row tile times a 64-row tile, transposed (64 x 64,
 * a product over HS): the wgmmas alone, for the caller to fence before and commit after. */
template <int HS> __device__ inline void add_xyt(float (&acc)[32], bf16 *rows, int wg, bf16 *tile)
{
    DDP_UNROLL
    for (int kk = 0; kk < HS / 16; kk++)
        wgmma_ss<64, 0, 0>(acc, k_major_desc<kWgRows>(rows, 64 * wg, kk), k_major_desc<kWgKeys>(tile, 0, kk), kk > 0);
}

/* Issues the scores s = Q·Kᵀ of the forward as one commit group, and does not wait. */
template <int HS> __device__ inline void issue_scores(float (&s)[32], bf16 *sq, int wg, bf16 *sk)
{
    wgmma_fence();
    add_xyt<HS>(s, sq, wg, sk);
    wgmma_commit();
}

/* Issues the backward's two products as one commit group, s = X·Yᵀ and dp = dX·dYᵀ (dQ: Q·Kᵀ and
 * dO·Vᵀ; dK/dV: K·Qᵀ and V·dOᵀ), and does not wait. */
template <int HS>
__device__ inline void issue_scores_and_dp(float (&s)[32], float (&dp)[32], bf16 *x, bf16 *dx, int wg, bf16 *y,
                                           bf16 *dy)
{
    wgmma_fence();
    add_xyt<HS>(s, x, wg, y);
    add_xyt<HS>(dp, dx, wg, dy);
    wgmma_commit();
}

/* P (the values in s, rounded to bf16) as the A-register fragments of a product over its 64 columns. */
__device__ inline void pack_p(uint32_t (&p)[4][4], const float (&s)[32])
{
    DDP_UNROLL
    for (int kk = 0; kk < 4; kk++) {
        DDP_UNROLL
        for (int r = 0; r < 4; r++) p[kk][r] = pack_bf16x2(s[8 * kk + 2 * r], s[8 * kk + 2 * r + 1]);
        wgmma_hold(p[kk]);
    }
}

/* Issues acc += P (packed in p) times a 64-row tile read MN-major, as one commit group, and does not
 * wait: the caller waits, holding acc and p untouched until then. */
template <int HS> __device__ inline void issue_pv(float (&acc)[HS / 2], uint32_t (&p)[4][4], bf16 *tile)
{
    wgmma_hold(acc);
    wgmma_fence();
    DDP_UNROLL
    for (int kk = 0; kk < 4; kk++) wgmma_rs<HS, 1>(acc, p[kk], value_desc(tile, kk), 1);
    wgmma_commit();
}

/* The pipelined passes' step after a tile's own products are issued: issues the previous tile's
 * register-A product (acc += p times tile), or on the first tile an empty commit group in its
 * place, and waits for the group before it, so the tile's own products have landed while that one
 * may run on. The waits are then the same on every tile: behind a conditional wait ptxas serialises
 * the kernel's wgmma (its note C7515), and the overlap is gone. */
template <int HS>
__device__ inline void issue_previous_and_wait(float (&acc)[HS / 2], uint32_t (&p)[4][4], bf16 *tile, bool first)
{
    if (first)
        wgmma_commit();
    else
        issue_pv<HS>(acc, p, tile);
    wgmma_wait<1>();
}

/* Holds a product's accumulators and A registers past the wait_group that lands it. */
template <int HS> __device__ inline void hold_pv(float (&acc)[HS / 2], uint32_t (&p)[4][4])
{
    wgmma_hold(acc);
    DDP_UNROLL
    for (int kk = 0; kk < 4; kk++) wgmma_hold(p[kk]);
}

/* Masks a tile of scores (scaled by c into base 2) and folds it into the running maximum m and sum l
 * of this thread's two rows; s becomes the tile's probabilities, alpha the factor by which the
 * output so far must be rescaled. attention_tc.cu's forward, for one m16 tile. */
__device__ inline void online_softmax(float (&s)[32], float (&m)[2], float (&l)[2], float (&alpha)[2],
                                      const attn_args &a, int64_t b, int64_t r0, int64_t j, int64_t q0,
                                      int64_t start_hi, float c)
{
    const bool diagonal = j * kWgKeys + kWgKeys - 1 > q0;
    DDP_UNROLL
    for (int n = 0; n < 8; n++)
        DDP_UNROLL
        for (int i = 0; i < 4; i++)
            s[4 * n + i] = diagonal && j * kWgKeys + wg_col(n, i) > wg_row(r0, i) ? -INFINITY : s[4 * n + i] * c;
    if (j * kWgKeys < start_hi) /* packed rows: keys before a row's document start are another's */
        for (int r = 0; r < 2; r++) {
            const int64_t row = wg_row(r0, 2 * r);
            const int64_t lo = row < a.T ? attn_doc_start(a, b, row) - j * kWgKeys : 0;
            for (int n = 0; n < 8; n++)
                for (int i = 2 * r; i < 2 * r + 2; i++)
                    if (wg_col(n, i) < lo) s[4 * n + i] = -INFINITY;
        }
    DDP_UNROLL
    for (int r = 0; r < 2; r++) {
        float mx = m[r];
        for (int n = 0; n < 8; n++) mx = fmaxf(mx, fmaxf(s[4 * n + 2 * r], s[4 * n + 2 * r + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float mx_safe = mx == -INFINITY ? 0.0f : mx; /* a packed row may see no key of a tile */
        alpha[r] = exp2f(m[r] - mx_safe);
        m[r] = mx;
        l[r] *= alpha[r];
        for (int n = 0; n < 8; n++)
            for (int i = 2 * r; i < 2 * r + 2; i++) {
                s[4 * n + i] = exp2f(s[4 * n + i] - mx_safe);
                l[r] += s[4 * n + i];
            }
    }
}

/* o (this thread's two rows of the output) times alpha, row by row. */
template <int HS> __device__ inline void rescale(float (&o)[HS / 2], const float (&alpha)[2])
{
    DDP_UNROLL
    for (int n = 0; n < HS / 8; n++)
        DDP_UNROLL
        for (int i = 0; i < 4; i++) o[4 * n + i] *= alpha[i >> 1];
}

/* What the forward and dQ blocks share: their (128 query rows, head), this thread's rows, the key
 * tiles they walk (first .. last: from the first row's document, up to the diagonal) and the head's
 * K and V. Blocks with the most tiles to walk come first. */
template <int HS> struct wg_block {
    int64_t bh, b, h, q0, r0, first, last, start_hi; /* start_hi: the largest document start of this
                                                       * thread's rows (0 unpacked) */
    int wg;
    const bf16 *K, *V;
    __device__ wg_block(const attn_args &a, int64_t n_tiles)
    {
        const int64_t BH = a.B * a.NH, tile = n_tiles - 1 - (int64_t)blockIdx.x / BH;
        bh = (int64_t)blockIdx.x % BH, b = bh / a.NH, h = bh % a.NH, q0 = tile * kWgRows;
        const int64_t kvh = h / (a.NH / a.NKV), q_end = q0 + kWgRows < a.T ? q0 + kWgRows : a.T;
        K = static_cast<const bf16 *>(a.k) + b * a.T * a.ld_kv + kvh * HS;
        V = static_cast<const bf16 *>(a.v) + b * a.T * a.ld_kv + kvh * HS;
        const int warp = threadIdx.x >> 5;
        wg = warp >> 2;
        r0 = q0 + warp * 16;
        last = (q_end - 1) / kWgKeys;
        first = attn_doc_start(a, b, q0) / kWgKeys;
        start_hi = 0;
        for (int r = 0; r < 2; r++) {
            const int64_t row = wg_row(r0, 2 * r), start = row < a.T ? attn_doc_start(a, b, row) : 0;
            start_hi = start > start_hi ? start : start_hi;
        }
    }
    /* Queues the first key and value tiles (into stage 0), after whatever the caller queued. */
    __device__ void load_first(const attn_args &a, bf16 *sk, bf16 *sv) const
    {
        wg_load_tile<HS, kWgKeys>(sk, K, a.ld_kv, first * kWgKeys, a.T - first * kWgKeys);
        wg_load_tile<HS, kWgKeys>(sv, V, a.ld_kv, first * kWgKeys, a.T - first * kWgKeys);
        cp_async_commit();
    }
    /* Key tile j's step of a pipeline of STAGES tile buffers, tile j in stage (j - first) % STAGES:
     * queues tile j + 1 into its stage (the caller's barriers say that no one reads it any more),
     * waits for tile j (and everything queued before it), makes it visible to wgmma and to the
     * block; returns j's stage. */
    template <int STAGES> __device__ int arrive(const attn_args &a, int64_t j, bf16 *sk, bf16 *sv) const
    {
        const int buf = (int)((j - first) % STAGES), next = (buf + 1) % STAGES;
        if (j < last) {
            const int64_t k0 = (j + 1) * kWgKeys;
            wg_load_tile<HS, kWgKeys>(sk + next * kWgKeys * HS, K, a.ld_kv, k0, a.T - k0);
            wg_load_tile<HS, kWgKeys>(sv + next * kWgKeys * HS, V, a.ld_kv, k0, a.T - k0);
        }
        cp_async_commit();
        cp_async_wait<1>();
        wgmma_fence_proxy();
        __syncthreads();
        return buf;
    }
};

/* The forward and dQ overlap each tile's element-wise work with tensor-core work, as
 * FlashAttention-3's intra-warpgroup pipeline: at key tile j the forward issues S_j = Q·K_jᵀ, then O
 * += P_{j-1}·V_{j-1}, waits for S_j alone and computes P_j while the second product runs, then waits
 * for it and rescales O (dQ likewise with S_j, dP_j and dQ += dS_{j-1}·K_{j-1}). Tile j - 1's buffers
 * are read beside tile j's while tile j + 1 loads: three stages of K/V buffers. */
constexpr int kWgStages = 3;

template <int HS>
__global__ void __launch_bounds__(kWgThreads) ddp_flash_forward_wgmma_kernel(attn_args a, int64_t n_tiles)
{
    constexpr int kStages = kWgStages;
    DDP_DYNAMIC_SHARED(char, smem_raw);
    bf16 *sq = reinterpret_cast<bf16 *>(wgmma_align_1024(smem_raw)), *sk = sq + kWgRows * HS;
    bf16 *sv = sk + kStages * kWgKeys * HS;
    const wg_block<HS> blk(a, n_tiles);
    const int64_t b = blk.b, h = blk.h, bh = blk.bh, q0 = blk.q0, r0 = blk.r0;
    wg_load_tile<HS, kWgRows>(sq, static_cast<const bf16 *>(a.q) + b * a.T * a.ld_q + h * HS, a.ld_q, q0, a.T - q0);
    blk.load_first(a, sk, sv);
    float o[HS / 2] = {}, m_row[2] = {-INFINITY, -INFINITY}, l_row[2] = {};
    uint32_t p[4][4] = {}; /* P_{j-1}, packed */
    const float c = a.scale * kWgLog2e;
    int prev = 0; /* tile j - 1's stage */
    for (int64_t j = blk.first; j <= blk.last; j++) {
        const int buf = blk.template arrive<kStages>(a, j, sk, sv);
        float s[32], alpha[2];
        issue_scores<HS>(s, sq, blk.wg, sk + buf * kWgKeys * HS);
        issue_previous_and_wait<HS>(o, p, sv + prev * kWgKeys * HS, j == blk.first); /* O += P_{j-1}·V_{j-1} */
        wgmma_hold(s);
        online_softmax(s, m_row, l_row, alpha, a, b, r0, j, q0, blk.start_hi, c);
        wgmma_wait<0>();
        hold_pv<HS>(o, p);
        rescale<HS>(o, alpha);
        pack_p(p, s);
        prev = buf;
        __syncthreads(); /* V_{j-1} and K_j read: the next iteration's loads overwrite tile j - 1's stage */
    }
    issue_pv<HS>(o, p, sv + prev * kWgKeys * HS); /* the last tile's P·V */
    wgmma_wait<0>();
    hold_pv<HS>(o, p);
    bf16 *O = static_cast<bf16 *>(a.o) + b * a.T * a.ld_o + h * HS;
    for (int r = 0; r < 2; r++) {
        float l = l_row[r];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        const float inv = 1.0f / l;
        const int64_t row = wg_row(r0, 2 * r);
        if (row >= a.T) continue;
        if ((threadIdx.x & 3) == 0) a.lse_out[bh * a.T + row] = (m_row[r] + log2f(l)) * kWgLn2;
        for (int n = 0; n < HS / 8; n++)
            *reinterpret_cast<__nv_bfloat162 *>(O + row * a.ld_o + wg_col(n, 0)) =
                __floats2bfloat162_rn(o[4 * n + 2 * r] * inv, o[4 * n + 2 * r + 1] * inv);
    }
    cp_async_wait<0>();
}

/* ---- backward: dQ ----------------------------------------------------------------------------
 * A block per (128 query rows, head) walks the key tiles up to the diagonal, as the forward, in its
 * pipeline; per tile S and dP = dO·Vᵀ in one batch of wgmmas, P = exp2(S·c - lse₂) (0 where masked),
 * dS = P·(dP - drow), and dQ += dS·K with dS from registers and K read MN-major, as V in the
 * forward. dQ is stored times the scale; the dK/dV pass (below) does the rest of the backward. */
template <int HS>
__global__ void __launch_bounds__(kWgThreads) ddp_flash_dq_wgmma_kernel(attn_args a, int64_t n_tiles)
{
    DDP_DYNAMIC_SHARED(char, smem_raw);
    bf16 *sq = reinterpret_cast<bf16 *>(wgmma_align_1024(smem_raw)), *sdo = sq + kWgRows * HS;
    bf16 *sk = sdo + kWgRows * HS, *sv = sk + kWgStages * kWgKeys * HS;
    float *s_lse2 = reinterpret_cast<float *>(sv + kWgStages * kWgKeys * HS), *s_drow = s_lse2 + kWgRows;
    const wg_block<HS> blk(a, n_tiles);
    const int64_t b = blk.b, h = blk.h, bh = blk.bh, q0 = blk.q0, r0 = blk.r0;
    wg_load_tile<HS, kWgRows>(sq, static_cast<const bf16 *>(a.q) + b * a.T * a.ld_q + h * HS, a.ld_q, q0, a.T - q0);
    wg_load_tile<HS, kWgRows>(sdo, static_cast<const bf16 *>(a.dout) + b * a.T * a.ld_o + h * HS, a.ld_o, q0,
                              a.T - q0);
    blk.load_first(a, sk, sv);
    for (int r = threadIdx.x; r < kWgRows; r += kWgThreads) { /* published by the loop's first barrier */
        const bool in = q0 + r < a.T;
        s_lse2[r] = in ? a.lse_in[bh * a.T + q0 + r] * kWgLog2e : INFINITY;
        s_drow[r] = in ? a.drow[bh * a.T + q0 + r] : 0.0f;
    }
    const int lrow = (threadIdx.x >> 5) * 16 + ((threadIdx.x & 31) >> 2); /* this thread's rows: lrow, +8 */
    float dq[HS / 2] = {};
    uint32_t ds[4][4] = {}; /* dS_{j-1}, packed */
    const float c = a.scale * kWgLog2e;
    int prev = 0; /* tile j - 1's stage */
    for (int64_t j = blk.first; j <= blk.last; j++) {
        const int buf = blk.template arrive<kWgStages>(a, j, sk, sv);
        float s[32], dp[32];
        issue_scores_and_dp<HS>(s, dp, sq, sdo, blk.wg, sk + buf * kWgKeys * HS, sv + buf * kWgKeys * HS);
        issue_previous_and_wait<HS>(dq, ds, sk + prev * kWgKeys * HS, j == blk.first); /* dQ += dS_{j-1}·K_{j-1} */
        wgmma_hold(s);
        wgmma_hold(dp);
        const bool diagonal = j * kWgKeys + kWgKeys - 1 > q0, before = j * kWgKeys < blk.start_hi;
        DDP_UNROLL
        for (int n = 0; n < 8; n++)
            DDP_UNROLL
            for (int e = 0; e < 4; e++) {
                const int64_t row = wg_row(r0, e);
                bool masked = diagonal && j * kWgKeys + wg_col(n, e) > row;
                if (before && row < a.T) /* packed rows: keys before a row's document start */
                    masked = masked || j * kWgKeys + wg_col(n, e) < attn_doc_start(a, b, row);
                const float p = masked ? 0.0f : exp2f(s[4 * n + e] * c - s_lse2[lrow + 8 * (e >> 1)]);
                s[4 * n + e] = p * (dp[4 * n + e] - s_drow[lrow + 8 * (e >> 1)]);
            }
        wgmma_wait<0>();
        hold_pv<HS>(dq, ds);
        pack_p(ds, s);
        prev = buf;
        __syncthreads(); /* K_{j-1} and tile j read: the next iteration's loads overwrite tile j - 1's stage */
    }
    issue_pv<HS>(dq, ds, sk + prev * kWgKeys * HS); /* the last tile's dS·K */
    wgmma_wait<0>();
    hold_pv<HS>(dq, ds);
    bf16 *dQ = static_cast<bf16 *>(a.dq) + b * a.T * a.ld_q + h * HS;
    for (int r = 0; r < 2; r++) {
        const int64_t row = wg_row(r0, 2 * r);
        if (row >= a.T) continue;
        for (int n = 0; n < HS / 8; n++)
            *reinterpret_cast<__nv_bfloat162 *>(dQ + row * a.ld_q + wg_col(n, 0)) =
                __floats2bfloat162_rn(dq[4 * n + 2 * r] * a.scale, dq[4 * n + 2 * r + 1] * a.scale);
    }
    cp_async_wait<0>();
}

/* ---- backward: dK and dV ----------------------------------------------------------------------
 * A block per (128 key rows, K/V head), as attention_tc.cu's pass but with the roles of the forward's
 * tiles swapped: the block's K and V rows are the A operands (each warpgroup 64 keys) and 64-row query
 * tiles stream through as B. For every query head sharing the K/V head, it walks the query tiles from
 * the one holding its first key up to the one holding its last key's document end (T unpacked), each
 * with its dO rows, base-2 log-sum-exps, row dots and document starts, double-buffered. Per tile: Sᵀ =
 * K·Qᵀ and dPᵀ = V·dOᵀ in one batch, Pᵀ = exp2(Sᵀ·c - lse₂) (0 past the diagonal or before the query's
 * document start), dV += Pᵀ·dO and dK += dSᵀ·Q with Pᵀ and dSᵀ = Pᵀ·(dPᵀ - drow) from registers and
 * dO and Q read MN-major. Accumulated in registers: no atomics, the same bits every run. */

/* Query tile i of head h into a buffer: its rows and dO rows (tiles), and per row its base-2
 * log-sum-exp, row dot and document start (+inf, 0 and 0 for rows past T). */
template <int HS>
__device__ inline void wg_load_query_side(const attn_args &a, int64_t b, int64_t h, int64_t i, bf16 *sq, bf16 *sdo,
                                          float *slse, float *sdrow, int32_t *sstart)
{
    const int64_t q0 = i * kWgKeys, bh = b * a.NH + h;
    wg_load_tile<HS, kWgKeys>(sq, static_cast<const bf16 *>(a.q) + b * a.T * a.ld_q + h * HS, a.ld_q, q0, a.T - q0);
    wg_load_tile<HS, kWgKeys>(sdo, static_cast<const bf16 *>(a.dout) + b * a.T * a.ld_o + h * HS, a.ld_o, q0,
                              a.T - q0);
    for (int r = threadIdx.x; r < kWgKeys; r += kWgThreads) {
        const bool in = q0 + r < a.T;
        slse[r] = in ? a.lse_in[bh * a.T + q0 + r] * kWgLog2e : INFINITY;
        sdrow[r] = in ? a.drow[bh * a.T + q0 + r] : 0.0f;
        sstart[r] = in ? (int32_t)attn_doc_start(a, b, q0 + r) : 0;
    }
}

/* The smem layout of one dK/dV block: K and V (128 rows each), then two buffers each of Q, dO (64
 * rows), the log-sum-exps, row dots and document starts. */
template <int HS> struct wg_dkdv_smem {
    bf16 *k, *v, *q, *dout;
    float *lse2, *drow;
    int32_t *start;
    __device__ explicit wg_dkdv_smem(char *raw)
    {
        k = reinterpret_cast<bf16 *>(wgmma_align_1024(raw)), v = k + kWgRows * HS, q = v + kWgRows * HS;
        dout = q + 2 * kWgKeys * HS;
        lse2 = reinterpret_cast<float *>(dout + 2 * kWgKeys * HS), drow = lse2 + 2 * kWgKeys;
        start = reinterpret_cast<int32_t *>(drow + 2 * kWgKeys);
    }
    static constexpr size_t bytes = 1024 + (size_t)(2 * kWgRows + 4 * kWgKeys) * HS * sizeof(bf16) +
                                    6 * kWgKeys * sizeof(float);
};

template <int HS>
__global__ void __launch_bounds__(kWgThreads) ddp_flash_dkdv_wgmma_kernel(attn_args a)
{
    DDP_DYNAMIC_SHARED(char, smem_raw);
    const wg_dkdv_smem<HS> sm(smem_raw);
    const int64_t BKV = a.B * a.NKV, ktile = (int64_t)blockIdx.x / BKV, bkv = (int64_t)blockIdx.x % BKV;
    const int64_t b = bkv / a.NKV, kvh = bkv % a.NKV, group = a.NH / a.NKV, k0 = ktile * kWgRows;
    /* no query past its last key's document end (ends never decrease along a row) sees a key here */
    const int64_t q_end = attn_doc_end(a, b, (k0 + kWgRows < a.T ? k0 + kWgRows : a.T) - 1);
    const int64_t q_first = k0 / kWgKeys, n_q = (q_end + kWgKeys - 1) / kWgKeys - q_first, items = group * n_q;
    const int warp = threadIdx.x >> 5, wg = warp >> 2;
    const int key = warp * 16 + ((threadIdx.x & 31) >> 2); /* this thread's keys in the block: key, key + 8 */
    const int64_t kv_off = b * a.T * a.ld_kv + kvh * HS;
    wg_load_tile<HS, kWgRows>(sm.k, static_cast<const bf16 *>(a.k) + kv_off, a.ld_kv, k0, a.T - k0);
    wg_load_tile<HS, kWgRows>(sm.v, static_cast<const bf16 *>(a.v) + kv_off, a.ld_kv, k0, a.T - k0);
    wg_load_query_side<HS>(a, b, kvh * group, q_first, sm.q, sm.dout, sm.lse2, sm.drow, sm.start);
    cp_async_commit();
    float dk[HS / 2] = {}, dv[HS / 2] = {};
    const float c = a.scale * kWgLog2e;
    for (int64_t it = 0; it < items; it++) {
        const int buf = (int)(it & 1), nb = buf ^ 1;
        if (it + 1 < items)
            wg_load_query_side<HS>(a, b, kvh * group + (it + 1) / n_q, q_first + (it + 1) % n_q,
                                   sm.q + nb * kWgKeys * HS, sm.dout + nb * kWgKeys * HS, sm.lse2 + nb * kWgKeys,
                                   sm.drow + nb * kWgKeys, sm.start + nb * kWgKeys);
        cp_async_commit();
        cp_async_wait<1>();
        wgmma_fence_proxy();
        __syncthreads();
        bf16 *q = sm.q + buf * kWgKeys * HS, *dout = sm.dout + buf * kWgKeys * HS;
        const float *lse2 = sm.lse2 + buf * kWgKeys, *drow = sm.drow + buf * kWgKeys;
        const int32_t *start = sm.start + buf * kWgKeys;
        float s[32], dp[32];
        issue_scores_and_dp<HS>(s, dp, sm.k, sm.v, wg, q, dout); /* Sᵀ = K·Qᵀ, dPᵀ = V·dOᵀ */
        wgmma_wait<0>();
        wgmma_hold(s);
        wgmma_hold(dp);
        const int64_t diag = (q_first + it % n_q) * kWgKeys - k0; /* query column 0 as a key of the block */
        DDP_UNROLL
        for (int n = 0; n < 8; n++)
            DDP_UNROLL
            for (int e = 0; e < 4; e++) {
                const int col = wg_col(n, e), kb = key + 8 * (e >> 1);
                const bool masked = kb > diag + col || k0 + kb < start[col];
                s[4 * n + e] = masked ? 0.0f : exp2f(s[4 * n + e] * c - lse2[col]);
            }
        uint32_t p[4][4], ds[4][4];
        pack_p(p, s);
        issue_pv<HS>(dv, p, dout); /* dV += Pᵀ·dO, landing while dSᵀ is computed */
        DDP_UNROLL
        for (int n = 0; n < 8; n++)
            DDP_UNROLL
            for (int e = 0; e < 4; e++) dp[4 * n + e] = s[4 * n + e] * (dp[4 * n + e] - drow[wg_col(n, e)]);
        pack_p(ds, dp);
        issue_pv<HS>(dk, ds, q); /* dK += dSᵀ·Q */
        wgmma_wait<0>();
        hold_pv<HS>(dv, p);
        hold_pv<HS>(dk, ds);
        __syncthreads(); /* the next iteration's loads overwrite this buffer */
    }
    bf16 *dK = static_cast<bf16 *>(a.dk) + kv_off, *dV = static_cast<bf16 *>(a.dv) + kv_off;
    for (int r = 0; r < 2; r++) {
        const int64_t row = k0 + key + 8 * r;
        if (row >= a.T) continue;
        for (int n = 0; n < HS / 8; n++) {
            *reinterpret_cast<__nv_bfloat162 *>(dK + row * a.ld_kv + wg_col(n, 0)) =
                __floats2bfloat162_rn(dk[4 * n + 2 * r] * a.scale, dk[4 * n + 2 * r + 1] * a.scale);
            *reinterpret_cast<__nv_bfloat162 *>(dV + row * a.ld_kv + wg_col(n, 0)) =
                __floats2bfloat162_rn(dv[4 * n + 2 * r], dv[4 * n + 2 * r + 1]);
        }
    }
    cp_async_wait<0>();
}

template <int HS> static int forward_wgmma_hs(device *d, const attn_args *a, ddp_err *err)
{
    const int64_t n_tiles = (a->T + kWgRows - 1) / kWgRows;
    /* 1024: the alignment */
    const size_t smem = 1024 + (size_t)(kWgRows + 2 * kWgStages * kWgKeys) * HS * sizeof(bf16);
    const void *kernel = reinterpret_cast<const void *>(ddp_flash_forward_wgmma_kernel<HS>);
    CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    DDP_LAUNCH_OP((ddp_flash_forward_wgmma_kernel<HS>), (unsigned)(n_tiles * a->B * a->NH), kWgThreads, smem, *a,
                  n_tiles);
    return DDP_OK;
}

/* The backward's two passes: dK and dV (a block per 128 keys and K/V head), then dQ. */
template <int HS> static int backward_wgmma_hs(device *d, const attn_args *a, ddp_err *err)
{
    const int64_t n_tiles = (a->T + kWgRows - 1) / kWgRows;
    const size_t dkdv_smem = wg_dkdv_smem<HS>::bytes;
    CUDA_TRY(cudaFuncSetAttribute(reinterpret_cast<const void *>(ddp_flash_dkdv_wgmma_kernel<HS>),
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dkdv_smem));
    DDP_LAUNCH_OP((ddp_flash_dkdv_wgmma_kernel<HS>), (unsigned)(n_tiles * a->B * a->NKV), kWgThreads, dkdv_smem, *a);
    const size_t dq_smem =
        1024 + (size_t)(2 * kWgRows + 2 * kWgStages * kWgKeys) * HS * sizeof(bf16) + 2 * kWgRows * sizeof(float);
    CUDA_TRY(cudaFuncSetAttribute(reinterpret_cast<const void *>(ddp_flash_dq_wgmma_kernel<HS>),
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dq_smem));
    DDP_LAUNCH_OP((ddp_flash_dq_wgmma_kernel<HS>), (unsigned)(n_tiles * a->B * a->NH), kWgThreads, dq_smem, *a,
                  n_tiles);
    return DDP_OK;
}

extern "C" bool attention_wgmma_supports(device *d, const attn_args *a)
{
    const cuda_traits *t = device_cuda_traits(d);
    return t->cc_major == 9 && !t->attention_mma_sync && (a->hs == 64 || a->hs == 128);
}

extern "C" int attention_wgmma_forward(device *d, const attn_args *a, ddp_err *err)
{
    return a->hs == 64 ? forward_wgmma_hs<64>(d, a, err) : forward_wgmma_hs<128>(d, a, err);
}

extern "C" int attention_wgmma_backward(device *d, const attn_args *a, ddp_err *err)
{
    return a->hs == 64 ? backward_wgmma_hs<64>(d, a, err) : backward_wgmma_hs<128>(d, a, err);
}
