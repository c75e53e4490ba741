/* cast_cpu.c — the CPU code of the bfloat16 cast family (CUDA: cast.cu), used by
 * ddp.grad_dtype: bf16 (fp32 gradients are cast to a bf16 shadow before the all-reduce and the
 * reduced bf16 values cast back, times a scale, into the fp32 gradients) and by precision: bf16
 * (the stochastically rounded bf16 copy of the fp32 master weights).
 *
 * Rounding is to nearest-even (runtime/base/half.h), the hardware's, or stochastic
 * (bf16_stochastic.h), so both backends give the same bits. Arguments arrive checked (device_check_*.c).
 * This file must not hold other ops. */
#include "cpu_kernel.h"

#include "runtime/base/half.h"
#include "runtime/device/kernels/bf16_stochastic.h"

int device_cpu_cast_f32_to_bf16(device *d, const float *restrict src, uint16_t *restrict dst, size_t n,
                                ddp_err *err)
{
    (void)d;
    (void)err;
    DDP_PARALLEL_FOR(n)
    for (size_t i = 0; i < n; i++)
        dst[i] = float_to_bf16(src[i]);
    return DDP_OK;
}

int device_cpu_cast_bf16_to_f32(device *d, const uint16_t *restrict src, float *restrict dst, size_t n,
                                float scale, ddp_err *err)
{
    (void)d;
    (void)err;
    DDP_PARALLEL_FOR(n)
    for (size_t i = 0; i < n; i++)
        dst[i] = bf16_to_float(src[i]) * scale;
    return DDP_OK;
}

int device_cpu_cast_f32_to_bf16_stochastic(device *d, const float *restrict src, uint16_t *restrict dst, size_t n,
                                           uint64_t seed, uint64_t step, uint64_t first, ddp_err *err)
{
    (void)d;
    (void)err;
    const uint64_t key = ddp_bf16_sr_key(seed, step);
    DDP_PARALLEL_FOR(n)
    for (size_t i = 0; i < n; i++)
        dst[i] = ddp_bf16_stochastic(src[i], ddp_bf16_sr_bits_keyed(key, first + i));
    return DDP_OK;
}
