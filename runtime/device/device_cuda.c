/* device_cuda.c — the CUDA backend of the device layer (device.h): cudaMalloc'd memory, one
 * non-blocking compute stream per device, GEMMs through cuBLAS on that stream (fp32, TF32 when
 * cuda.tf32 allows it; the epilogue GEMMs are device_cuda_lt.c's), the interval timer, the
 * profiler's stamps (timing events, read only after its window), scratch memory for the ops,
 * and the backend's ops table, whose other ops are the op families' host launchers in
 * kernels/FAMILY.cu.
 *
 * Uploads go through pinned staging buffers so cudaMemcpyAsync really is asynchronous; each
 * buffer is reused only after an event says its previous copy finished. Downloads wait. Every
 * CUDA and cuBLAS call is checked and reported with file:line and the library's own error
 * string. The same code runs in the emulated build (tests/cudaemu implements the runtime and
 * cuBLAS entry points on the CPU). Arguments arrive checked (device_check_*.c). This file must not know
 * about models, ranks or communication, and holds no kernels. */
#include "device.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/log.h"
#include "runtime/device/cuda_query.h"
#include "runtime/device/device_cuda.h"
#ifdef DDP_CUDA_EMULATION
#include "cudaemu.h" /* the emulator's; on the include path of the emulated build only */
#endif

/* Uploads are staged through a ring of pinned buffers of this many bytes each (96 MiB a rank,
 * pinned when the device is set up), so the host memcpy into one overlaps the DMA out of the
 * others. A step uploads up to three (inputs, targets, packed documents): six slots let the host
 * stage a whole step while the GPU still runs the one before, where fewer made a step's last
 * upload wait for that step's first, queued behind all of the previous step's work. */
#define STAGING_CHUNK ((size_t)16 << 20)
#define STAGING_SLOTS 6

typedef struct cuda_impl {
    cudaStream_t stream;
    cublasHandle_t blas;
    cuda_lt *lt;                  /* the epilogue GEMMs' cuBLASLt state (device_cuda_lt.c) */
    void *staging[STAGING_SLOTS]; /* pinned host memory, STAGING_CHUNK bytes each */
    cudaEvent_t staging_done[STAGING_SLOTS]; /* recorded after the last copy out of staging[i] */
    int next_staging;
    void *scratch;                /* device_cuda_scratch() */
    size_t scratch_bytes;
    uint64_t host_waits;          /* calls below that blocked the host (wait_stream, wait_event) */
    bool told_release;            /* device_cuda_release_failed's one line was written */
    cudaEvent_t compute_point;    /* stream_wait_compute's mark on the compute stream, made at its first call */
    cuda_traits traits;
} cuda_impl;

static cuda_impl *impl_of(device *d) { return (cuda_impl *)d->impl; }

const cuda_traits *device_cuda_traits(const device *d) { return &((const cuda_impl *)d->impl)->traits; }

cuda_lt *device_cuda_lt(device *d) { return impl_of(d)->lt; }

/* Every place this backend blocks the host goes through one of these two, so host_waits can say
 * how often it happened (a training step must not, between its batch upload and the next). */
static cudaError_t wait_stream(cuda_impl *im, cudaStream_t s)
{
    im->host_waits++;
    return cudaStreamSynchronize(s);
}

static cudaError_t wait_event(cuda_impl *im, cudaEvent_t e)
{
    im->host_waits++;
    return cudaEventSynchronize(e);
}

/* A free or a destroy returns nothing to its caller, yet CUDA reports there what went wrong
 * before it (an earlier kernel's fault is sticky and surfaces at any later call): the first such
 * failure on a device is logged, as the later ones would only repeat it. The error is consumed
 * from CUDA's last-error, so that the next kernel launch's check does not report it as its own. */
void device_cuda_release_failed(device *d, const char *call, const char *failure)
{
    if (!d || !failure)
        return;
    cuda_impl *im = impl_of(d);
    (void)cudaGetLastError();
    if (im->told_release)
        return;
    im->told_release = true;
    log_warn("cuda device %d: %s: %s (later failures of releases on this device are not said)", d->index, call,
             failure);
}

static void release_check(device *d, const char *call, cudaError_t e)
{
    device_cuda_release_failed(d, call, e == cudaSuccess ? NULL : cudaGetErrorString(e));
}

/* ---- memory ---------------------------------------------------------------------------- */

int device_cuda_alloc(device *d, size_t bytes, void **out, ddp_err *err)
{
    *out = NULL;
    cudaError_t e = cudaMalloc(out, bytes ? bytes : 1);
    if (e != cudaSuccess)
        return ddp_fail(err, DDP_ERUNTIME, "%s:%d: cudaMalloc(%zu bytes) on GPU %d: %s", __FILE__, __LINE__, bytes,
                        d->index, cudaGetErrorString(e));
    return DDP_OK;
}

static void cuda_free(device *d, void *p)
{
    release_check(d, "cudaFree", cudaFree(p));
}

int device_cuda_upload(device *d, void *dst, const void *src, size_t bytes, ddp_err *err)
{
    cuda_impl *im = impl_of(d);
    for (size_t off = 0; off < bytes;) {
        const size_t len = bytes - off < STAGING_CHUNK ? bytes - off : STAGING_CHUNK;
        const int slot = im->next_staging;
        im->next_staging = (slot + 1) % STAGING_SLOTS;
        CUDA_TRY(wait_event(im, im->staging_done[slot])); /* its previous copy has finished */
        memcpy(im->staging[slot], (const char *)src + off, len);
        CUDA_TRY(cudaMemcpyAsync((char *)dst + off, im->staging[slot], len, cudaMemcpyHostToDevice, im->stream));
        CUDA_TRY(cudaEventRecord(im->staging_done[slot], im->stream));
        off += len;
    }
    return DDP_OK;
}

int device_cuda_download(device *d, void *dst, const void *src, size_t bytes, ddp_err *err)
{
    CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, device_cuda_stream(d)));
    CUDA_TRY(wait_stream(impl_of(d), device_cuda_stream(d)));
    return DDP_OK;
}

int device_cuda_copy(device *d, void *dst, const void *src, size_t bytes, ddp_err *err)
{
    CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, device_cuda_stream(d)));
    return DDP_OK;
}

int device_cuda_synchronize(device *d, ddp_err *err)
{
    CUDA_TRY(wait_stream(impl_of(d), device_cuda_stream(d)));
    return DDP_OK;
}

int device_cuda_host_waits(device *d, uint64_t *count, ddp_err *err)
{
    (void)err;
#ifdef DDP_CUDA_EMULATION
    (void)d;
    *count = cudaemu_host_blocking_calls(); /* every blocking CUDA call, not only this file's */
#else
    *count = impl_of(d)->host_waits;
#endif
    return DDP_OK;
}

/* ---- GEMM ------------------------------------------------------------------------------ */

/* cuBLAS's element type of a tensor_dtype. */
static cudaDataType_t cuda_type(tensor_dtype t) { return t == TENSOR_BF16 ? CUDA_R_16BF : CUDA_R_32F; }

/* cuBLAS takes int sizes: a dimension past INT_MAX would need a blocked loop nothing here needs (a
 * matrix of more than INT_MAX elements is fine: cuBLAS addresses it in 64 bits). */
static int check_int_sizes(int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldc, ddp_err *err)
{
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX || lda > INT_MAX || ldb > INT_MAX || ldc > INT_MAX)
        return ddp_fail(err, DDP_ERUNTIME,
                        "gemm: cuBLAS takes 32-bit sizes; m=%lld n=%lld k=%lld (ld %lld/%lld/%lld) exceeds INT_MAX",
                        (long long)m, (long long)n, (long long)k, (long long)lda, (long long)ldb, (long long)ldc);
    return DDP_OK;
}

/* Row-major C[m,n] = op(A)·op(B) is column-major Cᵀ[n,m] = op(B)ᵀ·op(A)ᵀ, and a row-major matrix
 * with row stride ld is its own transpose in column-major with leading dimension ld: so cuBLAS
 * gets B before A, n before m, and the same transpose flags. Every type pair accumulates in fp32
 * (CUBLAS_COMPUTE_32F; with cuda.tf32 the handle's math mode lets fp32 GEMMs use TF32). */
int device_cuda_gemm(device *d, tensor_dtype ab, tensor_dtype c_type, bool trans_a, bool trans_b, int64_t m,
                     int64_t n, int64_t k, float alpha, const void *a, int64_t lda, const void *b, int64_t ldb,
                     float beta, void *c, int64_t ldc, ddp_err *err)
{
    int rc = check_int_sizes(m, n, k, lda, ldb, ldc, err);
    if (rc)
        return rc;
    if (ab == TENSOR_F32) {
        CUBLAS_TRY(cublasSgemm(impl_of(d)->blas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                               trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, (int)n, (int)m, (int)k, &alpha, b, (int)ldb, a,
                               (int)lda, &beta, c, (int)ldc));
        return DDP_OK;
    }
    CUBLAS_TRY(cublasGemmEx(impl_of(d)->blas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                            (int)n, (int)m, (int)k, &alpha, b, cuda_type(ab), (int)ldb, a, cuda_type(ab), (int)lda,
                            &beta, c, cuda_type(c_type), (int)ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return DDP_OK;
}

/* ---- scratch memory for the ops -------------------------------------------------------- */

int device_cuda_scratch(device *d, size_t bytes, void **out, ddp_err *err)
{
    cuda_impl *im = impl_of(d);
    if (im->scratch_bytes < bytes) {
        /* stream-ordered: queued kernels still using the old buffer finish first, the host never waits */
        if (im->scratch)
            CUDA_TRY(cudaFreeAsync(im->scratch, im->stream));
        im->scratch = NULL;
        im->scratch_bytes = 0;
        CUDA_TRY(cudaMallocAsync(&im->scratch, bytes, im->stream));
        im->scratch_bytes = bytes;
    }
    *out = im->scratch;
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
    if (!t)
        return;
    for (int i = 0; i < TIMER_INTERVALS; i++) {
        if (t->start[i])
            release_check(d, "cudaEventDestroy", cudaEventDestroy(t->start[i]));
        if (t->stop[i])
            release_check(d, "cudaEventDestroy", cudaEventDestroy(t->stop[i]));
    }
    free(t);
}

int device_cuda_timer_create(device *d, device_timer **out, ddp_err *err)
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
/* Adds the oldest interval to the total, waiting for it only if it has not finished (a full ring
 * holds intervals long done on a running GPU: no wait then). */
static int timer_retire_oldest(device *d, device_timer *t, ddp_err *err)
{
    float ms = 0;
    cudaError_t done = cuda_event_query(t->stop[t->first]);
    if (done == cudaErrorNotReady)
        done = wait_event(impl_of(d), t->stop[t->first]);
    CUDA_TRY(done);
    CUDA_TRY(cudaEventElapsedTime(&ms, t->start[t->first], t->stop[t->first]));
    t->total_ms += ms;
    t->first = (t->first + 1) % TIMER_INTERVALS;
    t->count--;
    return DDP_OK;
}

int device_cuda_timer_start(device *d, device_timer *t, ddp_err *err)
{
    int rc = t->count == TIMER_INTERVALS ? timer_retire_oldest(d, t, err) : DDP_OK;
    if (rc)
        return rc;
    CUDA_TRY(cudaEventRecord(t->start[(t->first + t->count) % TIMER_INTERVALS], device_cuda_stream(d)));
    t->running = true;
    return DDP_OK;
}

int device_cuda_timer_stop(device *d, device_timer *t, ddp_err *err)
{
    if (!t->running)
        return ddp_fail(err, DDP_ERUNTIME, "cuda timer: timer_stop without timer_start");
    CUDA_TRY(cudaEventRecord(t->stop[(t->first + t->count) % TIMER_INTERVALS], device_cuda_stream(d)));
    t->running = false;
    t->count++;
    return DDP_OK;
}

int device_cuda_timer_take_ms(device *d, device_timer *t, double *ms, ddp_err *err)
{
    while (t->count > 0) {
        int rc = timer_retire_oldest(d, t, err);
        if (rc)
            return rc;
    }
    *ms = t->total_ms;
    t->total_ms = 0;
    return DDP_OK;
}

/* ---- timestamps for the profiler ---------------------------------------------------------- */

/* One timing event per slot, all made up front: stamping is one cudaEventRecord, and reading
 * waits only for events not yet reached. */
static void cuda_stamps_destroy(device *d, device_stamps *s)
{
    cudaEvent_t *ev = s->slots;
    for (uint32_t i = 0; ev && i < s->capacity; i++)
        if (ev[i])
            release_check(d, "cudaEventDestroy", cudaEventDestroy(ev[i]));
    free(ev);
    free(s->stamped);
    free(s);
}

int device_cuda_stamps_create(device *d, uint32_t capacity, device_stamps **out, ddp_err *err)
{
    device_stamps *s = calloc(1, sizeof *s);
    cudaEvent_t *ev = calloc(capacity, sizeof *ev);
    bool *stamped = calloc(capacity, sizeof *stamped);
    if (!s || !ev || !stamped) {
        free(s);
        free(ev);
        free(stamped);
        return ddp_fail(err, DDP_ERUNTIME, "cuda stamps: out of host memory for %u slots", capacity);
    }
    *s = (device_stamps){.capacity = capacity, .stamped = stamped, .slots = ev};
    for (uint32_t i = 0; i < capacity; i++) {
        cudaError_t e = cudaEventCreate(&ev[i]);
        if (e != cudaSuccess) {
            ev[i] = NULL;
            cuda_stamps_destroy(d, s);
            return ddp_fail(err, DDP_ERUNTIME, "%s:%d: cudaEventCreate (stamp %u of %u): %s", __FILE__, __LINE__, i,
                            capacity, cudaGetErrorString(e));
        }
    }
    *out = s;
    return DDP_OK;
}

int device_cuda_stamp(device *d, device_stamps *s, uint32_t slot, void *stream, ddp_err *err)
{
    cudaStream_t on = stream ? (cudaStream_t)stream : device_cuda_stream(d);
    CUDA_TRY(cudaEventRecord(((cudaEvent_t *)s->slots)[slot], on));
    s->stamped[slot] = true;
    return DDP_OK;
}

int device_cuda_stream_wait_compute(device *d, void *stream, ddp_err *err)
{
    cuda_impl *im = impl_of(d);
    if (!stream || stream == (void *)im->stream)
        return DDP_OK;
    if (!im->compute_point)
        CUDA_TRY(cudaEventCreateWithFlags(&im->compute_point, cudaEventDisableTiming));
    CUDA_TRY(cudaEventRecord(im->compute_point, im->stream));
    CUDA_TRY(cudaStreamWaitEvent((cudaStream_t)stream, im->compute_point, 0));
    return DDP_OK;
}

/* Microseconds from event a to event b, once b has been reached (waiting only if it has not). */
static int stamp_interval_us(cuda_impl *im, cudaEvent_t a, cudaEvent_t b, double *us, ddp_err *err)
{
    cudaError_t reached = cuda_event_query(b);
    if (reached == cudaErrorNotReady)
        reached = wait_event(im, b);
    CUDA_TRY(reached);
    float ms = 0;
    CUDA_TRY(cudaEventElapsedTime(&ms, a, b));
    *us = 1e3 * (double)ms;
    return DDP_OK;
}

/* Elapsed times come as float milliseconds, whose rounding grows with the interval (about 1 us
 * at 10 s): each slot is timed from the first stamped slot of its block of 1024, and only that
 * anchor from slot 0, so a range's two neighbouring stamps keep the events' own resolution. */
#define STAMP_BLOCK 1024u

int device_cuda_stamps_read(device *d, device_stamps *s, uint32_t n, double *us, ddp_err *err)
{
    cuda_impl *im = impl_of(d);
    const cudaEvent_t *ev = s->slots;
    uint32_t anchor = 0;
    for (uint32_t i = 0; i < n; i++) {
        us[i] = NAN;
        if (!s->stamped[i])
            continue;
        bool new_block = i / STAMP_BLOCK != anchor / STAMP_BLOCK;
        int rc = stamp_interval_us(im, ev[new_block ? 0 : anchor], ev[i], &us[i], err);
        if (rc)
            return rc;
        if (new_block)
            anchor = i;
        else if (i != anchor)
            us[i] += us[anchor];
    }
    return DDP_OK;
}

/* ---- the backend's table ------------------------------------------------------------------ */

static void cuda_destroy(device *d)
{
    if (!d)
        return;
    cuda_impl *im = impl_of(d);
    if (im) {
        if (im->stream) /* the last ops' faults surface here, else nowhere */
            release_check(d, "cudaStreamSynchronize", wait_stream(im, im->stream));
        for (int i = 0; i < STAGING_SLOTS; i++) {
            if (im->staging[i])
                release_check(d, "cudaFreeHost", cudaFreeHost(im->staging[i]));
            if (im->staging_done[i])
                release_check(d, "cudaEventDestroy", cudaEventDestroy(im->staging_done[i]));
        }
        if (im->scratch) /* cudaFree(NULL) after a failed set-up would try the context again */
            release_check(d, "cudaFree", cudaFree(im->scratch));
        if (im->compute_point)
            release_check(d, "cudaEventDestroy", cudaEventDestroy(im->compute_point));
        cublasStatus_t st = im->blas ? cublasDestroy(im->blas) : CUBLAS_STATUS_SUCCESS;
        device_cuda_release_failed(d, "cublasDestroy", st == CUBLAS_STATUS_SUCCESS ? NULL : cublasGetStatusString(st));
        device_cuda_lt_destroy(d, im->lt);
        if (im->stream)
            release_check(d, "cudaStreamDestroy", cudaStreamDestroy(im->stream));
        free(im);
    }
    free(d);
}

#define CUDA_OP_ENTRY(name, params) .name = device_cuda_##name,
static const struct device_ops cuda_ops = {
    DEVICE_OPS(CUDA_OP_ENTRY)
    .free = cuda_free,
    .timer_destroy = cuda_timer_destroy,
    .stamps_destroy = cuda_stamps_destroy,
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

void device_cuda_bus_id(int index, char *out, size_t len)
{
    struct cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, index) == cudaSuccess)
        snprintf(out, len, "%04x:%02x:%02x.0", (unsigned)p.pciDomainID & 0xffff, (unsigned)p.pciBusID & 0xff,
                 (unsigned)p.pciDeviceID & 0xff);
    else if (len)
        out[0] = '\0';
}

/* Everything after the device is chosen; on failure the caller destroys the half-built device. */
static int cuda_setup(device *d, const device_opts *opts, ddp_err *err)
{
    cuda_impl *im = impl_of(d);
    struct cudaDeviceProp prop;
    CUDA_TRY(cudaSetDevice(d->index));
    CUDA_TRY(cudaGetDeviceProperties(&prop, d->index));
    snprintf(d->name, sizeof d->name, "%.127s", prop.name);
    const char *mma_sync = getenv("DDP_ATTENTION_MMA_SYNC"), *tma = getenv("DDP_ATTENTION_TMA");
    im->traits = (cuda_traits){prop.major, mma_sync && !strcmp(mma_sync, "1"), !tma || strcmp(tma, "0"), NULL};
    if (prop.major >= 9) { /* a driver without the symbol leaves the TMA kernels unused, nothing worse */
        enum cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
        CUDA_TRY(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &im->traits.encode_tensor_map, 12000,
                                                  cudaEnableDefault, &found));
        if (found != cudaDriverEntryPointSuccess)
            im->traits.encode_tensor_map = NULL;
    }
    CUDA_TRY(cudaStreamCreateWithFlags(&im->stream, cudaStreamNonBlocking));
    d->stream = im->stream;
    /* pinned whole here: pinning (and cudaFreeHost's wait for the GPU) inside a step would stall it */
    for (int i = 0; i < STAGING_SLOTS; i++) {
        CUDA_TRY(cudaEventCreateWithFlags(&im->staging_done[i], cudaEventDisableTiming));
        CUDA_TRY(cudaMallocHost(&im->staging[i], STAGING_CHUNK));
    }
    CUBLAS_TRY(cublasCreate(&im->blas));
    CUBLAS_TRY(cublasSetStream(im->blas, im->stream));
    CUBLAS_TRY(cublasSetMathMode(im->blas, opts && opts->tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    return device_cuda_lt_create(opts && opts->tf32, &im->lt, err);
}

int device_cuda_backend_create(int local_rank, const device_opts *opts, device **out, ddp_err *err)
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
    d->backend = &cuda_ops;
    d->kind = DEVICE_CUDA;
    d->index = (local_rank < 0 ? 0 : local_rank) % count; /* CUDA_VISIBLE_DEVICES already applied */
    d->impl = im;
    int rc = cuda_setup(d, opts, err);
    if (rc) {
        ddp_prefix(err, "cuda device %d (local rank %d of %d visible)", d->index, local_rank, count);
        cuda_destroy(d);
        return rc;
    }
    *out = d;
    return DDP_OK;
}
