/* bench_report.c — everything ddprun-bench prints or writes: the rank table (host, device,
 * backend per rank), the topology section (each host's cores, NUMA nodes, ranks and GPUs), the
 * results table in nccl-tests' layout, the footer, and the JSON file.
 * Ranks' facts are gathered over MPI_COMM_WORLD; printing is rank 0's (log_info). It must not
 * time or run collectives, nor decide the exit status. */
#include <dirent.h>
#include <errno.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench_report.h"
#include "runtime/base/json_text.h"
#include "runtime/base/log.h"
#include "runtime/base/replace_file.h"

/* Room for one host's GPU description (64 GPUs' lines and P2P matrix fit). */
#define GPU_TEXT_MAX ((size_t)64 << 10)

/* ---- the rank table and CPU topology, from /sys and sysconf ---- */

static void read_line(const char *path, char *out, size_t len)
{
    FILE *f = fopen(path, "r");
    out[0] = 0;
    if (f && fgets(out, (int)len, f))
        out[strcspn(out, "\n")] = 0;
    if (f)
        fclose(f);
}

static void local_topology(const mpi_identity *id, const char *device, rank_info *me)
{
    memset(me, 0, sizeof *me);
    me->pid = (int)getpid();
    me->cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
    me->local_rank = id->local_rank;
    snprintf(me->host, sizeof me->host, "%s", id->host);
    snprintf(me->device, sizeof me->device, "%s", device);
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

rank_info *bench_gather_ranks(const mpi_identity *id, const char *device)
{
    rank_info me, *all = bench_xalloc((size_t)id->size * sizeof *all);
    local_topology(id, device, &me);
    MPI_Allgather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me, MPI_BYTE, MPI_COMM_WORLD);
    return all;
}

/* Rank 0 gets every host's GPU description (from its first rank; the others send nothing): one
 * buffer of all texts and each rank's offset into it. */
static char *gather_gpu_texts(const mpi_identity *id, int **offsets)
{
    char *mine = id->local_rank == 0 ? bench_xalloc(GPU_TEXT_MAX) : NULL;
    int len = 0;
    if (mine) {
        bench_gpu_describe(mine, GPU_TEXT_MAX);
        len = (int)strlen(mine) + 1;
    }
    int *lens = id->rank == 0 ? bench_xalloc((size_t)id->size * sizeof *lens) : NULL;
    *offsets = id->rank == 0 ? bench_xalloc((size_t)id->size * sizeof **offsets) : NULL;
    MPI_Gather(&len, 1, MPI_INT, lens, 1, MPI_INT, 0, MPI_COMM_WORLD);
    size_t total = 0;
    for (int r = 0; lens && r < id->size; r++) {
        (*offsets)[r] = (int)total;
        total += (size_t)lens[r];
    }
    char *texts = id->rank == 0 ? bench_xalloc(total + 1) : NULL;
    MPI_Gatherv(mine, len, MPI_CHAR, texts, lens, *offsets, MPI_CHAR, 0, MPI_COMM_WORLD);
    free(mine);
    free(lens);
    return texts;
}

/* One line per host: cores, NUMA nodes, its ranks, its GPUs; then each host's GPU lines. */
void bench_print_topology(const mpi_identity *id, const rank_info *all)
{
    int *offsets = NULL;
    char *gpus = gather_gpu_texts(id, &offsets);
    log_info("# Topology");
    for (int r = 0; id->rank == 0 && r < id->size; r++) {
        bool first = true;
        for (int q = 0; q < r; q++)
            first = first && strcmp(all[q].host, all[r].host) != 0;
        if (!first)
            continue;
        char ranks[256] = "";
        size_t used = 0;
        for (int q = r; q < id->size && used < sizeof ranks; q++)
            if (strcmp(all[q].host, all[r].host) == 0)
                used += (size_t)snprintf(ranks + used, sizeof ranks - used, " %d", q);
        const char *gpu = gpus + offsets[r];
        int first_line = (int)strcspn(gpu, "\n");
        log_info("#  Host %s: %d cores, %d NUMA node%s (%s); ranks%s; GPUs: %.*s", all[r].host, all[r].cores,
                 all[r].numa_nodes, all[r].numa_nodes == 1 ? "" : "s", all[r].numa, ranks, first_line, gpu);
        if (gpu[first_line])
            log_info("%s", gpu + first_line + 1);
    }
    log_info("#");
    free(gpus);
    free(offsets);
}

/* ---- the results table ---- */

void bench_print_header(const bench_run *run)
{
    const bench_opts *o = run->o;
    char step[64];
    if (o->step_bytes)
        snprintf(step, sizeof step, "%zu(bytes)", o->step_bytes);
    else
        snprintf(step, sizeof step, "%g(factor)", o->step_factor);
    log_info("# ddprun-bench %s  minBytes %zu maxBytes %zu step: %s warmup iters: %d iters: %d agg: %s "
             "validation: %d backend: %s",
             run->coll->name, o->min_bytes, o->max_bytes, step, o->warmup, o->iters,
             o->agg == AGG_MIN ? "min" : o->agg == AGG_MAX ? "max" : "avg", o->check, run->backend);
    log_info("#\n# Using devices");
    for (int r = 0; r < run->id->size; r++)
        log_info("#  Rank %2d Pid %7d on %12s device %-8s backend %s", r, run->ranks[r].pid, run->ranks[r].host,
                 run->ranks[r].device, run->backend);
    log_info("#");
}

void bench_print_columns(void)
{
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

void bench_print_row(const row_result *x)
{
    char a[96], b[96];
    format_placement(&x->p[0], a, sizeof a);
    format_placement(&x->p[1], b, sizeof b);
    log_info(" %13zu  %15zu  %8s  %6s  %5d%s%s", x->bytes, x->count, comm_dtype_name(x->dt),
             x->op < 0 ? "none" : comm_op_name((comm_op)x->op), x->root, a, b);
}

void bench_print_footer(const bench_run *run, long long *wrong, double *avg_busbw)
{
    double sum = 0;
    *wrong = 0;
    for (size_t i = 0; i < run->n_rows; i++)
        for (int k = 0; k < 2; k++) {
            sum += run->rows[i].p[k].busbw;
            *wrong += run->rows[i].p[k].wrong > 0 ? run->rows[i].p[k].wrong : 0;
        }
    *avg_busbw = run->n_rows ? sum / (2.0 * (double)run->n_rows) : 0;
    log_info("# Out of bounds values : %lld %s", *wrong, *wrong ? "FAILED" : "OK");
    log_info("# Avg bus bandwidth : %g", *avg_busbw);
    log_info("#");
}

/* ---- JSON ---- */

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    json_put_text(f, s, SIZE_MAX);
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

static void json_ranks(FILE *f, const bench_run *run)
{
    for (int r = 0; r < run->id->size; r++) {
        fprintf(f, "%s{\"rank\": %d, \"pid\": %d, \"host\": ", r ? ", " : "", r, run->ranks[r].pid);
        json_string(f, run->ranks[r].host);
        fputs(", \"device\": ", f);
        json_string(f, run->ranks[r].device);
        fputc('}', f);
    }
}

typedef struct json_doc { const bench_run *run; long long wrong; double avg; } json_doc;

static int write_json_doc(FILE *f, void *ctx, ddp_err *err)
{
    (void)err; /* a failed write is the stream's error, which replace_file_stream reports */
    const json_doc *d = ctx;
    const bench_run *run = d->run;
    const bench_opts *o = run->o;
    fprintf(f, "{\"collective\": \"%s\", \"backend\": \"%s\", \"nranks\": %d,\n \"ranks\": [", run->coll->name,
            run->backend, run->id->size);
    json_ranks(f, run);
    fprintf(f, "],\n \"options\": {\"min_bytes\": %zu, \"max_bytes\": %zu, \"step_factor\": %g, \"step_bytes\": %zu, "
               "\"iters\": %d, \"warmup_iters\": %d, \"check\": %s, \"average\": \"%s\"},\n \"rows\": [\n",
            o->min_bytes, o->max_bytes, o->step_bytes ? 0 : o->step_factor, o->step_bytes, o->iters, o->warmup,
            o->check ? "true" : "false", o->agg == AGG_MIN ? "min" : o->agg == AGG_MAX ? "max" : "avg");
    for (size_t i = 0; i < run->n_rows; i++) {
        const row_result *x = &run->rows[i];
        fprintf(f, "  {\"size_bytes\": %zu, \"count\": %zu, \"type\": \"%s\", \"redop\": \"%s\", \"root\": %d, ",
                x->bytes, x->count, comm_dtype_name(x->dt), x->op < 0 ? "none" : comm_op_name((comm_op)x->op),
                x->root);
        json_placement(f, "out_of_place", &x->p[0]);
        fputs(", ", f);
        json_placement(f, "in_place", &x->p[1]);
        fprintf(f, "}%s\n", i + 1 < run->n_rows ? "," : "");
    }
    fprintf(f, " ],\n \"summary\": {\"out_of_bounds\": %lld, \"ok\": %s, \"avg_busbw_gbs\": %.9g}}\n", d->wrong,
            d->wrong ? "false" : "true", d->avg);
    return DDP_OK;
}

int bench_write_json(const bench_run *run, long long wrong, double avg, ddp_err *err)
{
    json_doc doc = {run, wrong, avg};
    struct stat st;
    const char *path = run->o->json_path;
    int rc = stat(path, &st) == 0 && !S_ISREG(st.st_mode) ? write_stream_in_place(path, write_json_doc, &doc, err)
                                                          : replace_file_stream(path, write_json_doc, &doc, err);
    if (rc == DDP_OK)
        return DDP_OK;
    err->code = DDP_ERUNTIME; /* a missing folder too: the results are measured, only their file failed */
    return ddp_prefix(err, "-J");
}
