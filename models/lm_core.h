/* lm_core.h — what GPT-2 and the Llama share as next-token language models: the state both
 * impls begin with (lm_core) and the plumbing around their own code. The plumbing is building the
 * model (the data checks, the parameters and the bf16 compute copy, the activation buffers) and
 * its model_ops: forward_backward and evaluate run the model's passes around the classifier (the
 * head's GEMM and the softmax cross-entropy, chunk of rows by chunk, so a large vocabulary's logits
 * never exist for a whole micro-batch), init_tensor hands each tensor's draw to the model's own,
 * params_changed rebuilds the bf16 copy, logits and destroy.
 *
 * Each impl's first member is its lm_core, so m->impl points at both. A model brings its name for
 * messages ("gpt2", "llama"), its parameters' draw and its forward and backward passes (lm_kind);
 * its layout, its initial values, its passes and its description stay in its own files. Must not
 * know any one model's tensors or activations, communicate, step an optimizer or read data. */
#ifndef DDP_LM_CORE_H
#define DDP_LM_CORE_H

#include "model.h"
#include "runtime/base/checked_size.h"
#include "runtime/base/rng.h"

/* What one language model brings to the shared plumbing. */
typedef struct lm_kind {
    const char *name;              /* begins its messages: "gpt2", "llama" */
    /* Values [lo, hi) of tensor t's initial values into dst: model.h's init_tensor. */
    void (*init_tensor)(const model *m, const rng_key *key, const param_tensor *t, size_t lo, size_t hi, float *dst);
    /* The classifier's input lm_core.head_x [BT, C] (the final norm's output) from the tokens
     * [B, T] (device int32). */
    int (*forward)(model *m, const int32_t *tokens, int64_t B, ddp_err *err);
    /* The backward pass from lm_core.head_dx, the gradient the classifier left for head_x (it
     * has added the head's own gradient); reports each block's gradient range through ready (may
     * be NULL) as soon as it is final. */
    int (*backward)(model *m, const int32_t *tokens, int64_t B, grad_ready_fn ready, void *ctx, ddp_err *err);
} lm_kind;

/* Activations are of the compute type t: float, or bf16 with precision bf16, when the passes read
 * the parameters from wp, a bf16 copy of the fp32 master weights m->params (the optimizer steps
 * the master; params_changed rebuilds the copy). */
typedef struct lm_core {
    const lm_kind *kind;
    model *m;                  /* the model this is the impl of (lm_weight reads through it) */
    tensor_dtype t;            /* activations' and GEMM operands' type */
    const void *wp;            /* the parameters the passes read: m->params (fp32) or the bf16 copy */
    void *wp_bf16;             /* precision bf16: the copy, n_params bf16 (NULL in fp32) */
    int64_t Vp;                /* vocab_size padded (the model's *_vocab_padded): the logits' row stride */
    int64_t T;                 /* sequence length of the data (<= block_size) */
    const int32_t *docs;       /* the batch being passed: model_batch.docs (NULL: whole rows) */
    /* The classifier (lm_core.c), whose buffers the model sets once built: logits = head_x ·
     * headᵀ, the head [Vp, C] at parameter offset head_off (a tied head's is the embeddings'),
     * head_x and head_dx [BT, C] of the compute type. */
    int64_t C;
    size_t head_off;
    const void *head_x;        /* the final norm's output */
    void *head_dx;             /* the loss's gradient w.r.t. head_x, written by the classifier */
    void *logits;              /* [logit_rows, Vp]: a chunk's; the classifier writes dlogits over it */
    int64_t logit_rows;        /* rows per chunk (lm_logit_rows): every row of a micro-batch, or fewer */
    void *allocs[24];          /* the device buffers lm_alloc made, freed by m->ops->destroy */
    int n_allocs;
    size_t act_bytes;          /* their bytes, for the memory plan */
} lm_core;

/* The document ends of a batch of B packed rows (model_batch.docs' second plane), or NULL for
 * whole rows; the starts are lm->docs itself. */
static inline const int32_t *lm_doc_end(const lm_core *lm, int64_t B)
{
    return lm->docs ? lm->docs + B * lm->T : NULL;
}

/* The compute copy's parameter at element offset off (type lm->t): in wp, or under ZeRO-3 in its
 * unit's gathered window (model_weight). */
static inline const void *lm_weight(const lm_core *lm, size_t off)
{
    return model_weight(lm->m, lm->wp, tensor_dtype_size(lm->t), off);
}

/* The data checks every language model makes: token sequences (i32 x T -> i32 x T), T at most
 * block_size, the data's vocabulary within vocab_size, max_rows at least 1; usage errors naming
 * model.NAME's key and the data. */
int lm_check_data(const char *name, const sample_layout *data, int64_t block_size, int64_t vocab_size,
                  int64_t max_rows, ddp_err *err);

/* A zeroed model and impl of impl_bytes (whose first member is an lm_core) of this kind with
 * lm_core.c's model_ops, for sequences of data's layout over vocab_size tokens, computing in
 * `compute`: everything but the parameters and buffers, which the model's create adds
 * (lm_alloc_params, lm_alloc) and lm_build_end frees if it fails. */
int lm_new(const lm_kind *kind, size_t impl_bytes, tensor_dtype compute, device *dev, const sample_layout *data,
           int64_t vocab_size, int64_t max_rows, model_buffers buffers, model **out, ddp_err *err);

/* Once the tensors are laid out: params and grads (model_alloc_params) and with compute bf16 the
 * compute copy. */
int lm_alloc_params(model *m, ddp_err *err);

/* A device buffer of bytes into *p, owned by the model: freed by m->ops->destroy, counted in
 * act_bytes. */
int lm_alloc(model *m, void **p, size_t bytes, ddp_err *err);

/* A buffer of count elements, in bytes rounded up to 64 so every buffer carved after it in a slab
 * stays 64-byte aligned; checked in k (runtime/base/checked_size.h). */
static inline size_t lm_aligned_bytes(size_check *k, size_t count, size_t elem)
{
    return size_add(k, size_mul(k, count, elem), 63) / 64 * 64;
}

/* The activations of a micro-batch of B sequences of T tokens do not fit in 64 bits: a usage error
 * naming the keys they grow with (widths: the model's own, e.g. "model.gpt2.n_embd=768,
 * model.gpt2.vocab_size=50257"); returns its code. */
int lm_activations_too_large(const char *name, int64_t n_layer, const char *widths, int64_t T, int64_t B,
                             ddp_err *err);

/* The end of a model's create, rc its status so far: the buffers it allocated must come to the
 * plan's figure (planned_act_bytes, from the model's activation-bytes function), which becomes
 * m->activation_bytes; then m goes to *out, or on any failure is freed with err prefixed by what
 * was being built. Returns rc or the plan mismatch's code. */
int lm_build_end(model *m, int rc, size_t planned_act_bytes, model **out, ddp_err *err);

#endif
