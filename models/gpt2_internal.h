/* gpt2_internal.h — what gpt2.c (layout, memory, construction) and gpt2_pass.c (the forward and
 * backward passes) share: the model's private state and the two passes. Nothing outside
 * models/gpt2*.c includes it.
 *
 * The state a language model has in common (the compute type, the padded vocabulary, the
 * sequence length, the logits, the bf16 copy of the parameters the passes read, the device
 * buffers) is its lm_core (lm_core.h), g->lm. Activations are of the compute type g->lm.t;
 * gradients m->grads and LayerNorm statistics are float in both precisions. It must not hold code
 * beyond address arithmetic. */
#ifndef DDP_GPT2_INTERNAL_H
#define DDP_GPT2_INTERNAL_H

#include "gpt2.h"
#include "lm_core.h"

/* Per block: 12 tensors, in this order. */
enum { LN1_W, LN1_B, QKV_W, QKV_B, ATTPROJ_W, ATTPROJ_B, LN2_W, LN2_B, FC_W, FC_B, FCPROJ_W, FCPROJ_B,
       BLOCK_TENSORS };

/* One block's saved activations (rows = B*T positions), of type g->lm.t but the statistics. */
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
    lm_core lm;                /* first, as lm_core.h asks; lm.Vp: vocab_size padded to GPT2_VOCAB_ALIGN */
    gpt2_shape s;
    recompute_mode recompute;   /* what backward rebuilds (lm_layout.h: which buffers the blocks share) */
    size_t block_off[GPT2_MAX_LAYERS + 1];  /* parameter offset of each block; [L] = ln_f */
    size_t off_wte, off_wpe, off_lnf_w, off_lnf_b;
    void *encoded;             /* [BT, C] */
    gpt2_block_acts blocks[GPT2_MAX_LAYERS];
    void *lnf;
    float *lnf_mean, *lnf_rstd;
    /* backward scratch, shared by all blocks */
    void *dres, *dln, *datty, *dqkv, *dfch;
} gpt2_impl;

/* Offset in elements of tensor i of block l in the parameter (and gradient) buffer. */
static inline size_t gpt2_block_offset(const model *m, int l, int i)
{
    return m->tensors[2 + l * BLOCK_TENSORS + i].offset;
}

/* The compute copy's parameter at element offset off (type g->lm.t). */
static inline const void *gpt2_weight(const gpt2_impl *g, size_t off)
{
    return lm_weight(&g->lm, off);
}

/* The passes, as lm_kind's forward and backward. */
int gpt2_forward(model *m, const int32_t *tokens, int64_t B, ddp_err *err);
int gpt2_backward(model *m, const int32_t *tokens, int64_t B, grad_ready_fn ready, void *ctx, ddp_err *err);

#endif
