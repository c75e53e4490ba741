/* test_bench_check.c — the benchmark's result check can fail: for every rank count from 2 to 64
 * (31 for int8, as docs/bench.md says), every reduction op and a float, a bfloat16, a signed and an unsigned integer
 * type, results that a wrong collective would produce are counted wrong by bench_count_wrong:
 *  - a constant (every element 0, or the op's extreme: what a collective that writes one value
 *    everywhere leaves, and the min of many ranks' [-4, 4] inputs);
 *  - one rank's own input (a reduce that only copied the root's buffer, an allreduce that
 *    broadcast rank 0's);
 *  - for a reduce-scatter, block 0's exact result on rank 1 (the wrong block handed out);
 *  - for an allgather, two blocks swapped;
 * while the exact result made here from every rank's inputs (the collectives' own init
 * functions) is counted right. Past those rank counts (100 to 4096 ranks), every type's exact sum
 * and average are still counted right (neither wrapped, rounded nor the sentinel), and a constant
 * or one rank's input still counted wrong as a sum. No MPI: rank r's inputs are what its init
 * writes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/check.h"
#include "launcher/bench/bench_colls.h"

enum { COUNT = 101, MAX_RANKS = 64 };

static bench_row row(const char *coll, comm_dtype dt, comm_op op, int rank, int ranks)
{
    return (bench_row){.coll = bench_find(coll), .dt = dt, .op = op, .count = COUNT, .seed = 3, .rank = rank,
                       .ranks = ranks};
}

/* Every rank's send buffer of r's collective (rank varied), as its init fills it out of place. */
static double *inputs_of(bench_row r, size_t *n_send)
{
    size_t n_recv;
    r.coll->elems(&r, n_send, &n_recv);
    size_t esz = comm_dtype_size(r.dt);
    double *all = calloc((size_t)r.ranks * *n_send, sizeof *all);
    unsigned char *send = malloc(*n_send * esz + 1), *recv = malloc(n_recv * esz + 1);
    for (int k = 0; k < r.ranks; k++) {
        bench_row rk = r;
        rk.rank = k;
        r.coll->init(&rk, false, send, recv);
        for (size_t i = 0; i < *n_send; i++)
            all[(size_t)k * *n_send + i] = comm_dtype_load(send, i, r.dt);
    }
    free(send);
    free(recv);
    return all;
}

static double combine(comm_op op, double a, double b)
{
    switch (op) {
    case OP_PROD: return a * b;
    case OP_MIN: return fmin(a, b);
    case OP_MAX: return fmax(a, b);
    default: return a + b;
    }
}

/* Counts the wrong elements of a result given as doubles, stored in r's dtype. */
static size_t wrong_in(const bench_row *r, const double *result, size_t n)
{
    unsigned char *buf = malloc(n * comm_dtype_size(r->dt) + 1);
    for (size_t i = 0; i < n; i++)
        comm_dtype_store(buf, i, r->dt, result[i]);
    size_t wrong = bench_count_wrong(r, false, buf);
    free(buf);
    return wrong;
}

/* Element i's exact combination over every rank (in: ranks x n inputs), an average divided as r's
 * dtype divides. */
static double exact_of(const double *in, size_t n, size_t i, comm_dtype dt, comm_op op, int ranks)
{
    double x = in[i];
    for (int k = 1; k < ranks; k++)
        x = combine(op, x, in[(size_t)k * n + i]);
    if (op == OP_AVG)
        x = dt == DT_INT32 || dt == DT_UINT8 || dt == DT_INT8 ? trunc(x / ranks) : x / ranks;
    return x;
}

/* Past the rank counts below, a sum or average whose exact value the dtype could not hold (int8
 * wraps past 127 and holds the sentinel -91, bfloat16 rounds past 256) would count a correct
 * collective wrong. */
static void check_many_ranks(comm_dtype dt, int ranks)
{
    const comm_op ops[] = {OP_SUM, OP_AVG};
    for (size_t o = 0; o < 2; o++) {
        bench_row r = row("allreduce", dt, ops[o], 1, ranks);
        size_t n;
        double *in = inputs_of(r, &n), exact[COUNT], zero[COUNT] = {0};
        for (size_t i = 0; i < n; i++)
            exact[i] = exact_of(in, n, i, dt, ops[o], ranks);
        CHECK(wrong_in(&r, exact, n) == 0, "dt %d op %d np %d: the exact result is right", dt, ops[o], ranks);
        if (ops[o] == OP_SUM) {
            CHECK(wrong_in(&r, zero, n) > 0, "dt %d np %d: every sum 0 is wrong", dt, ranks);
            CHECK(wrong_in(&r, in, n) > 0, "dt %d np %d: rank 0's own input is wrong as the sum", dt, ranks);
        }
        free(in);
    }
}

/* A collective that sums nothing (allgather, broadcast) keeps every rank's inputs whatever the rank
 * count: were they 0 past sum_terms, as a sum's are, a broadcast writing zeros would pass. */
static void check_inputs_kept(comm_dtype dt, int ranks)
{
    bench_row r = row("allgather", dt, OP_SUM, 0, ranks);
    size_t n, zeros = 0;
    double *in = inputs_of(r, &n);
    for (size_t i = 0; i < (size_t)ranks * n; i++)
        zeros += in[i] == 0;
    CHECK(zeros * 20 < (size_t)ranks * n, "dt %d np %d: %zu of %zu allgather inputs are 0", dt, ranks, zeros,
          (size_t)ranks * n);
    free(in);
}

static void check_reduce_ops(comm_dtype dt, comm_op op, int ranks)
{
    bench_row r = row("allreduce", dt, op, 1, ranks);
    size_t n;
    double *in = inputs_of(r, &n), exact[COUNT], constant[COUNT];
    for (size_t i = 0; i < n; i++)
        exact[i] = exact_of(in, n, i, dt, op, ranks);
    CHECK(wrong_in(&r, exact, n) == 0, "dt %d op %d np %d: the exact result is right", dt, op, ranks);
    double values[] = {0, 1, -4, 4, 2};
    bool only_twos = op == OP_PROD && dt == DT_UINT8; /* one rank's 2 times 1s: every product is 2 */
    for (size_t v = 0; v < sizeof values / sizeof values[0] - only_twos; v++) {
        for (size_t i = 0; i < n; i++)
            constant[i] = values[v];
        CHECK(wrong_in(&r, constant, n) > 0, "dt %d op %d np %d: every element %g is wrong", dt, op, ranks, values[v]);
    }
    for (int k = 0; k < ranks; k += ranks - 1 > 0 ? ranks - 1 : 1)
        CHECK(wrong_in(&r, in + (size_t)k * n, n) > 0, "dt %d op %d np %d: rank %d's own input is wrong", dt, op,
              ranks, k);
    free(in);
}

/* Rank 1 of a reduce-scatter given block 0's exact sums. */
static void check_wrong_block(comm_dtype dt, int ranks)
{
    bench_row r0 = row("reducescatter", dt, OP_SUM, 0, ranks), r1 = r0;
    r1.rank = 1;
    double block0[COUNT];
    for (size_t j = 0; j < COUNT; j++)
        block0[j] = r0.coll->expected(&r0, j);
    CHECK(wrong_in(&r0, block0, COUNT) == 0, "dt %d np %d: block 0 is right on rank 0", dt, ranks);
    CHECK(wrong_in(&r1, block0, COUNT) > 0, "dt %d np %d: block 0 is wrong on rank 1", dt, ranks);
}

/* An allgather whose blocks 0 and 1 changed places. */
static void check_swapped_blocks(comm_dtype dt, int ranks)
{
    bench_row r = row("allgather", dt, OP_SUM, 0, ranks);
    size_t n = (size_t)ranks * COUNT;
    double *got = malloc(n * sizeof *got);
    for (size_t j = 0; j < n; j++)
        got[j] = r.coll->expected(&r, j);
    CHECK(wrong_in(&r, got, n) == 0, "dt %d np %d: the gathered blocks are right", dt, ranks);
    for (size_t j = 0; j < COUNT; j++) {
        double t = got[j];
        got[j] = got[COUNT + j], got[COUNT + j] = t;
    }
    CHECK(wrong_in(&r, got, n) > 0, "dt %d np %d: blocks 0 and 1 swapped are wrong", dt, ranks);
    free(got);
}

int main(void)
{
    const comm_dtype dts[] = {DT_FLOAT, DT_BFLOAT16, DT_INT32, DT_UINT8, DT_INT8};
    const comm_op ops[] = {OP_SUM, OP_AVG, OP_MIN, OP_MAX, OP_PROD};
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
        for (int ranks = 2; ranks <= (dts[d] == DT_INT8 ? 31 : MAX_RANKS); ranks++) {
            for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
                check_reduce_ops(dts[d], ops[o], ranks);
            check_wrong_block(dts[d], ranks);
            check_swapped_blocks(dts[d], ranks);
        }
    const comm_dtype wide[] = {DT_FLOAT, DT_BFLOAT16, DT_HALF, DT_INT32, DT_UINT8, DT_INT8};
    const int many[] = {100, 128, 257, 1024, 4096};
    for (size_t d = 0; d < sizeof wide / sizeof wide[0]; d++)
        for (size_t k = 0; k < sizeof many / sizeof many[0]; k++) {
            check_many_ranks(wide[d], many[k]);
            check_swapped_blocks(wide[d], many[k]);
            check_wrong_block(wide[d], many[k]);
            check_inputs_kept(wide[d], many[k]);
        }
    return check_done("test_bench_check");
}
