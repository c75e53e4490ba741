/* bench_colls.c — what the benchmark measures: the per-collective descriptors (element counts,
 * bus bandwidth factors, inputs, exact expected results, the comm.h call) and the check of a
 * row's results. The harness that times and checks is bench_main.c; the command line is
 * bench_opts.c. Nothing here talks to MPI or prints. */
#include "bench_colls.h"

#include <math.h>
#include <string.h>

#include "runtime/base/half.h"

/* ---- element access on host staging buffers ---- */

/* 0xA5 bytes: a non-integer in every float type, -91 / 165 / huge in the integer types, all
 * outside what the generator below can produce or reduce to. */
void bench_fill_sentinel(void *buf, size_t bytes) { memset(buf, 0xA5, bytes); }

/* ---- inputs and exact results ---- */

static bool is_unsigned(comm_dtype dt) { return dt == DT_UINT8 || dt == DT_UINT64; }

/* A value in [0, m) hashed from (seed, rank, i), with no pattern in rank or index: inputs linear in
 * the rank would cancel in groups (with (3k mod 5) every 5 ranks sum to 0, so at 5, 10, ... ranks
 * every expected sum is 0 and at 6, 11, ... rank 0's input: a collective writing zeros or one
 * rank's data would pass), and inputs periodic in the index make blocks alike (a reduce-scatter
 * handing out the wrong block would pass). splitmix64's finaliser: the checker draws ranks x
 * elements of these. */
static unsigned draw(const bench_row *r, int rank, size_t i, unsigned m)
{
    uint64_t h = (uint64_t)i * 0x9E3779B97F4A7C15u ^ (uint64_t)(rank + 2) * 0xC2B2AE3D27D4EB4Fu ^
                 ((uint64_t)r->seed + 1) * 0x165667B19E3779F9u;
    h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9u;
    h = (h ^ (h >> 27)) * 0x94D049BB133111EBu;
    return (unsigned)((h ^ (h >> 31)) % m);
}

/* How many ranks' inputs a sum of r's dtype takes: a sum of [-2, 2] stays exact and away from the
 * sentinel (int8's -91, uint8's 165) over 31 terms in int8, 64 in uint8 and bfloat16 (integers up to
 * 256), 512 in half, and over any rank count in the wider types. */
static int sum_terms(const bench_row *r)
{
    switch (r->dt) {
    case DT_INT8: return 31;
    case DT_UINT8:
    case DT_BFLOAT16: return 64;
    case DT_HALF: return 512;
    default: return r->ranks;
    }
}

/* Whether rank's input counts in element i's sum: every rank's up to sum_terms ranks, past that
 * sum_terms consecutive ranks' (mod the rank count) from one drawn per element, the others 0. */
static bool in_sum(const bench_row *r, int rank, size_t i)
{
    int terms = sum_terms(r);
    if (r->ranks <= terms)
        return true;
    int first = (int)draw(r, -2, i, (unsigned)r->ranks);
    return (rank - first + r->ranks) % r->ranks < terms;
}

/* Rank r's input element i: a base drawn per element plus a value drawn per rank, so that over
 * many ranks results still differ from element to element (the extremes of inputs drawn from one
 * range would all be its ends, integer averages all 0). Small integers, so that sums of [-2, 2]
 * (unsigned: [0, 2]) over in_sum's ranks stay exact in every type, whatever the rank count (past
 * sum_terms, integer averages are mostly 0: they check little there); min and max in [-4, 4];
 * for prod exactly one rank (drawn per element) contributes a 2 and the rest ±1, so products are
 * ±1 or ±2 whatever the rank count. */
static double input(const bench_row *r, int rank, size_t i)
{
    bool s = !is_unsigned(r->dt);
    if (!r->coll->reduction)
        return (double)draw(r, rank, i, 101) - (s ? 50 : 0);
    switch (r->op) {
    case OP_PROD: return (int)draw(r, -1, i, (unsigned)r->ranks) == rank ? 2 : (s && draw(r, rank, i, 3) == 0 ? -1 : 1);
    case OP_MIN:
    case OP_MAX: return (double)(draw(r, -1, i, 7) + draw(r, rank, i, 3)) - (s ? 4 : 0);
    default:
        if (!in_sum(r, rank, i))
            return 0;
        return s ? (double)(draw(r, -1, i, 3) + draw(r, rank, i, 3)) - 2 : draw(r, -1, i, 2) + draw(r, rank, i, 2);
    }
}

/* Every rank's input element i combined by r->op; avg divides the exact sum as the dtype does
 * (floating types: one correctly rounded division; integers: truncation toward zero). */
static double reduced(const bench_row *r, size_t i)
{
    double acc = input(r, 0, i);
    for (int k = 1; k < r->ranks; k++) {
        double v = input(r, k, i);
        switch (r->op) {
        case OP_PROD: acc *= v; break;
        case OP_MIN: acc = fmin(acc, v); break;
        case OP_MAX: acc = fmax(acc, v); break;
        default: acc += v; break;
        }
    }
    if (r->op != OP_AVG)
        return acc;
    float q = (float)acc / (float)r->ranks;
    switch (r->dt) {
    case DT_FLOAT: return q;
    case DT_DOUBLE: return acc / r->ranks;
    case DT_HALF: return half_to_float(float_to_half(q));
    case DT_BFLOAT16: return bf16_to_float(float_to_bf16(q));
    default: return trunc(acc / r->ranks);
    }
}

static void fill_inputs(const bench_row *r, void *buf, size_t first, size_t n)
{
    for (size_t i = 0; i < n; i++)
        comm_dtype_store(buf, first + i, r->dt, input(r, r->rank, i));
}

static size_t esz(const bench_row *r) { return comm_dtype_size(r->dt); }
static size_t all_blocks(const bench_row *r) { return r->count * (size_t)r->ranks; }

/* ---- bus bandwidth factors (nccl-tests' definitions) ---- */

static double bw_allreduce(int n) { return 2.0 * (n - 1) / n; }
static double bw_blocks(int n) { return (double)(n - 1) / n; }
static double bw_one(int n) { (void)n; return 1.0; }

/* ---- one count per rank, result count per rank: allreduce, reduce, sendrecv ---- */

static void elems_same(const bench_row *r, size_t *send, size_t *recv) { *send = *recv = r->count; }

static void init_same(const bench_row *r, bool in_place, void *send, void *recv)
{
    if (!in_place)
        bench_fill_sentinel(recv, r->count * esz(r));
    fill_inputs(r, in_place ? recv : send, 0, r->count);
}

static void checked_all(const bench_row *r, bool in_place, size_t *first, size_t *n)
{
    size_t s, v;
    (void)in_place;
    r->coll->elems(r, &s, &v);
    *first = 0;
    *n = v;
}

static double expect_reduced(const bench_row *r, size_t j) { return reduced(r, j); }

static int run_allreduce(comm *c, const bench_row *r, bool in_place, void *send, void *recv, ddp_err *err)
{
    return c->ops->allreduce(c, in_place ? recv : send, recv, r->count, r->dt, r->op, NULL, err);
}

static int run_reduce(comm *c, const bench_row *r, bool in_place, void *send, void *recv, ddp_err *err)
{
    return c->ops->reduce(c, in_place ? recv : send, recv, r->count, r->dt, r->op, r->root, NULL, err);
}

static void checked_root(const bench_row *r, bool in_place, size_t *first, size_t *n)
{
    (void)in_place;
    *first = 0;
    *n = r->rank == r->root ? r->count : 0; /* other ranks' receive buffers mean nothing */
}

static int run_sendrecv(comm *c, const bench_row *r, bool in_place, void *send, void *recv, ddp_err *err)
{
    int to = (r->rank + 1) % r->ranks, from = (r->rank + r->ranks - 1) % r->ranks;
    return c->ops->sendrecv(c, in_place ? recv : send, to, recv, from, r->count, r->dt, NULL, err);
}

static double expect_sendrecv(const bench_row *r, size_t j) { return input(r, (r->rank + r->ranks - 1) % r->ranks, j); }

/* ---- broadcast: one buffer, so both columns measure the same in-place operation ---- */

static void elems_bcast(const bench_row *r, size_t *send, size_t *recv)
{
    *send = 0;
    *recv = r->count;
}

static void init_bcast(const bench_row *r, bool in_place, void *send, void *recv)
{
    (void)in_place, (void)send;
    bench_fill_sentinel(recv, r->count * esz(r));
    if (r->rank == r->root)
        fill_inputs(r, recv, 0, r->count);
}

static int run_bcast(comm *c, const bench_row *r, bool in_place, void *send, void *recv, ddp_err *err)
{
    (void)in_place, (void)send;
    return c->ops->broadcast(c, recv, r->count, r->dt, r->root, NULL, err);
}

static double expect_bcast(const bench_row *r, size_t j) { return input(r, r->root, j); }

/* ---- allgather: count in, count*n out; in place the input is block `rank` of the output ---- */

static void elems_allgather(const bench_row *r, size_t *send, size_t *recv)
{
    *send = r->count;
    *recv = all_blocks(r);
}

static void init_allgather(const bench_row *r, bool in_place, void *send, void *recv)
{
    bench_fill_sentinel(recv, all_blocks(r) * esz(r));
    if (in_place)
        fill_inputs(r, recv, (size_t)r->rank * r->count, r->count);
    else
        fill_inputs(r, send, 0, r->count);
}

static int run_allgather(comm *c, const bench_row *r, bool in_place, void *send, void *recv, ddp_err *err)
{
    const void *in = in_place ? (char *)recv + (size_t)r->rank * r->count * esz(r) : send;
    return c->ops->allgather(c, in, recv, r->count, r->dt, NULL, err);
}

static double expect_allgather(const bench_row *r, size_t j) { return input(r, (int)(j / r->count), j % r->count); }

/* ---- reducescatter: count*n in, count out; in place the output is block `rank` of the input ---- */

static void elems_reducescatter(const bench_row *r, size_t *send, size_t *recv)
{
    *send = all_blocks(r);
    *recv = r->count;
}

static void init_blocks_in(const bench_row *r, bool in_place, void *send, void *recv)
{
    size_t n_send, n_recv;
    r->coll->elems(r, &n_send, &n_recv);
    if (!in_place)
        bench_fill_sentinel(recv, n_recv * esz(r));
    fill_inputs(r, in_place ? recv : send, 0, all_blocks(r));
}

static size_t rs_offset(const bench_row *r, bool in_place) { return in_place ? (size_t)r->rank * r->count : 0; }

static int run_reducescatter(comm *c, const bench_row *r, bool in_place, void *send, void *recv, ddp_err *err)
{
    void *out = (char *)recv + rs_offset(r, in_place) * esz(r);
    return c->ops->reducescatter(c, in_place ? recv : send, out, r->count, r->dt, r->op, NULL, err);
}

static void checked_reducescatter(const bench_row *r, bool in_place, size_t *first, size_t *n)
{
    *first = rs_offset(r, in_place);
    *n = r->count;
}

static double expect_reducescatter(const bench_row *r, size_t j) { return reduced(r, (size_t)r->rank * r->count + j); }

/* ---- alltoall: count*n in and out ---- */

static void elems_alltoall(const bench_row *r, size_t *send, size_t *recv) { *send = *recv = all_blocks(r); }

static int run_alltoall(comm *c, const bench_row *r, bool in_place, void *send, void *recv, ddp_err *err)
{
    return c->ops->alltoall(c, in_place ? recv : send, recv, r->count, r->dt, NULL, err);
}

static double expect_alltoall(const bench_row *r, size_t j)
{
    return input(r, (int)(j / r->count), (size_t)r->rank * r->count + j % r->count);
}

static const bench_coll colls[] = {
    {"allreduce", true, false, false, bw_allreduce, elems_same, init_same, run_allreduce, checked_all, expect_reduced,
     COPIES_NEVER},
    {"allgather", false, false, true, bw_blocks, elems_allgather, init_allgather, run_allgather, checked_all,
     expect_allgather, COPIES_NEVER},
    {"reducescatter", true, false, true, bw_blocks, elems_reducescatter, init_blocks_in, run_reducescatter,
     checked_reducescatter, expect_reducescatter, COPIES_NEVER},
    {"broadcast", false, true, false, bw_one, elems_bcast, init_bcast, run_bcast, checked_all, expect_bcast, COPIES_NEVER},
    {"reduce", true, true, false, bw_one, elems_same, init_same, run_reduce, checked_root, expect_reduced, COPIES_NEVER},
    {"alltoall", false, false, true, bw_blocks, elems_alltoall, init_blocks_in, run_alltoall, checked_all, expect_alltoall,
     COPIES_UNDER_NCCL},
    {"sendrecv", false, false, false, bw_one, elems_same, init_same, run_sendrecv, checked_all, expect_sendrecv, COPIES_ALWAYS},
};

const bench_coll *bench_find(const char *name)
{
    for (size_t i = 0; i < sizeof colls / sizeof colls[0]; i++)
        if (strcmp(colls[i].name, name) == 0)
            return &colls[i];
    return NULL;
}

const char *bench_coll_names(void) { return "allreduce allgather reducescatter broadcast reduce alltoall sendrecv"; }

/* How far a pre-multiplied average of inputs in [-2, 2] may land from the mean rounded to the type:
 * the factor 1/n, each product and each of the n - 1 sums round once (u each), the rounded mean
 * once more, on at most (sum of |inputs|) / n = 2; 1 % more for the second-order terms. */
static double avg_slack(const bench_row *r)
{
    if (r->op != OP_AVG || !r->avg_premultiplies)
        return 0; /* integers (u 0): NCCL divides the sum, exactly as expected */
    return (r->ranks + 2) * comm_dtype_unit_roundoff(r->dt) * 2 * 1.01;
}

size_t bench_count_wrong(const bench_row *r, bool in_place, const void *recv)
{
    size_t first, n, wrong = 0;
    r->coll->checked(r, in_place, &first, &n);
    double slack = avg_slack(r);
    size_t size = esz(r);
    for (size_t j = 0; j < n; j++) {
        /* the sentinel is a tiny number in the float types: within a slack of a zero mean */
        const unsigned char *e = (const unsigned char *)recv + (first + j) * size;
        bool untouched = true;
        for (size_t b = 0; b < size; b++)
            untouched = untouched && e[b] == 0xA5;
        double got = comm_dtype_load(recv, first + j, r->dt);
        wrong += untouched || !(fabs(got - r->coll->expected(r, j)) <= slack);
    }
    return wrong;
}
