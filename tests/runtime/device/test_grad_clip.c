/* test_grad_clip.c — clipping by global gradient norm on the device, on every backend: the sumsq
 * op's sum of squares and the clip_scale op's factor against a double-precision host reference,
 * the optimizer steps reading that factor from device memory, and optim's clipping path
 * (optim_grad_norm, optim_step) issuing no op that waits for the device, and ZeRO's optimizer
 * over parts (the sum of squares of its parts, their updates equal to the whole optimizer's).
 *
 * Cases: random gradients of several sizes (past both grid caps of the reduction), clipping
 * active and inactive (norm below max_norm: a factor of exactly 1), infinite and NaN gradients
 * (factor 0 and NaN, as torch.nn.utils.clip_grad_norm_ gives), float gradients whose squares
 * overflow float but not double, and sums of squares put straight into the device scalar, whose
 * factor must be the host formula's bits. The factor on each backend must be, bit for bit, the
 * reference applied to that backend's own sum (the two backends add in different orders, so
 * their sums may differ in the last bits; both must be within 1e-12 of the host's).
 *
 * Runs on the CPU backend always and on CUDA when a GPU (or, in the emulated build, the
 * emulator) answers; `--require-cuda` makes a missing CUDA device a failure. DDP_TEST_SEED
 * repeats a run's random inputs. Built with DDP_TEST_CUDAEMU (the emulated build), it also counts
 * the CUDA calls that block the host during optimizer steps. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime/base/rng.h"
#include "runtime/device/device.h"
#include "runtime/optim/optim.h"
#include "tests/check.h"
#ifdef DDP_TEST_CUDAEMU
#include "tests/cudaemu/cudaemu.h"
#endif

static rng test_rng;
static const char *backend = "?"; /* the backend under test, for messages */

static void die_on(int rc, const ddp_err *err, const char *what)
{
    if (rc) {
        fprintf(stderr, "FATAL: %s on %s: %s\n", what, backend, err->msg);
        exit(1);
    }
}

static void *dev_alloc(device *d, size_t bytes)
{
    ddp_err err = {0};
    void *p = NULL;
    die_on(d->ops->alloc(d, bytes, &p, &err), &err, "alloc");
    return p;
}

static void *dev_from_host(device *d, const void *h, size_t bytes)
{
    ddp_err err = {0};
    void *p = dev_alloc(d, bytes);
    die_on(d->ops->upload(d, p, h, bytes, &err), &err, "upload");
    return p;
}

static void to_host(device *d, void *h, const void *p, size_t bytes)
{
    ddp_err err = {0};
    die_on(d->ops->download(d, h, p, bytes, &err), &err, "download");
}

/* Random floats in ±[0.05, scale): never zero, mixed signs. */
static float *random_floats(size_t n, float scale)
{
    float *h = malloc((n ? n : 1) * sizeof *h);
    for (size_t i = 0; i < n; i++) {
        float mag = rng_uniform(&test_rng, 0.05f, scale);
        h[i] = rng_below(&test_rng, 2) ? mag : -mag;
    }
    return h;
}

/* ---- the host reference, written apart from the ops' code ---------------------------------- */

static double ref_sumsq(const float *x, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += (double)x[i] * (double)x[i];
    return s;
}

/* torch.nn.utils.clip_grad_norm_: clip_coef = max_norm / (total_norm + 1e-6), then
 * clamp(clip_coef, max=1.0), which keeps a NaN; the gradients are multiplied by it in float32. */
static float ref_scale(double sumsq, double max_norm)
{
    double coef = max_norm / (sqrt(sumsq) + 1e-6);
    if (isnan(coef))
        return NAN;
    return coef < 1.0 ? (float)coef : 1.0f;
}

static bool same_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

/* The device's sum of squares of x[0..n), read back. */
static double device_sumsq(device *d, const float *x, size_t n, double *out)
{
    ddp_err err = {0};
    double v = -1.0;
    die_on(d->ops->sumsq(d, x, n, out, &err), &err, "sumsq");
    to_host(d, &v, out, sizeof v);
    return v;
}

/* The device's clip factor for the sum of squares in *sumsq, read back. */
static float device_scale(device *d, const double *sumsq, double max_norm, float *scale)
{
    ddp_err err = {0};
    float v = -1.0f;
    die_on(d->ops->clip_scale(d, sumsq, max_norm, scale, &err), &err, "clip_scale");
    to_host(d, &v, scale, sizeof v);
    return v;
}

/* ---- norms and factors of random gradients --------------------------------------------------- */

static void random_gradients(device *d)
{
    const size_t sizes[] = {1, 7, 256, 257, 4097, 100003, 300000};
    double *sumsq = dev_alloc(d, sizeof *sumsq);
    float *scale = dev_alloc(d, sizeof *scale);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        float *h = random_floats(n, 3.0f), *x = dev_from_host(d, h, n * sizeof *h);
        double want = ref_sumsq(h, n), got = device_sumsq(d, x, n, sumsq);
        CHECK(fabs(got - want) <= 1e-12 * want, "%s: sumsq n=%zu: %.17g, host %.17g", backend, n, got, want);
        double norm = sqrt(want);
        /* active (norm twice max_norm), at the limit (max_norm == norm: coef just below 1, which
         * rounds to a float 1 once norm passes ~33), inactive (max_norm twice the norm, and far
         * above it) */
        const double max_norms[] = {0.5 * norm, norm, 2.0 * norm, 1e6 * norm};
        for (size_t k = 0; k < sizeof max_norms / sizeof max_norms[0]; k++) {
            double mn = max_norms[k];
            float f = device_scale(d, sumsq, mn, scale);
            CHECK(same_bits(f, ref_scale(got, mn)), "%s: n=%zu max_norm %.9g: scale %.9g, reference on the "
                  "device's own sum %.9g", backend, n, mn, (double)f, (double)ref_scale(got, mn));
            CHECK_CLOSE(f, ref_scale(want, mn), 1e-6, 0);
            if (k >= 2 || (k == 1 && norm > 40.0))
                CHECK(f == 1.0f, "%s: n=%zu: clipping inactive (norm %.9g, max_norm %.9g) but scale %.9g", backend,
                      n, norm, mn, (double)f);
            else if (k == 0 || norm < 30.0)
                CHECK(f < 1.0f, "%s: n=%zu: clipping active (norm %.9g, max_norm %.9g) but scale %.9g", backend, n,
                      norm, mn, (double)f);
        }
        d->ops->free(d, x);
        free(h);
    }
    d->ops->free(d, sumsq);
    d->ops->free(d, scale);
}

/* ---- factors of given sums of squares, bit for bit -------------------------------------------- */

static void exact_sums(device *d)
{
    const struct {
        double sumsq, max_norm;
    } cases[] = {
        {25.0, 10.0},      /* norm 5 below 10: inactive, 1 */
        {25.0, 5.0},       /* at the limit: 5 / (5 + 1e-6) */
        {25.0, 2.5},       /* active */
        {0.0, 1.0},        /* zero gradients: coef 1e6, inactive */
        {1e-30, 1e-9},     /* tiny norm: 1e-9 / (1e-15 + 1e-6) */
        {1e300, 1.0},      /* huge finite norm: the factor underflows float to 0 */
        {4e76, 1.0},       /* norm 2e38 (float max 3.4e38): a factor in float's subnormals */
        {INFINITY, 1.0},   /* infinite norm: coef 0 */
        {NAN, 1.0},        /* NaN norm: coef NaN */
        {2.0, INFINITY},   /* no limit at all: 1 */
    };
    double *sumsq = dev_alloc(d, sizeof *sumsq);
    float *scale = dev_alloc(d, sizeof *scale);
    ddp_err err = {0};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        die_on(d->ops->upload(d, sumsq, &cases[c].sumsq, sizeof(double), &err), &err, "upload");
        float f = device_scale(d, sumsq, cases[c].max_norm, scale), want = ref_scale(cases[c].sumsq, cases[c].max_norm);
        uint32_t bits;
        memcpy(&bits, &f, sizeof bits);
        CHECK(isnan(want) ? isnan(f) : same_bits(f, want), "%s: sumsq %g max_norm %g: scale %.9g (0x%08x), "
              "reference %.9g", backend, cases[c].sumsq, cases[c].max_norm, (double)f, (unsigned)bits,
              (double)want);
    }
    /* the formula's shape, by hand: inactive is exactly 1, infinite is exactly +0 */
    CHECK(ref_scale(25.0, 10.0) == 1.0f && same_bits(ref_scale(INFINITY, 1.0), 0.0f) && isnan(ref_scale(NAN, 1.0)),
          "the host reference itself");
    CHECK(ref_scale(25.0, 2.5) == (float)(2.5 / (5.0 + 1e-6)), "the host reference itself (active)");
    d->ops->free(d, sumsq);
    d->ops->free(d, scale);
}

/* ---- non-finite and float-overflowing gradients ---------------------------------------------- */

static void nonfinite_gradients(device *d)
{
    enum { N = 1000 };
    double *sumsq = dev_alloc(d, sizeof *sumsq);
    float *scale = dev_alloc(d, sizeof *scale);
    const struct {
        size_t at;
        float value;
        const char *what;
    } cases[] = {{517, INFINITY, "+inf"}, {999, -INFINITY, "-inf"}, {3, NAN, "NaN"}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        float *h = random_floats(N, 1.0f);
        h[cases[c].at] = cases[c].value;
        float *x = dev_from_host(d, h, N * sizeof *h);
        double got = device_sumsq(d, x, N, sumsq);
        float f = device_scale(d, sumsq, 1.0, scale);
        if (isnan(cases[c].value)) {
            CHECK(isnan(got), "%s: a NaN gradient: sumsq %g, expected NaN", backend, got);
            CHECK(isnan(f), "%s: a NaN gradient: scale %g, expected NaN (clip_grad_norm_)", backend, (double)f);
        } else {
            CHECK(isinf(got) && got > 0, "%s: a %s gradient: sumsq %g, expected +inf", backend, cases[c].what, got);
            CHECK(same_bits(f, 0.0f), "%s: a %s gradient: scale %g, expected 0 (clip_grad_norm_)", backend,
                  cases[c].what, (double)f);
        }
        d->ops->free(d, x);
        free(h);
    }
    /* squares past float's range: a float sum would be inf, the double sum is finite */
    float big[4] = {3e38f, -3e38f, 2e38f, 1.0f};
    float *x = dev_from_host(d, big, sizeof big);
    double want = ref_sumsq(big, 4), got = device_sumsq(d, x, 4, sumsq);
    CHECK(isfinite(got) && fabs(got - want) <= 1e-15 * want, "%s: sumsq of float-overflowing squares %g, host %g",
          backend, got, want);
    float f = device_scale(d, sumsq, 1.0, scale);
    CHECK(same_bits(f, ref_scale(got, 1.0)) && f > 0.0f, "%s: scale %g for norm %g, reference %g", backend,
          (double)f, sqrt(got), (double)ref_scale(got, 1.0));
    d->ops->free(d, x);
    d->ops->free(d, sumsq);
    d->ops->free(d, scale);
}

/* ---- the optimizer steps read the factor from device memory ---------------------------------- */

/* p after one step of kind (0 SGD with momentum and decay, 1 AdamW) from p0 with gradients g and
 * the device scale `scale` (NULL: none). */
static void one_step(device *d, int kind, const float *p0, const float *g, const float *scale, size_t n, float *out)
{
    ddp_err err = {0};
    float *p = dev_from_host(d, p0, n * sizeof *p0), *gd = dev_from_host(d, g, n * sizeof *g);
    float *m = dev_alloc(d, n * sizeof *m), *v = dev_alloc(d, n * sizeof *v);
    die_on(d->ops->fill(d, TENSOR_F32, m, n, 0.0f, &err) || d->ops->fill(d, TENSOR_F32, v, n, 0.0f, &err), &err, "fill");
    if (kind == 0) {
        /* no weight decay: nvcc may fuse g*scale into an FMA with wd*p, rounding differently from
         * the host's product (the comparison below is bit for bit) */
        sgd_args a = {.lr = 0.1f, .momentum = 0.9f, .first_step = true};
        die_on(d->ops->sgd_step(d, p, gd, scale, m, n, &a, &err), &err, "sgd_step");
    } else {
        adamw_args a = optim_adamw_args(1e-3, 0.9, 0.95, 1e-8, 0.1, 1);
        die_on(d->ops->adamw_step(d, p, gd, scale, m, v, n, &a, &err), &err, "adamw_step");
    }
    to_host(d, out, p, n * sizeof *out);
    d->ops->free(d, p);
    d->ops->free(d, gd);
    d->ops->free(d, m);
    d->ops->free(d, v);
}

/* A step given the device factor equals, bit for bit, the same step without a factor on
 * gradients the host multiplied by it first (clip_grad_norm_ scales in place); a factor of 1
 * (clipping inactive) equals no factor at all. */
static void steps_read_the_factor(device *d)
{
    enum { N = 3000 };
    float *p0 = random_floats(N, 1.0f), *g = random_floats(N, 2.0f), *pre = malloc(N * sizeof *pre);
    float *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
    double *sumsq = dev_alloc(d, sizeof *sumsq);
    float *scale = dev_alloc(d, sizeof *scale);
    float *gd = dev_from_host(d, g, N * sizeof *g);
    double s2 = device_sumsq(d, gd, N, sumsq);
    for (int kind = 0; kind < 2; kind++) {
        const char *name = kind ? "adamw_step" : "sgd_step";
        float f = device_scale(d, sumsq, 0.25 * sqrt(s2), scale);
        CHECK(f > 0.2f && f < 0.3f, "%s: scale %g for a quarter of the norm", backend, (double)f);
        for (size_t i = 0; i < N; i++)
            pre[i] = g[i] * f;
        one_step(d, kind, p0, g, scale, N, a);
        one_step(d, kind, p0, pre, NULL, N, b);
        CHECK(memcmp(a, b, N * sizeof *a) == 0, "%s: %s with the device scale %g differs from the same step on "
              "gradients scaled first", backend, name, (double)f);
        float one = device_scale(d, sumsq, 4.0 * sqrt(s2), scale);
        CHECK(one == 1.0f, "%s: inactive clipping gave scale %g", backend, (double)one);
        one_step(d, kind, p0, g, scale, N, a);
        one_step(d, kind, p0, g, NULL, N, b);
        CHECK(memcmp(a, b, N * sizeof *a) == 0, "%s: %s with scale 1 differs from the step without a scale", backend,
              name);
    }
    d->ops->free(d, gd);
    d->ops->free(d, sumsq);
    d->ops->free(d, scale);
    free(p0);
    free(g);
    free(pre);
    free(a);
    free(b);
}

/* ---- optim's clipping path waits for nothing --------------------------------------------------
 * The ops that wait for the device (device.h) are counted through a copy of d's ops table; in the
 * emulated build, so are the CUDA runtime calls that block the host (cudaemu_host_blocking_calls),
 * which would also see a backend waiting inside an op. */
static const struct device_ops *real_ops;
static int waits;

static int counting_download(device *d, void *dst, const void *src, size_t bytes, ddp_err *err)
{
    waits++;
    return real_ops->download(d, dst, src, bytes, err);
}
static int counting_synchronize(device *d, ddp_err *err)
{
    waits++;
    return real_ops->synchronize(d, err);
}
static int counting_timer_take_ms(device *d, device_timer *t, double *ms, ddp_err *err)
{
    waits++;
    return real_ops->timer_take_ms(d, t, ms, err);
}

static void optim_clipping(device *d)
{
    enum { N = 5000 };
    float *g = random_floats(N, 1.0f), *p0 = random_floats(N, 1.0f);
    float *gd = dev_from_host(d, g, N * sizeof *g), *pd = dev_from_host(d, p0, N * sizeof *p0);
    double norm_ref = sqrt(ref_sumsq(g, N));
    struct device_ops counting = *d->ops;
    counting.download = counting_download;
    counting.synchronize = counting_synchronize;
    counting.timer_take_ms = counting_timer_take_ms;
    for (int kind = 0; kind < 2; kind++)
        for (int clip = 0; clip < 2; clip++) {
            const optim_opts opts = {.kind = kind ? OPT_ADAMW : OPT_SGD, .lr = 0.01, .momentum = 0.9, .beta1 = 0.9,
                                     .beta2 = 0.999, .eps = 1e-8, .grad_clip = clip ? 0.5 * norm_ref : 0.0,
                                     .schedule.kind = SCHED_CONSTANT};
            optimizer *o = NULL;
            ddp_err err = {0};
            die_on(optim_create(&opts, d, N, &o, &err), &err, "optim_create");
            /* a first step may size the backend's scratch memory (once per run); then two steps,
             * as training runs them: the norm and factor, then the update */
            const float *scale = NULL;
            int rc = optim_grad_norm(o, gd, &scale, &err);
            if (!rc)
                rc = optim_step(o, pd, gd, 0.01, scale, &err);
            real_ops = d->ops;
            d->ops = &counting;
            waits = 0;
#ifdef DDP_TEST_CUDAEMU
            unsigned long long blocking = cudaemu_host_blocking_calls();
#endif
            for (int step = 0; step < 2 && !rc; step++) {
                rc = optim_grad_norm(o, gd, &scale, &err);
                if (!rc)
                    rc = optim_step(o, pd, gd, 0.01, scale, &err);
            }
            int step_waits = waits;
#ifdef DDP_TEST_CUDAEMU
            blocking = cudaemu_host_blocking_calls() - blocking;
            if (d->kind == DEVICE_CUDA)
                CHECK(blocking == 0, "%s: optimizer %d clip %d: two steps made %llu CUDA calls that block the host "
                      "(DDP_CUDA_EMU_TRACE_BLOCKING=1 names them)", backend, kind, clip, blocking);
#endif
            double norm = -1;
            if (!rc)
                rc = optim_read_grad_norm(o, &norm, &err);
            d->ops = real_ops;
            CHECK(rc == 0, "%s: optimizer %d clip %d: %s", backend, kind, clip, err.msg);
            CHECK(step_waits == 0, "%s: optimizer %d clip %d: optim_grad_norm + optim_step waited for the device "
                  "%d times", backend, kind, clip, step_waits);
            CHECK(waits == 1, "%s: optim_read_grad_norm waited %d times, expected 1 (its download)", backend, waits);
            CHECK_CLOSE(norm, norm_ref, 1e-12, 0);
            CHECK((scale != NULL) == (clip == 1), "%s: clip %d: scale %p", backend, clip, (const void *)scale);
            if (scale) { /* the factor of the optimizer's own sum of squares, close to 1/2 */
                float f = -1;
                double s2 = -1;
                to_host(d, &f, scale, sizeof f);
                to_host(d, &s2, o->grad_sumsq, sizeof s2);
                CHECK(same_bits(f, ref_scale(s2, opts.grad_clip)), "%s: optimizer clip factor %.9g, "
                      "reference %.9g", backend, (double)f, (double)ref_scale(s2, opts.grad_clip));
                CHECK_CLOSE(f, 0.5, 1e-5, 0);
            }
            optim_destroy(o);
        }
    d->ops->free(d, gd);
    d->ops->free(d, pd);
    free(g);
    free(p0);
}

/* ---- ZeRO's optimizer over parts: their norm (sumsq per part, then sum_f64) and updates -------- */

static void optim_parts(device *d)
{
    enum { N = 5000 };
    const optim_part parts[] = {{0, 0, 1000}, {2000, 1000, 0}, {3000, 1000, 1500}, {4600, 2500, 400}};
    const int n_parts = (int)(sizeof parts / sizeof parts[0]);
    float *g = random_floats(N, 1.0f), *p0 = random_floats(N, 1.0f);
    float *gd = dev_from_host(d, g, N * sizeof *g), *pd = dev_from_host(d, p0, N * sizeof *p0);
    float *pw = dev_from_host(d, p0, N * sizeof *p0);
    float *got = malloc(N * sizeof *got), *whole = malloc(N * sizeof *whole);
    double want = 0;
    for (int k = 0; k < n_parts; k++)
        want += ref_sumsq(g + parts[k].param_offset, parts[k].count);
    const optim_opts opts = {.kind = OPT_ADAMW, .lr = 0.01, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
                             .weight_decay = 0.1, .grad_clip = 1.0};
    optimizer *o = NULL, *all = NULL;
    ddp_err err = {0};
    die_on(optim_create_parts(&opts, d, N, parts, n_parts, 2900, &o, &err), &err, "optim_create_parts");
    die_on(optim_create(&opts, d, N, &all, &err), &err, "optim_create");
    const float *scale = NULL;
    double sumsq = -1;
    int rc = optim_grad_sumsq(o, gd, &err);
    if (!rc)
        rc = optim_clip_scale(o, &scale, &err);
    if (!rc)
        rc = optim_step(o, pd, gd, 0.01, scale, &err);
    if (!rc) /* the whole optimizer's update with the parts' clip factor: the parts must equal it */
        rc = optim_step(all, pw, gd, 0.01, scale, &err);
    CHECK(rc == 0, "%s: optimizer over parts: %s", backend, err.msg);
    to_host(d, &sumsq, o->grad_sumsq, sizeof sumsq);
    CHECK_CLOSE(sumsq, want, 1e-12, 0);
    to_host(d, got, pd, N * sizeof *got);
    to_host(d, whole, pw, N * sizeof *whole);
    size_t bad = 0, moved = 0;
    for (size_t i = 0, k = 0; i < N; i++) {
        while (k < (size_t)n_parts && i >= parts[k].param_offset + parts[k].count)
            k++;
        bool in = k < (size_t)n_parts && i >= parts[k].param_offset;
        bad += in ? !same_bits(got[i], whole[i]) : !same_bits(got[i], p0[i]);
        moved += in && got[i] != p0[i];
    }
    CHECK(bad == 0 && moved > 2000, "%s: optimizer over parts: %zu parameters differ from the whole optimizer's "
          "update inside the parts or moved outside them (%zu moved)", backend, bad, moved);
    optim_destroy(o);
    optim_destroy(all);
    d->ops->free(d, gd);
    d->ops->free(d, pd);
    d->ops->free(d, pw);
    free(g);
    free(p0);
    free(got);
    free(whole);
}

static void run_all(device *d, const char *name)
{
    backend = name;
    fprintf(stderr, "backend %s (%s)\n", name, d->name);
    random_gradients(d);
    exact_sums(d);
    nonfinite_gradients(d);
    steps_read_the_factor(d);
    optim_clipping(d);
    optim_parts(d);
}

int main(int argc, char **argv)
{
    bool require_cuda = argc > 1 && strcmp(argv[1], "--require-cuda") == 0;
    const char *seed_env = getenv("DDP_TEST_SEED");
    uint64_t seed = seed_env ? strtoull(seed_env, NULL, 10) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16);
    rng_seed(&test_rng, seed, 7);
    fprintf(stderr, "test_grad_clip: seed %llu (DDP_TEST_SEED repeats)\n", (unsigned long long)seed);

    device *cpu = NULL, *gpu = NULL;
    ddp_err err = {0};
    CHECK(device_cpu_create(&cpu, &err) == 0, "device_cpu_create: %s", err.msg);
    if (cpu) {
        run_all(cpu, "cpu");
        cpu->ops->destroy(cpu);
    }
    char reason[256] = "";
    if (device_cuda_count(reason, sizeof reason) == 0) {
        fprintf(stderr, "no CUDA device (%s): CPU backend only\n", reason);
        CHECK(!require_cuda, "--require-cuda, but no CUDA device: %s", reason);
        return check_done("test_grad_clip");
    }
    const device_opts gpu_opts = {.kind = DEVICE_CUDA}; /* no TF32 */
    CHECK(device_cuda_create(0, &gpu_opts, &gpu, &err) == 0, "device_cuda_create: %s", err.msg);
    if (gpu) {
        run_all(gpu, "cuda");
        gpu->ops->destroy(gpu);
    }
    return check_done("test_grad_clip");
}
