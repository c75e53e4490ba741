/* device_check_reduce.c — the argument contracts of the reduction family's ops (device.h's
 * DEVICE_REDUCE_OPS), for device.c's checking table: each checked_NAME rejects bad arguments with
 * one message for both backends, returns when there is nothing to do (a sum of nothing is still
 * written), and forwards the rest to d->backend with its cost. It must not compute anything an op
 * produces nor read device memory (the labels, being data, are the backends' to check). */
#include "runtime/device/device_check.h"

#include <limits.h>

/* No rows still writes db (beta 0 clears it), so only an empty row is nothing to do. */
int checked_bias_grad(device *d, tensor_dtype t, const void *dy, float *db, int64_t rows, int64_t cols,
                      float beta, ddp_err *err)
{
    int rc = check_dtype(d, "bias_grad", t, err);
    if (!rc)
        rc = check_shape("bias_grad", rows, cols, err);
    if (rc || cols == 0)
        return rc;
    NEED_POINTER("bias_grad", db);
    if (rows > 0)
        NEED_POINTER("bias_grad", dy);
    DEVICE_FORWARD(bias_grad,
                   matrix_cost(t, rows, cols,
                               (double)rows * cols * tensor_dtype_size(t) + (beta != 0 ? 8.0 : 4.0) * cols,
                               (double)rows * cols, ""),
                   d, t, dy, db, rows, cols, beta, err);
}

int checked_softmax_xent(device *d, tensor_dtype t, const void *logits, int64_t ld, const int32_t *labels,
                         int64_t rows, int64_t cols, float grad_scale, void *dlogits, float *stats, ddp_err *err)
{
    int rc = check_dtype(d, "softmax_xent", t, err);
    if (!rc)
        rc = check_shape("softmax_xent", rows, cols, err);
    if (rc || rows == 0)
        return rc;
    if (cols == 0)
        return ddp_fail(err, DDP_ERUNTIME, "softmax_xent: zero classes");
    if (ld < cols)
        return ddp_fail(err, DDP_ERUNTIME, "softmax_xent: row stride %lld is shorter than the %lld classes",
                        (long long)ld, (long long)cols);
    NEED_POINTER("softmax_xent", logits);
    NEED_POINTER("softmax_xent", labels);
    NEED_POINTER("softmax_xent", stats);
    DEVICE_FORWARD(softmax_xent, /* dlogits written with its padding; labels read */
                   matrix_cost(t, rows, cols, rows * ((double)(cols + (dlogits ? ld : 0)) * tensor_dtype_size(t) + 4),
                               5.0 * rows * cols, dlogits ? " +grad" : ""),
                   d, t, logits, ld, labels, rows, cols, grad_scale, dlogits, stats, err);
}

/* The sum of nothing is 0, which the backend still writes to out (a device double). */
int checked_sumsq(device *d, const float *x, size_t n, double *out, ddp_err *err)
{
    NEED_POINTER("sumsq", out);
    if (n > 0)
        NEED_POINTER("sumsq", x);
    DEVICE_FORWARD(sumsq, flat_cost(n, 4, 2, ""),
                   d, x, n, out, err);
}

int checked_sum_f64(device *d, const double *x, size_t n, double *out, ddp_err *err)
{
    NEED_POINTER("sum_f64", out);
    if (n > 0)
        NEED_POINTER("sum_f64", x);
    if (n > UINT_MAX)
        return ddp_fail(err, DDP_ERUNTIME, "sum_f64: %zu doubles, more than one block adds", n);
    DEVICE_FORWARD(sum_f64, flat_cost(n, 8, 1, ""),
                   d, x, n, out, err);
}

int checked_clip_scale(device *d, const double *sumsq, double max_norm, float *scale, ddp_err *err)
{
    if (!(max_norm > 0.0))
        return ddp_fail(err, DDP_ERUNTIME, "clip_scale: max_norm is %g, must be > 0 (clipping off: no scale)",
                        max_norm);
    NEED_POINTER("clip_scale", sumsq);
    NEED_POINTER("clip_scale", scale);
    DEVICE_FORWARD(clip_scale, prof_cost_of(12, 4, PROF_MATH_FP32, NULL),
                   d, sumsq, max_norm, scale, err);
}
