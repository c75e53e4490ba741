/* optim_step_cpu.c — the CPU code of the optimizer-update family (CUDA: optim_step.cu): SGD
 * (momentum, Nesterov, weight decay) and AdamW, element by element in torch.optim's float32
 * order of operations, so trajectories match PyTorch step for step.
 *
 * The scalars PyTorch computes in double (AdamW's bias corrections and decay) arrive computed,
 * in the args; the gradient scale (clipping) arrives as a device float, NULL for 1, read once per
 * step. Elements the args exempt from weight decay run as an update with weight decay 0 would:
 * the buffers are walked in runs of one exemption each. Arguments arrive checked (device_check_*.c).
 * This file must not know about schedules, clipping policy or step counts beyond the scalars it
 * is given. */
#include "cpu_kernel.h"

#include <math.h>
#include <stdbool.h>

/* The end of the run of [i, n) that shares element i's exemption, and whether it is exempt; *k
 * counts the bounds at or below offset first + i and only grows from call to call. */
static size_t exempt_run(const decay_exempt *x, size_t i, size_t n, size_t *k, bool *exempt)
{
    while (*k < x->n_bounds && x->bounds[*k] <= x->first + i)
        (*k)++;
    *exempt = *k % 2 != 0;
    if (*k == x->n_bounds)
        return n;
    size_t end = x->bounds[*k] - x->first;
    return end < n ? end : n;
}

int device_cpu_sgd_step(device *d, float *restrict p, const float *restrict g, const float *scale,
                        float *restrict buf, size_t n, const sgd_args *a, ddp_err *err)
{
    (void)d;
    (void)err;
    const float lr = a->lr, mom = a->momentum, gs = scale ? *scale : 1.0f;
    size_t k = 0;
    for (size_t i0 = 0, i1; i0 < n; i0 = i1) {
        bool exempt;
        i1 = exempt_run(&a->exempt, i0, n, &k, &exempt);
        const float wd = exempt ? 0.0f : a->weight_decay;
        DDP_PARALLEL_FOR(i1 - i0)
        for (size_t i = i0; i < i1; i++) {
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
    }
    return DDP_OK;
}

int device_cpu_adamw_step(device *d, float *restrict p, const float *restrict g, const float *scale,
                          float *restrict m, float *restrict v, size_t n, const adamw_args *a, ddp_err *err)
{
    (void)d;
    (void)err;
    const float b1 = a->beta1, one_minus_b1 = a->one_minus_beta1;
    const float b2 = a->beta2, one_minus_b2 = a->one_minus_beta2;
    const float step_size = a->step_size, bias2_sqrt = a->bias2_sqrt, eps = a->eps, gs = scale ? *scale : 1.0f;
    size_t k = 0;
    for (size_t i0 = 0, i1; i0 < n; i0 = i1) {
        bool exempt;
        i1 = exempt_run(&a->exempt, i0, n, &k, &exempt);
        const float decay = exempt ? 1.0f : a->decay;
        DDP_PARALLEL_FOR(i1 - i0)
        for (size_t i = i0; i < i1; i++) {
            float gi = g[i] * gs;
            float pi = p[i] * decay;
            float mi = m[i] * b1 + one_minus_b1 * gi;
            float vi = v[i] * b2 + one_minus_b2 * (gi * gi);
            float denom = sqrtf(vi) / bias2_sqrt + eps;
            p[i] = pi + (-step_size) * (mi / denom);
            m[i] = mi;
            v[i] = vi;
        }
    }
    return DDP_OK;
}
