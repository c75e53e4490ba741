/* elementwise.cu — the CUDA code of the element-wise family (CPU: elementwise_cpu.c): fill,
 * scale, uint8 → float conversion with normalisation, bias add, ReLU / exact-erf GELU / tanh-GELU
 * forward and backward, and the residual add; each op's kernel and its host launcher.
 *
 * Every kernel is a grid-stride loop over size_t indices, so any n works with a capped grid, and
 * moves 16-byte packs (kernel_common.cuh's map_packs: 4 floats or 8 bf16 per access, the tail
 * one element at a time) when its launcher finds every pointer aligned for them, else one element
 * per access (W = 1): the arithmetic per element is the same, so the width never changes a bit.
 * The formulas are the CPU code's, which the tests compare against, computed in float. The ops
 * with a tensor_dtype (fill, bias_add, act_forward/backward, add) have one kernel each, a
 * template on the storage type (float or bf16, kernel_common.cuh): elements are widened to float,
 * and each output is rounded to bf16 once, so a float instantiation is the float kernel bit for
 * bit and a bf16 one gives bf16(the float result). scale and u8_to_f32 are float only. Arguments
 * arrive checked (device_check_*.c) (n > 0, pointers set, a known type). This file must not hold
 * reductions (reduce.cu). */
#include "kernel_common.cuh"

using ddp_kernels::from_float;
using ddp_kernels::global_index;
using ddp_kernels::grid_for;
using ddp_kernels::grid_stride;
using ddp_kernels::kBlock;
using ddp_kernels::kVec;
using ddp_kernels::load_pack;
using ddp_kernels::map_packs;
using ddp_kernels::pack;
using ddp_kernels::store_pack;
using ddp_kernels::to_float;
using ddp_kernels::vec_width;

/* Launches KERNEL<T, W> over n elements, with W the pack width vec_width picks for the pointers
 * in PTRS (a parenthesised list), and the kernel's arguments. Expects d and err in scope. */
#define DDP_LAUNCH_PACKED(kernel, T, n, ptrs, ...)                                                   \
    do {                                                                                            \
        if (vec_width<T>(0, {DEVICE_UNPAREN ptrs}) > 1)                                             \
            DDP_LAUNCH_OP((kernel<T, kVec<T>>), grid_for((n) / kVec<T> + 1, kBlock), kBlock, 0, __VA_ARGS__); \
        else                                                                                        \
            DDP_LAUNCH_OP((kernel<T, 1>), grid_for((n), kBlock), kBlock, 0, __VA_ARGS__);            \
    } while (0)

template <typename T, int W>
__global__ void ddp_fill_kernel(T *x, size_t n, float value)
{
    const T v = from_float<T>(value);
    pack<T, W> p;
DDP_UNROLL
    for (int j = 0; j < W; j++) p.v[j] = v;
    for (size_t k = global_index(); k < n / W; k += grid_stride()) store_pack<W>(x, k, p);
    for (size_t i = n / W * W + global_index(); i < n; i += grid_stride()) x[i] = v;
}

template <typename T, int W>
__global__ void ddp_scale_kernel(T *x, size_t n, float s)
{
    map_packs<W>(x, x, n, [=](T v, size_t) { return v * s; });
}

__global__ void ddp_u8_to_f32_kernel(const uint8_t *src, float *dst, size_t n, float mean, float inv_std)
{
    for (size_t i = global_index(); i < n; i += grid_stride())
        dst[i] = ((float)src[i] / 255.0f - mean) * inv_std;
}

/* Rows of cols elements; with W > 1, cols is a multiple of W, so a pack never straddles two rows
 * and its columns are c .. c + W - 1 of one row. */
template <typename T, int W>
__global__ void ddp_bias_add_kernel(T *y, const T *b, size_t total, size_t cols)
{
    for (size_t k = global_index(); k < total / W; k += grid_stride()) {
        pack<T, W> v = load_pack<W>(y, k);
        const size_t c = k * W % cols;
DDP_UNROLL
        for (int j = 0; j < W; j++) v.v[j] = from_float<T>(to_float(v.v[j]) + to_float(b[c + j]));
        store_pack<W>(y, k, v);
    }
}

/* Exact GELU, x·Φ(x) with Φ(x) = 0.5·erfc(-x/√2) (= 0.5·(1 + erf(x/√2)) without its cancellation for
 * x < 0; elementwise_cpu.c says why), and its derivative Φ(x) + x·φ(x). */
__device__ inline float gelu_cdf(float x) { return 0.5f * erfcf(-x * (float)M_SQRT1_2); }
__device__ inline float gelu(float x) { return x * gelu_cdf(x); }
__device__ inline float gelu_grad(float x)
{
    const float inv_sqrt_2pi = 0.3989422804014327f;
    return gelu_cdf(x) + x * (inv_sqrt_2pi * expf(-0.5f * x * x));
}

/* GPT-2's tanh GELU as x·σ(z), z = 2·sqrt(2/π)·(x + 0.044715·x³) (0.5·(1 + tanh(z/2)) = σ(z),
 * without the cancellation of 1 + tanh near -1), and its derivative σ(z) + x·σ(z)(1 - σ(z))·z'. */
__device__ inline void gelu_tanh_parts(float x, float *s, float *slope, float *dz)
{
    const float k = 0.7978845608028654f, c = 0.044715f;
    const float z = 2.0f * k * (x + c * x * x * x);
    const float e = expf(-fabsf(z));
    const float p = 1.0f / (1.0f + e), q = e * p;
    *s = z >= 0.0f ? p : q;
    *slope = p * q;
    *dz = 2.0f * k * (1.0f + 3.0f * c * x * x);
}
__device__ inline float gelu_tanh(float x)
{
    float s, slope, dz;
    gelu_tanh_parts(x, &s, &slope, &dz);
    return x * s;
}
__device__ inline float gelu_tanh_grad(float x)
{
    float s, slope, dz;
    gelu_tanh_parts(x, &s, &slope, &dz);
    return s + (slope > 0.0f ? x * slope * dz : 0.0f);
}

/* act(v), and dy * act'(v). No default: a new activation must be handled here (-Wswitch);
 * device.c admits only the kinds listed, so the return after the switch is never reached. */
__device__ inline float activation(act_kind act, float v)
{
    switch (act) {
    case ACT_RELU: return v > 0.0f ? v : 0.0f;
    case ACT_GELU: return gelu(v);
    case ACT_GELU_TANH: return gelu_tanh(v);
    }
    return NAN;
}

__device__ inline float activation_backward(act_kind act, float v, float dy)
{
    switch (act) {
    case ACT_RELU: return v > 0.0f ? dy : 0.0f;
    case ACT_GELU: return dy * gelu_grad(v);
    case ACT_GELU_TANH: return dy * gelu_tanh_grad(v);
    }
    return NAN;
}

/* out may be a or b: each element (each pack) reads its inputs before writing */
template <typename T, int W>
__global__ void ddp_add_kernel(T *out, const T *a, const T *b, size_t n)
{
    map_packs<W>(out, a, b, n, [](T u, T v, size_t) { return from_float<T>(to_float(u) + to_float(v)); });
}

template <typename T, int W>
__global__ void ddp_act_forward_kernel(act_kind act, const T *x, T *y, size_t n)
{
    map_packs<W>(y, x, n, [=](T v, size_t) { return from_float<T>(activation(act, to_float(v))); });
}

template <typename T, int W>
__global__ void ddp_act_backward_kernel(act_kind act, const T *x, const T *dy, T *dx, size_t n)
{
    map_packs<W>(dx, x, dy, n,
                 [=](T v, T g, size_t) { return from_float<T>(activation_backward(act, to_float(v), to_float(g))); });
}

extern "C" int device_cuda_fill(device *d, tensor_dtype t, void *x, size_t n, float value, ddp_err *err)
{
    DDP_DTYPE_SWITCH(t, T, DDP_LAUNCH_PACKED(ddp_fill_kernel, T, n, (x), static_cast<T *>(x), n, value));
    return DDP_OK;
}

extern "C" int device_cuda_scale(device *d, float *x, size_t n, float s, ddp_err *err)
{
    DDP_LAUNCH_PACKED(ddp_scale_kernel, float, n, (x), x, n, s);
    return DDP_OK;
}

extern "C" int device_cuda_u8_to_f32(device *d, const uint8_t *src, float *dst, size_t n, float mean, float inv_std,
                                     ddp_err *err)
{
    DDP_LAUNCH_OP(ddp_u8_to_f32_kernel, grid_for(n, kBlock), kBlock, 0, src, dst, n, mean, inv_std);
    return DDP_OK;
}

extern "C" int device_cuda_bias_add(device *d, tensor_dtype t, void *y, const void *b, int64_t rows, int64_t cols,
                                    ddp_err *err)
{
    const size_t total = (size_t)rows * (size_t)cols;
    DDP_DTYPE_SWITCH(t, T,
                     if (vec_width<T>((size_t)cols, {y, b}) > 1)
                         DDP_LAUNCH_OP((ddp_bias_add_kernel<T, kVec<T>>), grid_for(total / kVec<T>, kBlock), kBlock, 0,
                                       static_cast<T *>(y), static_cast<const T *>(b), total, (size_t)cols);
                     else
                         DDP_LAUNCH_OP((ddp_bias_add_kernel<T, 1>), grid_for(total, kBlock), kBlock, 0,
                                       static_cast<T *>(y), static_cast<const T *>(b), total, (size_t)cols));
    return DDP_OK;
}

extern "C" int device_cuda_act_forward(device *d, tensor_dtype t, act_kind a, const void *x, void *y, size_t n,
                                       ddp_err *err)
{
    DDP_DTYPE_SWITCH(t, T, DDP_LAUNCH_PACKED(ddp_act_forward_kernel, T, n, (x, y), a,
                                             static_cast<const T *>(x), static_cast<T *>(y), n));
    return DDP_OK;
}

extern "C" int device_cuda_act_backward(device *d, tensor_dtype t, act_kind a, const void *x, const void *dy, void *dx,
                                        size_t n, ddp_err *err)
{
    DDP_DTYPE_SWITCH(t, T, DDP_LAUNCH_PACKED(ddp_act_backward_kernel, T, n, (x, dy, dx), a,
                                             static_cast<const T *>(x), static_cast<const T *>(dy),
                                             static_cast<T *>(dx), n));
    return DDP_OK;
}

extern "C" int device_cuda_add(device *d, tensor_dtype t, void *out, const void *a, const void *b, size_t n,
                               ddp_err *err)
{
    DDP_DTYPE_SWITCH(t, T, DDP_LAUNCH_PACKED(ddp_add_kernel, T, n, (out, a, b), static_cast<T *>(out),
                                             static_cast<const T *>(a), static_cast<const T *>(b), n));
    return DDP_OK;
}
