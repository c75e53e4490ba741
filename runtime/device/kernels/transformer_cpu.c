/* transformer_cpu.c — the CPU code of the transformer family's attention ops (CUDA: transformer.cu):
 * the attention head split/merge and the causal softmax. The family's embeddings and LayerNorm
 * are embedding_cpu.c's and layernorm_cpu.c's.
 *
 * Determinism is the design rule: OpenMP only splits independent outputs (rows), each reduction
 * runs in one fixed order and long sums run in double, so no result depends on the thread count
 * and there are no float atomics. Arguments arrive checked by device.c. Entries of preatt above
 * the diagonal are never read. This file must not allocate memory, set thread counts, or hold
 * GEMMs (device_cpu.c), element-wise ops or the classifier (elementwise_cpu.c, reduce_cpu.c). */
#include "cpu_kernel.h"

#include <math.h>
#include <string.h>

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
