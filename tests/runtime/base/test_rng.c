/* test_rng.c — the counter-based draws of runtime/base/rng.c: Philox4x32-10 gives Random123's
 * published known answers (its kat_vectors, the `philox4x32 10` lines); any slice of a normal or
 * uniform stream, at odd or even ends, is exactly that part of the whole stream; another stream
 * (another tensor) or another seed is another stream; and 2^21 normals and uniforms have the
 * moments of N(0, 1) and U[a, b) within bounds set by the sample size (6 standard errors, so a
 * correct generator fails about once in 10^8 runs and a wrong scale, branch or word fails
 * always). */
#include "tests/check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/rng.h"

static void known_answers(void)
{
    static const uint32_t kat[3][10] = {
        {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
        {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d, 0x41c83b0e, 0xa20bc7c6,
         0x6d5451fd},
        {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09, 0x94fdcceb, 0x5001e420,
         0x24126ea1},
    };
    for (int i = 0; i < 3; i++) {
        uint32_t out[4];
        rng_philox(kat[i], kat[i] + 4, out);
        CHECK(!memcmp(out, kat[i] + 6, sizeof out), "philox4x32-10 vector %d: %08x %08x %08x %08x", i, out[0], out[1],
              out[2], out[3]);
    }
}

/* Slices [lo, hi) of the first n values of the key's streams against the whole draw. */
static void slices(const rng_key *k, size_t n)
{
    float *whole = malloc(n * sizeof *whole), *part = malloc(n * sizeof *part);
    float *uwhole = malloc(n * sizeof *uwhole);
    rng_normals_at(k, 0, n, 1.0, whole);
    rng_uniforms_at(k, 0, n, -2.0f, 3.0f, uwhole);
    const size_t ends[][2] = {{0, 1}, {1, 2}, {1, 3}, {2, 7}, {3, 4}, {5, 6}, {6, 9}, {7, 8}, {0, 64}, {33, 97}};
    for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++) {
        size_t lo = ends[i][0], hi = ends[i][1];
        rng_normals_at(k, lo, hi, 1.0, part);
        CHECK(!memcmp(part, whole + lo, (hi - lo) * sizeof *part), "normals [%zu, %zu) differ from the whole draw's",
              lo, hi);
        rng_uniforms_at(k, lo, hi, -2.0f, 3.0f, part);
        CHECK(!memcmp(part, uwhole + lo, (hi - lo) * sizeof *part), "uniforms [%zu, %zu) differ from the whole draw's",
              lo, hi);
    }
    rng_normals_at(k, 0, n, 0.5, part);
    size_t off = 0;
    for (size_t j = 0; j < n; j++)
        off += fabsf(part[j] - 0.5f * whole[j]) > 1e-6f * fabsf(whole[j]);
    CHECK(off == 0, "a scale of 0.5 is not half of each value (%zu off)", off);
    free(whole);
    free(part);
    free(uwhole);
}

static void moments(const rng_key *k)
{
    const size_t n = (size_t)1 << 21;
    float *v = malloc(n * sizeof *v);
    rng_normals_at(k, 0, n, 1.0, v);
    double s1 = 0, s2 = 0, s4 = 0, even = 0, odd = 0, cross = 0;
    for (size_t j = 0; j < n; j++) {
        double x = v[j];
        s1 += x, s2 += x * x, s4 += x * x * x * x;
        if (j % 2)
            odd += x, cross += x * v[j - 1];
        else
            even += x;
    }
    double mean = s1 / n, var = s2 / n - mean * mean, kurt = s4 / n / (var * var), se = 6.0 / sqrt((double)n);
    CHECK(fabs(mean) < se, "normal mean %.5f (bound %.5f)", mean, se);
    CHECK(fabs(var - 1) < se * sqrt(2.0), "normal variance %.5f (bound 1 +- %.5f)", var, se * sqrt(2.0));
    CHECK(fabs(kurt - 3) < se * sqrt(96.0), "normal kurtosis %.4f (bound 3 +- %.4f)", kurt, se * sqrt(96.0));
    /* the cosine and sine halves of a block: each N(0, 1), and uncorrelated with each other */
    CHECK(fabs(even / (n / 2)) < se * sqrt(2.0) && fabs(odd / (n / 2)) < se * sqrt(2.0), "branch means %.5f, %.5f",
          even / (n / 2), odd / (n / 2));
    CHECK(fabs(cross / (n / 2)) < se * sqrt(2.0), "the two values of a block correlate: %.5f", cross / (n / 2));
    rng_uniforms_at(k, 0, n, -2.0f, 3.0f, v);
    double u1 = 0, u2 = 0, lo = 1e9, hi = -1e9;
    for (size_t j = 0; j < n; j++) {
        double x = v[j];
        u1 += x, u2 += x * x, lo = x < lo ? x : lo, hi = x > hi ? x : hi;
    }
    double umean = u1 / n, uvar = u2 / n - umean * umean;
    /* U[-2, 3): mean 0.5, variance 25/12, the variance of x^2-ish terms bounded by 25 */
    CHECK(fabs(umean - 0.5) < se * sqrt(25.0 / 12), "uniform mean %.5f", umean);
    CHECK(fabs(uvar - 25.0 / 12) < se * 25.0 / sqrt(45.0), "uniform variance %.5f", uvar);
    CHECK(lo >= -2.0 && hi < 3.0 && lo < -1.99 && hi > 2.99, "uniforms span [%.4f, %.4f]", lo, hi);
    free(v);
}

int main(void)
{
    known_answers();
    rng_key a = rng_key_of(7, RNG_INIT, 0), b = rng_key_of(7, RNG_INIT, 1), c = rng_key_of(8, RNG_INIT, 0);
    slices(&a, 256);
    slices(&b, 256);
    float va[8], vb[8], vc[8];
    rng_normals_at(&a, 0, 8, 1.0, va);
    rng_normals_at(&b, 0, 8, 1.0, vb);
    rng_normals_at(&c, 0, 8, 1.0, vc);
    CHECK(memcmp(va, vb, sizeof va) && memcmp(va, vc, sizeof va), "another stream or seed gave the same values");
    moments(&a);
    return check_done("test_rng");
}
