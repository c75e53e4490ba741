/* device.h — the device layer: the only code that knows CPU from CUDA.
 *
 * A device owns memory and an in-order compute stream. Every compute op is enqueued on that
 * stream and may return before it runs (CUDA) or after (CPU); download(), sumsq() and
 * timer_take_ms() are the only ops that wait. Pointers passed to ops are device pointers from
 * alloc(); sizes are size_t/int64_t throughout, so tensors with more than INT_MAX elements are fine.
 * Matrices are row-major. Ops are shaped so a transformer adds ops rather than changing these.
 * This layer must not know about models, optimizers' schedules, ranks or communication. */
#ifndef DDP_DEVICE_H
#define DDP_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/config/config.h"
#include "runtime/base/err.h"

typedef struct device device;
typedef struct device_timer device_timer;

typedef struct sgd_args {
    float lr, momentum, weight_decay;
    bool nesterov;
    bool first_step;          /* PyTorch: the momentum buffer is the gradient itself on step 1 */
    float grad_scale;         /* gradients are multiplied by this first (clipping) */
} sgd_args;

typedef struct adamw_args {
    float lr, beta1, beta2, eps, weight_decay;
    int64_t step;             /* 1-based, for bias correction */
    float grad_scale;         /* gradients are multiplied by this first (clipping) */
} adamw_args;

struct device_ops {
    /* memory */
    int (*alloc)(device *d, size_t bytes, void **out, ddp_err *err);
    void (*free)(device *d, void *p);
    int (*upload)(device *d, void *dst, const void *src, size_t bytes, ddp_err *err);   /* host -> device */
    int (*download)(device *d, void *dst, const void *src, size_t bytes, ddp_err *err); /* device -> host; waits */
    int (*copy)(device *d, void *dst, const void *src, size_t bytes, ddp_err *err);     /* device -> device */
    int (*synchronize)(device *d, ddp_err *err);

    /* C[m,n] = alpha * op(A)[m,k] · op(B)[k,n] + beta * C, row-major, ld = row stride in elements */
    int (*gemm)(device *d, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                int64_t ldc, ddp_err *err);

    int (*fill)(device *d, float *x, size_t n, float value, ddp_err *err);
    int (*scale)(device *d, float *x, size_t n, float s, ddp_err *err);
    /* dst[i] = (src[i] / 255 - mean) * inv_std */
    int (*u8_to_f32)(device *d, const uint8_t *src, float *dst, size_t n, float mean, float inv_std, ddp_err *err);
    /* y[r,c] += b[c] */
    int (*bias_add)(device *d, float *y, const float *b, int64_t rows, int64_t cols, ddp_err *err);
    /* db[c] = beta * db[c] + sum_r dy[r,c]   (beta is 0 or 1) */
    int (*bias_grad)(device *d, const float *dy, float *db, int64_t rows, int64_t cols, float beta, ddp_err *err);
    int (*act_forward)(device *d, act_kind a, const float *x, float *y, size_t n, ddp_err *err);
    /* dx = dy * act'(x), x is the pre-activation input */
    int (*act_backward)(device *d, act_kind a, const float *x, const float *dy, float *dx, size_t n, ddp_err *err);
    /* Row-wise softmax cross-entropy. dlogits = (softmax - onehot) * grad_scale (dlogits may be
     * NULL for evaluation). stats[0] += sum of per-row losses, stats[1] += rows whose argmax is
     * the label (stats is a device float[2]). */
    int (*softmax_xent)(device *d, const float *logits, const int32_t *labels, int64_t rows, int64_t cols,
                        float grad_scale, float *dlogits, float *stats, ddp_err *err);
    /* *out = sum x[i]^2 in double, deterministic (same order every call); waits */
    int (*sumsq)(device *d, const float *x, size_t n, double *out, ddp_err *err);
    int (*sgd_step)(device *d, float *p, const float *g, float *buf, size_t n, const sgd_args *a, ddp_err *err);
    int (*adamw_step)(device *d, float *p, const float *g, float *m, float *v, size_t n, const adamw_args *a, ddp_err *err);

    /* bfloat16 gradients (ddp.grad_dtype: bf16): dst[i] = bf16(src[i]) rounded to nearest-even;
     * and back, dst[i] = float(src[i]) * scale */
    int (*cast_f32_to_bf16)(device *d, const float *src, uint16_t *dst, size_t n, ddp_err *err);
    int (*cast_bf16_to_f32)(device *d, const uint16_t *src, float *dst, size_t n, float scale, ddp_err *err);

    /* Interval timer on the compute stream, e.g. for time the stream is held up by communication:
     * timer_start/timer_stop mark points in stream order and never wait (CUDA: timing events; CPU:
     * the monotonic clock, since its ops run in order on the calling thread). timer_take_ms waits
     * for the marks, returns the summed duration of every start->stop interval since the last take
     * and resets. Up to 64 intervals stay in flight; past that, timer_start waits for the oldest. */
    int (*timer_create)(device *d, device_timer **out, ddp_err *err);
    int (*timer_start)(device *d, device_timer *t, ddp_err *err);
    int (*timer_stop)(device *d, device_timer *t, ddp_err *err);
    int (*timer_take_ms)(device *d, device_timer *t, double *ms, ddp_err *err);
    void (*timer_destroy)(device *d, device_timer *t);

    void (*destroy)(device *d);
};

struct device {
    const struct device_ops *ops;
    cfg_device kind;          /* DEVICE_CPU or DEVICE_CUDA */
    int index;                /* GPU ordinal, -1 on CPU */
    char name[128];           /* e.g. "cpu (oneDNN)" or "NVIDIA H100 80GB HBM3" */
    void *stream;             /* cudaStream_t of the compute stream on CUDA, NULL on CPU */
    void *impl;
};

/* CPU backend (runtime/device/device_cpu.c). */
int device_cpu_create(device **out, ddp_err *err);

/* CUDA backend (runtime/device/device_cuda.c); fails cleanly with a reason when no GPU/driver.
 * local_rank picks the GPU among those visible. Built only when CUDA (or its emulation) is. */
int device_cuda_create(int local_rank, const config *cfg, device **out, ddp_err *err);
/* Number of usable CUDA devices, 0 with a one-line reason when none. */
int device_cuda_count(char *reason, size_t reason_len);

/* Picks per cfg->device (auto: CUDA when device_cuda_count() > 0, else CPU, logging why). */
int device_open(const config *cfg, int local_rank, device **out, ddp_err *err);

#endif
