/* elementwise_cpu.c — the CPU code of the element-wise family (CUDA: elementwise.cu): fill,
 * scale, uint8 → float conversion with normalisation, bias add, and ReLU / exact-erf GELU forward
 * and backward.
 *
 * Plain loops, each element computed on its own (DDP_PARALLEL_FOR). These formulas are the
 * reference the CUDA kernels are tested against. Arguments arrive checked by device.c. This file
 * must not hold reductions (reduce_cpu.c). */
#include "cpu_kernel.h"

#include <math.h>

int device_cpu_fill(device *d, float *x, size_t n, float value, ddp_err *err)
{
    (void)d;
    (void)err;
    DDP_PARALLEL_FOR(n)
    for (size_t i = 0; i < n; i++)
        x[i] = value;
    return DDP_OK;
}

int device_cpu_scale(device *d, float *x, size_t n, float s, ddp_err *err)
{
    (void)d;
    (void)err;
    DDP_PARALLEL_FOR(n)
    for (size_t i = 0; i < n; i++)
        x[i] *= s;
    return DDP_OK;
}

int device_cpu_u8_to_f32(device *d, const uint8_t *src, float *dst, size_t n, float mean, float inv_std,
                         ddp_err *err)
{
    (void)d;
    (void)err;
    DDP_PARALLEL_FOR(n)
    for (size_t i = 0; i < n; i++)
        dst[i] = ((float)src[i] / 255.0f - mean) * inv_std;
    return DDP_OK;
}

int device_cpu_bias_add(device *d, float *restrict y, const float *restrict b, int64_t rows, int64_t cols,
                        ddp_err *err)
{
    (void)d;
    (void)err;
    DDP_PARALLEL_FOR(rows * cols)
    for (int64_t r = 0; r < rows; r++) {
        float *restrict row = y + r * cols;
        for (int64_t c = 0; c < cols; c++)
            row[c] += b[c];
    }
    return DDP_OK;
}

/* Exact (erf) GELU, as torch.nn.GELU() with approximate='none'. */
static inline float gelu_cdf(float x) { return 0.5f * (1.0f + erff(x * (float)M_SQRT1_2)); }

int device_cpu_act_forward(device *d, act_kind a, const float *restrict x, float *restrict y, size_t n,
                           ddp_err *err)
{
    (void)d;
    (void)err;
    switch (a) { /* no default: a new activation must be handled here (-Wswitch) */
    case ACT_RELU:
        DDP_PARALLEL_FOR(n)
        for (size_t i = 0; i < n; i++)
            y[i] = x[i] > 0.0f ? x[i] : 0.0f;
        break;
    case ACT_GELU:
        DDP_PARALLEL_FOR(n)
        for (size_t i = 0; i < n; i++)
            y[i] = x[i] * gelu_cdf(x[i]);
        break;
    }
    return DDP_OK;
}

int device_cpu_act_backward(device *d, act_kind a, const float *restrict x, const float *restrict dy,
                            float *restrict dx, size_t n, ddp_err *err)
{
    (void)d;
    (void)err;
    const float inv_sqrt_2pi = 0.3989422804014327f;
    switch (a) {
    case ACT_RELU:
        DDP_PARALLEL_FOR(n)
        for (size_t i = 0; i < n; i++)
            dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
        break;
    case ACT_GELU: /* d/dx [x·Φ(x)] = Φ(x) + x·φ(x) */
        DDP_PARALLEL_FOR(n)
        for (size_t i = 0; i < n; i++) {
            float pdf = inv_sqrt_2pi * expf(-0.5f * x[i] * x[i]);
            dx[i] = dy[i] * (gelu_cdf(x[i]) + x[i] * pdf);
        }
        break;
    }
    return DDP_OK;
}
