/* train_profile_report.c — rank 0's report of a profiler window: the table of ops (per op and
 * shape, then per family) with calls and milliseconds per step, the share of the step, the rates
 * achieved from each op's own byte and FLOP counts and the fraction of the GPU's roofline, the
 * step time and what no op covers; the same as run.dir/profile.json.
 *
 * Owns the table of known GPUs' peaks. Must not record anything or touch the device: it reads
 * the finished records only. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/json_text.h"
#include "runtime/base/replace_file.h"
#include "train_profile_report.h"

/* ---- the GPUs' peaks ---------------------------------------------------------------------------
 * Dense (no sparsity) tensor-core rates for bf16 and tf32, the ordinary cores' fp32 rate and the
 * memory bandwidth, from NVIDIA's datasheets; matched in order by a substring of the device's name
 * (cudaGetDeviceProperties), so the more specific names come first. A device matching none, the
 * CPU and the emulator included, gets no roofline column. */
typedef struct gpu_peaks {
    const char *match;
    const char *name;
    double bf16_tflops, tf32_tflops, fp32_tflops, mem_gbs;
} gpu_peaks;

static const gpu_peaks known_gpus[] = {
    /* H100 datasheet: SXM5 989.4 bf16 / 494.7 tf32 / 66.9 fp32 TFLOP/s, 3.35 TB/s HBM3;
     * PCIe 756 / 378 / 51.2, 2.0 TB/s HBM2e; NVL 835 / 417.5 / 60, 3.9 TB/s */
    {"H100 NVL", "H100 NVL", 835.5, 417.5, 60.0, 3900},
    {"H100 PCIe", "H100 PCIe", 756.0, 378.0, 51.2, 2000},
    {"H100", "H100 SXM (HBM3)", 989.4, 494.7, 66.9, 3350},
    /* H200 datasheet: SXM 989.4 / 494.7 / 66.9, 4.8 TB/s HBM3e; NVL 835.5 / 417.5 / 60, 4.8 TB/s */
    {"H200 NVL", "H200 NVL", 835.5, 417.5, 60.0, 4800},
    {"H200", "H200 SXM", 989.4, 494.7, 66.9, 4800},
    /* A100 datasheet: 312 bf16 / 156 tf32 / 19.5 fp32; 40GB 1555 GB/s, 80GB SXM 2039, 80GB PCIe 1935 */
    {"A100-SXM4-80GB", "A100 SXM 80GB", 312.0, 156.0, 19.5, 2039},
    {"A100 80GB PCIe", "A100 PCIe 80GB", 312.0, 156.0, 19.5, 1935},
    {"A100", "A100 40GB", 312.0, 156.0, 19.5, 1555},
    /* L40S datasheet: 362.05 bf16 / 183 tf32 / 91.6 fp32, 864 GB/s GDDR6 */
    {"L40S", "L40S", 362.05, 183.0, 91.6, 864},
};

static const gpu_peaks *peaks_of(const device *d)
{
    if (d->kind != DEVICE_CUDA)
        return NULL;
    for (size_t i = 0; i < sizeof known_gpus / sizeof known_gpus[0]; i++)
        if (strstr(d->name, known_gpus[i].match))
            return &known_gpus[i];
    return NULL;
}

double train_device_peak_flops(const train_job *t)
{
    const gpu_peaks *g = peaks_of(t->dev);
    if (!g)
        return 0;
    double tflops = t->cfg->precision == PRECISION_BF16 ? g->bf16_tflops : t->cfg->cuda.tf32 ? g->tf32_tflops
                                                                                             : g->fp32_tflops;
    return 1e12 * tflops;
}

/* ---- rows: records grouped by a key --------------------------------------------------------- */

typedef struct prof_row {
    char key[PROF_NAME_MAX + PROF_DETAIL_MAX + 2];  /* "name detail", or a family */
    const char *family;
    prof_track track;
    prof_math math;
    double calls, us, bytes, flops;
} prof_row;

typedef struct prof_rows {
    prof_row *rows;
    size_t n, cap;
} prof_rows;

static prof_row *row_for(prof_rows *t, const char *key, const prof_record *r)
{
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->rows[i].key, key) == 0 && t->rows[i].track == r->track)
            return &t->rows[i];
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 64;
        prof_row *rows = realloc(t->rows, cap * sizeof *rows);
        if (!rows)
            return NULL;
        t->rows = rows;
        t->cap = cap;
    }
    prof_row *row = &t->rows[t->n++];
    *row = (prof_row){.family = r->family, .track = r->track, .math = r->math};
    snprintf(row->key, sizeof row->key, "%s", key);
    return row;
}

static void row_add(prof_row *row, const prof_record *r)
{
    row->calls += 1;
    row->us += r->end_us - r->begin_us;
    row->bytes += r->bytes;
    row->flops += r->flops;
}

static int by_time(const void *a, const void *b)
{
    double x = ((const prof_row *)a)->us, y = ((const prof_row *)b)->us;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* A device op's record (not a phase, a collective or host work). */
static bool is_op(const prof_record *r)
{
    return r->track == PROF_TRACK_COMPUTE && strcmp(r->family, "phase") != 0;
}

/* Per op and shape, and per family; sorted by time. Returns -1 when out of memory. */
static int group(const prof_record *recs, size_t n, prof_rows *ops, prof_rows *fams)
{
    for (size_t i = 0; i < n; i++) {
        const prof_record *r = &recs[i];
        char key[sizeof ops->rows[0].key];
        snprintf(key, sizeof key, "%s%s%s", r->name, r->detail[0] ? " " : "", r->detail);
        prof_row *o = row_for(ops, key, r), *f = row_for(fams, r->family, r);
        if (!o || !f)
            return -1;
        row_add(o, r);
        row_add(f, r);
    }
    qsort(ops->rows, ops->n, sizeof *ops->rows, by_time);
    qsort(fams->rows, fams->n, sizeof *fams->rows, by_time);
    return 0;
}

/* ---- the figures of one row --------------------------------------------------------------- */

typedef struct window_sums {
    int64_t first_step, planned, steps;
    double step_us, ops_us;     /* per step */
    uint64_t dropped;
    const gpu_peaks *peaks;
    bool tf32;
} window_sums;

typedef struct row_figures {
    double calls, ms, pct, gbs, tflops, roof_pct; /* roof_pct NAN: no roofline */
} row_figures;

static row_figures figures_of(const prof_row *r, const window_sums *w)
{
    double s = r->us * 1e-6;
    row_figures f = {.calls = r->calls / (double)w->steps, .ms = r->us / 1e3 / (double)w->steps,
                     .pct = 100 * r->us / (double)w->steps / w->step_us, .roof_pct = NAN};
    f.gbs = s > 0 ? r->bytes / s / 1e9 : 0;
    f.tflops = s > 0 ? r->flops / s / 1e12 : 0;
    const gpu_peaks *g = w->peaks;
    if (!g || r->math == PROF_MATH_NONE || r->track != PROF_TRACK_COMPUTE || !(s > 0))
        return f;
    double peak = r->math == PROF_MATH_GEMM_BF16 ? g->bf16_tflops
                : r->math == PROF_MATH_GEMM_FP32 && w->tf32 ? g->tf32_tflops : g->fp32_tflops;
    double t_flops = r->flops / (peak * 1e12), t_bytes = r->bytes / (g->mem_gbs * 1e9);
    f.roof_pct = 100 * (t_flops > t_bytes ? t_flops : t_bytes) / s;
    return f;
}

/* ---- the table ------------------------------------------------------------------------------ */

#define TABLE_OP_ROWS 40   /* the table's longest op list; profile.json holds every row */

typedef struct text {
    char *s;
    size_t len, cap;
    bool failed;
} text;

static void text_add(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void text_add(text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (t->failed || n < 0)
        return;
    if (t->len + (size_t)n + 1 > t->cap) {
        size_t cap = (t->len + (size_t)n + 1) * 2;
        char *s = realloc(t->s, cap);
        if (!s) {
            t->failed = true;
            return;
        }
        t->s = s;
        t->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(t->s + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    t->len += (size_t)n;
}

static void table_row(text *t, const prof_row *r, const window_sums *w)
{
    row_figures f = figures_of(r, w);
    char roof[16] = "      -";
    if (!isnan(f.roof_pct))
        snprintf(roof, sizeof roof, "%7.1f", f.roof_pct);
    bool family_row = strcmp(r->key, r->family) == 0;
    text_add(t, "\n  %8.1f %9.3f %6.1f %8.1f %8.3f %s  %-13s %s", f.calls, f.ms, f.pct, f.gbs, f.tflops,
             w->peaks ? roof : "", r->family, family_row ? "" : r->key);
}

static void table_header(text *t, const train_job *t_job, const window_sums *w)
{
    double step_ms = w->step_us / 1e3, ops_ms = w->ops_us / 1e3;
    text_add(t, "profile: rank 0, steps %lld-%lld (%lld of %lld planned) on %s", (long long)w->first_step + 1,
             (long long)(w->first_step + w->steps), (long long)w->steps, (long long)w->planned, t_job->dev->name);
    if (w->peaks)
        text_add(t, " (roofline: %s, %.0f bf16 / %.0f %s / %.1f fp32 TFLOP/s, %.0f GB/s)", w->peaks->name,
                 w->peaks->bf16_tflops, w->tf32 ? w->peaks->tf32_tflops : w->peaks->fp32_tflops,
                 w->tf32 ? "tf32 GEMM" : "fp32 GEMM", w->peaks->fp32_tflops, w->peaks->mem_gbs);
    else
        text_add(t, " (no roofline: not a GPU of the known-peaks table)");
    text_add(t, "\nprofile: step %.3f ms, in device ops %.3f ms (%.1f %%), not in any op %.3f ms%s", step_ms, ops_ms,
             100 * ops_ms / step_ms, step_ms - ops_ms, w->dropped ? "" : "; no range dropped");
    if (w->dropped)
        text_add(t, "; %llu ranges dropped (stamp capacity): the table misses them",
                 (unsigned long long)w->dropped);
    text_add(t, "\n  calls/st   ms/step %%step     GB/s  TFLOP/s %s  %-13s %s", w->peaks ? "%roofl" : "", "family",
             "op (shape)");
}

static char *format_table(const train_job *tj, const prof_rows *ops, const prof_rows *fams, const window_sums *w)
{
    text t = {0};
    table_header(&t, tj, w);
    size_t shown = 0;
    for (size_t i = 0; i < ops->n && shown < TABLE_OP_ROWS; i++)
        if (ops->rows[i].track == PROF_TRACK_COMPUTE && strcmp(ops->rows[i].family, "phase") != 0 && ++shown)
            table_row(&t, &ops->rows[i], w);
    if (ops->n > shown)
        text_add(&t, "\n  ... phases, collectives, host work and %s in profile.json",
                 shown == TABLE_OP_ROWS ? "the smaller ops" : "every row");
    text_add(&t, "\n  per family of device ops:");
    for (size_t i = 0; i < fams->n; i++)
        if (fams->rows[i].track == PROF_TRACK_COMPUTE && strcmp(fams->rows[i].family, "phase") != 0)
            table_row(&t, &fams->rows[i], w);
    if (t.failed) {
        free(t.s);
        return NULL;
    }
    return t.s;
}

/* ---- profile.json ---------------------------------------------------------------------------- */

static void json_number(FILE *f, const char *key, double v)
{
    if (isfinite(v))
        fprintf(f, "\"%s\":%.6g", key, v);
    else
        fprintf(f, "\"%s\":null", key);
}

static void json_rows(FILE *f, const char *name, const prof_rows *rows, const window_sums *w)
{
    static const char *const tracks[PROF_TRACKS] = {"compute", "comm", "host", "checkpoint writer"};
    fprintf(f, ",\"%s\":[", name);
    for (size_t i = 0; i < rows->n; i++) {
        const prof_row *r = &rows->rows[i];
        row_figures g = figures_of(r, w);
        fprintf(f, "%s\n{\"key\":\"", i ? "," : "");
        json_put_text(f, r->key, SIZE_MAX);
        fputs("\",\"family\":\"", f);
        json_put_text(f, r->family, SIZE_MAX);
        fprintf(f, "\",\"track\":\"%s\",", tracks[r->track]);
        json_number(f, "calls_per_step", g.calls);
        fputc(',', f);
        json_number(f, "ms_per_step", g.ms);
        fputc(',', f);
        json_number(f, "pct_of_step", g.pct);
        fputc(',', f);
        json_number(f, "gb_per_s", g.gbs);
        fputc(',', f);
        json_number(f, "tflop_per_s", g.tflops);
        fputc(',', f);
        json_number(f, "pct_of_roofline", g.roof_pct);
        fprintf(f, ",\"bytes_per_step\":%.0f,\"flops_per_step\":%.0f}", r->bytes / (double)w->steps,
                r->flops / (double)w->steps);
    }
    fprintf(f, "]");
}

typedef struct profile_doc {
    const train_job *t;
    const prof_rows *ops, *fams;
    const window_sums *w;
} profile_doc;

/* replace_file_stream's writer; write errors show in ferror(f) */
static int write_profile_doc(FILE *f, void *ctx, ddp_err *err)
{
    (void)err;
    const profile_doc *d = ctx;
    const train_job *t = d->t;
    const window_sums *w = d->w;
    fputs("{\"device\":\"", f);
    json_put_text(f, t->dev->name, SIZE_MAX);
    fprintf(f, "\",\"rank\":0,\"ranks\":%d,\"first_step\":%lld,\"steps\":%lld,\"planned_steps\":%lld,",
            t->ctl->size, (long long)w->first_step + 1, (long long)w->steps, (long long)w->planned);
    if (w->peaks) { /* the table's own names */
        fprintf(f, "\"peaks\":{\"gpu\":\"%s\",\"bf16_tflops\":%g,\"tf32_tflops\":%g,\"fp32_tflops\":%g,"
                "\"mem_gb_per_s\":%g,\"tf32_gemms\":%s},", w->peaks->name, w->peaks->bf16_tflops,
                w->peaks->tf32_tflops, w->peaks->fp32_tflops, w->peaks->mem_gbs, w->tf32 ? "true" : "false");
    }
    else
        fprintf(f, "\"peaks\":null,");
    fprintf(f, "\"step_ms\":%.6g,\"ops_ms_per_step\":%.6g,\"not_in_ops_ms_per_step\":%.6g,\"dropped\":%llu,",
            w->step_us / 1e3, w->ops_us / 1e3, (w->step_us - w->ops_us) / 1e3, (unsigned long long)w->dropped);
    fprintf(f, "\"overhead\":\"two stamps per op and per range; docs/profiling.md gives the measured cost\"");
    json_rows(f, "ops", d->ops, w);
    json_rows(f, "families", d->fams, w);
    fprintf(f, "}\n");
    return DDP_OK;
}

/* run.dir/profile.json, written whole (runtime/base/replace_file.h). */
static int write_json(const train_job *t, const prof_rows *ops, const prof_rows *fams, const window_sums *w,
                      ddp_err *err)
{
    char path[CFG_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/profile.json", t->cfg->run.dir);
    int rc = replace_file_stream(path, write_profile_doc, &(profile_doc){.t = t, .ops = ops, .fams = fams, .w = w},
                                 err);
    return rc ? ddp_prefix(err, "profile") : DDP_OK;
}

/* ---- the report ------------------------------------------------------------------------------ */

int train_profile_report(const train_job *t, const device_prof *rec, int64_t first_step, int64_t planned,
                         char **table, ddp_err *err)
{
    size_t n = 0;
    int n_marks = 0;
    const prof_record *recs = device_prof_records(rec, &n);
    const double *marks = device_prof_marks(rec, &n_marks);
    if (n_marks < 2)
        return ddp_fail(err, DDP_ERUNTIME, "profile: the window has %d step marks, no whole step", n_marks);
    window_sums w = {.first_step = first_step, .planned = planned, .steps = n_marks - 1,
                     .dropped = device_prof_dropped(rec), .peaks = peaks_of(t->dev), .tf32 = t->cfg->cuda.tf32};
    w.step_us = (marks[n_marks - 1] - marks[0]) / (double)w.steps;
    for (size_t i = 0; i < n; i++)
        if (is_op(&recs[i]))
            w.ops_us += (recs[i].end_us - recs[i].begin_us) / (double)w.steps;
    prof_rows ops = {0}, fams = {0};
    int rc = group(recs, n, &ops, &fams) == 0 ? DDP_OK : ddp_fail(err, DDP_ERUNTIME, "profile: out of memory");
    if (rc == DDP_OK)
        rc = write_json(t, &ops, &fams, &w, err);
    if (rc == DDP_OK && !(*table = format_table(t, &ops, &fams, &w)))
        rc = ddp_fail(err, DDP_ERUNTIME, "profile: out of memory for the table");
    free(ops.rows);
    free(fams.rows);
    return rc;
}
