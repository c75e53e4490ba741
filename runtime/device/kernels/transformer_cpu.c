/* transformer_cpu.c — the CPU code of the transformer family (CUDA: transformer.cu): token and
 * position embeddings, LayerNorm, the attention head split/merge and the causal softmax.
 *
 * Determinism is the design rule: OpenMP only splits independent outputs (rows, or column
 * blocks whose sums each walk every row in order), each reduction runs in one fixed order and
 * long sums run in double (dwte's scatter-add, in position order, is the documented exception),
 * so no result depends on the thread count and there are no float atomics. Arguments arrive
 * checked by device.c; token ids are trusted to lie in [0, rows of wte), as the model checks its
 * data before training. Entries of preatt above the diagonal are never read. This file must not
 * allocate memory, set thread counts, or hold GEMMs (device_cpu.c), element-wise ops or the
 * classifier (elementwise_cpu.c, reduce_cpu.c). */
#include "cpu_kernel.h"

#include <math.h>
#include <string.h>

/* LayerNorm's variance epsilon (GPT-2 / torch.nn.LayerNorm default). */
#define CPU_LAYERNORM_EPS 1e-5

/* Width of the column blocks that column-sum loops give each thread: 64 double accumulators
 * (512 bytes) stay in L1, and 64 floats are whole cache lines of every row they read. */
#define COL_BLOCK 64

static inline int64_t min_i64(int64_t a, int64_t b) { return a < b ? a : b; }

/* dst[c] += Σ_r src[r·stride + c] for c < cols, each sum in double over r in order, rounded
 * once into dst. */
static void add_column_sums(float *restrict dst, const float *restrict src, int64_t rows, int64_t stride,
                            int64_t cols)
{
    double acc[COL_BLOCK];
    for (int64_t c0 = 0; c0 < cols; c0 += COL_BLOCK) {
        int64_t w = min_i64(COL_BLOCK, cols - c0);
        for (int64_t j = 0; j < w; j++)
            acc[j] = 0.0;
        for (int64_t r = 0; r < rows; r++) {
            const float *restrict row = src + r * stride + c0;
            for (int64_t j = 0; j < w; j++)
                acc[j] += row[j];
        }
        for (int64_t j = 0; j < w; j++)
            dst[c0 + j] = (float)((double)dst[c0 + j] + acc[j]);
    }
}

/* ---- embeddings ------------------------------------------------------------------------ */

static int cpu_embedding_forward_f32(device *d, float *restrict out, const int32_t *restrict tokens,
                                     const float *restrict wte, const float *restrict wpe, int64_t B, int64_t T,
                                     int64_t C, ddp_err *err)
{
    (void)d;
    (void)err;
    DDP_PARALLEL_FOR(B * T * C)
    for (int64_t bt = 0; bt < B * T; bt++) {
        const float *restrict te = wte + (int64_t)tokens[bt] * C;
        const float *restrict pe = wpe + (bt % T) * C;
        float *restrict o = out + bt * C;
        for (int64_t c = 0; c < C; c++)
            o[c] = te[c] + pe[c];
    }
    return DDP_OK;
}

/* A token can occur at many positions, so rows of dwte are not independent outputs; columns
 * are. Each thread owns column blocks and walks every position in order: the additions into a
 * dwte entry happen in the same order for any thread count. They stay in float because a double
 * copy of dwte would need a [V,C] scratch this layer does not own. */
static void embedding_backward_wte(float *restrict dwte, const float *restrict dout, const int32_t *restrict tokens,
                                   int64_t BT, int64_t C)
{
    int64_t nblocks = (C + COL_BLOCK - 1) / COL_BLOCK;
    DDP_PARALLEL_FOR(BT * C)
    for (int64_t blk = 0; blk < nblocks; blk++) {
        int64_t c0 = blk * COL_BLOCK, c1 = min_i64(c0 + COL_BLOCK, C);
        for (int64_t bt = 0; bt < BT; bt++) {
            float *restrict dst = dwte + (int64_t)tokens[bt] * C;
            const float *restrict src = dout + bt * C;
            for (int64_t c = c0; c < c1; c++)
                dst[c] += src[c];
        }
    }
}

static int cpu_embedding_backward_f32(device *d, float *restrict dwte, float *restrict dwpe, const float *restrict dout,
                                      const int32_t *restrict tokens, int64_t B, int64_t T, int64_t C, ddp_err *err)
{
    (void)d;
    (void)err;
    embedding_backward_wte(dwte, dout, tokens, B * T, C);
    /* position t's rows are dout[b,t,:] for every b: stride T·C */
    DDP_PARALLEL_FOR(B * T * C)
    for (int64_t t = 0; t < T; t++)
        add_column_sums(dwpe + t * C, dout + t * C, B, T * C, C);
    return DDP_OK;
}

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
    int64_t nblocks = (C + COL_BLOCK - 1) / COL_BLOCK;
    DDP_PARALLEL_FOR(N * C)
    for (int64_t blk = 0; blk < nblocks; blk++) {
        int64_t c0 = blk * COL_BLOCK, w = min_i64(COL_BLOCK, C - c0);
        double acc_w[COL_BLOCK] = {0}, acc_b[COL_BLOCK] = {0};
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

/* ---- attention: head permutes ------------------------------------------------------------ */

/* heads[b,h,t,:] = tok[b,t, off + h·hs ..] for a token-major tensor with rows of ld floats.
 * One (b,h,t) row of hs floats per iteration; rows are independent. */
static void gather_heads(float *restrict heads, const float *restrict tok, int64_t ld, int64_t off, int64_t B,
                         int64_t T, int64_t NH, int64_t hs)
{
    DDP_PARALLEL_FOR(B * NH * T * hs)
    for (int64_t bht = 0; bht < B * NH * T; bht++) {
        int64_t b = bht / (NH * T), h = bht / T % NH, t = bht % T;
        memcpy(heads + bht * hs, tok + (b * T + t) * ld + off + h * hs, (size_t)hs * sizeof(float));
    }
}

/* The inverse of gather_heads: tok[b,t, off + h·hs ..] = heads[b,h,t,:]. */
static void scatter_heads(float *restrict tok, const float *restrict heads, int64_t ld, int64_t off, int64_t B,
                          int64_t T, int64_t NH, int64_t hs)
{
    DDP_PARALLEL_FOR(B * NH * T * hs)
    for (int64_t bht = 0; bht < B * NH * T; bht++) {
        int64_t b = bht / (NH * T), h = bht / T % NH, t = bht % T;
        memcpy(tok + (b * T + t) * ld + off + h * hs, heads + bht * hs, (size_t)hs * sizeof(float));
    }
}

static int cpu_attention_split_heads_f32(device *d, float *restrict q, float *restrict k, float *restrict v,
                                         const float *restrict qkv, int64_t B, int64_t T, int64_t NH, int64_t hs,
                                         ddp_err *err)
{
    (void)d;
    (void)err;
    int64_t C = NH * hs;
    gather_heads(q, qkv, 3 * C, 0, B, T, NH, hs);
    gather_heads(k, qkv, 3 * C, C, B, T, NH, hs);
    gather_heads(v, qkv, 3 * C, 2 * C, B, T, NH, hs);
    return DDP_OK;
}

static int cpu_attention_merge_heads_grad_f32(device *d, float *restrict dqkv, const float *restrict dq,
                                              const float *restrict dk, const float *restrict dv, int64_t B, int64_t T,
                                              int64_t NH, int64_t hs, ddp_err *err)
{
    (void)d;
    (void)err;
    int64_t C = NH * hs;
    scatter_heads(dqkv, dq, 3 * C, 0, B, T, NH, hs);
    scatter_heads(dqkv, dk, 3 * C, C, B, T, NH, hs);
    scatter_heads(dqkv, dv, 3 * C, 2 * C, B, T, NH, hs);
    return DDP_OK;
}

static int cpu_attention_merge_heads_f32(device *d, float *restrict out, const float *restrict y, int64_t B, int64_t T,
                                         int64_t NH, int64_t hs, ddp_err *err)
{
    (void)d;
    (void)err;
    scatter_heads(out, y, NH * hs, 0, B, T, NH, hs);
    return DDP_OK;
}

static int cpu_attention_split_heads_grad_f32(device *d, float *restrict dy, const float *restrict dout, int64_t B,
                                              int64_t T, int64_t NH, int64_t hs, ddp_err *err)
{
    (void)d;
    (void)err;
    gather_heads(dy, dout, NH * hs, 0, B, T, NH, hs);
    return DDP_OK;
}

/* ---- attention: causal softmax ----------------------------------------------------------- */

/* Row t of one head: only columns 0..t are read. The exponentials are float (expf is within an
 * ulp), their sum is double, and the row max keeps every exponent <= 0 so nothing overflows. */
static void causal_softmax_row(float *restrict att, const float *restrict pre, float scale, int64_t t, int64_t T)
{
    float mx = -INFINITY;
    for (int64_t j = 0; j <= t; j++)
        mx = fmaxf(mx, scale * pre[j]);
    double sum = 0.0;
    for (int64_t j = 0; j <= t; j++) {
        att[j] = expf(scale * pre[j] - mx);
        sum += att[j];
    }
    double inv = 1.0 / sum;
    for (int64_t j = 0; j <= t; j++)
        att[j] = (float)((double)att[j] * inv);
    for (int64_t j = t + 1; j < T; j++)
        att[j] = 0.0f;
}

static int cpu_causal_softmax_forward_f32(device *d, float *restrict att, const float *restrict preatt, float scale,
                                          int64_t BH, int64_t T, ddp_err *err)
{
    (void)d;
    (void)err;
    DDP_PARALLEL_FOR(BH * T * T)
    for (int64_t row = 0; row < BH * T; row++)
        causal_softmax_row(att + row * T, preatt + row * T, scale, row % T, T);
    return DDP_OK;
}

/* softmax backward: dpre_j = scale·att_j·(datt_j - Σ_k att_k·datt_k), the dot in double. */
static void causal_softmax_backward_row(float *restrict dpre, const float *restrict datt, const float *restrict att,
                                        double scale, int64_t t, int64_t T)
{
    double dot = 0.0;
    for (int64_t j = 0; j <= t; j++)
        dot += (double)att[j] * (double)datt[j];
    for (int64_t j = 0; j <= t; j++)
        dpre[j] = (float)(scale * (double)att[j] * ((double)datt[j] - dot));
    for (int64_t j = t + 1; j < T; j++)
        dpre[j] = 0.0f;
}

static int cpu_causal_softmax_backward_f32(device *d, float *restrict dpreatt, const float *restrict datt,
                                           const float *restrict att, float scale, int64_t BH, int64_t T, ddp_err *err)
{
    (void)d;
    (void)err;
    DDP_PARALLEL_FOR(BH * T * T)
    for (int64_t row = 0; row < BH * T; row++)
        causal_softmax_backward_row(dpreatt + row * T, datt + row * T, att + row * T, scale, row % T, T);
    return DDP_OK;
}

/* ---- entry points: device.c admits only TENSOR_F32 on the CPU, so the types are not looked at */

int device_cpu_embedding_forward(device *d, tensor_dtype t, void *out, const int32_t *tokens, const void *wte,
                                 const void *wpe, int64_t B, int64_t T, int64_t C, ddp_err *err)
{
    (void)t;
    return cpu_embedding_forward_f32(d, out, tokens, wte, wpe, B, T, C, err);
}

int device_cpu_embedding_backward(device *d, tensor_dtype t, float *dwte, float *dwpe, const void *dout,
                                  const int32_t *tokens, int64_t B, int64_t T, int64_t C, ddp_err *err)
{
    (void)t;
    return cpu_embedding_backward_f32(d, dwte, dwpe, dout, tokens, B, T, C, err);
}

int device_cpu_layernorm_forward(device *d, tensor_dtype t, void *out, float *mean, float *rstd, const void *inp,
                                 const void *w, const void *b, int64_t N, int64_t C, ddp_err *err)
{
    (void)t;
    return cpu_layernorm_forward_f32(d, out, mean, rstd, inp, w, b, N, C, err);
}

int device_cpu_layernorm_backward(device *d, tensor_dtype t, void *dinp, float *dw, float *db, const void *dout,
                                  const void *inp, const void *w, const float *mean, const float *rstd, int64_t N,
                                  int64_t C, ddp_err *err)
{
    (void)t;
    return cpu_layernorm_backward_f32(d, dinp, dw, db, dout, inp, w, mean, rstd, N, C, err);
}

int device_cpu_attention_split_heads(device *d, tensor_dtype t, void *q, void *k, void *v, const void *qkv, int64_t B,
                                     int64_t T, int64_t NH, int64_t hs, ddp_err *err)
{
    (void)t;
    return cpu_attention_split_heads_f32(d, q, k, v, qkv, B, T, NH, hs, err);
}

int device_cpu_attention_merge_heads(device *d, tensor_dtype t, void *out, const void *y, int64_t B, int64_t T,
                                     int64_t NH, int64_t hs, ddp_err *err)
{
    (void)t;
    return cpu_attention_merge_heads_f32(d, out, y, B, T, NH, hs, err);
}

int device_cpu_attention_split_heads_grad(device *d, tensor_dtype t, void *dy, const void *dout, int64_t B, int64_t T,
                                          int64_t NH, int64_t hs, ddp_err *err)
{
    (void)t;
    return cpu_attention_split_heads_grad_f32(d, dy, dout, B, T, NH, hs, err);
}

int device_cpu_attention_merge_heads_grad(device *d, tensor_dtype t, void *dqkv, const void *dq, const void *dk,
                                          const void *dv, int64_t B, int64_t T, int64_t NH, int64_t hs, ddp_err *err)
{
    (void)t;
    return cpu_attention_merge_heads_grad_f32(d, dqkv, dq, dk, dv, B, T, NH, hs, err);
}

int device_cpu_causal_softmax_forward(device *d, tensor_dtype t, void *att, const void *preatt, float scale, int64_t BH,
                                      int64_t T, ddp_err *err)
{
    (void)t;
    return cpu_causal_softmax_forward_f32(d, att, preatt, scale, BH, T, err);
}

int device_cpu_causal_softmax_backward(device *d, tensor_dtype t, void *dpreatt, const void *datt, const void *att,
                                       float scale, int64_t BH, int64_t T, ddp_err *err)
{
    (void)t;
    return cpu_causal_softmax_backward_f32(d, dpreatt, datt, att, scale, BH, T, err);
}
