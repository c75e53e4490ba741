/* optim_step.cu — the element-wise optimizer updates: SGD (momentum, Nesterov, weight decay) and
 * AdamW, in exactly the float32 operation order of the CPU backend (runtime/device/device_cpu.c), which
 * follows torch.optim. Scalars that PyTorch computes in double (bias corrections, decay) arrive
 * precomputed from the host. This file must not know about schedules, clipping policy or steps
 * beyond the scalars it is given. */
#include "kernel_common.cuh"

using ddp_kernels::global_index;
using ddp_kernels::grid_for;
using ddp_kernels::grid_stride;
using ddp_kernels::kBlock;

__global__ void ddp_sgd_step_kernel(float *p, const float *g, float *buf, size_t n, float lr, float momentum,
                                    float weight_decay, int nesterov, int first_step, float grad_scale)
{
    for (size_t i = global_index(); i < n; i += grid_stride()) {
        float step = g[i] * grad_scale;
        if (weight_decay != 0.0f) step = step + weight_decay * p[i];
        if (momentum != 0.0f) {
            const float b = first_step ? step : buf[i] * momentum + step;
            buf[i] = b;
            step = nesterov ? step + momentum * b : b;
        }
        p[i] = p[i] + (-lr) * step;
    }
}

__global__ void ddp_adamw_step_kernel(float *p, const float *g, float *m, float *v, size_t n, float decay,
                                      float beta1, float one_minus_beta1, float beta2, float one_minus_beta2,
                                      float eps, float step_size, float bias2_sqrt, float grad_scale)
{
    for (size_t i = global_index(); i < n; i += grid_stride()) {
        const float gi = g[i] * grad_scale;
        const float pi = p[i] * decay;
        const float mi = m[i] * beta1 + one_minus_beta1 * gi;
        const float vi = v[i] * beta2 + one_minus_beta2 * (gi * gi);
        const float denom = sqrtf(vi) / bias2_sqrt + eps;
        p[i] = pi + (-step_size) * (mi / denom);
        m[i] = mi;
        v[i] = vi;
    }
}

extern "C" cudaError_t ddp_cuda_sgd_step(float *p, const float *g, float *buf, size_t n, float lr, float momentum,
                                         float weight_decay, int nesterov, int first_step, float grad_scale,
                                         cudaStream_t stream)
{
    if (n == 0) return cudaSuccess;
    DDP_LAUNCH(ddp_sgd_step_kernel, grid_for(n, kBlock), kBlock, 0, stream, p, g, buf, n, lr, momentum,
               weight_decay, nesterov, first_step, grad_scale);
    return DDP_LAUNCH_STATUS();
}

extern "C" cudaError_t ddp_cuda_adamw_step(float *p, const float *g, float *m, float *v, size_t n, float decay,
                                           float beta1, float one_minus_beta1, float beta2, float one_minus_beta2,
                                           float eps, float step_size, float bias2_sqrt, float grad_scale,
                                           cudaStream_t stream)
{
    if (n == 0) return cudaSuccess;
    DDP_LAUNCH(ddp_adamw_step_kernel, grid_for(n, kBlock), kBlock, 0, stream, p, g, m, v, n, decay, beta1,
               one_minus_beta1, beta2, one_minus_beta2, eps, step_size, bias2_sqrt, grad_scale);
    return DDP_LAUNCH_STATUS();
}
