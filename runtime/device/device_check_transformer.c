/* device_check_transformer.c — the argument contracts of the transformer family's ops (device.h's
 * DEVICE_TRANSFORMER_OPS), for device.c's checking table: each checked_NAME rejects bad arguments
 * with one message for both backends, returns when there is nothing to do, and forwards the rest
 * to d->backend. It must not compute anything an op produces nor read device memory. */
#include "runtime/device/device_check.h"

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
    return d->backend->embedding_forward(d, t, out, tokens, wte, wpe, B, T, C, err);
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
    return d->backend->embedding_backward(d, t, dwte, dwpe, dout, tokens, B, T, C, V, err);
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
    return d->backend->layernorm_forward(d, t, out, mean, rstd, inp, w, b, N, C, err);
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
    return d->backend->residual_layernorm_forward(d, t, res_out, ln_out, mean, rstd, a, b, w, bias, N, C, err);
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
    return d->backend->layernorm_backward(d, t, dinp, dw, db, dout, inp, w, mean, rstd, N, C, err);
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
    return d->backend->attention_split_heads(d, t, q, k, v, qkv, B, T, NH, hs, err);
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
    return d->backend->attention_merge_heads(d, t, out, y, B, T, NH, hs, err);
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
    return d->backend->attention_split_heads_grad(d, t, dy, dout, B, T, NH, hs, err);
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
    return d->backend->attention_merge_heads_grad(d, t, dqkv, dq, dk, dv, B, T, NH, hs, err);
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
    return d->backend->causal_softmax_forward(d, t, att, preatt, scale, BH, T, err);
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
    return d->backend->causal_softmax_backward(d, t, dpreatt, datt, att, scale, BH, T, err);
}

