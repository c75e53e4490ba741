/* optim_step_cpu.c — the CPU code of the optimizer-update family (CUDA: optim_step.cu): SGD
 * (momentum, Nesterov, weight decay) and AdamW, element by element in torch.optim's float32
 * order of operations, so trajectories match PyTorch step for step.
 *
 * The scalars PyTorch computes in double (AdamW's bias corrections and decay) arrive computed,
 * in the args; the gradient scale (clipping) arrives as a device float, NULL for 1, read once per
 * step. Arguments arrive checked by device.c. This file must not know about schedules,
 * clipping policy or step counts beyond the scalars it is given. */
#include "cpu_kernel.h"

#include <math.h>

int device_cpu_sgd_step(device *d, float *restrict p, const float *restrict g, const float *scale,
                        float *restrict buf, size_t n, const sgd_args *a, ddp_err *err)
{
    (void)d;
    (void)err;
    const float lr = a->lr, mom = a->momentum, wd = a->weight_decay, gs = scale ? *scale : 1.0f;
    DDP_PARALLEL_FOR(n)
    for (size_t i = 0; i < n; i++) {
        float step = g[i] * gs;      /* clip_grad_norm_ scales the gradient in place */
        if (wd != 0.0f)
            step = step + wd * p[i]; /* d_p = d_p.add(p, alpha=wd) */
        if (mom != 0.0f) {
            float b = a->first_step ? step : buf[i] * mom + step;
            buf[i] = b;
            step = a->nesterov ? step + mom * b : b;
        }
        p[i] = p[i] + (-lr) * step;
    }
    return DDP_OK;
}

int device_cpu_adamw_step(device *d, float *restrict p, const float *restrict g, const float *scale,
                          float *restrict m, float *restrict v, size_t n, const adamw_args *a, ddp_err *err)
{
    (void)d;
    (void)err;
    const float decay = a->decay, b1 = a->beta1, one_minus_b1 = a->one_minus_beta1;
    const float b2 = a->beta2, one_minus_b2 = a->one_minus_beta2;
    const float step_size = a->step_size, bias2_sqrt = a->bias2_sqrt, eps = a->eps, gs = scale ? *scale : 1.0f;
    DDP_PARALLEL_FOR(n)
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] * gs;
        float pi = p[i] * decay;
        float mi = m[i] * b1 + one_minus_b1 * gi;
        float vi = v[i] * b2 + one_minus_b2 * (gi * gi);
        float denom = sqrtf(vi) / bias2_sqrt + eps;
        p[i] = pi + (-step_size) * (mi / denom);
        m[i] = mi;
        v[i] = vi;
    }
    return DDP_OK;
}
