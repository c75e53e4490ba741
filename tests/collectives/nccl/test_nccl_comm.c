/* test_nccl_comm.c — the NCCL communicator (collectives/nccl/comm_nccl.c) over the emulated build's
 * NCCL shim, against the MPI communicator, under real mpirun.
 *
 * Every collective of comm.h x every dtype x every reduction x blocking/non-blocking x out of
 * place/in place x counts 0, 1, 7, 401, 1500, 3001 (past DDP_COMM_MAX_CHUNK when the chunked run
 * sets it, or at np 3 a call's blocks together, which mpi_call_limit.c referees): the same inputs go through comm_mpi on host buffers (itself checked against exact
 * references by test_comm) and through comm_nccl on cudaMalloc'd buffers, and the whole working
 * region must come back byte for byte identical. Inputs are small integers, exact in every type,
 * so any difference is a wrong element, not rounding — except a floating average, where NCCL
 * multiplies by 1/size rounded to the type before summing (comm.h): within avg_slack of MPI's. Also: barrier, identity fields, and the
 * rejection of bad dtype/op values and of buffers that are not the GPU's memory. Run with ddp.debug
 * on (argv[1] == "debug") the fingerprint cross-check runs before every collective and must stay
 * silent; with argv[1] == "single-stream" the collectives run on the compute stream itself (the
 * benchmark's mode). And a collective left in flight while the watchdog polls it. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <mpi.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/check.h"
#include "collectives/comm.h"
#include "runtime/base/clock.h"
#include "runtime/base/half.h"
#include "runtime/base/log.h"
#include "runtime/base/mpi_thread.h"

enum coll { C_ALLREDUCE, C_REDUCE, C_BROADCAST, C_ALLGATHER, C_REDUCESCATTER, C_ALLTOALL, C_SENDRECV, C_COUNT };
static const char *const coll_name[C_COUNT] = {"allreduce", "reduce", "broadcast", "allgather",
                                               "reducescatter", "alltoall", "sendrecv"};
static int g_rank, g_size;
static cudaStream_t g_stream;

static bool is_reduction(enum coll k) { return k == C_ALLREDUCE || k == C_REDUCE || k == C_REDUCESCATTER; }

/* Small integers, exact in every type; products stay within {-8..8}. */
static double input(size_t i, comm_op op, comm_dtype dt)
{
    bool unsig = dt == DT_UINT8 || dt == DT_UINT64;
    if (op == OP_PROD)
        return (i + (size_t)g_rank) % 4 == 0 ? 2 : (!unsig && (i * 3 + (size_t)g_rank) % 5 == 0 ? -1 : 1);
    return (double)((i * 7 + (size_t)g_rank * 11) % 9) - (unsig ? 0 : 4);
}

/* Where send and recv live in one working region of `total` elements; the result is the
 * `out` elements at recv. */
typedef struct layout {
    size_t send, recv, total, out;
} layout;

static size_t result_len(enum coll k, size_t n)
{
    switch (k) {
    case C_REDUCE: return g_rank == g_size - 1 ? n : 0;
    case C_ALLGATHER: case C_ALLTOALL: return (size_t)g_size * n;
    default: return n;
    }
}

static layout at(size_t send, size_t recv, size_t total) { return (layout){.send = send, .recv = recv, .total = total}; }

static layout place(enum coll k, size_t n, bool in_place)
{
    size_t s = (size_t)g_size, r = (size_t)g_rank;
    switch (k) {
    case C_BROADCAST: return at(0, 0, n);
    case C_ALLGATHER: return in_place ? at(r * n, 0, s * n) : at(0, n, (s + 1) * n);
    case C_REDUCESCATTER: return in_place ? at(0, r * n, s * n) : at(0, s * n, (s + 1) * n);
    case C_ALLTOALL: return in_place ? at(0, 0, s * n) : at(0, s * n, 2 * s * n);
    default: return in_place ? at(0, 0, n) : at(0, n, 2 * n);
    }
}

static layout layout_of(enum coll k, size_t n, bool in_place)
{
    layout l = place(k, n, in_place);
    l.out = result_len(k, n);
    return l;
}

static int run(comm *c, enum coll k, char *base, const layout *l, size_t n, comm_dtype dt, comm_op op, bool blocking,
               ddp_err *err)
{
    size_t esz = comm_dtype_size(dt);
    void *send = base + l->send * esz, *recv = base + l->recv * esz;
    comm_req *req = NULL, **rp = blocking ? NULL : &req;
    int to = (g_rank + 1) % g_size, from = (g_rank + g_size - 1) % g_size, rc;
    switch (k) {
    case C_ALLREDUCE: rc = c->ops->allreduce(c, send, recv, n, dt, op, rp, err); break;
    case C_REDUCE: rc = c->ops->reduce(c, send, recv, n, dt, op, g_size - 1, rp, err); break;
    case C_BROADCAST: rc = c->ops->broadcast(c, send, n, dt, 1 % g_size, rp, err); break;
    case C_ALLGATHER: rc = c->ops->allgather(c, send, recv, n, dt, rp, err); break;
    case C_REDUCESCATTER: rc = c->ops->reducescatter(c, send, recv, n, dt, op, rp, err); break;
    case C_ALLTOALL: rc = c->ops->alltoall(c, send, recv, n, dt, rp, err); break;
    default: rc = c->ops->sendrecv(c, send, to, recv, from, n, dt, rp, err); break;
    }
    if (rc != DDP_OK || blocking)
        return rc;
    /* the peers' devices finish in their own time: poll for up to a minute, as a GPU would be */
    bool done = false;
    for (double until = monotonic_s() + 60; !done && rc == DDP_OK && monotonic_s() < until; sched_yield())
        rc = c->ops->test(c, req, &done, err);
    CHECK(done, "%s: comm_test never reported completion", coll_name[k]);
    int rc2 = c->ops->wait(c, req, err);
    return rc != DDP_OK ? rc : rc2;
}

/* How far NCCL's average of inputs in [-4, 4] may be from MPI's (the sum, divided once, rounded
 * to the type): the factor 1/size, each product, each of the size - 1 sums and MPI's result round
 * once each (u apiece) on a mean of at most 4; 1 % more for the second-order terms. 0 elsewhere. */
static double avg_slack(comm_dtype dt, comm_op op)
{
    return op == OP_AVG ? (g_size + 2) * comm_dtype_unit_roundoff(dt) * 4 * 1.01 : 0;
}

static bool same_result(const char *got, const char *want, size_t i, comm_dtype dt, comm_op op)
{
    double slack = avg_slack(dt, op);
    if (slack == 0)
        return memcmp(got + i * comm_dtype_size(dt), want + i * comm_dtype_size(dt), comm_dtype_size(dt)) == 0;
    return fabs(comm_dtype_load(got, i, dt) - comm_dtype_load(want, i, dt)) <= slack;
}

static void one_case(comm *mpi, comm *nccl, enum coll k, size_t n, comm_dtype dt, comm_op op, bool blocking, bool in_place)
{
    layout l = layout_of(k, n, in_place);
    size_t esz = comm_dtype_size(dt), bytes = (l.total ? l.total : 1) * esz;
    char *host = malloc(bytes), *got = malloc(bytes), *dev = NULL;
    CHECK(host && got && cudaMalloc((void **)&dev, bytes) == cudaSuccess, "allocating %zu bytes", bytes);
    for (size_t i = 0; i < l.total; i++)
        comm_dtype_store(host, i, dt, input(i, op, dt));
    cudaMemcpy(dev, host, l.total * esz, cudaMemcpyHostToDevice);
    ddp_err err = {0};
    int rc_mpi = run(mpi, k, host, &l, n, dt, op, blocking, &err);
    CHECK(rc_mpi == DDP_OK, "mpi %s: %s", coll_name[k], err.msg);
    int rc_nccl = run(nccl, k, dev, &l, n, dt, op, blocking, &err);
    CHECK(rc_nccl == DDP_OK, "nccl %s: %s", coll_name[k], err.msg);
    cudaStreamSynchronize(g_stream);
    cudaMemcpy(got, dev, l.total * esz, cudaMemcpyDeviceToHost);
    /* the result must equal MPI's; everything else must still hold this rank's input */
    size_t bad = 0, first = 0, stray = 0;
    for (size_t i = 0; i < l.total; i++) {
        bool result = i >= l.recv && i < l.recv + l.out;
        if (result && !same_result(got, host, i, dt, op) && bad++ == 0)
            first = i;
        if (!result) {
            char want[8];
            comm_dtype_store(want, 0, dt, input(i, op, dt));
            stray += memcmp(got + i * esz, want, esz) != 0;
        }
    }
    CHECK(bad == 0 && stray == 0, "rank %d: %s %s %s n=%zu %s %s: %zu of %zu result elements differ from MPI "
          "(first at %zu), %zu elements outside the result changed", g_rank, coll_name[k], comm_dtype_name(dt),
          is_reduction(k) ? comm_op_name(op) : "-", n, blocking ? "blocking" : "non-blocking",
          in_place ? "in place" : "out of place", bad, l.out, first, stray);
    cudaFree(dev);
    free(host);
    free(got);
}

static void all_cases(comm *mpi, comm *nccl)
{
    static const size_t counts[] = {0, 1, 7, 401, 1500, 3001};
    for (int k = 0; k < C_COUNT; k++)
        for (int dt = 0; dt < DT_COUNT; dt++)
            for (int op = 0; op < (is_reduction(k) ? OP_COUNT : 1); op++)
                for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++)
                    for (int mode = 0; mode < 4; mode++) {
                        bool in_place = mode & 1, blocking = mode & 2;
                        if (k == C_BROADCAST && !in_place)
                            continue;
                        one_case(mpi, nccl, k, counts[ci], dt, op, blocking, in_place);
                    }
}

/* A collective left in flight for longer than the watchdog's poll interval (ddp.timeout_s / 20,
 * at most 1 s): the watchdog's thread queries its completion event, which it can do only on this
 * rank's GPU. The emulator runs queued work lazily, so the collective stays pending until the
 * loop in run() drives it; a watchdog thread that never selected its device fails that query
 * (and brings the job down), as it would use device 0 on a GPU. */
static void watched_while_pending(comm *nccl)
{
    ddp_err err = {0};
    float *d = NULL;
    CHECK(cudaMalloc((void **)&d, 64 * sizeof *d) == cudaSuccess, "cudaMalloc");
    CHECK(cudaMemset(d, 0, 64 * sizeof *d) == cudaSuccess, "cudaMemset");
    comm_req *req = NULL;
    int rc = nccl->ops->allreduce(nccl, d, d, 64, DT_FLOAT, OP_SUM, &req, &err);
    CHECK(rc == DDP_OK, "allreduce: %s", err.msg);
    for (double until = monotonic_s() + 2.5; monotonic_s() < until;)
        usleep(50 * 1000);
    bool done = false;
    for (double until = monotonic_s() + 60; !done && rc == DDP_OK && monotonic_s() < until; sched_yield())
        rc = nccl->ops->test(nccl, req, &done, &err);
    CHECK(rc == DDP_OK && done, "the watched allreduce: rc %d done %d %s", rc, done, err.msg);
    CHECK(nccl->ops->wait(nccl, req, &err) == DDP_OK, "wait: %s", err.msg);
    cudaFree(d);
}

static void misuse(comm *nccl)
{
    ddp_err err = {0};
    float *d = NULL;
    cudaMalloc((void **)&d, 4 * sizeof *d);
    int rc = nccl->ops->allreduce(nccl, d, d, 4, DT_COUNT, OP_SUM, NULL, &err);
    CHECK(rc == DDP_EUSAGE, "allreduce with dtype %d returned %d", DT_COUNT, rc);
    CHECK_STR_CONTAINS(err.msg, "unknown data type");
    rc = nccl->ops->allreduce(nccl, d, d, 4, DT_FLOAT, OP_COUNT, NULL, &err);
    CHECK(rc == DDP_EUSAGE, "allreduce with op %d returned %d", OP_COUNT, rc);
    CHECK_STR_CONTAINS(err.msg, "unknown reduction");
    /* host memory where NCCL needs this GPU's memory: refused before NCCL sees it (a real NCCL 2.28
     * with one rank ran a host buffer without an error), as is a count past the allocation */
    float host[4] = {0};
    rc = nccl->ops->allreduce(nccl, host, host, 4, DT_FLOAT, OP_SUM, NULL, &err);
    CHECK(rc == DDP_EUSAGE, "allreduce of host memory returned %d", rc);
    CHECK_STR_CONTAINS(err.msg, "send buffer");
    CHECK_STR_CONTAINS(err.msg, "first byte is not CUDA memory");
    rc = nccl->ops->allreduce(nccl, d, host, 4, DT_FLOAT, OP_SUM, NULL, &err);
    CHECK(rc == DDP_EUSAGE && strstr(err.msg, "receive buffer"), "allreduce into host memory: %d %s", rc, err.msg);
#ifdef DDP_CUDA_EMULATION /* a real GPU rounds allocations up: only the emulator knows where 4 floats end */
    rc = nccl->ops->allgather(nccl, d, d, 4, DT_FLOAT, NULL, &err);
    CHECK(g_size == 1 ? rc == DDP_OK : rc == DDP_EUSAGE && strstr(err.msg, "last byte"),
          "allgather of %d x 4 floats into 4: %d %s", g_size, rc, err.msg);
    rc = nccl->ops->broadcast(nccl, d, 5, DT_FLOAT, 0, NULL, &err);
    CHECK(rc == DDP_EUSAGE, "broadcast of 5 floats from a 4-float buffer returned %d", rc);
    CHECK_STR_CONTAINS(err.msg, "last byte is not CUDA memory");
#endif
    cudaFree(d);
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, DDP_MPI_THREAD_LEVEL, &provided);
    bool debug = argc > 1 && strcmp(argv[1], "debug") == 0;
    bool single_stream = argc > 1 && strcmp(argv[1], "single-stream") == 0;
    ddp_err err = {0};
    comm *mpi = NULL, *nccl = NULL;
    CHECK(comm_mpi_create(&mpi, &err) == DDP_OK, "comm_mpi_create: %s", err.msg);
    g_rank = mpi->rank;
    g_size = mpi->size;
    log_init(g_rank, mpi->host);
    /* one (emulated) GPU per rank, as NCCL requires */
    CHECK(cudaSetDevice(mpi->local_rank) == cudaSuccess, "cudaSetDevice(%d)", mpi->local_rank);
    CHECK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking) == cudaSuccess, "compute stream");
    comm_nccl_opts o = {.compute_stream = g_stream, .device = mpi->local_rank, .timeout_s = 60, .debug = debug,
                        .single_stream = single_stream};
    int rc = comm_nccl_create(&o, &nccl, &err);
    CHECK(rc == DDP_OK, "comm_nccl_create: %s", err.msg);
    if (rc == DDP_OK) {
        CHECK(strcmp(nccl->ops->name, "nccl") == 0, "backend name %s", nccl->ops->name);
        CHECK(nccl->rank == g_rank && nccl->size == g_size, "identity %d/%d", nccl->rank, nccl->size);
        CHECK(nccl->local_size == mpi->local_size && nccl->local_rank == mpi->local_rank, "local identity");
        all_cases(mpi, nccl);
        CHECK(nccl->ops->barrier(nccl, &err) == DDP_OK, "barrier: %s", err.msg);
        watched_while_pending(nccl);
        misuse(nccl);
        nccl->ops->destroy(nccl);
    }
    mpi->ops->destroy(mpi);
    cudaStreamDestroy(g_stream);
    int status = check_done(g_rank == 0 ? "test_nccl_comm" : "test_nccl_comm (other rank)");
    int worst = status;
    MPI_Allreduce(&status, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return worst;
}
