/* bench_main.c — ddprun-bench, one rank of `ddprun -np N bench OP [flags]`: the shared harness
 * that times, checks and prints every collective the same way (nccl-tests' table, footer and
 * exit status), writes the JSON file, and `ddprun-bench topo` (hosts, cores, NUMA nodes).
 *
 * The collective under test goes through comm.h only; the harness's own bookkeeping (combining
 * times, summing wrong counts, gathering the rank table) uses MPI, which every backend has.
 * What each collective moves and must produce lives in bench.c; nothing here knows it. */
#include <dirent.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "runtime/log.h"

typedef struct placement {
    double time_us, algbw, busbw;
    long long wrong; /* -1: not checked */
} placement;

typedef struct row_result {
    size_t bytes, elements;
    comm_dtype dt;
    int op;   /* -1: not a reduction */
    int root; /* -1: no root */
    placement p[2]; /* out of place, in place */
} row_result;

/* Where the buffers live. The MPI backend works on host memory, so its staging buffers are the
 * buffers; a device backend plugs in alloc/upload/download of its own. */
typedef struct bench_mem {
    void *(*alloc)(size_t bytes);
    void (*free)(void *p);
} bench_mem;

static void *host_alloc(size_t bytes) { return malloc(bytes ? bytes : 1); }
static const bench_mem host_mem = {host_alloc, free};

typedef struct harness {
    comm *c;
    const bench_opts *o;
    const bench_coll *coll;
    const bench_mem *mem;
    void *send, *recv; /* recv is also the single in-place buffer */
    row_result *rows;
    size_t n_rows, cap_rows;
} harness;

static bool g_same_on_every_rank; /* the failure is a collective verdict, not one rank's */

typedef struct rank_info {
    int pid, cores, numa_nodes;
    char host[64], device[48], numa[160];
} rank_info;

/* ---- topology from /sys and sysconf (no new dependency) ---- */

static void read_line(const char *path, char *out, size_t len)
{
    FILE *f = fopen(path, "r");
    out[0] = 0;
    if (f && fgets(out, (int)len, f))
        out[strcspn(out, "\n")] = 0;
    if (f)
        fclose(f);
}

static void local_topology(const comm *c, rank_info *me)
{
    memset(me, 0, sizeof *me);
    me->pid = (int)getpid();
    me->cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
    snprintf(me->host, sizeof me->host, "%s", c->host);
    snprintf(me->device, sizeof me->device, "cpu");
    DIR *d = opendir("/sys/devices/system/node");
    struct dirent *e;
    size_t used = 0;
    while (d && (e = readdir(d))) {
        int node;
        char tail;
        if (sscanf(e->d_name, "node%d%c", &node, &tail) != 1)
            continue;
        char path[300], cpus[64];
        snprintf(path, sizeof path, "/sys/devices/system/node/%s/cpulist", e->d_name);
        read_line(path, cpus, sizeof cpus);
        me->numa_nodes++;
        if (used < sizeof me->numa)
            used += (size_t)snprintf(me->numa + used, sizeof me->numa - used, "%snode%d: cpus %s",
                                     used ? ", " : "", node, cpus);
    }
    if (d)
        closedir(d);
    if (!me->numa_nodes)
        snprintf(me->numa, sizeof me->numa, "no NUMA information in /sys");
}

static rank_info *gather_ranks(const comm *c)
{
    rank_info me, *all = calloc((size_t)c->size, sizeof *all);
    local_topology(c, &me);
    MPI_Allgather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me, MPI_BYTE, MPI_COMM_WORLD);
    return all;
}

/* One line per host: cores, NUMA nodes, its ranks; GPUs only where a GPU backend is built. */
static void print_topology(const comm *c, const rank_info *all)
{
    log_info("# Topology");
    for (int r = 0; r < c->size; r++) {
        bool first = true;
        for (int q = 0; q < r; q++)
            first = first && strcmp(all[q].host, all[r].host) != 0;
        if (!first)
            continue;
        char ranks[256] = "";
        size_t used = 0;
        for (int q = r; q < c->size && used < sizeof ranks; q++)
            if (strcmp(all[q].host, all[r].host) == 0)
                used += (size_t)snprintf(ranks + used, sizeof ranks - used, " %d", q);
        log_info("#  Host %s: %d cores, %d NUMA node%s (%s); ranks%s; GPUs: none (this build has no GPU backend)",
                 all[r].host, all[r].cores, all[r].numa_nodes, all[r].numa_nodes == 1 ? "" : "s", all[r].numa, ranks);
    }
    log_info("#");
}

/* ---- timing and checking one placement of one row ---- */

static double combine_times(const harness *h, double local)
{
    double out = local;
    MPI_Op op = h->o->agg == AGG_MIN ? MPI_MIN : h->o->agg == AGG_MAX ? MPI_MAX : MPI_SUM;
    MPI_Allreduce(&local, &out, 1, MPI_DOUBLE, op, MPI_COMM_WORLD);
    return h->o->agg == AGG_AVG ? out / h->c->size : out;
}

static void corrupt_one(const bench_row *r, bool in_place, void *recv)
{
    size_t first, n;
    r->coll->checked(r, in_place, &first, &n);
    if (n)
        bench_put(recv, first, r->dt, bench_get(recv, first, r->dt) + 1);
}

static int check_placement(harness *h, const bench_row *r, bool in_place, void *send, long long *wrong, ddp_err *err)
{
    r->coll->init(r, in_place, send, h->recv);
    int rc = r->coll->run(h->c, r, in_place, send, h->recv, err);
    if (rc)
        return rc;
    if (h->o->corrupt_rank == r->rank)
        corrupt_one(r, in_place, h->recv);
    long long mine = (long long)bench_count_wrong(r, in_place, h->recv);
    MPI_Allreduce(&mine, wrong, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    return DDP_OK;
}

static int time_placement(harness *h, const bench_row *r, bool in_place, size_t bytes, placement *p, ddp_err *err)
{
    void *send = in_place ? h->recv : h->send;
    r->coll->init(r, in_place, send, h->recv);
    for (int i = 0; i < h->o->warmup; i++)
        if (r->coll->run(h->c, r, in_place, send, h->recv, err))
            return err->code;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < h->o->iters; i++)
        if (r->coll->run(h->c, r, in_place, send, h->recv, err))
            return err->code;
    double sec = combine_times(h, (MPI_Wtime() - t0) / h->o->iters);
    p->time_us = sec * 1e6;
    p->algbw = sec > 0 ? (double)bytes / 1e9 / sec : 0;
    p->busbw = p->algbw * r->coll->busbw_factor(r->ranks);
    p->wrong = -1;
    return h->o->check ? check_placement(h, r, in_place, send, &p->wrong, err) : DDP_OK;
}

/* ---- printing ---- */

static void print_header(const harness *h, const rank_info *all)
{
    const bench_opts *o = h->o;
    char step[64];
    if (o->step_bytes)
        snprintf(step, sizeof step, "%zu(bytes)", o->step_bytes);
    else
        snprintf(step, sizeof step, "%g(factor)", o->step_factor);
    log_info("# ddprun-bench %s  minBytes %zu maxBytes %zu step: %s warmup iters: %d iters: %d agg: %s "
             "validation: %d backend: %s",
             h->coll->name, o->min_bytes, o->max_bytes, step, o->warmup, o->iters,
             o->agg == AGG_MIN ? "min" : o->agg == AGG_MAX ? "max" : "avg", o->check, h->c->ops->name);
    log_info("#\n# Using devices");
    for (int r = 0; r < h->c->size; r++)
        log_info("#  Rank %2d Pid %7d on %12s device %-8s backend %s", r, all[r].pid, all[r].host, all[r].device,
                 h->c->ops->name);
    log_info("#");
    print_topology(h->c, all);
    log_info("#%*s%-48s%s", 57, "", "out-of-place", "in-place");
    log_info("#%13s  %15s  %8s  %6s  %5s  %10s %12s %12s %7s  %10s %12s %12s %7s", "size(B)", "count(elements)",
             "type", "redop", "root", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong", "time(us)", "algbw(GB/s)",
             "busbw(GB/s)", "#wrong");
}

static void format_placement(const placement *p, char *out, size_t len)
{
    char wrong[24];
    if (p->wrong < 0)
        snprintf(wrong, sizeof wrong, "N/A");
    else
        snprintf(wrong, sizeof wrong, "%lld", p->wrong);
    snprintf(out, len, "  %10.2f %12.2f %12.2f %7s", p->time_us, p->algbw, p->busbw, wrong);
}

static void print_row(const row_result *x)
{
    char a[96], b[96];
    format_placement(&x->p[0], a, sizeof a);
    format_placement(&x->p[1], b, sizeof b);
    log_info(" %13zu  %15zu  %8s  %6s  %5d%s%s", x->bytes, x->elements, comm_dtype_name(x->dt),
             x->op < 0 ? "none" : comm_op_name((comm_op)x->op), x->root, a, b);
}

static void summarize(const harness *h, long long *wrong, double *avg_busbw)
{
    double sum = 0;
    *wrong = 0;
    for (size_t i = 0; i < h->n_rows; i++)
        for (int k = 0; k < 2; k++) {
            sum += h->rows[i].p[k].busbw;
            *wrong += h->rows[i].p[k].wrong > 0 ? h->rows[i].p[k].wrong : 0;
        }
    *avg_busbw = h->n_rows ? sum / (2.0 * (double)h->n_rows) : 0;
}

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", *s);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

static void json_placement(FILE *f, const char *key, const placement *p)
{
    fprintf(f, "\"%s\": {\"time_us\": %.9g, \"algbw_gbs\": %.9g, \"busbw_gbs\": %.9g, \"wrong\": ", key, p->time_us,
            p->algbw, p->busbw);
    if (p->wrong < 0)
        fprintf(f, "null}");
    else
        fprintf(f, "%lld}", p->wrong);
}

static int write_json(const harness *h, const rank_info *all, long long wrong, double avg, ddp_err *err)
{
    FILE *f = fopen(h->o->json_path, "w");
    if (!f)
        return ddp_fail(err, DDP_ERUNTIME, "-J %s: cannot write: %m", h->o->json_path);
    const bench_opts *o = h->o;
    fprintf(f, "{\"collective\": \"%s\", \"backend\": \"%s\", \"nranks\": %d,\n \"ranks\": [", h->coll->name,
            h->c->ops->name, h->c->size);
    for (int r = 0; r < h->c->size; r++) {
        fprintf(f, "%s{\"rank\": %d, \"pid\": %d, \"host\": ", r ? ", " : "", r, all[r].pid);
        json_string(f, all[r].host);
        fprintf(f, ", \"device\": \"%s\"}", all[r].device);
    }
    fprintf(f, "],\n \"options\": {\"min_bytes\": %zu, \"max_bytes\": %zu, \"step_factor\": %g, \"step_bytes\": %zu, "
               "\"iters\": %d, \"warmup_iters\": %d, \"check\": %s, \"average\": \"%s\"},\n \"rows\": [\n",
            o->min_bytes, o->max_bytes, o->step_bytes ? 0 : o->step_factor, o->step_bytes, o->iters, o->warmup,
            o->check ? "true" : "false", o->agg == AGG_MIN ? "min" : o->agg == AGG_MAX ? "max" : "avg");
    for (size_t i = 0; i < h->n_rows; i++) {
        const row_result *x = &h->rows[i];
        fprintf(f, "  {\"size_bytes\": %zu, \"count\": %zu, \"type\": \"%s\", \"redop\": \"%s\", \"root\": %d, ",
                x->bytes, x->elements, comm_dtype_name(x->dt), x->op < 0 ? "none" : comm_op_name((comm_op)x->op),
                x->root);
        json_placement(f, "out_of_place", &x->p[0]);
        fputs(", ", f);
        json_placement(f, "in_place", &x->p[1]);
        fprintf(f, "}%s\n", i + 1 < h->n_rows ? "," : "");
    }
    fprintf(f, " ],\n \"summary\": {\"out_of_bounds\": %lld, \"ok\": %s, \"avg_busbw_gbs\": %.9g}}\n", wrong,
            wrong ? "false" : "true", avg);
    if (fclose(f) != 0)
        return ddp_fail(err, DDP_ERUNTIME, "-J %s: write failed: %m", h->o->json_path);
    return DDP_OK;
}

/* ---- the sweep ---- */

static size_t next_size(const bench_opts *o, size_t bytes)
{
    size_t next = o->step_bytes ? bytes + o->step_bytes : (size_t)((double)bytes * o->step_factor);
    return next > bytes ? next : bytes + 1;
}

static size_t row_count(const harness *h, size_t bytes, comm_dtype dt)
{
    return bytes / comm_dtype_size(dt) / (h->coll->blocks ? (size_t)h->c->size : 1);
}

static int add_row(harness *h, const row_result *x, ddp_err *err)
{
    if (h->n_rows == h->cap_rows) {
        size_t cap = h->cap_rows ? 2 * h->cap_rows : 64;
        row_result *rows = realloc(h->rows, cap * sizeof *rows);
        if (!rows)
            return ddp_fail(err, DDP_ERUNTIME, "out of memory for the results table");
        h->rows = rows, h->cap_rows = cap;
    }
    h->rows[h->n_rows++] = *x;
    return DDP_OK;
}

static int run_row(harness *h, comm_dtype dt, int op, size_t bytes, ddp_err *err)
{
    bench_row r = {h->coll, dt, op < 0 ? OP_SUM : (comm_op)op, h->o->root, row_count(h, bytes, dt),
                   (uint32_t)h->n_rows, h->c->rank, h->c->size};
    if (r.count == 0)
        return DDP_OK; /* smaller than one element per rank */
    row_result x = {.elements = r.count * (h->coll->blocks ? (size_t)r.ranks : 1), .dt = dt, .op = op,
                    .root = h->coll->rooted ? r.root : -1};
    x.bytes = x.elements * comm_dtype_size(dt);
    for (int in_place = 0; in_place < 2; in_place++) {
        int rc = time_placement(h, &r, in_place, x.bytes, &x.p[in_place], err);
        if (rc)
            return ddp_prefix(err, "%s %zu B %s%s", h->coll->name, x.bytes, comm_dtype_name(dt),
                              in_place ? " in-place" : "");
    }
    print_row(&x);
    return add_row(h, &x, err);
}

static int alloc_buffers(harness *h, ddp_err *err)
{
    size_t send = 0, recv = 0;
    for (int dt = 0; dt < DT_COUNT; dt++) {
        bench_row r = {h->coll, dt, OP_SUM, 0, row_count(h, h->o->max_bytes, dt), 0, h->c->rank, h->c->size};
        size_t s, v;
        h->coll->elems(&r, &s, &v);
        send = s * comm_dtype_size(dt) > send ? s * comm_dtype_size(dt) : send;
        recv = v * comm_dtype_size(dt) > recv ? v * comm_dtype_size(dt) : recv;
    }
    h->send = h->mem->alloc(send);
    h->recv = h->mem->alloc(send > recv ? send : recv); /* also the in-place buffer */
    if (!h->send || !h->recv)
        return ddp_fail(err, DDP_ERUNTIME, "cannot allocate %zu + %zu bytes of buffers", send, recv);
    return DDP_OK;
}

static int sweep(harness *h, ddp_err *err)
{
    int rc = alloc_buffers(h, err);
    int dt_lo = h->o->dtype < 0 ? 0 : h->o->dtype, dt_hi = h->o->dtype < 0 ? DT_COUNT - 1 : h->o->dtype;
    int op_lo = h->o->op < 0 ? 0 : h->o->op, op_hi = h->o->op < 0 ? OP_COUNT - 1 : h->o->op;
    if (!h->coll->reduction)
        op_lo = op_hi = -1;
    for (int dt = dt_lo; !rc && dt <= dt_hi; dt++)
        for (int op = op_lo; !rc && op <= op_hi; op++)
            for (size_t b = h->o->min_bytes; !rc && b <= h->o->max_bytes; b = next_size(h->o, b))
                rc = run_row(h, (comm_dtype)dt, op, b, err);
    return rc;
}

static int run_bench(comm *c, const bench_opts *o, ddp_err *err)
{
    harness h = {.c = c, .o = o, .coll = bench_find(o->coll), .mem = &host_mem};
    rank_info *all = gather_ranks(c);
    print_header(&h, all);
    int rc = sweep(&h, err);
    long long wrong = 0;
    double avg = 0;
    if (!rc) {
        summarize(&h, &wrong, &avg);
        log_info("# Out of bounds values : %lld %s", wrong, wrong ? "FAILED" : "OK");
        log_info("# Avg bus bandwidth : %g", avg);
        log_info("#");
        if (o->json_path && c->rank == 0)
            rc = write_json(&h, all, wrong, avg, err);
    }
    h.mem->free(h.send);
    h.mem->free(h.recv);
    free(h.rows);
    free(all);
    if (!rc && wrong) {
        rc = ddp_fail(err, DDP_ERUNTIME, "%lld wrong result elements (see #wrong)", wrong);
        g_same_on_every_rank = true;
    }
    return rc;
}

/* ---- main ---- */

static int open_backend(const bench_opts *o, comm **c, ddp_err *err)
{
    if (strcmp(o->backend, "nccl") == 0)
        return ddp_fail(err, DDP_EUSAGE, "--backend nccl: NCCL backend not available in this build");
    return comm_mpi_create(c, err); /* auto: MPI, the only backend this build has */
}

static int bench_main(int argc, char **argv, comm *c, ddp_err *err)
{
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        if (c->rank == 0)
            bench_usage();
        return argc < 2 ? ddp_fail(err, DDP_EUSAGE, "no collective given") : DDP_OK;
    }
    if (strcmp(argv[1], "topo") == 0) {
        rank_info *all = gather_ranks(c);
        print_topology(c, all);
        free(all);
        return DDP_OK;
    }
    bench_opts o;
    int rc = bench_parse_args(argc - 1, argv + 1, &o, err);
    if (!rc && o.root >= c->size)
        rc = ddp_fail(err, DDP_EUSAGE, "-r %d: there are only %d ranks", o.root, c->size);
    if (!rc && o.corrupt_rank >= c->size)
        rc = ddp_fail(err, DDP_EUSAGE, "--corrupt %d: there are only %d ranks", o.corrupt_rank, c->size);
    if (rc)
        return rc;
    return run_bench(c, &o, err);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    ddp_err err = {0};
    comm *c = NULL;
    bench_opts probe = {.backend = "auto"};
    for (int i = 1; i + 1 < argc; i++) /* the backend is needed before the rest is parsed */
        if (strcmp(argv[i], "--backend") == 0)
            probe.backend = argv[i + 1];
    int rc = open_backend(&probe, &c, &err);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (!rc) {
        log_init(c->rank, c->size, c->host);
        rc = bench_main(argc, argv, c, &err);
    } else {
        char host[MPI_MAX_PROCESSOR_NAME];
        int len = 0;
        MPI_Get_processor_name(host, &len);
        log_init(rank, 0, host);
    }
    /* usage errors and the wrong-element verdict are the same on every rank: say them once */
    if (rc && (!(rc == DDP_EUSAGE || g_same_on_every_rank) || rank == 0))
        log_error("ddprun-bench: %s", err.msg);
    if (c)
        c->ops->destroy(c);
    MPI_Finalize();
    return rc;
}
