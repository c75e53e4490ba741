/* test_nccl_lifecycle.c — what the NCCL communicator (collectives/nccl/) does with the GPU around
 * its collectives, seen through the CUDA and NCCL calls it makes. tests/meson.build links this
 * program with -Wl,--wrap for those calls, so every one of them made by comm_nccl*.c, on any
 * thread, passes through a wrapper below that records it (which thread, which current device) and
 * can play a GPU whose work never finishes. One scenario per run, named by argv[1];
 * test_nccl_lifecycle.sh runs each under mpirun and checks the exit status, messages and timing:
 *   priority   the communication stream is non-blocking, of the device's greatest priority
 *   threads    every CUDA call, the watchdog thread's included, runs on the communicator's GPU
 *   setdevice  a watchdog that cannot select its GPU makes comm_nccl_create fail, saying why
 *   stuck      destroy with a collective that never finishes: waits the timeout, then aborts
 *   wedged     destroy on a GPU where nothing returns, ncclCommAbort included: the process ends
 *   failed     destroy after a failed call aborts at once
 *   abort      ops->abort aborts at once
 *   watchdog   the watchdog's own abort never returns: the process ends anyway
 *   connecting a collective's NCCL call holds the caller on the host (a peer that never connects):
 *              the watchdog ends the process without ncclCommAbort, which would free it under the call
 *   hungquery  an event query never returns on the watchdog's thread, which holds its mutex there:
 *              its monitor ends the process, the owner's teardown waiting for that mutex
 *   paused     the process stopped past the monitor's limit and continued (the script stops it):
 *              not taken for a hung watchdog
 *   staging    in-place exchanges reuse one staging buffer instead of allocating each time
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
WRAP(cudaStreamWaitEvent, (cudaStream_t s, cudaEvent_t e, unsigned flags), (s, e, flags))
WRAP(cudaStreamDestroy, (cudaStream_t s), (s))
WRAP(cudaDeviceGetStreamPriorityRange, (int *least, int *greatest), (least, greatest))
WRAP(cudaMalloc, (void **p, size_t n), (p, n))
WRAP(cudaMemset, (void *p, int v, size_t n), (p, v, n))
WRAP(cudaMemcpyAsync, (void *d, const void *src, size_t n, enum cudaMemcpyKind k, cudaStream_t s), (d, src, n, k, s))
WRAP(cudaPointerGetAttributes, (struct cudaPointerAttributes *a, const void *p), (a, p))

/* NCCL refusing the next all-gather, as it would on a communicator it found broken; or its call
 * never returning to its caller (held), as a blocking communicator's first collective waits on the
 * host for a peer that never connects. (A reduction on one rank makes no NCCL call.) */
static atomic_bool g_refuse_allgather, g_hold_allgather;
ncclResult_t __real_ncclAllGather(const void *s, void *r, size_t n, ncclDataType_t t, ncclComm_t c, cudaStream_t st);
ncclResult_t __wrap_ncclAllGather(const void *s, void *r, size_t n, ncclDataType_t t, ncclComm_t c, cudaStream_t st);
ncclResult_t __wrap_ncclAllGather(const void *s, void *r, size_t n, ncclDataType_t t, ncclComm_t c, cudaStream_t st)
{
    while (atomic_load(&g_hold_allgather))
        usleep(1000);
    if (atomic_exchange(&g_refuse_allgather, false))
        return ncclInternalError;
    return __real_ncclAllGather(s, r, n, t, c, st);
}

/* The GPU's work: finishes (RUNS), never finishes until ncclCommAbort ends it (STUCK: a peer that
 * never joins the collective), or never finishes at all, every waiting call and ncclCommAbort
 * included (WEDGED), and with QUERY_HANGS a query never returns either. cudaFree waits like a
 * synchronisation, as on a GPU. */
enum { RUNS, STUCK, WEDGED, QUERY_HANGS };
static atomic_int g_gpu = RUNS;
static atomic_bool g_aborted;
static atomic_int g_abort_calls, g_destroy_calls;

static bool unfinished(void)
{
    int gpu = atomic_load(&g_gpu);
    return gpu == WEDGED || gpu == QUERY_HANGS || (gpu == STUCK && !atomic_load(&g_aborted));
}

static void wait_while_unfinished(void)
{
    while (unfinished())
        usleep(1000);
}

#define WRAP_QUERY(name, type)                                                                     \
    cudaError_t __real_##name(type x);                                                             \
    cudaError_t __wrap_##name(type x);                                                             \
    cudaError_t __wrap_##name(type x)                                                              \
    {                                                                                              \
        observe(#name);                                                                            \
        while (atomic_load(&g_gpu) == QUERY_HANGS)                                                 \
            usleep(1000);                                                                          \
        return unfinished() ? cudaErrorNotReady : __real_##name(x);                                \
    }
#define WRAP_WAIT(name, type)                                                                      \
    cudaError_t __real_##name(type x);                                                             \
    cudaError_t __wrap_##name(type x);                                                             \
    cudaError_t __wrap_##name(type x)                                                              \
    {                                                                                              \
        observe(#name);                                                                            \
        wait_while_unfinished();                                                                   \
        return __real_##name(x);                                                                   \
    }
WRAP_QUERY(cudaEventQuery, cudaEvent_t)
WRAP_QUERY(cudaStreamQuery, cudaStream_t)
WRAP_WAIT(cudaEventSynchronize, cudaEvent_t)
WRAP_WAIT(cudaStreamSynchronize, cudaStream_t)
WRAP_WAIT(cudaFree, void *)

ncclResult_t __real_ncclCommAbort(ncclComm_t comm);
ncclResult_t __wrap_ncclCommAbort(ncclComm_t comm);
ncclResult_t __wrap_ncclCommAbort(ncclComm_t comm)
{
    atomic_fetch_add(&g_abort_calls, 1);
    log_warn("ncclCommAbort called"); /* the scenarios' script looks for it */
    while (atomic_load(&g_gpu) == WEDGED)
        usleep(1000);
    atomic_store(&g_aborted, true);
    return __real_ncclCommAbort(comm);
}

ncclResult_t __real_ncclCommDestroy(ncclComm_t comm);
ncclResult_t __wrap_ncclCommDestroy(ncclComm_t comm);
ncclResult_t __wrap_ncclCommDestroy(ncclComm_t comm)
{
    atomic_fetch_add(&g_destroy_calls, 1);
    wait_while_unfinished(); /* NCCL's destroy waits for the communicator's work */
    return __real_ncclCommDestroy(comm);
}

static atomic_int g_async_allocs, g_async_frees;

cudaError_t __real_cudaMallocAsync(void **p, size_t n, cudaStream_t s);
cudaError_t __wrap_cudaMallocAsync(void **p, size_t n, cudaStream_t s);
cudaError_t __wrap_cudaMallocAsync(void **p, size_t n, cudaStream_t s)
{
    observe("cudaMallocAsync");
    atomic_fetch_add(&g_async_allocs, 1);
    return __real_cudaMallocAsync(p, n, s);
}

cudaError_t __real_cudaFreeAsync(void *p, cudaStream_t s);
cudaError_t __wrap_cudaFreeAsync(void *p, cudaStream_t s);
cudaError_t __wrap_cudaFreeAsync(void *p, cudaStream_t s)
{
    observe("cudaFreeAsync");
    atomic_fetch_add(&g_async_frees, 1);
    return __real_cudaFreeAsync(p, s);
}

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
    comm_nccl_opts o = {.compute_stream = g_compute, .device = device, .timeout_s = timeout_s};
    int rc = comm_nccl_create(&o, &c, &err);
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
    comm_nccl_opts o = {.compute_stream = g_compute, .device = 0, .timeout_s = 60};
    int rc = comm_nccl_create(&o, &c, &err);
    CHECK(rc == DDP_ERUNTIME && c == NULL, "comm_nccl_create returned %d with a watchdog that cannot select its GPU", rc);
    CHECK_STR_CONTAINS(err.msg, "comm_nccl_create (GPU 0)");
    CHECK_STR_CONTAINS(err.msg, "the NCCL watchdog thread cannot select GPU 0: cudaSetDevice: ");
    CHECK_STR_CONTAINS(err.msg, cudaGetErrorString(cudaErrorDevicesUnavailable));
    if (rc == DDP_OK && c)
        c->ops->destroy(c);
}

/* A collective left in flight (non-blocking, waited for on the stream only), then the GPU's
 * state for the rest of the run. */
static comm *in_flight(double timeout_s, int gpu)
{
    comm *c = create(0, timeout_s);
    static float *buf;
    CHECK(cudaMalloc((void **)&buf, 64 * sizeof *buf) == cudaSuccess, "cudaMalloc");
    ddp_err err = {0};
    comm_req *req = NULL;
    if (c && c->ops->allreduce(c, buf, buf, 64, DT_FLOAT, OP_SUM, &req, &err) == DDP_OK)
        CHECK(c->ops->wait(c, req, &err) == DDP_OK, "wait: %s", err.msg);
    atomic_store(&g_gpu, gpu);
    return c;
}

/* destroy after success, with a collective that does not finish until aborted: it waits
 * timeout_s for it, then aborts instead of destroying, and returns. */
static void scenario_stuck(void)
{
    comm *c = in_flight(2.0, STUCK);
    double t0 = monotonic_s();
    if (c)
        c->ops->destroy(c);
    double took = monotonic_s() - t0;
    CHECK(took >= 1.9 && took < 3.5, "destroy took %.2f s with a stuck collective and timeout 2 s", took);
    CHECK_EQ_INT(atomic_load(&g_abort_calls), 1);
    CHECK_EQ_INT(atomic_load(&g_destroy_calls), 0);
}

/* destroy on a wedged GPU: nothing returns, ncclCommAbort included; the process still ends
 * (exit 1, with a message) once timeout_s + min(timeout_s, 30) have passed. Never returns. */
static void scenario_wedged(void)
{
    comm *c = in_flight(1.0, WEDGED);
    if (c)
        c->ops->destroy(c);
    CHECK(0, "destroy returned on a wedged GPU");
}

/* After a failed call the end is an abort at once: no waiting for what is in flight. */
static void scenario_failed(void)
{
    comm *c = create(0, 10.0);
    if (!c)
        return;
    ddp_err err = {0};
    static float *buf;
    CHECK(cudaMalloc((void **)&buf, 64 * sizeof *buf) == cudaSuccess, "cudaMalloc");
    atomic_store(&g_refuse_allgather, true);
    CHECK(c->ops->allgather(c, buf, buf, 4, DT_FLOAT, NULL, &err) == DDP_ERUNTIME, "an all-gather NCCL refuses fails");
    CHECK(c->ops->allreduce(c, buf, buf, 64, DT_FLOAT, OP_SUM, NULL, &err) == DDP_OK, "allreduce: %s", err.msg);
    atomic_store(&g_gpu, STUCK);
    double t0 = monotonic_s();
    c->ops->destroy(c);
    double took = monotonic_s() - t0;
    CHECK(took < 1.0, "destroy after a failure took %.2f s (timeout 10 s): it waited", took);
    CHECK_EQ_INT(atomic_load(&g_abort_calls), 1);
    CHECK_EQ_INT(atomic_load(&g_destroy_calls), 0);
}

/* ops->abort, the caller's error path: no waiting either. */
static void scenario_abort(void)
{
    comm *c = in_flight(10.0, STUCK);
    double t0 = monotonic_s();
    if (c)
        c->ops->abort(c);
    double took = monotonic_s() - t0;
    CHECK(took < 1.0, "abort took %.2f s (timeout 10 s): it waited", took);
    CHECK_EQ_INT(atomic_load(&g_abort_calls), 1);
    CHECK_EQ_INT(atomic_load(&g_destroy_calls), 0);
}

/* The watchdog's own abort on a wedged GPU: the collective times out after 1 s, ncclCommAbort
 * never returns, and the process ends anyway after min(timeout_s, 30) more. Never returns. */
static void scenario_watchdog(void)
{
    comm *c = in_flight(1.0, WEDGED);
    (void)c;
    for (;;)
        pause();
}

/* The watchdog fires while the all-gather's NCCL call holds this thread: it must end the process
 * without ncclCommAbort (exit 1). Never returns. */
static void scenario_connecting(void)
{
    comm *c = create(0, 1.0);
    static float *buf;
    CHECK(cudaMalloc((void **)&buf, 64 * sizeof *buf) == cudaSuccess, "cudaMalloc");
    ddp_err err = {0};
    atomic_store(&g_hold_allgather, true);
    if (c)
        c->ops->allgather(c, buf, buf, 4, DT_FLOAT, NULL, &err);
    CHECK(0, "the held all-gather returned: %s", err.msg);
}

/* An event query that never returns on the watchdog's thread (a wedged GPU): the watchdog holds its
 * mutex in it and the owner's teardown waits for that mutex; the monitor ends the process once the
 * watchdog has finished no pass for timeout 1 s + abort limit 1 s. Never returns. */
static void scenario_hungquery(void)
{
    comm *c = create(0, 1.0);
    static float *buf;
    CHECK(cudaMalloc((void **)&buf, 64 * sizeof *buf) == cudaSuccess, "cudaMalloc");
    ddp_err err = {0};
    comm_req *req = NULL;
    if (c && c->ops->allreduce(c, buf, buf, 64, DT_FLOAT, OP_SUM, &req, &err) == DDP_OK) {
        atomic_store(&g_gpu, QUERY_HANGS);
        usleep(500000); /* the watchdog's next pass queries the collective's event, every 50 ms */
        c->ops->destroy(c);
    }
    CHECK(0, "destroy returned while the watchdog hung in an event query");
}

/* Idle for 7 s, during which test_nccl_lifecycle.sh stops the process for 4 s (SIGSTOP, as a
 * suspended job is), past the monitor's limit (timeout 1 s + abort limit 1 s): the run goes on. */
static void scenario_paused(void)
{
    comm *c = create(0, 1.0);
    usleep(7000000);
    if (c)
        c->ops->destroy(c);
}

/* In-place all-to-all and sendrecv send from a staging copy that is allocated once and only
 * grows: repeated exchanges allocate nothing, a larger one replaces it, destroy frees it. */
static void scenario_staging(void)
{
    comm *c = create(g_rank, 60); /* one GPU per rank, as NCCL requires */
    if (!c)
        return;
    size_t n = 256 * (size_t)g_size;
    float *buf = NULL;
    CHECK(cudaMalloc((void **)&buf, 4 * n * sizeof *buf) == cudaSuccess, "cudaMalloc");
    ddp_err err = {0};
    int to = (g_rank + 1) % g_size, from = (g_rank + g_size - 1) % g_size;
    for (int i = 0; i < 5; i++) {
        CHECK(c->ops->alltoall(c, buf, buf, n / (size_t)g_size, DT_FLOAT, NULL, &err) == DDP_OK, "alltoall: %s", err.msg);
        CHECK(c->ops->sendrecv(c, buf, to, buf, from, n, DT_FLOAT, NULL, &err) == DDP_OK, "sendrecv: %s", err.msg);
    }
    CHECK(atomic_load(&g_async_allocs) == 1 && atomic_load(&g_async_frees) == 0,
          "10 in-place exchanges of one size: %d allocations, %d frees (want 1, 0)", atomic_load(&g_async_allocs),
          atomic_load(&g_async_frees));
    CHECK(c->ops->sendrecv(c, buf, to, buf, from, 4 * n, DT_FLOAT, NULL, &err) == DDP_OK, "sendrecv: %s", err.msg);
    CHECK(atomic_load(&g_async_allocs) == 2 && atomic_load(&g_async_frees) == 1,
          "a larger exchange: %d allocations, %d frees (want 2, 1)", atomic_load(&g_async_allocs),
          atomic_load(&g_async_frees));
    c->ops->destroy(c);
    CHECK(atomic_load(&g_async_frees) == 2, "destroy: %d frees of the staging buffer in all (want 2)",
          atomic_load(&g_async_frees));
    cudaFree(buf);
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
    } scenarios[] = {{"priority", scenario_priority}, {"threads", scenario_threads}, {"setdevice", scenario_setdevice},
                     {"stuck", scenario_stuck}, {"wedged", scenario_wedged}, {"failed", scenario_failed},
                     {"abort", scenario_abort}, {"watchdog", scenario_watchdog}, {"staging", scenario_staging},
                     {"connecting", scenario_connecting}, {"hungquery", scenario_hungquery},
                     {"paused", scenario_paused}};
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
