/* device_check_transformer.c — the argument contracts of the transformer family's ops (device.h's
 * DEVICE_TRANSFORMER_OPS), for device.c's checking table: each checked_NAME rejects bad arguments
 * with one message for both backends, returns when there is nothing to do, and forwards the rest
 * to d->backend. It must not compute anything an op produces nor read device memory. */
#include "runtime/device/device_check.h"

/* ---- what the ops cost, for the profiler (the rules: device_check.h) ------------------------- */

static prof_cost btc_cost(tensor_dtype t, int64_t B, int64_t T, int64_t C, double bytes, double flops)
{
    if (B == 1) /* the LayerNorms' rows */
        return prof_cost_of(bytes, flops, PROF_MATH_FP32, "N=%lld C=%lld %s", (long long)T, (long long)C,
                            prof_dtype_name(t));
    return prof_cost_of(bytes, flops, PROF_MATH_FP32, "B=%lld T=%lld C=%lld %s", (long long)B, (long long)T,
                        (long long)C, prof_dtype_name(t));
}

/* A permutation of `tensors` [B,T,NH*hs] tensors read or written once each; no arithmetic. */
static prof_cost heads_cost(tensor_dtype t, int64_t B, int64_t T, int64_t NH, int64_t hs, int tensors)
{
    double bytes = (double)tensors * (double)B * (double)T * (double)NH * (double)hs * (double)tensor_dtype_size(t);
    return prof_cost_of(bytes, 0, PROF_MATH_FP32, "B=%lld T=%lld NH=%lld hs=%lld %s", (long long)B, (long long)T,
                        (long long)NH, (long long)hs, prof_dtype_name(t));
}

/* Causal softmax over BH [T,T] matrices: `inputs` lower triangles read, the whole matrix written,
 * flops_per per element of the triangle. */
static prof_cost softmax_cost(tensor_dtype t, int64_t BH, int64_t T, int inputs, double flops_per)
{
    double tri = (double)BH * (double)T * (double)(T + 1) / 2, full = (double)BH * (double)T * (double)T;
    return prof_cost_of((inputs * tri + full) * (double)tensor_dtype_size(t), flops_per * tri, PROF_MATH_FP32,
                        "BH=%lld T=%lld %s", (long long)BH, (long long)T, prof_dtype_name(t));
}

/* ---- the transformer's ops --------------------------------------------------------------- */

/* B, T, C (or NH, hs) of a transformer op: all >= 0; true in *empty when there is nothing to do. */
static int check_btc(const char *op, int64_t b, int64_t t, int64_t c, bool *empty, ddp_err *err)
{
    *empty = true;
    if (b < 0 || t < 0 || c < 0)
        return ddp_fail(err, DDP_ERUNTIME, "%s: negative size (%lld, %lld, %lld)", op, (long long)b, (long long)t,
                        (long long)c);
    *empty = b == 0 || t == 0 || c == 0;
    return DDP_OK;
}

static int check_heads(const char *op, int64_t B, int64_t T, int64_t NH, int64_t hs, bool *empty, ddp_err *err)
{
    int rc = check_btc(op, B, T, NH, empty, err);
    if (!rc && hs < 0)
        return ddp_fail(err, DDP_ERUNTIME, "%s: negative head size %lld", op, (long long)hs);
    *empty = *empty || hs == 0;
    return rc;
}

int checked_embedding_forward(device *d, tensor_dtype t, void *out, const int32_t *tokens, const void *wte,
                              const void *wpe, int64_t B, int64_t T, int64_t C, ddp_err *err)
{
    bool empty = true;
    int rc = check_dtype(d, "embedding_forward", t, err);
    if (!rc)
        rc = check_btc("embedding_forward", B, T, C, &empty, err);
    if (rc || empty)
        return rc;
    NEED_POINTER("embedding_forward", out);
    NEED_POINTER("embedding_forward", tokens);
    NEED_POINTER("embedding_forward", wte);
    NEED_POINTER("embedding_forward", wpe);
    DEVICE_FORWARD(embedding_forward, /* out written, its wte rows and wpe read once, the tokens */
                   btc_cost(t, B, T, C, ((2.0 * B + 1) * T * C) * tensor_dtype_size(t) + 4.0 * B * T,
                            (double)B * T * C),
                   d, t, out, tokens, wte, wpe, B, T, C, err);
}

int checked_embedding_backward(device *d, tensor_dtype t, float *dwte, float *dwpe, const void *dout,
                               const int32_t *tokens, int64_t B, int64_t T, int64_t C, int64_t V, ddp_err *err)
{
    bool empty = true;
    int rc = check_dtype(d, "embedding_backward", t, err);
    if (!rc)
        rc = check_btc("embedding_backward", B, T, C, &empty, err);
    if (rc || empty)
        return rc;
    if (V < 1)
        return ddp_fail(err, DDP_ERUNTIME, "embedding_backward: V = %lld, but the tokens index rows of dwte",
                        (long long)V);
    NEED_POINTER("embedding_backward", dwte);
    NEED_POINTER("embedding_backward", dwpe);
    NEED_POINTER("embedding_backward", dout);
    NEED_POINTER("embedding_backward", tokens);
    DEVICE_FORWARD(embedding_backward, /* dout and the tokens read, dwte's rows and dwpe += */
                   btc_cost(t, B, T, C, (double)B * T * C * (tensor_dtype_size(t) + 8.0) + 8.0 * T * C + 4.0 * B * T,
                            2.0 * B * T * C),
                   d, t, dwte, dwpe, dout, tokens, B, T, C, V, err);
}

int checked_layernorm_forward(device *d, tensor_dtype t, void *out, float *mean, float *rstd, const void *inp,
                              const void *w, const void *b, int64_t N, int64_t C, ddp_err *err)
{
    int rc = check_dtype(d, "layernorm_forward", t, err);
    if (!rc)
        rc = check_shape("layernorm_forward", N, C, err);
    if (rc || N == 0)
        return rc;
    if (C == 0)
        return ddp_fail(err, DDP_ERUNTIME, "layernorm_forward: rows of zero channels have no mean");
    NEED_POINTER("layernorm_forward", out);
    NEED_POINTER("layernorm_forward", mean);
    NEED_POINTER("layernorm_forward", rstd);
    NEED_POINTER("layernorm_forward", inp);
    NEED_POINTER("layernorm_forward", w);
    NEED_POINTER("layernorm_forward", b);
    DEVICE_FORWARD(layernorm_forward, /* inp, w, b read; out, mean, rstd written; 8 FLOPs an element */
                   btc_cost(t, 1, N, C, (2.0 * N * C + 2.0 * C) * tensor_dtype_size(t) + 8.0 * N, 8.0 * N * C),
                   d, t, out, mean, rstd, inp, w, b, N, C, err);
}

/* res_out may be a or b itself (the residual stream adds in place); ln_out must be apart. */
int checked_residual_layernorm_forward(device *d, tensor_dtype t, void *res_out, void *ln_out, float *mean,
                                       float *rstd, const void *a, const void *b, const void *w, const void *bias,
                                       int64_t N, int64_t C, ddp_err *err)
{
    int rc = check_dtype(d, "residual_layernorm_forward", t, err);
    if (!rc)
        rc = check_shape("residual_layernorm_forward", N, C, err);
    if (rc || N == 0)
        return rc;
    if (C == 0)
        return ddp_fail(err, DDP_ERUNTIME, "residual_layernorm_forward: rows of zero channels have no mean");
    NEED_POINTER("residual_layernorm_forward", res_out);
    NEED_POINTER("residual_layernorm_forward", ln_out);
    NEED_POINTER("residual_layernorm_forward", mean);
    NEED_POINTER("residual_layernorm_forward", rstd);
    NEED_POINTER("residual_layernorm_forward", a);
    NEED_POINTER("residual_layernorm_forward", b);
    NEED_POINTER("residual_layernorm_forward", w);
    NEED_POINTER("residual_layernorm_forward", bias);
    if (ln_out == res_out || ln_out == a || ln_out == b)
        return ddp_fail(err, DDP_ERUNTIME, "residual_layernorm_forward: ln_out is also %s",
                        ln_out == res_out ? "res_out" : ln_out == a ? "a" : "b");
    DEVICE_FORWARD(residual_layernorm_forward, /* a, b, w, bias read; res_out, ln_out, mean, rstd written */
                   btc_cost(t, 1, N, C, (4.0 * N * C + 2.0 * C) * tensor_dtype_size(t) + 8.0 * N, 9.0 * N * C),
                   d, t, res_out, ln_out, mean, rstd, a, b, w, bias, N, C, err);
}

int checked_layernorm_backward(device *d, tensor_dtype t, void *dinp, float *dw, float *db, const void *dout,
                               const void *inp, const void *w, const float *mean, const float *rstd, int64_t N,
                               int64_t C, ddp_err *err)
{
    int rc = check_dtype(d, "layernorm_backward", t, err);
    if (!rc)
        rc = check_shape("layernorm_backward", N, C, err);
    if (rc || N == 0 || C == 0)
        return rc;
    NEED_POINTER("layernorm_backward", dinp);
    NEED_POINTER("layernorm_backward", dw);
    NEED_POINTER("layernorm_backward", db);
    NEED_POINTER("layernorm_backward", dout);
    NEED_POINTER("layernorm_backward", inp);
    NEED_POINTER("layernorm_backward", w);
    NEED_POINTER("layernorm_backward", mean);
    NEED_POINTER("layernorm_backward", rstd);
    DEVICE_FORWARD(layernorm_backward, /* dout, inp, w, mean, rstd read; dinp, dw, db += */
                   btc_cost(t, 1, N, C, (4.0 * N * C + C) * tensor_dtype_size(t) + 16.0 * C + 8.0 * N, 14.0 * N * C),
                   d, t, dinp, dw, db, dout, inp, w, mean, rstd, N, C, err);
}

int checked_attention_split_heads(device *d, tensor_dtype t, void *q, void *k, void *v, const void *qkv, int64_t B,
                                  int64_t T, int64_t NH, int64_t hs, ddp_err *err)
{
    bool empty = true;
    int rc = check_dtype(d, "attention_split_heads", t, err);
    if (!rc)
        rc = check_heads("attention_split_heads", B, T, NH, hs, &empty, err);
    if (rc || empty)
        return rc;
    NEED_POINTER("attention_split_heads", q);
    NEED_POINTER("attention_split_heads", k);
    NEED_POINTER("attention_split_heads", v);
    NEED_POINTER("attention_split_heads", qkv);
    DEVICE_FORWARD(attention_split_heads, heads_cost(t, B, T, NH, hs, 6),
                   d, t, q, k, v, qkv, B, T, NH, hs, err);
}

int checked_attention_merge_heads(device *d, tensor_dtype t, void *out, const void *y, int64_t B, int64_t T,
                                  int64_t NH, int64_t hs, ddp_err *err)
{
    bool empty = true;
    int rc = check_dtype(d, "attention_merge_heads", t, err);
    if (!rc)
        rc = check_heads("attention_merge_heads", B, T, NH, hs, &empty, err);
    if (rc || empty)
        return rc;
    NEED_POINTER("attention_merge_heads", out);
    NEED_POINTER("attention_merge_heads", y);
    DEVICE_FORWARD(attention_merge_heads, heads_cost(t, B, T, NH, hs, 2),
                   d, t, out, y, B, T, NH, hs, err);
}

int checked_attention_split_heads_grad(device *d, tensor_dtype t, void *dy, const void *dout, int64_t B, int64_t T,
                                       int64_t NH, int64_t hs, ddp_err *err)
{
    bool empty = true;
    int rc = check_dtype(d, "attention_split_heads_grad", t, err);
    if (!rc)
        rc = check_heads("attention_split_heads_grad", B, T, NH, hs, &empty, err);
    if (rc || empty)
        return rc;
    NEED_POINTER("attention_split_heads_grad", dy);
    NEED_POINTER("attention_split_heads_grad", dout);
    DEVICE_FORWARD(attention_split_heads_grad, heads_cost(t, B, T, NH, hs, 2),
                   d, t, dy, dout, B, T, NH, hs, err);
}

int checked_attention_merge_heads_grad(device *d, tensor_dtype t, void *dqkv, const void *dq, const void *dk,
                                       const void *dv, int64_t B, int64_t T, int64_t NH, int64_t hs, ddp_err *err)
{
    bool empty = true;
    int rc = check_dtype(d, "attention_merge_heads_grad", t, err);
    if (!rc)
        rc = check_heads("attention_merge_heads_grad", B, T, NH, hs, &empty, err);
    if (rc || empty)
        return rc;
    NEED_POINTER("attention_merge_heads_grad", dqkv);
    NEED_POINTER("attention_merge_heads_grad", dq);
    NEED_POINTER("attention_merge_heads_grad", dk);
    NEED_POINTER("attention_merge_heads_grad", dv);
    DEVICE_FORWARD(attention_merge_heads_grad, heads_cost(t, B, T, NH, hs, 6),
                   d, t, dqkv, dq, dk, dv, B, T, NH, hs, err);
}

int checked_causal_softmax_forward(device *d, tensor_dtype t, void *att, const void *preatt, float scale, int64_t BH,
                                   int64_t T, ddp_err *err)
{
    int rc = check_dtype(d, "causal_softmax_forward", t, err);
    if (!rc)
        rc = check_shape("causal_softmax_forward", BH, T, err);
    if (rc || BH == 0 || T == 0)
        return rc;
    NEED_POINTER("causal_softmax_forward", att);
    NEED_POINTER("causal_softmax_forward", preatt);
    DEVICE_FORWARD(causal_softmax_forward, softmax_cost(t, BH, T, 1, 5),
                   d, t, att, preatt, scale, BH, T, err);
}

int checked_causal_softmax_backward(device *d, tensor_dtype t, void *dpreatt, const void *datt, const void *att,
                                    float scale, int64_t BH, int64_t T, ddp_err *err)
{
    int rc = check_dtype(d, "causal_softmax_backward", t, err);
    if (!rc)
        rc = check_shape("causal_softmax_backward", BH, T, err);
    if (rc || BH == 0 || T == 0)
        return rc;
    NEED_POINTER("causal_softmax_backward", dpreatt);
    NEED_POINTER("causal_softmax_backward", datt);
    NEED_POINTER("causal_softmax_backward", att);
    DEVICE_FORWARD(causal_softmax_backward, softmax_cost(t, BH, T, 2, 4),
                   d, t, dpreatt, datt, att, scale, BH, T, err);
}

