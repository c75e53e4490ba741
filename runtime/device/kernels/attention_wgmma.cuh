/* attention_wgmma.cuh — what Hopper's attention kernels share (attention_wgmma.cu's, whose tiles
 * arrive by cp.async, and attention_tma.cu's warp-specialised ones, whose tiles arrive by the tensor
 * memory accelerator): the tile layout, the wgmma descriptors and batches, the online softmax on an
 * accumulator fragment, a block's rows and walk over tiles, each block's shared-memory layout, and
 * each pass's per-tile step.
 *
 * Every tile is stored in the ISA's 128-byte-swizzled K-major layout: rows of 64 elements (128
 * bytes), chunk c of row r at c ^ (r % 8), an HS of 128 as two such column blocks. It serves a tile
 * as the K-major operand of a product over HS (S = Q·Kᵀ) and as the MN-major B operand of one over
 * its rows (O = P·V), so no tile is transposed; it is also what a TMA box of 64 columns lands as
 * under the 128-byte swizzle. This header must not hold kernels. */
#ifndef DDP_ATTENTION_WGMMA_CUH
#define DDP_ATTENTION_WGMMA_CUH

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

/* What a warpgroup does once a tile's products are all issued and before it waits for them: nothing,
 * or (attention_tma.cu) hand the tensor cores to the other warpgroup. */
struct no_hand_over {
    __device__ void operator()() const {}
};

/* The pipelined passes' step after a tile's own products are issued: issues the previous tile's
 * register-A product (acc += p times tile), or on the first tile an empty commit group in its
 * place, calls hand_over, and waits for the group before it, so the tile's own products have landed
 * while that one may run on. The waits are then the same on every tile: behind a conditional wait
 * ptxas serialises the kernel's wgmma (its note C7515), and the overlap is gone. */
template <int HS, class HandOver = no_hand_over>
__device__ inline void issue_previous_and_wait(float (&acc)[HS / 2], uint32_t (&p)[4][4], bf16 *tile, bool first,
                                               const HandOver &hand_over = HandOver())
{
    if (first)
        wgmma_commit();
    else
        issue_pv<HS>(acc, p, tile);
    hand_over();
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
    int64_t bh, b, h, kvh, q0, r0, first, last, start_hi; /* start_hi: the largest document start of
                                                            * this thread's rows (0 unpacked) */
    int wg;
    const bf16 *K, *V;
    __device__ wg_block(const attn_args &a, int64_t n_tiles)
    {
        const int64_t BH = a.B * a.NH, tile = n_tiles - 1 - (int64_t)blockIdx.x / BH;
        bh = (int64_t)blockIdx.x % BH, b = bh / a.NH, h = bh % a.NH, q0 = tile * kWgRows;
        kvh = h / (a.NH / a.NKV);
        const int64_t q_end = q0 + kWgRows < a.T ? q0 + kWgRows : a.T;
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

/* The forward's end: this thread's two rows of the output, o / l, stored in bf16, and their
 * natural-log log-sum-exp (m and l in base 2, summed over the row's four threads); rows past T are
 * not stored. */
template <int HS>
__device__ inline void store_output(const attn_args &a, const wg_block<HS> &blk, const float (&o)[HS / 2],
                                    const float (&m_row)[2], const float (&l_row)[2])
{
    bf16 *O = static_cast<bf16 *>(a.o) + blk.b * a.T * a.ld_o + blk.h * HS;
    for (int r = 0; r < 2; r++) {
        float l = l_row[r];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        const float inv = 1.0f / l;
        const int64_t row = wg_row(blk.r0, 2 * r);
        if (row >= a.T) continue;
        if ((threadIdx.x & 3) == 0) a.lse_out[blk.bh * a.T + row] = (m_row[r] + log2f(l)) * kWgLn2;
        for (int n = 0; n < HS / 8; n++)
            *reinterpret_cast<__nv_bfloat162 *>(O + row * a.ld_o + wg_col(n, 0)) =
                __floats2bfloat162_rn(o[4 * n + 2 * r] * inv, o[4 * n + 2 * r + 1] * inv);
    }
}

/* The forward's step at key tile j (its K in k_j) once the tile has arrived: S_j issued, then O +=
 * P_{j-1}·V_{j-1} (v_prev; nothing on the first tile), hand_over called, the softmax of S_j computed
 * while that runs; O rescaled and P_j packed once it has landed. When it returns, no product reads
 * k_j or v_prev. */
template <int HS, class HandOver = no_hand_over>
__device__ inline void forward_step(const attn_args &a, const wg_block<HS> &blk, int64_t j, bf16 *sq, bf16 *k_j,
                                    bf16 *v_prev, float c, float (&o)[HS / 2], uint32_t (&p)[4][4],
                                    float (&m_row)[2], float (&l_row)[2], const HandOver &hand_over = HandOver())
{
    float s[32], alpha[2];
    issue_scores<HS>(s, sq, blk.wg, k_j);
    issue_previous_and_wait<HS>(o, p, v_prev, j == blk.first, hand_over); /* O += P_{j-1}·V_{j-1} */
    wgmma_hold(s);
    online_softmax(s, m_row, l_row, alpha, a, blk.b, blk.r0, j, blk.q0, blk.start_hi, c);
    wgmma_wait<0>();
    hold_pv<HS>(o, p);
    rescale<HS>(o, alpha);
    pack_p(p, s);
}

/* The forward's end: the last tile's P·V (its values in v_last), then the output stored. */
template <int HS>
__device__ inline void finish_forward(const attn_args &a, const wg_block<HS> &blk, bf16 *v_last, float (&o)[HS / 2],
                                      uint32_t (&p)[4][4], const float (&m_row)[2], const float (&l_row)[2])
{
    issue_pv<HS>(o, p, v_last); /* the last tile's P·V */
    wgmma_wait<0>();
    hold_pv<HS>(o, p);
    store_output<HS>(a, blk, o, m_row, l_row);
}

/* The dQ pass's per-row inputs for this thread's two rows: the base-2 log-sum-exp and the row dot
 * (+inf and 0 for rows past T, whose probabilities are then 0). */
template <int HS>
__device__ inline void dq_row_inputs(const attn_args &a, const wg_block<HS> &blk, float (&lse2)[2], float (&drow)[2])
{
    for (int r = 0; r < 2; r++) {
        const int64_t row = wg_row(blk.r0, 2 * r);
        const bool in = row < a.T;
        lse2[r] = in ? a.lse_in[blk.bh * a.T + row] * kWgLog2e : INFINITY;
        drow[r] = in ? a.drow[blk.bh * a.T + row] : 0.0f;
    }
}

/* The dQ pass's step at key tile j once K_j and V_j (k_j, v_j) have arrived: S_j = Q·K_jᵀ and dP_j =
 * dO·V_jᵀ issued, then dQ += dS_{j-1}·K_{j-1} (k_prev; nothing on the first tile), hand_over called;
 * P_j = exp2(S_j·c - lse₂) (0 where masked) and dS_j = P_j·(dP_j - drow) computed while that runs,
 * packed into ds once it has landed. When it returns, no product reads v_j or k_prev; the next step
 * reads k_j. */
template <int HS, class HandOver = no_hand_over>
__device__ inline void dq_step(const attn_args &a, const wg_block<HS> &blk, int64_t j, bf16 *sq, bf16 *sdo,
                               bf16 *k_j, bf16 *v_j, bf16 *k_prev, float c, const float (&lse2)[2],
                               const float (&drow)[2], float (&dq)[HS / 2], uint32_t (&ds)[4][4],
                               const HandOver &hand_over = HandOver())
{
    float s[32], dp[32];
    issue_scores_and_dp<HS>(s, dp, sq, sdo, blk.wg, k_j, v_j);
    issue_previous_and_wait<HS>(dq, ds, k_prev, j == blk.first, hand_over); /* dQ += dS_{j-1}·K_{j-1} */
    wgmma_hold(s);
    wgmma_hold(dp);
    const bool diagonal = j * kWgKeys + kWgKeys - 1 > blk.q0, before = j * kWgKeys < blk.start_hi;
    DDP_UNROLL
    for (int n = 0; n < 8; n++)
        DDP_UNROLL
        for (int e = 0; e < 4; e++) {
            const int64_t row = wg_row(blk.r0, e);
            bool masked = diagonal && j * kWgKeys + wg_col(n, e) > row;
            if (before && row < a.T) /* packed rows: keys before a row's document start */
                masked = masked || j * kWgKeys + wg_col(n, e) < attn_doc_start(a, blk.b, row);
            const float p = masked ? 0.0f : exp2f(s[4 * n + e] * c - lse2[e >> 1]);
            s[4 * n + e] = p * (dp[4 * n + e] - drow[e >> 1]);
        }
    wgmma_wait<0>();
    hold_pv<HS>(dq, ds);
    pack_p(ds, s);
}

/* The dQ pass's end: the last tile's dS·K (its keys in k_last), then this thread's two rows of dQ,
 * times the scale, stored in bf16; rows past T are not stored. */
template <int HS>
__device__ inline void finish_dq(const attn_args &a, const wg_block<HS> &blk, bf16 *k_last, float (&dq)[HS / 2],
                                 uint32_t (&ds)[4][4])
{
    issue_pv<HS>(dq, ds, k_last); /* the last tile's dS·K */
    wgmma_wait<0>();
    hold_pv<HS>(dq, ds);
    bf16 *dQ = static_cast<bf16 *>(a.dq) + blk.b * a.T * a.ld_q + blk.h * HS;
    for (int r = 0; r < 2; r++) {
        const int64_t row = wg_row(blk.r0, 2 * r);
        if (row >= a.T) continue;
        for (int n = 0; n < HS / 8; n++)
            *reinterpret_cast<__nv_bfloat162 *>(dQ + row * a.ld_q + wg_col(n, 0)) =
                __floats2bfloat162_rn(dq[4 * n + 2 * r] * a.scale, dq[4 * n + 2 * r + 1] * a.scale);
    }
}

/* What the dK/dV blocks share: their (128 keys, K/V head), this thread's keys (key and key + 8 of
 * the block) and the items they walk: for every query head sharing the K/V head, the query tiles of
 * 64 from the one holding the block's first key up to the one holding its last key's document end
 * (T unpacked), item it being head kvh * group + it / n_q and tile q_first + it % n_q. */
struct dkdv_block {
    int64_t b, kvh, group, k0, q_first, n_q, items;
    int wg, key;
    __device__ explicit dkdv_block(const attn_args &a)
    {
        const int64_t BKV = a.B * a.NKV, ktile = (int64_t)blockIdx.x / BKV, bkv = (int64_t)blockIdx.x % BKV;
        b = bkv / a.NKV, kvh = bkv % a.NKV, group = a.NH / a.NKV, k0 = ktile * kWgRows;
        /* no query past its last key's document end (ends never decrease along a row) sees a key here */
        const int64_t q_end = attn_doc_end(a, b, (k0 + kWgRows < a.T ? k0 + kWgRows : a.T) - 1);
        q_first = k0 / kWgKeys, n_q = (q_end + kWgKeys - 1) / kWgKeys - q_first, items = group * n_q;
        const int warp = threadIdx.x >> 5;
        wg = warp >> 2;
        key = warp * 16 + ((threadIdx.x & 31) >> 2);
    }
    __device__ int64_t head(int64_t it) const { return kvh * group + it / n_q; }
    __device__ int64_t tile(int64_t it) const { return q_first + it % n_q; }
};

/* One query tile's per-row inputs of the dK/dV pass: base-2 log-sum-exps, row dots and document
 * starts (+inf, 0 and 0 for rows past T). */
struct dkdv_rows {
    float *lse2, *drow;
    int32_t *start;
};

/* Row r (0..63) of query tile i of head h into rows: what the dK/dV pass reads of it besides Q and dO. */
__device__ inline void dkdv_load_row(const attn_args &a, int64_t b, int64_t h, int64_t i, int r, const dkdv_rows &rows)
{
    const int64_t q = i * kWgKeys + r, bh = b * a.NH + h;
    const bool in = q < a.T;
    rows.lse2[r] = in ? a.lse_in[bh * a.T + q] * kWgLog2e : INFINITY;
    rows.drow[r] = in ? a.drow[bh * a.T + q] : 0.0f;
    rows.start[r] = in ? (int32_t)attn_doc_start(a, b, q) : 0;
}

/* The smem layout of one dK/dV block: K and V (128 rows each), then STAGES buffers each of Q, dO (64
 * rows), the log-sum-exps, row dots and document starts. */
template <int HS, int STAGES> struct wg_dkdv_smem {
    bf16 *k, *v, *q, *dout;
    float *lse2, *drow;
    int32_t *start;
    __device__ explicit wg_dkdv_smem(char *raw)
    {
        k = reinterpret_cast<bf16 *>(wgmma_align_1024(raw)), v = k + kWgRows * HS, q = v + kWgRows * HS;
        dout = q + STAGES * kWgKeys * HS;
        lse2 = reinterpret_cast<float *>(dout + STAGES * kWgKeys * HS), drow = lse2 + STAGES * kWgKeys;
        start = reinterpret_cast<int32_t *>(drow + STAGES * kWgKeys);
    }
    __device__ bf16 *q_of(int s) const { return q + s * kWgKeys * HS; }
    __device__ bf16 *dout_of(int s) const { return dout + s * kWgKeys * HS; }
    __device__ dkdv_rows rows_of(int s) const
    {
        return dkdv_rows{lse2 + s * kWgKeys, drow + s * kWgKeys, start + s * kWgKeys};
    }
    static constexpr size_t bytes = 1024 + (size_t)(2 * kWgRows + 2 * STAGES * kWgKeys) * HS * sizeof(bf16) +
                                    3 * STAGES * kWgKeys * sizeof(float);
};

/* The dK/dV pass's step at item it once its query tile (q, dout, rows) has arrived: Sᵀ = K·Qᵀ and
 * dPᵀ = V·dOᵀ in one batch, Pᵀ = exp2(Sᵀ·c - lse₂) (0 past the diagonal or before the query's
 * document start), dV += Pᵀ·dO issued and landing while dSᵀ = Pᵀ·(dPᵀ - drow) is computed, then dK
 * += dSᵀ·Q. When it returns, no product reads the query tile. */
template <int HS>
__device__ inline void dkdv_step(const dkdv_block &blk, int64_t it, bf16 *sk, bf16 *sv, bf16 *q, bf16 *dout,
                                 const dkdv_rows &rows, float c, float (&dk)[HS / 2], float (&dv)[HS / 2])
{
    float s[32], dp[32];
    issue_scores_and_dp<HS>(s, dp, sk, sv, blk.wg, q, dout); /* Sᵀ = K·Qᵀ, dPᵀ = V·dOᵀ */
    wgmma_wait<0>();
    wgmma_hold(s);
    wgmma_hold(dp);
    const int64_t diag = blk.tile(it) * kWgKeys - blk.k0; /* query column 0 as a key of the block */
    DDP_UNROLL
    for (int n = 0; n < 8; n++)
        DDP_UNROLL
        for (int e = 0; e < 4; e++) {
            const int col = wg_col(n, e), kb = blk.key + 8 * (e >> 1);
            const bool masked = kb > diag + col || blk.k0 + kb < rows.start[col];
            s[4 * n + e] = masked ? 0.0f : exp2f(s[4 * n + e] * c - rows.lse2[col]);
        }
    uint32_t p[4][4], ds[4][4];
    pack_p(p, s);
    issue_pv<HS>(dv, p, dout); /* dV += Pᵀ·dO, landing while dSᵀ is computed */
    DDP_UNROLL
    for (int n = 0; n < 8; n++)
        DDP_UNROLL
        for (int e = 0; e < 4; e++) dp[4 * n + e] = s[4 * n + e] * (dp[4 * n + e] - rows.drow[wg_col(n, e)]);
    pack_p(ds, dp);
    issue_pv<HS>(dk, ds, q); /* dK += dSᵀ·Q */
    wgmma_wait<0>();
    hold_pv<HS>(dv, p);
    hold_pv<HS>(dk, ds);
}

/* The dK/dV pass's end: this thread's two keys of dK (times the scale) and dV, stored in bf16; keys
 * past T are not stored. */
template <int HS>
__device__ inline void store_dkdv(const attn_args &a, const dkdv_block &blk, const float (&dk)[HS / 2],
                                  const float (&dv)[HS / 2])
{
    const int64_t kv_off = blk.b * a.T * a.ld_kv + blk.kvh * HS;
    bf16 *dK = static_cast<bf16 *>(a.dk) + kv_off, *dV = static_cast<bf16 *>(a.dv) + kv_off;
    for (int r = 0; r < 2; r++) {
        const int64_t row = blk.k0 + blk.key + 8 * r;
        if (row >= a.T) continue;
        for (int n = 0; n < HS / 8; n++) {
            *reinterpret_cast<__nv_bfloat162 *>(dK + row * a.ld_kv + wg_col(n, 0)) =
                __floats2bfloat162_rn(dk[4 * n + 2 * r] * a.scale, dk[4 * n + 2 * r + 1] * a.scale);
            *reinterpret_cast<__nv_bfloat162 *>(dV + row * a.ld_kv + wg_col(n, 0)) =
                __floats2bfloat162_rn(dv[4 * n + 2 * r], dv[4 * n + 2 * r + 1]);
        }
    }
}

/* The forward and dQ overlap each tile's element-wise work with tensor-core work, as
 * FlashAttention-3's intra-warpgroup pipeline: at key tile j the forward issues S_j = Q·K_jᵀ, then O
 * += P_{j-1}·V_{j-1}, waits for S_j alone and computes P_j while the second product runs, then waits
 * for it and rescales O (dQ likewise with S_j, dP_j and dQ += dS_{j-1}·K_{j-1}). Tile j - 1's buffers
 * are read beside tile j's while tile j + 1 loads: three stages of K/V buffers. */
constexpr int kWgStages = 3;

/* The smem layout of one forward or dQ block: its 128 query rows (Q; in the dQ pass, DOUT, dO's
 * after them), then kWgStages stages of a key tile's K and of its V. */
template <int HS, bool DOUT> struct wg_query_smem {
    bf16 *q, *dout, *k, *v;
    __device__ explicit wg_query_smem(char *raw)
    {
        q = reinterpret_cast<bf16 *>(wgmma_align_1024(raw)), dout = DOUT ? q + kWgRows * HS : nullptr;
        k = q + (DOUT ? 2 : 1) * kWgRows * HS, v = k + kWgStages * kWgKeys * HS;
    }
    __device__ bf16 *k_of(int s) const { return k + s * kWgKeys * HS; }
    __device__ bf16 *v_of(int s) const { return v + s * kWgKeys * HS; }
    /* 1024: the alignment (the TMA kernels' mbarriers are static shared memory) */
    static constexpr size_t bytes = 1024 + (size_t)((DOUT ? 2 : 1) * kWgRows + 2 * kWgStages * kWgKeys) * HS *
                                               sizeof(bf16);
};

#endif
