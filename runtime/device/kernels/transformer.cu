/* transformer.cu — the CUDA code of the transformer family's attention ops (CPU: transformer_cpu.c):
 * the attention head split/merge and the causal softmax; each op's kernels and its host launcher.
 * The family's embeddings and LayerNorm are embedding.cu's and layernorm.cu's.
 *
 * The formulas are transformer_cpu.c's, which the tests compare against, and so is the rule that
 * makes them deterministic: no atomics, every reduction runs in a fixed order that depends only
 * on the shape (never on timing or the grid size), and every long sum runs in double and is
 * rounded to float once. The softmax gives each row one block that grid-strides over rows; the
 * permutes one thread per element in grid-stride loops over size_t indices, so any size works
 * with a capped grid. Entries of preatt, att and datt above the diagonal are never read.
 *
 * Every op takes a tensor_dtype, the type of its activations and of the parameters they are
 * computed from. Its kernels are templates on that storage type, E here (T is the sequence
 * length), with kernel_common.cuh's loads and stores: each element is widened to float, the
 * arithmetic is the float kernel's (the float instantiation is that kernel, bit for bit), and
 * each output of type E is rounded to bf16 once; the head permutes copy elements of either type
 * unchanged.
 *
 * Arguments arrive checked by device.c (non-empty, pointers set, a known type). This file must
 * not hold GEMMs (device_cuda.c), element-wise ops (elementwise.cu), the classifier (reduce.cu),
 * the embeddings (embedding.cu) or LayerNorm (layernorm.cu). */
#include "kernel_common.cuh"

using ddp_kernels::block_sum;
using ddp_kernels::from_float;
using ddp_kernels::global_index;
using ddp_kernels::grid_for;
using ddp_kernels::grid_stride;
using ddp_kernels::kBlock;
using ddp_kernels::kFullMask;
using ddp_kernels::to_float;

/* Threads for a block that owns one row of `cols` elements: the row rounded up to whole warps,
 * at most kBlock, so short rows do not leave most of a block idle. */
static unsigned row_block(size_t cols)
{
    const size_t threads = (cols / 32 + (cols % 32 != 0)) * 32;
    return (unsigned)(threads < 32 ? 32 : threads > kBlock ? kBlock : threads);
}

/* Max over the block; every thread gets it. fmaxf is exact and commutative, so the tree's shape
 * cannot change the result. scratch: __shared__ float[33]. */
__device__ inline float block_max(float v, float *scratch)
{
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
    for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float w = lane < n_warps ? scratch[lane] : -INFINITY;
        for (int offset = 16; offset > 0; offset >>= 1) w = fmaxf(w, __shfl_xor_sync(kFullMask, w, offset));
        if (lane == 0) scratch[32] = w;
    }
    __syncthreads();
    const float m = scratch[32];
    __syncthreads(); /* scratch may be reused by the caller's next reduction */
    return m;
}

/* ---- attention: head permutes ------------------------------------------------------------
 * Pure index permutes, one thread per element of the head-major tensor [B,NH,T,hs]; its reads
 * (gather) or writes (scatter) of the token-major tensor [B,T,ld] touch runs of hs floats at
 * column off + h·hs. Consecutive threads handle consecutive elements of a head row, so both
 * sides are coalesced for any hs. */
__device__ inline size_t token_offset(size_t i, size_t ld, size_t off, size_t T, size_t NH, size_t hs)
{
    const size_t e = i % hs, t = i / hs % T, h = i / (hs * T) % NH, b = i / (hs * T * NH);
    return (b * T + t) * ld + off + h * hs + e;
}

template <typename E>
__global__ void ddp_gather_heads_kernel(E *heads, const E *tok, size_t ld, size_t off, size_t T, size_t NH, size_t hs,
                                        size_t n)
{
    for (size_t i = global_index(); i < n; i += grid_stride()) heads[i] = tok[token_offset(i, ld, off, T, NH, hs)];
}

template <typename E>
__global__ void ddp_scatter_heads_kernel(E *tok, const E *heads, size_t ld, size_t off, size_t T, size_t NH, size_t hs,
                                         size_t n)
{
    for (size_t i = global_index(); i < n; i += grid_stride()) tok[token_offset(i, ld, off, T, NH, hs)] = heads[i];
}

extern "C" int device_cuda_attention_split_heads(device *d, tensor_dtype t, void *q, void *k, void *v, const void *qkv,
                                                 int64_t B, int64_t T, int64_t NH, int64_t hs, ddp_err *err)
{
    const size_t C = (size_t)NH * (size_t)hs, n = (size_t)B * (size_t)T * C;
    void *const parts[3] = {q, k, v};
    DDP_DTYPE_SWITCH(t, E,
                     for (size_t p = 0; p < 3; p++)
                         DDP_LAUNCH_OP(ddp_gather_heads_kernel<E>, grid_for(n, kBlock), kBlock, 0,
                                       static_cast<E *>(parts[p]), static_cast<const E *>(qkv), 3 * C, p * C,
                                       (size_t)T, (size_t)NH, (size_t)hs, n));
    return DDP_OK;
}

extern "C" int device_cuda_attention_merge_heads(device *d, tensor_dtype t, void *out, const void *y, int64_t B,
                                                 int64_t T, int64_t NH, int64_t hs, ddp_err *err)
{
    const size_t C = (size_t)NH * (size_t)hs, n = (size_t)B * (size_t)T * C;
    DDP_DTYPE_SWITCH(t, E, DDP_LAUNCH_OP(ddp_scatter_heads_kernel<E>, grid_for(n, kBlock), kBlock, 0,
                                         static_cast<E *>(out), static_cast<const E *>(y), C, (size_t)0, (size_t)T,
                                         (size_t)NH, (size_t)hs, n));
    return DDP_OK;
}

extern "C" int device_cuda_attention_split_heads_grad(device *d, tensor_dtype t, void *dy, const void *dout, int64_t B,
                                                      int64_t T, int64_t NH, int64_t hs, ddp_err *err)
{
    const size_t C = (size_t)NH * (size_t)hs, n = (size_t)B * (size_t)T * C;
    DDP_DTYPE_SWITCH(t, E, DDP_LAUNCH_OP(ddp_gather_heads_kernel<E>, grid_for(n, kBlock), kBlock, 0,
                                         static_cast<E *>(dy), static_cast<const E *>(dout), C, (size_t)0, (size_t)T,
                                         (size_t)NH, (size_t)hs, n));
    return DDP_OK;
}

extern "C" int device_cuda_attention_merge_heads_grad(device *d, tensor_dtype t, void *dqkv, const void *dq,
                                                      const void *dk, const void *dv, int64_t B, int64_t T, int64_t NH,
                                                      int64_t hs, ddp_err *err)
{
    const size_t C = (size_t)NH * (size_t)hs, n = (size_t)B * (size_t)T * C;
    const void *const parts[3] = {dq, dk, dv};
    DDP_DTYPE_SWITCH(t, E,
                     for (size_t p = 0; p < 3; p++)
                         DDP_LAUNCH_OP(ddp_scatter_heads_kernel<E>, grid_for(n, kBlock), kBlock, 0,
                                       static_cast<E *>(dqkv), static_cast<const E *>(parts[p]), 3 * C, p * C,
                                       (size_t)T, (size_t)NH, (size_t)hs, n));
    return DDP_OK;
}

/* ---- attention: causal softmax -------------------------------------------------------------
 * One block per row (bh, t) of [BH,T,T], grid-striding over rows; row t reads only columns
 * 0..t and writes exact zeros after them. The exponentials are float, as on the CPU; their
 * sum and the dot of the backward are double. __fmul_rn keeps nvcc from fusing scale·pre into
 * the subtraction (an FMA), so the exponent is rounded exactly as the CPU rounds it. */
template <typename E>
__global__ void ddp_causal_softmax_forward_kernel(E *att, const E *preatt, float scale, size_t rows, size_t T)
{
    __shared__ float max_scratch[33];
    __shared__ double sum_scratch[33];
    for (size_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const size_t t = row % T;
        const E *pre = preatt + row * T;
        E *a = att + row * T;
        float mx = -INFINITY;
        for (size_t j = threadIdx.x; j <= t; j += blockDim.x) mx = fmaxf(mx, __fmul_rn(scale, to_float(pre[j])));
        mx = block_max(mx, max_scratch); /* every exponent <= 0: nothing overflows */
        double sum = 0.0;
        for (size_t j = threadIdx.x; j <= t; j += blockDim.x)
            sum += (double)expf(__fmul_rn(scale, to_float(pre[j])) - mx);
        const double inv = 1.0 / block_sum(sum, sum_scratch);
        for (size_t j = threadIdx.x; j <= t; j += blockDim.x)
            a[j] = from_float<E>((float)((double)expf(__fmul_rn(scale, to_float(pre[j])) - mx) * inv));
        for (size_t j = t + 1 + threadIdx.x; j < T; j += blockDim.x) a[j] = from_float<E>(0.0f);
    }
}

/* dpre_j = scale·att_j·(datt_j - Σ_k att_k·datt_k), all in double, rounded once. */
template <typename E>
__global__ void ddp_causal_softmax_backward_kernel(E *dpreatt, const E *datt, const E *att, double scale, size_t rows,
                                                   size_t T)
{
    __shared__ double scratch[33];
    for (size_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const size_t t = row % T;
        const E *a = att + row * T, *da = datt + row * T;
        E *dp = dpreatt + row * T;
        double dot = 0.0;
        for (size_t j = threadIdx.x; j <= t; j += blockDim.x) dot += (double)to_float(a[j]) * (double)to_float(da[j]);
        dot = block_sum(dot, scratch);
        for (size_t j = threadIdx.x; j <= t; j += blockDim.x)
            dp[j] = from_float<E>((float)(scale * (double)to_float(a[j]) * ((double)to_float(da[j]) - dot)));
        for (size_t j = t + 1 + threadIdx.x; j < T; j += blockDim.x) dp[j] = from_float<E>(0.0f);
    }
}

extern "C" int device_cuda_causal_softmax_forward(device *d, tensor_dtype t, void *att, const void *preatt, float scale,
                                                  int64_t BH, int64_t T, ddp_err *err)
{
    const size_t rows = (size_t)BH * (size_t)T;
    DDP_DTYPE_SWITCH(t, E, DDP_LAUNCH_OP(ddp_causal_softmax_forward_kernel<E>, grid_for(rows, 1), row_block((size_t)T),
                                         0, static_cast<E *>(att), static_cast<const E *>(preatt), scale, rows,
                                         (size_t)T));
    return DDP_OK;
}

extern "C" int device_cuda_causal_softmax_backward(device *d, tensor_dtype t, void *dpreatt, const void *datt,
                                                   const void *att, float scale, int64_t BH, int64_t T, ddp_err *err)
{
    const size_t rows = (size_t)BH * (size_t)T;
    DDP_DTYPE_SWITCH(t, E, DDP_LAUNCH_OP(ddp_causal_softmax_backward_kernel<E>, grid_for(rows, 1),
                                         row_block((size_t)T), 0, static_cast<E *>(dpreatt),
                                         static_cast<const E *>(datt), static_cast<const E *>(att), (double)scale,
                                         rows, (size_t)T));
    return DDP_OK;
}
