/* elementwise.cu — the CUDA kernels that touch each element once: fill, scale, uint8 → float
 * conversion with normalisation, bias add, and ReLU / exact-erf GELU forward and backward.
 *
 * Every kernel is a grid-stride loop over size_t indices, so any n works with a capped grid.
 * The formulas are the CPU backend's (runtime/device/device_cpu.c), which the tests compare against.
 * This file must not hold reductions (reduce.cu) or host API calls beyond the launch itself. */
#include "kernel_common.cuh"

using ddp_kernels::global_index;
using ddp_kernels::grid_for;
using ddp_kernels::grid_stride;
using ddp_kernels::kBlock;

__global__ void ddp_fill_kernel(float *x, size_t n, float value)
{
    for (size_t i = global_index(); i < n; i += grid_stride()) x[i] = value;
}

__global__ void ddp_scale_kernel(float *x, size_t n, float s)
{
    for (size_t i = global_index(); i < n; i += grid_stride()) x[i] *= s;
}

__global__ void ddp_u8_to_f32_kernel(const uint8_t *src, float *dst, size_t n, float mean, float inv_std)
{
    for (size_t i = global_index(); i < n; i += grid_stride())
        dst[i] = ((float)src[i] / 255.0f - mean) * inv_std;
}

__global__ void ddp_bias_add_kernel(float *y, const float *b, size_t total, size_t cols)
{
    for (size_t i = global_index(); i < total; i += grid_stride()) y[i] += b[i % cols];
}

/* Exact GELU, x·Φ(x) with Φ(x) = 0.5·(1 + erf(x/√2)), and its derivative Φ(x) + x·φ(x). */
__device__ inline float gelu_cdf(float x) { return 0.5f * (1.0f + erff(x * (float)M_SQRT1_2)); }
__device__ inline float gelu(float x) { return x * gelu_cdf(x); }
__device__ inline float gelu_grad(float x)
{
    const float inv_sqrt_2pi = 0.3989422804014327f;
    return gelu_cdf(x) + x * (inv_sqrt_2pi * expf(-0.5f * x * x));
}

__global__ void ddp_act_forward_kernel(int act, const float *x, float *y, size_t n)
{
    for (size_t i = global_index(); i < n; i += grid_stride()) {
        const float v = x[i];
        y[i] = act == DDP_CUDA_ACT_GELU ? gelu(v) : (v > 0.0f ? v : 0.0f);
    }
}

__global__ void ddp_act_backward_kernel(int act, const float *x, const float *dy, float *dx, size_t n)
{
    for (size_t i = global_index(); i < n; i += grid_stride()) {
        const float v = x[i];
        dx[i] = act == DDP_CUDA_ACT_GELU ? dy[i] * gelu_grad(v) : (v > 0.0f ? dy[i] : 0.0f);
    }
}

extern "C" cudaError_t ddp_cuda_fill(float *x, size_t n, float value, cudaStream_t stream)
{
    if (n == 0) return cudaSuccess;
    DDP_LAUNCH(ddp_fill_kernel, grid_for(n, kBlock), kBlock, 0, stream, x, n, value);
    return DDP_LAUNCH_STATUS();
}

extern "C" cudaError_t ddp_cuda_scale(float *x, size_t n, float s, cudaStream_t stream)
{
    if (n == 0) return cudaSuccess;
    DDP_LAUNCH(ddp_scale_kernel, grid_for(n, kBlock), kBlock, 0, stream, x, n, s);
    return DDP_LAUNCH_STATUS();
}

extern "C" cudaError_t ddp_cuda_u8_to_f32(const uint8_t *src, float *dst, size_t n, float mean, float inv_std,
                                          cudaStream_t stream)
{
    if (n == 0) return cudaSuccess;
    DDP_LAUNCH(ddp_u8_to_f32_kernel, grid_for(n, kBlock), kBlock, 0, stream, src, dst, n, mean, inv_std);
    return DDP_LAUNCH_STATUS();
}

extern "C" cudaError_t ddp_cuda_bias_add(float *y, const float *b, int64_t rows, int64_t cols, cudaStream_t stream)
{
    if (rows <= 0 || cols <= 0) return cudaSuccess;
    const size_t total = (size_t)rows * (size_t)cols;
    DDP_LAUNCH(ddp_bias_add_kernel, grid_for(total, kBlock), kBlock, 0, stream, y, b, total, (size_t)cols);
    return DDP_LAUNCH_STATUS();
}

extern "C" cudaError_t ddp_cuda_act_forward(int act, const float *x, float *y, size_t n, cudaStream_t stream)
{
    if (n == 0) return cudaSuccess;
    DDP_LAUNCH(ddp_act_forward_kernel, grid_for(n, kBlock), kBlock, 0, stream, act, x, y, n);
    return DDP_LAUNCH_STATUS();
}

extern "C" cudaError_t ddp_cuda_act_backward(int act, const float *x, const float *dy, float *dx, size_t n,
                                             cudaStream_t stream)
{
    if (n == 0) return cudaSuccess;
    DDP_LAUNCH(ddp_act_backward_kernel, grid_for(n, kBlock), kBlock, 0, stream, act, x, dy, dx, n);
    return DDP_LAUNCH_STATUS();
}
