/* gpt2_internal.h — what gpt2.c (layout, memory, construction) and gpt2_pass.c (the forward and
 * backward passes) share: the model's private state and the two passes. Nothing outside
 * models/gpt2*.c includes it.
 *
 * Activations are of the model's compute type g->t: float, or bf16 with precision bf16, when the
 * passes read the parameters from g->wp, a bf16 copy of the fp32 master weights m->params (the
 * optimizer steps the master; gpt2_params_changed rebuilds the copy). Gradients m->grads and
 * LayerNorm statistics are float in both. It must not hold code beyond address arithmetic. */
#ifndef DDP_GPT2_INTERNAL_H
#define DDP_GPT2_INTERNAL_H

#include "gpt2.h"

/* Per block: 12 tensors, in this order. */
enum { LN1_W, LN1_B, QKV_W, QKV_B, ATTPROJ_W, ATTPROJ_B, LN2_W, LN2_B, FC_W, FC_B, FCPROJ_W, FCPROJ_B,
       BLOCK_TENSORS };

/* One block's saved activations (rows = B*T positions), of type g->t but the statistics. */
typedef struct gpt2_block_acts {
    void *ln1;                          /* [BT, C] */
    float *ln1_mean, *ln1_rstd;         /* [BT] */
    void *qkv;                          /* [BT, 3C]: q | k | v, head h at channels h*hs.. of each */
    float *lse;                         /* [B, NH, T]: attention's per-row log-sum-exp */
    void *atty;                         /* [BT, C] attention output (heads side by side), input of c_proj */
    void *res2;                         /* [BT, C] residual after attention */
    void *ln2;
    float *ln2_mean, *ln2_rstd;
    void *fch, *fch_gelu;               /* [BT, 4C] */
    void *res3;                         /* [BT, C] block output */
} gpt2_block_acts;

typedef struct gpt2_impl {
    gpt2_shape s;
    tensor_dtype t;            /* activations' and GEMM operands' type */
    const void *wp;            /* the parameters the passes read: m->params (fp32) or the bf16 copy */
    void *wp_bf16;             /* precision bf16: the copy, n_params bf16 (NULL in fp32) */
    int64_t Vp;                /* vocab_size padded to GPT2_VOCAB_ALIGN */
    int64_t T;                 /* sequence length of the data (<= block_size) */
    size_t block_off[GPT2_MAX_LAYERS + 1];  /* parameter offset of each block; [L] = ln_f */
    size_t off_wte, off_wpe, off_lnf_w, off_lnf_b;
    void *encoded;             /* [BT, C] */
    gpt2_block_acts *blocks;
    void *lnf;
    float *lnf_mean, *lnf_rstd;
    void *logits;              /* [BT, Vp]; the classifier writes dlogits over it */
    /* backward scratch, shared by all blocks */
    void *dres, *dln, *datty, *dqkv, *dfch;
    void *allocs[24];          /* the shared buffers of alloc_acts and the blocks' slab */
    int n_allocs;
    size_t act_bytes;          /* activation + scratch bytes, for the memory plan */
} gpt2_impl;

/* Offset in elements of tensor i of block l in the parameter (and gradient) buffer. */
static inline size_t gpt2_block_offset(const model *m, int l, int i)
{
    return m->tensors[2 + l * BLOCK_TENSORS + i].offset;
}

/* The compute copy's parameter at element offset off (type g->t). */
static inline const void *gpt2_weight(const gpt2_impl *g, size_t off)
{
    return (const char *)g->wp + off * tensor_dtype_size(g->t);
}

/* Logits [BT, Vp] of the tokens [B, T] (device int32). */
int gpt2_forward(model *m, const int32_t *tokens, int64_t B, ddp_err *err);
/* The backward pass from the dlogits the classifier left in g->logits; reports each block's
 * gradient range through ready (may be NULL) as soon as it is final. */
int gpt2_backward(model *m, const int32_t *tokens, int64_t B, grad_ready_fn ready, void *ctx, ddp_err *err);

#endif
