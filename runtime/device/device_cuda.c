/* device_cuda.c — the CUDA backend of the device layer (device.h): cudaMalloc'd memory, one
 * non-blocking compute stream per device, GEMMs through cuBLAS on that stream (fp32, TF32 when
 * cuda.tf32 allows it), and the kernels of runtime/device/kernels/ for every other op.
 *
 * Uploads go through pinned staging buffers so cudaMemcpyAsync really is asynchronous; each
 * buffer is reused only after an event says its previous copy finished. Downloads and sumsq
 * wait. Every CUDA and cuBLAS call is checked and reported with file:line and the library's own
 * error string. The same code runs in the emulated build (runtime/cudaemu implements the runtime
 * and cuBLAS entry points on the CPU). This file must not know about models, ranks or
 * communication, and holds no kernels. */
#include "device.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/device/kernels/cast.h"
#include "runtime/device/kernels/kernels.h"

/* Both macros expect a `ddp_err *err` in scope and return from the calling function. */
#define CUDA_TRY(call)                                                                              \
    do {                                                                                            \
        cudaError_t cuda_status_ = (call);                                                          \
        if (cuda_status_ != cudaSuccess)                                                            \
            return ddp_fail(err, DDP_ERUNTIME, "%s:%d: %s: %s", __FILE__, __LINE__, #call,          \
                            cudaGetErrorString(cuda_status_));                                      \
    } while (0)

#define CUBLAS_TRY(call)                                                                            \
    do {                                                                                            \
        cublasStatus_t cublas_status_ = (call);                                                     \
        if (cublas_status_ != CUBLAS_STATUS_SUCCESS)                                                \
            return ddp_fail(err, DDP_ERUNTIME, "%s:%d: %s: %s", __FILE__, __LINE__, #call,          \
                            cublasGetStatusString(cublas_status_));                                 \
    } while (0)

/* Uploads are staged through two pinned buffers of at most this many bytes, alternately, so the
 * host memcpy into one overlaps the DMA out of the other. */
#define STAGING_CHUNK ((size_t)16 << 20)

typedef struct cuda_impl {
    cudaStream_t stream;
    cublasHandle_t blas;
    void *staging[2];             /* pinned host memory */
    size_t staging_cap[2];
    cudaEvent_t staging_done[2];  /* recorded after the last copy out of staging[i] */
    int next_staging;
    double *sumsq_scratch;        /* DDP_CUDA_SUMSQ_MAX_BLOCKS partials + 1 result */
    float *xent_rows;             /* softmax_xent per-row (loss, correct) pairs */
    size_t xent_rows_cap;         /* in rows */
} cuda_impl;

static cuda_impl *impl_of(device *d) { return (cuda_impl *)d->impl; }
static cudaStream_t stream_of(device *d) { return impl_of(d)->stream; }

/* ---- memory ---------------------------------------------------------------------------- */

static int cuda_alloc(device *d, size_t bytes, void **out, ddp_err *err)
{
    (void)d;
    *out = NULL;
    cudaError_t e = cudaMalloc(out, bytes ? bytes : 1);
    if (e != cudaSuccess)
        return ddp_fail(err, DDP_ERUNTIME, "%s:%d: cudaMalloc(%zu bytes) on GPU %d: %s", __FILE__, __LINE__, bytes,
                        d->index, cudaGetErrorString(e));
    return DDP_OK;
}

static void cuda_free(device *d, void *p)
{
    (void)d;
    if (p)
        cudaFree(p); /* nothing useful to do with a failure while freeing */
}

/* Staging slot `slot` holding at least `bytes`, once its previous copy has finished. */
static int staging_acquire(cuda_impl *im, int slot, size_t bytes, ddp_err *err)
{
    CUDA_TRY(cudaEventSynchronize(im->staging_done[slot]));
    if (im->staging_cap[slot] >= bytes)
        return DDP_OK;
    if (im->staging[slot])
        CUDA_TRY(cudaFreeHost(im->staging[slot]));
    im->staging[slot] = NULL;
    im->staging_cap[slot] = 0;
    CUDA_TRY(cudaMallocHost(&im->staging[slot], bytes));
    im->staging_cap[slot] = bytes;
    return DDP_OK;
}

static int cuda_upload(device *d, void *dst, const void *src, size_t bytes, ddp_err *err)
{
    cuda_impl *im = impl_of(d);
    for (size_t off = 0; off < bytes;) {
        const size_t len = bytes - off < STAGING_CHUNK ? bytes - off : STAGING_CHUNK;
        const int slot = im->next_staging;
        im->next_staging ^= 1;
        int rc = staging_acquire(im, slot, len, err);
        if (rc)
            return rc;
        memcpy(im->staging[slot], (const char *)src + off, len);
        CUDA_TRY(cudaMemcpyAsync((char *)dst + off, im->staging[slot], len, cudaMemcpyHostToDevice, im->stream));
        CUDA_TRY(cudaEventRecord(im->staging_done[slot], im->stream));
        off += len;
    }
    return DDP_OK;
}

static int cuda_download(device *d, void *dst, const void *src, size_t bytes, ddp_err *err)
{
    if (bytes)
        CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_of(d)));
    CUDA_TRY(cudaStreamSynchronize(stream_of(d)));
    return DDP_OK;
}

static int cuda_copy(device *d, void *dst, const void *src, size_t bytes, ddp_err *err)
{
    if (bytes)
        CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_of(d)));
    return DDP_OK;
}

static int cuda_synchronize(device *d, ddp_err *err)
{
    CUDA_TRY(cudaStreamSynchronize(stream_of(d)));
    return DDP_OK;
}

/* ---- GEMM ------------------------------------------------------------------------------ */

/* Row-major C[m,n] = op(A)·op(B) is column-major Cᵀ[n,m] = op(B)ᵀ·op(A)ᵀ, and a row-major matrix
 * with row stride ld is its own transpose in column-major with leading dimension ld: so cuBLAS
 * gets B before A, n before m, and the same transpose flags. */
static int cuda_gemm(device *d, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                     const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc,
                     ddp_err *err)
{
    if (m < 0 || n < 0 || k < 0)
        return ddp_fail(err, DDP_ERUNTIME, "gemm: negative size m=%lld n=%lld k=%lld", (long long)m, (long long)n,
                        (long long)k);
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX || lda > INT_MAX || ldb > INT_MAX || ldc > INT_MAX)
        return ddp_fail(err, DDP_ERUNTIME,
                        "gemm: cuBLAS takes 32-bit sizes; m=%lld n=%lld k=%lld (ld %lld/%lld/%lld) exceeds INT_MAX",
                        (long long)m, (long long)n, (long long)k, (long long)lda, (long long)ldb, (long long)ldc);
    if (m == 0 || n == 0)
        return DDP_OK;
    CUBLAS_TRY(cublasSgemm(impl_of(d)->blas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                           (int)n, (int)m, (int)k, &alpha, b, (int)ldb, a, (int)lda, &beta, c, (int)ldc));
    return DDP_OK;
}

/* ---- kernels ----------------------------------------------------------------------------- */

static int act_code(act_kind a, int *code, const char *op, ddp_err *err)
{
    switch (a) {
    case ACT_RELU: *code = DDP_CUDA_ACT_RELU; return DDP_OK;
    case ACT_GELU: *code = DDP_CUDA_ACT_GELU; return DDP_OK;
    }
    return ddp_fail(err, DDP_ERUNTIME, "%s: unknown activation %d", op, (int)a);
}

static int check_shape(const char *op, int64_t rows, int64_t cols, ddp_err *err)
{
    if (rows < 0 || cols < 0)
        return ddp_fail(err, DDP_ERUNTIME, "%s: negative shape [%lld, %lld]", op, (long long)rows, (long long)cols);
    return DDP_OK;
}

static int cuda_fill(device *d, float *x, size_t n, float value, ddp_err *err)
{
    CUDA_TRY(ddp_cuda_fill(x, n, value, stream_of(d)));
    return DDP_OK;
}

static int cuda_scale(device *d, float *x, size_t n, float s, ddp_err *err)
{
    CUDA_TRY(ddp_cuda_scale(x, n, s, stream_of(d)));
    return DDP_OK;
}

static int cuda_u8_to_f32(device *d, const uint8_t *src, float *dst, size_t n, float mean, float inv_std,
                          ddp_err *err)
{
    CUDA_TRY(ddp_cuda_u8_to_f32(src, dst, n, mean, inv_std, stream_of(d)));
    return DDP_OK;
}

static int cuda_bias_add(device *d, float *y, const float *b, int64_t rows, int64_t cols, ddp_err *err)
{
    int rc = check_shape("bias_add", rows, cols, err);
    if (rc)
        return rc;
    CUDA_TRY(ddp_cuda_bias_add(y, b, rows, cols, stream_of(d)));
    return DDP_OK;
}

static int cuda_bias_grad(device *d, const float *dy, float *db, int64_t rows, int64_t cols, float beta,
                          ddp_err *err)
{
    int rc = check_shape("bias_grad", rows, cols, err);
    if (rc)
        return rc;
    CUDA_TRY(ddp_cuda_bias_grad(dy, db, rows, cols, beta, stream_of(d)));
    return DDP_OK;
}

static int cuda_act_forward(device *d, act_kind a, const float *x, float *y, size_t n, ddp_err *err)
{
    int code = 0, rc = act_code(a, &code, "act_forward", err);
    if (rc)
        return rc;
    CUDA_TRY(ddp_cuda_act_forward(code, x, y, n, stream_of(d)));
    return DDP_OK;
}

static int cuda_act_backward(device *d, act_kind a, const float *x, const float *dy, float *dx, size_t n,
                             ddp_err *err)
{
    int code = 0, rc = act_code(a, &code, "act_backward", err);
    if (rc)
        return rc;
    CUDA_TRY(ddp_cuda_act_backward(code, x, dy, dx, n, stream_of(d)));
    return DDP_OK;
}

/* Grows the per-row softmax scratch; the old buffer may still be read by queued kernels. */
static int xent_rows_reserve(device *d, int64_t rows, ddp_err *err)
{
    cuda_impl *im = impl_of(d);
    if ((size_t)rows <= im->xent_rows_cap)
        return DDP_OK;
    CUDA_TRY(cudaStreamSynchronize(im->stream));
    if (im->xent_rows)
        CUDA_TRY(cudaFree(im->xent_rows));
    im->xent_rows = NULL;
    im->xent_rows_cap = 0;
    CUDA_TRY(cudaMalloc((void **)&im->xent_rows, 2 * sizeof(float) * (size_t)rows));
    im->xent_rows_cap = (size_t)rows;
    return DDP_OK;
}

/* A label outside [0, cols) cannot be reported without waiting on the GPU: it makes the loss
 * sum NaN instead (the CPU backend rejects it with an error). */
static int cuda_softmax_xent(device *d, const float *logits, const int32_t *labels, int64_t rows, int64_t cols,
                             float grad_scale, float *dlogits, float *stats, ddp_err *err)
{
    int rc = check_shape("softmax_xent", rows, cols, err);
    if (rc)
        return rc;
    if (cols == 0 && rows > 0)
        return ddp_fail(err, DDP_ERUNTIME, "softmax_xent: zero classes");
    if ((rc = xent_rows_reserve(d, rows, err)))
        return rc;
    CUDA_TRY(ddp_cuda_softmax_xent(logits, labels, rows, cols, grad_scale, dlogits, impl_of(d)->xent_rows, stats,
                                   stream_of(d)));
    return DDP_OK;
}

static int cuda_sumsq(device *d, const float *x, size_t n, double *out, ddp_err *err)
{
    double *scratch = impl_of(d)->sumsq_scratch;
    double *result = scratch + DDP_CUDA_SUMSQ_MAX_BLOCKS;
    CUDA_TRY(ddp_cuda_sumsq(x, n, scratch, result, stream_of(d)));
    return cuda_download(d, out, result, sizeof *out, err);
}

static int cuda_sgd_step(device *d, float *p, const float *g, float *buf, size_t n, const sgd_args *a, ddp_err *err)
{
    if (a->momentum != 0.0f && !buf)
        return ddp_fail(err, DDP_ERUNTIME, "sgd_step: momentum %g needs a momentum buffer", (double)a->momentum);
    CUDA_TRY(ddp_cuda_sgd_step(p, g, buf, n, a->lr, a->momentum, a->weight_decay, a->nesterov, a->first_step,
                               a->grad_scale, stream_of(d)));
    return DDP_OK;
}

static int cuda_adamw_step(device *d, float *p, const float *g, float *m, float *v, size_t n, const adamw_args *a,
                           ddp_err *err)
{
    if (a->step < 1)
        return ddp_fail(err, DDP_ERUNTIME, "adamw_step: step is %lld, must be >= 1 (bias correction)",
                        (long long)a->step);
    /* PyTorch computes these scalars in double and applies them as float32 (as the CPU backend) */
    const double lr = a->lr, b1 = a->beta1, b2 = a->beta2;
    const float decay = (float)(1.0 - lr * (double)a->weight_decay);
    const float step_size = (float)(lr / (1.0 - pow(b1, (double)a->step)));
    const float bias2_sqrt = (float)sqrt(1.0 - pow(b2, (double)a->step));
    CUDA_TRY(ddp_cuda_adamw_step(p, g, m, v, n, decay, (float)b1, (float)(1.0 - b1), (float)b2, (float)(1.0 - b2),
                                 a->eps, step_size, bias2_sqrt, a->grad_scale, stream_of(d)));
    return DDP_OK;
}

/* bf16 gradient casts (ddp.grad_dtype: bf16), kernels in runtime/device/kernels/cast.cu */
static int cuda_cast_f32_to_bf16(device *d, const float *src, uint16_t *dst, size_t n, ddp_err *err)
{
    CUDA_TRY(ddp_cuda_cast_f32_to_bf16(src, dst, n, stream_of(d)));
    return DDP_OK;
}

static int cuda_cast_bf16_to_f32(device *d, const uint16_t *src, float *dst, size_t n, float scale, ddp_err *err)
{
    CUDA_TRY(ddp_cuda_cast_bf16_to_f32(src, dst, n, scale, stream_of(d)));
    return DDP_OK;
}

/* ---- interval timer ------------------------------------------------------------------------ */

/* A ring of (start, stop) timing-event pairs recorded on the compute stream; elapsed times are
 * read only when taken (or when the ring is full), so marking never waits for the GPU. */
#define TIMER_INTERVALS 64

struct device_timer {
    cudaEvent_t start[TIMER_INTERVALS], stop[TIMER_INTERVALS];
    int first, count;   /* recorded intervals not yet added to total_ms */
    bool running;       /* start[(first + count) % TIMER_INTERVALS] is recorded, its stop not yet */
    double total_ms;
};

static void cuda_timer_destroy(device *d, device_timer *t)
{
    (void)d;
    if (!t)
        return;
    for (int i = 0; i < TIMER_INTERVALS; i++) {
        if (t->start[i])
            cudaEventDestroy(t->start[i]);
        if (t->stop[i])
            cudaEventDestroy(t->stop[i]);
    }
    free(t);
}

static int cuda_timer_create(device *d, device_timer **out, ddp_err *err)
{
    device_timer *t = calloc(1, sizeof *t);
    *out = NULL;
    if (!t)
        return ddp_fail(err, DDP_ERUNTIME, "cuda timer: out of host memory");
    for (int i = 0; i < TIMER_INTERVALS; i++) {
        cudaError_t e = cudaEventCreate(&t->start[i]);
        if (e == cudaSuccess)
            e = cudaEventCreate(&t->stop[i]);
        if (e != cudaSuccess) {
            cuda_timer_destroy(d, t);
            return ddp_fail(err, DDP_ERUNTIME, "%s:%d: cudaEventCreate (timer): %s", __FILE__, __LINE__,
                            cudaGetErrorString(e));
        }
    }
    *out = t;
    return DDP_OK;
}

/* Waits for the oldest recorded interval and adds it to the total. */
static int timer_retire_oldest(device_timer *t, ddp_err *err)
{
    float ms = 0;
    CUDA_TRY(cudaEventSynchronize(t->stop[t->first]));
    CUDA_TRY(cudaEventElapsedTime(&ms, t->start[t->first], t->stop[t->first]));
    t->total_ms += ms;
    t->first = (t->first + 1) % TIMER_INTERVALS;
    t->count--;
    return DDP_OK;
}

static int cuda_timer_start(device *d, device_timer *t, ddp_err *err)
{
    int rc = t->count == TIMER_INTERVALS ? timer_retire_oldest(t, err) : DDP_OK;
    if (rc)
        return rc;
    CUDA_TRY(cudaEventRecord(t->start[(t->first + t->count) % TIMER_INTERVALS], stream_of(d)));
    t->running = true;
    return DDP_OK;
}

static int cuda_timer_stop(device *d, device_timer *t, ddp_err *err)
{
    if (!t->running)
        return ddp_fail(err, DDP_ERUNTIME, "cuda timer: timer_stop without timer_start");
    CUDA_TRY(cudaEventRecord(t->stop[(t->first + t->count) % TIMER_INTERVALS], stream_of(d)));
    t->running = false;
    t->count++;
    return DDP_OK;
}

static int cuda_timer_take_ms(device *d, device_timer *t, double *ms, ddp_err *err)
{
    (void)d;
    while (t->count > 0) {
        int rc = timer_retire_oldest(t, err);
        if (rc)
            return rc;
    }
    *ms = t->total_ms;
    t->total_ms = 0;
    return DDP_OK;
}

/* ---- lifetime ---------------------------------------------------------------------------- */

static void cuda_destroy(device *d)
{
    if (!d)
        return;
    cuda_impl *im = impl_of(d);
    if (im) {
        if (im->stream)
            cudaStreamSynchronize(im->stream);
        for (int i = 0; i < 2; i++) {
            if (im->staging[i])
                cudaFreeHost(im->staging[i]);
            if (im->staging_done[i])
                cudaEventDestroy(im->staging_done[i]);
        }
        cudaFree(im->sumsq_scratch);
        cudaFree(im->xent_rows);
        if (im->blas)
            cublasDestroy(im->blas);
        if (im->stream)
            cudaStreamDestroy(im->stream);
        free(im);
    }
    free(d);
}

static const struct device_ops cuda_ops = {
    .alloc = cuda_alloc,
    .free = cuda_free,
    .upload = cuda_upload,
    .download = cuda_download,
    .copy = cuda_copy,
    .synchronize = cuda_synchronize,
    .gemm = cuda_gemm,
    .fill = cuda_fill,
    .scale = cuda_scale,
    .u8_to_f32 = cuda_u8_to_f32,
    .bias_add = cuda_bias_add,
    .bias_grad = cuda_bias_grad,
    .act_forward = cuda_act_forward,
    .act_backward = cuda_act_backward,
    .softmax_xent = cuda_softmax_xent,
    .sumsq = cuda_sumsq,
    .sgd_step = cuda_sgd_step,
    .adamw_step = cuda_adamw_step,
    .cast_f32_to_bf16 = cuda_cast_f32_to_bf16,
    .cast_bf16_to_f32 = cuda_cast_bf16_to_f32,
    .timer_create = cuda_timer_create,
    .timer_start = cuda_timer_start,
    .timer_stop = cuda_timer_stop,
    .timer_take_ms = cuda_timer_take_ms,
    .timer_destroy = cuda_timer_destroy,
    .destroy = cuda_destroy,
};

int device_cuda_count(char *reason, size_t reason_len)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        snprintf(reason, reason_len, "no usable CUDA driver/GPU: %s", cudaGetErrorString(e));
        return 0;
    }
    if (count <= 0) {
        snprintf(reason, reason_len, "no CUDA devices visible");
        return 0;
    }
    return count;
}

/* Everything after the device is chosen; on failure the caller destroys the half-built device. */
static int cuda_setup(device *d, const config *cfg, ddp_err *err)
{
    cuda_impl *im = impl_of(d);
    struct cudaDeviceProp prop;
    CUDA_TRY(cudaSetDevice(d->index));
    CUDA_TRY(cudaGetDeviceProperties(&prop, d->index));
    snprintf(d->name, sizeof d->name, "%.127s", prop.name);
    CUDA_TRY(cudaStreamCreateWithFlags(&im->stream, cudaStreamNonBlocking));
    d->stream = im->stream;
    for (int i = 0; i < 2; i++)
        CUDA_TRY(cudaEventCreateWithFlags(&im->staging_done[i], cudaEventDisableTiming));
    CUDA_TRY(cudaMalloc((void **)&im->sumsq_scratch, sizeof(double) * (DDP_CUDA_SUMSQ_MAX_BLOCKS + 1)));
    CUBLAS_TRY(cublasCreate(&im->blas));
    CUBLAS_TRY(cublasSetStream(im->blas, im->stream));
    CUBLAS_TRY(cublasSetMathMode(im->blas, cfg && cfg->cuda.tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    return DDP_OK;
}

int device_cuda_create(int local_rank, const config *cfg, device **out, ddp_err *err)
{
    *out = NULL;
    char reason[256] = "";
    int count = device_cuda_count(reason, sizeof reason);
    if (count == 0)
        return ddp_fail(err, DDP_ERUNTIME, "device: cuda: %s", reason);
    device *d = calloc(1, sizeof *d);
    cuda_impl *im = calloc(1, sizeof *im);
    if (!d || !im) {
        free(d);
        free(im);
        return ddp_fail(err, DDP_ERUNTIME, "cuda device: out of host memory");
    }
    d->ops = &cuda_ops;
    d->kind = DEVICE_CUDA;
    d->index = (local_rank < 0 ? 0 : local_rank) % count; /* CUDA_VISIBLE_DEVICES already applied */
    d->impl = im;
    int rc = cuda_setup(d, cfg, err);
    if (rc) {
        ddp_prefix(err, "cuda device %d (local rank %d of %d visible)", d->index, local_rank, count);
        cuda_destroy(d);
        return rc;
    }
    *out = d;
    return DDP_OK;
}
