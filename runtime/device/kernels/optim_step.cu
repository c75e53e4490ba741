/* optim_step.cu — the CUDA code of the optimizer-update family (CPU: optim_step_cpu.c): SGD
 * (momentum, Nesterov, weight decay) and AdamW, in exactly the CPU code's float32 order of
 * operations, which follows torch.optim; each op's kernel and its host launcher.
 *
 * Scalars that PyTorch computes in double (bias corrections, decay) arrive computed, in the args;
 * the gradient scale (clipping) is a device float each thread reads when the kernel runs (NULL:
 * 1), so a scale computed on the GPU by the op before never travels through the host.
 * Arguments arrive checked by device.c. This file must not know about schedules, clipping policy
 * or step counts beyond the scalars it is given. */
#include "kernel_common.cuh"

using ddp_kernels::global_index;
using ddp_kernels::grid_for;
using ddp_kernels::grid_stride;
using ddp_kernels::kBlock;

__global__ void ddp_sgd_step_kernel(float *p, const float *g, const float *scale, float *buf, size_t n, float lr,
                                    float momentum, float weight_decay, int nesterov, int first_step)
{
    const float grad_scale = scale ? *scale : 1.0f;
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

__global__ void ddp_adamw_step_kernel(float *p, const float *g, const float *scale, float *m, float *v, size_t n,
                                      float decay, float beta1, float one_minus_beta1, float beta2,
                                      float one_minus_beta2, float eps, float step_size, float bias2_sqrt)
{
    const float grad_scale = scale ? *scale : 1.0f;
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

extern "C" int device_cuda_sgd_step(device *d, float *p, const float *g, const float *scale, float *buf, size_t n,
                                    const sgd_args *a, ddp_err *err)
{
    DDP_LAUNCH_OP(ddp_sgd_step_kernel, grid_for(n, kBlock), kBlock, 0, p, g, scale, buf, n, a->lr, a->momentum,
                  a->weight_decay, (int)a->nesterov, (int)a->first_step);
    return DDP_OK;
}

extern "C" int device_cuda_adamw_step(device *d, float *p, const float *g, const float *scale, float *m, float *v,
                                      size_t n, const adamw_args *a, ddp_err *err)
{
    DDP_LAUNCH_OP(ddp_adamw_step_kernel, grid_for(n, kBlock), kBlock, 0, p, g, scale, m, v, n, a->decay, a->beta1,
                  a->one_minus_beta1, a->beta2, a->one_minus_beta2, a->eps, a->step_size, a->bias2_sqrt);
    return DDP_OK;
}
