/* elementwise_cpu.c — the CPU code of the element-wise family (CUDA: elementwise.cu): fill,
 * scale, uint8 → float conversion with normalisation, bias add, ReLU / exact-erf GELU / tanh-GELU
 * forward and backward, and the residual add.
 *
 * Plain loops, each element computed on its own (DDP_PARALLEL_FOR). These formulas are the
 * reference the CUDA kernels are tested against. Arguments arrive checked (device_check_*.c). This file
 * must not hold reductions (reduce_cpu.c). */
#include "cpu_kernel.h"

#include <math.h>

static int cpu_fill_f32(device *d, float *x, size_t n, float value, ddp_err *err)
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

static int cpu_bias_add_f32(device *d, float *restrict y, const float *restrict b, int64_t rows, int64_t cols,
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

/* GPT-2's tanh-approximated GELU, torch's approximate='tanh': 0.5·x·(1 + tanh(u)),
 * u = sqrt(2/π)·(x + 0.044715·x³). */
#define GELU_K 0.7978845608028654f /* sqrt(2/π) */
#define GELU_C 0.044715f

/* 0.5·(1 + tanh(u)) = σ(2u), so the tanh formula is x·σ(z) with z = 2u: the same function, but
 * without the 1 + tanh(u) cancellation that loses all relative accuracy for x < -3 or so.
 * σ(z) and σ(z)·(1 - σ(z)) come from one exp(-|z|), which never overflows and needs no 1 - σ. */
static inline float gelu_z(float x) { return 2.0f * GELU_K * (x + GELU_C * x * x * x); }

static inline void sigmoid_and_slope(float z, float *s, float *slope)
{
    float e = expf(-fabsf(z));
    float p = 1.0f / (1.0f + e); /* σ(|z|) */
    float q = e * p;             /* σ(-|z|) = e/(1+e) */
    *s = z >= 0.0f ? p : q;
    *slope = p * q;
}

/* Exact (erf) GELU, as torch.nn.GELU() with approximate='none'. Φ(x) = 0.5·erfc(-x/√2), which equals
 * 0.5·(1 + erf(x/√2)) without its cancellation for x < 0: there 1 + erf loses all but a few bits, so
 * libm's and CUDA's erff, each within 2 ulps, gave GELUs 5e-4 apart in relative terms (seen on an H100);
 * erfc keeps both within a few ulps of the true value. */
static inline float gelu_cdf(float x) { return 0.5f * erfcf(-x * (float)M_SQRT1_2); }

static int cpu_act_forward_f32(device *d, act_kind a, const float *restrict x, float *restrict y, size_t n,
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
    case ACT_GELU_TANH:
        DDP_PARALLEL_FOR(n)
        for (size_t i = 0; i < n; i++) {
            float s, slope;
            sigmoid_and_slope(gelu_z(x[i]), &s, &slope);
            y[i] = x[i] * s;
        }
        break;
    }
    return DDP_OK;
}

/* dy and dx are not restrict: dx may be dy itself (gemm_gelu_backward's unfused form), and
 * element i reads dy[i] before writing dx[i]. */
static int cpu_act_backward_f32(device *d, act_kind a, const float *restrict x, const float *dy, float *dx, size_t n,
                                ddp_err *err)
{
    (void)d;
    (void)err;
    const float inv_sqrt_2pi = 0.3989422804014327f;
    switch (a) {
    case ACT_RELU:
        /* dy is read unconditionally: `x > 0 ? dy[i] : 0` loads dy[i] only on one side, which the
         * compiler must keep as a branch, and on half-positive activations that branch is
         * mispredicted half the time (12x the forward pass's time in a profile); this is a
         * vector select */
        DDP_PARALLEL_FOR(n)
        for (size_t i = 0; i < n; i++) {
            float g = dy[i];
            dx[i] = x[i] > 0.0f ? g : 0.0f;
        }
        break;
    case ACT_GELU: /* d/dx [x·Φ(x)] = Φ(x) + x·φ(x) */
        DDP_PARALLEL_FOR(n)
        for (size_t i = 0; i < n; i++) {
            float pdf = inv_sqrt_2pi * expf(-0.5f * x[i] * x[i]);
            dx[i] = dy[i] * (gelu_cdf(x[i]) + x[i] * pdf);
        }
        break;
    case ACT_GELU_TANH: /* d/dx [x·σ(z(x))] = σ(z) + x·σ(z)(1 - σ(z))·z'(x), z'(x) = 2K(1 + 3C·x²) */
        DDP_PARALLEL_FOR(n)
        for (size_t i = 0; i < n; i++) {
            float xi = x[i], s, slope;
            sigmoid_and_slope(gelu_z(xi), &s, &slope);
            float dz = 2.0f * GELU_K * (1.0f + 3.0f * GELU_C * xi * xi);
            /* slope is exactly 0 once |x| > ~10.5; dz overflows only at |x| > 1e19, where 0·inf = NaN */
            dx[i] = dy[i] * (s + (slope > 0.0f ? xi * slope * dz : 0.0f));
        }
        break;
    }
    return DDP_OK;
}

static int cpu_add_f32(device *d, float *out, const float *a, const float *b, size_t n, ddp_err *err)
{
    (void)d;
    (void)err;
    /* no restrict: out may be a or b, and element i only reads a[i], b[i] before writing out[i] */
    DDP_PARALLEL_FOR(n)
    for (size_t i = 0; i < n; i++)
        out[i] = a[i] + b[i];
    return DDP_OK;
}

/* ---- entry points: device.c admits only TENSOR_F32 on the CPU, so the types are not looked at */

int device_cpu_fill(device *d, tensor_dtype t, void *x, size_t n, float value, ddp_err *err)
{
    (void)t;
    return cpu_fill_f32(d, x, n, value, err);
}

int device_cpu_bias_add(device *d, tensor_dtype t, void *y, const void *b, int64_t rows, int64_t cols, ddp_err *err)
{
    (void)t;
    return cpu_bias_add_f32(d, y, b, rows, cols, err);
}

int device_cpu_act_forward(device *d, tensor_dtype t, act_kind a, const void *x, void *y, size_t n, ddp_err *err)
{
    (void)t;
    return cpu_act_forward_f32(d, a, x, y, n, err);
}

int device_cpu_act_backward(device *d, tensor_dtype t, act_kind a, const void *x, const void *dy, void *dx, size_t n,
                            ddp_err *err)
{
    (void)t;
    return cpu_act_backward_f32(d, a, x, dy, dx, n, err);
}

int device_cpu_add(device *d, tensor_dtype t, void *out, const void *a, const void *b, size_t n, ddp_err *err)
{
    (void)t;
    return cpu_add_f32(d, out, a, b, n, err);
}
