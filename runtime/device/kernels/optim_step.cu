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
 *
 * One launch updates a whole model: each element's weight decay is decided from the args'
 * exemption bounds (a device table of ~50 offsets for GPT-2), where the exempt elements run with
 * weight_decay 0 (SGD) or decay 1 (AdamW), the values a separate update of them with weight decay
 * 0 used, so the bits are those of one update per run of tensors. A thread's elements come in
 * ascending order, so it finds its first element's place in the table by binary search and then
 * only moves forward. Elements move in packs of four floats (16 bytes) where every pointer is
 * aligned for them; the arithmetic per element is the same either way. Arguments arrive checked
 * (device_check_*.c). This file must not know about schedules, clipping policy or step counts beyond the
 * scalars it is given. */
#include "kernel_common.cuh"

using ddp_kernels::all_aligned;
using ddp_kernels::global_index;
using ddp_kernels::grid_for;
using ddp_kernels::grid_stride;
using ddp_kernels::kBlock;
using ddp_kernels::load_pack;
using ddp_kernels::pack;
using ddp_kernels::store_pack;

constexpr int kOptVec = 4; /* floats per 16-byte pack */

/* Where a thread stands in the exemption table: k bounds lie at or below the offset of its
 * current element, so the element is exempt when k is odd. */
struct exempt_cursor {
    const size_t *bounds;
    size_t n_bounds, first, k;

    __device__ exempt_cursor(const decay_exempt &x, size_t i) : bounds(x.bounds), n_bounds(x.n_bounds), first(x.first)
    {
        size_t lo = 0, hi = n_bounds; /* the number of bounds <= first + i */
        while (lo < hi) {
            const size_t mid = lo + (hi - lo) / 2;
            if (bounds[mid] <= first + i) lo = mid + 1;
            else hi = mid;
        }
        k = lo;
    }
    /* Whether element i is exempt; i never decreases from one call to the next. */
    __device__ bool exempt(size_t i)
    {
        while (k < n_bounds && bounds[k] <= first + i) k++;
        return k % 2 != 0;
    }
};

/* The first element this thread updates: its first pack's, or its tail element when it has no
 * pack (the packs of the grid-stride loop come before the n % W tail, in ascending order). */
template <int W> __device__ inline size_t first_element(size_t n)
{
    return global_index() < n / W ? global_index() * W : n / W * W + global_index();
}

template <int W>
__global__ void ddp_sgd_step_kernel(float *p, const float *g, const float *scale, float *buf, size_t n, float lr,
                                    float momentum, float weight_decay, int nesterov, int first_step, decay_exempt ex)
{
    const float grad_scale = scale ? *scale : 1.0f;
    exempt_cursor cursor(ex, first_element<W>(n));
    const auto update = [&](float pi, float gi, float bi, size_t i, float *p_out, float *b_out) {
        const float wd = cursor.exempt(i) ? 0.0f : weight_decay;
        float step = __fmul_rn(gi, grad_scale);
        if (wd != 0.0f) step = __fadd_rn(step, __fmul_rn(wd, pi));
        if (momentum != 0.0f) {
            const float b = first_step ? step : __fadd_rn(__fmul_rn(bi, momentum), step);
            *b_out = b;
            step = nesterov ? __fadd_rn(step, __fmul_rn(momentum, b)) : b;
        }
        *p_out = __fadd_rn(pi, __fmul_rn(-lr, step));
    };
    for (size_t k = global_index(); k < n / W; k += grid_stride()) {
        pack<float, W> pv = load_pack<W>(p, k), bv = {};
        const pack<float, W> gv = load_pack<W>(g, k);
        if (momentum != 0.0f && !first_step) bv = load_pack<W>(buf, k);
        DDP_UNROLL
        for (int j = 0; j < W; j++) update(pv.v[j], gv.v[j], bv.v[j], k * W + j, &pv.v[j], &bv.v[j]);
        store_pack<W>(p, k, pv);
        if (momentum != 0.0f) store_pack<W>(buf, k, bv);
    }
    for (size_t i = n / W * W + global_index(); i < n; i += grid_stride()) {
        float b = 0.0f;
        update(p[i], g[i], momentum != 0.0f && !first_step ? buf[i] : 0.0f, i, &p[i], &b);
        if (momentum != 0.0f) buf[i] = b;
    }
}

template <int W>
__global__ void ddp_adamw_step_kernel(float *p, const float *g, const float *scale, float *m, float *v, size_t n,
                                      float decay, float beta1, float one_minus_beta1, float beta2,
                                      float one_minus_beta2, float eps, float step_size, float bias2_sqrt,
                                      decay_exempt ex)
{
    const float grad_scale = scale ? *scale : 1.0f;
    exempt_cursor cursor(ex, first_element<W>(n));
    const auto update = [&](float &pi, float gi, float &mi, float &vi, size_t i) {
        const float d = cursor.exempt(i) ? 1.0f : decay;
        const float gs = __fmul_rn(gi, grad_scale);
        const float pd = __fmul_rn(pi, d);
        mi = __fadd_rn(__fmul_rn(mi, beta1), __fmul_rn(one_minus_beta1, gs));
        vi = __fadd_rn(__fmul_rn(vi, beta2), __fmul_rn(one_minus_beta2, __fmul_rn(gs, gs)));
        const float denom = __fadd_rn(__fsqrt_rn(vi) / bias2_sqrt, eps);
        pi = __fadd_rn(pd, __fmul_rn(-step_size, mi / denom));
    };
    for (size_t k = global_index(); k < n / W; k += grid_stride()) {
        pack<float, W> pv = load_pack<W>(p, k), mv = load_pack<W>(m, k), vv = load_pack<W>(v, k);
        const pack<float, W> gv = load_pack<W>(g, k);
        DDP_UNROLL
        for (int j = 0; j < W; j++) update(pv.v[j], gv.v[j], mv.v[j], vv.v[j], k * W + j);
        store_pack<W>(p, k, pv);
        store_pack<W>(m, k, mv);
        store_pack<W>(v, k, vv);
    }
    for (size_t i = n / W * W + global_index(); i < n; i += grid_stride()) update(p[i], g[i], m[i], v[i], i);
}

extern "C" int device_cuda_sgd_step(device *d, float *p, const float *g, const float *scale, float *buf, size_t n,
                                    const sgd_args *a, ddp_err *err)
{
    if (all_aligned(16, {p, g, buf}))
        DDP_LAUNCH_OP(ddp_sgd_step_kernel<kOptVec>, grid_for(n / kOptVec + 1, kBlock), kBlock, 0, p, g, scale, buf, n,
                      a->lr, a->momentum, a->weight_decay, (int)a->nesterov, (int)a->first_step, a->exempt);
    else
        DDP_LAUNCH_OP(ddp_sgd_step_kernel<1>, grid_for(n, kBlock), kBlock, 0, p, g, scale, buf, n, a->lr, a->momentum,
                      a->weight_decay, (int)a->nesterov, (int)a->first_step, a->exempt);
    return DDP_OK;
}

extern "C" int device_cuda_adamw_step(device *d, float *p, const float *g, const float *scale, float *m, float *v,
                                      size_t n, const adamw_args *a, ddp_err *err)
{
    if (all_aligned(16, {p, g, m, v}))
        DDP_LAUNCH_OP(ddp_adamw_step_kernel<kOptVec>, grid_for(n / kOptVec + 1, kBlock), kBlock, 0, p, g, scale, m, v,
                      n, a->decay, a->beta1, a->one_minus_beta1, a->beta2, a->one_minus_beta2, a->eps, a->step_size,
                      a->bias2_sqrt, a->exempt);
    else
        DDP_LAUNCH_OP(ddp_adamw_step_kernel<1>, grid_for(n, kBlock), kBlock, 0, p, g, scale, m, v, n, a->decay,
                      a->beta1, a->one_minus_beta1, a->beta2, a->one_minus_beta2, a->eps, a->step_size, a->bias2_sqrt,
                      a->exempt);
    return DDP_OK;
}
