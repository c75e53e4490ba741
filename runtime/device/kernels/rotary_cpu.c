/* rotary_cpu.c — the CPU code of the rotary block's ops (CUDA: rotary.cu): RMSNorm (forward, with the
 * residual add in front of it, backward), RoPE's rotation and its inverse, and SwiGLU's gate.
 *
 * OpenMP splits only independent outputs (rows; dw's column blocks, each walking every row in
 * order), so no result depends on the thread count. RMSNorm's sums run in double and each result
 * is rounded to float once; RoPE's products of two floats are exact in double, so each rotated
 * element is its exact value rounded once (to double, then float) whatever the compiler contracts;
 * SwiGLU is float arithmetic with a sigmoid that never cancels. These are the formulas the CUDA
 * kernels are tested against. Arguments arrive checked (device_check_rotary.c); the CPU admits
 * only TENSOR_F32, so the types are not looked at. This file must not allocate memory or set
 * thread counts. */
#include "cpu_kernel.h"

#include <math.h>

/* ---- RMSNorm ------------------------------------------------------------------------------ */

static void rmsnorm_row(float *restrict out, float *restrict rstd, const float *restrict x, const float *restrict w,
                        int64_t C, double eps)
{
    double ss = 0.0;
    for (int64_t c = 0; c < C; c++)
        ss += (double)x[c] * (double)x[c];
    double r = 1.0 / sqrt(ss / (double)C + eps);
    for (int64_t c = 0; c < C; c++)
        out[c] = (float)((double)x[c] * r * (double)w[c]);
    *rstd = (float)r;
}

int device_cpu_rmsnorm_forward(device *d, tensor_dtype t, void *out, float *rstd, const void *inp, const void *w,
                               int64_t N, int64_t C, float eps, ddp_err *err)
{
    (void)d, (void)t, (void)err;
    float *o = out;
    const float *x = inp;
    DDP_PARALLEL_FOR(N * C)
    for (int64_t r = 0; r < N; r++)
        rmsnorm_row(o + r * C, rstd + r, x + r * C, w, C, (double)eps);
    return DDP_OK;
}

/* res_out = a + b (float), then RMSNorm of it, row by row: exactly add followed by
 * rmsnorm_forward. res_out may be a or b: each row's elements are read before they are written. */
int device_cpu_residual_rmsnorm_forward(device *d, tensor_dtype t, void *res_out, void *norm_out, float *rstd,
                                        const void *a, const void *b, const void *w, int64_t N, int64_t C, float eps,
                                        ddp_err *err)
{
    (void)d, (void)t, (void)err;
    float *res = res_out, *o = norm_out;
    const float *fa = a, *fb = b;
    DDP_PARALLEL_FOR(N * C)
    for (int64_t r = 0; r < N; r++) {
        for (int64_t c = 0; c < C; c++)
            res[r * C + c] = fa[r * C + c] + fb[r * C + c];
        rmsnorm_row(o + r * C, rstd + r, res + r * C, w, C, (double)eps);
    }
    return DDP_OK;
}

/* y = x·r·w with r = (mean x² + eps)^-1/2, so dr/dx_c = -r³·x_c/C and
 * dinp += r·(dn - x̂·mean(dn·x̂)) with dn = dout·w, x̂ = x·r (r the saved float rstd). */
static void rmsnorm_backward_row(float *restrict dinp, const float *restrict dout, const float *restrict x,
                                 const float *restrict w, double r, int64_t C)
{
    double sum_dn_xhat = 0.0;
    for (int64_t c = 0; c < C; c++)
        sum_dn_xhat += (double)dout[c] * (double)w[c] * ((double)x[c] * r);
    double mean_dn_xhat = sum_dn_xhat / (double)C;
    for (int64_t c = 0; c < C; c++) {
        double dn = (double)dout[c] * (double)w[c], xhat = (double)x[c] * r;
        dinp[c] = (float)((double)dinp[c] + r * (dn - xhat * mean_dn_xhat));
    }
}

/* dw sums over rows, so threads own column blocks (each walks every row in order), as
 * layernorm_cpu.c does: deterministic without atomics or a per-thread scratch. */
static void rmsnorm_backward_dw(float *restrict dw, const float *restrict dout, const float *restrict inp,
                                const float *restrict rstd, int64_t N, int64_t C)
{
    int64_t nblocks = (C + DDP_COL_BLOCK - 1) / DDP_COL_BLOCK;
    DDP_PARALLEL_FOR(N * C)
    for (int64_t blk = 0; blk < nblocks; blk++) {
        int64_t c0 = blk * DDP_COL_BLOCK, w = ddp_min_i64(DDP_COL_BLOCK, C - c0);
        double acc[DDP_COL_BLOCK] = {0};
        for (int64_t r = 0; r < N; r++) {
            const float *restrict g = dout + r * C + c0, *restrict x = inp + r * C + c0;
            double s = rstd[r];
            for (int64_t j = 0; j < w; j++)
                acc[j] += (double)g[j] * ((double)x[j] * s);
        }
        for (int64_t j = 0; j < w; j++)
            dw[c0 + j] = (float)((double)dw[c0 + j] + acc[j]);
    }
}

int device_cpu_rmsnorm_backward(device *d, tensor_dtype t, void *dinp, float *dw, const void *dout, const void *inp,
                                const void *w, const float *rstd, int64_t N, int64_t C, ddp_err *err)
{
    (void)d, (void)t, (void)err;
    float *dx = dinp;
    const float *g = dout, *x = inp;
    DDP_PARALLEL_FOR(N * C)
    for (int64_t r = 0; r < N; r++)
        rmsnorm_backward_row(dx + r * C, g + r * C, x + r * C, w, rstd[r], C);
    rmsnorm_backward_dw(dw, g, x, rstd, N, C);
    return DDP_OK;
}

/* ---- RoPE --------------------------------------------------------------------------------- */

/* Rotates every head's pairs of rows (b, t) by the angle of the row's position (t, or t minus its
 * document's start in packed rows); sign -1 turns it back. */
static void rope_rotate(float *x, int64_t ld, int64_t B, int64_t T, int64_t n_heads, int64_t hs, const float *cos,
                        const float *sin, const int32_t *doc_start, double sign)
{
    const int64_t half = hs / 2;
    DDP_PARALLEL_FOR(B * T * n_heads * hs)
    for (int64_t row = 0; row < B * T; row++) {
        const int64_t p = row % T - (doc_start ? doc_start[row] : 0);
        const float *c = cos + p * half, *s = sin + p * half;
        for (int64_t h = 0; h < n_heads; h++) {
            float *v = x + row * ld + h * hs;
            for (int64_t j = 0; j < half; j++) {
                double x1 = v[j], x2 = v[j + half], cj = c[j], sj = sign * (double)s[j];
                v[j] = (float)(x1 * cj - x2 * sj);
                v[j + half] = (float)(x2 * cj + x1 * sj);
            }
        }
    }
}

int device_cpu_rope_forward(device *d, tensor_dtype t, void *x, int64_t ld, int64_t B, int64_t T, int64_t n_heads,
                            int64_t hs, const float *cos, const float *sin, const int32_t *doc_start, ddp_err *err)
{
    (void)d, (void)t;
    int rc = device_cpu_check_docs("rope_forward", doc_start, NULL, B, T, err);
    if (!rc)
        rope_rotate(x, ld, B, T, n_heads, hs, cos, sin, doc_start, 1.0);
    return rc;
}

int device_cpu_rope_backward(device *d, tensor_dtype t, void *x, int64_t ld, int64_t B, int64_t T, int64_t n_heads,
                             int64_t hs, const float *cos, const float *sin, const int32_t *doc_start, ddp_err *err)
{
    (void)d, (void)t;
    int rc = device_cpu_check_docs("rope_backward", doc_start, NULL, B, T, err);
    if (!rc)
        rope_rotate(x, ld, B, T, n_heads, hs, cos, sin, doc_start, -1.0);
    return rc;
}

/* ---- SwiGLU ------------------------------------------------------------------------------- */

/* σ(g) and 1 - σ(g), each as a quotient of positive terms (e = exp(-|g|) <= 1): neither cancels. */
static inline void sigmoid_pair(float g, float *s, float *one_minus_s)
{
    float e = expf(-fabsf(g)), inv = 1.0f / (1.0f + e);
    *s = g >= 0.0f ? inv : e * inv;
    *one_minus_s = g >= 0.0f ? e * inv : inv;
}

int device_cpu_swiglu_forward(device *d, tensor_dtype t, void *h, const void *gate_up, int64_t N, int64_t F,
                              ddp_err *err)
{
    (void)d, (void)t, (void)err;
    float *out = h;
    const float *gu = gate_up;
    DDP_PARALLEL_FOR(N * F)
    for (int64_t r = 0; r < N; r++)
        for (int64_t j = 0; j < F; j++) {
            float g = gu[r * 2 * F + j], u = gu[r * 2 * F + F + j], s, sc;
            sigmoid_pair(g, &s, &sc);
            out[r * F + j] = g * s * u;
        }
    return DDP_OK;
}

/* d/dg silu(g) = σ + g·σ·(1 - σ) = σ·(1 + g·(1 - σ)); d/du = silu(g). Each element's two gradients
 * are written where its gate and up values were read, so dgate_up may be gate_up itself. */
int device_cpu_swiglu_backward(device *d, tensor_dtype t, void *dgate_up, const void *dh, const void *gate_up,
                               int64_t N, int64_t F, ddp_err *err)
{
    (void)d, (void)t, (void)err;
    float *dgu = dgate_up;
    const float *g_h = dh, *gu = gate_up;
    DDP_PARALLEL_FOR(N * F)
    for (int64_t r = 0; r < N; r++)
        for (int64_t j = 0; j < F; j++) {
            const int64_t ig = r * 2 * F + j, iu = ig + F;
            float g = gu[ig], u = gu[iu], dy = g_h[r * F + j], s, sc;
            sigmoid_pair(g, &s, &sc);
            dgu[ig] = dy * u * (s * (1.0f + g * sc));
            dgu[iu] = dy * (g * s);
        }
    return DDP_OK;
}
