/* layernorm_cpu.c — the CPU code of LayerNorm, part of the transformer family (CUDA: layernorm.cu):
 * the forward, the forward with the residual add in front of it (residual_layernorm_forward) and
 * the backward.
 *
 * OpenMP splits only independent outputs (rows; the parameter gradients' column blocks, each
 * walking every row in order), so no result depends on the thread count. Every long sum runs in
 * double and is rounded to float once. These are the formulas the CUDA kernels are tested against.
 * Arguments arrive checked (device_check_*.c). This file must not allocate memory or set thread counts. */
#include "cpu_kernel.h"

#include <math.h>

/* LayerNorm's variance epsilon (GPT-2 / torch.nn.LayerNorm default). */
#define CPU_LAYERNORM_EPS 1e-5

/* ---- LayerNorm --------------------------------------------------------------------------- */

/* Two passes in double (mean, then the centred second moment) so the variance never suffers the
 * E[x²] - E[x]² cancellation, and the output is rounded to float once. */
static void layernorm_row(float *restrict out, float *restrict mean, float *restrict rstd, const float *restrict x,
                          const float *restrict w, const float *restrict b, int64_t C)
{
    double sum = 0.0;
    for (int64_t c = 0; c < C; c++)
        sum += x[c];
    double m = sum / (double)C, var = 0.0;
    for (int64_t c = 0; c < C; c++) {
        double d = (double)x[c] - m;
        var += d * d;
    }
    double r = 1.0 / sqrt(var / (double)C + CPU_LAYERNORM_EPS);
    for (int64_t c = 0; c < C; c++)
        out[c] = (float)(((double)x[c] - m) * r * (double)w[c] + (double)b[c]);
    *mean = (float)m;
    *rstd = (float)r;
}

static int cpu_layernorm_forward_f32(device *d, float *restrict out, float *restrict mean, float *restrict rstd,
                                     const float *restrict inp, const float *restrict w, const float *restrict b,
                                     int64_t N, int64_t C, ddp_err *err)
{
    (void)d;
    (void)err;
    DDP_PARALLEL_FOR(N * C)
    for (int64_t r = 0; r < N; r++)
        layernorm_row(out + r * C, mean + r, rstd + r, inp + r * C, w, b, C);
    return DDP_OK;
}

/* res_out = a + b (float), then LayerNorm of it, row by row: exactly the add op followed by
 * layernorm_forward. res_out may be a or b: each row's elements are read before they are written. */
static int cpu_residual_layernorm_forward_f32(device *d, float *res_out, float *restrict ln_out, float *restrict mean,
                                              float *restrict rstd, const float *a, const float *b,
                                              const float *restrict w, const float *restrict bias, int64_t N,
                                              int64_t C, ddp_err *err)
{
    (void)d;
    (void)err;
    DDP_PARALLEL_FOR(N * C)
    for (int64_t r = 0; r < N; r++) {
        float *res = res_out + r * C;
        for (int64_t c = 0; c < C; c++)
            res[c] = a[r * C + c] + b[r * C + c];
        layernorm_row(ln_out + r * C, mean + r, rstd + r, res, w, bias, C);
    }
    return DDP_OK;
}

/* dinp += rstd·(dn - mean(dn) - x̂·mean(dn·x̂)) with dn = dout·w: the standard LayerNorm input
 * gradient. x̂ is rebuilt from the saved float statistics (the forward's double ones are gone);
 * their rounding moves x̂ by about an ulp, within the float noise of the inputs. */
static void layernorm_backward_row(float *restrict dinp, const float *restrict dout, const float *restrict x,
                                   const float *restrict w, double m, double r, int64_t C)
{
    double sum_dn = 0.0, sum_dn_xhat = 0.0;
    for (int64_t c = 0; c < C; c++) {
        double dn = (double)dout[c] * (double)w[c];
        sum_dn += dn;
        sum_dn_xhat += dn * (((double)x[c] - m) * r);
    }
    double mean_dn = sum_dn / (double)C, mean_dn_xhat = sum_dn_xhat / (double)C;
    for (int64_t c = 0; c < C; c++) {
        double dn = (double)dout[c] * (double)w[c], xhat = ((double)x[c] - m) * r;
        dinp[c] = (float)((double)dinp[c] + r * (dn - mean_dn - xhat * mean_dn_xhat));
    }
}

/* dw and db sum over rows, so threads own column blocks (each walks every row in order) rather
 * than rows: deterministic without atomics or a per-thread scratch. */
static void layernorm_backward_params(float *restrict dw, float *restrict db, const float *restrict dout,
                                      const float *restrict inp, const float *restrict mean,
                                      const float *restrict rstd, int64_t N, int64_t C)
{
    int64_t nblocks = (C + DDP_COL_BLOCK - 1) / DDP_COL_BLOCK;
    DDP_PARALLEL_FOR(N * C)
    for (int64_t blk = 0; blk < nblocks; blk++) {
        int64_t c0 = blk * DDP_COL_BLOCK, w = ddp_min_i64(DDP_COL_BLOCK, C - c0);
        double acc_w[DDP_COL_BLOCK] = {0}, acc_b[DDP_COL_BLOCK] = {0};
        for (int64_t r = 0; r < N; r++) {
            const float *restrict d = dout + r * C + c0, *restrict x = inp + r * C + c0;
            double m = mean[r], s = rstd[r];
            for (int64_t j = 0; j < w; j++) {
                acc_w[j] += (double)d[j] * (((double)x[j] - m) * s);
                acc_b[j] += (double)d[j];
            }
        }
        for (int64_t j = 0; j < w; j++) {
            dw[c0 + j] = (float)((double)dw[c0 + j] + acc_w[j]);
            db[c0 + j] = (float)((double)db[c0 + j] + acc_b[j]);
        }
    }
}

static int cpu_layernorm_backward_f32(device *d, float *restrict dinp, float *restrict dw, float *restrict db,
                                      const float *restrict dout, const float *restrict inp, const float *restrict w,
                                      const float *restrict mean, const float *restrict rstd, int64_t N, int64_t C,
                                      ddp_err *err)
{
    (void)d;
    (void)err;
    DDP_PARALLEL_FOR(N * C)
    for (int64_t r = 0; r < N; r++)
        layernorm_backward_row(dinp + r * C, dout + r * C, inp + r * C, w, mean[r], rstd[r], C);
    layernorm_backward_params(dw, db, dout, inp, mean, rstd, N, C);
    return DDP_OK;
}

/* ---- entry points: device.c admits only TENSOR_F32 on the CPU, so the types are not looked at */

int device_cpu_layernorm_forward(device *d, tensor_dtype t, void *out, float *mean, float *rstd, const void *inp,
                                 const void *w, const void *b, int64_t N, int64_t C, ddp_err *err)
{
    (void)t;
    return cpu_layernorm_forward_f32(d, out, mean, rstd, inp, w, b, N, C, err);
}

int device_cpu_residual_layernorm_forward(device *d, tensor_dtype t, void *res_out, void *ln_out, float *mean,
                                          float *rstd, const void *a, const void *b, const void *w, const void *bias,
                                          int64_t N, int64_t C, ddp_err *err)
{
    (void)t;
    return cpu_residual_layernorm_forward_f32(d, res_out, ln_out, mean, rstd, a, b, w, bias, N, C, err);
}

int device_cpu_layernorm_backward(device *d, tensor_dtype t, void *dinp, float *dw, float *db, const void *dout,
                                  const void *inp, const void *w, const float *mean, const float *rstd, int64_t N,
                                  int64_t C, ddp_err *err)
{
    (void)t;
    return cpu_layernorm_backward_f32(d, dinp, dw, db, dout, inp, w, mean, rstd, N, C, err);
}
