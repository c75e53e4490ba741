/* test_nccl_lifecycle.c — what the NCCL communicator (collectives/nccl/) does with the GPU around
 * its collectives, seen through the CUDA and NCCL calls it makes. tests/meson.build links this
 * program with -Wl,--wrap for those calls, so every one of them made by comm_nccl*.c, on any
 * thread, passes through a wrapper below that records it (which thread, which current device) and
 * can play a GPU whose work never finishes. One scenario per run, named by argv[1];
 * test_nccl_lifecycle.sh runs each under mpirun and checks the exit status, messages and timing:
 *   priority   the communication stream is non-blocking, of the device's greatest priority
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

static atomic_int g_streams_created, g_last_stream_flags, g_last_stream_priority;

cudaError_t __real_cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
cudaError_t __wrap_cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags)
{
    atomic_fetch_add(&g_streams_created, 1);
    atomic_store(&g_last_stream_flags, (int)flags);
    atomic_store(&g_last_stream_priority, 0); /* the default priority */
    return __real_cudaStreamCreateWithFlags(s, flags);
}

cudaError_t __real_cudaStreamCreateWithPriority(cudaStream_t *s, unsigned flags, int priority);
cudaError_t __wrap_cudaStreamCreateWithPriority(cudaStream_t *s, unsigned flags, int priority)
{
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

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, DDP_MPI_THREAD_LEVEL, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    log_init(g_rank, "test");
    const char *what = argc > 1 ? argv[1] : "";
    static const struct {
        const char *name;
        void (*run)(void);
    } scenarios[] = {{"priority", scenario_priority}};
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
