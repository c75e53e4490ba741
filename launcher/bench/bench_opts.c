/* bench_opts.c — ddprun-bench's command line, with nccl-tests' flags and meanings: the usage
 * text, parsing each flag with a DDP_EUSAGE message naming it, and the defaults. Must not run
 * anything: the options are only read. */
#include "bench_opts.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "bench_colls.h"

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
    /* written so that NaN fails too: its conversion to size_t below would be undefined */
    if (end == s || *end || errno || !(v >= 0 && v * mult <= 1e18))
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
        bool ok = end != arg && !*end && o->step_factor > 1 && isfinite(o->step_factor);
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

size_t bench_next_size(const bench_opts *o, size_t bytes)
{
    /* saturated in double: a product beyond SIZE_MAX must not reach the (undefined) conversion */
    double grown = (double)bytes * o->step_factor;
    size_t next = o->step_bytes ? bytes + o->step_bytes : grown >= (double)SIZE_MAX ? SIZE_MAX : (size_t)grown;
    return next > bytes ? next : bytes + 1;
}

/* The sweep from -b to -e within BENCH_MAX_SIZES sizes. */
static int check_sweep(const bench_opts *o, ddp_err *err)
{
    size_t n = 0;
    for (size_t b = o->min_bytes; b <= o->max_bytes && n <= BENCH_MAX_SIZES; b = bench_next_size(o, b)) {
        n++;
        if (b == SIZE_MAX)
            break;
    }
    if (n <= BENCH_MAX_SIZES)
        return DDP_OK;
    char step[64];
    if (o->step_bytes)
        snprintf(step, sizeof step, "-i %zu", o->step_bytes);
    else
        snprintf(step, sizeof step, "-f %.9g", o->step_factor);
    return ddp_fail(err, DDP_EUSAGE, "-b %zu to -e %zu with %s makes more than %d sizes: take a larger step",
                    o->min_bytes, o->max_bytes, step, BENCH_MAX_SIZES);
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
    /* 0, not 1: glibc then resets all of getopt's state, including the position inside a cluster
     * like "-xq" that an earlier failed parse stopped in (with 1 it would go on reading "q" from
     * that call's argv, which may be freed by now) */
    optind = 0;
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
    return check_sweep(o, err);
}
