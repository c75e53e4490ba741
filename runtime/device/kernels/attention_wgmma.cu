/* attention_wgmma.cu — causal flash attention's forward and backward on Hopper's warpgroup
 * instructions (sm_90a; built for sm_90a alone, taken on compute capability 9.0 devices): bf16
 * storage, fp32 accumulation, head sizes 64 and 128, the same algorithm, masks and outputs as
 * attention_tc.cu's mma.sync kernels; the launchers choose between this file's kernels and
 * attention_tma.cu's warp-specialised ones, which run the same per-tile steps.
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
    DDP_DYNAMIC_SHARED(char, smem_raw);
    const wg_query_smem<HS, false> sm(smem_raw);
    const wg_block<HS> blk(a, n_tiles);
    wg_load_tile<HS, kWgRows>(sm.q, static_cast<const bf16 *>(a.q) + blk.b * a.T * a.ld_q + blk.h * HS, a.ld_q,
                              blk.q0, a.T - blk.q0);
    blk.load_first(a, sm.k, sm.v);
    float o[HS / 2] = {}, m_row[2] = {-INFINITY, -INFINITY}, l_row[2] = {};
    uint32_t p[4][4] = {}; /* P_{j-1}, packed */
    const float c = a.scale * kWgLog2e;
    int prev = 0; /* tile j - 1's stage */
    for (int64_t j = blk.first; j <= blk.last; j++) {
        const int buf = blk.template arrive<kWgStages>(a, j, sm.k, sm.v);
        forward_step<HS>(a, blk, j, sm.q, sm.k_of(buf), sm.v_of(prev), c, o, p, m_row, l_row);
        prev = buf;
        __syncthreads(); /* V_{j-1} and K_j read: the next iteration's loads overwrite tile j - 1's stage */
    }
    finish_forward<HS>(a, blk, sm.v_of(prev), o, p, m_row, l_row);
    cp_async_wait<0>();
}

/* ---- backward: dQ ----------------------------------------------------------------------------
 * A block per (128 query rows, head) walks the key tiles up to the diagonal, as the forward, in its
 * pipeline (attention_wgmma.cuh's dq_step): per tile S and dP = dO·Vᵀ in one batch of wgmmas, P =
 * exp2(S·c - lse₂) (0 where masked), dS = P·(dP - drow), and dQ += dS·K with dS from registers and K
 * read MN-major, as V in the forward. dQ is stored times the scale; the dK/dV pass (below) does the
 * rest of the backward. */
template <int HS>
__global__ void __launch_bounds__(kWgThreads) ddp_flash_dq_wgmma_kernel(attn_args a, int64_t n_tiles)
{
    DDP_DYNAMIC_SHARED(char, smem_raw);
    const wg_query_smem<HS, true> sm(smem_raw);
    const wg_block<HS> blk(a, n_tiles);
    wg_load_tile<HS, kWgRows>(sm.q, static_cast<const bf16 *>(a.q) + blk.b * a.T * a.ld_q + blk.h * HS, a.ld_q,
                              blk.q0, a.T - blk.q0);
    wg_load_tile<HS, kWgRows>(sm.dout, static_cast<const bf16 *>(a.dout) + blk.b * a.T * a.ld_o + blk.h * HS, a.ld_o,
                              blk.q0, a.T - blk.q0);
    blk.load_first(a, sm.k, sm.v);
    float lse2[2], drow[2], dq[HS / 2] = {};
    dq_row_inputs<HS>(a, blk, lse2, drow);
    uint32_t ds[4][4] = {}; /* dS_{j-1}, packed */
    const float c = a.scale * kWgLog2e;
    int prev = 0; /* tile j - 1's stage */
    for (int64_t j = blk.first; j <= blk.last; j++) {
        const int buf = blk.template arrive<kWgStages>(a, j, sm.k, sm.v);
        dq_step<HS>(a, blk, j, sm.q, sm.dout, sm.k_of(buf), sm.v_of(buf), sm.k_of(prev), c, lse2, drow, dq, ds);
        prev = buf;
        __syncthreads(); /* K_{j-1} and tile j read: the next iteration's loads overwrite tile j - 1's stage */
    }
    finish_dq<HS>(a, blk, sm.k_of(prev), dq, ds);
    cp_async_wait<0>();
}

/* ---- backward: dK and dV ----------------------------------------------------------------------
 * A block per (128 key rows, K/V head), as attention_tc.cu's pass but with the roles of the forward's
 * tiles swapped: the block's K and V rows are the A operands (each warpgroup 64 keys) and 64-row query
 * tiles stream through as B, double-buffered, each with its dO rows, base-2 log-sum-exps, row dots
 * and document starts (attention_wgmma.cuh's dkdv_block says which, dkdv_step what each does).
 * Accumulated in registers: no atomics, the same bits every run. */

/* Query tile i of head h into a buffer: its rows and dO rows (tiles) by cp.async, its per-row inputs
 * by plain stores. */
template <int HS>
__device__ inline void wg_load_query_side(const attn_args &a, int64_t b, int64_t h, int64_t i, bf16 *sq, bf16 *sdo,
                                          const dkdv_rows &rows)
{
    const int64_t q0 = i * kWgKeys;
    wg_load_tile<HS, kWgKeys>(sq, static_cast<const bf16 *>(a.q) + b * a.T * a.ld_q + h * HS, a.ld_q, q0, a.T - q0);
    wg_load_tile<HS, kWgKeys>(sdo, static_cast<const bf16 *>(a.dout) + b * a.T * a.ld_o + h * HS, a.ld_o, q0,
                              a.T - q0);
    for (int r = threadIdx.x; r < kWgKeys; r += kWgThreads)
        dkdv_load_row(a, b, h, i, r, rows);
}

template <int HS>
__global__ void __launch_bounds__(kWgThreads) ddp_flash_dkdv_wgmma_kernel(attn_args a)
{
    DDP_DYNAMIC_SHARED(char, smem_raw);
    const wg_dkdv_smem<HS, 2> sm(smem_raw);
    const dkdv_block blk(a);
    const int64_t kv_off = blk.b * a.T * a.ld_kv + blk.kvh * HS;
    wg_load_tile<HS, kWgRows>(sm.k, static_cast<const bf16 *>(a.k) + kv_off, a.ld_kv, blk.k0, a.T - blk.k0);
    wg_load_tile<HS, kWgRows>(sm.v, static_cast<const bf16 *>(a.v) + kv_off, a.ld_kv, blk.k0, a.T - blk.k0);
    wg_load_query_side<HS>(a, blk.b, blk.head(0), blk.tile(0), sm.q, sm.dout, sm.rows_of(0));
    cp_async_commit();
    float dk[HS / 2] = {}, dv[HS / 2] = {};
    const float c = a.scale * kWgLog2e;
    for (int64_t it = 0; it < blk.items; it++) {
        const int buf = (int)(it & 1), nb = buf ^ 1;
        if (it + 1 < blk.items)
            wg_load_query_side<HS>(a, blk.b, blk.head(it + 1), blk.tile(it + 1), sm.q_of(nb), sm.dout_of(nb),
                                   sm.rows_of(nb));
        cp_async_commit();
        cp_async_wait<1>();
        wgmma_fence_proxy();
        __syncthreads();
        dkdv_step<HS>(blk, it, sm.k, sm.v, sm.q_of(buf), sm.dout_of(buf), sm.rows_of(buf), c, dk, dv);
        __syncthreads(); /* the next iteration's loads overwrite this buffer */
    }
    store_dkdv<HS>(a, blk, dk, dv);
    cp_async_wait<0>();
}

template <int HS> static int forward_wgmma_hs(device *d, const attn_args *a, ddp_err *err)
{
    const int64_t n_tiles = (a->T + kWgRows - 1) / kWgRows;
    const size_t smem = wg_query_smem<HS, false>::bytes;
    const int rc = allow_smem(reinterpret_cast<const void *>(ddp_flash_forward_wgmma_kernel<HS>), smem, err);
    if (rc != DDP_OK)
        return rc;
    DDP_LAUNCH_OP((ddp_flash_forward_wgmma_kernel<HS>), (unsigned)(n_tiles * a->B * a->NH), kWgThreads, smem, *a,
                  n_tiles);
    return DDP_OK;
}

/* The backward's first pass: dK and dV, a block per 128 keys and K/V head. */
template <int HS> static int dkdv_wgmma_hs(device *d, const attn_args *a, ddp_err *err)
{
    const int64_t n_tiles = (a->T + kWgRows - 1) / kWgRows;
    const size_t smem = wg_dkdv_smem<HS, 2>::bytes;
    const int rc = allow_smem(reinterpret_cast<const void *>(ddp_flash_dkdv_wgmma_kernel<HS>), smem, err);
    if (rc != DDP_OK)
        return rc;
    DDP_LAUNCH_OP((ddp_flash_dkdv_wgmma_kernel<HS>), (unsigned)(n_tiles * a->B * a->NKV), kWgThreads, smem, *a);
    return DDP_OK;
}

/* The backward's second pass: dQ, a block per 128 query rows and head, its tiles fed by cp.async. */
template <int HS> static int dq_wgmma_hs(device *d, const attn_args *a, ddp_err *err)
{
    const int64_t n_tiles = (a->T + kWgRows - 1) / kWgRows;
    const size_t smem = wg_query_smem<HS, true>::bytes;
    const int rc = allow_smem(reinterpret_cast<const void *>(ddp_flash_dq_wgmma_kernel<HS>), smem, err);
    if (rc != DDP_OK)
        return rc;
    DDP_LAUNCH_OP((ddp_flash_dq_wgmma_kernel<HS>), (unsigned)(n_tiles * a->B * a->NH), kWgThreads, smem, *a,
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
    if (attention_tma_supports(d, a))
        return attention_tma_backward(d, a, err);
    const int rc = a->hs == 64 ? dkdv_wgmma_hs<64>(d, a, err) : dkdv_wgmma_hs<128>(d, a, err);
    if (rc != DDP_OK)
        return rc;
    return a->hs == 64 ? dq_wgmma_hs<64>(d, a, err) : dq_wgmma_hs<128>(d, a, err);
}
