/* device_check_attention.c — the argument contract of the attention family's ops (device.h's
 * DEVICE_ATTENTION_OPS), for device.c's checking table: the shape (sizes, the grouping of query
 * heads onto key/value heads, row strides wide enough for the heads, a positive finite scale) and
 * the pointers, with one message per mistake for both backends; an empty job returns at once. It
 * must not compute anything an op produces nor read device memory. */
#include "runtime/device/device_check.h"

#include <math.h>

/* A usable shape, or the reason it is not; *empty when there is nothing to compute. */
static int check_attn_shape(const char *op, const attn_shape *s, bool *empty, ddp_err *err)
{
    *empty = true;
    if (!s)
        return ddp_fail(err, DDP_ERUNTIME, "%s: s is NULL", op);
    if (s->B < 0 || s->T < 0 || s->NH < 0 || s->NKV < 0 || s->hs < 0)
        return ddp_fail(err, DDP_ERUNTIME, "%s: negative size (B %lld, T %lld, NH %lld, NKV %lld, hs %lld)", op,
                        (long long)s->B, (long long)s->T, (long long)s->NH, (long long)s->NKV, (long long)s->hs);
    if (s->B == 0 || s->T == 0 || s->NH == 0)
        return DDP_OK;
    if (s->hs == 0 || s->NKV == 0 || s->NH % s->NKV != 0)
        return ddp_fail(err, DDP_ERUNTIME, "%s: %lld query heads cannot share %lld key/value heads of size %lld", op,
                        (long long)s->NH, (long long)s->NKV, (long long)s->hs);
    int64_t q_width, kv_width, rows, span;
    if (__builtin_mul_overflow(s->NH, s->hs, &q_width) || __builtin_mul_overflow(s->NKV, s->hs, &kv_width) ||
        __builtin_mul_overflow(s->B, s->T, &rows))
        return ddp_fail(err, DDP_ERUNTIME, "%s: sizes overflow 64 bits", op);
    if (s->ld_q < q_width || s->ld_kv < kv_width || s->ld_o < q_width)
        return ddp_fail(err, DDP_ERUNTIME, "%s: row strides ld_q %lld, ld_kv %lld, ld_o %lld are narrower than the "
                        "heads they hold (%lld, %lld, %lld)", op, (long long)s->ld_q, (long long)s->ld_kv,
                        (long long)s->ld_o, (long long)q_width, (long long)kv_width, (long long)q_width);
    int64_t widest = s->ld_q > s->ld_kv ? s->ld_q : s->ld_kv;
    widest = widest > s->ld_o ? widest : s->ld_o;
    if (__builtin_mul_overflow(rows, widest, &span))
        return ddp_fail(err, DDP_ERUNTIME, "%s: %lld rows of %lld elements overflow 64 bits", op, (long long)rows,
                        (long long)widest);
    if (!(s->scale > 0.0f) || !isfinite(s->scale))
        return ddp_fail(err, DDP_ERUNTIME, "%s: scale %g is not a positive finite number", op, (double)s->scale);
    if ((s->doc_start == NULL) != (s->doc_end == NULL))
        return ddp_fail(err, DDP_ERUNTIME, "%s: packed rows need both doc_start and doc_end (%s is NULL)", op,
                        s->doc_start ? "doc_end" : "doc_start");
    *empty = false;
    return DDP_OK;
}

/* What the op computes and moves: the scores and the probabilities' product over the visible
 * (causal) half, 2·2·hs FLOPs per query-key pair forward; the backward recomputes both products,
 * takes dP, dV, dK and, in its second pass, the scores, dP and dQ again: 7 products, 3.5 times the
 * forward (FlashAttention's convention counts 2.5). Each tensor is read or written once. */
static prof_cost attention_cost(tensor_dtype t, const attn_shape *s, bool backward)
{
    const double es = (double)tensor_dtype_size(t), rows = (double)(s->B * s->T), hs = (double)s->hs;
    const double qkv = rows * (double)(s->NH + 2 * s->NKV) * hs * es, o = rows * (double)s->NH * hs * es;
    const double lse = (double)(s->B * s->NH * s->T) * sizeof(float);
    const double fwd = 4.0 * (double)(s->B * s->NH) * hs * (double)s->T * (double)(s->T + 1) / 2.0;
    return prof_cost_of(backward ? 2 * qkv + 2 * o + lse : qkv + o + lse, backward ? 3.5 * fwd : fwd,
                        t == TENSOR_BF16 ? PROF_MATH_GEMM_BF16 : PROF_MATH_GEMM_FP32, "%lldx%lldx%lld hs=%lld kv=%lld %s",
                        (long long)s->B, (long long)s->NH, (long long)s->T, (long long)s->hs, (long long)s->NKV,
                        prof_dtype_name(t));
}

int checked_attention_forward(device *d, tensor_dtype t, const attn_shape *s, void *out, float *lse, const void *q,
                              const void *k, const void *v, ddp_err *err)
{
    bool empty = true;
    int rc = check_dtype(d, "attention_forward", t, err);
    if (!rc)
        rc = check_attn_shape("attention_forward", s, &empty, err);
    if (rc || empty)
        return rc;
    NEED_POINTER("attention_forward", out);
    NEED_POINTER("attention_forward", lse);
    NEED_POINTER("attention_forward", q);
    NEED_POINTER("attention_forward", k);
    NEED_POINTER("attention_forward", v);
    DEVICE_FORWARD(attention_forward, attention_cost(t, s, false), d, t, s, out, lse, q, k, v, err);
}

int checked_attention_backward(device *d, tensor_dtype t, const attn_shape *s, void *dq, void *dk, void *dv,
                               const void *dout, const void *out, const float *lse, const void *q, const void *k,
                               const void *v, ddp_err *err)
{
    bool empty = true;
    int rc = check_dtype(d, "attention_backward", t, err);
    if (!rc)
        rc = check_attn_shape("attention_backward", s, &empty, err);
    if (rc || empty)
        return rc;
    NEED_POINTER("attention_backward", dq);
    NEED_POINTER("attention_backward", dk);
    NEED_POINTER("attention_backward", dv);
    NEED_POINTER("attention_backward", dout);
    NEED_POINTER("attention_backward", out);
    NEED_POINTER("attention_backward", lse);
    NEED_POINTER("attention_backward", q);
    NEED_POINTER("attention_backward", k);
    NEED_POINTER("attention_backward", v);
    DEVICE_FORWARD(attention_backward, attention_cost(t, s, true), d, t, s, dq, dk, dv, dout, out, lse, q, k, v,
                   err);
}
