/* device_check_cast.c — the argument contracts of the bfloat16 casts (device.h's
 * DEVICE_CAST_OPS), for device.c's checking table: each checked_NAME rejects bad arguments with one
 * message for both backends, returns when there is nothing to do, and forwards the rest to
 * d->backend with its cost. It must not compute anything an op produces nor read device memory. */
#include "runtime/device/device_check.h"

int checked_cast_f32_to_bf16(device *d, const float *src, uint16_t *dst, size_t n, ddp_err *err)
{
    if (n == 0)
        return DDP_OK;
    NEED_POINTER("cast_f32_to_bf16", src);
    NEED_POINTER("cast_f32_to_bf16", dst);
    DEVICE_FORWARD(cast_f32_to_bf16, flat_cost(n, 6, 1, ""),
                   d, src, dst, n, err);
}

int checked_cast_bf16_to_f32(device *d, const uint16_t *src, float *dst, size_t n, float scale, ddp_err *err)
{
    if (n == 0)
        return DDP_OK;
    NEED_POINTER("cast_bf16_to_f32", src);
    NEED_POINTER("cast_bf16_to_f32", dst);
    DEVICE_FORWARD(cast_bf16_to_f32, flat_cost(n, 6, 1, ""),
                   d, src, dst, n, scale, err);
}

int checked_cast_f32_to_bf16_stochastic(device *d, const float *src, uint16_t *dst, size_t n, uint64_t seed,
                                        uint64_t step, uint64_t first, ddp_err *err)
{
    if (n == 0)
        return DDP_OK;
    NEED_POINTER("cast_f32_to_bf16_stochastic", src);
    NEED_POINTER("cast_f32_to_bf16_stochastic", dst);
    if (first > UINT64_MAX - n)
        return ddp_fail(err, DDP_ERUNTIME, "cast_f32_to_bf16_stochastic: element indices %llu + %zu overflow",
                        (unsigned long long)first, n);
    DEVICE_FORWARD(cast_f32_to_bf16_stochastic, flat_cost(n, 6, 10, ""),
                   d, src, dst, n, seed, step, first, err);
}
