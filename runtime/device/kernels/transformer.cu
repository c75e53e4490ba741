/* transformer.cu — the CUDA code of the transformer family (CPU: transformer_cpu.c): token and
 * position embeddings, LayerNorm, the attention head split/merge and the causal softmax; each
 * op's kernels and its host launcher.
 *
 * The formulas are transformer_cpu.c's, which the tests compare against, and so is the rule that
 * makes them deterministic: no atomics, every reduction runs in a fixed order that depends only
 * on the shape (never on timing or the grid size), and every long sum runs in double and is
 * rounded to float once. Row ops (LayerNorm, softmax) give each row one block that grid-strides
 * over rows; element ops one thread per element in grid-stride loops over size_t indices, so any
 * size works with a capped grid. Entries of preatt, att and datt above the diagonal are never
 * read.
 *
 * Every op takes a tensor_dtype, the type of its activations and of the parameters they are
 * computed from. Its kernels are templates on that storage type, E here (T is the sequence
 * length), with kernel_common.cuh's loads and stores: each element is widened to float, the
 * arithmetic is the float kernel's (the float instantiation is that kernel, bit for bit), and
 * each output of type E is rounded to bf16 once; "+=" outputs (dinp) add to what they held in
 * double before that one rounding. Parameter gradients (dwte, dwpe, dw, db) and LayerNorm's
 * mean and rstd are float always; the head permutes copy elements of either type unchanged.
 *
 * Arguments arrive checked by device.c (non-empty, pointers set, a known type); token ids are
 * trusted to lie in [0, rows of wte). This file must not hold GEMMs (device_cuda.c), element-wise
 * ops (elementwise.cu) or the classifier (reduce.cu). */
#include "kernel_common.cuh"

using ddp_kernels::block_sum;
using ddp_kernels::from_float;
using ddp_kernels::global_index;
using ddp_kernels::grid_for;
using ddp_kernels::grid_stride;
using ddp_kernels::kBlock;
using ddp_kernels::kFullMask;
using ddp_kernels::to_float;

/* LayerNorm's variance epsilon (GPT-2 / torch.nn.LayerNorm default), as transformer_cpu.c. */
constexpr double kLayerNormEps = 1e-5;

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

/* ---- embeddings ------------------------------------------------------------------------- */

template <typename E>
__global__ void ddp_embedding_forward_kernel(E *out, const int32_t *tokens, const E *wte, const E *wpe, size_t T,
                                             size_t C, size_t n)
{
    for (size_t i = global_index(); i < n; i += grid_stride()) {
        const size_t bt = i / C, c = i % C;
        out[i] = from_float<E>(to_float(wte[(size_t)tokens[bt] * C + c]) + to_float(wpe[(bt % T) * C + c]));
    }
}

/* A token can occur at many positions, so rows of dwte are not independent outputs; channels
 * are. One thread per channel walks every position in order, adding in float as the CPU does:
 * each dwte entry receives the same additions in the same order, so the bits match the CPU's.
 * A warp's threads are adjacent channels, so every load and store is coalesced. */
template <typename E>
__global__ void ddp_embedding_backward_wte_kernel(float *dwte, const E *dout, const int32_t *tokens, size_t BT,
                                                  size_t C)
{
    for (size_t c = global_index(); c < C; c += grid_stride())
        for (size_t bt = 0; bt < BT; bt++) dwte[(size_t)tokens[bt] * C + c] += to_float(dout[bt * C + c]);
}

/* dwpe[t,c] += Σ_b dout[b,t,c]: one thread per (t,c), the sum in double over b in order. */
template <typename E>
__global__ void ddp_embedding_backward_wpe_kernel(float *dwpe, const E *dout, size_t B, size_t TC)
{
    for (size_t i = global_index(); i < TC; i += grid_stride()) {
        double acc = 0.0;
        for (size_t b = 0; b < B; b++) acc += (double)to_float(dout[b * TC + i]);
        dwpe[i] = (float)((double)dwpe[i] + acc);
    }
}

extern "C" int device_cuda_embedding_forward(device *d, tensor_dtype t, void *out, const int32_t *tokens,
                                             const void *wte, const void *wpe, int64_t B, int64_t T, int64_t C,
                                             ddp_err *err)
{
    const size_t n = (size_t)B * (size_t)T * (size_t)C;
    DDP_DTYPE_SWITCH(t, E, DDP_LAUNCH_OP(ddp_embedding_forward_kernel<E>, grid_for(n, kBlock), kBlock, 0,
                                         static_cast<E *>(out), tokens, static_cast<const E *>(wte),
                                         static_cast<const E *>(wpe), (size_t)T, (size_t)C, n));
    return DDP_OK;
}

extern "C" int device_cuda_embedding_backward(device *d, tensor_dtype t, float *dwte, float *dwpe, const void *dout,
                                              const int32_t *tokens, int64_t B, int64_t T, int64_t C, ddp_err *err)
{
    const size_t BT = (size_t)B * (size_t)T, TC = (size_t)T * (size_t)C;
    DDP_DTYPE_SWITCH(t, E,
                     DDP_LAUNCH_OP(ddp_embedding_backward_wte_kernel<E>, grid_for((size_t)C, kBlock), kBlock, 0, dwte,
                                   static_cast<const E *>(dout), tokens, BT, (size_t)C);
                     DDP_LAUNCH_OP(ddp_embedding_backward_wpe_kernel<E>, grid_for(TC, kBlock), kBlock, 0, dwpe,
                                   static_cast<const E *>(dout), (size_t)B, TC));
    return DDP_OK;
}

/* ---- LayerNorm ---------------------------------------------------------------------------- */

/* One block per row. Two passes in double (mean, then the centred second moment) so the
 * variance never suffers the E[x²] - E[x]² cancellation; the output is rounded to float once. */
template <typename E>
__global__ void ddp_layernorm_forward_kernel(E *out, float *mean, float *rstd, const E *inp, const E *w, const E *b,
                                             size_t N, size_t C)
{
    __shared__ double scratch[33];
    for (size_t r = blockIdx.x; r < N; r += gridDim.x) {
        const E *x = inp + r * C;
        double sum = 0.0;
        for (size_t c = threadIdx.x; c < C; c += blockDim.x) sum += (double)to_float(x[c]);
        const double m = block_sum(sum, scratch) / (double)C;
        double var = 0.0;
        for (size_t c = threadIdx.x; c < C; c += blockDim.x) {
            const double dx = (double)to_float(x[c]) - m;
            var += dx * dx;
        }
        const double rs = 1.0 / sqrt(block_sum(var, scratch) / (double)C + kLayerNormEps);
        E *o = out + r * C;
        for (size_t c = threadIdx.x; c < C; c += blockDim.x)
            o[c] = from_float<E>(
                (float)(((double)to_float(x[c]) - m) * rs * (double)to_float(w[c]) + (double)to_float(b[c])));
        if (threadIdx.x == 0) {
            mean[r] = (float)m;
            rstd[r] = (float)rs;
        }
    }
}

/* dinp += rstd·(dn - mean(dn) - x̂·mean(dn·x̂)) with dn = dout·w, one block per row, both means
 * in double; x̂ is rebuilt from the saved float statistics, as on the CPU. */
template <typename E>
__global__ void ddp_layernorm_backward_input_kernel(E *dinp, const E *dout, const E *inp, const E *w,
                                                    const float *mean, const float *rstd, size_t N, size_t C)
{
    __shared__ double scratch[33];
    for (size_t r = blockIdx.x; r < N; r += gridDim.x) {
        const E *dy = dout + r * C, *x = inp + r * C;
        const double m = (double)mean[r], rs = (double)rstd[r];
        double sum_dn = 0.0, sum_dn_xhat = 0.0;
        for (size_t c = threadIdx.x; c < C; c += blockDim.x) {
            const double dn = (double)to_float(dy[c]) * (double)to_float(w[c]);
            sum_dn += dn;
            sum_dn_xhat += dn * (((double)to_float(x[c]) - m) * rs);
        }
        const double mean_dn = block_sum(sum_dn, scratch) / (double)C;
        const double mean_dn_xhat = block_sum(sum_dn_xhat, scratch) / (double)C;
        E *dx = dinp + r * C;
        for (size_t c = threadIdx.x; c < C; c += blockDim.x) {
            const double dn = (double)to_float(dy[c]) * (double)to_float(w[c]);
            const double xhat = ((double)to_float(x[c]) - m) * rs;
            dx[c] = from_float<E>((float)((double)to_float(dx[c]) + rs * (dn - mean_dn - xhat * mean_dn_xhat)));
        }
    }
}

/* dw and db are column sums over all N rows. A single thread per column walking every row would
 * leave a GPU nearly idle (C threads for N·C elements), so the rows are cut into chunks of
 * kLnChunkRows: one thread per (chunk, column) sums its chunk's rows in order into double
 * partials, then one thread per column adds the chunks' partials in chunk order. Both orders
 * depend only on N, never on the grid, and every load of a warp is coalesced (adjacent columns). */
constexpr size_t kLnChunkRows = 64;

template <typename E>
__global__ void ddp_layernorm_param_partials_kernel(double *part_w, double *part_b, const E *dout, const E *inp,
                                                    const float *mean, const float *rstd, size_t N, size_t C,
                                                    size_t n_chunks)
{
    for (size_t i = global_index(); i < n_chunks * C; i += grid_stride()) {
        const size_t chunk = i / C, c = i % C;
        const size_t r_end = (chunk + 1) * kLnChunkRows < N ? (chunk + 1) * kLnChunkRows : N;
        double acc_w = 0.0, acc_b = 0.0;
        for (size_t r = chunk * kLnChunkRows; r < r_end; r++) {
            const double dy = (double)to_float(dout[r * C + c]);
            acc_w += dy * (((double)to_float(inp[r * C + c]) - (double)mean[r]) * (double)rstd[r]);
            acc_b += dy;
        }
        part_w[i] = acc_w;
        part_b[i] = acc_b;
    }
}

__global__ void ddp_layernorm_param_sums_kernel(float *dw, float *db, const double *part_w, const double *part_b,
                                                size_t C, size_t n_chunks)
{
    for (size_t c = global_index(); c < C; c += grid_stride()) {
        double sum_w = 0.0, sum_b = 0.0;
        for (size_t chunk = 0; chunk < n_chunks; chunk++) {
            sum_w += part_w[chunk * C + c];
            sum_b += part_b[chunk * C + c];
        }
        dw[c] = (float)((double)dw[c] + sum_w);
        db[c] = (float)((double)db[c] + sum_b);
    }
}

extern "C" int device_cuda_layernorm_forward(device *d, tensor_dtype t, void *out, float *mean, float *rstd,
                                             const void *inp, const void *w, const void *b, int64_t N, int64_t C,
                                             ddp_err *err)
{
    DDP_DTYPE_SWITCH(t, E, DDP_LAUNCH_OP(ddp_layernorm_forward_kernel<E>, grid_for((size_t)N, 1), row_block((size_t)C),
                                         0, static_cast<E *>(out), mean, rstd, static_cast<const E *>(inp),
                                         static_cast<const E *>(w), static_cast<const E *>(b), (size_t)N, (size_t)C));
    return DDP_OK;
}

extern "C" int device_cuda_layernorm_backward(device *d, tensor_dtype t, void *dinp, float *dw, float *db,
                                              const void *dout, const void *inp, const void *w, const float *mean,
                                              const float *rstd, int64_t N, int64_t C, ddp_err *err)
{
    const size_t n_chunks = (size_t)N / kLnChunkRows + ((size_t)N % kLnChunkRows != 0);
    const size_t n_part = n_chunks * (size_t)C;
    double *part = NULL; /* [n_chunks][C] partials of dw, then of db */
    int rc = device_cuda_scratch(d, 2 * sizeof(double) * n_part, (void **)&part, err);
    if (rc) return rc;
    DDP_DTYPE_SWITCH(t, E,
                     const E *dy = static_cast<const E *>(dout);
                     const E *x = static_cast<const E *>(inp);
                     DDP_LAUNCH_OP(ddp_layernorm_backward_input_kernel<E>, grid_for((size_t)N, 1),
                                   row_block((size_t)C), 0, static_cast<E *>(dinp), dy, x, static_cast<const E *>(w),
                                   mean, rstd, (size_t)N, (size_t)C);
                     DDP_LAUNCH_OP(ddp_layernorm_param_partials_kernel<E>, grid_for(n_part, kBlock), kBlock, 0, part,
                                   part + n_part, dy, x, mean, rstd, (size_t)N, (size_t)C, n_chunks));
    DDP_LAUNCH_OP(ddp_layernorm_param_sums_kernel, grid_for((size_t)C, kBlock), kBlock, 0, dw, db, part,
                  part + n_part, (size_t)C, n_chunks);
    return DDP_OK;
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
