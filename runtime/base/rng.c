/* rng.c — xoshiro256** (Blackman & Vigna) with splitmix64 seeding, and Philox4x32-10 (Salmon et
 * al.) for the counter-based draws; see rng.h. */
#include "rng.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void rng_seed(rng *r, uint64_t seed, uint64_t stream)
{
    uint64_t x = seed ^ (stream * 0xD1B54A32D192ED03ull);
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t rng_next(rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint64_t rng_below(rng *r, uint64_t bound)
{
    /* rejection keeps the result unbiased: discard the short top slice of the 64-bit range */
    uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    uint64_t x;
    do
        x = rng_next(r);
    while (x >= limit);
    return x % bound;
}

float rng_uniform(rng *r, float lo, float hi)
{
    float u = (float)(rng_next(r) >> 40) * (1.0f / 16777216.0f);
    return lo + (hi - lo) * u;
}

double rng_normal(rng *r)
{
    /* Box–Muller with the cosine branch only: one normal per two uniforms keeps the stream
     * position a plain function of how many normals were drawn. u1 is in (0, 1], so log is finite. */
    double u1 = ((double)(rng_next(r) >> 11) + 1.0) * 0x1.0p-53;
    double u2 = (double)(rng_next(r) >> 11) * 0x1.0p-53;
    return sqrt(-2.0 * log(u1)) * cos(2.0 * 3.14159265358979323846 * u2);
}

rng_key rng_key_of(uint64_t seed, uint64_t stream, uint64_t sub)
{
    uint64_t x = seed ^ (stream * 0xD1B54A32D192ED03ull);
    uint64_t k = splitmix64(&x);
    return (rng_key){{(uint32_t)k, (uint32_t)(k >> 32)}, {(uint32_t)sub, (uint32_t)(sub >> 32)}};
}

void rng_philox(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4])
{
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3], k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c0 = n0, c1 = (uint32_t)p1, c2 = n2, c3 = (uint32_t)p0;
        k0 += 0x9E3779B9u, k1 += 0xBB67AE85u; /* the Weyl sequence's bump, before each later round */
    }
    out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

static void block_at(const rng_key *k, uint64_t q, uint32_t out[4])
{
    const uint32_t ctr[4] = {(uint32_t)q, (uint32_t)(q >> 32), k->sub[0], k->sub[1]};
    rng_philox(ctr, k->key, out);
}

void rng_normals_at(const rng_key *k, uint64_t lo, uint64_t hi, double scale, float *dst)
{
    for (uint64_t i = lo; i < hi;) {
        uint32_t w[4];
        block_at(k, i / 2, w);
        /* u1 in (0, 1], so log is finite; 53 bits of each pair of words */
        double u1 = ((double)((((uint64_t)w[0] << 32) | w[1]) >> 11) + 1.0) * 0x1.0p-53;
        double u2 = (double)((((uint64_t)w[2] << 32) | w[3]) >> 11) * 0x1.0p-53;
        double r = sqrt(-2.0 * log(u1)) * scale, theta = 2.0 * 3.14159265358979323846 * u2;
        if (i % 2 == 0)
            dst[i++ - lo] = (float)(r * cos(theta));
        if (i < hi)
            dst[i++ - lo] = (float)(r * sin(theta));
    }
}

void rng_uniforms_at(const rng_key *k, uint64_t lo, uint64_t hi, float a, float b, float *dst)
{
    for (uint64_t i = lo; i < hi;) {
        uint32_t w[4];
        block_at(k, i / 4, w);
        for (uint64_t j = i % 4; j < 4 && i < hi; j++, i++)
            dst[i - lo] = a + (b - a) * ((float)(w[j] >> 8) * (1.0f / 16777216.0f));
    }
}
