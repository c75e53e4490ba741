/* rotary.cu — the CUDA code of the rotary block's ops (CPU: rotary_cpu.c): RMSNorm (forward, with the
 * residual add in front of it fused in, backward), RoPE's rotation and its inverse, and SwiGLU's
 * gate; each op's kernels and its host launcher.
 *
 * Every kernel moves 16 bytes per access where the pointers and the row lengths allow it (packs of
 * kVec elements, kernel_common.cuh) and falls back to one element per access elsewhere, with the
 * same arithmetic per element either way. RMSNorm's row path gives a row to a block of up to 512
 * threads that holds it in registers (read once, written once: C up to 16384 in bf16, 8192 in
 * float); longer or unaligned rows take the block path, which re-reads the row for each pass. Both
 * compute the CPU code's double sums, combined by block_sum's fixed tree, each result rounded to
 * float once; the sums' order differs from the CPU's in-order sums only by double rounding, so each
 * result is within one float rounding of the CPU's. residual_rmsnorm_forward rounds a + b to the
 * tensor type, stores it and normalises the stored value: exactly add then rmsnorm_forward. The
 * backward's dw is kernel_common.cuh's two-stage column sum in double (partials over 64-row chunks,
 * then each column's chunks in a fixed order): no atomics. RoPE gives each thread a pack of pairs
 * (row, head, j .. j + W - 1): its two products of floats are exact in double, so the rotated values
 * are the CPU's bits (a contracted FMA rounds the same exact difference once). SwiGLU gives each
 * thread a pack of a row's columns, in float, with the CPU code's non-cancelling sigmoid. RoPE and
 * SwiGLU split each item's index into (row, column) in 32 bits below 2^31 items (DDP_INDEX_SWITCH);
 * every element offset is size_t, so tensors past INT_MAX elements are fine.
 *
 * Arguments arrive checked (device_check_rotary.c): non-empty, pointers set, a known type, res_out
 * equal to a or b or apart from both, norm_out and h apart from their inputs. This file must not
 * hold other ops. */
#include "kernel_common.cuh"
#include "runtime/device/kernels/doc_walk.h"

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

/* RMSNorm's row path: a block of up to kRmsRowThreads threads per row, each holding at most
 * kRmsRowPacks packs of it (bf16 C <= 16384, float C <= 8192; Llama 3's rows are 2048 to 16384). */
constexpr unsigned kRmsRowThreads = 512;
constexpr int kRmsRowPacks = 4;

/* The row path's packs per thread for rows of C elements of E, and its block in *threads; 0 when
 * the row takes the block path (not a whole number of aligned packs, or longer than a block holds). */
template <typename E>
static int rms_row_packs(size_t C, std::initializer_list<const void *> ptrs, unsigned *threads)
{
    const size_t packs = C / (size_t)kVec<E>;
    *threads = row_block(packs, kRmsRowThreads);
    const size_t per_thread = packs / *threads + (packs % *threads != 0);
    return vec_width<E>(C, ptrs) > 1 && per_thread <= (size_t)kRmsRowPacks ? (int)per_thread : 0;
}

/* ---- RMSNorm forward: row path ---------------------------------------------------------------
 * Thread t holds packs t, t + blockDim, ... of the row (P of them; those past the row skipped), so
 * each load of a warp covers 512 contiguous bytes. With Res, the row is round(a + b), stored to
 * res_out before it is normalised; res_out may be a or b, since every pack is read and then written
 * by the one thread that holds it. */
template <typename E, int P, bool Res>
__global__ void __launch_bounds__(kRmsRowThreads) ddp_rmsnorm_forward_row_kernel(E *out, float *rstd, const E *inp,
                                                                                  const E *res_b, E *res_out,
                                                                                  const E *w, size_t N, size_t C,
                                                                                  double eps)
{
    constexpr int W = kVec<E>;
    __shared__ double scratch[33];
    const size_t packs = C / W;
    for (size_t r = blockIdx.x; r < N; r += gridDim.x) {
        pack<E, W> x[P] = {};
        double ss = 0.0;
        DDP_UNROLL
        for (int j = 0; j < P; j++) {
            const size_t k = threadIdx.x + (size_t)blockDim.x * j;
            if (k >= packs) continue;
            x[j] = load_pack<W>(inp + r * C, k);
            if (Res) {
                const pack<E, W> u = load_pack<W>(res_b + r * C, k);
                DDP_UNROLL
                for (int q = 0; q < W; q++) x[j].v[q] = from_float<E>(to_float(x[j].v[q]) + to_float(u.v[q]));
                store_pack<W>(res_out + r * C, k, x[j]);
            }
            DDP_UNROLL
            for (int q = 0; q < W; q++) {
                const double v = (double)to_float(x[j].v[q]);
                ss += v * v;
            }
        }
        const double rs = 1.0 / sqrt(block_sum(ss, scratch) / (double)C + eps);
        DDP_UNROLL
        for (int j = 0; j < P; j++) {
            const size_t k = threadIdx.x + (size_t)blockDim.x * j;
            if (k >= packs) continue;
            const pack<E, W> wv = load_pack<W>(w, k);
            pack<E, W> o;
            DDP_UNROLL
            for (int q = 0; q < W; q++)
                o.v[q] = from_float<E>((float)((double)to_float(x[j].v[q]) * rs * (double)to_float(wv.v[q])));
            store_pack<W>(out + r * C, k, o);
        }
        if (threadIdx.x == 0) rstd[r] = (float)rs;
    }
}

/* ---- RMSNorm forward: block path -------------------------------------------------------------
 * One block per row, element by element. With Res, a first pass stores round(a + b) to res_out
 * (each thread reads its own elements of a and b before writing them, so res_out may be either),
 * the row the passes below read; each thread reads back only the elements it stored (the same c
 * stride), so no barrier orders them. */
template <typename E, bool Res>
__global__ void ddp_rmsnorm_forward_block_kernel(E *out, float *rstd, const E *inp, const E *res_b, E *res_out,
                                                 const E *w, size_t N, size_t C, double eps)
{
    __shared__ double scratch[33];
    for (size_t r = blockIdx.x; r < N; r += gridDim.x) {
        const E *x = inp + r * C;
        if (Res) {
            for (size_t c = threadIdx.x; c < C; c += blockDim.x)
                res_out[r * C + c] = from_float<E>(to_float(x[c]) + to_float(res_b[r * C + c]));
            x = res_out + r * C;
        }
        double ss = 0.0;
        for (size_t c = threadIdx.x; c < C; c += blockDim.x) {
            const double v = (double)to_float(x[c]);
            ss += v * v;
        }
        const double rs = 1.0 / sqrt(block_sum(ss, scratch) / (double)C + eps);
        E *o = out + r * C;
        for (size_t c = threadIdx.x; c < C; c += blockDim.x)
            o[c] = from_float<E>((float)((double)to_float(x[c]) * rs * (double)to_float(w[c])));
        if (threadIdx.x == 0) rstd[r] = (float)rs;
    }
}

/* Launches the row-path kernel for P packs per thread: P from p (1 .. kRmsRowPacks), resolved at
 * compile time one value at a time. */
template <typename E, bool Res, int P = 1>
static int launch_rmsnorm_forward_row(device *d, int p, unsigned threads, E *out, float *rstd, const E *inp,
                                      const E *res_b, E *res_out, const E *w, size_t N, size_t C, double eps,
                                      ddp_err *err)
{
    if constexpr (P < kRmsRowPacks)
        if (p > P)
            return launch_rmsnorm_forward_row<E, Res, P + 1>(d, p, threads, out, rstd, inp, res_b, res_out, w, N, C,
                                                            eps, err);
    DDP_LAUNCH_OP((ddp_rmsnorm_forward_row_kernel<E, P, Res>), grid_for(N, 1), threads, 0, out, rstd, inp, res_b,
                  res_out, w, N, C, eps);
    return DDP_OK;
}

template <typename E, bool Res>
static int launch_rmsnorm_forward(device *d, void *out, float *rstd, const void *inp, const void *res_b,
                                  void *res_out, const void *w, size_t N, size_t C, float eps, ddp_err *err)
{
    E *o = static_cast<E *>(out), *ro = static_cast<E *>(res_out);
    const E *x = static_cast<const E *>(inp), *rb = static_cast<const E *>(res_b), *wt = static_cast<const E *>(w);
    unsigned threads = 0;
    const int p = rms_row_packs<E>(C, {out, inp, res_b, res_out, w}, &threads);
    if (p > 0) return launch_rmsnorm_forward_row<E, Res>(d, p, threads, o, rstd, x, rb, ro, wt, N, C, (double)eps, err);
    DDP_LAUNCH_OP((ddp_rmsnorm_forward_block_kernel<E, Res>), grid_for(N, 1), row_block(C), 0, o, rstd, x, rb, ro, wt,
                  N, C, (double)eps);
    return DDP_OK;
}

extern "C" int device_cuda_rmsnorm_forward(device *d, tensor_dtype t, void *out, float *rstd, const void *inp,
                                           const void *w, int64_t N, int64_t C, float eps, ddp_err *err)
{
    DDP_DTYPE_SWITCH(t, E, return launch_rmsnorm_forward<E, false>(d, out, rstd, inp, NULL, NULL, w, (size_t)N,
                                                                   (size_t)C, eps, err));
    return DDP_OK;
}

extern "C" int device_cuda_residual_rmsnorm_forward(device *d, tensor_dtype t, void *res_out, void *norm_out,
                                                    float *rstd, const void *a, const void *b, const void *w,
                                                    int64_t N, int64_t C, float eps, ddp_err *err)
{
    DDP_DTYPE_SWITCH(t, E, return launch_rmsnorm_forward<E, true>(d, norm_out, rstd, a, b, res_out, w, (size_t)N,
                                                                  (size_t)C, eps, err));
    return DDP_OK;
}

/* ---- RMSNorm backward ------------------------------------------------------------------------
 * dinp += r·(dn - x̂·mean(dn·x̂)) with dn = dout·w, x̂ = x·r (r the saved float rstd), the mean in
 * double. The row path holds the row's dout and x in registers between the two passes (w, shared
 * by every row, comes again from L1 or L2); the block path reads all three again. */
template <typename E, int P>
__global__ void __launch_bounds__(kRmsRowThreads) ddp_rmsnorm_backward_row_kernel(E *dinp, const E *dout,
                                                                                   const E *inp, const E *w,
                                                                                   const float *rstd, size_t N,
                                                                                   size_t C)
{
    constexpr int W = kVec<E>;
    __shared__ double scratch[33];
    const size_t packs = C / W;
    for (size_t r = blockIdx.x; r < N; r += gridDim.x) {
        const double rs = (double)rstd[r];
        pack<E, W> dy[P] = {}, x[P] = {};
        double sum = 0.0;
        DDP_UNROLL
        for (int j = 0; j < P; j++) {
            const size_t k = threadIdx.x + (size_t)blockDim.x * j;
            if (k >= packs) continue;
            dy[j] = load_pack<W>(dout + r * C, k);
            x[j] = load_pack<W>(inp + r * C, k);
            const pack<E, W> wv = load_pack<W>(w, k);
            DDP_UNROLL
            for (int q = 0; q < W; q++)
                sum += (double)to_float(dy[j].v[q]) * (double)to_float(wv.v[q]) * ((double)to_float(x[j].v[q]) * rs);
        }
        const double mean_dn_xhat = block_sum(sum, scratch) / (double)C;
        DDP_UNROLL
        for (int j = 0; j < P; j++) {
            const size_t k = threadIdx.x + (size_t)blockDim.x * j;
            if (k >= packs) continue;
            const pack<E, W> wv = load_pack<W>(w, k);
            pack<E, W> dx = load_pack<W>(dinp + r * C, k);
            DDP_UNROLL
            for (int q = 0; q < W; q++) {
                const double dn = (double)to_float(dy[j].v[q]) * (double)to_float(wv.v[q]);
                const double xhat = (double)to_float(x[j].v[q]) * rs;
                dx.v[q] = from_float<E>((float)((double)to_float(dx.v[q]) + rs * (dn - xhat * mean_dn_xhat)));
            }
            store_pack<W>(dinp + r * C, k, dx);
        }
    }
}

template <typename E>
__global__ void ddp_rmsnorm_backward_block_kernel(E *dinp, const E *dout, const E *inp, const E *w, const float *rstd,
                                                  size_t N, size_t C)
{
    __shared__ double scratch[33];
    for (size_t r = blockIdx.x; r < N; r += gridDim.x) {
        const E *dy = dout + r * C, *x = inp + r * C;
        const double rs = (double)rstd[r];
        double sum = 0.0;
        for (size_t c = threadIdx.x; c < C; c += blockDim.x)
            sum += (double)to_float(dy[c]) * (double)to_float(w[c]) * ((double)to_float(x[c]) * rs);
        const double mean_dn_xhat = block_sum(sum, scratch) / (double)C;
        E *dx = dinp + r * C;
        for (size_t c = threadIdx.x; c < C; c += blockDim.x) {
            const double dn = (double)to_float(dy[c]) * (double)to_float(w[c]), xhat = (double)to_float(x[c]) * rs;
            dx[c] = from_float<E>((float)((double)to_float(dx[c]) + rs * (dn - xhat * mean_dn_xhat)));
        }
    }
}

template <typename E, int P = 1>
static int launch_rmsnorm_backward_row(device *d, int p, unsigned threads, E *dinp, const E *dout, const E *inp,
                                       const E *w, const float *rstd, size_t N, size_t C, ddp_err *err)
{
    if constexpr (P < kRmsRowPacks)
        if (p > P) return launch_rmsnorm_backward_row<E, P + 1>(d, p, threads, dinp, dout, inp, w, rstd, N, C, err);
    DDP_LAUNCH_OP((ddp_rmsnorm_backward_row_kernel<E, P>), grid_for(N, 1), threads, 0, dinp, dout, inp, w, rstd, N, C);
    return DDP_OK;
}

/* dw's stage 1: part[chunk][c] = the chunk's rows of dout·x·r added in order, one thread per
 * (chunk, pack of W columns): neighbouring threads read neighbouring packs of a row. */
template <typename E, int W>
__global__ void ddp_rmsnorm_dw_partials_kernel(double *part, const E *dout, const E *inp, const float *rstd, size_t N,
                                               size_t C, size_t n_chunks)
{
    const size_t packs = C / W;
    for (size_t i = global_index(); i < n_chunks * packs; i += grid_stride()) {
        const size_t chunk = i / packs, k = i % packs;
        const size_t r_end = (chunk + 1) * kSumChunkRows < N ? (chunk + 1) * kSumChunkRows : N;
        double acc[W];
        DDP_UNROLL
        for (int q = 0; q < W; q++) acc[q] = 0.0;
        for (size_t r = chunk * kSumChunkRows; r < r_end; r++) {
            const pack<E, W> g = load_pack<W>(dout + r * C, k), v = load_pack<W>(inp + r * C, k);
            const double rs = (double)rstd[r];
            DDP_UNROLL
            for (int q = 0; q < W; q++) acc[q] += (double)to_float(g.v[q]) * ((double)to_float(v.v[q]) * rs);
        }
        DDP_UNROLL
        for (int q = 0; q < W; q++) part[chunk * C + k * W + q] = acc[q];
    }
}

__global__ void ddp_rmsnorm_dw_sums_kernel(float *dw, const double *part, size_t C, size_t n_chunks)
{
    sum_chunk_partials(part, n_chunks, C, [=](size_t c, double total) { dw[c] = (float)((double)dw[c] + total); });
}

template <typename E>
static int launch_rmsnorm_backward(device *d, E *dinp, float *dw, const E *dout, const E *inp, const E *w,
                                   const float *rstd, size_t N, size_t C, double *part, ddp_err *err)
{
    const size_t n_chunks = sum_chunks(N);
    unsigned threads = 0;
    const int p = rms_row_packs<E>(C, {dinp, dout, inp, w}, &threads);
    if (p > 0) {
        const int rc = launch_rmsnorm_backward_row<E>(d, p, threads, dinp, dout, inp, w, rstd, N, C, err);
        if (rc) return rc;
    } else {
        DDP_LAUNCH_OP(ddp_rmsnorm_backward_block_kernel<E>, grid_for(N, 1), row_block(C), 0, dinp, dout, inp, w, rstd,
                      N, C);
    }
    constexpr int W = kVec<E>;
    if (vec_width<E>(C, {dout, inp}) > 1)
        DDP_LAUNCH_OP((ddp_rmsnorm_dw_partials_kernel<E, W>), grid_for(n_chunks * (C / W), kBlock), kBlock, 0, part,
                      dout, inp, rstd, N, C, n_chunks);
    else
        DDP_LAUNCH_OP((ddp_rmsnorm_dw_partials_kernel<E, 1>), grid_for(n_chunks * C, kBlock), kBlock, 0, part, dout,
                      inp, rstd, N, C, n_chunks);
    DDP_LAUNCH_OP(ddp_rmsnorm_dw_sums_kernel, grid_for(C, 32), dim3(32, kSumLanes), 0, dw, part, C, n_chunks);
    return DDP_OK;
}

extern "C" int device_cuda_rmsnorm_backward(device *d, tensor_dtype t, void *dinp, float *dw, const void *dout,
                                            const void *inp, const void *w, const float *rstd, int64_t N, int64_t C,
                                            ddp_err *err)
{
    const size_t rows = (size_t)N, cols = (size_t)C;
    double *part = NULL; /* [n_chunks][C] */
    int rc = device_cuda_scratch(d, sizeof(double) * sum_chunks(rows) * cols, (void **)&part, err);
    if (rc) return rc;
    DDP_DTYPE_SWITCH(t, E,
                     return launch_rmsnorm_backward<E>(d, static_cast<E *>(dinp), dw, static_cast<const E *>(dout),
                                                       static_cast<const E *>(inp), static_cast<const E *>(w), rstd,
                                                       rows, cols, part, err));
    return DDP_OK;
}

/* ---- RoPE ------------------------------------------------------------------------------------
 * One thread per (row, head, pack of W pairs j .. j + W - 1): item i = ((row·n_heads + h)·half/W +
 * j/W). The angle is the row's position: t, or t minus its document's start in packed rows
 * (clamped into [0, t], so a bad start rotates by a wrong angle rather than reading outside the
 * tables; the CPU backend refuses it). sign -1 turns the rotation back (rope_backward). */

/* W floats of a table from element k (a multiple of W; the table 16-byte aligned when W > 1). */
template <int W> __device__ inline void load_floats(float *out, const float *p, size_t k)
{
    if constexpr (W % 4 == 0) {
        DDP_UNROLL
        for (int i = 0; i < W / 4; i++) {
            const pack<float, 4> v = load_pack<4>(p + k, (size_t)i);
            DDP_UNROLL
            for (int q = 0; q < 4; q++) out[4 * i + q] = v.v[q];
        }
    } else {
        DDP_UNROLL
        for (int q = 0; q < W; q++) out[q] = p[k + q];
    }
}

template <typename E, int W, typename I>
__global__ void ddp_rope_kernel(E *x, size_t ld, I T, I n_heads, size_t half, I n_items, const float *cos,
                                const float *sin, const int32_t *doc_start, double sign)
{
    const I half_packs = (I)(half / W);
    for (I i = (I)global_index(); i < n_items; i += (I)grid_stride()) {
        const I jp = i % half_packs, head_row = i / half_packs, h = head_row % n_heads, row = head_row / n_heads;
        const I t = row % T;
        const size_t k = (size_t)ddp_doc_offset(doc_start ? doc_start + row : NULL, (int64_t)t) * half + (size_t)jp * W;
        E *v = x + (size_t)row * ld + (size_t)h * 2 * half;
        float c[W], s[W];
        load_floats<W>(c, cos, k);
        load_floats<W>(s, sin, k);
        const pack<E, W> lo = load_pack<W>(v, jp), hi = load_pack<W>(v + half, jp);
        pack<E, W> lo_out, hi_out;
        DDP_UNROLL
        for (int q = 0; q < W; q++) {
            const double cq = (double)c[q], sq = sign * (double)s[q];
            const double x1 = (double)to_float(lo.v[q]), x2 = (double)to_float(hi.v[q]);
            lo_out.v[q] = from_float<E>((float)(x1 * cq - x2 * sq));
            hi_out.v[q] = from_float<E>((float)(x2 * cq + x1 * sq));
        }
        store_pack<W>(v, jp, lo_out);
        store_pack<W>(v + half, jp, hi_out);
    }
}

template <typename E, int W>
static int launch_rope_width(device *d, E *x, size_t ld, size_t B, size_t T, size_t n_heads, size_t half,
                             const float *cos, const float *sin, const int32_t *doc_start, double sign, ddp_err *err)
{
    const size_t n_items = B * T * n_heads * (half / W);
    DDP_INDEX_SWITCH(n_items, I,
                     DDP_LAUNCH_OP((ddp_rope_kernel<E, W, I>), grid_for(n_items, kBlock), kBlock, 0, x, ld, (I)T,
                                   (I)n_heads, half, (I)n_items, cos, sin, doc_start, sign));
    return DDP_OK;
}

static int launch_rope(device *d, tensor_dtype t, void *x, int64_t ld, int64_t B, int64_t T, int64_t n_heads,
                       int64_t hs, const float *cos, const float *sin, const int32_t *doc_start, double sign,
                       ddp_err *err)
{
    const size_t half = (size_t)hs / 2;
    DDP_DTYPE_SWITCH(t, E,
                     E *v = static_cast<E *>(x);
                     if (vec_width<E>(half, {x, cos, sin}) > 1 && (size_t)ld % (size_t)kVec<E> == 0)
                         return launch_rope_width<E, kVec<E>>(d, v, (size_t)ld, (size_t)B, (size_t)T,
                                                              (size_t)n_heads, half, cos, sin, doc_start, sign, err);
                     return launch_rope_width<E, 1>(d, v, (size_t)ld, (size_t)B, (size_t)T, (size_t)n_heads, half,
                                                    cos, sin, doc_start, sign, err));
    return DDP_OK;
}

extern "C" int device_cuda_rope_forward(device *d, tensor_dtype t, void *x, int64_t ld, int64_t B, int64_t T,
                                        int64_t n_heads, int64_t hs, const float *cos, const float *sin,
                                        const int32_t *doc_start, ddp_err *err)
{
    return launch_rope(d, t, x, ld, B, T, n_heads, hs, cos, sin, doc_start, 1.0, err);
}

extern "C" int device_cuda_rope_backward(device *d, tensor_dtype t, void *x, int64_t ld, int64_t B, int64_t T,
                                         int64_t n_heads, int64_t hs, const float *cos, const float *sin,
                                         const int32_t *doc_start, ddp_err *err)
{
    return launch_rope(d, t, x, ld, B, T, n_heads, hs, cos, sin, doc_start, -1.0, err);
}

/* ---- SwiGLU ----------------------------------------------------------------------------------
 * One thread per (row r, pack of W columns) of h. σ(g) and 1 - σ(g) as quotients of positive terms
 * (e = exp(-|g|) <= 1), as rotary_cpu.c: neither cancels. */
__device__ inline void sigmoid_pair(float g, float *s, float *one_minus_s)
{
    const float e = expf(-fabsf(g)), inv = 1.0f / (1.0f + e);
    *s = g >= 0.0f ? inv : e * inv;
    *one_minus_s = g >= 0.0f ? e * inv : inv;
}

template <typename E, int W, typename I>
__global__ void ddp_swiglu_forward_kernel(E *h, const E *gate_up, size_t F, I n_items)
{
    const I row_packs = (I)(F / W);
    for (I i = (I)global_index(); i < n_items; i += (I)grid_stride()) {
        const I r = i / row_packs, k = i % row_packs;
        const E *gu = gate_up + (size_t)r * 2 * F;
        const pack<E, W> g = load_pack<W>(gu, k), u = load_pack<W>(gu + F, k);
        pack<E, W> o;
        DDP_UNROLL
        for (int q = 0; q < W; q++) {
            const float gq = to_float(g.v[q]);
            float s, sc;
            sigmoid_pair(gq, &s, &sc);
            o.v[q] = from_float<E>(gq * s * to_float(u.v[q]));
        }
        store_pack<W>(h + (size_t)r * F, k, o);
    }
}

/* d/dg silu(g) = σ·(1 + g·(1 - σ)), d/du = silu(g). Each thread reads its gate and up packs before
 * it writes their gradients in their places, so dgate_up may be gate_up itself. */
template <typename E, int W, typename I>
__global__ void ddp_swiglu_backward_kernel(E *dgate_up, const E *dh, const E *gate_up, size_t F, I n_items)
{
    const I row_packs = (I)(F / W);
    for (I i = (I)global_index(); i < n_items; i += (I)grid_stride()) {
        const I r = i / row_packs, k = i % row_packs;
        const size_t row = (size_t)r * 2 * F;
        const pack<E, W> g = load_pack<W>(gate_up + row, k), u = load_pack<W>(gate_up + row + F, k);
        const pack<E, W> dy = load_pack<W>(dh + (size_t)r * F, k);
        pack<E, W> dg, du;
        DDP_UNROLL
        for (int q = 0; q < W; q++) {
            const float gq = to_float(g.v[q]), uq = to_float(u.v[q]), dyq = to_float(dy.v[q]);
            float s, sc;
            sigmoid_pair(gq, &s, &sc);
            dg.v[q] = from_float<E>(dyq * uq * (s * (1.0f + gq * sc)));
            du.v[q] = from_float<E>(dyq * (gq * s));
        }
        store_pack<W>(dgate_up + row, k, dg);
        store_pack<W>(dgate_up + row + F, k, du);
    }
}

/* Launches SwiGLU's forward (dh NULL) or backward over N rows of F columns, W columns a thread. */
template <typename E, int W>
static int launch_swiglu(device *d, E *out, const E *dh, const E *gate_up, size_t N, size_t F, ddp_err *err)
{
    const size_t n_items = N * (F / W);
    if (!dh)
        DDP_INDEX_SWITCH(n_items, I,
                         DDP_LAUNCH_OP((ddp_swiglu_forward_kernel<E, W, I>), grid_for(n_items, kBlock), kBlock, 0, out,
                                       gate_up, F, (I)n_items));
    else
        DDP_INDEX_SWITCH(n_items, I,
                         DDP_LAUNCH_OP((ddp_swiglu_backward_kernel<E, W, I>), grid_for(n_items, kBlock), kBlock, 0,
                                       out, dh, gate_up, F, (I)n_items));
    return DDP_OK;
}

template <typename E>
static int launch_swiglu_any(device *d, void *out, const void *dh, const void *gate_up, int64_t N, int64_t F,
                             ddp_err *err)
{
    E *o = static_cast<E *>(out);
    const E *dy = static_cast<const E *>(dh), *gu = static_cast<const E *>(gate_up);
    if (vec_width<E>((size_t)F, {out, dh, gate_up}) > 1)
        return launch_swiglu<E, kVec<E>>(d, o, dy, gu, (size_t)N, (size_t)F, err);
    return launch_swiglu<E, 1>(d, o, dy, gu, (size_t)N, (size_t)F, err);
}

extern "C" int device_cuda_swiglu_forward(device *d, tensor_dtype t, void *h, const void *gate_up, int64_t N,
                                          int64_t F, ddp_err *err)
{
    DDP_DTYPE_SWITCH(t, E, return launch_swiglu_any<E>(d, h, NULL, gate_up, N, F, err));
    return DDP_OK;
}

extern "C" int device_cuda_swiglu_backward(device *d, tensor_dtype t, void *dgate_up, const void *dh,
                                           const void *gate_up, int64_t N, int64_t F, ddp_err *err)
{
    DDP_DTYPE_SWITCH(t, E, return launch_swiglu_any<E>(d, dgate_up, dh, gate_up, N, F, err));
    return DDP_OK;
}
