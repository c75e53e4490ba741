/* device_check_rotary.c — the argument contracts of the rotary block's ops (device.h's
 * DEVICE_ROTARY_OPS: RMSNorm, RoPE, SwiGLU), for device.c's checking table: each checked_NAME rejects
 * bad arguments with one message for both backends, returns when there is nothing to do, and
 * forwards the rest to d->backend with the op's cost for the profiler. It must not compute anything
 * an op produces nor read device memory. */
#include "runtime/device/device_check.h"

#include <math.h>

/* FLOPs per element (the counting rules: device_check.h): RMSNorm forward squares and sums, then
 * scales by rstd and w; the backward forms dn = dout·w, its dot with x, the input gradient and dw's
 * term; a rotated element is two products and a sum; SiLU is an exp, an add, a division and the
 * product with the up half, its gradient twice that. */
#define FLOPS_RMSNORM 4
#define FLOPS_RMSNORM_GRAD 8
#define FLOPS_ROPE 3
#define FLOPS_SWIGLU 5
#define FLOPS_SWIGLU_GRAD 10

/* ---- RMSNorm ------------------------------------------------------------------------------ */

/* N rows of C channels and eps of a forward: *empty when there are no rows. */
static int check_rmsnorm(const char *op, int64_t N, int64_t C, float eps, bool *empty, ddp_err *err)
{
    *empty = true;
    int rc = check_shape(op, N, C, err);
    if (rc || N == 0)
        return rc;
    if (C == 0)
        return ddp_fail(err, DDP_ERUNTIME, "%s: rows of zero channels have no mean square", op);
    if (!(eps >= 0.0f) || isinf(eps))
        return ddp_fail(err, DDP_ERUNTIME, "%s: eps %g is not a finite number >= 0", op, (double)eps);
    *empty = false;
    return DDP_OK;
}

int checked_rmsnorm_forward(device *d, tensor_dtype t, void *out, float *rstd, const void *inp, const void *w,
                            int64_t N, int64_t C, float eps, ddp_err *err)
{
    bool empty = true;
    int rc = check_dtype(d, "rmsnorm_forward", t, err);
    if (!rc)
        rc = check_rmsnorm("rmsnorm_forward", N, C, eps, &empty, err);
    if (rc || empty)
        return rc;
    NEED_POINTER("rmsnorm_forward", out);
    NEED_POINTER("rmsnorm_forward", rstd);
    NEED_POINTER("rmsnorm_forward", inp);
    NEED_POINTER("rmsnorm_forward", w);
    DEVICE_FORWARD(rmsnorm_forward, /* inp, w read; out, rstd written */
                   matrix_cost(t, N, C, (2.0 * N * C + C) * tensor_dtype_size(t) + 4.0 * N,
                               FLOPS_RMSNORM * (double)N * C, ""),
                   d, t, out, rstd, inp, w, N, C, eps, err);
}

/* res_out may be a or b itself (the residual stream adds in place); norm_out must be apart. */
int checked_residual_rmsnorm_forward(device *d, tensor_dtype t, void *res_out, void *norm_out, float *rstd,
                                     const void *a, const void *b, const void *w, int64_t N, int64_t C, float eps,
                                     ddp_err *err)
{
    bool empty = true;
    int rc = check_dtype(d, "residual_rmsnorm_forward", t, err);
    if (!rc)
        rc = check_rmsnorm("residual_rmsnorm_forward", N, C, eps, &empty, err);
    if (rc || empty)
        return rc;
    NEED_POINTER("residual_rmsnorm_forward", res_out);
    NEED_POINTER("residual_rmsnorm_forward", norm_out);
    NEED_POINTER("residual_rmsnorm_forward", rstd);
    NEED_POINTER("residual_rmsnorm_forward", a);
    NEED_POINTER("residual_rmsnorm_forward", b);
    NEED_POINTER("residual_rmsnorm_forward", w);
    if (norm_out == res_out || norm_out == a || norm_out == b)
        return ddp_fail(err, DDP_ERUNTIME, "residual_rmsnorm_forward: norm_out is also %s",
                        norm_out == res_out ? "res_out" : norm_out == a ? "a" : "b");
    DEVICE_FORWARD(residual_rmsnorm_forward, /* a, b, w read; res_out, norm_out, rstd written */
                   matrix_cost(t, N, C, (4.0 * N * C + C) * tensor_dtype_size(t) + 4.0 * N,
                               (FLOPS_RMSNORM + 1) * (double)N * C, ""),
                   d, t, res_out, norm_out, rstd, a, b, w, N, C, eps, err);
}

int checked_rmsnorm_backward(device *d, tensor_dtype t, void *dinp, float *dw, const void *dout, const void *inp,
                             const void *w, const float *rstd, int64_t N, int64_t C, ddp_err *err)
{
    int rc = check_dtype(d, "rmsnorm_backward", t, err);
    if (!rc)
        rc = check_shape("rmsnorm_backward", N, C, err);
    if (rc || N == 0 || C == 0)
        return rc;
    NEED_POINTER("rmsnorm_backward", dinp);
    NEED_POINTER("rmsnorm_backward", dw);
    NEED_POINTER("rmsnorm_backward", dout);
    NEED_POINTER("rmsnorm_backward", inp);
    NEED_POINTER("rmsnorm_backward", w);
    NEED_POINTER("rmsnorm_backward", rstd);
    DEVICE_FORWARD(rmsnorm_backward, /* dout, inp, w, rstd read; dinp, dw += */
                   matrix_cost(t, N, C, (4.0 * N * C + C) * tensor_dtype_size(t) + 8.0 * C + 4.0 * N,
                               FLOPS_RMSNORM_GRAD * (double)N * C, ""),
                   d, t, dinp, dw, dout, inp, w, rstd, N, C, err);
}

/* ---- RoPE --------------------------------------------------------------------------------- */

/* The layout of a RoPE call: sizes >= 0, an even head size, rows wide enough for the heads and
 * every index within 64 bits; *empty when there is nothing to rotate. */
static int check_rope(const char *op, int64_t ld, int64_t B, int64_t T, int64_t n_heads, int64_t hs, bool *empty,
                      ddp_err *err)
{
    *empty = true;
    if (B < 0 || T < 0 || n_heads < 0 || hs < 0)
        return ddp_fail(err, DDP_ERUNTIME, "%s: negative size (B %lld, T %lld, n_heads %lld, hs %lld)", op,
                        (long long)B, (long long)T, (long long)n_heads, (long long)hs);
    if (hs % 2 != 0)
        return ddp_fail(err, DDP_ERUNTIME, "%s: head size %lld is odd, but RoPE rotates pairs (j, j + hs/2)", op,
                        (long long)hs);
    if (B == 0 || T == 0 || n_heads == 0 || hs == 0)
        return DDP_OK;
    int64_t width, rows, span;
    if (__builtin_mul_overflow(n_heads, hs, &width) || __builtin_mul_overflow(B, T, &rows) ||
        __builtin_mul_overflow(rows, ld > width ? ld : width, &span))
        return ddp_fail(err, DDP_ERUNTIME, "%s: sizes overflow 64 bits", op);
    if (ld < width)
        return ddp_fail(err, DDP_ERUNTIME, "%s: row stride ld %lld is narrower than the %lld heads of %lld (%lld)", op,
                        (long long)ld, (long long)n_heads, (long long)hs, (long long)width);
    *empty = false;
    return DDP_OK;
}

/* x's rotated elements read and written, the tables' T rows read. */
static prof_cost rope_cost(tensor_dtype t, int64_t B, int64_t T, int64_t n_heads, int64_t hs)
{
    const double elems = (double)B * (double)T * (double)n_heads * (double)hs;
    return prof_cost_of(2.0 * elems * (double)tensor_dtype_size(t) + 4.0 * (double)T * (double)hs,
                        FLOPS_ROPE * elems, PROF_MATH_FP32, "B=%lld T=%lld heads=%lld hs=%lld %s", (long long)B,
                        (long long)T, (long long)n_heads, (long long)hs, prof_dtype_name(t));
}

/* rope_forward and rope_backward share one contract. */
static int check_rope_call(device *d, const char *op, tensor_dtype t, const void *x, int64_t ld, int64_t B, int64_t T,
                           int64_t n_heads, int64_t hs, const float *cos, const float *sin, bool *empty, ddp_err *err)
{
    int rc = check_dtype(d, op, t, err);
    if (!rc)
        rc = check_rope(op, ld, B, T, n_heads, hs, empty, err);
    if (rc || *empty)
        return rc;
    NEED_POINTER(op, x);
    NEED_POINTER(op, cos);
    NEED_POINTER(op, sin);
    return DDP_OK;
}

int checked_rope_forward(device *d, tensor_dtype t, void *x, int64_t ld, int64_t B, int64_t T, int64_t n_heads,
                         int64_t hs, const float *cos, const float *sin,
                         const int32_t *doc_start, ddp_err *err)
{
    bool empty = true;
    int rc = check_rope_call(d, "rope_forward", t, x, ld, B, T, n_heads, hs, cos, sin, &empty, err);
    if (rc || empty)
        return rc;
    DEVICE_FORWARD(rope_forward, rope_cost(t, B, T, n_heads, hs), d, t, x, ld, B, T, n_heads, hs, cos, sin,
                   doc_start, err);
}

int checked_rope_backward(device *d, tensor_dtype t, void *x, int64_t ld, int64_t B, int64_t T, int64_t n_heads,
                          int64_t hs, const float *cos, const float *sin,
                          const int32_t *doc_start, ddp_err *err)
{
    bool empty = true;
    int rc = check_rope_call(d, "rope_backward", t, x, ld, B, T, n_heads, hs, cos, sin, &empty, err);
    if (rc || empty)
        return rc;
    DEVICE_FORWARD(rope_backward, rope_cost(t, B, T, n_heads, hs), d, t, x, ld, B, T, n_heads, hs, cos, sin,
                   doc_start, err);
}

/* ---- SwiGLU ------------------------------------------------------------------------------- */

/* N rows of F gate and F up columns: *empty when there is nothing to compute. */
static int check_swiglu(const char *op, int64_t N, int64_t F, bool *empty, ddp_err *err)
{
    *empty = true;
    int64_t width, n;
    if (N < 0 || F < 0)
        return ddp_fail(err, DDP_ERUNTIME, "%s: negative shape [%lld, %lld]", op, (long long)N, (long long)F);
    if (__builtin_mul_overflow(F, 2, &width) || __builtin_mul_overflow(N, width, &n))
        return ddp_fail(err, DDP_ERUNTIME, "%s: sizes overflow 64 bits", op);
    *empty = N == 0 || F == 0;
    return DDP_OK;
}

int checked_swiglu_forward(device *d, tensor_dtype t, void *h, const void *gate_up, int64_t N, int64_t F, ddp_err *err)
{
    bool empty = true;
    int rc = check_dtype(d, "swiglu_forward", t, err);
    if (!rc)
        rc = check_swiglu("swiglu_forward", N, F, &empty, err);
    if (rc || empty)
        return rc;
    NEED_POINTER("swiglu_forward", h);
    NEED_POINTER("swiglu_forward", gate_up);
    if (h == gate_up)
        return ddp_fail(err, DDP_ERUNTIME, "swiglu_forward: h overwrites gate_up, which it is computed from");
    DEVICE_FORWARD(swiglu_forward, /* gate_up read, h written */
                   matrix_cost(t, N, F, 3.0 * N * F * tensor_dtype_size(t), FLOPS_SWIGLU * (double)N * F, ""),
                   d, t, h, gate_up, N, F, err);
}

int checked_swiglu_backward(device *d, tensor_dtype t, void *dgate_up, const void *dh, const void *gate_up, int64_t N,
                            int64_t F, ddp_err *err)
{
    bool empty = true;
    int rc = check_dtype(d, "swiglu_backward", t, err);
    if (!rc)
        rc = check_swiglu("swiglu_backward", N, F, &empty, err);
    if (rc || empty)
        return rc;
    NEED_POINTER("swiglu_backward", dgate_up);
    NEED_POINTER("swiglu_backward", dh);
    NEED_POINTER("swiglu_backward", gate_up);
    if (dgate_up == dh)
        return ddp_fail(err, DDP_ERUNTIME, "swiglu_backward: dgate_up overwrites dh, which it is computed from");
    DEVICE_FORWARD(swiglu_backward, /* dh and gate_up read, dgate_up written */
                   matrix_cost(t, N, F, 5.0 * N * F * tensor_dtype_size(t), FLOPS_SWIGLU_GRAD * (double)N * F, ""),
                   d, t, dgate_up, dh, gate_up, N, F, err);
}
