/* device.c — the device layer's front: choosing the backend for a rank (device: auto | cpu | cuda)
 * and the checking table every caller's d->ops points to.
 *
 * Each op's checked_NAME states the op's argument contract once for both backends: it rejects
 * bad arguments with one message (the same whichever backend runs), returns when the op has
 * nothing to do, and forwards everything else to d->backend through DEVICE_FORWARD with the
 * op's cost (bytes, FLOPs, detail), which the profiler records when one is attached
 * (device_prof.h). It must not compute anything an op produces (that is the backends' job) nor
 * read device memory. */
#include "device.h"

#include "runtime/base/log.h"
#include "runtime/device/backend.h"
#include "runtime/device/device_check.h"

#include <limits.h>
#include <stdio.h>

/* ---- memory ---------------------------------------------------------------------------- */

static int checked_alloc(device *d, size_t bytes, void **out, ddp_err *err)
{
    NEED_POINTER("alloc", out);
    return d->backend->alloc(d, bytes, out, err);
}

static void checked_free(device *d, void *p)
{
    if (p)
        d->backend->free(d, p);
}

static int checked_upload(device *d, void *dst, const void *src, size_t bytes, ddp_err *err)
{
    if (bytes == 0)
        return DDP_OK;
    NEED_POINTER("upload", dst);
    NEED_POINTER("upload", src);
    DEVICE_FORWARD(upload, prof_cost_of((double)bytes, 0, PROF_MATH_NONE, "%zu bytes", bytes),
                   d, dst, src, bytes, err);
}

/* Downloading nothing still waits for the stream, as every download does. */
static int checked_download(device *d, void *dst, const void *src, size_t bytes, ddp_err *err)
{
    if (bytes == 0)
        return d->backend->synchronize(d, err);
    NEED_POINTER("download", dst);
    NEED_POINTER("download", src);
    DEVICE_FORWARD(download, prof_cost_of((double)bytes, 0, PROF_MATH_NONE, "%zu bytes", bytes),
                   d, dst, src, bytes, err);
}

static int checked_copy(device *d, void *dst, const void *src, size_t bytes, ddp_err *err)
{
    if (bytes == 0)
        return DDP_OK;
    NEED_POINTER("copy", dst);
    NEED_POINTER("copy", src);
    DEVICE_FORWARD(copy, prof_cost_of(2.0 * (double)bytes, 0, PROF_MATH_FP32, "%zu bytes", bytes),
                   d, dst, src, bytes, err);
}

static int checked_synchronize(device *d, ddp_err *err) { return d->backend->synchronize(d, err); }

static int checked_host_waits(device *d, uint64_t *count, ddp_err *err)
{
    NEED_POINTER("host_waits", count);
    return d->backend->host_waits(d, count, err);
}

/* ---- GEMM ------------------------------------------------------------------------------ */

static int check_gemm_sizes(bool ta, bool tb, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb,
                            int64_t ldc, ddp_err *err)
{
    if (m < 0 || n < 0 || k < 0)
        return ddp_fail(err, DDP_ERUNTIME, "gemm: negative size m=%lld n=%lld k=%lld", (long long)m,
                        (long long)n, (long long)k);
    int64_t a_row = ta ? m : k, b_row = tb ? k : n;
    if (lda < 1 || lda < a_row || ldb < 1 || ldb < b_row || ldc < 1 || ldc < n)
        return ddp_fail(err, DDP_ERUNTIME,
                        "gemm: leading dimension shorter than its row (lda=%lld needs >= %lld, ldb=%lld "
                        "needs >= %lld, ldc=%lld needs >= %lld)",
                        (long long)lda, (long long)(a_row > 1 ? a_row : 1), (long long)ldb,
                        (long long)(b_row > 1 ? b_row : 1), (long long)ldc, (long long)(n > 1 ? n : 1));
    return DDP_OK;
}

/* The operand types a backend can multiply: fp32 throughout, or (CUDA only) bf16 A and B into a
 * bf16 or fp32 C. */
static int check_gemm_types(const device *d, const char *op, tensor_dtype ab, tensor_dtype c_type, ddp_err *err)
{
    int rc = check_dtype(d, op, ab, err);
    if (!rc)
        rc = check_dtype(d, op, c_type, err);
    if (!rc && ab == TENSOR_F32 && c_type != TENSOR_F32)
        return ddp_fail(err, DDP_ERUNTIME, "%s: fp32 A and B with a bf16 C is not a supported combination", op);
    return rc;
}

static int checked_gemm(device *d, tensor_dtype ab, tensor_dtype c_type, bool ta, bool tb, int64_t m, int64_t n,
                        int64_t k, float alpha, const void *a, int64_t lda, const void *b, int64_t ldb, float beta,
                        void *c, int64_t ldc, ddp_err *err)
{
    int rc = check_gemm_types(d, "gemm", ab, c_type, err);
    if (!rc)
        rc = check_gemm_sizes(ta, tb, m, n, k, lda, ldb, ldc, err);
    if (rc || m == 0 || n == 0)
        return rc;
    NEED_POINTER("gemm", c);
    if (k > 0) {
        NEED_POINTER("gemm", a);
        NEED_POINTER("gemm", b);
    }
    DEVICE_FORWARD(gemm, gemm_cost(ab, c_type, ta, tb, m, n, k, beta, 1),
                   d, ab, c_type, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, err);
}

/* Each batch entry is a gemm; the strides must keep every C_i apart (|stride_c| >= the span of
 * one C matrix) and are otherwise the caller's business, as in cuBLAS. */
static int checked_gemm_strided_batched(device *d, tensor_dtype ab, tensor_dtype c_type, bool ta, bool tb, int64_t m,
                                        int64_t n, int64_t k, float alpha, const void *a, int64_t lda,
                                        int64_t stride_a, const void *b, int64_t ldb, int64_t stride_b, float beta,
                                        void *c, int64_t ldc, int64_t stride_c, int64_t batch, ddp_err *err)
{
    int rc = check_gemm_types(d, "gemm_strided_batched", ab, c_type, err);
    if (rc)
        return rc;
    rc = check_gemm_sizes(ta, tb, m, n, k, lda, ldb, ldc, err);
    if (rc)
        return ddp_prefix(err, "gemm_strided_batched");
    if (batch < 0 || stride_a < 0 || stride_b < 0 || stride_c < 0)
        return ddp_fail(err, DDP_ERUNTIME,
                        "gemm_strided_batched: negative batch %lld or stride (a %lld, b %lld, c %lld)",
                        (long long)batch, (long long)stride_a, (long long)stride_b, (long long)stride_c);
    if (batch == 0 || m == 0 || n == 0)
        return DDP_OK;
    if (batch > 1 && stride_c < (m - 1) * ldc + n)
        return ddp_fail(err, DDP_ERUNTIME, "gemm_strided_batched: stride_c %lld makes C matrices of %lld x %lld "
                        "(ldc %lld) overlap", (long long)stride_c, (long long)m, (long long)n, (long long)ldc);
    NEED_POINTER("gemm_strided_batched", c);
    if (k > 0) {
        NEED_POINTER("gemm_strided_batched", a);
        NEED_POINTER("gemm_strided_batched", b);
    }
    DEVICE_FORWARD(gemm_strided_batched, gemm_cost(ab, c_type, ta, tb, m, n, k, beta, batch),
                   d, ab, c_type, ta, tb, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc, stride_c,
                   batch, err);
}

/* The epilogue GEMMs' shared contract: a known type, consistent sizes with dense m x n outputs
 * (ld n), k >= 1 (a linear layer has an input), and the operands present. */
static int check_gemm_epilogue(const device *d, const char *op, tensor_dtype t, bool ta, bool tb, int64_t m,
                               int64_t n, int64_t k, const void *a, int64_t lda, const void *b, int64_t ldb,
                               ddp_err *err)
{
    int rc = check_dtype(d, op, t, err);
    if (!rc && k < 1 && m >= 0 && n >= 0)
        return ddp_fail(err, DDP_ERUNTIME, "%s: k=%lld, but a linear layer needs k >= 1", op, (long long)k);
    if (!rc && (rc = check_gemm_sizes(ta, tb, m, n, k, lda, ldb, n > 1 ? n : 1, err)) != DDP_OK)
        return ddp_prefix(err, "%s", op);
    if (rc || m == 0 || n == 0)
        return rc;
    NEED_POINTER(op, a);
    NEED_POINTER(op, b);
    return DDP_OK;
}

static int checked_gemm_bias(device *d, tensor_dtype t, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                             const void *a, int64_t lda, const void *b, int64_t ldb, const void *bias, void *y,
                             ddp_err *err)
{
    int rc = check_gemm_epilogue(d, "gemm_bias", t, ta, tb, m, n, k, a, lda, b, ldb, err);
    if (rc || m == 0 || n == 0)
        return rc;
    NEED_POINTER("gemm_bias", bias);
    NEED_POINTER("gemm_bias", y);
    DEVICE_FORWARD(gemm_bias, epilogue_cost(t, ta, tb, m, n, k, 1, 1),
                   d, t, ta, tb, m, n, k, a, lda, b, ldb, bias, y, err);
}

static int checked_gemm_bias_gelu(device *d, tensor_dtype t, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                                  const void *a, int64_t lda, const void *b, int64_t ldb, const void *bias, void *pre,
                                  void *y, ddp_err *err)
{
    int rc = check_gemm_epilogue(d, "gemm_bias_gelu", t, ta, tb, m, n, k, a, lda, b, ldb, err);
    if (rc || m == 0 || n == 0)
        return rc;
    NEED_POINTER("gemm_bias_gelu", bias);
    NEED_POINTER("gemm_bias_gelu", pre);
    NEED_POINTER("gemm_bias_gelu", y);
    if (pre == y)
        return ddp_fail(err, DDP_ERUNTIME, "gemm_bias_gelu: pre and y are the same tensor (backward needs both)");
    DEVICE_FORWARD(gemm_bias_gelu, epilogue_cost(t, ta, tb, m, n, k, 2, 1 + FLOPS_GELU),
                   d, t, ta, tb, m, n, k, a, lda, b, ldb, bias, pre, y, err);
}

static int checked_gemm_gelu_backward(device *d, tensor_dtype t, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                                      const void *a, int64_t lda, const void *b, int64_t ldb, const void *pre,
                                      void *dx, ddp_err *err)
{
    int rc = check_gemm_epilogue(d, "gemm_gelu_backward", t, ta, tb, m, n, k, a, lda, b, ldb, err);
    if (rc || m == 0 || n == 0)
        return rc;
    NEED_POINTER("gemm_gelu_backward", pre);
    NEED_POINTER("gemm_gelu_backward", dx);
    if (pre == dx)
        return ddp_fail(err, DDP_ERUNTIME, "gemm_gelu_backward: dx overwrites pre, which it is computed from");
    DEVICE_FORWARD(gemm_gelu_backward, epilogue_cost(t, ta, tb, m, n, k, 2, FLOPS_GELU_GRAD),
                   d, t, ta, tb, m, n, k, a, lda, b, ldb, pre, dx, err);
}

/* ---- element-wise ---------------------------------------------------------------------- */

static int checked_fill(device *d, tensor_dtype t, void *x, size_t n, float value, ddp_err *err)
{
    int rc = check_dtype(d, "fill", t, err);
    if (rc || n == 0)
        return rc;
    NEED_POINTER("fill", x);
    DEVICE_FORWARD(fill, elementwise_cost(t, n, 1, 0),
                   d, t, x, n, value, err);
}

static int checked_scale(device *d, float *x, size_t n, float s, ddp_err *err)
{
    if (n == 0)
        return DDP_OK;
    NEED_POINTER("scale", x);
    DEVICE_FORWARD(scale, flat_cost(n, 8, 1, ""),
                   d, x, n, s, err);
}

static int checked_u8_to_f32(device *d, const uint8_t *src, float *dst, size_t n, float mean, float inv_std,
                             ddp_err *err)
{
    if (n == 0)
        return DDP_OK;
    NEED_POINTER("u8_to_f32", src);
    NEED_POINTER("u8_to_f32", dst);
    DEVICE_FORWARD(u8_to_f32, flat_cost(n, 5, 3, ""),
                   d, src, dst, n, mean, inv_std, err);
}

static int checked_bias_add(device *d, tensor_dtype t, void *y, const void *b, int64_t rows, int64_t cols,
                            ddp_err *err)
{
    int rc = check_dtype(d, "bias_add", t, err);
    if (!rc)
        rc = check_shape("bias_add", rows, cols, err);
    if (rc || rows == 0 || cols == 0)
        return rc;
    NEED_POINTER("bias_add", y);
    NEED_POINTER("bias_add", b);
    DEVICE_FORWARD(bias_add,
                   matrix_cost(t, rows, cols, (2.0 * rows * cols + cols) * tensor_dtype_size(t), (double)rows * cols,
                               ""),
                   d, t, y, b, rows, cols, err);
}

static int checked_act_forward(device *d, tensor_dtype t, act_kind a, const void *x, void *y, size_t n,
                               ddp_err *err)
{
    int rc = check_dtype(d, "act_forward", t, err);
    if (!rc)
        rc = check_act("act_forward", a, err);
    if (rc || n == 0)
        return rc;
    NEED_POINTER("act_forward", x);
    NEED_POINTER("act_forward", y);
    DEVICE_FORWARD(act_forward, act_cost(t, a, n, 2, a == ACT_RELU ? 1 : FLOPS_GELU),
                   d, t, a, x, y, n, err);
}

static int checked_act_backward(device *d, tensor_dtype t, act_kind a, const void *x, const void *dy, void *dx,
                                size_t n, ddp_err *err)
{
    int rc = check_dtype(d, "act_backward", t, err);
    if (!rc)
        rc = check_act("act_backward", a, err);
    if (rc || n == 0)
        return rc;
    NEED_POINTER("act_backward", x);
    NEED_POINTER("act_backward", dy);
    NEED_POINTER("act_backward", dx);
    DEVICE_FORWARD(act_backward, act_cost(t, a, n, 3, a == ACT_RELU ? 1 : FLOPS_GELU_GRAD),
                   d, t, a, x, dy, dx, n, err);
}

static int checked_add(device *d, tensor_dtype t, void *out, const void *a, const void *b, size_t n, ddp_err *err)
{
    int rc = check_dtype(d, "add", t, err);
    if (rc || n == 0)
        return rc;
    NEED_POINTER("add", out);
    NEED_POINTER("add", a);
    NEED_POINTER("add", b);
    DEVICE_FORWARD(add, elementwise_cost(t, n, 3, 1),
                   d, t, out, a, b, n, err);
}

/* ---- reductions ------------------------------------------------------------------------ */

/* No rows still writes db (beta 0 clears it), so only an empty row is nothing to do. */
static int checked_bias_grad(device *d, tensor_dtype t, const void *dy, float *db, int64_t rows, int64_t cols,
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

static int checked_softmax_xent(device *d, tensor_dtype t, const void *logits, int64_t ld, const int32_t *labels,
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
static int checked_sumsq(device *d, const float *x, size_t n, double *out, ddp_err *err)
{
    NEED_POINTER("sumsq", out);
    if (n > 0)
        NEED_POINTER("sumsq", x);
    DEVICE_FORWARD(sumsq, flat_cost(n, 4, 2, ""),
                   d, x, n, out, err);
}

static int checked_sum_f64(device *d, const double *x, size_t n, double *out, ddp_err *err)
{
    NEED_POINTER("sum_f64", out);
    if (n > 0)
        NEED_POINTER("sum_f64", x);
    if (n > UINT_MAX)
        return ddp_fail(err, DDP_ERUNTIME, "sum_f64: %zu doubles, more than one block adds", n);
    DEVICE_FORWARD(sum_f64, flat_cost(n, 8, 1, ""),
                   d, x, n, out, err);
}

static int checked_clip_scale(device *d, const double *sumsq, double max_norm, float *scale, ddp_err *err)
{
    if (!(max_norm > 0.0))
        return ddp_fail(err, DDP_ERUNTIME, "clip_scale: max_norm is %g, must be > 0 (clipping off: no scale)",
                        max_norm);
    NEED_POINTER("clip_scale", sumsq);
    NEED_POINTER("clip_scale", scale);
    DEVICE_FORWARD(clip_scale, prof_cost_of(12, 4, PROF_MATH_FP32, NULL),
                   d, sumsq, max_norm, scale, err);
}

/* ---- optimizer updates ----------------------------------------------------------------- */

/* The exemption table's shape; its contents are device memory, never read here. */
static int check_exempt(const char *op, const decay_exempt *x, size_t n, ddp_err *err)
{
    if (x->n_bounds % 2 != 0)
        return ddp_fail(err, DDP_ERUNTIME, "%s: %zu exemption bounds, not [start, end) pairs", op, x->n_bounds);
    if (x->n_bounds > 0 && !x->bounds)
        return ddp_fail(err, DDP_ERUNTIME, "%s: exempt.bounds is NULL with %zu bounds", op, x->n_bounds);
    if (x->first > SIZE_MAX - n)
        return ddp_fail(err, DDP_ERUNTIME, "%s: element offsets %zu + %zu overflow", op, x->first, n);
    return DDP_OK;
}

/* scale may be NULL (gradients used as they are) and is never read here: it is device memory. */
static int checked_sgd_step(device *d, float *p, const float *g, const float *scale, float *buf, size_t n,
                            const sgd_args *args, ddp_err *err)
{
    NEED_POINTER("sgd_step", args);
    int rc = check_exempt("sgd_step", &args->exempt, n, err);
    if (rc || n == 0)
        return rc;
    NEED_POINTER("sgd_step", p);
    NEED_POINTER("sgd_step", g);
    if (args->momentum != 0.0f && !buf)
        return ddp_fail(err, DDP_ERUNTIME, "sgd_step: momentum %g needs a momentum buffer", (double)args->momentum);
    DEVICE_FORWARD(sgd_step, flat_cost(n, buf ? 20 : 12, buf ? 5 : 3, buf ? " momentum" : ""),
                   d, p, g, scale, buf, n, args, err);
}

static int checked_adamw_step(device *d, float *p, const float *g, const float *scale, float *m, float *v, size_t n,
                              const adamw_args *args, ddp_err *err)
{
    NEED_POINTER("adamw_step", args);
    if (!(args->bias2_sqrt > 0.0f))
        return ddp_fail(err, DDP_ERUNTIME,
                        "adamw_step: bias2_sqrt is %g, must be > 0 (sqrt(1 - beta2^step), step >= 1)",
                        (double)args->bias2_sqrt);
    int rc = check_exempt("adamw_step", &args->exempt, n, err);
    if (rc || n == 0)
        return rc;
    NEED_POINTER("adamw_step", p);
    NEED_POINTER("adamw_step", g);
    NEED_POINTER("adamw_step", m);
    NEED_POINTER("adamw_step", v);
    DEVICE_FORWARD(adamw_step, flat_cost(n, 28, FLOPS_ADAMW, ""),
                   d, p, g, scale, m, v, n, args, err);
}

/* ---- bfloat16 casts -------------------------------------------------------------------- */

static int checked_cast_f32_to_bf16(device *d, const float *src, uint16_t *dst, size_t n, ddp_err *err)
{
    if (n == 0)
        return DDP_OK;
    NEED_POINTER("cast_f32_to_bf16", src);
    NEED_POINTER("cast_f32_to_bf16", dst);
    DEVICE_FORWARD(cast_f32_to_bf16, flat_cost(n, 6, 1, ""),
                   d, src, dst, n, err);
}

static int checked_cast_bf16_to_f32(device *d, const uint16_t *src, float *dst, size_t n, float scale, ddp_err *err)
{
    if (n == 0)
        return DDP_OK;
    NEED_POINTER("cast_bf16_to_f32", src);
    NEED_POINTER("cast_bf16_to_f32", dst);
    DEVICE_FORWARD(cast_bf16_to_f32, flat_cost(n, 6, 1, ""),
                   d, src, dst, n, scale, err);
}

static int checked_cast_f32_to_bf16_stochastic(device *d, const float *src, uint16_t *dst, size_t n, uint64_t seed,
                                               uint64_t step, uint64_t first, ddp_err *err)
{
    if (n == 0)
        return DDP_OK;
    NEED_POINTER("cast_f32_to_bf16_stochastic", src);
    NEED_POINTER("cast_f32_to_bf16_stochastic", dst);
    if (first > UINT64_MAX - n)
        return ddp_fail(err, DDP_ERUNTIME, "cast_f32_to_bf16_stochastic: element indices %llu + %zu overflow",
                        (unsigned long long)first, n);
    DEVICE_FORWARD(cast_f32_to_bf16_stochastic, flat_cost(n, 6, 10, ""),
                   d, src, dst, n, seed, step, first, err);
}

/* ---- interval timer -------------------------------------------------------------------- */

static int checked_timer_create(device *d, device_timer **out, ddp_err *err)
{
    NEED_POINTER("timer_create", out);
    return d->backend->timer_create(d, out, err);
}

static int checked_timer_start(device *d, device_timer *t, ddp_err *err)
{
    NEED_POINTER("timer_start", t);
    return d->backend->timer_start(d, t, err);
}

static int checked_timer_stop(device *d, device_timer *t, ddp_err *err)
{
    NEED_POINTER("timer_stop", t);
    return d->backend->timer_stop(d, t, err);
}

static int checked_timer_take_ms(device *d, device_timer *t, double *ms, ddp_err *err)
{
    NEED_POINTER("timer_take_ms", t);
    NEED_POINTER("timer_take_ms", ms);
    return d->backend->timer_take_ms(d, t, ms, err);
}

static void checked_timer_destroy(device *d, device_timer *t)
{
    if (t)
        d->backend->timer_destroy(d, t);
}

/* ---- timestamps for the profiler (never recorded themselves) --------------------------------- */

static int checked_stamps_create(device *d, uint32_t capacity, device_stamps **out, ddp_err *err)
{
    NEED_POINTER("stamps_create", out);
    *out = NULL;
    if (capacity == 0)
        return ddp_fail(err, DDP_ERUNTIME, "stamps_create: no slots (capacity 0)");
    return d->backend->stamps_create(d, capacity, out, err);
}

static int checked_stamp(device *d, device_stamps *s, uint32_t slot, void *stream, ddp_err *err)
{
    NEED_POINTER("stamp", s);
    if (slot >= s->capacity)
        return ddp_fail(err, DDP_ERUNTIME, "stamp: slot %u of %u", slot, s->capacity);
    return d->backend->stamp(d, s, slot, stream, err);
}

static int checked_stream_wait_compute(device *d, void *stream, ddp_err *err)
{
    return d->backend->stream_wait_compute(d, stream, err);
}

static int checked_stamps_read(device *d, device_stamps *s, uint32_t n, double *us, ddp_err *err)
{
    NEED_POINTER("stamps_read", s);
    if (n == 0)
        return DDP_OK;
    NEED_POINTER("stamps_read", us);
    if (n > s->capacity)
        return ddp_fail(err, DDP_ERUNTIME, "stamps_read: %u slots of %u", n, s->capacity);
    if (!s->stamped[0])
        return ddp_fail(err, DDP_ERUNTIME, "stamps_read: slot 0, which the others are timed from, was never stamped");
    return d->backend->stamps_read(d, s, n, us, err);
}

static void checked_stamps_destroy(device *d, device_stamps *s)
{
    if (s)
        d->backend->stamps_destroy(d, s);
}

static void checked_destroy(device *d) { d->backend->destroy(d); }

/* ---- the table and the backends behind it ------------------------------------------------ */

#define CHECKED_OP_ENTRY(name, params) .name = checked_##name,
static const struct device_ops checked_ops = {
    DEVICE_OPS(CHECKED_OP_ENTRY)
    .free = checked_free,
    .timer_destroy = checked_timer_destroy,
    .stamps_destroy = checked_stamps_destroy,
    .destroy = checked_destroy,
};

int device_cpu_create(device **out, ddp_err *err)
{
    *out = NULL;
    int rc = device_cpu_backend_create(out, err);
    if (!rc)
        (*out)->ops = &checked_ops;
    return rc;
}

#ifdef DDP_HAVE_CUDA
int device_cuda_create(int local_rank, const device_opts *opts, device **out, ddp_err *err)
{
    *out = NULL;
    int rc = device_cuda_backend_create(local_rank, opts, out, err);
    if (!rc)
        (*out)->ops = &checked_ops;
    return rc;
}
#else
int device_cuda_count(char *reason, size_t reason_len)
{
    snprintf(reason, reason_len, "this build of ddprun has no CUDA backend (configure with -Dgpu=enabled)");
    return 0;
}

int device_cuda_create(int local_rank, const device_opts *opts, device **out, ddp_err *err)
{
    (void)local_rank;
    (void)opts;
    *out = NULL;
    return ddp_fail(err, DDP_EUSAGE, "device: cuda requested, but this build of ddprun has no CUDA backend "
                                     "(configure with -Dgpu=enabled, or -Dgpu_emulation=true for the CPU emulation)");
}
#endif

int device_open(const device_opts *opts, int local_rank, device **out, ddp_err *err)
{
    char reason[256] = "";
    switch (opts->kind) {
    case DEVICE_CPU:
        return device_cpu_create(out, err);
    case DEVICE_CUDA:
        return device_cuda_create(local_rank, opts, out, err);
    case DEVICE_AUTO:
        if (device_cuda_count(reason, sizeof reason) > 0)
            return device_cuda_create(local_rank, opts, out, err);
        log_info("device: auto -> cpu (%s)", reason);
        return device_cpu_create(out, err);
    }
    return ddp_fail(err, DDP_EUSAGE, "device: unknown kind %d", (int)opts->kind);
}
