/* device.h — the device layer: the only code that knows CPU from CUDA.
 *
 * A device owns memory and an in-order compute stream. Every compute op is enqueued on that
 * stream and may return before it runs (CUDA) or after (CPU); download(), synchronize() and
 * timer_take_ms() are the only ops that wait (and upload(), for a staging buffer still being
 * copied), so results meant for the host (loss sums, the gradient norm) stay in device memory
 * until a caller downloads them, where it reports them; host_waits() counts the waits.
 * Pointers passed to ops are device pointers from alloc(); sizes are size_t/int64_t throughout,
 * so tensors with more than INT_MAX elements are fine. Ops on activations take the tensors'
 * element type (tensor_dtype) and void pointers; gradients and optimizer state are always float.
 * Matrices are row-major. Ops are shaped so a transformer adds ops rather than changing these.
 * This layer must not know about models, optimizers' schedules, ranks or communication.
 *
 * Callers reach every op as d->ops->op(d, ..., err). d->ops is the checking table of device.c:
 * it validates each op's arguments once, for both backends, with one message per mistake
 * (negative or inconsistent sizes, NULL where data is read or written, unknown enum values),
 * returns at once when an op has nothing to do (n == 0, an empty matrix), and only then calls
 * the backend's table, d->backend. So a backend's op may assume valid arguments and a non-empty
 * job; it checks only what depends on its library or on the data (cuBLAS's 32-bit sizes, a CPU
 * label out of range).
 *
 * Ops come in families, one block below each. A family's CPU code and CUDA code sit side by side
 * in runtime/device/kernels/ (FAMILY_cpu.c next to FAMILY.cu; the transformer family's as
 * embedding_* and layernorm_*); memory, GEMM and timers are the backends' own (device_cpu.c,
 * device_cuda.c). Each block is an X-macro list, OP(name, (params)), that generates the ops-table
 * field `int (*name)(params, ddp_err *err)`, both backends' tables and their function declarations
 * (backend.h). Adding a device op:
 *   1. one OP(...) line in its family's block here, with a comment saying what it computes;
 *   2. its argument contract in device_check_FAMILY.c, which device.c's checking table points to:
 *      `checked_NAME`, which rejects bad arguments, returns on an empty job and forwards to
 *      d->backend->NAME through DEVICE_FORWARD(NAME, cost, ...) with the op's cost for the
 *      profiler (device_prof.h: its bytes, FLOPs and a detail telling shapes apart);
 *   3. the CPU function `device_cpu_NAME` in kernels/FAMILY_cpu.c;
 *   4. the CUDA kernel and its host launcher `extern "C" int device_cuda_NAME` in kernels/FAMILY.cu;
 *   5. a test: CPU against a reference (tests/runtime/device/test_device_cpu.c), CUDA against CPU
 *      (test_cuda_kernels.c; the transformer family: test_cuda_transformer.c), and a bad argument
 *      in test_device_contract.c.
 * A missing function of steps 2-4 fails the build: the tables name each. A new family is a block
 * (added to DEVICE_OPS and, with its name, to DEVICE_FAMILIES), FAMILY_cpu.c next to FAMILY.cu,
 * both files in kernels/meson.build, and device_check_FAMILY.c in meson.build. */
#ifndef DDP_DEVICE_H
#define DDP_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/base/err.h"
#include "runtime/device/device_opts.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct device device;
typedef struct device_timer device_timer;
typedef struct device_stamps device_stamps;
typedef struct device_prof device_prof;

/* Element type of the tensors an op computes on (activations, GEMM operands): float, or bfloat16
 * (2 bytes, stored as uint16_t bits; the CUDA backend's mixed precision, with float arithmetic
 * inside every kernel). Gradients, optimizer state, losses and LayerNorm statistics are always
 * float. The CPU backend computes in float only: a TENSOR_BF16 op there is refused. */
typedef enum { TENSOR_F32, TENSOR_BF16 } tensor_dtype;

/* Bytes per element of t. */
static inline size_t tensor_dtype_size(tensor_dtype t) { return t == TENSOR_BF16 ? 2 : 4; }

/* The elements an optimizer step exempts from weight decay (a PyTorch param group with
 * weight_decay 0), so that one launch can update every tensor: element i of the step's buffers
 * sits at offset first + i of the flat parameter buffer, and is exempt when that offset lies in
 * one of the spans [bounds[0], bounds[1]), [bounds[2], bounds[3]), ... bounds is a device array of
 * n_bounds ascending offsets (an even number), read when the step runs; all zero: none exempt. */
typedef struct decay_exempt {
    const size_t *bounds;
    size_t n_bounds;
    size_t first;
} decay_exempt;

typedef struct sgd_args {
    float lr, momentum, weight_decay;
    bool nesterov;
    bool first_step;          /* PyTorch: the momentum buffer is the gradient itself on step 1 */
    decay_exempt exempt;      /* elements with weight_decay 0 */
} sgd_args;

/* AdamW's scalars for one step, computed once by the optimizer (optim_adamw_args) the way
 * torch.optim.AdamW does: in double, applied as float32. */
typedef struct adamw_args {
    float beta1, beta2, eps;
    float one_minus_beta1, one_minus_beta2;
    float decay;              /* 1 - lr * weight_decay; exempt elements use 1 */
    float step_size;          /* lr / (1 - beta1^step) */
    float bias2_sqrt;         /* sqrt(1 - beta2^step), > 0 */
    decay_exempt exempt;      /* elements without weight decay */
} adamw_args;

/* softmax_xent's label for a row with no target: its loss, gradient and count are 0. */
#define XENT_NO_TARGET (-1)

/* ---- memory (device_cpu.c, device_cuda.c) ---------------------------------------------------- */
#define DEVICE_MEMORY_OPS(OP)                                                                      \
    OP(alloc, (device *d, size_t bytes, void **out))                                               \
    OP(upload, (device *d, void *dst, const void *src, size_t bytes))   /* host -> device */       \
    OP(download, (device *d, void *dst, const void *src, size_t bytes)) /* device -> host; waits */ \
    OP(copy, (device *d, void *dst, const void *src, size_t bytes))     /* device -> device */     \
    OP(synchronize, (device *d))                                                                   \
    /* how many times so far the host waited for this device: always 0 on the CPU; on CUDA every */ \
    /* blocking call (the emulated build counts all of them, hidden ones too) */                  \
    OP(host_waits, (device *d, uint64_t *count))

/* ---- GEMM (device_cpu.c: oneDNN or OpenBLAS; device_cuda.c: cuBLAS) -------------------------- */
/* C[m,n] = alpha * op(A)[m,k] · op(B)[k,n] + beta * C, row-major, ld = row stride in elements;
 * beta 0 overwrites C without reading it. A and B are of type ab, C of type c_type: (F32, F32),
 * or on CUDA (BF16, BF16) and (BF16, F32) with fp32 accumulation (the weight gradients of the
 * mixed-precision path add bf16 products into fp32 gradients). */
#define DEVICE_GEMM_OPS(OP)                                                                        \
    OP(gemm, (device *d, tensor_dtype ab, tensor_dtype c_type, bool trans_a, bool trans_b, int64_t m, \
              int64_t n, int64_t k, float alpha, const void *a, int64_t lda, const void *b, int64_t ldb, \
              float beta, void *c, int64_t ldc))

/* ---- GEMMs with a fused epilogue (CUDA: device_cuda_lt.c; CPU: gemm_epilogue.c) ---------------
 * The linear layers' GEMMs with their epilogues fused: on CUDA one cuBLASLt GEMM whose epilogue
 * applies the bias and GELU to the fp32 accumulator before the single rounding to t, where
 * cuBLASLt has a kernel for the shape (else, as on the CPU, the GEMM and the element-wise op in
 * turn). Every tensor is of type t, k >= 1, the outputs are dense m x n (row stride n) and
 * overlap no input nor each other. */
#define DEVICE_GEMM_EPILOGUE_OPS(OP)                                                               \
    /* y = op(A) · op(B) + bias, bias[n] added to every row */                                     \
    OP(gemm_bias, (device *d, tensor_dtype t, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, \
                   const void *a, int64_t lda, const void *b, int64_t ldb, const void *bias, void *y)) \
    /* pre = op(A) · op(B) + bias as gemm_bias, and y = GPT-2's tanh GELU of pre (pre is kept for \
     * gemm_gelu_backward) */                                                                      \
    OP(gemm_bias_gelu, (device *d, tensor_dtype t, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, \
                        const void *a, int64_t lda, const void *b, int64_t ldb, const void *bias, void *pre, \
                        void *y))                                                                  \
    /* dx = (op(A) · op(B)) * gelu'(pre), GPT-2's tanh GELU: the gradient reaching a GELU's output \
     * (the GEMM) taken through it to its input pre, in one pass */                                \
    OP(gemm_gelu_backward, (device *d, tensor_dtype t, bool trans_a, bool trans_b, int64_t m, int64_t n, \
                            int64_t k, const void *a, int64_t lda, const void *b, int64_t ldb, const void *pre, \
                            void *dx))

/* ---- element-wise (kernels/elementwise_cpu.c, kernels/elementwise.cu) ------------------------
 * t is the element type of every void* tensor of the op: they are read and written in it, and
 * computed in float. */
#define DEVICE_ELEMENTWISE_OPS(OP)                                                                 \
    OP(fill, (device *d, tensor_dtype t, void *x, size_t n, float value))                          \
    OP(scale, (device *d, float *x, size_t n, float s))                                            \
    /* dst[i] = (src[i] / 255 - mean) * inv_std */                                                 \
    OP(u8_to_f32, (device *d, const uint8_t *src, float *dst, size_t n, float mean, float inv_std)) \
    /* y[r,c] += b[c] */                                                                           \
    OP(bias_add, (device *d, tensor_dtype t, void *y, const void *b, int64_t rows, int64_t cols))  \
    /* y = act(x): ReLU, exact (erf) GELU as torch.nn.GELU(), or GPT-2's tanh-approximated GELU */ \
    OP(act_forward, (device *d, tensor_dtype t, act_kind a, const void *x, void *y, size_t n))     \
    /* dx = dy * act'(x), x is the pre-activation input; dx may be dy itself */                    \
    OP(act_backward, (device *d, tensor_dtype t, act_kind a, const void *x, const void *dy, void *dx, \
                      size_t n))                                                                   \
    /* out = a + b; out may be a or b itself (not a partial overlap): the residual stream */       \
    OP(add, (device *d, tensor_dtype t, void *out, const void *a, const void *b, size_t n))

/* ---- reductions (kernels/reduce_cpu.c, kernels/reduce.cu): deterministic, sums in double ----- */
#define DEVICE_REDUCE_OPS(OP)                                                                      \
    /* db[c] = beta * db[c] + sum_r dy[r,c]   (beta is 0 or 1; 0 overwrites db unread); dy of     \
     * type t, db float (a gradient); the CPU adds in float, in row order, CUDA in double */       \
    OP(bias_grad, (device *d, tensor_dtype t, const void *dy, float *db, int64_t rows, int64_t cols, \
                   float beta))                                                                    \
    /* Row-wise softmax cross-entropy over the first cols of rows with stride ld >= cols (columns \
     * cols..ld-1 are padding, never read). dlogits = (softmax - onehot) * grad_scale, 0 in the    \
     * padding; dlogits may be NULL (evaluation) or logits itself (in place); both of type t, the  \
     * softmax computed in float from them. stats[0] += sum of per-row losses, stats[1] += rows    \
     * whose argmax is the label (stats is a device float[2]). A label of XENT_NO_TARGET (-1): the \
     * row has no target (a prompt token, a document's end): no loss, dlogits 0, never counted.   \
     * Any other label outside [0, cols): the CPU backend fails before writing anything, the CUDA \
     * backend (which cannot see it without waiting) makes the loss NaN. */                        \
    OP(softmax_xent, (device *d, tensor_dtype t, const void *logits, int64_t ld, const int32_t *labels, \
                      int64_t rows, int64_t cols, float grad_scale, void *dlogits, float *stats))  \
    /* *out = sum x[i]^2 in double, deterministic (same order every call); out is a device double  \
     * (0 when n is 0), written in stream order: download it to read it */                         \
    OP(sumsq, (device *d, const float *x, size_t n, double *out))                                  \
    /* *out = the sum of n device doubles (sumsq's outputs over several ranges), in a fixed order  \
     * (0 when n is 0); n at most UINT_MAX */                                                      \
    OP(sum_f64, (device *d, const double *x, size_t n, double *out))                               \
    /* *scale = torch.nn.utils.clip_grad_norm_'s factor for norm = sqrt(*sumsq), max_norm > 0:     \
     * coef = max_norm / (norm + 1e-6) in double, stored as float when coef < 1, else 1; a         \
     * non-finite norm gives 0 (inf) or NaN (NaN), as PyTorch does. sumsq (sumsq's out) and scale  \
     * are device scalars and the optimizer steps read scale when they run: nothing waits */       \
    OP(clip_scale, (device *d, const double *sumsq, double max_norm, float *scale))

/* ---- optimizer updates (kernels/optim_step_cpu.c, kernels/optim_step.cu) --------------------- */
/* torch.optim's float32 order of operations, so trajectories match PyTorch step for step. The
 * gradients are multiplied first by *scale, a device float read when the step runs (clip_scale's
 * output), as clip_grad_norm_ scales them in place; scale NULL means 1. Weight decay applies to
 * every element but the args' exempt ones, so one call updates a whole model. */
#define DEVICE_OPTIM_STEP_OPS(OP)                                                                  \
    /* SGD (dampening 0); buf may be NULL when momentum is 0 */                                    \
    OP(sgd_step, (device *d, float *p, const float *g, const float *scale, float *buf, size_t n,   \
                  const sgd_args *args))                                                           \
    OP(adamw_step, (device *d, float *p, const float *g, const float *scale, float *m, float *v,   \
                    size_t n, const adamw_args *args))

/* ---- bfloat16 casts: ddp.grad_dtype bf16, precision bf16 (kernels/cast_cpu.c, kernels/cast.cu) -- */
#define DEVICE_CAST_OPS(OP)                                                                        \
    /* dst[i] = bf16(src[i]), rounded to nearest-even (NaN stays NaN) */                           \
    OP(cast_f32_to_bf16, (device *d, const float *src, uint16_t *dst, size_t n))                   \
    /* dst[i] = float(src[i]) * scale */                                                           \
    OP(cast_bf16_to_f32, (device *d, const uint16_t *src, float *dst, size_t n, float scale))   \
    /* dst[i] = src[i] rounded to bf16 stochastically: up with probability (src - down) / (up -    \
     * down) for its two bf16 neighbours, from 16 random bits that depend only on (seed, step,     \
     * first + i). So the fp32 master weights' bf16 copy is unbiased and reproducible: the same   \
     * element rounds the same way whichever rank, launch or world size computes it. NaN and inf   \
     * stay themselves; a value that would round past the largest bf16 becomes inf. */            \
    OP(cast_f32_to_bf16_stochastic, (device *d, const float *src, uint16_t *dst, size_t n, uint64_t seed, \
                                     uint64_t step, uint64_t first))

/* ---- the transformer's ops (kernels/embedding_cpu.c and embedding.cu, kernels/layernorm_cpu.c and
 * layernorm.cu; the attention is its own family below) ----------------------------------------
 * Shapes: B sequences of T positions, C channels; [B,T,C] tensors are row-major. "+=" outputs
 * accumulate (gradients of shared or residual inputs), "=" outputs are overwritten. t is the type
 * of every void* tensor (activations and the parameters they are computed from); parameter
 * gradients and LayerNorm's statistics are float. Deterministic for a given thread count and GPU:
 * no float atomics. */
#define DEVICE_TRANSFORMER_OPS(OP)                                                                 \
    /* out[b,t,:] = wte[tokens[b,t],:] + wpe[p,:] at position p = t, or in packed rows p = t -    \
     * doc_start[b*T+t] (attn_shape's doc_start: positions restart at each document; NULL: p = t); \
     * tokens in [0, rows of wte). wpe NULL: no position table (out[b,t,:] = wte[tokens[b,t],:]:   \
     * RoPE places positions) and doc_start unused */                                              \
    OP(embedding_forward, (device *d, tensor_dtype t, void *out, const int32_t *tokens, const void *wte, \
                           const void *wpe, const int32_t *doc_start, int64_t B, int64_t T, int64_t C)) \
    /* dwte[tokens[b,t],:] += dout[b,t,:] in (b,t) order; dwpe[p,:] += the sum of dout[b,t,:] over \
     * the (b,t) at position p (as the forward counts it), in (b,t) order; dwte has V rows. dwpe   \
     * NULL: no position table, only dwte. doc_start and doc_end: packed rows (attn_shape's), both \
     * or neither */                                                                               \
    OP(embedding_backward, (device *d, tensor_dtype t, float *dwte, float *dwpe, const void *dout, \
                            const int32_t *tokens, const int32_t *doc_start, const int32_t *doc_end, \
                            int64_t B, int64_t T, int64_t C, int64_t V))                             \
    /* out = (inp - mean) * rstd * w + b per row of C (eps 1e-5, biased variance); mean and rstd  \
     * [N] are saved for the backward */                                                           \
    OP(layernorm_forward, (device *d, tensor_dtype t, void *out, float *mean, float *rstd, const void *inp, \
                           const void *w, const void *b, int64_t N, int64_t C))                     \
    /* res_out = a + b (rounded to t), then ln_out = layernorm_forward of res_out: the residual add \
     * and the next LayerNorm in one pass. res_out may be a or b itself; ln_out overlaps nothing */ \
    OP(residual_layernorm_forward, (device *d, tensor_dtype t, void *res_out, void *ln_out, float *mean, \
                                    float *rstd, const void *a, const void *b, const void *w, const void *bias, \
                                    int64_t N, int64_t C))                                          \
    /* dinp += d/dinp, dw += sum dout * xhat, db += sum dout; "+=" into dinp is also the residual \
     * stream's backward: the gradient reaching a residual sum flows on unchanged */             \
    OP(layernorm_backward, (device *d, tensor_dtype t, void *dinp, float *dw, float *db, const void *dout, \
                            const void *inp, const void *w, const float *mean, const float *rstd,  \
                            int64_t N, int64_t C))

/* ---- causal self-attention (kernels/attention_cpu.c, kernels/attention.cu) ----------------------
 * Flash attention: softmax(scale · q·kᵀ, causal) · v computed tile by tile with an online softmax,
 * never materialising the T x T scores, so memory is linear in T. Tensors are read in place from
 * the projections' token-major outputs: row (b, t) of a tensor with row stride ld starts at element
 * (b·T + t)·ld, and head h's hs elements at column h·hs of it (GPT-2's q, k and v are three views
 * of one [B, T, 3C] tensor with ld 3C). Query head h reads key/value head h / (NH / NKV)
 * (grouped-query attention; NKV == NH is multi-head attention). q and dq have row stride ld_q; k,
 * v, dk and dv ld_kv; out and dout ld_o. lse [B, NH, T] (float) is each query row's log-sum-exp of
 * its scaled scores, saved by the forward for the backward, which recomputes the probabilities.
 * Outputs are overwritten ("="); a shared K/V head's dk/dv sum every query head that reads it.
 * Deterministic (no float atomics): the same bits every run. */
typedef struct attn_shape {
    int64_t B, T, NH, NKV, hs;   /* NKV >= 1 divides NH; hs >= 1 */
    int64_t ld_q, ld_kv, ld_o;   /* row strides in elements, each >= the heads it holds times hs */
    float scale;                 /* > 0, usually 1/sqrt(hs) */
    /* Packed rows (both NULL: each row is one sequence): device int32 [B·T], at b·T + t the first
     * position of the document that holds position t of row b, and one past its last. Documents
     * are contiguous runs of a row (doc_start[t] <= t < doc_end[t], the same pair for every
     * position of a document), and query t sees the keys doc_start[t]..t only: causal within its
     * document, never across (varlen attention without a T x T mask). */
    const int32_t *doc_start, *doc_end;
} attn_shape;

#define DEVICE_ATTENTION_OPS(OP)                                                                   \
    /* out = causal softmax(scale · q·kᵀ) · v per head; lse = each row's log-sum-exp */            \
    OP(attention_forward, (device *d, tensor_dtype t, const attn_shape *s, void *out, float *lse, const void *q, \
                           const void *k, const void *v))                                          \
    /* dq, dk, dv (=) from dout, the forward's out and lse, and its inputs q, k, v */             \
    OP(attention_backward, (device *d, tensor_dtype t, const attn_shape *s, void *dq, void *dk, void *dv,    \
                            const void *dout, const void *out, const float *lse, const void *q, const void *k, \
                            const void *v))

/* ---- the rotary block's ops (kernels/rotary_cpu.c, kernels/rotary.cu): RMSNorm, rotary position
 * embeddings (RoPE) and the SwiGLU feed-forward's gate, as Hugging Face's Llama and Qwen2 compute
 * them ------------------------------------------------------------------------------------------
 * t is the type of every void* tensor; RMSNorm's statistics and parameter gradient are float;
 * computed in float (sums in double) inside. "+=" outputs accumulate, "=" outputs are overwritten.
 * Deterministic for a given thread count and GPU: no float atomics. */
#define DEVICE_ROTARY_OPS(OP)                                                                      \
    /* rstd[r] = 1/sqrt(mean_c inp[r,c]^2 + eps); out = inp * rstd * w per row of C (HF's         \
     * LlamaRMSNorm); rstd [N] is saved for the backward. eps >= 0 */                              \
    OP(rmsnorm_forward, (device *d, tensor_dtype t, void *out, float *rstd, const void *inp, const void *w, \
                         int64_t N, int64_t C, float eps))                                         \
    /* res_out = a + b (rounded to t), then norm_out = rmsnorm_forward of res_out: the residual    \
     * add and the next RMSNorm in one pass, as residual_layernorm_forward. res_out may be a or b  \
     * itself; norm_out overlaps nothing */                                                        \
    OP(residual_rmsnorm_forward, (device *d, tensor_dtype t, void *res_out, void *norm_out, float *rstd, \
                                  const void *a, const void *b, const void *w, int64_t N, int64_t C, float eps)) \
    /* dinp += d/dinp (the residual stream's gradient flows on, as layernorm_backward),            \
     * dw += sum_r dout * inp * rstd; rstd is the forward's */                                     \
    OP(rmsnorm_backward, (device *d, tensor_dtype t, void *dinp, float *dw, const void *dout, const void *inp, \
                          const void *w, const float *rstd, int64_t N, int64_t C))                 \
    /* RoPE in place, HF's rotate-half: row (b,t) of x starts at element (b*T+t)*ld; head h's hs    \
     * elements at column h*hs, h < n_heads; for j < hs/2: (x[j], x[j+hs/2]) <- (x[j]*c - x[j+hs/2]*s, \
     * x[j+hs/2]*c + x[j]*s) with c = cos[p*(hs/2)+j], s = sin[p*(hs/2)+j] (tables [T, hs/2] float, \
     * device memory) at position p = t, or, in packed rows, p = t - doc_start[b*T+t] (attn_shape's \
     * doc_start: positions restart at each document; NULL: p = t). hs even, ld >= n_heads*hs. On  \
     * the q and k columns of the fused qkv tensor: n_heads = NH + NKV in one call */              \
    OP(rope_forward, (device *d, tensor_dtype t, void *x, int64_t ld, int64_t B, int64_t T, int64_t n_heads, \
                      int64_t hs, const float *cos, const float *sin, const int32_t *doc_start))   \
    /* the inverse rotation (s -> -s) in place, rope_forward's transpose: the gradient w.r.t. the  \
     * un-rotated input from the one w.r.t. the rotated output */                                  \
    OP(rope_backward, (device *d, tensor_dtype t, void *x, int64_t ld, int64_t B, int64_t T, int64_t n_heads, \
                       int64_t hs, const float *cos, const float *sin, const int32_t *doc_start))  \
    /* h[r,j] = silu(gu[r,j]) * gu[r,F+j], silu(u) = u/(1+exp(-u)): gate | up side by side in one  \
     * [N, 2F] tensor (one GEMM over the adjacent gate_proj and up_proj weights); h [N, F]        \
     * overlaps nothing */                                                                         \
    OP(swiglu_forward, (device *d, tensor_dtype t, void *h, const void *gate_up, int64_t N, int64_t F)) \
    /* dgate_up [N, 2F] (=) from dh [N, F] and the forward's gate_up; dgate_up may be gate_up      \
     * itself (each element's gradient lands where it was read), not dh */                        \
    OP(swiglu_backward, (device *d, tensor_dtype t, void *dgate_up, const void *dh, const void *gate_up, \
                         int64_t N, int64_t F))

/* ---- interval timer (device_cpu.c, device_cuda.c) -----------------------------------------------
 * On the compute stream, e.g. for time the stream is held up by communication: timer_start and
 * timer_stop mark points in stream order and never wait (CUDA: timing events; CPU: the monotonic
 * clock, since its ops run in order on the calling thread). timer_take_ms waits for the marks,
 * returns the summed duration of every start->stop interval since the last take and resets. Up
 * to 64 intervals stay in flight; past that, timer_start waits for the oldest. */
#define DEVICE_TIMER_OPS(OP)                                                                       \
    OP(timer_create, (device *d, device_timer **out))                                              \
    OP(timer_start, (device *d, device_timer *t))                                                  \
    OP(timer_stop, (device *d, device_timer *t))                                                   \
    OP(timer_take_ms, (device *d, device_timer *t, double *ms))

/* ---- timestamps for the profiler (device_cpu.c, device_cuda.c; used by device_prof.c) -------------
 * A set of `capacity` slots, each stamped at most once: stamp records when the device reaches
 * that point of `stream`'s order and never waits (stream NULL: the compute stream; on CUDA also
 * another cudaStream_t of this device, e.g. the NCCL communicator's; CUDA: a timing event per
 * slot; CPU, whose ops run on the calling thread: the monotonic clock, now). stream_wait_compute
 * makes `stream`'s later work wait for the work already enqueued on the compute stream (the CPU and
 * stream NULL: nothing to do), so a stamp that opens a range on another stream is taken when that
 * stream could start the range's work. stamps_read waits for the first n slots and writes each
 * one's time in microseconds after slot 0 (NaN for a slot never stamped; slot 0 must have been). */
#define DEVICE_STAMP_OPS(OP)                                                                       \
    OP(stamps_create, (device *d, uint32_t capacity, device_stamps **out))                         \
    OP(stamp, (device *d, device_stamps *s, uint32_t slot, void *stream))                          \
    OP(stream_wait_compute, (device *d, void *stream))                                             \
    OP(stamps_read, (device *d, device_stamps *s, uint32_t n, double *us))

/* Every op that returns a status, family by family. */
#define DEVICE_OPS(OP)                                                                             \
    DEVICE_MEMORY_OPS(OP)                                                                          \
    DEVICE_GEMM_OPS(OP)                                                                            \
    DEVICE_GEMM_EPILOGUE_OPS(OP)                                                                   \
    DEVICE_ELEMENTWISE_OPS(OP)                                                                     \
    DEVICE_REDUCE_OPS(OP)                                                                          \
    DEVICE_OPTIM_STEP_OPS(OP)                                                                      \
    DEVICE_CAST_OPS(OP)                                                                            \
    DEVICE_TRANSFORMER_OPS(OP)                                                                     \
    DEVICE_ATTENTION_OPS(OP)                                                                       \
    DEVICE_ROTARY_OPS(OP)                                                                          \
    DEVICE_TIMER_OPS(OP)                                                                           \
    DEVICE_STAMP_OPS(OP)

/* The families' names, one line per block of DEVICE_OPS in the same order: the profiler's table
 * groups its rows by them (device_prof.c; a block missing here fails the build there). */
#define DEVICE_FAMILIES(F)                                                                         \
    F("memory", DEVICE_MEMORY_OPS)                                                                 \
    F("gemm", DEVICE_GEMM_OPS)                                                                     \
    F("gemm_epilogue", DEVICE_GEMM_EPILOGUE_OPS)                                                   \
    F("elementwise", DEVICE_ELEMENTWISE_OPS)                                                       \
    F("reduce", DEVICE_REDUCE_OPS)                                                                 \
    F("optim_step", DEVICE_OPTIM_STEP_OPS)                                                         \
    F("cast", DEVICE_CAST_OPS)                                                                     \
    F("transformer", DEVICE_TRANSFORMER_OPS)                                                       \
    F("attention", DEVICE_ATTENTION_OPS)                                                           \
    F("rotary", DEVICE_ROTARY_OPS)                                                                 \
    F("timer", DEVICE_TIMER_OPS)                                                                   \
    F("stamp", DEVICE_STAMP_OPS)

/* Every op's number, DEVICE_OP_name, in DEVICE_OPS order (the profiler's records name ops by it). */
#define DEVICE_OP_ID(name, params) DEVICE_OP_##name,
typedef enum device_op { DEVICE_OPS(DEVICE_OP_ID) DEVICE_OP_COUNT } device_op;
#undef DEVICE_OP_ID

/* (a, b, c) -> a, b, c: lets a parenthesised parameter list travel as one macro argument. */
#define DEVICE_UNPAREN(...) __VA_ARGS__
#define DEVICE_OP_FIELD(name, params) int (*name)(DEVICE_UNPAREN params, ddp_err *err);

struct device_ops {
    DEVICE_OPS(DEVICE_OP_FIELD)
    /* the ops that cannot fail: freeing (NULL is fine) and the device's end */
    void (*free)(device *d, void *p);
    void (*timer_destroy)(device *d, device_timer *t);
    void (*stamps_destroy)(device *d, device_stamps *s);
    void (*destroy)(device *d);
};

struct device {
    const struct device_ops *ops;     /* the checking table (device.c): what callers use */
    const struct device_ops *backend; /* the backend's own table: for device.c only */
    device_kind kind;         /* DEVICE_CPU or DEVICE_CUDA */
    int index;                /* GPU ordinal, -1 on CPU */
    char name[128];           /* e.g. "cpu (oneDNN)" or "NVIDIA H100 80GB HBM3" */
    void *stream;             /* cudaStream_t of the compute stream on CUDA, NULL on CPU */
    /* the profiler recording every op (device_prof.h), NULL when off: all profiling costs an op
     * then is the test of this pointer in device.c */
    device_prof *prof;
    struct device_ledger *ledger; /* device.c: the live allocations' bytes (device_memory_peak) */
    void *impl;
};

/* The most bytes this device's allocations (ops->alloc: parameters, gradients, optimizer state,
 * activations, buffers) held at once since it was opened, counted the same on either backend; the
 * backends' own scratch and libraries' workspaces (cuBLAS, oneDNN, NCCL) and the CUDA context are
 * not allocations of ours and are not counted. */
uint64_t device_memory_peak(const device *d);

/* CPU backend (device_cpu.c). */
int device_cpu_create(device **out, ddp_err *err);

/* CUDA backend (device_cuda.c); fails cleanly with a reason when no GPU/driver, or when this
 * build has no CUDA backend. local_rank picks the GPU among those visible; opts->tf32 allows TF32
 * GEMMs (opts NULL: the defaults, no TF32; opts->kind is not read). */
int device_cuda_create(int local_rank, const device_opts *opts, device **out, ddp_err *err);
/* Number of usable CUDA devices, 0 with a one-line reason when none. */
int device_cuda_count(char *reason, size_t reason_len);
/* The PCI bus id ("0000:3b:00.0") of visible CUDA device `index`, which names one GPU whatever each
 * process's CUDA_VISIBLE_DEVICES makes its index; "" when it cannot be read. */
void device_cuda_bus_id(int index, char *out, size_t len);

/* Picks per opts->kind (auto: CUDA when device_cuda_count() > 0, else CPU, logging why). */
int device_open(const device_opts *opts, int local_rank, device **out, ddp_err *err);

#ifdef __cplusplus
}
#endif

#endif
