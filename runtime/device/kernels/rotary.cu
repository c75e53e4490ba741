/* rotary.cu — the CUDA code of the rotary block's ops (CPU: rotary_cpu.c): RMSNorm (forward, with the
 * residual add in front of it fused in, backward), RoPE's rotation and its inverse, and SwiGLU's
 * gate; each op's kernels and its host launcher.
 *
 * Kept simple: RMSNorm takes one block per row (grid-striding over rows), element by element,
 * with the CPU code's double sums combined by block_sum's fixed tree, each result rounded to
 * float once; the sums' order differs from the CPU's in-order sums only by double rounding, so
 * each result is within one float rounding of the CPU's. residual_rmsnorm_forward rounds a + b to
 * the tensor type, stores it and normalises the stored value: exactly add then rmsnorm_forward.
 * The backward's dw is kernel_common.cuh's two-stage column sum in double (partials over 64-row
 * chunks, then each column's chunks in a fixed order): no atomics. RoPE gives each thread one
 * (row, head, pair): its two products of floats are exact in double, so the rotated values are
 * the CPU's bits (a contracted FMA rounds the same exact difference once). SwiGLU gives each
 * thread one (row, column) in float, with the CPU code's non-cancelling sigmoid. Every index is
 * size_t, so tensors past INT_MAX elements are fine.
 *
 * Arguments arrive checked (device_check_rotary.c): non-empty, pointers set, a known type, res_out
 * equal to a or b or apart from both, norm_out and h apart from their inputs. This file must not
 * hold other ops. */
#include "kernel_common.cuh"

using ddp_kernels::block_sum;
using ddp_kernels::from_float;
using ddp_kernels::global_index;
using ddp_kernels::grid_for;
using ddp_kernels::grid_stride;
using ddp_kernels::kBlock;
using ddp_kernels::kSumChunkRows;
using ddp_kernels::kSumLanes;
using ddp_kernels::row_block;
using ddp_kernels::sum_chunk_partials;
using ddp_kernels::sum_chunks;
using ddp_kernels::to_float;

/* ---- RMSNorm forward -------------------------------------------------------------------------
 * One block per row. With Res, a first pass stores round(a + b) to res_out (each thread reads
 * its own elements of a and b before writing them, so res_out may be either) and the barrier makes
 * it the row the passes below read. */
template <typename E, bool Res>
__global__ void ddp_rmsnorm_forward_kernel(E *out, float *rstd, const E *inp, const E *res_b, E *res_out, const E *w,
                                           size_t N, size_t C, double eps)
{
    __shared__ double scratch[33];
    for (size_t r = blockIdx.x; r < N; r += gridDim.x) {
        const E *x = inp + r * C;
        if (Res) {
            for (size_t c = threadIdx.x; c < C; c += blockDim.x)
                res_out[r * C + c] = from_float<E>(to_float(x[c]) + to_float(res_b[r * C + c]));
            __syncthreads();
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

template <typename E, bool Res>
static int launch_rmsnorm_forward(device *d, void *out, float *rstd, const void *inp, const void *res_b,
                                  void *res_out, const void *w, size_t N, size_t C, float eps, ddp_err *err)
{
    DDP_LAUNCH_OP((ddp_rmsnorm_forward_kernel<E, Res>), grid_for(N, 1), row_block(C), 0, static_cast<E *>(out), rstd,
                  static_cast<const E *>(inp), static_cast<const E *>(res_b), static_cast<E *>(res_out),
                  static_cast<const E *>(w), N, C, (double)eps);
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
 * double: one block per row. */
template <typename E>
__global__ void ddp_rmsnorm_backward_kernel(E *dinp, const E *dout, const E *inp, const E *w, const float *rstd,
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

/* dw's stage 1: part[chunk][c] = the chunk's rows of dout·x·r added in order, one thread per
 * (chunk, column): neighbouring threads read neighbouring columns of a row. */
template <typename E>
__global__ void ddp_rmsnorm_dw_partials_kernel(double *part, const E *dout, const E *inp, const float *rstd, size_t N,
                                               size_t C, size_t n_chunks)
{
    for (size_t i = global_index(); i < n_chunks * C; i += grid_stride()) {
        const size_t chunk = i / C, c = i % C;
        const size_t r_end = (chunk + 1) * kSumChunkRows < N ? (chunk + 1) * kSumChunkRows : N;
        double acc = 0.0;
        for (size_t r = chunk * kSumChunkRows; r < r_end; r++)
            acc += (double)to_float(dout[r * C + c]) * ((double)to_float(inp[r * C + c]) * (double)rstd[r]);
        part[i] = acc;
    }
}

__global__ void ddp_rmsnorm_dw_sums_kernel(float *dw, const double *part, size_t C, size_t n_chunks)
{
    sum_chunk_partials(part, n_chunks, C, [=](size_t c, double total) { dw[c] = (float)((double)dw[c] + total); });
}

extern "C" int device_cuda_rmsnorm_backward(device *d, tensor_dtype t, void *dinp, float *dw, const void *dout,
                                            const void *inp, const void *w, const float *rstd, int64_t N, int64_t C,
                                            ddp_err *err)
{
    const size_t rows = (size_t)N, cols = (size_t)C, n_chunks = sum_chunks(rows);
    double *part = NULL; /* [n_chunks][C] */
    int rc = device_cuda_scratch(d, sizeof(double) * n_chunks * cols, (void **)&part, err);
    if (rc) return rc;
    DDP_DTYPE_SWITCH(t, E,
                     const E *dy = static_cast<const E *>(dout);
                     const E *x = static_cast<const E *>(inp);
                     DDP_LAUNCH_OP(ddp_rmsnorm_backward_kernel<E>, grid_for(rows, 1), row_block(cols), 0,
                                   static_cast<E *>(dinp), dy, x, static_cast<const E *>(w), rstd, rows, cols);
                     DDP_LAUNCH_OP(ddp_rmsnorm_dw_partials_kernel<E>, grid_for(n_chunks * cols, kBlock), kBlock, 0,
                                   part, dy, x, rstd, rows, cols, n_chunks));
    DDP_LAUNCH_OP(ddp_rmsnorm_dw_sums_kernel, grid_for(cols, 32), dim3(32, kSumLanes), 0, dw, part, cols, n_chunks);
    return DDP_OK;
}

/* ---- RoPE ------------------------------------------------------------------------------------
 * One thread per (row, head, pair j): element i = ((row·n_heads + h)·half + j). The angle is the
 * row's position: t, or t minus its document's start in packed rows (clamped into [0, t], so a
 * bad start rotates by a wrong angle rather than reading outside the tables; the CPU backend
 * refuses it). sign -1 turns the rotation back (rope_backward). */
template <typename E>
__global__ void ddp_rope_kernel(E *x, size_t ld, size_t T, size_t n_heads, size_t half, size_t n_pairs,
                                const float *cos, const float *sin, const int32_t *doc_start, double sign)
{
    for (size_t i = global_index(); i < n_pairs; i += grid_stride()) {
        const size_t j = i % half, head_row = i / half, h = head_row % n_heads, row = head_row / n_heads;
        const size_t t = row % T;
        const size_t first = doc_start ? (size_t)min((long long)t, max(0LL, (long long)doc_start[row])) : 0;
        const size_t k = (t - first) * half + j;
        E *v = x + row * ld + h * 2 * half;
        const double c = (double)cos[k], s = sign * (double)sin[k];
        const double x1 = (double)to_float(v[j]), x2 = (double)to_float(v[j + half]);
        v[j] = from_float<E>((float)(x1 * c - x2 * s));
        v[j + half] = from_float<E>((float)(x2 * c + x1 * s));
    }
}

static int launch_rope(device *d, tensor_dtype t, void *x, int64_t ld, int64_t B, int64_t T, int64_t n_heads,
                       int64_t hs, const float *cos, const float *sin, const int32_t *doc_start, double sign,
                       ddp_err *err)
{
    const size_t half = (size_t)hs / 2, n_pairs = (size_t)B * (size_t)T * (size_t)n_heads * half;
    DDP_DTYPE_SWITCH(t, E,
                     DDP_LAUNCH_OP(ddp_rope_kernel<E>, grid_for(n_pairs, kBlock), kBlock, 0, static_cast<E *>(x),
                                   (size_t)ld, (size_t)T, (size_t)n_heads, half, n_pairs, cos, sin, doc_start, sign));
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
 * One thread per (row r, column j) of h. σ(g) and 1 - σ(g) as quotients of positive terms
 * (e = exp(-|g|) <= 1), as rotary_cpu.c: neither cancels. */
__device__ inline void sigmoid_pair(float g, float *s, float *one_minus_s)
{
    const float e = expf(-fabsf(g)), inv = 1.0f / (1.0f + e);
    *s = g >= 0.0f ? inv : e * inv;
    *one_minus_s = g >= 0.0f ? e * inv : inv;
}

template <typename E>
__global__ void ddp_swiglu_forward_kernel(E *h, const E *gate_up, size_t N, size_t F)
{
    for (size_t i = global_index(); i < N * F; i += grid_stride()) {
        const size_t r = i / F, j = i % F;
        const float g = to_float(gate_up[r * 2 * F + j]), u = to_float(gate_up[r * 2 * F + F + j]);
        float s, sc;
        sigmoid_pair(g, &s, &sc);
        h[i] = from_float<E>(g * s * u);
    }
}

/* d/dg silu(g) = σ·(1 + g·(1 - σ)), d/du = silu(g). Each thread reads its gate and up values
 * before it writes their gradients in their places, so dgate_up may be gate_up itself. */
template <typename E>
__global__ void ddp_swiglu_backward_kernel(E *dgate_up, const E *dh, const E *gate_up, size_t N, size_t F)
{
    for (size_t i = global_index(); i < N * F; i += grid_stride()) {
        const size_t r = i / F, j = i % F, ig = r * 2 * F + j, iu = ig + F;
        const float g = to_float(gate_up[ig]), u = to_float(gate_up[iu]), dy = to_float(dh[i]);
        float s, sc;
        sigmoid_pair(g, &s, &sc);
        dgate_up[ig] = from_float<E>(dy * u * (s * (1.0f + g * sc)));
        dgate_up[iu] = from_float<E>(dy * (g * s));
    }
}

extern "C" int device_cuda_swiglu_forward(device *d, tensor_dtype t, void *h, const void *gate_up, int64_t N,
                                          int64_t F, ddp_err *err)
{
    const size_t n = (size_t)N * (size_t)F;
    DDP_DTYPE_SWITCH(t, E,
                     DDP_LAUNCH_OP(ddp_swiglu_forward_kernel<E>, grid_for(n, kBlock), kBlock, 0, static_cast<E *>(h),
                                   static_cast<const E *>(gate_up), (size_t)N, (size_t)F));
    return DDP_OK;
}

extern "C" int device_cuda_swiglu_backward(device *d, tensor_dtype t, void *dgate_up, const void *dh,
                                           const void *gate_up, int64_t N, int64_t F, ddp_err *err)
{
    const size_t n = (size_t)N * (size_t)F;
    DDP_DTYPE_SWITCH(t, E,
                     DDP_LAUNCH_OP(ddp_swiglu_backward_kernel<E>, grid_for(n, kBlock), kBlock, 0,
                                   static_cast<E *>(dgate_up), static_cast<const E *>(dh),
                                   static_cast<const E *>(gate_up), (size_t)N, (size_t)F));
    return DDP_OK;
}
