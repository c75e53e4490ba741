/* layernorm.cu — the CUDA code of LayerNorm, part of the transformer family (CPU: layernorm_cpu.c):
 * the forward, the forward with the residual add in front of it fused in (residual_layernorm_
 * forward), and the backward; each op's kernels and its host launcher.
 *
 * Rows of up to 1024 elements in bf16 (768 in float; GPT-2 124M and 350M) whose every row start
 * is 16-byte aligned take the warp path: one warp per row, grid-striding over rows, the row held
 * in registers (read from memory once), 16-byte loads and stores, and its sums combined by warp
 * shuffles alone: no shared memory, no block barrier. Other rows take the block path: one block per
 * row, element by element, the row re-read for each pass. Both compute the CPU code's formulas with
 * the same double sums (mean, then the centred second moment; the backward's two means), rounded
 * to float once. Doubles cost little where it matters: these kernels are memory-bound, and an H100
 * or A100 does double arithmetic at half its float rate. The sums' order is fixed by the row
 * length and the path (a lane's elements in order, then a butterfly; or block_sum's tree), never by
 * timing, and differs from the CPU's in-order sums only by double rounding (~C·2^-53 relative), so
 * each result is within one float rounding of the CPU's.
 *
 * residual_layernorm_forward rounds a + b to the tensor type, stores it and normalises the stored
 * value: exactly add then layernorm_forward, in one read of a and b and no second read of the sum.
 * The backward's dw and db are kernel_common.cuh's two-stage column sums in double: partials over
 * 64-row chunks, then each column's chunks in a fixed order.
 *
 * Arguments arrive checked (device_check_*.c) (non-empty, pointers set, a known type, res_out equal to a
 * or b or apart from both). This file must not hold other ops. */
#include "kernel_common.cuh"

using ddp_kernels::all_aligned;
using ddp_kernels::block_sum;
using ddp_kernels::from_float;
using ddp_kernels::global_index;
using ddp_kernels::grid_for;
using ddp_kernels::grid_stride;
using ddp_kernels::kBlock;
using ddp_kernels::kSumChunkRows;
using ddp_kernels::kSumLanes;
using ddp_kernels::kVec;
using ddp_kernels::load_pack;
using ddp_kernels::pack;
using ddp_kernels::row_block;
using ddp_kernels::store_pack;
using ddp_kernels::sum_chunk_partials;
using ddp_kernels::sum_chunks;
using ddp_kernels::to_float;
using ddp_kernels::vec_width;
using ddp_kernels::warp_sum;

/* LayerNorm's variance epsilon (GPT-2 / torch.nn.LayerNorm default), as layernorm_cpu.c. */
constexpr double kLayerNormEps = 1e-5;

/* The warp path's limit, in packs of kVec<E> elements per lane: C <= 1024 in bf16, 768 in float,
 * the rows that fit 64 registers per thread (scripts/kernel-resources). */
template <typename E> constexpr int kLnLanePacks = sizeof(E) == 2 ? 4 : 6;
/* The dw/db partials' access width: 8 bytes (their 2·W double sums would take more than 64
 * registers per thread at 16). */
template <typename E> constexpr int kLnPartVec = (int)(8 / sizeof(E));
constexpr unsigned kLnWarpBlock = 256; /* 8 rows at a time per block on the warp path */

/* Packs per lane for a row of C elements on the warp path, or 0 when the row takes the block path
 * (not a whole number of aligned packs, or longer than the lanes hold). */
template <typename E> static int ln_lane_packs(size_t C, std::initializer_list<const void *> ptrs)
{
    const size_t W = (size_t)kVec<E>, P = (C / W + 31) / 32;
    return vec_width<E>(C, ptrs) > 1 && P <= (size_t)kLnLanePacks<E> ? (int)P : 0;
}

/* ---- forward: warp path ----------------------------------------------------------------------
 * Lane l holds packs l, l + 32, ... (P of them; those past the row are skipped), so each load of
 * the warp covers 512 contiguous bytes. With Res, the row is round(a + b), stored to res_out
 * before it is normalised; res_out may be a or b, since each lane reads its packs before it
 * writes them. */
template <typename E, int P, bool Res>
__global__ void ddp_layernorm_forward_warp_kernel(E *out, float *mean, float *rstd, const E *inp, const E *res_b,
                                                  E *res_out, const E *w, const E *b, size_t N, size_t C)
{
    constexpr int W = kVec<E>;
    const unsigned lane = threadIdx.x & 31u;
    const size_t packs = C / W, n_warps = grid_stride() / 32;
    for (size_t r = global_index() / 32; r < N; r += n_warps) {
        pack<E, W> x[P] = {}; /* the row as stored: bf16 holds two elements per register */
        double sum = 0.0;
        DDP_UNROLL
        for (int j = 0; j < P; j++) {
            const size_t k = lane + 32 * (size_t)j;
            if (k >= packs) continue;
            x[j] = load_pack<W>(inp + r * C, k);
            if (Res) {
                const pack<E, W> u = load_pack<W>(res_b + r * C, k);
                DDP_UNROLL
                for (int q = 0; q < W; q++) x[j].v[q] = from_float<E>(to_float(x[j].v[q]) + to_float(u.v[q]));
                store_pack<W>(res_out + r * C, k, x[j]);
            }
            DDP_UNROLL
            for (int q = 0; q < W; q++) sum += (double)to_float(x[j].v[q]);
        }
        const double m = warp_sum(sum) / (double)C;
        double var = 0.0;
        DDP_UNROLL
        for (int j = 0; j < P; j++) {
            if (lane + 32 * (size_t)j >= packs) continue;
            DDP_UNROLL
            for (int q = 0; q < W; q++) {
                const double dx = (double)to_float(x[j].v[q]) - m;
                var += dx * dx;
            }
        }
        const double rs = 1.0 / sqrt(warp_sum(var) / (double)C + kLayerNormEps);
        DDP_UNROLL
        for (int j = 0; j < P; j++) {
            const size_t k = lane + 32 * (size_t)j;
            if (k >= packs) continue;
            const pack<E, W> wv = load_pack<W>(w, k), bv = load_pack<W>(b, k);
            pack<E, W> o;
            DDP_UNROLL
            for (int q = 0; q < W; q++)
                o.v[q] = from_float<E>((float)(((double)to_float(x[j].v[q]) - m) * rs * (double)to_float(wv.v[q]) +
                                               (double)to_float(bv.v[q])));
            store_pack<W>(out + r * C, k, o);
        }
        if (lane == 0) {
            mean[r] = (float)m;
            rstd[r] = (float)rs;
        }
    }
}

/* ---- forward: block path -----------------------------------------------------------------------
 * One block per row. With Res, a first pass stores round(a + b) to res_out, the row the passes
 * below read; each thread reads back only the elements it stored (the same c stride), so no barrier
 * orders them. Two passes in double (mean, then the centred second moment) so the variance never
 * suffers the E[x²] - E[x]² cancellation; the output is rounded once. */
template <typename E, bool Res>
__global__ void ddp_layernorm_forward_block_kernel(E *out, float *mean, float *rstd, const E *inp, const E *res_b,
                                                   E *res_out, const E *w, const E *b, size_t N, size_t C)
{
    __shared__ double scratch[33];
    for (size_t r = blockIdx.x; r < N; r += gridDim.x) {
        const E *x = inp + r * C;
        if (Res) {
            for (size_t c = threadIdx.x; c < C; c += blockDim.x)
                res_out[r * C + c] = from_float<E>(to_float(x[c]) + to_float(res_b[r * C + c]));
            x = res_out + r * C;
        }
        double sum = 0.0;
        for (size_t c = threadIdx.x; c < C; c += blockDim.x) sum += (double)to_float(x[c]);
        const double m = block_sum(sum, scratch) / (double)C;
        double var = 0.0;
        for (size_t c = threadIdx.x; c < C; c += blockDim.x) {
            const double dx = (double)to_float(x[c]) - m;
            var += dx * dx;
        }
        const double rs = 1.0 / sqrt(block_sum(var, scratch) / (double)C + kLayerNormEps);
        E *o = out + r * C;
        for (size_t c = threadIdx.x; c < C; c += blockDim.x)
            o[c] = from_float<E>(
                (float)(((double)to_float(x[c]) - m) * rs * (double)to_float(w[c]) + (double)to_float(b[c])));
        if (threadIdx.x == 0) {
            mean[r] = (float)m;
            rstd[r] = (float)rs;
        }
    }
}

/* Launches the warp-path kernel for P packs per lane: P from p (1 .. kLnLanePacks<E>), resolved
 * at compile time one value at a time. */
template <typename E, bool Res, int P = 1>
static int launch_forward_warp(device *d, int p, E *out, float *mean, float *rstd, const E *inp, const E *res_b,
                               E *res_out, const E *w, const E *b, size_t N, size_t C, ddp_err *err)
{
    if constexpr (P < kLnLanePacks<E>)
        if (p > P)
            return launch_forward_warp<E, Res, P + 1>(d, p, out, mean, rstd, inp, res_b, res_out, w, b, N, C, err);
    DDP_LAUNCH_OP((ddp_layernorm_forward_warp_kernel<E, P, Res>), grid_for(N, kLnWarpBlock / 32), kLnWarpBlock, 0, out,
                  mean, rstd, inp, res_b, res_out, w, b, N, C);
    return DDP_OK;
}

template <typename E, bool Res>
static int launch_forward(device *d, void *out, float *mean, float *rstd, const void *inp, const void *res_b,
                          void *res_out, const void *w, const void *b, size_t N, size_t C, ddp_err *err)
{
    E *o = static_cast<E *>(out), *ro = static_cast<E *>(res_out);
    const E *x = static_cast<const E *>(inp), *rb = static_cast<const E *>(res_b);
    const E *wt = static_cast<const E *>(w), *bs = static_cast<const E *>(b);
    const int p = ln_lane_packs<E>(C, {out, inp, res_b, res_out, w, b});
    if (p > 0) return launch_forward_warp<E, Res>(d, p, o, mean, rstd, x, rb, ro, wt, bs, N, C, err);
    DDP_LAUNCH_OP((ddp_layernorm_forward_block_kernel<E, Res>), grid_for(N, 1), row_block(C), 0, o, mean, rstd, x, rb,
                  ro, wt, bs, N, C);
    return DDP_OK;
}

extern "C" int device_cuda_layernorm_forward(device *d, tensor_dtype t, void *out, float *mean, float *rstd,
                                             const void *inp, const void *w, const void *b, int64_t N, int64_t C,
                                             ddp_err *err)
{
    DDP_DTYPE_SWITCH(t, E, return launch_forward<E, false>(d, out, mean, rstd, inp, NULL, NULL, w, b, (size_t)N,
                                                           (size_t)C, err));
    return DDP_OK;
}

extern "C" int device_cuda_residual_layernorm_forward(device *d, tensor_dtype t, void *res_out, void *ln_out,
                                                      float *mean, float *rstd, const void *a, const void *b,
                                                      const void *w, const void *bias, int64_t N, int64_t C,
                                                      ddp_err *err)
{
    DDP_DTYPE_SWITCH(t, E, return launch_forward<E, true>(d, ln_out, mean, rstd, a, b, res_out, w, bias, (size_t)N,
                                                          (size_t)C, err));
    return DDP_OK;
}

/* ---- backward: dinp ------------------------------------------------------------------------------
 * dinp += rstd·(dn - mean(dn) - x̂·mean(dn·x̂)) with dn = dout·w, both means in double; x̂ is
 * rebuilt from the saved float statistics, as on the CPU. The warp path reads the row twice (the
 * second time from L1: held in registers, dout and x would take more than 64 per thread). */
template <typename E, int P>
__global__ void ddp_layernorm_backward_warp_kernel(E *dinp, const E *dout, const E *inp, const E *w,
                                                   const float *mean, const float *rstd, size_t N, size_t C)
{
    constexpr int W = kVec<E>;
    const unsigned lane = threadIdx.x & 31u;
    const size_t packs = C / W, n_warps = grid_stride() / 32;
    for (size_t r = global_index() / 32; r < N; r += n_warps) {
        const double m = (double)mean[r], rs = (double)rstd[r];
        const E *dy = dout + r * C, *x = inp + r * C;
        double sum_dn = 0.0, sum_dn_xhat = 0.0;
        DDP_UNROLL
        for (int j = 0; j < P; j++) {
            const size_t k = lane + 32 * (size_t)j;
            if (k >= packs) continue;
            const pack<E, W> g = load_pack<W>(dy, k), v = load_pack<W>(x, k), wv = load_pack<W>(w, k);
            DDP_UNROLL
            for (int q = 0; q < W; q++) {
                const double dn = (double)to_float(g.v[q]) * (double)to_float(wv.v[q]);
                sum_dn += dn;
                sum_dn_xhat += dn * (((double)to_float(v.v[q]) - m) * rs);
            }
        }
        const double mean_dn = warp_sum(sum_dn) / (double)C, mean_dn_xhat = warp_sum(sum_dn_xhat) / (double)C;
        /* the second pass reads the row again: the warp's own recent loads, from L1 */
        DDP_UNROLL
        for (int j = 0; j < P; j++) {
            const size_t k = lane + 32 * (size_t)j;
            if (k >= packs) continue;
            const pack<E, W> g = load_pack<W>(dy, k), v = load_pack<W>(x, k), wv = load_pack<W>(w, k);
            pack<E, W> dx = load_pack<W>(dinp + r * C, k);
            DDP_UNROLL
            for (int q = 0; q < W; q++) {
                const double dn = (double)to_float(g.v[q]) * (double)to_float(wv.v[q]);
                const double xhat = ((double)to_float(v.v[q]) - m) * rs;
                dx.v[q] = from_float<E>((float)((double)to_float(dx.v[q]) + rs * (dn - mean_dn - xhat * mean_dn_xhat)));
            }
            store_pack<W>(dinp + r * C, k, dx);
        }
    }
}

/* The block path: one block per row, both means in double. */
template <typename E>
__global__ void ddp_layernorm_backward_block_kernel(E *dinp, const E *dout, const E *inp, const E *w,
                                                    const float *mean, const float *rstd, size_t N, size_t C)
{
    __shared__ double scratch[33];
    for (size_t r = blockIdx.x; r < N; r += gridDim.x) {
        const E *dy = dout + r * C, *x = inp + r * C;
        const double m = (double)mean[r], rs = (double)rstd[r];
        double sum_dn = 0.0, sum_dn_xhat = 0.0;
        for (size_t c = threadIdx.x; c < C; c += blockDim.x) {
            const double dn = (double)to_float(dy[c]) * (double)to_float(w[c]);
            sum_dn += dn;
            sum_dn_xhat += dn * (((double)to_float(x[c]) - m) * rs);
        }
        const double mean_dn = block_sum(sum_dn, scratch) / (double)C;
        const double mean_dn_xhat = block_sum(sum_dn_xhat, scratch) / (double)C;
        E *dx = dinp + r * C;
        for (size_t c = threadIdx.x; c < C; c += blockDim.x) {
            const double dn = (double)to_float(dy[c]) * (double)to_float(w[c]);
            const double xhat = ((double)to_float(x[c]) - m) * rs;
            dx[c] = from_float<E>((float)((double)to_float(dx[c]) + rs * (dn - mean_dn - xhat * mean_dn_xhat)));
        }
    }
}

template <typename E, int P = 1>
static int launch_backward_warp(device *d, int p, E *dinp, const E *dout, const E *inp, const E *w, const float *mean,
                                const float *rstd, size_t N, size_t C, ddp_err *err)
{
    if constexpr (P < kLnLanePacks<E>)
        if (p > P) return launch_backward_warp<E, P + 1>(d, p, dinp, dout, inp, w, mean, rstd, N, C, err);
    DDP_LAUNCH_OP((ddp_layernorm_backward_warp_kernel<E, P>), grid_for(N, kLnWarpBlock / 32), kLnWarpBlock, 0, dinp,
                  dout, inp, w, mean, rstd, N, C);
    return DDP_OK;
}

/* ---- backward: dw and db -------------------------------------------------------------------------
 * Column sums over all N rows: partials [n_chunks][2C] (dw's C columns, then db's), one thread per
 * (chunk, W columns: 8 bytes where aligned), then each of the 2C columns' chunks added in order. */
template <typename E, int W>
__global__ void ddp_layernorm_param_partials_kernel(double *part, const E *dout, const E *inp, const float *mean,
                                                    const float *rstd, size_t N, size_t C, size_t n_chunks)
{
    const size_t packs = C / W;
    for (size_t i = global_index(); i < n_chunks * packs; i += grid_stride()) {
        const size_t chunk = i / packs, k = i % packs;
        const size_t r_end = (chunk + 1) * kSumChunkRows < N ? (chunk + 1) * kSumChunkRows : N;
        double acc_w[W], acc_b[W];
        DDP_UNROLL
        for (int q = 0; q < W; q++) acc_w[q] = acc_b[q] = 0.0;
        for (size_t r = chunk * kSumChunkRows; r < r_end; r++) {
            const pack<E, W> g = load_pack<W>(dout + r * C, k), v = load_pack<W>(inp + r * C, k);
            const double m = (double)mean[r], rs = (double)rstd[r];
            DDP_UNROLL
            for (int q = 0; q < W; q++) {
                const double dy = (double)to_float(g.v[q]);
                acc_w[q] += dy * (((double)to_float(v.v[q]) - m) * rs);
                acc_b[q] += dy;
            }
        }
        double *row = part + chunk * 2 * C + k * W;
        DDP_UNROLL
        for (int q = 0; q < W; q++) {
            row[q] = acc_w[q];
            row[C + q] = acc_b[q];
        }
    }
}

__global__ void ddp_layernorm_param_sums_kernel(float *dw, float *db, const double *part, size_t C, size_t n_chunks)
{
    sum_chunk_partials(part, n_chunks, 2 * C, [=](size_t c, double total) {
        float *g = c < C ? dw + c : db + (c - C);
        *g = (float)((double)*g + total);
    });
}

extern "C" int device_cuda_layernorm_backward(device *d, tensor_dtype t, void *dinp, float *dw, float *db,
                                              const void *dout, const void *inp, const void *w, const float *mean,
                                              const float *rstd, int64_t N, int64_t C, ddp_err *err)
{
    const size_t rows = (size_t)N, cols = (size_t)C, n_chunks = sum_chunks(rows);
    double *part = NULL; /* [n_chunks][2C]: dw's partials, then db's */
    int rc = device_cuda_scratch(d, 2 * sizeof(double) * n_chunks * cols, (void **)&part, err);
    if (rc) return rc;
    DDP_DTYPE_SWITCH(t, E,
                     const E *dy = static_cast<const E *>(dout);
                     const E *x = static_cast<const E *>(inp);
                     const E *wt = static_cast<const E *>(w);
                     const int p = ln_lane_packs<E>(cols, {dinp, dout, inp, w});
                     if (p > 0)
                         rc = launch_backward_warp<E>(d, p, static_cast<E *>(dinp), dy, x, wt, mean, rstd, rows, cols,
                                                      err);
                     else
                         DDP_LAUNCH_OP(ddp_layernorm_backward_block_kernel<E>, grid_for(rows, 1), row_block(cols), 0,
                                       static_cast<E *>(dinp), dy, x, wt, mean, rstd, rows, cols);
                     if (rc) return rc;
                     if (cols % kLnPartVec<E> == 0 && all_aligned(8, {dout, inp}))
                         DDP_LAUNCH_OP((ddp_layernorm_param_partials_kernel<E, kLnPartVec<E>>),
                                       grid_for(n_chunks * (cols / kLnPartVec<E>), kBlock), kBlock, 0, part, dy, x,
                                       mean, rstd, rows, cols, n_chunks);
                     else
                         DDP_LAUNCH_OP((ddp_layernorm_param_partials_kernel<E, 1>), grid_for(n_chunks * cols, kBlock),
                                       kBlock, 0, part, dy, x, mean, rstd, rows, cols, n_chunks));
    DDP_LAUNCH_OP(ddp_layernorm_param_sums_kernel, grid_for(2 * cols, 32), dim3(32, kSumLanes), 0, dw, db, part, cols,
                  n_chunks);
    return DDP_OK;
}
