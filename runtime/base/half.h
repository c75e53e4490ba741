/* half.h — conversions between float and the two 2-byte float formats the communicator carries
 * (IEEE binary16 "half" and bfloat16), rounding to nearest-even like the hardware does.
 *
 * Used by the MPI reduction operators (half_mpi.h), the CPU backend's bf16 casts and the
 * benchmark's data generator. Header-only, no state; it must not grow arithmetic beyond the
 * conversions (reductions happen in float). */
#ifndef DDP_FP16_H
#define DDP_FP16_H

#include <stdint.h>
#include <string.h>

static inline uint32_t fp16_float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float fp16_bits_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline float bf16_to_float(uint16_t h) { return fp16_bits_float((uint32_t)h << 16); }

static inline uint16_t float_to_bf16(float f)
{
    uint32_t u = fp16_float_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)        /* NaN: keep it a (quiet) NaN */
        return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);             /* round to nearest, ties to even */
    return (uint16_t)(u >> 16);
}

static inline float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0x1f)                               /* inf / NaN */
        return fp16_bits_float(sign | 0x7f800000u | (mant << 13));
    if (exp == 0) {                                /* zero / subnormal: mant * 2^-24 */
        float v = (float)mant * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    return fp16_bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

static inline uint16_t float_to_half(float f)
{
    uint32_t u = fp16_float_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u)                           /* NaN */
        return (uint16_t)(sign | 0x7e00u);
    if (a >= 0x477ff000u)                          /* rounds to >= 65520: overflow to inf */
        return (uint16_t)(sign | 0x7c00u);
    if (a < 0x38800000u) {                         /* below 2^-14: subnormal half (or zero) */
        /* the half is value / 2^-24, rounded to nearest-even by hand on the integer mantissa */
        uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
        if (e < 102)                               /* < 2^-25: rounds to zero */
            return sign;
        uint32_t shift = 126u - e;                 /* m * 2^(e-150) / 2^-24 = m >> (126-e) */
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (q & 1u)))
            q++;
        return (uint16_t)(sign | q);
    }
    /* normal: rebias exponent, round the 13 dropped mantissa bits to nearest-even */
    uint32_t r = a - 0x38000000u;                  /* exponent 127 -> 15 bias, still in float layout */
    r += 0x0fffu + ((r >> 13) & 1u);
    return (uint16_t)(sign | (r >> 13));
}

#endif
