/* transformer_cpu.h — the CPU kernels of the GPT-2 device ops: token/position embeddings,
 * LayerNorm, the attention pieces (head split/merge, causal softmax, strided batched GEMM),
 * tanh-GELU, the residual add and the fused classifier over a padded vocabulary.
 *
 * These are plain functions on host memory. The device layer's dispatch validates arguments
 * before calling them, so they do not: the contract below is what a caller must guarantee, and
 * breaking it is undefined behaviour. Their device.h family block, dispatch checks and CUDA twins
 * come with the GPT-2 model; until then tests/runtime/device/test_transformer_cpu.c is their only
 * caller. The header must not grow device, model or rank knowledge.
 *
 * Common contract, unless an op says otherwise:
 * - Tensors are row-major float32, densely packed, in the shapes given; sizes are >= 0 and every
 *   index is computed in 64 bits, so tensors past INT_MAX elements are fine. A row length (C,
 *   hs, T, V) is >= 1 whenever the tensor has rows.
 * - Outputs do not overlap inputs or each other (pointers are restrict-qualified where so).
 * - "+=" outputs accumulate into what the caller left there; "=" outputs are overwritten and
 *   may hold garbage (NaN included) on entry.
 * - Results are bit-identical for any OpenMP thread count: threads split independent outputs
 *   only and every reduction runs in one fixed order (long ones in double).
 * - Token ids are in [0, vocabulary rows of wte); the classifier is the only op that checks its
 *   integer inputs, because targets are data the dispatch layer cannot inspect cheaply. */
#ifndef DDP_TRANSFORMER_CPU_H
#define DDP_TRANSFORMER_CPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* LayerNorm's variance epsilon (GPT-2 / torch.nn.LayerNorm default). */
#define CPU_LAYERNORM_EPS 1e-5

/* out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]. out [B,T,C], tokens [B,T], wte [V,C], wpe [>=T,C]. */
void cpu_embedding_forward(float *restrict out, const int32_t *restrict tokens, const float *restrict wte,
                           const float *restrict wpe, int64_t B, int64_t T, int64_t C);

/* dwte[tokens[b,t],:] += dout[b,t,:] (positions in (b,t) order, float accumulation) and
 * dwpe[t,:] += Σ_b dout[b,t,:] (summed in double). Both accumulate: dwte already holds the
 * classifier's gradient (tied weights) or earlier micro-steps. dout [B,T,C]. */
void cpu_embedding_backward(float *restrict dwte, float *restrict dwpe, const float *restrict dout,
                            const int32_t *restrict tokens, int64_t B, int64_t T, int64_t C);

/* out = (inp - mean)·rstd·w + b per row, biased variance, eps CPU_LAYERNORM_EPS; statistics in
 * double, saved per row as float for the backward. out/inp [N,C], w/b [C], mean/rstd [N]. */
void cpu_layernorm_forward(float *restrict out, float *restrict mean, float *restrict rstd, const float *restrict inp,
                           const float *restrict w, const float *restrict b, int64_t N, int64_t C);

/* dinp += ∂/∂inp (residual-stream accumulation), dw += Σ_rows dout·x̂, db += Σ_rows dout, with
 * x̂ rebuilt from the saved mean/rstd and every sum in double in row/column order. */
void cpu_layernorm_backward(float *restrict dinp, float *restrict dw, float *restrict db, const float *restrict dout,
                            const float *restrict inp, const float *restrict w, const float *restrict mean,
                            const float *restrict rstd, int64_t N, int64_t C);

/* qkv [B,T,3C] (C = NH·hs, [q | k | v] along the last axis, head h at channels h·hs..) →
 * q, k, v each [B,NH,T,hs] (=). */
void cpu_attention_split_heads(float *restrict q, float *restrict k, float *restrict v, const float *restrict qkv,
                               int64_t B, int64_t T, int64_t NH, int64_t hs);

/* Backward of split_heads: dqkv [B,T,3C] (=) from dq, dk, dv [B,NH,T,hs]. */
void cpu_attention_merge_heads_grad(float *restrict dqkv, const float *restrict dq, const float *restrict dk,
                                    const float *restrict dv, int64_t B, int64_t T, int64_t NH, int64_t hs);

/* y [B,NH,T,hs] → out [B,T,NH·hs] (=), heads concatenated in head order. */
void cpu_attention_merge_heads(float *restrict out, const float *restrict y, int64_t B, int64_t T, int64_t NH,
                               int64_t hs);

/* Backward of merge_heads: dy [B,NH,T,hs] (=) from dout [B,T,NH·hs]. */
void cpu_attention_split_heads_grad(float *restrict dy, const float *restrict dout, int64_t B, int64_t T,
                                    int64_t NH, int64_t hs);

/* att[bh,t,j] = softmax over j<=t of scale·preatt[bh,t,j] (=), and exactly 0 for j > t.
 * preatt/att [BH,T,T]; entries of preatt above the diagonal are never read (may be NaN). */
void cpu_causal_softmax_forward(float *restrict att, const float *restrict preatt, float scale, int64_t BH,
                                int64_t T);

/* dpreatt (=) = ∂/∂preatt given datt and the forward's att, the scale folded in; exactly 0
 * above the diagonal, where neither att nor datt is read. All [BH,T,T]. */
void cpu_causal_softmax_backward(float *restrict dpreatt, const float *restrict datt, const float *restrict att,
                                 float scale, int64_t BH, int64_t T);

/* For i in [0, batch): C_i = alpha·op(A_i)·op(B_i) + beta·C_i, row-major like device.h's gemm:
 * op(A_i) is m×k (A_i stored k×m when trans_a), op(B_i) is k×n (n×k when trans_b), X_i =
 * x + i·stride_x, lda/ldb/ldc >= the stored row length. k == 0 or alpha == 0 gives beta·C without
 * reading A or B; beta == 0 overwrites C (NaN there is cleared). Each C_i must not overlap
 * another C_j, A or B. Each batch entry is one single-threaded oneDNN sgemm, so the summation
 * order never depends on the thread count. Returns 0, or the dnnl_status_t of a failed call
 * (only out-of-memory inside oneDNN is expected). */
int cpu_gemm_strided_batched(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                             const float *a, int64_t lda, int64_t stride_a, const float *b, int64_t ldb,
                             int64_t stride_b, float beta, float *c, int64_t ldc, int64_t stride_c, int64_t batch);

/* y = 0.5·x·(1 + tanh(sqrt(2/π)·(x + 0.044715·x³))) (torch GELU approximate='tanh'). */
void cpu_gelu_tanh_forward(const float *restrict x, float *restrict y, size_t n);

/* dx (=) = dy · d/dx of the forward's formula, exactly differentiated. */
void cpu_gelu_tanh_backward(const float *restrict x, const float *restrict dy, float *restrict dx, size_t n);

/* out = a + b element-wise; out may alias a and/or b exactly (not partially). */
void cpu_add(float *out, const float *a, const float *b, size_t n);

/* Fused classifier over rows of logits with stride ld >= V (columns V..ld-1 are vocabulary
 * padding: never read). Per row: loss = logsumexp(l[0..V)) - l[target]; the row losses are
 * summed in double in row order and added to *loss_sum; *correct += rows whose argmax (first
 * index on ties) is the target. If dlogits is non-NULL it gets (softmax - onehot)·grad_scale in
 * columns 0..V-1 and exactly 0 in the padding; dlogits may be NULL (evaluation) or equal logits
 * (the gradient overwrites the logits in place), but not overlap it otherwise.
 * Returns 0, or -1 when a target is outside [0, V): then *bad_row (if non-NULL) is the first such
 * row and nothing has been written. *correct is a float: exact while the total stays below 2^24. */
int cpu_softmax_xent_padded(const float *logits, int64_t ld, const int32_t *targets, int64_t rows, int64_t V,
                            float grad_scale, float *dlogits, float *loss_sum, float *correct, int64_t *bad_row);

#endif
