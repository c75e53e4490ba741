/* cpu_ref.h — what the tests of the CPU backend's ops against double-precision references share
 * (test_transformer_cpu.c, test_llama_cpu.c): the CPU device, a seeded RNG, an arena of host
 * buffers, float/double buffer helpers, the elementwise check against a reference with a bound per
 * element, the bit-for-bit check, central finite differences of a double reference loss, and the
 * check that an op gives the same bits at 1 and 2 OpenMP threads. Header-only and test-only; the
 * including test opens `dev` (device_cpu_create) and calls ops through its checked table.
 *
 * Tolerances come from float32 rounding (u = FLT_EPSILON/2 per operation), never from observed
 * errors. A failure names the op and its worst element; TEST_VERBOSE=1 prints every check's worst
 * error/tolerance ratio. */
#ifndef DDP_TEST_CPU_REF_H
#define DDP_TEST_CPU_REF_H

#include "runtime/device/device.h"

#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EPS ((double)FLT_EPSILON) /* 2u: twice the unit roundoff of one float operation */

/* Central differences in double with h = 1e-4·max(1,|x|) (|x| <= 12 here): truncation
 * h²|f'''|/6 <= 2.4e-7·|f'''|, |f'''| = O(1) for these functions; cancellation
 * ~DBL_EPSILON·Σ|loss terms|/h <= 2e-7 (Σ|terms| < 1e5). FD_SLACK, absolute plus relative, sits
 * above both and far below a wrong formula's error, which is the size of the gradient itself. */
#define FD_STEP 1e-4
#define FD_SLACK 1e-6

static int n_checks, n_failed;
static device *dev;

/* Calls a device op that must succeed on valid arguments. */
#define DEV(op, ...)                                                                               \
    do {                                                                                           \
        ddp_err dev_err_ = {0};                                                                    \
        if (dev->ops->op(dev, __VA_ARGS__, &dev_err_))                                             \
            fail(#op, "failed: %s", dev_err_.msg);                                                 \
    } while (0)

/* ---- utilities --------------------------------------------------------------------------- */

static uint64_t rng_s = 20240601;
static inline uint64_t rng_next(void)
{
    uint64_t z = (rng_s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static inline double urand(void) { return (double)(rng_next() >> 11) * 0x1.0p-53; }
static inline int64_t irand(int64_t n) { return (int64_t)(rng_next() % (uint64_t)n); }

/* Every buffer goes on one list, freed by arena_free() at the end of each test. */
static void **arena;
static size_t arena_n, arena_cap;
static inline void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (arena_n == arena_cap)
        arena = realloc(arena, (arena_cap = 2 * arena_cap + 64) * sizeof *arena);
    if (!p || !arena) {
        fprintf(stderr, "out of memory (%zu bytes)\n", bytes);
        exit(2);
    }
    return arena[arena_n++] = p;
}
static inline void arena_free(void)
{
    while (arena_n)
        free(arena[--arena_n]);
}
static inline float *frand(size_t n, double lo, double hi)
{
    float *x = xmalloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(lo + (hi - lo) * urand());
    return x;
}
static inline float *fnan(size_t n)
{
    float *x = xmalloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = NAN;
    return x;
}
static inline float *fdup(const float *x, size_t n) { return memcpy(xmalloc(n * sizeof *x), x, n * sizeof *x); }
static inline double *dzero(size_t n) { return memset(xmalloc(n * sizeof(double)), 0, n * sizeof(double)); }
static inline double *todbl(const float *x, size_t n)
{
    double *d = xmalloc(n * sizeof *d);
    for (size_t i = 0; i < n; i++)
        d[i] = x[i];
    return d;
}
static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline void fail(const char *op, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL %s: ", op);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    n_failed++;
}

/* |got - ref| <= bound elementwise (bound 0: exact); reports the worst element by error/bound. */
static inline void check_close(const char *op, const char *what, const float *got, const double *ref,
                               const double *bound, size_t n)
{
    n_checks++;
    size_t worst = 0;
    double worst_ratio = -1.0;
    for (size_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - ref[i]);
        double ratio = err == 0.0 ? 0.0 : bound[i] > 0.0 && !isnan(err) ? err / bound[i] : INFINITY;
        if (ratio > worst_ratio)
            worst_ratio = ratio, worst = i;
    }
    if (getenv("TEST_VERBOSE"))
        fprintf(stderr, "  %-28s %-40.40s worst error/tolerance %.3g\n", op, what, worst_ratio);
    if (worst_ratio > 1.0)
        fail(op, "%s: worst element %zu of %zu: got %.9g, want %.12g, |err| %.3g > tolerance %.3g", what, worst, n,
             (double)got[worst], ref[worst], fabs((double)got[worst] - ref[worst]), bound[worst]);
}

static inline void check_bits(const char *op, const char *what, const float *a, const float *b, size_t n)
{
    n_checks++;
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof *a) != 0) {
            fail(op, "%s: element %zu of %zu differs: %.9g vs %.9g", what, i, n, (double)a[i], (double)b[i]);
            return;
        }
}

/* Central differences of `loss` (a double reference) at a few entries of x vs the kernel's grad. */
typedef double (*loss_fn)(const void *ctx);
static inline void fd_check(const char *op, const char *what, loss_fn loss, const void *ctx, double *x, size_t n,
                            const float *grad, const double *bound)
{
    n_checks++;
    for (int s = 0; s < 6 && (size_t)s < n; s++) {
        size_t i = s == 0 ? 0 : s == 1 ? n - 1 : (size_t)irand((int64_t)n);
        double v = x[i], xp = v + FD_STEP * fmax(1.0, fabs(v)), xm = v - FD_STEP * fmax(1.0, fabs(v));
        x[i] = xp;
        double lp = loss(ctx);
        x[i] = xm;
        double lm = loss(ctx);
        x[i] = v;
        double fd = (lp - lm) / (xp - xm), tol = bound[i] + FD_SLACK * (1.0 + fabs(fd));
        if (!(fabs((double)grad[i] - fd) <= tol)) {
            fail(op, "finite difference of %s at element %zu of %zu: kernel %.9g, central difference %.9g, "
                     "|err| %.3g > %.3g", what, i, n, (double)grad[i], fd, fabs((double)grad[i] - fd), tol);
            return;
        }
    }
}

/* Runs `run` from the same outputs with 1 and then 2 threads: every output must match bit for bit. */
typedef struct { float *p; size_t n; } span;
static inline void check_threads(const char *op, void (*run)(void *), void *ctx, const span *outs, int nout)
{
    float *init[8], *first[8];
    for (int i = 0; i < nout; i++)
        init[i] = fdup(outs[i].p, outs[i].n);
    omp_set_num_threads(1);
    run(ctx);
    for (int i = 0; i < nout; i++) {
        first[i] = fdup(outs[i].p, outs[i].n);
        memcpy(outs[i].p, init[i], outs[i].n * sizeof(float));
    }
    omp_set_num_threads(2);
    run(ctx);
    for (int i = 0; i < nout; i++)
        check_bits(op, "1 vs 2 threads", first[i], outs[i].p, outs[i].n);
}

#endif
