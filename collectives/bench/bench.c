/* bench.c — what the benchmark measures: the per-collective descriptors (element counts, bus
 * bandwidth factors, inputs, exact expected results, the comm.h call) and the command-line
 * options with nccl-tests' meanings. The harness that times, checks and prints is bench_main.c.
 * Nothing here talks to MPI or prints a table. */
#include "bench.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "runtime/base/half.h"

/* ---- element access on host staging buffers ---- */

/* 0xA5 bytes: a non-integer in every float type, -91 / 165 / huge in the integer types, all
 * outside what the generator below can produce or reduce to. */
void bench_fill_sentinel(void *buf, size_t bytes) { memset(buf, 0xA5, bytes); }

/* ---- inputs and exact results ---- */

static bool is_unsigned(comm_dtype dt) { return dt == DT_UINT8 || dt == DT_UINT64; }

/* Rank r's input element i. Small integers so sums over up to 64 ranks stay exact even in
 * bfloat16 (and within int8 up to 31 ranks); for prod exactly one rank contributes a 2 and the
 * rest ±1, so products are ±1 or ±2 whatever the rank count. */
static double input(const bench_row *r, int rank, size_t i)
{
    bool s = !is_unsigned(r->dt);
    size_t k = (size_t)rank, seed = r->seed;
    if (!r->coll->reduction)
        return (double)((i * 13 + k * 29 + seed) % 101) - (s ? 50 : 0);
    switch (r->op) {
    case OP_PROD: return i % (size_t)r->ranks == k ? 2 : (s && (i + k + seed) % 3 == 0 ? -1 : 1);
    case OP_MIN:
    case OP_MAX: return (double)((i * 5 + k * 11 + seed) % 9) - (s ? 4 : 0);
    default: return (double)((i * 7 + k * 3 + seed) % 5) - (s ? 2 : 0);
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
    {"allreduce", true, false, false, bw_allreduce, elems_same, init_same, run_allreduce, checked_all, expect_reduced},
    {"allgather", false, false, true, bw_blocks, elems_allgather, init_allgather, run_allgather, checked_all, expect_allgather},
    {"reducescatter", true, false, true, bw_blocks, elems_reducescatter, init_blocks_in, run_reducescatter,
     checked_reducescatter, expect_reducescatter},
    {"broadcast", false, true, false, bw_one, elems_bcast, init_bcast, run_bcast, checked_all, expect_bcast},
    {"reduce", true, true, false, bw_one, elems_same, init_same, run_reduce, checked_root, expect_reduced},
    {"alltoall", false, false, true, bw_blocks, elems_alltoall, init_blocks_in, run_alltoall, checked_all, expect_alltoall},
    {"sendrecv", false, false, false, bw_one, elems_same, init_same, run_sendrecv, checked_all, expect_sendrecv},
};

const bench_coll *bench_find(const char *name)
{
    for (size_t i = 0; i < sizeof colls / sizeof colls[0]; i++)
        if (strcmp(colls[i].name, name) == 0)
            return &colls[i];
    return NULL;
}

const char *bench_coll_names(void) { return "allreduce allgather reducescatter broadcast reduce alltoall sendrecv"; }

size_t bench_count_wrong(const bench_row *r, bool in_place, const void *recv)
{
    size_t first, n, wrong = 0;
    r->coll->checked(r, in_place, &first, &n);
    for (size_t j = 0; j < n; j++)
        wrong += comm_dtype_load(recv, first + j, r->dt) != r->coll->expected(r, j);
    return wrong;
}

/* ---- command line (nccl-tests' flags) ---- */

void bench_usage(void)
{
    fprintf(stderr,
            "usage: ddprun-bench OP [flags]   OP: %s\n"
            "       ddprun-bench topo\n"
            "  -b, --minbytes N       smallest message (bytes, K/M/G suffixes; default 8)\n"
            "  -e, --maxbytes N       largest message (default 32M)\n"
            "  -f, --stepfactor F     multiply the size by F each row (default 2)\n"
            "  -i, --stepbytes N      or add N bytes each row\n"
            "  -n, --iters N          timed iterations (default 20)\n"
            "  -w, --warmup_iters N   untimed iterations first (default 5)\n"
            "  -c, --check 0|1        check every result element (default 1)\n"
            "  -o, --op OP            sum prod min max avg all (default sum)\n"
            "  -d, --datatype T       float double half bfloat16 int32 int8 uint8 int64 uint64 all\n"
            "  -r, --root N           root of broadcast and reduce (default 0)\n"
            "  -a, --average avg|min|max  how ranks' times combine (or 1|2|3; default avg)\n"
            "  -J, --output_file FILE also write the results as JSON\n"
            "  -T, --timeout S        NCCL backend: end the job when a collective stalls S seconds (default 300)\n"
            "      --backend mpi|nccl|auto  nccl: GPU buffers, one GPU per rank; auto: nccl when every\n"
            "                         rank has a GPU of its own, else mpi on host buffers (default auto)\n"
            "      --corrupt RANK     test only: perturb one result element on RANK\n"
            "      --fail RANK        test only: RANK fails its second row as a collective error would\n",
            bench_coll_names());
}

static int parse_bytes(const char *flag, const char *s, size_t *out, ddp_err *err)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    double mult = 1;
    switch (*end) {
    case 'K': case 'k': mult = 1024.0; end++; break;
    case 'M': case 'm': mult = 1024.0 * 1024; end++; break;
    case 'G': case 'g': mult = 1024.0 * 1024 * 1024; end++; break;
    default: break;
    }
    if (*end == 'B' || *end == 'b')
        end++;
    if (end == s || *end || errno || v < 0 || v * mult > 1e18)
        return ddp_fail(err, DDP_EUSAGE, "%s: expected a byte count like 8, 64K, 256M or 1G, got \"%s\"", flag, s);
    *out = (size_t)(v * mult);
    return DDP_OK;
}

static int parse_int(const char *flag, const char *s, int lo, int *out, ddp_err *err)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno || v < lo || v > 1000000000L)
        return ddp_fail(err, DDP_EUSAGE, "%s: expected an integer >= %d, got \"%s\"", flag, lo, s);
    *out = (int)v;
    return DDP_OK;
}

static int parse_name(const char *flag, const char *s, int n, const char *(*name)(int), int *out, ddp_err *err)
{
    if (strcasecmp(s, "all") == 0) {
        *out = -1;
        return DDP_OK;
    }
    for (int i = 0; i < n; i++)
        if (strcasecmp(s, name(i)) == 0) {
            *out = i;
            return DDP_OK;
        }
    return ddp_fail(err, DDP_EUSAGE, "%s: unknown value \"%s\"", flag, s);
}

static const char *dtype_name_i(int i) { return comm_dtype_name((comm_dtype)i); }
static const char *op_name_i(int i) { return comm_op_name((comm_op)i); }

static int parse_agg(const char *s, enum bench_agg *out, ddp_err *err)
{
    static const char *const names[] = {"avg", "min", "max"}, *const numbers[] = {"1", "2", "3"};
    for (int i = 0; i < 3; i++)
        if (strcmp(s, names[i]) == 0 || strcmp(s, numbers[i]) == 0) {
            *out = (enum bench_agg)i;
            return DDP_OK;
        }
    return ddp_fail(err, DDP_EUSAGE, "-a: expected avg, min or max, got \"%s\"", s);
}

static int parse_one(int ch, const char *arg, bench_opts *o, ddp_err *err)
{
    int v = 0;
    switch (ch) {
    case 'b': return parse_bytes("-b", arg, &o->min_bytes, err);
    case 'e': return parse_bytes("-e", arg, &o->max_bytes, err);
    case 'i': return parse_bytes("-i", arg, &o->step_bytes, err);
    case 'f': {
        char *end;
        o->step_factor = strtod(arg, &end);
        bool ok = end != arg && !*end && o->step_factor > 1;
        return ok ? DDP_OK : ddp_fail(err, DDP_EUSAGE, "-f: expected a factor > 1, got \"%s\"", arg);
    }
    case 'n': return parse_int("-n", arg, 1, &o->iters, err);
    case 'w': return parse_int("-w", arg, 0, &o->warmup, err);
    case 'c':
        if (parse_int("-c", arg, 0, &v, err) || v > 1)
            return ddp_fail(err, DDP_EUSAGE, "-c: expected 0 or 1, got \"%s\"", arg);
        o->check = v == 1;
        return DDP_OK;
    case 'o': return parse_name("-o", arg, OP_COUNT, op_name_i, &o->op, err);
    case 'd': return parse_name("-d", arg, DT_COUNT, dtype_name_i, &o->dtype, err);
    case 'r': return parse_int("-r", arg, 0, &o->root, err);
    case 'a': return parse_agg(arg, &o->agg, err);
    case 'J': o->json_path = arg; return DDP_OK;
    case 'B':
        o->backend = arg;
        if (strcmp(arg, "mpi") && strcmp(arg, "nccl") && strcmp(arg, "auto"))
            return ddp_fail(err, DDP_EUSAGE, "--backend: expected mpi, nccl or auto, got \"%s\"", arg);
        return DDP_OK;
    case 'T': {
        char *end;
        o->timeout_s = strtod(arg, &end);
        bool ok = end != arg && !*end && o->timeout_s > 0 && o->timeout_s <= 1e6;
        return ok ? DDP_OK : ddp_fail(err, DDP_EUSAGE, "-T: expected a timeout in seconds > 0, got \"%s\"", arg);
    }
    case 'X': return parse_int("--corrupt", arg, 0, &o->corrupt_rank, err);
    case 'F': return parse_int("--fail", arg, 0, &o->fail_rank, err);
    default: return ddp_fail(err, DDP_EUSAGE, "unknown or incomplete option (see usage)");
    }
}

int bench_parse_args(int argc, char **argv, bench_opts *o, ddp_err *err)
{
    static const struct option longs[] = {
        {"minbytes", required_argument, 0, 'b'}, {"maxbytes", required_argument, 0, 'e'},
        {"stepfactor", required_argument, 0, 'f'}, {"stepbytes", required_argument, 0, 'i'},
        {"iters", required_argument, 0, 'n'}, {"warmup_iters", required_argument, 0, 'w'},
        {"check", required_argument, 0, 'c'}, {"op", required_argument, 0, 'o'},
        {"datatype", required_argument, 0, 'd'}, {"root", required_argument, 0, 'r'},
        {"average", required_argument, 0, 'a'}, {"output_file", required_argument, 0, 'J'},
        {"backend", required_argument, 0, 'B'}, {"corrupt", required_argument, 0, 'X'},
        {"timeout", required_argument, 0, 'T'}, {"fail", required_argument, 0, 'F'},
        {0, 0, 0, 0},
    };
    *o = (bench_opts){.min_bytes = 8, .max_bytes = 32u << 20, .step_factor = 2, .iters = 20, .warmup = 5,
                      .check = true, .op = OP_SUM, .dtype = DT_FLOAT, .agg = AGG_AVG, .backend = "auto",
                      .timeout_s = 300, .corrupt_rank = -1, .fail_rank = -1};
    if (argc < 1 || !argv[0] || !bench_find(argv[0]))
        return ddp_fail(err, DDP_EUSAGE, "expected a collective (%s), got \"%s\"", bench_coll_names(),
                        argc > 0 && argv[0] ? argv[0] : "");
    o->coll = argv[0];
    optind = 1;
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, "b:e:f:i:n:w:c:o:d:r:a:J:T:", longs, NULL)) != -1) {
        int rc = parse_one(ch, ch == '?' || ch == ':' ? NULL : optarg, o, err);
        if (rc)
            return ch == '?' ? ddp_fail(err, DDP_EUSAGE, "unknown option or missing value: \"%s\"", argv[optind - 1]) : rc;
    }
    if (optind < argc)
        return ddp_fail(err, DDP_EUSAGE, "unexpected argument \"%s\"", argv[optind]);
    if (o->max_bytes < o->min_bytes)
        return ddp_fail(err, DDP_EUSAGE, "-e %zu is smaller than -b %zu", o->max_bytes, o->min_bytes);
    return DDP_OK;
}
