/* attention_wgmma.cu — causal flash attention's forward and backward on Hopper's warpgroup
 * instructions (sm_90a; built for sm_90a alone, taken on compute capability 9.0 devices): bf16
 * storage, fp32 accumulation, head sizes 64 and 128, the same algorithm, masks and outputs as
 * attention_tc.cu's mma.sync kernels; the launchers choose between this file's forward and
 * attention_tma.cu's warp-specialised one.
 *
 * A block of two warpgroups (8 warps) owns 128 rows of one head; each warpgroup 64 of them, a warp
 * 16. Tiles of 64 rows of the other side stream through shared memory in attention_wgmma.cuh's
 * layout, copied with cp.async one tile ahead (three stages in the forward and dQ, two in dK/dV).
 * Per tile of the forward: S by HS/16 wgmma m64n64k16 with both operands in shared memory; the
 * causal and document masks and the online softmax in base 2 on S's accumulator fragment, which is
 * mma.sync's (so the code is attention_tc.cu's); P rounded to bf16 into the A-register fragments of
 * O's four wgmma m64nHSk16, which accumulate in registers. Each batch of wgmmas is fenced, committed
 * and waited for before its results are read, and its accumulators and A registers are held
 * untouched until then; every pass keeps one batch in flight while the CUDA cores work on the
 * other's results. Ordinary shared-memory writes (cp.async) reach the wgmma's reads through a
 * proxy fence before the barrier that publishes them. Rows past T are zero-filled on load and never
 * stored; the log-sum-exp is the natural-log one the backward reads. The backward's dQ and dK/dV
 * passes follow the forward. Arguments arrive checked by attention.cu's op (and
 * attention_wgmma_supports). This file must not hold the mma.sync kernels. */
#include "attention_wgmma.cuh"

template <int HS>
__global__ void __launch_bounds__(kWgThreads) ddp_flash_forward_wgmma_kernel(attn_args a, int64_t n_tiles)
{
    constexpr int kStages = kWgStages;
    DDP_DYNAMIC_SHARED(char, smem_raw);
    bf16 *sq = reinterpret_cast<bf16 *>(wgmma_align_1024(smem_raw)), *sk = sq + kWgRows * HS;
    bf16 *sv = sk + kStages * kWgKeys * HS;
    const wg_block<HS> blk(a, n_tiles);
    wg_load_tile<HS, kWgRows>(sq, static_cast<const bf16 *>(a.q) + blk.b * a.T * a.ld_q + blk.h * HS, a.ld_q, blk.q0,
                              a.T - blk.q0);
    blk.load_first(a, sk, sv);
    float o[HS / 2] = {}, m_row[2] = {-INFINITY, -INFINITY}, l_row[2] = {};
    uint32_t p[4][4] = {}; /* P_{j-1}, packed */
    const float c = a.scale * kWgLog2e;
    int prev = 0; /* tile j - 1's stage */
    for (int64_t j = blk.first; j <= blk.last; j++) {
        const int buf = blk.template arrive<kStages>(a, j, sk, sv);
        forward_step<HS>(a, blk, j, sq, sk + buf * kWgKeys * HS, sv + prev * kWgKeys * HS, c, o, p, m_row, l_row);
        prev = buf;
        __syncthreads(); /* V_{j-1} and K_j read: the next iteration's loads overwrite tile j - 1's stage */
    }
    finish_forward<HS>(a, blk, sv + prev * kWgKeys * HS, o, p, m_row, l_row);
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
    if (attention_tma_supports(d, a))
        return attention_tma_forward(d, a, err);
    return a->hs == 64 ? forward_wgmma_hs<64>(d, a, err) : forward_wgmma_hs<128>(d, a, err);
}

extern "C" int attention_wgmma_backward(device *d, const attn_args *a, ddp_err *err)
{
    return a->hs == 64 ? backward_wgmma_hs<64>(d, a, err) : backward_wgmma_hs<128>(d, a, err);
}
