/* test_cast.c — the bf16 casts (device ops cast_f32_to_bf16 / cast_bf16_to_f32, and
 * cast_f32_to_bf16_stochastic for precision: bf16's copy of the master weights): the CPU backend
 * against hand-computed bit patterns, and the CUDA kernels (runtime/device/kernels/cast.cu, run by
 * the emulator under DDP_CUDA_EMU_ORDER) against the CPU backend bit for bit, on fresh random
 * inputs of mixed magnitudes plus ties, infinities, NaN and values that overflow, over sizes that
 * are not multiples of the block size and pass the grid caps. CUDA outputs are poisoned first so
 * an element a kernel skips fails. Seed printed; DDP_TEST_SEED repeats a run.
 *
 * The stochastic cast is also checked for what its contract promises: a slice [first, first + n)
 * gives the bits of the whole tensor's call, every output is one of the value's two bf16
 * neighbours, specials keep their class, and the rounding is unbiased (see stochastic_unbiased).
 * The CUDA casts also run on device pointers one element past an aligned start, source or
 * destination or both (their one-element fallbacks), against the same CPU bits. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime/base/half.h"
#include "runtime/base/rng.h"
#include "runtime/device/device.h"
#include "tests/check.h"

static rng test_rng;

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Ties to even, by hand: 1 + 2^-8 lies halfway between bf16 1.0 (even) and 1 + 2^-7 (odd). */
static void known_patterns(device *cpu)
{
    const float in[] = {1.0f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -2.0f - 0x1p-7f, 0x1p-130f, INFINITY,
                        from_bits(0x3f80ffffu), from_bits(0x7f7fffffu)};
    const uint16_t want[] = {0x3f80, 0x3f80, 0x3f82, 0xc000, 0x0008, 0x7f80, 0x3f81, 0x7f80};
    uint16_t got[8];
    ddp_err err = {0};
    CHECK(cpu->ops->cast_f32_to_bf16(cpu, in, got, 8, &err) == DDP_OK, "%s", err.msg);
    for (int i = 0; i < 8; i++)
        CHECK(got[i] == want[i], "bf16(%a) = 0x%04x, expected 0x%04x", (double)in[i], got[i], want[i]);
    float back[8];
    CHECK(cpu->ops->cast_bf16_to_f32(cpu, want, back, 8, 0.5f, &err) == DDP_OK, "%s", err.msg);
    CHECK(back[2] == (1.0f + 0x1p-6f) * 0.5f && back[3] == -1.0f, "bf16 -> f32 x 0.5: %a %a", (double)back[2],
          (double)back[3]);
}

static float *random_inputs(size_t n)
{
    float *h = malloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++) {
        float mag = ldexpf(rng_uniform(&test_rng, 1.0f, 2.0f), (int)rng_below(&test_rng, 40) - 20);
        h[i] = rng_below(&test_rng, 2) ? mag : -mag;
        if (i % 97 == 5) /* an exact tie: the 16 dropped bits are 0x8000 */
            h[i] = from_bits((uint32_t)(rng_next(&test_rng) & 0x3fff0000u) | 0x8000u);
    }
    if (n > 3)
        h[1] = INFINITY, h[2] = -INFINITY, h[3] = NAN;
    return h;
}

/* Both casts (and the stochastic one, bit for bit against the CPU's) on n elements, the float
 * buffers off_f and the bf16 buffer off_h elements past an aligned start. */
static void against_cpu(device *cpu, device *gpu, size_t n, size_t off_f, size_t off_h)
{
    ddp_err err = {0};
    float *x = random_inputs(n), *back_cpu = malloc(n * sizeof *x), *back_gpu = malloc(n * sizeof *x);
    uint16_t *h_cpu = malloc(n * 2), *h_gpu = malloc(n * 2), *poison = malloc(n * 2);
    memset(poison, 0xff, n * 2);
    float *base_x = NULL, *base_back = NULL;
    uint16_t *base_h = NULL;
    CHECK(gpu->ops->alloc(gpu, (n + 1) * 4, (void **)&base_x, &err) == DDP_OK &&
              gpu->ops->alloc(gpu, (n + 1) * 2, (void **)&base_h, &err) == DDP_OK &&
              gpu->ops->alloc(gpu, (n + 1) * 4, (void **)&base_back, &err) == DDP_OK,
          "alloc: %s", err.msg);
    float *dx = base_x + off_f, *dback = base_back + off_f;
    uint16_t *dh = base_h + off_h;
    gpu->ops->upload(gpu, dx, x, n * 4, &err);
    gpu->ops->upload(gpu, dh, poison, n * 2, &err);
    gpu->ops->fill(gpu, TENSOR_F32, dback, n, NAN, &err);
    CHECK(gpu->ops->cast_f32_to_bf16(gpu, dx, dh, n, &err) == DDP_OK, "cuda cast_f32_to_bf16: %s", err.msg);
    CHECK(gpu->ops->cast_bf16_to_f32(gpu, dh, dback, n, 0.25f, &err) == DDP_OK, "cuda cast_bf16_to_f32: %s", err.msg);
    gpu->ops->download(gpu, h_gpu, dh, n * 2, &err);
    gpu->ops->download(gpu, back_gpu, dback, n * 4, &err);
    cpu->ops->cast_f32_to_bf16(cpu, x, h_cpu, n, &err);
    cpu->ops->cast_bf16_to_f32(cpu, h_cpu, back_cpu, n, 0.25f, &err);
    size_t bad = 0, bad_back = 0;
    for (size_t i = 0; i < n; i++) {
        bool nan_cpu = (h_cpu[i] & 0x7fff) > 0x7f80, nan_gpu = (h_gpu[i] & 0x7fff) > 0x7f80;
        bad += nan_cpu ? !nan_gpu : h_cpu[i] != h_gpu[i];
        bad_back += isnan(back_cpu[i]) ? !isnan(back_gpu[i]) : memcmp(&back_cpu[i], &back_gpu[i], 4) != 0;
    }
    CHECK(bad == 0, "n=%zu offsets %zu/%zu: %zu of %zu bf16 values differ from the CPU backend", n, off_f, off_h, bad,
          n);
    CHECK(bad_back == 0, "n=%zu offsets %zu/%zu: %zu of %zu values cast back differ from the CPU backend", n, off_f,
          off_h, bad_back, n);
    gpu->ops->upload(gpu, dh, poison, n * 2, &err);
    CHECK(gpu->ops->cast_f32_to_bf16_stochastic(gpu, dx, dh, n, 9, 4, 77, &err) == DDP_OK,
          "cuda cast_f32_to_bf16_stochastic: %s", err.msg);
    gpu->ops->download(gpu, h_gpu, dh, n * 2, &err);
    cpu->ops->cast_f32_to_bf16_stochastic(cpu, x, h_cpu, n, 9, 4, 77, &err);
    CHECK(memcmp(h_cpu, h_gpu, n * 2) == 0, "stochastic n=%zu offsets %zu/%zu: differs from the CPU backend", n,
          off_f, off_h);
    gpu->ops->free(gpu, base_x);
    gpu->ops->free(gpu, base_h);
    gpu->ops->free(gpu, base_back);
    free(x), free(back_cpu), free(back_gpu), free(h_cpu), free(h_gpu), free(poison);
}

/* ---- stochastic rounding ------------------------------------------------------------------ */

/* dst[0..n) of cast_f32_to_bf16_stochastic(src, n, seed, step, first) on device d; src and the
 * result are host arrays (copied through device memory on CUDA, whose output starts poisoned). */
static void stochastic_on(device *d, const float *src, uint16_t *dst, size_t n, uint64_t seed, uint64_t step,
                          uint64_t first)
{
    ddp_err err = {0};
    if (d->kind != DEVICE_CUDA) {
        CHECK(d->ops->cast_f32_to_bf16_stochastic(d, src, dst, n, seed, step, first, &err) == DDP_OK,
              "cpu cast_f32_to_bf16_stochastic: %s", err.msg);
        return;
    }
    float *dsrc = NULL;
    uint16_t *ddst = NULL;
    memset(dst, 0xff, n * 2);
    CHECK(d->ops->alloc(d, n * 4, (void **)&dsrc, &err) == DDP_OK &&
              d->ops->alloc(d, n * 2, (void **)&ddst, &err) == DDP_OK,
          "alloc: %s", err.msg);
    CHECK(d->ops->upload(d, dsrc, src, n * 4, &err) == DDP_OK && d->ops->upload(d, ddst, dst, n * 2, &err) == DDP_OK,
          "upload: %s", err.msg);
    CHECK(d->ops->cast_f32_to_bf16_stochastic(d, dsrc, ddst, n, seed, step, first, &err) == DDP_OK,
          "cuda cast_f32_to_bf16_stochastic: %s", err.msg);
    CHECK(d->ops->download(d, dst, ddst, n * 2, &err) == DDP_OK, "download: %s", err.msg);
    d->ops->free(d, dsrc);
    d->ops->free(d, ddst);
}

/* The two bf16 neighbours of finite x: its truncation and the next value away from zero (which may
 * be inf). */
static bool is_neighbour(float x, uint16_t h)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    uint16_t down = (uint16_t)(u >> 16);
    return h == down || ((u & 0xffffu) != 0 && h == (uint16_t)(down + 1));
}

/* CUDA against CPU bit for bit, for several (seed, step, first), the first past 2^32; every output
 * a neighbour of its input (specials aside); a slice equal to the whole call's part. */
static void stochastic_against_cpu(device *cpu, device *gpu, size_t n)
{
    float *x = random_inputs(n);
    if (n > 6) { /* the largest float rounds to the largest bf16 or overflows to inf; a signalling NaN */
        x[4] = from_bits(0x7f7fffffu);
        x[5] = -from_bits(0x7f7f8001u);
        x[6] = from_bits(0x7f800001u);
    }
    uint16_t *hc = malloc(n * 2), *hg = malloc(n * 2), *part = malloc(n * 2);
    const uint64_t keys[][3] = {{1, 0, 0}, {1, 1, 0}, {0xdeadbeefull, 77, 1000}, {42, 5, (1ull << 33) + 7}};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        uint64_t seed = keys[k][0], step = keys[k][1], first = keys[k][2];
        stochastic_on(cpu, x, hc, n, seed, step, first);
        stochastic_on(gpu, x, hg, n, seed, step, first);
        size_t bad = 0, far = 0;
        for (size_t i = 0; i < n; i++) {
            bad += hc[i] != hg[i];
            far += isfinite(x[i]) && !is_neighbour(x[i], hc[i]);
        }
        CHECK(bad == 0, "stochastic n=%zu seed=%llu step=%llu first=%llu: %zu of %zu differ from the CPU backend", n,
              (unsigned long long)seed, (unsigned long long)step, (unsigned long long)first, bad, n);
        CHECK(far == 0, "stochastic n=%zu: %zu outputs are not a bf16 neighbour of their input", n, far);
        /* elements [off, off + len) alone, as a rank holding that slice computes them */
        size_t off = n / 3, len = n - off - n / 5;
        for (int side = 0; side < 2 && len > 0; side++) {
            stochastic_on(side ? gpu : cpu, x + off, part, len, seed, step, first + off);
            CHECK(memcmp(part, hc + off, len * 2) == 0, "stochastic n=%zu: the %s slice [%zu, %zu) differs from the "
                  "whole call's", n, side ? "cuda" : "cpu", off, off + len);
        }
    }
    if (n > 6) {
        CHECK(hc[1] == 0x7f80 && hc[2] == 0xff80, "stochastic: inf -> 0x%04x, -inf -> 0x%04x", hc[1], hc[2]);
        CHECK((hc[3] & 0x7fc0) == 0x7fc0 && (hc[6] & 0x7fc0) == 0x7fc0, "stochastic: NaNs -> 0x%04x, 0x%04x (not "
              "quiet NaNs)", hc[3], hc[6]);
        CHECK(hc[4] == 0x7f7f || hc[4] == 0x7f80, "stochastic: FLT_MAX -> 0x%04x", hc[4]);
    }
    free(x), free(hc), free(hg), free(part);
}

/* Specials by hand, on both devices: exact bf16 values (zero dropped bits) never move, whatever
 * the random bits; FLT_MAX (dropped bits 0xffff) overflows to inf unless its random bits are 0. */
static void stochastic_specials(device *cpu, device *gpu)
{
    enum { N = 4096 };
    static float x[N];
    static uint16_t h[N];
    const float exact[] = {0.0f, -0.0f, 1.0f, -3.5f, from_bits(0x00010000u), from_bits(0x7f7f0000u)};
    for (int side = 0; side < 2; side++) {
        device *d = side ? gpu : cpu;
        for (int i = 0; i < N; i++)
            x[i] = exact[i % 6];
        stochastic_on(d, x, h, N, 9, 3, 0);
        size_t moved = 0;
        for (int i = 0; i < N; i++)
            moved += h[i] != (uint16_t)(fp16_float_bits(x[i]) >> 16);
        CHECK(moved == 0, "stochastic on %s: %zu exact bf16 values moved", side ? "cuda" : "cpu", moved);
        for (int i = 0; i < N; i++)
            x[i] = from_bits(0x7f7fffffu);
        stochastic_on(d, x, h, N, 9, 3, 0);
        size_t inf = 0, other = 0;
        for (int i = 0; i < N; i++) {
            inf += h[i] == 0x7f80;
            other += h[i] != 0x7f80 && h[i] != 0x7f7f;
        }
        /* P(down) = 2^-16 per element: all N up, or one or two down, but never none up */
        CHECK(other == 0 && inf >= N - 2, "stochastic on %s: FLT_MAX gave %zu infs of %d, %zu other values",
              side ? "cuda" : "cpu", inf, N, other);
    }
}

/* Unbiasedness: n copies of one value v, each rounded up with probability p = (dropped bits)/2^16.
 * (The random bits are a fixed function of the fixed keys below, so the outcome never varies
 * between runs; the bound says how unlikely a failure would be for a truly unbiased rounding.)
 * The mean rounding error is a mean of n independent variables that are u - d (prob. p) or -d
 * (prob. 1 - p), u the bf16 ulp at v and d = v - truncation = p·u: mean 0, standard deviation
 * u·sqrt(p(1 - p)/n). Allowing 5 standard deviations, an unbiased rounding fails with probability
 * ~6e-7, while round-to-nearest (error -d or u - d for every element, |error| >= u·min(p, 1 - p))
 * fails for these p by far. Values near zero, one a float subnormal, negative too. */
static void stochastic_unbiased(device *cpu, device *gpu)
{
    const size_t n = 1u << 17;
    const float values[] = {1.2345e-4f, -7.77e-3f, 3.0e-39f, 0.1f};
    float *x = malloc(n * sizeof *x);
    uint16_t *h = malloc(n * 2);
    for (size_t v = 0; v < sizeof values / sizeof values[0]; v++) {
        uint32_t u = fp16_float_bits(values[v]);
        double trunc = fabs((double)bf16_to_float((uint16_t)(u >> 16)));
        double up = fabs((double)bf16_to_float((uint16_t)((u >> 16) + 1)));
        double ulp = up - trunc, p = (double)(u & 0xffffu) / 65536.0;
        double sigma = ulp * sqrt(p * (1.0 - p) / (double)n);
        for (size_t i = 0; i < n; i++)
            x[i] = values[v];
        for (int side = 0; side < 2; side++) {
            stochastic_on(side ? gpu : cpu, x, h, n, 1234, 56 + v, 789);
            double sum = 0.0;
            for (size_t i = 0; i < n; i++)
                sum += fabs((double)bf16_to_float(h[i])) - fabs((double)values[v]);
            double mean = sum / (double)n;
            CHECK(fabs(mean) <= 5.0 * sigma,
                  "stochastic on %s: mean error of %g is %.3g ulp, beyond 5 sigma = %.3g ulp", side ? "cuda" : "cpu",
                  (double)values[v], mean / ulp, 5.0 * sigma / ulp);
            CHECK(5.0 * sigma < ulp * fmin(p, 1.0 - p), "the bound (%.3g ulp) would not catch round-to-nearest",
                  5.0 * sigma / ulp);
        }
    }
    free(x);
    free(h);
}

int main(void)
{
    const char *seed_env = getenv("DDP_TEST_SEED");
    uint64_t seed = seed_env ? strtoull(seed_env, NULL, 10) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16);
    rng_seed(&test_rng, seed, 11);
    const char *order = getenv("DDP_CUDA_EMU_ORDER");
    fprintf(stderr, "test_cast: seed %llu (DDP_TEST_SEED repeats), order %s\n", (unsigned long long)seed,
            order ? order : "(default)");
    device *cpu = NULL, *gpu = NULL;
    ddp_err err = {0};
    const device_opts gpu_opts = {.kind = DEVICE_CUDA}; /* no TF32 */
    if (device_cpu_create(&cpu, &err) != DDP_OK || device_cuda_create(0, &gpu_opts, &gpu, &err) != DDP_OK) {
        fprintf(stderr, "FATAL: creating devices: %s\n", err.msg);
        return 1;
    }
    known_patterns(cpu);
    const size_t sizes[] = {1, 5, 255, 257, 1000, 70001};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        for (size_t off = 0; off < 4; off++) /* aligned; float, bf16 or both one element on */
            against_cpu(cpu, gpu, sizes[i], off & 1, off >> 1);
        stochastic_against_cpu(cpu, gpu, sizes[i]);
    }
    stochastic_specials(cpu, gpu);
    stochastic_unbiased(cpu, gpu);
    gpu->ops->destroy(gpu);
    cpu->ops->destroy(cpu);
    return check_done("test_cast");
}
