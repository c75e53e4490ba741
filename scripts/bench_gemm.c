/* bench_gemm.c — measures the two candidate CPU GEMM libraries (oneDNN dnnl_sgemm and OpenBLAS
 * cblas_sgemm) on the exact GEMMs one MLP training step runs, so the meson option cpu_gemm is
 * chosen by numbers rather than by habit.
 *
 * Shapes: layers 784-1024-1024-10 at batch 256 and 128; per layer the forward Y = X·Wᵀ, the weight
 * gradient dW = dYᵀ·X and (except the first layer, whose input gradient nobody needs) the input
 * gradient dX = dY·W. Prints GFLOP/s per GEMM and for the whole step. Thread count comes from
 * --threads N and is applied to both libraries (OpenMP for oneDNN, openblas_set_num_threads for
 * OpenBLAS); --threads 0 leaves both at what the environment (OMP_NUM_THREADS) gives them.
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

static void run_gemm(int lib, const gemm_shape *s, const float *a, const float *b, float *c)
{
    int lda = s->ta ? s->m : s->k, ldb = s->tb ? s->k : s->n, ldc = s->n;
    if (lib == 0) {
        dnnl_status_t st = dnnl_sgemm(s->ta ? 'T' : 'N', s->tb ? 'T' : 'N', s->m, s->n, s->k, 1.0f, a,
                                      lda, b, ldb, 0.0f, c, ldc);
        if (st != dnnl_success) {
            fprintf(stderr, "dnnl_sgemm failed: status %d\n", (int)st);
            exit(1);
        }
    } else {
        cblas_sgemm(CblasRowMajor, s->ta ? CblasTrans : CblasNoTrans, s->tb ? CblasTrans : CblasNoTrans,
                    s->m, s->n, s->k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
    }
}

/* Mean seconds per call over at least min_time seconds, after two warm-up calls. */
static double time_gemm(int lib, const gemm_shape *s, const float *a, const float *b, float *c, double min_time)
{
    run_gemm(lib, s, a, b, c);
    run_gemm(lib, s, a, b, c);
    int reps = 0;
    double t0 = monotonic_s(), t;
    do {
        run_gemm(lib, s, a, b, c);
        reps++;
        t = monotonic_s() - t0;
    } while (t < min_time);
    return t / reps;
}

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

int main(int argc, char **argv)
{
    int threads = 1;
    double min_time = 0.3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--min-time") && i + 1 < argc)
            min_time = atof(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--threads N] [--min-time SECONDS]\n", argv[0]);
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
        gemm_shape shapes[9];
        int ns = build_shapes(batch, shapes);
        for (int lib = 0; lib < 2; lib++) {
            double total_flop = 0, total_s = 0;
            for (int i = 0; i < ns; i++) {
                const gemm_shape *s = &shapes[i];
                double sec = time_gemm(lib, s, a, b, c, min_time);
                double flop = 2.0 * s->m * s->n * s->k;
                total_flop += flop;
                total_s += sec;
                printf("%-8s %5d %-13s %5d %5d %5d %10.1f %10.2f\n", names[lib], batch, s->what, s->m, s->n,
                       s->k, sec * 1e6, flop / sec * 1e-9);
            }
            printf("%-8s %5d %-13s %29.1f %10.2f   <- whole step\n", names[lib], batch, "TOTAL", total_s * 1e6,
                   total_flop / total_s * 1e-9);
        }
    }
    free(a);
    free(b);
    free(c);
    return 0;
}
