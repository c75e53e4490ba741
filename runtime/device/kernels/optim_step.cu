/* optim_step.cu — the CUDA code of the optimizer-update family (CPU: optim_step_cpu.c): SGD
 * (momentum, Nesterov, weight decay) and AdamW, in exactly the CPU code's float32 order of
 * operations, which follows torch.optim; each op's kernel and its host launcher.
 *
 * "Exactly" needs help: nvcc contracts a*b + c into one FMA by default (-fmad=true), rounding
 * once where the CPU rounds twice (C17 ISO mode compiles with -ffp-contract=off), so every
 * multiply and add here is an explicitly rounded __fmul_rn / __fadd_rn, which nvcc never fuses,
 * and the square root is __fsqrt_rn; division is IEEE under nvcc's default -prec-div=true (this
 * build never passes --use_fast_math). These kernels are memory-bound: the extra instructions
 * cost nothing measurable. tests/runtime/device/check_float_order.sh reads the PTX to prove it.
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
        float step = __fmul_rn(g[i], grad_scale);
        if (weight_decay != 0.0f) step = __fadd_rn(step, __fmul_rn(weight_decay, p[i]));
        if (momentum != 0.0f) {
            const float b = first_step ? step : __fadd_rn(__fmul_rn(buf[i], momentum), step);
            buf[i] = b;
            step = nesterov ? __fadd_rn(step, __fmul_rn(momentum, b)) : b;
        }
        p[i] = __fadd_rn(p[i], __fmul_rn(-lr, step));
    }
}

__global__ void ddp_adamw_step_kernel(float *p, const float *g, const float *scale, float *m, float *v, size_t n,
                                      float decay, float beta1, float one_minus_beta1, float beta2,
                                      float one_minus_beta2, float eps, float step_size, float bias2_sqrt)
{
    const float grad_scale = scale ? *scale : 1.0f;
    for (size_t i = global_index(); i < n; i += grid_stride()) {
        const float gi = __fmul_rn(g[i], grad_scale);
        const float pi = __fmul_rn(p[i], decay);
        const float mi = __fadd_rn(__fmul_rn(m[i], beta1), __fmul_rn(one_minus_beta1, gi));
        const float vi = __fadd_rn(__fmul_rn(v[i], beta2), __fmul_rn(one_minus_beta2, __fmul_rn(gi, gi)));
        const float denom = __fadd_rn(__fsqrt_rn(vi) / bias2_sqrt, eps);
        p[i] = __fadd_rn(pi, __fmul_rn(-step_size, mi / denom));
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
