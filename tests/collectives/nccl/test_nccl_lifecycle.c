/* test_nccl_lifecycle.c — what the NCCL communicator (collectives/nccl/) does with the GPU around
 * its collectives, seen through the CUDA and NCCL calls it makes. tests/meson.build links this
 * program with -Wl,--wrap for those calls, so every one of them made by comm_nccl*.c, on any
 * thread, passes through a wrapper below that records it (which thread, which current device) and
 * can play a GPU whose work never finishes. One scenario per run, named by argv[1];
 * test_nccl_lifecycle.sh runs each under mpirun and checks the exit status, messages and timing:
 *   priority   the communication stream is non-blocking, of the device's greatest priority
 *   threads    every CUDA call, the watchdog thread's included, runs on the communicator's GPU
 *   setdevice  a watchdog that cannot select its GPU makes comm_nccl_create fail, saying why
 * It must not reach into the communicator's internals: only comm.h and the calls it makes. */
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/check.h"
#include "collectives/comm.h"
#include "runtime/base/clock.h"
#include "runtime/base/log.h"
#include "runtime/base/mpi_thread.h"

/* ---- the wrappers ------------------------------------------------------------------------------ */

static pthread_t g_main;
static atomic_int g_streams_created, g_last_stream_flags, g_last_stream_priority;

/* Every wrapped call checks the calling thread's current device against g_expect_device (-1: not
 * checked); cudaSetDevice, the call that chooses it, is exempt. */
static atomic_int g_expect_device = -1, g_calls_off_main, g_wrong_device;
static atomic_bool g_fail_set_device_off_main; /* cudaSetDevice fails on every thread but main */
static pthread_mutex_t g_first_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_first_wrong[160];

static bool on_main(void) { return pthread_equal(pthread_self(), g_main); }

static void observe(const char *call)
{
    if (!on_main())
        atomic_fetch_add(&g_calls_off_main, 1);
    int want = atomic_load(&g_expect_device), have = -1;
    if (want < 0 || (cudaGetDevice(&have) == cudaSuccess && have == want))
        return;
    if (atomic_fetch_add(&g_wrong_device, 1) == 0) {
        pthread_mutex_lock(&g_first_lock);
        snprintf(g_first_wrong, sizeof g_first_wrong, "%s on %s thread with current device %d", call,
                 on_main() ? "the main" : "another", have);
        pthread_mutex_unlock(&g_first_lock);
    }
}

/* A wrapper that only observes: WRAP(name, (params), (args)). */
#define WRAP(name, params, args)                                                                   \
    cudaError_t __real_##name params;                                                              \
    cudaError_t __wrap_##name params;                                                              \
    cudaError_t __wrap_##name params                                                               \
    {                                                                                              \
        observe(#name);                                                                            \
        return __real_##name args;                                                                 \
    }
WRAP(cudaEventCreateWithFlags, (cudaEvent_t *e, unsigned flags), (e, flags))
WRAP(cudaEventDestroy, (cudaEvent_t e), (e))
WRAP(cudaEventRecord, (cudaEvent_t e, cudaStream_t s), (e, s))
WRAP(cudaEventQuery, (cudaEvent_t e), (e))
WRAP(cudaEventSynchronize, (cudaEvent_t e), (e))
WRAP(cudaStreamWaitEvent, (cudaStream_t s, cudaEvent_t e, unsigned flags), (s, e, flags))
WRAP(cudaStreamQuery, (cudaStream_t s), (s))
WRAP(cudaStreamSynchronize, (cudaStream_t s), (s))
WRAP(cudaStreamDestroy, (cudaStream_t s), (s))
WRAP(cudaDeviceGetStreamPriorityRange, (int *least, int *greatest), (least, greatest))
WRAP(cudaMalloc, (void **p, size_t n), (p, n))
WRAP(cudaFree, (void *p), (p))
WRAP(cudaMemset, (void *p, int v, size_t n), (p, v, n))
WRAP(cudaMallocAsync, (void **p, size_t n, cudaStream_t s), (p, n, s))
WRAP(cudaFreeAsync, (void *p, cudaStream_t s), (p, s))
WRAP(cudaMemcpyAsync, (void *d, const void *src, size_t n, enum cudaMemcpyKind k, cudaStream_t s), (d, src, n, k, s))

cudaError_t __real_cudaSetDevice(int device);
cudaError_t __wrap_cudaSetDevice(int device);
cudaError_t __wrap_cudaSetDevice(int device)
{
    if (!on_main())
        atomic_fetch_add(&g_calls_off_main, 1);
    if (!on_main() && atomic_load(&g_fail_set_device_off_main))
        return cudaErrorDevicesUnavailable; /* what exclusive-process mode answers */
    return __real_cudaSetDevice(device);
}

cudaError_t __real_cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
cudaError_t __wrap_cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
cudaError_t __wrap_cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags)
{
    observe("cudaStreamCreateWithFlags");
    atomic_fetch_add(&g_streams_created, 1);
    atomic_store(&g_last_stream_flags, (int)flags);
    atomic_store(&g_last_stream_priority, 0); /* the default priority */
    return __real_cudaStreamCreateWithFlags(s, flags);
}

cudaError_t __real_cudaStreamCreateWithPriority(cudaStream_t *s, unsigned flags, int priority);
cudaError_t __wrap_cudaStreamCreateWithPriority(cudaStream_t *s, unsigned flags, int priority);
cudaError_t __wrap_cudaStreamCreateWithPriority(cudaStream_t *s, unsigned flags, int priority)
{
    observe("cudaStreamCreateWithPriority");
    atomic_fetch_add(&g_streams_created, 1);
    atomic_store(&g_last_stream_flags, (int)flags);
    atomic_store(&g_last_stream_priority, priority);
    return __real_cudaStreamCreateWithPriority(s, flags, priority);
}

/* ---- scenarios --------------------------------------------------------------------------------- */

static int g_rank, g_size;
static cudaStream_t g_compute;

static comm *create(int device, double timeout_s)
{
    CHECK(cudaSetDevice(device) == cudaSuccess, "cudaSetDevice(%d)", device);
    CHECK(cudaStreamCreateWithFlags(&g_compute, cudaStreamNonBlocking) == cudaSuccess, "compute stream");
    ddp_err err = {0};
    comm *c = NULL;
    int rc = comm_nccl_create(g_compute, device, timeout_s, false, &c, &err);
    CHECK(rc == DDP_OK, "comm_nccl_create: %s", err.msg);
    return c;
}

/* The communication stream: one stream, non-blocking, at the greatest priority the device has. */
static void scenario_priority(void)
{
    int least = 0, greatest = 0;
    CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest) == cudaSuccess, "priority range");
    CHECK(greatest < least, "the emulator offers priorities (%d..%d)", least, greatest);
    comm *c = create(0, 60);
    if (!c)
        return;
    atomic_store(&g_streams_created, atomic_load(&g_streams_created) - 1); /* ours: the compute stream */
    CHECK_EQ_INT(atomic_load(&g_streams_created), 1);
    CHECK_EQ_INT(atomic_load(&g_last_stream_flags), cudaStreamNonBlocking);
    CHECK(atomic_load(&g_last_stream_priority) == greatest, "communication stream priority %d, the greatest is %d",
          atomic_load(&g_last_stream_priority), greatest);
    c->ops->destroy(c);
}

/* Every CUDA call the communicator makes, on every thread (the watchdog's included), runs on
 * the communicator's GPU. Each rank uses GPU rank+1, so a thread that never selected one (GPU 0)
 * shows. The collectives stay in flight (non-blocking, untested) while the watchdog polls them. */
static void scenario_threads(void)
{
    int device = g_rank + 1, n = 64;
    atomic_store(&g_expect_device, device);
    comm *c = create(device, 1.0); /* the watchdog polls every 50 ms */
    if (!c)
        return;
    float *buf = NULL;
    CHECK(cudaMalloc((void **)&buf, (size_t)n * sizeof *buf) == cudaSuccess, "cudaMalloc");
    ddp_err err = {0};
    comm_req *reqs[4] = {0};
    for (int i = 0; i < 4; i++)
        CHECK(c->ops->allreduce(c, buf, buf, (size_t)n, DT_FLOAT, OP_SUM, &reqs[i], &err) == DDP_OK, "allreduce: %s",
              err.msg);
    usleep(300 * 1000);
    for (int i = 0; i < 4; i++)
        if (reqs[i])
            CHECK(c->ops->wait(c, reqs[i], &err) == DDP_OK, "wait: %s", err.msg);
    CHECK(c->ops->barrier(c, &err) == DDP_OK, "barrier: %s", err.msg);
    c->ops->destroy(c);
    cudaFree(buf);
    CHECK(atomic_load(&g_calls_off_main) > 0, "no CUDA call off the main thread: did the watchdog poll at all?");
    CHECK(atomic_load(&g_wrong_device) == 0, "%d CUDA calls on a device other than GPU %d, the first: %s",
          atomic_load(&g_wrong_device), device, g_first_wrong);
}

/* The watchdog cannot select the GPU (exclusive-process mode, say): creation fails, saying so. */
static void scenario_setdevice(void)
{
    atomic_store(&g_fail_set_device_off_main, true);
    CHECK(cudaStreamCreateWithFlags(&g_compute, cudaStreamNonBlocking) == cudaSuccess, "compute stream");
    ddp_err err = {0};
    comm *c = NULL;
    int rc = comm_nccl_create(g_compute, 0, 60, false, &c, &err);
    CHECK(rc == DDP_ERUNTIME && c == NULL, "comm_nccl_create returned %d with a watchdog that cannot select its GPU", rc);
    CHECK_STR_CONTAINS(err.msg, "comm_nccl_create (GPU 0)");
    CHECK_STR_CONTAINS(err.msg, "the NCCL watchdog thread cannot select GPU 0: cudaSetDevice: ");
    CHECK_STR_CONTAINS(err.msg, cudaGetErrorString(cudaErrorDevicesUnavailable));
    if (rc == DDP_OK && c)
        c->ops->destroy(c);
}

int main(int argc, char **argv)
{
    g_main = pthread_self();
    int provided;
    MPI_Init_thread(&argc, &argv, DDP_MPI_THREAD_LEVEL, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    log_init(g_rank, "test");
    const char *what = argc > 1 ? argv[1] : "";
    static const struct {
        const char *name;
        void (*run)(void);
    } scenarios[] = {{"priority", scenario_priority}, {"threads", scenario_threads}, {"setdevice", scenario_setdevice}};
    int found = 0;
    for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++)
        if (strcmp(what, scenarios[i].name) == 0) {
            found = 1;
            scenarios[i].run();
        }
    CHECK(found, "unknown scenario '%s'", what);
    if (g_compute)
        cudaStreamDestroy(g_compute);
    char name[96];
    snprintf(name, sizeof name, "test_nccl_lifecycle %s (rank %d)", what, g_rank);
    int status = check_done(name), worst = status;
    MPI_Allreduce(&status, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return worst;
}
