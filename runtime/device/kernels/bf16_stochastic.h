/* bf16_stochastic.h — stochastic rounding of float to bfloat16, shared by the CPU code
 * (cast_cpu.c) and the CUDA kernels (cast.cu) so both backends round every element to the same
 * bits: the precision: bf16 path's copy of the fp32 master weights.
 *
 * The 16 random bits of element i come from a hash of (seed, step, i) alone, not from a generator
 * stream: any slice of a tensor, rounded by any rank, launch or thread, gets the bits the whole
 * tensor would, so a resume on another world size reproduces the copy exactly. Adding them to the
 * 16 bits bf16 drops and truncating rounds the magnitude up with probability (dropped bits)/2^16:
 * unbiased to 2^-16 of an ulp. Header-only, for C and CUDA; it must not hold kernels or ops. */
#ifndef DDP_BF16_STOCHASTIC_H
#define DDP_BF16_STOCHASTIC_H

#include <stdint.h>
#include <string.h>

#include "runtime/device/kernels/host_device.h"

/* splitmix64's finaliser: a bijection of 64-bit words whose every output bit depends on every
 * input bit, so neighbouring indices give unrelated bits. */
DDP_HOST_DEVICE_FN uint64_t ddp_bf16_sr_mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The part of the hash that depends on (seed, step) alone: computed once per cast, not per element. */
DDP_HOST_DEVICE_FN uint64_t ddp_bf16_sr_key(uint64_t seed, uint64_t step)
{
    return ddp_bf16_sr_mix(ddp_bf16_sr_mix(seed) ^ step);
}

/* The 16 random bits of element `index` under key ddp_bf16_sr_key(seed, step). */
DDP_HOST_DEVICE_FN uint32_t ddp_bf16_sr_bits_keyed(uint64_t key, uint64_t index)
{
    return (uint32_t)(ddp_bf16_sr_mix(key ^ index) >> 48);
}

/* The 16 random bits of element `index` at optimizer step `step` of a run seeded `seed`. */
DDP_HOST_DEVICE_FN uint32_t ddp_bf16_sr_bits(uint64_t seed, uint64_t step, uint64_t index)
{
    return ddp_bf16_sr_bits_keyed(ddp_bf16_sr_key(seed, step), index);
}

/* x rounded to bf16 bits with random bits r16 < 2^16: NaN stays a quiet NaN, inf stays inf, and a
 * magnitude rounded past the largest finite bf16 becomes inf (the carry runs into the exponent). */
DDP_HOST_DEVICE_FN uint16_t ddp_bf16_stochastic(float x, uint32_t r16)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x0040u);
    if ((u & 0x7fffffffu) == 0x7f800000u)
        return (uint16_t)(u >> 16);
    return (uint16_t)((u + r16) >> 16);
}

#endif
