/* device_cpu.c — the CPU backend of the device layer (device.h): host memory, one GEMM library
 * (oneDNN's dnnl_sgemm or OpenBLAS's cblas_sgemm, chosen at build time by the meson option
 * cpu_gemm after scripts/bench-gemm measured both), the interval timer, and the backend's ops
 * table, whose other ops are the op families' CPU code in kernels/FAMILY_cpu.c. The profiler's
 * stamps are the monotonic clock read as each op's turn comes.
 *
 * Every op runs synchronously on the calling thread, so the "stream" is trivially in order.
 * Threading belongs to the GEMM library: oneDNN (OpenMP build) and OpenBLAS both honour
 * OMP_NUM_THREADS (OpenBLAS prefers OPENBLAS_NUM_THREADS); this file never sets a thread count
 * or OPENBLAS_CORETYPE. Arguments arrive checked (device_check_*.c). This file must not know about
 * models, ranks or communication. */
#include "device.h"

#include "runtime/base/clock.h"
#include "runtime/device/backend.h"
#include "runtime/device/kernels/cpu_kernel.h"

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

#define CPU_ALIGN 64

/* ---- memory ---------------------------------------------------------------------------- */

int device_cpu_alloc(device *d, size_t bytes, void **out, ddp_err *err)
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

/* Device memory is host memory: upload, download and copy are the same memcpy. */
int device_cpu_upload(device *d, void *dst, const void *src, size_t bytes, ddp_err *err)
{
    (void)d;
    (void)err;
    memcpy(dst, src, bytes);
    return DDP_OK;
}

int device_cpu_download(device *d, void *dst, const void *src, size_t bytes, ddp_err *err)
{
    (void)d;
    (void)err;
    memcpy(dst, src, bytes);
    return DDP_OK;
}

int device_cpu_copy(device *d, void *dst, const void *src, size_t bytes, ddp_err *err)
{
    (void)d;
    (void)err;
    memcpy(dst, src, bytes);
    return DDP_OK;
}

int device_cpu_synchronize(device *d, ddp_err *err)
{
    (void)d;
    (void)err;
    return DDP_OK;
}

/* Every CPU op has finished when it returns: nothing is ever waited for. */
int device_cpu_host_waits(device *d, uint64_t *count, ddp_err *err)
{
    (void)d;
    (void)err;
    *count = 0;
    return DDP_OK;
}

/* ---- GEMM ------------------------------------------------------------------------------ */

/* C = beta·C, m x n with row stride ldc: the GEMM's k == 0 or alpha == 0 case, where BLAS reads
 * neither A nor B; beta 0 clears NaN. */
static void scale_matrix(float *c, int64_t m, int64_t n, int64_t ldc, float beta)
{
    DDP_PARALLEL_FOR(m * n)
    for (int64_t r = 0; r < m; r++)
        for (int64_t j = 0; j < n; j++)
            c[r * ldc + j] = beta == 0.0f ? 0.0f : beta * c[r * ldc + j];
}

int device_cpu_sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                     const float *b, int64_t ldb, float beta, float *c, int64_t ldc, ddp_err *err)
{
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

/* ---- interval timer ------------------------------------------------------------------------ */

/* Ops run on the calling thread, so stream order is host order and host time is stream time. */
struct device_timer {
    double started_ms;  /* < 0 while not running */
    double total_ms;
};

int device_cpu_timer_create(device *d, device_timer **out, ddp_err *err)
{
    (void)d;
    *out = calloc(1, sizeof **out);
    if (!*out)
        return ddp_fail(err, DDP_ERUNTIME, "cpu timer: out of memory");
    (*out)->started_ms = -1;
    return DDP_OK;
}

int device_cpu_timer_start(device *d, device_timer *t, ddp_err *err)
{
    (void)d;
    (void)err;
    t->started_ms = 1e3 * monotonic_s();
    return DDP_OK;
}

int device_cpu_timer_stop(device *d, device_timer *t, ddp_err *err)
{
    (void)d;
    if (t->started_ms < 0)
        return ddp_fail(err, DDP_ERUNTIME, "cpu timer: timer_stop without timer_start");
    t->total_ms += 1e3 * monotonic_s() - t->started_ms;
    t->started_ms = -1;
    return DDP_OK;
}

int device_cpu_timer_take_ms(device *d, device_timer *t, double *ms, ddp_err *err)
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

/* ---- timestamps for the profiler ---------------------------------------------------------- */

/* Host time is stream time here too: a stamp reads the clock, and there is nothing to wait for. */
int device_cpu_stamps_create(device *d, uint32_t capacity, device_stamps **out, ddp_err *err)
{
    (void)d;
    device_stamps *s = calloc(1, sizeof *s);
    double *t = malloc((size_t)capacity * sizeof *t);
    bool *stamped = calloc(capacity, sizeof *stamped);
    if (!s || !t || !stamped) {
        free(s);
        free(t);
        free(stamped);
        return ddp_fail(err, DDP_ERUNTIME, "cpu stamps: out of memory for %u slots", capacity);
    }
    *s = (device_stamps){.capacity = capacity, .stamped = stamped, .slots = t};
    *out = s;
    return DDP_OK;
}

int device_cpu_stamp(device *d, device_stamps *s, uint32_t slot, void *stream, ddp_err *err)
{
    (void)d;
    (void)stream;
    (void)err;
    ((double *)s->slots)[slot] = monotonic_s();
    s->stamped[slot] = true;
    return DDP_OK;
}

int device_cpu_stream_wait_compute(device *d, void *stream, ddp_err *err)
{
    (void)d;
    (void)stream;
    (void)err;
    return DDP_OK;
}

int device_cpu_stamps_read(device *d, device_stamps *s, uint32_t n, double *us, ddp_err *err)
{
    (void)d;
    (void)err;
    const double *t = s->slots;
    for (uint32_t i = 0; i < n; i++)
        us[i] = s->stamped[i] ? 1e6 * (t[i] - t[0]) : NAN;
    return DDP_OK;
}

static void cpu_stamps_destroy(device *d, device_stamps *s)
{
    (void)d;
    free(s->stamped);
    free(s->slots);
    free(s);
}

/* ---- the backend's table ------------------------------------------------------------------ */

static void cpu_destroy(device *d) { free(d); }

#define CPU_OP_ENTRY(name, params) .name = device_cpu_##name,
static const struct device_ops cpu_ops = {
    DEVICE_OPS(CPU_OP_ENTRY)
    .free = cpu_free,
    .timer_destroy = cpu_timer_destroy,
    .stamps_destroy = cpu_stamps_destroy,
    .destroy = cpu_destroy,
};

int device_cpu_backend_create(device **out, ddp_err *err)
{
    device *d = calloc(1, sizeof *d);
    if (!d)
        return ddp_fail(err, DDP_ERUNTIME, "cpu device: out of memory");
    d->backend = &cpu_ops;
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

/* ---- entry points: device.c admits only TENSOR_F32 on the CPU, so the types are not looked at */

int device_cpu_gemm(device *d, tensor_dtype ab, tensor_dtype c_type, bool trans_a, bool trans_b, int64_t m, int64_t n,
                    int64_t k, float alpha, const void *a, int64_t lda, const void *b, int64_t ldb, float beta, void *c,
                    int64_t ldc, ddp_err *err)
{
    (void)d;
    (void)ab;
    (void)c_type;
    return device_cpu_sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, err);
}

/* The epilogue GEMMs are the GEMM and the element-wise pass in turn here: there is no fused CPU
 * kernel to gain from, and the results are those of the separate ops bit for bit. */
int device_cpu_gemm_bias(device *d, tensor_dtype t, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void *a,
                         int64_t lda, const void *b, int64_t ldb, const void *bias, void *y, ddp_err *err)
{
    return device_unfused_gemm_bias(d, t, ta, tb, m, n, k, a, lda, b, ldb, bias, y, err);
}

int device_cpu_gemm_bias_gelu(device *d, tensor_dtype t, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                              const void *a, int64_t lda, const void *b, int64_t ldb, const void *bias, void *pre,
                              void *y, ddp_err *err)
{
    return device_unfused_gemm_bias_gelu(d, t, ta, tb, m, n, k, a, lda, b, ldb, bias, pre, y, err);
}

int device_cpu_gemm_gelu_backward(device *d, tensor_dtype t, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                                  const void *a, int64_t lda, const void *b, int64_t ldb, const void *pre, void *dx,
                                  ddp_err *err)
{
    return device_unfused_gemm_gelu_backward(d, t, ta, tb, m, n, k, a, lda, b, ldb, pre, dx, err);
}
