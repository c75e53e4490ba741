/* kernels.h — the C entry points of the CUDA kernels behind the CUDA device backend.
 *
 * Each function enqueues its kernel(s) on `stream` and returns cudaGetLastError() after the
 * launch (so a bad launch configuration is reported, while faults inside the kernel surface at
 * the next synchronising call). Pointers are device pointers. Shapes are size_t/int64_t; grid
 * sizes are computed without int overflow. Nothing here allocates, synchronises or knows about
 * models: scratch buffers are owned by the caller (runtime/device/device_cuda.c). The same .cu sources
 * are compiled by nvcc for GPUs and by the host C++ compiler for the CUDA-on-CPU emulator. */
#ifndef DDP_CUDA_KERNELS_H
#define DDP_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { DDP_CUDA_ACT_RELU = 0, DDP_CUDA_ACT_GELU = 1 };

/* Partial sums used by sumsq: the caller provides this many doubles of scratch plus one for the
 * result. */
#define DDP_CUDA_SUMSQ_MAX_BLOCKS 1024

cudaError_t ddp_cuda_fill(float *x, size_t n, float value, cudaStream_t stream);
cudaError_t ddp_cuda_scale(float *x, size_t n, float s, cudaStream_t stream);
/* dst[i] = (src[i] / 255 - mean) * inv_std */
cudaError_t ddp_cuda_u8_to_f32(const uint8_t *src, float *dst, size_t n, float mean, float inv_std,
                               cudaStream_t stream);
/* y[r,c] += b[c] */
cudaError_t ddp_cuda_bias_add(float *y, const float *b, int64_t rows, int64_t cols, cudaStream_t stream);
/* db[c] = beta * db[c] + sum_r dy[r,c]; beta 0 overwrites (never reads db). Deterministic: each
 * column is summed in double in a fixed order. */
cudaError_t ddp_cuda_bias_grad(const float *dy, float *db, int64_t rows, int64_t cols, float beta,
                               cudaStream_t stream);
cudaError_t ddp_cuda_act_forward(int act, const float *x, float *y, size_t n, cudaStream_t stream);
cudaError_t ddp_cuda_act_backward(int act, const float *x, const float *dy, float *dx, size_t n,
                                  cudaStream_t stream);
/* Row-wise softmax cross-entropy. dlogits (may be NULL) = (softmax - onehot) * grad_scale.
 * row_stats is caller scratch of 2*rows floats (per-row loss, 1 when argmax == label); a second
 * single-block kernel adds their sums, in a fixed order, to stats[0] and stats[1]. A label
 * outside [0, cols) makes that row's loss NaN. */
cudaError_t ddp_cuda_softmax_xent(const float *logits, const int32_t *labels, int64_t rows, int64_t cols,
                                  float grad_scale, float *dlogits, float *row_stats, float *stats,
                                  cudaStream_t stream);
/* out[0] = sum x[i]^2 in double, two passes in a fixed order (the same for the same n).
 * partials: DDP_CUDA_SUMSQ_MAX_BLOCKS doubles of scratch. */
cudaError_t ddp_cuda_sumsq(const float *x, size_t n, double *partials, double *out, cudaStream_t stream);
/* PyTorch SGD (dampening 0): g = g*grad_scale + wd*p; buf = first_step ? g : momentum*buf + g;
 * g = nesterov ? g + momentum*buf : buf; p -= lr*g. buf is unused (may be NULL) when momentum is 0. */
cudaError_t ddp_cuda_sgd_step(float *p, const float *g, float *buf, size_t n, float lr, float momentum,
                              float weight_decay, int nesterov, int first_step, float grad_scale,
                              cudaStream_t stream);
/* PyTorch AdamW, in the CPU backend's float32 order: g *= grad_scale; p *= decay;
 * m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g^2; p -= step_size * m / (sqrt(v)/bias2_sqrt + eps).
 * The caller computes decay = 1 - lr*wd, one_minus_b1/b2, step_size = lr / (1 - b1^t) and
 * bias2_sqrt = sqrt(1 - b2^t) in double, as PyTorch does. */
cudaError_t ddp_cuda_adamw_step(float *p, const float *g, float *m, float *v, size_t n, float decay, float beta1,
                                float one_minus_beta1, float beta2, float one_minus_beta2, float eps,
                                float step_size, float bias2_sqrt, float grad_scale, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
