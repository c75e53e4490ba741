/* device_cpu.c — the CPU backend of the device layer (device.h): host memory, one GEMM library
 * (oneDNN's dnnl_sgemm or OpenBLAS's cblas_sgemm, chosen at build time by the meson option
 * cpu_gemm after scripts/bench-gemm measured both) and plain loops for the element-wise ops.
 *
 * Every op runs synchronously on the calling thread, so the "stream" is trivially in order.
 * Threading belongs to the GEMM library: oneDNN (OpenMP build) and OpenBLAS both honour
 * OMP_NUM_THREADS (OpenBLAS prefers OPENBLAS_NUM_THREADS); this file never sets a thread count
 * or OPENBLAS_CORETYPE. The optimizer updates copy PyTorch's float32 order of operations so
 * trajectories match torch.optim step for step. This file must not know about models, ranks or
 * communication. */
#include "device.h"

#include "runtime/base/clock.h"
#include "runtime/base/half.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(DDP_GEMM_ONEDNN)
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>
#elif defined(DDP_GEMM_OPENBLAS)
#include <cblas.h>
#else
#error "define DDP_GEMM_ONEDNN or DDP_GEMM_OPENBLAS (meson option cpu_gemm)"
#endif

/* Element-wise loops run on OpenMP threads when large enough to pay for the fork: the GEMM
 * library's worker threads would otherwise spin idle (on this project's 2-vCPU machines, on the
 * hyperthread sibling of the one doing the work). Every element is computed independently, so
 * results do not depend on the thread count. */
#define DDP_OMP_MIN_ELEMENTS 32768
#define DDP_PRAGMA(x) _Pragma(#x)
#define DDP_PARALLEL_FOR(n) DDP_PRAGMA(omp parallel for schedule(static) if ((size_t)(n) >= DDP_OMP_MIN_ELEMENTS))

#define CPU_ALIGN 64

/* ---- memory ---------------------------------------------------------------------------- */

static int cpu_alloc(device *d, size_t bytes, void **out, ddp_err *err)
{
    (void)d;
    /* aligned_alloc wants a multiple of the alignment; a zero-byte request still gets a pointer */
    size_t rounded = bytes ? bytes : 1;
    if (rounded > SIZE_MAX - (CPU_ALIGN - 1))
        return ddp_fail(err, DDP_ERUNTIME, "cpu alloc: %zu bytes is too large", bytes);
    rounded = (rounded + CPU_ALIGN - 1) / CPU_ALIGN * CPU_ALIGN;
    void *p = aligned_alloc(CPU_ALIGN, rounded);
    if (!p)
        return ddp_fail(err, DDP_ERUNTIME, "cpu alloc: out of host memory allocating %zu bytes", bytes);
    *out = p;
    return DDP_OK;
}

static void cpu_free(device *d, void *p)
{
    (void)d;
    free(p);
}

static int cpu_memcpy(device *d, void *dst, const void *src, size_t bytes, ddp_err *err)
{
    (void)d;
    (void)err;
    if (bytes)
        memcpy(dst, src, bytes);
    return DDP_OK;
}

static int cpu_synchronize(device *d, ddp_err *err)
{
    (void)d;
    (void)err;
    return DDP_OK;
}

/* ---- GEMM ------------------------------------------------------------------------------ */

/* C = beta * C for k == 0, where no library call is needed (and BLAS conventions differ). */
static void scale_matrix(float *c, int64_t m, int64_t n, int64_t ldc, float beta)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++)
            c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
}

static int check_gemm_args(bool ta, bool tb, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb,
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

static int cpu_gemm(device *d, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                    int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc, ddp_err *err)
{
    (void)d;
    int rc = check_gemm_args(ta, tb, m, n, k, lda, ldb, ldc, err);
    if (rc)
        return rc;
    if (m == 0 || n == 0)
        return DDP_OK;
    if (k == 0 || alpha == 0.0f) {
        scale_matrix(c, m, n, ldc, beta);
        return DDP_OK;
    }
#if defined(DDP_GEMM_ONEDNN)
    dnnl_status_t st = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    if (st != dnnl_success)
        return ddp_fail(err, DDP_ERUNTIME, "%s:%d: dnnl_sgemm(m=%lld n=%lld k=%lld) failed: %s", __FILE__,
                        __LINE__, (long long)m, (long long)n, (long long)k, dnnl_status2str(st));
#else
    /* cblas takes int: a dimension past INT_MAX would need a blocked loop nothing here needs yet */
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX || lda > INT_MAX || ldb > INT_MAX || ldc > INT_MAX)
        return ddp_fail(err, DDP_ERUNTIME,
                        "gemm: OpenBLAS takes 32-bit sizes; m=%lld n=%lld k=%lld (ld %lld/%lld/%lld) exceeds "
                        "INT_MAX (build with -Dcpu_gemm=onednn for 64-bit sizes)",
                        (long long)m, (long long)n, (long long)k, (long long)lda, (long long)ldb,
                        (long long)ldc);
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)m, (int)n,
                (int)k, alpha, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
#endif
    return DDP_OK;
}

/* ---- element-wise ---------------------------------------------------------------------- */

static int cpu_fill(device *d, float *x, size_t n, float value, ddp_err *err)
{
    (void)d;
    (void)err;
    DDP_PARALLEL_FOR(n)
    for (size_t i = 0; i < n; i++)
        x[i] = value;
    return DDP_OK;
}

static int cpu_scale(device *d, float *x, size_t n, float s, ddp_err *err)
{
    (void)d;
    (void)err;
    DDP_PARALLEL_FOR(n)
    for (size_t i = 0; i < n; i++)
        x[i] *= s;
    return DDP_OK;
}

static int cpu_u8_to_f32(device *d, const uint8_t *src, float *dst, size_t n, float mean, float inv_std,
                         ddp_err *err)
{
    (void)d;
    (void)err;
    DDP_PARALLEL_FOR(n)
    for (size_t i = 0; i < n; i++)
        dst[i] = ((float)src[i] / 255.0f - mean) * inv_std;
    return DDP_OK;
}

static int check_rows_cols(const char *op, int64_t rows, int64_t cols, ddp_err *err)
{
    if (rows < 0 || cols < 0)
        return ddp_fail(err, DDP_ERUNTIME, "%s: negative shape [%lld, %lld]", op, (long long)rows,
                        (long long)cols);
    return DDP_OK;
}

static int cpu_bias_add(device *d, float *restrict y, const float *restrict b, int64_t rows, int64_t cols,
                        ddp_err *err)
{
    (void)d;
    int rc = check_rows_cols("bias_add", rows, cols, err);
    if (rc)
        return rc;
    DDP_PARALLEL_FOR(rows * cols)
    for (int64_t r = 0; r < rows; r++) {
        float *restrict row = y + r * cols;
        for (int64_t c = 0; c < cols; c++)
            row[c] += b[c];
    }
    return DDP_OK;
}

static int cpu_bias_grad(device *d, const float *restrict dy, float *restrict db, int64_t rows, int64_t cols,
                         float beta, ddp_err *err)
{
    (void)d;
    int rc = check_rows_cols("bias_grad", rows, cols, err);
    if (rc)
        return rc;
    for (int64_t c = 0; c < cols; c++)
        db[c] = beta == 0.0f ? 0.0f : beta * db[c]; /* beta 0 must clear NaN garbage too */
    for (int64_t r = 0; r < rows; r++) {
        const float *restrict row = dy + r * cols;
        for (int64_t c = 0; c < cols; c++)
            db[c] += row[c];
    }
    return DDP_OK;
}

/* Exact (erf) GELU, as torch.nn.GELU() with approximate='none'. */
static inline float gelu_cdf(float x) { return 0.5f * (1.0f + erff(x * (float)M_SQRT1_2)); }

static int cpu_act_forward(device *d, act_kind a, const float *restrict x, float *restrict y, size_t n,
                           ddp_err *err)
{
    (void)d;
    if (a == ACT_RELU) {
        DDP_PARALLEL_FOR(n)
        for (size_t i = 0; i < n; i++)
            y[i] = x[i] > 0.0f ? x[i] : 0.0f;
    } else if (a == ACT_GELU) {
        DDP_PARALLEL_FOR(n)
        for (size_t i = 0; i < n; i++)
            y[i] = x[i] * gelu_cdf(x[i]);
    } else {
        return ddp_fail(err, DDP_ERUNTIME, "act_forward: unknown activation %d", (int)a);
    }
    return DDP_OK;
}

static int cpu_act_backward(device *d, act_kind a, const float *restrict x, const float *restrict dy,
                            float *restrict dx, size_t n, ddp_err *err)
{
    (void)d;
    if (a == ACT_RELU) {
        DDP_PARALLEL_FOR(n)
        for (size_t i = 0; i < n; i++)
            dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
    } else if (a == ACT_GELU) {
        const float inv_sqrt_2pi = 0.3989422804014327f;
        /* d/dx [x·Φ(x)] = Φ(x) + x·φ(x) */
        DDP_PARALLEL_FOR(n)
        for (size_t i = 0; i < n; i++) {
            float pdf = inv_sqrt_2pi * expf(-0.5f * x[i] * x[i]);
            dx[i] = dy[i] * (gelu_cdf(x[i]) + x[i] * pdf);
        }
    } else {
        return ddp_fail(err, DDP_ERUNTIME, "act_backward: unknown activation %d", (int)a);
    }
    return DDP_OK;
}

/* One row: loss = logsumexp(l) - l[label], computed around the row max so exp never overflows. */
static double xent_row(const float *restrict l, int32_t label, int64_t cols, float grad_scale,
                       float *restrict dl, int *correct)
{
    int64_t argmax = 0;
    for (int64_t c = 1; c < cols; c++)
        if (l[c] > l[argmax]) /* strict: ties keep the lowest index, as torch.argmax */
            argmax = c;
    float mx = l[argmax];
    double sum = 0.0;
    for (int64_t c = 0; c < cols; c++)
        sum += exp((double)l[c] - (double)mx);
    double lse = (double)mx + log(sum);
    if (dl) {
        for (int64_t c = 0; c < cols; c++) {
            double p = exp((double)l[c] - lse);
            dl[c] = (float)((p - (c == label ? 1.0 : 0.0)) * grad_scale);
        }
    }
    *correct = argmax == label;
    return lse - (double)l[label];
}

static int cpu_softmax_xent(device *d, const float *logits, const int32_t *labels, int64_t rows, int64_t cols,
                            float grad_scale, float *dlogits, float *stats, ddp_err *err)
{
    (void)d;
    int rc = check_rows_cols("softmax_xent", rows, cols, err);
    if (rc)
        return rc;
    if (cols == 0 && rows > 0)
        return ddp_fail(err, DDP_ERUNTIME, "softmax_xent: zero classes");
    double loss_sum = 0.0;
    int64_t n_correct = 0;
    for (int64_t r = 0; r < rows; r++) {
        if (labels[r] < 0 || labels[r] >= cols)
            return ddp_fail(err, DDP_ERUNTIME, "softmax_xent: row %lld has label %d outside [0, %lld)",
                            (long long)r, (int)labels[r], (long long)cols);
        int correct;
        loss_sum += xent_row(logits + r * cols, labels[r], cols, grad_scale, dlogits ? dlogits + r * cols : NULL,
                             &correct);
        n_correct += correct;
    }
    stats[0] += (float)loss_sum;
    stats[1] += (float)n_correct;
    return DDP_OK;
}

static int cpu_sumsq(device *d, const float *x, size_t n, double *out, ddp_err *err)
{
    (void)d;
    (void)err;
    /* eight fixed lanes, combined in a fixed order: deterministic and not latency-bound */
    double lane[8] = {0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++)
            lane[j] += (double)x[i + j] * (double)x[i + j];
    for (; i < n; i++)
        lane[0] += (double)x[i] * (double)x[i];
    *out = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
    return DDP_OK;
}

/* ---- optimizer updates (torch.optim order of float32 operations) ------------------------ */

static int cpu_sgd_step(device *d, float *restrict p, const float *restrict g, float *restrict buf, size_t n,
                        const sgd_args *a, ddp_err *err)
{
    (void)d;
    if (a->momentum != 0.0f && !buf)
        return ddp_fail(err, DDP_ERUNTIME, "sgd_step: momentum %g needs a momentum buffer", (double)a->momentum);
    const float lr = a->lr, mom = a->momentum, wd = a->weight_decay, gs = a->grad_scale;
    DDP_PARALLEL_FOR(n)
    for (size_t i = 0; i < n; i++) {
        float step = g[i] * gs;      /* clip_grad_norm_ scales the gradient in place */
        if (wd != 0.0f)
            step = step + wd * p[i]; /* d_p = d_p.add(p, alpha=wd) */
        if (mom != 0.0f) {
            float b = a->first_step ? step : buf[i] * mom + step;
            buf[i] = b;
            step = a->nesterov ? step + mom * b : b;
        }
        p[i] = p[i] + (-lr) * step;
    }
    return DDP_OK;
}

static int cpu_adamw_step(device *d, float *restrict p, const float *restrict g, float *restrict m,
                          float *restrict v, size_t n, const adamw_args *a, ddp_err *err)
{
    (void)d;
    if (a->step < 1)
        return ddp_fail(err, DDP_ERUNTIME, "adamw_step: step is %lld, must be >= 1 (bias correction)",
                        (long long)a->step);
    /* PyTorch computes these scalars in double and applies them as float32 */
    const double lr = a->lr, b1 = a->beta1, b2 = a->beta2;
    const float decay = (float)(1.0 - lr * (double)a->weight_decay);
    const float b1f = (float)b1, one_minus_b1 = (float)(1.0 - b1);
    const float b2f = (float)b2, one_minus_b2 = (float)(1.0 - b2);
    const float step_size = (float)(lr / (1.0 - pow(b1, (double)a->step)));
    const float bc2_sqrt = (float)sqrt(1.0 - pow(b2, (double)a->step));
    const float eps = a->eps, gs = a->grad_scale;
    DDP_PARALLEL_FOR(n)
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] * gs;
        float pi = p[i] * decay;
        float mi = m[i] * b1f + one_minus_b1 * gi;
        float vi = v[i] * b2f + one_minus_b2 * (gi * gi);
        float denom = sqrtf(vi) / bc2_sqrt + eps;
        p[i] = pi + (-step_size) * (mi / denom);
        m[i] = mi;
        v[i] = vi;
    }
    return DDP_OK;
}

/* ---- bfloat16 gradient casts (ddp.grad_dtype: bf16) ---------------------------------------- */

static int cpu_cast_f32_to_bf16(device *d, const float *restrict src, uint16_t *restrict dst, size_t n, ddp_err *err)
{
    (void)d;
    (void)err;
    DDP_PARALLEL_FOR(n)
    for (size_t i = 0; i < n; i++)
        dst[i] = float_to_bf16(src[i]);
    return DDP_OK;
}

static int cpu_cast_bf16_to_f32(device *d, const uint16_t *restrict src, float *restrict dst, size_t n, float scale,
                                ddp_err *err)
{
    (void)d;
    (void)err;
    DDP_PARALLEL_FOR(n)
    for (size_t i = 0; i < n; i++)
        dst[i] = bf16_to_float(src[i]) * scale;
    return DDP_OK;
}

/* ---- interval timer ------------------------------------------------------------------------ */

/* Ops run on the calling thread, so stream order is host order and host time is stream time. */
struct device_timer {
    double started_ms;  /* < 0 while not running */
    double total_ms;
};

static int cpu_timer_create(device *d, device_timer **out, ddp_err *err)
{
    (void)d;
    *out = calloc(1, sizeof **out);
    if (!*out)
        return ddp_fail(err, DDP_ERUNTIME, "cpu timer: out of memory");
    (*out)->started_ms = -1;
    return DDP_OK;
}

static int cpu_timer_start(device *d, device_timer *t, ddp_err *err)
{
    (void)d;
    (void)err;
    t->started_ms = 1e3 * monotonic_s();
    return DDP_OK;
}

static int cpu_timer_stop(device *d, device_timer *t, ddp_err *err)
{
    (void)d;
    if (t->started_ms < 0)
        return ddp_fail(err, DDP_ERUNTIME, "cpu timer: timer_stop without timer_start");
    t->total_ms += 1e3 * monotonic_s() - t->started_ms;
    t->started_ms = -1;
    return DDP_OK;
}

static int cpu_timer_take_ms(device *d, device_timer *t, double *ms, ddp_err *err)
{
    (void)d;
    (void)err;
    *ms = t->total_ms;
    t->total_ms = 0;
    return DDP_OK;
}

static void cpu_timer_destroy(device *d, device_timer *t)
{
    (void)d;
    free(t);
}

/* ---- lifetime ---------------------------------------------------------------------------- */

static void cpu_destroy(device *d) { free(d); }

static const struct device_ops cpu_ops = {
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_memcpy,
    .download = cpu_memcpy,
    .copy = cpu_memcpy,
    .synchronize = cpu_synchronize,
    .gemm = cpu_gemm,
    .fill = cpu_fill,
    .scale = cpu_scale,
    .u8_to_f32 = cpu_u8_to_f32,
    .bias_add = cpu_bias_add,
    .bias_grad = cpu_bias_grad,
    .act_forward = cpu_act_forward,
    .act_backward = cpu_act_backward,
    .softmax_xent = cpu_softmax_xent,
    .sumsq = cpu_sumsq,
    .sgd_step = cpu_sgd_step,
    .adamw_step = cpu_adamw_step,
    .cast_f32_to_bf16 = cpu_cast_f32_to_bf16,
    .cast_bf16_to_f32 = cpu_cast_bf16_to_f32,
    .timer_create = cpu_timer_create,
    .timer_start = cpu_timer_start,
    .timer_stop = cpu_timer_stop,
    .timer_take_ms = cpu_timer_take_ms,
    .timer_destroy = cpu_timer_destroy,
    .destroy = cpu_destroy,
};

int device_cpu_create(device **out, ddp_err *err)
{
    device *d = calloc(1, sizeof *d);
    if (!d)
        return ddp_fail(err, DDP_ERUNTIME, "cpu device: out of memory");
    d->ops = &cpu_ops;
    d->kind = DEVICE_CPU;
    d->index = -1;
#if defined(DDP_GEMM_ONEDNN)
    const dnnl_version_t *v = dnnl_version();
    snprintf(d->name, sizeof d->name, "cpu (oneDNN %d.%d.%d)", v->major, v->minor, v->patch);
#else
    snprintf(d->name, sizeof d->name, "cpu (OpenBLAS %s)", openblas_get_corename());
#endif
    *out = d;
    return DDP_OK;
}
