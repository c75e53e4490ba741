/* test_comm.c — the MPI communicator (collectives/comm.h) under real mpirun, any number of ranks.
 *
 * Every collective, blocking and non-blocking, out of place and in place, every dtype, counts
 * from 1 element up (sizes that do not divide by the rank count), compared element by element with
 * a reference computed here in double from the known inputs. With DDP_COMM_MAX_CHUNK set the same
 * cases go through the chunked path; mpi_call_limit.c fails any all-gather, all-to-all or
 * reduce-scatter call whose blocks together pass the limit (401 elements a block at np 3 do). `--big` adds one 64 MiB all-reduce. Also: the half/bfloat16
 * conversions against the compiler's _Float16 and known bit patterns, identity fields, MPI errors
 * reported with file:line and MPI's message, and a bad DDP_COMM_MAX_CHUNK. With a deadline, a rank busy
 * for several of them that answers it is holds no verdict (without its answers the job would abort).
 * `--busy-and-hung` (np 3, tests/collectives/test_comm_busy.sh) ends in a verdict: a busy rank does
 * not hold back the naming of a hung one; the collective waited for is named with its label at
 * its issue, cleared before the wait as the reducer does. */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/check.h"
#include "collectives/comm.h"
#include "runtime/base/clock.h"
#include "runtime/base/half.h"

enum coll { C_ALLREDUCE, C_REDUCE, C_BROADCAST, C_ALLGATHER, C_REDUCESCATTER, C_ALLTOALL, C_SENDRECV, C_COUNT };
static const char *const coll_name[C_COUNT] = {"allreduce", "reduce", "broadcast", "allgather", "reducescatter", "alltoall", "sendrecv"};

static int g_rank, g_size;

static bool is_unsigned(comm_dtype dt) { return dt == DT_UINT8 || dt == DT_UINT64; }

/* Rank r's input at index i: small integers, exact in every dtype, and for prod at most one
 * factor 2 per element so products stay in {±1, ±2}. */
static double input(int r, size_t i, comm_op op, bool reduction, comm_dtype dt)
{
    bool s = !is_unsigned(dt);
    if (!reduction)
        return (double)((i * 13 + (size_t)r * 29) % 101) - (s ? 50 : 0);
    switch (op) {
    case OP_PROD: return i % (size_t)g_size == (size_t)r ? 2 : (s && (i + (size_t)r) % 3 == 0 ? -1 : 1);
    case OP_MIN:
    case OP_MAX: return (double)((i * 5 + (size_t)r * 11) % 9) - (s ? 4 : 0);
    default: return (double)((i * 7 + (size_t)r * 3) % 5) - (s ? 2 : 0);
    }
}

/* The reduction over all ranks of input(·, i); avg divides the exact sum the way the dtype does. */
static double reduced(size_t i, comm_op op, comm_dtype dt)
{
    double acc = input(0, i, op, true, dt);
    for (int r = 1; r < g_size; r++) {
        double v = input(r, i, op, true, dt);
        acc = op == OP_PROD ? acc * v : op == OP_MIN ? fmin(acc, v) : op == OP_MAX ? fmax(acc, v) : acc + v;
    }
    if (op != OP_AVG)
        return acc;
    switch (dt) {
    case DT_FLOAT: return (float)acc / (float)g_size;
    case DT_DOUBLE: return acc / g_size;
    case DT_HALF: return (float)(_Float16)((float)acc / (float)g_size);
    case DT_BFLOAT16: return bf16_to_float(float_to_bf16((float)acc / (float)g_size));
    default: return trunc(acc / g_size);
    }
}

typedef struct tcase {
    enum coll coll;
    comm_dtype dt;
    comm_op op;
    size_t count;
    bool in_place, nonblocking;
} tcase;

static int run(comm *c, const tcase *t, void *send, void *recv, ddp_err *err)
{
    comm_req *req = NULL, **rq = t->nonblocking ? &req : NULL;
    int to = (g_rank + 1) % g_size, from = (g_rank + g_size - 1) % g_size, root = g_size - 1;
    int rc;
    switch (t->coll) {
    case C_ALLREDUCE: rc = c->ops->allreduce(c, send, recv, t->count, t->dt, t->op, rq, err); break;
    case C_REDUCE: rc = c->ops->reduce(c, send, recv, t->count, t->dt, t->op, root, rq, err); break;
    case C_BROADCAST: rc = c->ops->broadcast(c, recv, t->count, t->dt, g_size / 2, rq, err); break;
    case C_ALLGATHER: rc = c->ops->allgather(c, send, recv, t->count, t->dt, rq, err); break;
    case C_REDUCESCATTER: rc = c->ops->reducescatter(c, send, recv, t->count, t->dt, t->op, rq, err); break;
    case C_ALLTOALL: rc = c->ops->alltoall(c, send, recv, t->count, t->dt, rq, err); break;
    default: rc = c->ops->sendrecv(c, send, to, recv, from, t->count, t->dt, rq, err); break;
    }
    if (rc || !req)
        return rc;
    bool done = false;
    while (!done && !rc)
        rc = c->ops->test(c, req, &done, err);
    return rc ? rc : c->ops->wait(c, req, err);
}

/* Input elements and result elements of this rank, nccl-tests' buffer layout. */
static void sizes(const tcase *t, size_t *n_send, size_t *n_recv)
{
    size_t n = t->count, all = n * (size_t)g_size;
    *n_send = *n_recv = n;
    if (t->coll == C_ALLGATHER)
        *n_recv = all;
    if (t->coll == C_REDUCESCATTER || t->coll == C_ALLTOALL)
        *n_send = all;
    if (t->coll == C_ALLTOALL)
        *n_recv = all;
}

static double expected(const tcase *t, size_t j)
{
    size_t n = t->count;
    int from = (g_rank + g_size - 1) % g_size;
    switch (t->coll) {
    case C_ALLREDUCE:
    case C_REDUCE: return reduced(j, t->op, t->dt);
    case C_BROADCAST: return input(g_size / 2, j, t->op, false, t->dt);
    case C_ALLGATHER: return input((int)(j / n), j % n, t->op, false, t->dt);
    case C_REDUCESCATTER: return reduced((size_t)g_rank * n + j, t->op, t->dt);
    case C_ALLTOALL: return input((int)(j / n), (size_t)g_rank * n + j % n, t->op, false, t->dt);
    default: return input(from, j, t->op, false, t->dt);
    }
}

static void check_case(comm *c, const tcase *t)
{
    size_t esz = comm_dtype_size(t->dt), n_send, n_recv;
    sizes(t, &n_send, &n_recv);
    bool reduction = t->coll == C_ALLREDUCE || t->coll == C_REDUCE || t->coll == C_REDUCESCATTER;
    size_t n_buf = n_send > n_recv ? n_send : n_recv;
    char *send = malloc(n_buf * esz), *recv = malloc(n_buf * esz);
    memset(recv, 0xA5, n_buf * esz); /* never an expected value in any dtype */
    /* in place: one buffer, the input where nccl-tests puts it */
    char *in = t->in_place ? recv : send, *out = recv;
    size_t in_off = t->in_place && t->coll == C_ALLGATHER ? (size_t)g_rank * t->count : 0;
    for (size_t i = 0; i < (t->coll == C_BROADCAST ? 0 : n_send); i++)
        comm_dtype_store(in, in_off + i, t->dt, input(g_rank, i, t->op, reduction, t->dt));
    if (t->coll == C_BROADCAST && g_rank == g_size / 2)
        for (size_t i = 0; i < t->count; i++)
            comm_dtype_store(recv, i, t->dt, input(g_rank, i, t->op, false, t->dt));
    if (t->in_place && t->coll == C_REDUCESCATTER)
        out = recv + (size_t)g_rank * t->count * esz;
    const void *send_arg = t->coll == C_ALLGATHER && t->in_place ? recv + in_off * esz : in;
    ddp_err err = {0};
    int rc = run(c, t, (void *)send_arg, out, &err);
    CHECK(rc == 0, "%s: %s", coll_name[t->coll], err.msg);
    bool checked = !(t->coll == C_REDUCE && g_rank != g_size - 1);
    size_t n_check = t->coll == C_REDUCESCATTER ? t->count : n_recv, wrong = 0, first = 0;
    for (size_t j = 0; checked && j < n_check; j++)
        if (comm_dtype_load(out, j, t->dt) != expected(t, j) && wrong++ == 0)
            first = j;
    CHECK(wrong == 0, "rank %d %s %s %s count %zu %s %s: %zu wrong, first [%zu] = %g expected %g", g_rank,
          coll_name[t->coll], comm_dtype_name(t->dt), comm_op_name(t->op), t->count,
          t->in_place ? "in-place" : "out-of-place", t->nonblocking ? "non-blocking" : "blocking", wrong, first,
          comm_dtype_load(out, first, t->dt), expected(t, first));
    free(send);
    free(recv);
}

static void test_all_collectives(comm *c)
{
    const size_t counts[] = {1, 7, 401, 1003, 65537};
    for (int dt = 0; dt < DT_COUNT; dt++)
        for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++)
            for (int co = 0; co < C_COUNT; co++)
                for (int mode = 0; mode < 4; mode++) {
                    bool reduction = co == C_ALLREDUCE || co == C_REDUCE || co == C_REDUCESCATTER;
                    int n_ops = reduction && co != C_REDUCE ? OP_COUNT : 1;
                    for (int op = 0; op < n_ops; op++) {
                        tcase t = {(enum coll)co, (comm_dtype)dt, co == C_REDUCE ? (comm_op)((k + dt) % OP_COUNT) : (comm_op)op,
                                   counts[k], mode & 1, mode >> 1};
                        if (t.in_place && co == C_BROADCAST)
                            continue; /* broadcast has one buffer: always in place */
                        check_case(c, &t);
                    }
                }
}

static void test_big_allreduce(comm *c)
{
    size_t n = (64u << 20) / sizeof(float);
    for (int nb = 0; nb < 2; nb++) {
        tcase t = {C_ALLREDUCE, DT_FLOAT, OP_SUM, n, false, nb == 1};
        check_case(c, &t);
    }
}

static void test_fp16_conversions(void)
{
    int bad = 0;
    for (uint32_t h = 0; h < 0x10000; h++) {
        _Float16 ref;
        uint16_t hb = (uint16_t)h;
        memcpy(&ref, &hb, 2);
        float f = half_to_float(hb);
        if (!(f == (float)ref || (isnan(f) && isnan((float)ref))))
            bad++;
        else if (!isnan(f) && float_to_half(f) != hb)
            bad++;
    }
    CHECK_EQ_INT(bad, 0);
    /* float -> half rounding, including ties, subnormals and overflow, against the compiler */
    bad = 0;
    for (uint32_t u = 0; u < 0xffffffffu - 9999u; u += 9973u) {
        float f = fp16_bits_float(u);
        if (isnan(f))
            continue;
        _Float16 ref = (_Float16)f;
        uint16_t rb;
        memcpy(&rb, &ref, 2);
        if (float_to_half(f) != rb && bad++ < 3)
            fprintf(stderr, "float_to_half(%a) = %04x, expected %04x\n", f, float_to_half(f), rb);
    }
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(float_to_bf16(1.0f + 0x1p-8f), 0x3f80);      /* tie -> even (down) */
    CHECK_EQ_INT(float_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);  /* tie -> even (up) */
    CHECK_EQ_INT(float_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
    CHECK(bf16_to_float(0xc040) == -3.0f, "bf16 0xc040 = %g", bf16_to_float(0xc040));
    CHECK(isnan(bf16_to_float(float_to_bf16(NAN))), "bf16 NaN stays NaN");
}

static void test_identity_and_errors(comm *c)
{
    int r, n, len;
    char host[MPI_MAX_PROCESSOR_NAME];
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Get_processor_name(host, &len);
    CHECK(c->rank == r && c->size == n, "rank/size %d/%d, MPI says %d/%d", c->rank, c->size, r, n);
    CHECK(c->local_size == n && c->local_rank == r, "one host: local %d/%d", c->local_rank, c->local_size);
    CHECK(strcmp(c->host, host) == 0, "host %s vs %s", c->host, host);
    CHECK(strcmp(c->ops->name, "mpi") == 0, "backend name %s", c->ops->name);

    ddp_err err = {0};
    int x = 0;
    int rc = c->ops->broadcast(c, &x, 1, DT_INT32, c->size, NULL, &err); /* no such root */
    CHECK(rc == DDP_ERUNTIME, "bad root gives %d", rc);
    CHECK_STR_CONTAINS(err.msg, "comm_mpi.c:");
    CHECK_STR_CONTAINS(err.msg, "MPI_Bcast: MPI_ERR_ROOT");
    rc = c->ops->allreduce(c, &x, &x, 1, DT_COUNT, OP_SUM, NULL, &err);
    CHECK(rc == DDP_EUSAGE, "bad dtype gives %d", rc);
    CHECK(c->ops->barrier(c, &err) == 0, "communicator still usable after a reported error: %s", err.msg);

    char *saved = getenv("DDP_COMM_MAX_CHUNK") ? strdup(getenv("DDP_COMM_MAX_CHUNK")) : NULL;
    setenv("DDP_COMM_MAX_CHUNK", "12abc", 1);
    comm *bad = NULL;
    rc = comm_mpi_create(&bad, &err);
    CHECK(rc == DDP_EUSAGE && bad == NULL, "bad DDP_COMM_MAX_CHUNK gives %d", rc);
    CHECK_STR_CONTAINS(err.msg, "DDP_COMM_MAX_CHUNK");
    if (saved)
        setenv("DDP_COMM_MAX_CHUNK", saved, 1);
    else
        unsetenv("DDP_COMM_MAX_CHUNK");
    free(saved);
}

/* Rank 0 busy outside the collectives for 3.5 deadlines of 1 s, answering that it is (every 0.25 s),
 * while the others wait in a barrier: it completes. Without the answers their deadline would pass at
 * 1 s and MPI_Abort end the job 1 s later, failing the test. Without a deadline comm_mpi_busy does
 * nothing. */
static void test_busy(comm *c)
{
    ddp_err err = {0};
    comm_mpi_busy(c, "no deadline yet");
    int rc = comm_mpi_set_timeout(c, 1.0, &err);
    CHECK(rc == DDP_OK, "comm_mpi_set_timeout: %s", err.msg);
    rc = c->ops->barrier(c, &err); /* the ranks' clocks start within moments of each other */
    CHECK(rc == DDP_OK, "barrier: %s", err.msg);
    double t0 = monotonic_s();
    for (double end = t0 + 3.5; c->rank == 0 && monotonic_s() < end;) {
        comm_mpi_busy(c, "test work");
        nanosleep(&(struct timespec){0, 250000000L}, NULL);
    }
    rc = c->ops->barrier(c, &err);
    CHECK(rc == DDP_OK, "barrier after a busy rank 0: %s", err.msg);
    CHECK(monotonic_s() - t0 >= (c->rank == 0 ? 3.5 : 3.4), "the barrier waited for rank 0 (%.2f s)",
          monotonic_s() - t0);
    comm_mpi_set_timeout(c, 0, &err);
}

/* Rank 0 busy for 20 s, answering that it is; rank 1 busy too for 2.5 s, answering, then hung (asleep
 * outside MPI for a minute); rank 2 in a barrier under a deadline of 1 s. Rank 2's first deadline
 * starts over (both answer busy; rank 1 for 1.5 s past it, should the ranks leave the first barrier
 * apart); its verdict names rank 1 a round or two later, as rank 1's answer of a round before says
 * nothing of the next, and lists rank 0 as busy. Returns only when no verdict ended the job. */
static void busy_and_hung(comm *c)
{
    ddp_err err = {0};
    CHECK(comm_mpi_set_timeout(c, 1.0, &err) == DDP_OK, "comm_mpi_set_timeout: %s", err.msg);
    CHECK(c->ops->barrier(c, &err) == DDP_OK, "barrier: %s", err.msg);
    double t0 = monotonic_s(), busy_s = c->rank == 0 ? 20 : c->rank == 1 ? 60 : 0;
    for (double now = t0; now < t0 + busy_s; now = monotonic_s()) {
        if (c->rank == 0 || now < t0 + 2.5)
            comm_mpi_busy(c, c->rank == 0 ? "test work" : "short work");
        nanosleep(&(struct timespec){0, 250000000L}, NULL);
    }
    float x = 1.0f;
    comm_req *req = NULL;
    snprintf(c->label, sizeof c->label, "bucket 7 of 9");
    int rc = c->ops->allreduce(c, &x, &x, 1, DT_FLOAT, OP_SUM, &req, &err);
    c->label[0] = '\0';
    if (rc == DDP_OK)
        c->ops->wait(c, req, &err);
    CHECK(false, "no verdict ended the job: rank %d left the all-reduce", c->rank);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    comm *c = NULL;
    ddp_err err = {0};
    int rc = comm_mpi_create(&c, &err);
    CHECK(rc == 0, "comm_mpi_create: %s", err.msg);
    if (rc) {
        MPI_Finalize();
        return check_done("test_comm");
    }
    g_rank = c->rank;
    g_size = c->size;
    if (argc > 1 && strcmp(argv[1], "--busy-and-hung") == 0) {
        busy_and_hung(c);
    } else {
        test_fp16_conversions();
        test_identity_and_errors(c);
        test_all_collectives(c);
        if (argc > 1 && strcmp(argv[1], "--big") == 0)
            test_big_allreduce(c);
        if (g_size > 1)
            test_busy(c);
    }
    c->ops->destroy(c);
    int failed = check_done("test_comm");
    /* every rank's verdict decides: a failure anywhere fails the test */
    int any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return any;
}
