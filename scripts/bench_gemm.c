/* bench_gemm.c — measures the two candidate CPU GEMM libraries (oneDNN dnnl_sgemm and OpenBLAS
 * cblas_sgemm) on the exact GEMMs one MLP training step runs, so the meson option cpu_gemm is
 * chosen by numbers rather than by habit.
 *
 * Shapes: layers 784-1024-1024-10 at batch 256 and 128; per layer the forward Y = X·Wᵀ, the weight
 * gradient dW = dYᵀ·X and (except the first layer, whose input gradient nobody needs) the input
 * gradient dX = dY·W. Prints GFLOP/s per GEMM and for the whole step. Thread count comes from
 * --threads N and is applied to both libraries (OpenMP for oneDNN, openblas_set_num_threads for
 * OpenBLAS); --threads 0 leaves both at what the environment (OMP_NUM_THREADS) gives them.
 * --lib and --batch narrow that to one library and one batch (scripts/bench-train's ceiling).
 * With --shapes FILE (scripts/bench-gpt) it instead times the GEMMs listed in FILE ("-" for
 * stdin) with one library (--lib onednn|openblas, default onednn), one line per GEMM:
 *     NAME COUNT TA TB M N K BETA BATCH        (TA/TB: N or T; '#' starts a comment)
 * row-major, lda/ldb/ldc the packed ones; BATCH > 1 runs BATCH independent copies the way the CPU
 * attention op runs its per-(sequence, head) GEMMs (runtime/device/kernels/attention_cpu.c; oneDNN:
 * one dnnl_sgemm per copy inside an OpenMP loop, each on its thread; OpenBLAS: one threaded call
 * after another). Each GEMM's time is the median of its timed calls (at least
 * 3, and at least --min-time seconds); the TOTAL line weighs each by COUNT (how often a training
 * step runs it), which gives a GEMM-only time per step.
 * This program only measures: it must not assert on timings or change the CPU type OpenBLAS
 * picks (OPENBLAS_CORETYPE is left as the environment sets it). */
#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/clock.h"

typedef struct gemm_shape {
    const char *what;
    bool ta, tb;
    int m, n, k;
} gemm_shape;

static int build_shapes(int batch, gemm_shape *out)
{
    static const int dims[] = {784, 1024, 1024, 10};
    int n = 0;
    for (int l = 0; l < 3; l++) {
        int in = dims[l], outf = dims[l + 1];
        out[n++] = (gemm_shape){"fwd  Y=X.Wt ", false, true, batch, outf, in};
        out[n++] = (gemm_shape){"bwd dW=dYt.X", true, false, outf, in, batch};
        if (l > 0)
            out[n++] = (gemm_shape){"bwd dX=dY.W ", false, false, batch, in, outf};
    }
    return n;
}

/* ---- --shapes mode: a list of GEMMs, each with how often a step runs it -------------------- */

typedef struct listed_gemm {
    char name[32];
    double count;
    gemm_shape s;
    float beta;
    long batch;
} listed_gemm;

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* One call of a listed GEMM; a batch runs like the CPU attention op's units (attention_cpu.c). */
static void run_listed(int lib, const listed_gemm *g, const float *a, const float *b, float *c)
{
    const gemm_shape *s = &g->s;
    int lda = s->ta ? s->m : s->k, ldb = s->tb ? s->k : s->n, ldc = s->n;
    size_t sa = (size_t)s->m * s->k, sb = (size_t)s->k * s->n, sc = (size_t)s->m * s->n;
    if (lib == 0) {
        const char ca = s->ta ? 'T' : 'N', cb = s->tb ? 'T' : 'N';
        if (g->batch == 1) {
            if (dnnl_sgemm(ca, cb, s->m, s->n, s->k, 1.0f, a, lda, b, ldb, g->beta, c, ldc) != dnnl_success)
                exit(1);
            return;
        }
        int failed = 0;
#pragma omp parallel for schedule(static)
        for (long i = 0; i < g->batch; i++) {
            if (dnnl_sgemm(ca, cb, s->m, s->n, s->k, 1.0f, a + i * sa, lda, b + i * sb, ldb, g->beta, c + i * sc,
                           ldc) != dnnl_success) {
#pragma omp atomic write
                failed = 1;
            }
        }
        if (failed)
            exit(1);
        return;
    }
    for (long i = 0; i < g->batch; i++)
        cblas_sgemm(CblasRowMajor, s->ta ? CblasTrans : CblasNoTrans, s->tb ? CblasTrans : CblasNoTrans, s->m, s->n,
                    s->k, 1.0f, a + i * sa, lda, b + i * sb, ldb, g->beta, c + i * sc, ldc);
}

/* Median seconds per call: one warm-up call, then at least 3 timed calls and min_time seconds. */
static double time_listed(int lib, const listed_gemm *g, const float *a, const float *b, float *c, double min_time)
{
    enum { MAX_REPS = 4096 };
    static double t[MAX_REPS];
    run_listed(lib, g, a, b, c);
    int reps = 0;
    double start = monotonic_s(), now = start;
    while (reps < MAX_REPS && (reps < 3 || now - start < min_time)) {
        double t0 = monotonic_s();
        run_listed(lib, g, a, b, c);
        now = monotonic_s();
        t[reps++] = now - t0;
    }
    qsort(t, (size_t)reps, sizeof t[0], cmp_double);
    return reps % 2 ? t[reps / 2] : 0.5 * (t[reps / 2 - 1] + t[reps / 2]);
}

/* One of the MLP's GEMMs, timed as a listed one (the median of its calls), so that both modes
 * measure alike. */
static double time_gemm(int lib, const gemm_shape *s, const float *a, const float *b, float *c, double min_time)
{
    listed_gemm g = {.count = 1, .s = *s, .beta = 0.0f, .batch = 1};
    return time_listed(lib, &g, a, b, c, min_time);
}

static int run_shape_list(const char *path, int lib, double min_time)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "r") : stdin;
    if (!f) {
        perror(path);
        return 2;
    }
    enum { MAX_GEMMS = 1024 };
    static listed_gemm list[MAX_GEMMS];
    int n = 0, lineno = 0;
    size_t max_a = 1, max_b = 1, max_c = 1;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = 0;
        char name[32], ta, tb;
        double count;
        long m, nn, k, batch;
        float beta;
        int got = sscanf(line, "%31s %lf %c %c %ld %ld %ld %f %ld", name, &count, &ta, &tb, &m, &nn, &k, &beta, &batch);
        if (got <= 0)
            continue;
        if (got != 9 || (ta != 'N' && ta != 'T') || (tb != 'N' && tb != 'T') || m < 1 || nn < 1 || k < 1 ||
            batch < 1 || count < 0 || n == MAX_GEMMS) {
            fprintf(stderr, "%s:%d: expected NAME COUNT TA TB M N K BETA BATCH (at most %d lines)\n", path, lineno,
                    MAX_GEMMS);
            return 2;
        }
        listed_gemm *g = &list[n++];
        snprintf(g->name, sizeof g->name, "%s", name);
        g->count = count;
        g->s = (gemm_shape){g->name, ta == 'T', tb == 'T', (int)m, (int)nn, (int)k};
        g->beta = beta;
        g->batch = batch;
        size_t sa = (size_t)m * k * batch, sb = (size_t)k * nn * batch, sc = (size_t)m * nn * batch;
        max_a = sa > max_a ? sa : max_a;
        max_b = sb > max_b ? sb : max_b;
        max_c = sc > max_c ? sc : max_c;
    }
    if (f != stdin)
        fclose(f);
    float *a = aligned_alloc(64, (max_a + 15) / 16 * 64), *b = aligned_alloc(64, (max_b + 15) / 16 * 64),
          *c = aligned_alloc(64, (max_c + 15) / 16 * 64);
    if (!a || !b || !c) {
        fprintf(stderr, "out of memory for the GEMM buffers\n");
        return 1;
    }
    for (size_t i = 0; i < max_a; i++)
        a[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
    for (size_t i = 0; i < max_b; i++)
        b[i] = (float)((i * 104729) % 1000) / 1000.0f - 0.5f;
    memset(c, 0, max_c * sizeof *c);
    static const char *names[] = {"onednn", "openblas"};
    printf("%-8s %-14s %6s %2s %2s %6s %6s %6s %4s %5s %11s %9s\n", "lib", "gemm", "count", "ta", "tb", "m", "n", "k",
           "beta", "batch", "us", "GFLOP/s");
    double total_flop = 0, total_s = 0;
    for (int i = 0; i < n; i++) {
        const listed_gemm *g = &list[i];
        double sec = time_listed(lib, g, a, b, c, min_time);
        double flop = 2.0 * g->s.m * g->s.n * g->s.k * (double)g->batch;
        total_flop += g->count * flop;
        total_s += g->count * sec;
        printf("%-8s %-14s %6g %2c %2c %6d %6d %6d %4g %5ld %11.1f %9.2f\n", names[lib], g->name, g->count,
               g->s.ta ? 'T' : 'N', g->s.tb ? 'T' : 'N', g->s.m, g->s.n, g->s.k, g->beta, g->batch, sec * 1e6,
               flop / sec * 1e-9);
    }
    printf("%-8s %-14s %.0f FLOP %.1f us %.2f GFLOP/s   <- TOTAL, each GEMM times its count\n", names[lib], "TOTAL",
           total_flop, total_s * 1e6, total_s > 0 ? total_flop / total_s * 1e-9 : 0.0);
    free(a);
    free(b);
    free(c);
    return 0;
}

int main(int argc, char **argv)
{
    int threads = 1, lib = 0, lib_given = 0, only_batch = 0;
    double min_time = 0.3;
    const char *shapes = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--min-time") && i + 1 < argc)
            min_time = atof(argv[++i]);
        else if (!strcmp(argv[i], "--shapes") && i + 1 < argc)
            shapes = argv[++i];
        else if (!strcmp(argv[i], "--lib") && i + 1 < argc && (!strcmp(argv[i + 1], "onednn") ||
                                                                !strcmp(argv[i + 1], "openblas")))
            lib = !strcmp(argv[++i], "openblas"), lib_given = 1;
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc && (!strcmp(argv[i + 1], "256") ||
                                                                  !strcmp(argv[i + 1], "128")))
            only_batch = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--threads N] [--min-time SECONDS] [--lib onednn|openblas] "
                            "[--batch 256|128 | --shapes FILE|-]\n", argv[0]);
            return 2;
        }
    }
    if (threads > 0) {
        omp_set_num_threads(threads);
        openblas_set_num_threads(threads);
    }
    const dnnl_version_t *v = dnnl_version();
    printf("# threads %d (OpenMP max %d, OpenBLAS %d); oneDNN %d.%d.%d; OpenBLAS %s (core %s)\n", threads, omp_get_max_threads(), openblas_get_num_threads(), v->major, v->minor, v->patch,
           openblas_get_config(), openblas_get_corename());
    if (shapes)
        return run_shape_list(shapes, lib, min_time);

    size_t maxel = 1024 * 1024;
    float *a = aligned_alloc(64, maxel * 4), *b = aligned_alloc(64, maxel * 4), *c = aligned_alloc(64, maxel * 4);
    if (!a || !b || !c)
        return 1;
    for (size_t i = 0; i < maxel; i++) {
        a[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
        b[i] = (float)((i * 104729) % 1000) / 1000.0f - 0.5f;
    }
    static const char *names[] = {"onednn", "openblas"};
    printf("%-8s %5s %-13s %5s %5s %5s %10s %10s\n", "lib", "batch", "gemm", "m", "n", "k", "us", "GFLOP/s");
    for (int batch = 256; batch >= 128; batch /= 2) {
        if (only_batch && batch != only_batch)
            continue;
        gemm_shape shapes[9];
        int ns = build_shapes(batch, shapes);
        for (int l = 0; l < 2; l++) {
            if (lib_given && l != lib)
                continue;
            double total_flop = 0, total_s = 0;
            for (int i = 0; i < ns; i++) {
                const gemm_shape *s = &shapes[i];
                double sec = time_gemm(l, s, a, b, c, min_time);
                double flop = 2.0 * s->m * s->n * s->k;
                total_flop += flop;
                total_s += sec;
                printf("%-8s %5d %-13s %5d %5d %5d %10.1f %10.2f\n", names[l], batch, s->what, s->m, s->n,
                       s->k, sec * 1e6, flop / sec * 1e-9);
            }
            printf("%-8s %5d %-13s %29.1f %10.2f   <- whole step\n", names[l], batch, "TOTAL", total_s * 1e6,
                   total_flop / total_s * 1e-9);
        }
    }
    free(a);
    free(b);
    free(c);
    return 0;
}
