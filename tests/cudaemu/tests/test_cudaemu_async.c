/* test_cudaemu_async.c — the emulator is as strict as a GPU about time, devices and memory.
 *
 * Proves: queued work runs when something waits for it, not at the call (a kernel reads its
 * inputs when it runs; a pinned staging buffer reused before its copy ran delivers the new bytes,
 * a pageable source is read at the call); queries report cudaErrorNotReady for work not yet run;
 * cudaStreamWaitEvent orders streams, and without it the DDP_CUDA_EMU_ORDER orders give
 * different answers; the legacy default stream waits for blocking streams; a thread that never
 * chose a device cannot use one while several exist, and streams and events refuse a thread on
 * another device; host code dereferencing device memory, a kernel writing one element past or
 * before its allocation, or far outside it, or past a static __shared__ array, abort with a report
 * naming the culprit; the count of
 * host-blocking calls. */
#include "emu_test_util.h"
#include "tests/check.h"
#include "tests/cudaemu/cudaemu.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

int emu_write_at(float *out, long long index, float value, cudaStream_t stream);
int emu_read_float4_at(const float *in, long long index, float *out, cudaStream_t stream);
int emu_shared_at(float *out, int index, int write, cudaStream_t stream);
int emu_copy_floats(const float *in, float *out, int n, cudaStream_t stream);

enum { N = 256 };

static float first(const float *d)
{
    float v = NAN;
    cudaMemcpy(&v, d, sizeof v, cudaMemcpyDeviceToHost);
    return v;
}

/* Work runs when waited for: the kernel sees what its input holds then. */
static void test_deferred(void)
{
    float *d_in, *d_out, *pinned, host[N];
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cudaMalloc((void **)&d_in, N * sizeof(float));
    cudaMalloc((void **)&d_out, N * sizeof(float));
    cudaMallocHost((void **)&pinned, N * sizeof(float));
    for (int i = 0; i < N; i++)
        pinned[i] = host[i] = 1.0f;
    /* pinned source: read when the copy runs; the host overwrote it first */
    CHECK_EQ_INT(cudaMemcpyAsync(d_in, pinned, N * sizeof(float), cudaMemcpyHostToDevice, s), cudaSuccess);
    pinned[0] = 2.0f;
    CHECK_EQ_INT(emu_copy_floats(d_in, d_out, N, s), cudaSuccess);
    CHECK_EQ_INT(cudaStreamSynchronize(s), cudaSuccess);
    CHECK(first(d_out) == 2.0f, "a pinned source reused before its copy ran: got %g, expected the new 2", first(d_out));
    /* pageable source: CUDA stages it before returning, so the old bytes arrive */
    CHECK_EQ_INT(cudaMemcpyAsync(d_in, host, N * sizeof(float), cudaMemcpyHostToDevice, s), cudaSuccess);
    host[0] = 3.0f;
    CHECK_EQ_INT(cudaStreamSynchronize(s), cudaSuccess);
    CHECK(first(d_in) == 1.0f, "a pageable source is read at the call: got %g, expected 1", first(d_in));
    /* a query runs at most one queued op: not ready until everything before the event ran */
    cudaEvent_t e;
    cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
    cudaMemsetAsync(d_out, 0, N * sizeof(float), s);
    emu_copy_floats(d_in, d_out, N, s);
    cudaEventRecord(e, s);
    CHECK_EQ_INT(cudaEventQuery(e), cudaErrorNotReady);
    CHECK_EQ_INT(cudaStreamQuery(s), cudaErrorNotReady);
    int polls = 0;
    while (cudaEventQuery(e) == cudaErrorNotReady && polls < 100)
        polls++;
    CHECK(polls < 100, "an event query loop never completes");
    CHECK_EQ_INT(cudaEventQuery(e), cudaSuccess);
    CHECK_EQ_INT(cudaStreamQuery(s), cudaSuccess);
    cudaEventDestroy(e);
    cudaFreeHost(pinned);
    cudaFree(d_in);
    cudaFree(d_out);
    cudaStreamDestroy(s);
}

/* A producer and a consumer stream: with the wait, the right answer in every order; without it,
 * the answer depends on DDP_CUDA_EMU_ORDER, as on a GPU it depends on timing. */
static float producer_consumer(const char *order, int wait)
{
    emu_set_order(order);
    float *src, *dst, ones[N];
    for (int i = 0; i < N; i++)
        ones[i] = 1.0f;
    cudaStream_t produce, consume;
    cudaEvent_t ready;
    cudaStreamCreateWithFlags(&produce, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&consume, cudaStreamNonBlocking);
    cudaEventCreateWithFlags(&ready, cudaEventDisableTiming);
    cudaMalloc((void **)&src, N * sizeof(float));
    cudaMalloc((void **)&dst, N * sizeof(float));
    cudaMemcpyAsync(src, ones, sizeof ones, cudaMemcpyHostToDevice, produce);
    cudaEventRecord(ready, produce);
    if (wait)
        cudaStreamWaitEvent(consume, ready, 0);
    emu_copy_floats(src, dst, N, consume);
    cudaDeviceSynchronize();
    float got = first(dst);
    cudaFree(src);
    cudaFree(dst);
    cudaEventDestroy(ready);
    cudaStreamDestroy(produce);
    cudaStreamDestroy(consume);
    emu_set_order("forward");
    return got;
}

static void test_stream_order(void)
{
    for (int i = 0; i < EMU_ORDER_COUNT; i++)
        CHECK(producer_consumer(emu_orders[i], 1) == 1.0f, "with the wait, order %s: %g", emu_orders[i],
              producer_consumer(emu_orders[i], 1));
    CHECK(producer_consumer("forward", 0) == 1.0f, "oldest stream first runs the producer first");
    CHECK(isnan(producer_consumer("reverse", 0)), "newest stream first: the consumer must read unwritten memory");
    /* the legacy default stream waits for a blocking stream's earlier work */
    float *d, ones[N];
    for (int i = 0; i < N; i++)
        ones[i] = 1.0f;
    cudaStream_t blocking;
    cudaStreamCreate(&blocking);
    cudaMalloc((void **)&d, N * sizeof(float));
    emu_set_order("reverse");
    cudaMemcpyAsync(d, ones, sizeof ones, cudaMemcpyHostToDevice, blocking);
    CHECK(first(d) == 1.0f, "cudaMemcpy on the default stream did not wait for a blocking stream");
    emu_set_order("forward");
    cudaFree(d);
    cudaStreamDestroy(blocking);
}

/* ---- devices ---- */

static void *never_chose(void *arg)
{
    cudaStream_t *out = arg;
    emu_capture_begin();
    cudaError_t e = cudaStreamCreate(out);
    char buf[1024];
    emu_capture_end(buf, sizeof buf);
    CHECK_EQ_INT(e, cudaErrorInvalidDevice);
    CHECK_STR_CONTAINS(buf, "never selected a device");
    return NULL;
}

static void *other_device(void *arg)
{
    cudaStream_t s = *(cudaStream_t *)arg;
    cudaSetDevice(0);
    emu_capture_begin();
    cudaError_t sync = cudaStreamSynchronize(s);
    cudaError_t launch = (cudaError_t)emu_write_at(NULL, 0, 0.0f, s);
    char buf[1024];
    emu_capture_end(buf, sizeof buf);
    CHECK_EQ_INT(sync, cudaErrorInvalidResourceHandle);
    CHECK_EQ_INT(launch, cudaErrorInvalidResourceHandle);
    CHECK_STR_CONTAINS(buf, "belongs to device 1");
    cudaGetLastError();
    return NULL;
}

static void test_devices(void)
{
    setenv("DDP_CUDA_EMU_DEVICES", "2", 1);
    pthread_t t;
    cudaStream_t s = NULL;
    pthread_create(&t, NULL, never_chose, &s);
    pthread_join(t, NULL);
    cudaSetDevice(1);
    CHECK_EQ_INT(cudaStreamCreate(&s), cudaSuccess);
    pthread_create(&t, NULL, other_device, &s);
    pthread_join(t, NULL);
    CHECK_EQ_INT(cudaStreamDestroy(s), cudaSuccess);
    cudaSetDevice(0);
    unsetenv("DDP_CUDA_EMU_DEVICES");
}

/* ---- memory checking (each case in a child process that must abort) ---- */

static void misuse(int which)
{
    float *d = NULL;
    cudaMalloc((void **)&d, 100 * sizeof(float)); /* 400 bytes: not a multiple of 256 */
    switch (which) {
    case 0: d[3] = 1.0f; break;                          /* host code writes device memory */
    case 1: emu_write_at(d, 100, 1.0f, 0); break;        /* one past the end, in the rounding slack */
    case 2: emu_write_at(d, -1, 1.0f, 0); break;         /* one before the start */
    case 3: emu_write_at(d, 200, 1.0f, 0); break;        /* past the slack: the guard page */
    case 4: { volatile float x = d[0]; (void)x; } break; /* host code reads device memory */
    case 5: {                                            /* a kernel reads pageable host memory */
        float *host = calloc(100, sizeof(float));
        emu_copy_floats(host, d, 100, 0);
        break;
    }
    case 6: emu_write_at(d, -300, 1.0f, 0); break;       /* 1200 bytes before the start: past the guard bytes */
    case 7: {                                            /* a kernel reads one past the end, in the slack */
        float *out = NULL;
        cudaMalloc((void **)&out, 100 * sizeof(float));
        emu_copy_floats(d + 1, out, 100, 0);
        break;
    }
    case 8: emu_copy_floats(d - 1, d, 1, 0); break;      /* a kernel reads one before the start */
    case 9: {                                            /* a 16-byte load of floats 96..99 of 98 */
        float *d98 = NULL;
        cudaMalloc((void **)&d98, 98 * sizeof(float));
        emu_read_float4_at(d98, 24, d, 0);
        break;
    }
    case 10: emu_shared_at(d, 32, 1, 0); break;          /* one past a static __shared__ float[32] */
    case 11: emu_shared_at(d, 40, 0, 0); break;          /* a read 8 floats past it */
    }
    cudaDeviceSynchronize();
}

static void test_memcheck(void)
{
    static const char *const expect[] = {
        "host code dereferenced device memory",
        "kernel access outside its allocation in kernel write_at",
        "writes 4 bytes at 0x",
        "kernel access outside its allocation in kernel write_at",
        "host code dereferenced device memory",
        "kernel access to host memory in kernel copy_floats",
        "starting 1200 byte(s) before the start of a 400-byte cudaMalloc allocation",
        "reads 4 bytes at 0x",
        "starting 4 byte(s) before the start of a 400-byte cudaMalloc allocation",
        "kernel access outside its allocation in kernel read_float4_at",
        "kernel access outside its __shared__ array in kernel shared_at",
        "kernel access outside its __shared__ array in kernel shared_at",
    };
    static const char *const also[] = {
        NULL, "ending 4 byte(s) past the end of a 400-byte cudaMalloc allocation",
        "starting 4 byte(s) before the start of a 400-byte cudaMalloc allocation", "past the end of a 400-byte", NULL,
        NULL, "kernel access outside its allocation in kernel write_at",
        "ending 4 byte(s) past the end of a 400-byte cudaMalloc allocation", "invalid __global__ read",
        "ending 8 byte(s) past the end of a 392-byte cudaMalloc allocation",
        "writes 4 bytes at 0x", "reads 4 bytes at 0x",
    };
    char buf[4096];
    for (int which = 0; which < 12; which++) {
        int status = emu_run_in_child(misuse, which, buf, sizeof buf);
        CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "misuse %d: status 0x%x, expected abort", which,
              status);
        CHECK_STR_CONTAINS(buf, expect[which]);
        if (also[which])
            CHECK_STR_CONTAINS(buf, also[which]);
    }
    /* in bounds is fine, and memory nothing wrote reads as NaN */
    float *d = NULL;
    cudaMalloc((void **)&d, 100 * sizeof(float));
    CHECK(isnan(first(d)), "fresh device memory is not NaN");
    CHECK_EQ_INT(emu_write_at(d, 99, 5.0f, 0), cudaSuccess);
    float last = 0;
    cudaMemcpy(&last, d + 99, sizeof last, cudaMemcpyDeviceToHost);
    CHECK(last == 5.0f, "last element %g", last);
    float *pinned = NULL; /* mapped into the device's address space: a kernel may read it */
    CHECK_EQ_INT(cudaMallocHost((void **)&pinned, 100 * sizeof(float)), cudaSuccess);
    for (int i = 0; i < 100; i++)
        pinned[i] = (float)i;
    CHECK_EQ_INT(emu_copy_floats(pinned, d, 100, 0), cudaSuccess);
    cudaMemcpy(&last, d + 99, sizeof last, cudaMemcpyDeviceToHost);
    CHECK(last == 99.0f, "a kernel reading pinned host memory: last element %g", last);
    cudaFreeHost(pinned);
    cudaFree(d);
}

/* ---- host-blocking calls ---- */

static void test_blocking_count(void)
{
    float *d, *pinned, host[N];
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cudaMalloc((void **)&d, N * sizeof(float));
    cudaMallocHost((void **)&pinned, N * sizeof(float));
    unsigned long long before = cudaemu_host_blocking_calls();
    cudaMemcpyAsync(d, pinned, N * sizeof(float), cudaMemcpyHostToDevice, s);
    cudaMemcpyAsync(pinned, d, N * sizeof(float), cudaMemcpyDeviceToHost, s);
    emu_copy_floats(d, d, N, s);
    CHECK(cudaemu_host_blocking_calls() == before, "asynchronous work counted as blocking");
    cudaMemcpyAsync(host, d, sizeof host, cudaMemcpyDeviceToHost, s); /* pageable destination: blocks */
    cudaStreamSynchronize(s);
    CHECK(cudaemu_host_blocking_calls() == before + 2, "blocking calls: %llu, expected 2",
          cudaemu_host_blocking_calls() - before);
    cudaFreeHost(pinned);
    cudaFree(d);
    cudaStreamDestroy(s);
}

int main(void)
{
    test_deferred();
    test_stream_order();
    test_devices();
    test_memcheck();
    test_blocking_count();
    return check_done("test_cudaemu_async");
}
