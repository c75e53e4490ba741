/* attention_tc.cu — causal flash attention on tensor cores, bf16 storage with fp32 accumulation
 * (FlashAttention-2's algorithm): the forward, and a deterministic backward in two passes.
 *
 * Each block has 4 warps; a warp owns 16·M rows of the block's tile (M m16 row tiles, so every
 * fragment of the other operand feeds M mma instructions). The other side streams in tiles of
 * kTile = 64 rows by hs = HS columns (32, 64 or 128), copied from global into shared memory with
 * cp.async, double-buffered so the next tile loads while this one computes, and read by ldmatrix
 * into mma.m16n8k16 fragments. Shared-memory tiles are XOR-swizzled by 16-byte chunk (chunk c of
 * row r lives at c ^ swizzle(r)), so the 8 rows one ldmatrix reads fall in 8 different bank
 * groups. Two products cover every step: X·Yᵀ (scores and their gradients: both operands from
 * shared memory) and P·Y (probabilities or score gradients in registers, in the accumulator
 * layout, times a tile read with ldmatrix.trans).
 *   forward: a block per (query tile, head); key tiles up to the diagonal, online softmax in base
 *     2 (exp2 of scores pre-multiplied by scale·log2 e), then O / l and the log-sum-exp.
 *   dK, dV: a block per (key tile, key/value head) walks every query tile at or after it, of every
 *     query head sharing the K/V head, accumulating in registers: no atomics.
 *   dQ: a block per (query tile, head) walks the key tiles up to the diagonal.
 * Rows past T are zero-filled on load and never stored; their log-sum-exp reads as +inf so their
 * probabilities are 0. Blocks with the most tiles to walk are scheduled first. The probabilities
 * and score gradients are rounded to bf16 for their product, as FlashAttention does.
 *
 * Packed rows (attn_shape's doc_start, doc_end; varlen attention): the forward and dQ start a
 * query tile at the key tile holding its first row's document start (starts never decrease along
 * a row), so the tiles of earlier documents are never loaded — the time packing saves — and mask
 * a key before its row's own start like one past the diagonal (checked only in tiles that begin
 * before some row of the thread starts its document). A row can meet a first tile with none of
 * its keys visible, so the online softmax exponentiates against 0 while its maximum is still
 * -inf. A key tile's dK/dV walk stops at the query tile holding its last key's document end and
 * masks a key before a query's document start (loaded with the query tile); it is an
 * instantiation of its own, as the causal one at hs 128 has no register to spare. Without packed
 * rows every bound is the causal one: the same tiles, masks and bits as before. Launchers return
 * errors, never wait. This file must not hold the SIMT kernels (attention.cu). */
#include "kernel_common.cuh"
#include "tensor_core.cuh"
#include "attention_internal.h"

using ddp_kernels::cp_async_16;
using ddp_kernels::cp_async_commit;
using ddp_kernels::cp_async_wait;
using ddp_kernels::ldmatrix_x4;
using ddp_kernels::ldmatrix_x4_trans;
using ddp_kernels::mma_m16n8k16_bf16;
using ddp_kernels::pack_bf16x2;

typedef __nv_bfloat16 bf16;

constexpr int kTile = 64, kWarps = 4, kThreads = 32 * kWarps;
constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;

/* m16 row tiles per warp: the forward and dQ take two where the registers allow (hs <= 64). */
template <int HS> struct tc_rows {
    static constexpr int M = HS <= 64 ? 2 : 1, kRows = kWarps * 16 * M;
};

/* Chunk c (8 elements) of row r of an HS-wide shared-memory tile. Rows of 128 bytes or more swap
 * chunks by r % 8; 64-byte rows (two per 128-byte bank line) by (r / 2) % 4. */
template <int HS> __device__ inline bf16 *chunk_at(bf16 *tile, int r, int c)
{
    const int swz = HS / 8 >= 8 ? (r & 7) : ((r >> 1) & (HS / 8 - 1));
    return tile + r * HS + ((c ^ swz) << 3);
}

/* ROWS rows from row0 of a head (g: its row 0, stride ld) into a tile; rows at or past `valid`
 * (rows left before T) are zero-filled. Every thread of the block issues its share. */
template <int HS, int ROWS>
__device__ inline void load_tile(bf16 *tile, const bf16 *g, int64_t ld, int64_t row0, int64_t valid)
{
    constexpr int kChunks = HS / 8;
    for (int i = threadIdx.x; i < ROWS * kChunks; i += kThreads) {
        const int r = i / kChunks, c = i % kChunks;
        const bool in = r < valid;
        cp_async_16(chunk_at<HS>(tile, r, c), in ? g + (row0 + r) * ld + c * 8 : g, in ? 16 : 0);
    }
}

/* acc (16M x 8NT, fp32 accumulator layout) = rows r0..r0+16M-1 of tile X times rows y0..y0+8NT-1
 * of tile Y, transposed: (16M x HS)·(HS x 8NT). */
template <int HS, int M, int NT = 8>
__device__ inline void mma_xyt(float acc[M][NT][4], bf16 *x, int r0, bf16 *y, int y0 = 0)
{
    const int lane = threadIdx.x & 31, m = lane >> 3;
    for (int mi = 0; mi < M; mi++)
        for (int n = 0; n < NT; n++)
            for (int i = 0; i < 4; i++) acc[mi][n][i] = 0.0f;
    for (int kk = 0; kk < HS / 16; kk++) {
        uint32_t a[M][4];
        for (int mi = 0; mi < M; mi++)
            ldmatrix_x4(a[mi], chunk_at<HS>(x, r0 + 16 * mi + (m & 1) * 8 + (lane & 7), 2 * kk + (m >> 1)));
        for (int p = 0; p < NT / 2; p++) {
            uint32_t b[4]; /* rows 16p..16p+15 of Y from y0: b[0..1] for n-tile 2p, b[2..3] for 2p+1 */
            ldmatrix_x4(b, chunk_at<HS>(y, y0 + 16 * p + (m >> 1) * 8 + (lane & 7), 2 * kk + (m & 1)));
            for (int mi = 0; mi < M; mi++) {
                mma_m16n8k16_bf16(acc[mi][2 * p], a[mi], b, acc[mi][2 * p]);
                mma_m16n8k16_bf16(acc[mi][2 * p + 1], a[mi], b + 2, acc[mi][2 * p + 1]);
            }
        }
    }
}

/* acc (16M x HS) += p (16M x 8NT, accumulator layout, rounded to bf16) · rows y0..y0+8NT-1 of
 * tile Y (8NT x HS). */
template <int HS, int M, int NT = 8>
__device__ inline void mma_py(float acc[M][HS / 8][4], const float p[M][NT][4], bf16 *y, int y0 = 0)
{
    const int lane = threadIdx.x & 31, m = lane >> 3;
    for (int kc = 0; kc < NT / 2; kc++) {
        uint32_t a[M][4];
        for (int mi = 0; mi < M; mi++) {
            a[mi][0] = pack_bf16x2(p[mi][2 * kc][0], p[mi][2 * kc][1]);
            a[mi][1] = pack_bf16x2(p[mi][2 * kc][2], p[mi][2 * kc][3]);
            a[mi][2] = pack_bf16x2(p[mi][2 * kc + 1][0], p[mi][2 * kc + 1][1]);
            a[mi][3] = pack_bf16x2(p[mi][2 * kc + 1][2], p[mi][2 * kc + 1][3]);
        }
        for (int dp = 0; dp < HS / 16; dp++) {
            uint32_t b[4]; /* columns 16dp..16dp+15 of Y: b[0..1] for n-tile 2dp, b[2..3] for 2dp+1 */
            ldmatrix_x4_trans(b, chunk_at<HS>(y, y0 + 16 * kc + (m & 1) * 8 + (lane & 7), 2 * dp + (m >> 1)));
            for (int mi = 0; mi < M; mi++) {
                mma_m16n8k16_bf16(acc[mi][2 * dp], a[mi], b, acc[mi][2 * dp]);
                mma_m16n8k16_bf16(acc[mi][2 * dp + 1], a[mi], b + 2, acc[mi][2 * dp + 1]);
            }
        }
    }
}

/* Row of accumulator element i of m-tile mi, for this thread, in a warp whose rows start at r0. */
__device__ inline int64_t acc_row(int64_t r0, int mi, int i) { return r0 + 16 * mi + ((threadIdx.x & 31) >> 2) + 8 * (i >> 1); }
/* Column of accumulator element i of n-tile n. */
__device__ inline int acc_col(int n, int i) { return 8 * n + 2 * (threadIdx.x & 3) + (i & 1); }

/* Stores the warp's rows (from r0) of acc · f[mi][half] as bf16 pairs; rows at or past T skipped. */
template <int HS, int M>
__device__ inline void store_rows(bf16 *g, int64_t ld, int64_t r0, int64_t T, const float acc[M][HS / 8][4],
                                  const float f[M][2])
{
    for (int mi = 0; mi < M; mi++)
        for (int half = 0; half < 2; half++) {
            const int64_t row = acc_row(r0, mi, 2 * half);
            if (row >= T) continue;
            for (int n = 0; n < HS / 8; n++)
                *reinterpret_cast<__nv_bfloat162 *>(g + row * ld + acc_col(n, 0)) =
                    __floats2bfloat162_rn(acc[mi][n][2 * half] * f[mi][half], acc[mi][n][2 * half + 1] * f[mi][half]);
        }
}

/* ---- forward ------------------------------------------------------------------------------- */

template <int HS> __global__ void __launch_bounds__(kThreads) ddp_flash_forward_kernel(attn_args a, int64_t n_tiles)
{
    constexpr int M = tc_rows<HS>::M, kRows = tc_rows<HS>::kRows;
    DDP_DYNAMIC_SHARED(uint4, smem_raw);
    bf16 *sq = reinterpret_cast<bf16 *>(smem_raw), *sk = sq + kRows * HS, *sv = sk + 2 * kTile * HS;
    const int64_t BH = a.B * a.NH, tile = n_tiles - 1 - (int64_t)blockIdx.x / BH, bh = (int64_t)blockIdx.x % BH;
    const int64_t b = bh / a.NH, h = bh % a.NH, kvh = h / (a.NH / a.NKV), q0 = tile * kRows;
    const bf16 *K = static_cast<const bf16 *>(a.k) + b * a.T * a.ld_kv + kvh * HS;
    const bf16 *V = static_cast<const bf16 *>(a.v) + b * a.T * a.ld_kv + kvh * HS;
    const int warp = threadIdx.x >> 5;
    const int64_t r0 = q0 + warp * 16 * M, q_end = q0 + kRows < a.T ? q0 + kRows : a.T;
    const int64_t last = (q_end - 1) / kTile; /* the last key tile any row of this tile sees */
    const int64_t first = attn_doc_start(a, b, q0) / kTile; /* the first: 0 unpacked */
    int64_t start_hi = 0; /* the largest document start of this thread's rows (0 unpacked) */
    for (int mi = 0; mi < M; mi++)
        for (int r = 0; r < 2; r++) {
            const int64_t row = acc_row(r0, mi, 2 * r), start = row < a.T ? attn_doc_start(a, b, row) : 0;
            start_hi = start > start_hi ? start : start_hi;
        }
    load_tile<HS, kRows>(sq, static_cast<const bf16 *>(a.q) + b * a.T * a.ld_q + h * HS, a.ld_q, q0, a.T - q0);
    load_tile<HS, kTile>(sk, K, a.ld_kv, first * kTile, a.T - first * kTile);
    load_tile<HS, kTile>(sv, V, a.ld_kv, first * kTile, a.T - first * kTile);
    cp_async_commit();
    float o[M][HS / 8][4] = {}, m_row[M][2], l_row[M][2] = {};
    for (int mi = 0; mi < M; mi++) m_row[mi][0] = m_row[mi][1] = -INFINITY;
    const float c = a.scale * kLog2e;
    for (int64_t j = first; j <= last; j++) {
        const int buf = (int)((j - first) & 1);
        if (j < last) {
            load_tile<HS, kTile>(sk + (buf ^ 1) * kTile * HS, K, a.ld_kv, (j + 1) * kTile, a.T - (j + 1) * kTile);
            load_tile<HS, kTile>(sv + (buf ^ 1) * kTile * HS, V, a.ld_kv, (j + 1) * kTile, a.T - (j + 1) * kTile);
        }
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        float s[M][8][4];
        mma_xyt<HS, M>(s, sq, warp * 16 * M, sk + buf * kTile * HS);
        const bool diagonal = j * kTile + kTile - 1 > q0; /* some key of it lies past some row */
        for (int mi = 0; mi < M; mi++)
            for (int n = 0; n < 8; n++)
                for (int i = 0; i < 4; i++)
                    s[mi][n][i] = diagonal && j * kTile + acc_col(n, i) > acc_row(r0, mi, i) ? -INFINITY
                                                                                             : s[mi][n][i] * c;
        if (j * kTile < start_hi) /* packed rows: keys before a row's document start are another's */
            for (int mi = 0; mi < M; mi++)
                for (int r = 0; r < 2; r++) {
                    const int64_t row = acc_row(r0, mi, 2 * r);
                    const int64_t lo = row < a.T ? attn_doc_start(a, b, row) - j * kTile : 0; /* its first column */
                    for (int n = 0; n < 8; n++)
                        for (int i = 2 * r; i < 2 * r + 2; i++)
                            if (acc_col(n, i) < lo) s[mi][n][i] = -INFINITY;
                }
        for (int mi = 0; mi < M; mi++)
            for (int r = 0; r < 2; r++) {
                float mx = m_row[mi][r];
                for (int n = 0; n < 8; n++) mx = fmaxf(mx, fmaxf(s[mi][n][2 * r], s[mi][n][2 * r + 1]));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                /* unpacked, key 0 is always visible and mx finite; a packed row may see no key of
                 * its first tiles: exponentiating against 0 then keeps its terms 0, not NaN */
                const float mx_safe = mx == -INFINITY ? 0.0f : mx;
                const float alpha = exp2f(m_row[mi][r] - mx_safe);
                m_row[mi][r] = mx;
                l_row[mi][r] *= alpha;
                for (int n = 0; n < HS / 8; n++) {
                    o[mi][n][2 * r] *= alpha;
                    o[mi][n][2 * r + 1] *= alpha;
                }
                for (int n = 0; n < 8; n++)
                    for (int i = 2 * r; i < 2 * r + 2; i++) {
                        s[mi][n][i] = exp2f(s[mi][n][i] - mx_safe);
                        l_row[mi][r] += s[mi][n][i];
                    }
            }
        mma_py<HS, M>(o, s, sv + buf * kTile * HS);
        __syncthreads(); /* the next iteration's loads overwrite this buffer */
    }
    float inv[M][2];
    for (int mi = 0; mi < M; mi++)
        for (int r = 0; r < 2; r++) {
            float l = l_row[mi][r];
            l += __shfl_xor_sync(0xffffffffu, l, 1);
            l += __shfl_xor_sync(0xffffffffu, l, 2);
            inv[mi][r] = 1.0f / l;
            const int64_t row = acc_row(r0, mi, 2 * r);
            if ((threadIdx.x & 3) == 0 && row < a.T) a.lse_out[bh * a.T + row] = (m_row[mi][r] + log2f(l)) * kLn2;
        }
    store_rows<HS, M>(static_cast<bf16 *>(a.o) + b * a.T * a.ld_o + h * HS, a.ld_o, r0, a.T, o, inv);
    cp_async_wait<0>();
}

/* ---- backward: dK and dV --------------------------------------------------------------------- */

/* A buffer's document starts (packed rows' dK/dV), 2·kTile words past its row dots: found from
 * them rather than kept as one more pointer, for which hs 128 has no register. */
__device__ inline int32_t *doc_starts(float *sdrow) { return reinterpret_cast<int32_t *>(sdrow + 2 * kTile); }
__device__ inline const int32_t *doc_starts(const float *sdrow)
{
    return reinterpret_cast<const int32_t *>(sdrow + 2 * kTile);
}

/* Query tile i of head h (its rows, dout rows, base-2 log-sum-exps, row dots and, PACKED, its
 * rows' document starts as columns of the key tile from k0, clamped into [0, kTile]) into a buffer. */
template <int HS, bool PACKED>
__device__ inline void load_query_side(const attn_args &a, int64_t b, int64_t h, int64_t i, bf16 *sq, bf16 *sdo,
                                       float *slse, float *sdrow, int64_t k0)
{
    const int64_t q0 = i * kTile, bh = b * a.NH + h;
    load_tile<HS, kTile>(sq, static_cast<const bf16 *>(a.q) + b * a.T * a.ld_q + h * HS, a.ld_q, q0, a.T - q0);
    load_tile<HS, kTile>(sdo, static_cast<const bf16 *>(a.dout) + b * a.T * a.ld_o + h * HS, a.ld_o, q0, a.T - q0);
    for (int r = threadIdx.x; r < kTile; r += kThreads) {
        const bool in = q0 + r < a.T;
        slse[r] = in ? a.lse_in[bh * a.T + q0 + r] * kLog2e : INFINITY;
        sdrow[r] = in ? a.drow[bh * a.T + q0 + r] : 0.0f;
        if (PACKED) {
            const int64_t start = in ? attn_doc_start(a, b, q0 + r) - k0 : 0;
            doc_starts(sdrow)[r] = (int32_t)(start < 0 ? 0 : start > kTile ? kTile : start);
        }
    }
}

/* PACKED (packed rows) is an instantiation of its own: at hs 128 the causal kernel uses every
 * register, and the packed one fits only by masking in int compares of columns within the tile. */
template <int HS, bool PACKED>
__global__ void __launch_bounds__(kThreads) ddp_flash_dkdv_kernel(attn_args a, int64_t n_tiles)
{
    DDP_DYNAMIC_SHARED(uint4, smem_raw);
    bf16 *sk = reinterpret_cast<bf16 *>(smem_raw), *sv = sk + kTile * HS, *sq = sv + kTile * HS;
    bf16 *sdo = sq + 2 * kTile * HS;
    float *slse = reinterpret_cast<float *>(sdo + 2 * kTile * HS), *sdrow = slse + 2 * kTile;
    const int64_t BKV = a.B * a.NKV, ktile = (int64_t)blockIdx.x / BKV, bkv = (int64_t)blockIdx.x % BKV;
    const int64_t b = bkv / a.NKV, kvh = bkv % a.NKV, group = a.NH / a.NKV, k0 = ktile * kTile;
    /* query tiles up to the one holding its last key's document end (ends never decrease along a
     * row): no later query sees a key of this tile */
    const int64_t q_end = PACKED ? attn_doc_end(a, b, (k0 + kTile < a.T ? k0 + kTile : a.T) - 1) : a.T;
    const int64_t n_q = (PACKED ? (q_end + kTile - 1) / kTile : n_tiles) - ktile;
    const int64_t items = group * n_q; /* (query head, query tile) pairs, in order */
    const int warp = threadIdx.x >> 5;
    const int64_t r0 = k0 + warp * 16; /* this warp's keys */
    const int64_t kv_off = b * a.T * a.ld_kv + kvh * HS;
    load_tile<HS, kTile>(sk, static_cast<const bf16 *>(a.k) + kv_off, a.ld_kv, k0, a.T - k0);
    load_tile<HS, kTile>(sv, static_cast<const bf16 *>(a.v) + kv_off, a.ld_kv, k0, a.T - k0);
    load_query_side<HS, PACKED>(a, b, kvh * group, ktile, sq, sdo, slse, sdrow, k0);
    cp_async_commit();
    float dk[1][HS / 8][4] = {}, dv[1][HS / 8][4] = {};
    const float c = a.scale * kLog2e;
    for (int64_t it = 0; it < items; it++) {
        const int buf = (int)(it & 1);
        const int64_t i = ktile + it % n_q;
        if (it + 1 < items)
            load_query_side<HS, PACKED>(a, b, kvh * group + (it + 1) / n_q, ktile + (it + 1) % n_q,
                                        sq + (buf ^ 1) * kTile * HS, sdo + (buf ^ 1) * kTile * HS,
                                        slse + (buf ^ 1) * kTile, sdrow + (buf ^ 1) * kTile, k0);
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        bf16 *q = sq + buf * kTile * HS, *dout = sdo + buf * kTile * HS;
        const float *lse2 = slse + buf * kTile, *drow = sdrow + buf * kTile;
        float p[1][8][4], dp[1][8][4];
        mma_xyt<HS, 1>(p, sk, warp * 16, q); /* scores transposed: this warp's keys x the tile's queries */
        const int diag = i == ktile ? 0 : kTile; /* PACKED: key column > diag + query column is masked */
        for (int n = 0; n < 8; n++)
            for (int e = 0; e < 4; e++) {
                const int col = acc_col(n, e);
                /* PACKED: the key as a column of this tile; one before the query's document start
                 * belongs to another document */
                const int key = warp * 16 + ((threadIdx.x & 31) >> 2) + 8 * (e >> 1);
                const bool masked = PACKED ? key > diag + col || key < doc_starts(drow)[col]
                                           : i == ktile && acc_row(r0, 0, e) > i * kTile + col;
                p[0][n][e] = masked ? 0.0f : exp2f(p[0][n][e] * c - lse2[col]);
            }
        mma_py<HS, 1>(dv, p, dout);            /* dV += Pᵀ·dO */
        mma_xyt<HS, 1>(dp, sv, warp * 16, dout); /* dPᵀ = V·dOᵀ */
        for (int n = 0; n < 8; n++)
            for (int e = 0; e < 4; e++) dp[0][n][e] = p[0][n][e] * (dp[0][n][e] - drow[acc_col(n, e)]);
        mma_py<HS, 1>(dk, dp, q);              /* dK += dSᵀ·Q */
        __syncthreads();
    }
    const float fk[1][2] = {{a.scale, a.scale}}, fv[1][2] = {{1.0f, 1.0f}};
    store_rows<HS, 1>(static_cast<bf16 *>(a.dk) + kv_off, a.ld_kv, r0, a.T, dk, fk);
    store_rows<HS, 1>(static_cast<bf16 *>(a.dv) + kv_off, a.ld_kv, r0, a.T, dv, fv);
    cp_async_wait<0>();
}

/* ---- backward: dQ ---------------------------------------------------------------------------- */

template <int HS> __global__ void __launch_bounds__(kThreads) ddp_flash_dq_kernel(attn_args a, int64_t n_tiles)
{
    constexpr int kNT = HS >= 128 ? 4 : 8; /* n-tiles of scores at a time: half a key tile at hs 128 (registers) */
    DDP_DYNAMIC_SHARED(uint4, smem_raw);
    bf16 *sq = reinterpret_cast<bf16 *>(smem_raw), *sdo = sq + kTile * HS, *sk = sdo + kTile * HS;
    bf16 *sv = sk + 2 * kTile * HS;
    const int64_t BH = a.B * a.NH, tile = n_tiles - 1 - (int64_t)blockIdx.x / BH, bh = (int64_t)blockIdx.x % BH;
    const int64_t b = bh / a.NH, h = bh % a.NH, kvh = h / (a.NH / a.NKV), q0 = tile * kTile;
    const bf16 *K = static_cast<const bf16 *>(a.k) + b * a.T * a.ld_kv + kvh * HS;
    const bf16 *V = static_cast<const bf16 *>(a.v) + b * a.T * a.ld_kv + kvh * HS;
    const int warp = threadIdx.x >> 5;
    const int64_t r0 = q0 + warp * 16;
    const int64_t first = attn_doc_start(a, b, q0) / kTile; /* as the forward: from the first row's document */
    int64_t start_hi = 0; /* the largest document start of this thread's rows (0 unpacked) */
    for (int r = 0; r < 2; r++) {
        const int64_t row = acc_row(r0, 0, 2 * r), start = row < a.T ? attn_doc_start(a, b, row) : 0;
        start_hi = start > start_hi ? start : start_hi;
    }
    load_tile<HS, kTile>(sq, static_cast<const bf16 *>(a.q) + b * a.T * a.ld_q + h * HS, a.ld_q, q0, a.T - q0);
    load_tile<HS, kTile>(sdo, static_cast<const bf16 *>(a.dout) + b * a.T * a.ld_o + h * HS, a.ld_o, q0, a.T - q0);
    load_tile<HS, kTile>(sk, K, a.ld_kv, first * kTile, a.T - first * kTile);
    load_tile<HS, kTile>(sv, V, a.ld_kv, first * kTile, a.T - first * kTile);
    cp_async_commit();
    __shared__ float s_lse2[kTile]; /* this tile's rows: base-2 log-sum-exp, row dot */
    __shared__ float s_drow[kTile];
    for (int r = threadIdx.x; r < kTile; r += kThreads) {
        const bool in = q0 + r < a.T;
        s_lse2[r] = in ? a.lse_in[bh * a.T + q0 + r] * kLog2e : INFINITY;
        s_drow[r] = in ? a.drow[bh * a.T + q0 + r] : 0.0f;
    }
    const int lrow = warp * 16 + ((threadIdx.x & 31) >> 2); /* this thread's rows in the tile: lrow, lrow + 8 */
    float dq[1][HS / 8][4] = {};
    const float c = a.scale * kLog2e;
    for (int64_t j = first; j <= tile; j++) {
        const int buf = (int)((j - first) & 1);
        const bool before = j * kTile < start_hi; /* some key of it lies before some row's document */
        if (j < tile) {
            load_tile<HS, kTile>(sk + (buf ^ 1) * kTile * HS, K, a.ld_kv, (j + 1) * kTile, a.T - (j + 1) * kTile);
            load_tile<HS, kTile>(sv + (buf ^ 1) * kTile * HS, V, a.ld_kv, (j + 1) * kTile, a.T - (j + 1) * kTile);
        }
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        for (int k0 = 0; k0 < kTile; k0 += 8 * kNT) { /* keys in slices of 8·kNT */
            float p[1][kNT][4], dp[1][kNT][4];
            mma_xyt<HS, 1, kNT>(p, sq, warp * 16, sk + buf * kTile * HS, k0);
            for (int n = 0; n < kNT; n++)
                for (int e = 0; e < 4; e++) {
                    const bool masked = j == tile && j * kTile + k0 + acc_col(n, e) > acc_row(r0, 0, e);
                    p[0][n][e] = masked ? 0.0f : exp2f(p[0][n][e] * c - s_lse2[lrow + 8 * (e >> 1)]);
                }
            if (before) /* packed rows: keys before a row's document start are another's */
                for (int r = 0; r < 2; r++) {
                    const int64_t row = acc_row(r0, 0, 2 * r);
                    /* the row's first visible column of this slice */
                    const int64_t lo = row < a.T ? attn_doc_start(a, b, row) - j * kTile - k0 : 0;
                    for (int n = 0; n < kNT; n++)
                        for (int e = 2 * r; e < 2 * r + 2; e++)
                            if (acc_col(n, e) < lo) p[0][n][e] = 0.0f;
                }
            mma_xyt<HS, 1, kNT>(dp, sdo, warp * 16, sv + buf * kTile * HS, k0); /* dP = dO·Vᵀ */
            for (int n = 0; n < kNT; n++)
                for (int e = 0; e < 4; e++) dp[0][n][e] = p[0][n][e] * (dp[0][n][e] - s_drow[lrow + 8 * (e >> 1)]);
            mma_py<HS, 1, kNT>(dq, dp, sk + buf * kTile * HS, k0);             /* dQ += dS·K */
        }
        __syncthreads();
    }
    const float f[1][2] = {{a.scale, a.scale}};
    store_rows<HS, 1>(static_cast<bf16 *>(a.dq) + b * a.T * a.ld_q + h * HS, a.ld_q, r0, a.T, dq, f);
    cp_async_wait<0>();
}

/* ---- launchers ------------------------------------------------------------------------------- */

static bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

extern "C" bool attention_tc_supports(device *d, const attn_args *a)
{
    if (device_cuda_traits(d)->cc_major < 8) return false;
    const void *ptrs[] = {a->q, a->k, a->v, a->out, a->dout, a->o, a->dq, a->dk, a->dv};
    for (const void *p : ptrs)
        if (p && !aligned16(p)) return false;
    return (a->hs == 32 || a->hs == 64 || a->hs == 128) && a->ld_q % 8 == 0 && a->ld_kv % 8 == 0 &&
           a->ld_o % 8 == 0;
}

template <int HS> static int forward_hs(device *d, const attn_args *a, ddp_err *err)
{
    constexpr int kRows = tc_rows<HS>::kRows;
    const int64_t n_tiles = (a->T + kRows - 1) / kRows;
    const size_t smem = (size_t)(kRows + 4 * kTile) * HS * sizeof(bf16);
    int rc = allow_smem(reinterpret_cast<const void *>(ddp_flash_forward_kernel<HS>), smem, err);
    if (rc) return rc;
    DDP_LAUNCH_OP((ddp_flash_forward_kernel<HS>), (unsigned)(n_tiles * a->B * a->NH), kThreads, smem, *a, n_tiles);
    return DDP_OK;
}

template <int HS> static int backward_hs(device *d, const attn_args *a, ddp_err *err)
{
    const int64_t n_tiles = (a->T + kTile - 1) / kTile;
    const size_t tiles = (size_t)6 * kTile * HS * sizeof(bf16);
    const size_t dkdv_smem = tiles + 4 * kTile * sizeof(float) + (a->doc_start ? 2 * kTile * sizeof(int32_t) : 0);
    const void *dkdv = a->doc_start ? reinterpret_cast<const void *>(ddp_flash_dkdv_kernel<HS, true>)
                                    : reinterpret_cast<const void *>(ddp_flash_dkdv_kernel<HS, false>);
    int rc = allow_smem(dkdv, dkdv_smem, err);
    if (!rc) rc = allow_smem(reinterpret_cast<const void *>(ddp_flash_dq_kernel<HS>), tiles, err);
    if (rc) return rc;
    if (a->doc_start)
        DDP_LAUNCH_OP((ddp_flash_dkdv_kernel<HS, true>), (unsigned)(n_tiles * a->B * a->NKV), kThreads, dkdv_smem, *a,
                      n_tiles);
    else
        DDP_LAUNCH_OP((ddp_flash_dkdv_kernel<HS, false>), (unsigned)(n_tiles * a->B * a->NKV), kThreads, dkdv_smem, *a,
                      n_tiles);
    DDP_LAUNCH_OP((ddp_flash_dq_kernel<HS>), (unsigned)(n_tiles * a->B * a->NH), kThreads, tiles, *a, n_tiles);
    return DDP_OK;
}

extern "C" int attention_tc_forward(device *d, const attn_args *a, ddp_err *err)
{
    if (attention_wgmma_supports(d, a)) return attention_wgmma_forward(d, a, err);
    return a->hs == 32 ? forward_hs<32>(d, a, err) : a->hs == 64 ? forward_hs<64>(d, a, err)
                                                                 : forward_hs<128>(d, a, err);
}

extern "C" int attention_tc_backward(device *d, const attn_args *a, ddp_err *err)
{
    if (attention_wgmma_supports(d, a)) return attention_wgmma_backward(d, a, err);
    return a->hs == 32 ? backward_hs<32>(d, a, err) : a->hs == 64 ? backward_hs<64>(d, a, err)
                                                                  : backward_hs<128>(d, a, err);
}
