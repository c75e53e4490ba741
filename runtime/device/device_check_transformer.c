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

/* ---- the transformer's ops --------------------------------------------------------------- */

/* B, T, C of a transformer op: all >= 0; true in *empty when there is nothing to do. */
static int check_btc(const char *op, int64_t b, int64_t t, int64_t c, bool *empty, ddp_err *err)
{
    *empty = true;
    if (b < 0 || t < 0 || c < 0)
        return ddp_fail(err, DDP_ERUNTIME, "%s: negative size (%lld, %lld, %lld)", op, (long long)b, (long long)t,
                        (long long)c);
    *empty = b == 0 || t == 0 || c == 0;
    return DDP_OK;
}

int checked_embedding_forward(device *d, tensor_dtype t, void *out, const int32_t *tokens, const void *wte,
                              const void *wpe, const int32_t *doc_start, int64_t B, int64_t T, int64_t C, ddp_err *err)
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
    /* wpe may be NULL: no position table; doc_start NULL: whole rows */
    DEVICE_FORWARD(embedding_forward, /* out written, its wte rows and wpe (if any) read once, the tokens */
                   btc_cost(t, B, T, C, ((2.0 * B + (wpe ? 1 : 0)) * T * C) * tensor_dtype_size(t) + 4.0 * B * T,
                            wpe ? (double)B * T * C : 0.0),
                   d, t, out, tokens, wte, wpe, doc_start, B, T, C, err);
}

int checked_embedding_backward(device *d, tensor_dtype t, float *dwte, float *dwpe, const void *dout,
                               const int32_t *tokens, const int32_t *doc_start, const int32_t *doc_end, int64_t B,
                               int64_t T, int64_t C, int64_t V, ddp_err *err)
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
    NEED_POINTER("embedding_backward", dout);
    NEED_POINTER("embedding_backward", tokens);
    if (!doc_start != !doc_end)
        return ddp_fail(err, DDP_ERUNTIME, "embedding_backward: packed rows need doc_start and doc_end, %s is NULL",
                        doc_start ? "doc_end" : "doc_start");
    /* dwpe may be NULL: no position table */
    DEVICE_FORWARD(embedding_backward, /* dout and the tokens read, dwte's rows and dwpe (if any) += */
                   btc_cost(t, B, T, C, (double)B * T * C * (tensor_dtype_size(t) + 8.0) + (dwpe ? 8.0 * T * C : 0.0) +
                            4.0 * B * T, (dwpe ? 2.0 : 1.0) * B * T * C),
                   d, t, dwte, dwpe, dout, tokens, doc_start, doc_end, B, T, C, V, err);
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
