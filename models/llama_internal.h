/* llama_internal.h — what llama.c (layout, memory, construction) and llama_pass.c (the forward and
 * backward passes) share: the model's private state and the two passes. Nothing outside
 * models/llama*.c includes it.
 *
 * The state a language model has in common (the compute type, the padded vocabulary, the
 * sequence length, the logits, the bf16 copy of the parameters the passes read, the device
 * buffers) is its lm_core (lm_core.h), g->lm. Activations are of the compute type g->lm.t;
 * gradients m->grads, RMSNorm statistics and the RoPE tables are float in both precisions. It
 * must not hold code beyond address arithmetic. */
#ifndef DDP_LLAMA_INTERNAL_H
#define DDP_LLAMA_INTERNAL_H

#include "llama.h"
#include "lm_core.h"

/* Per block: 9 tensors, in this order (q, k, v adjacent: one GEMM; gate, up adjacent: one GEMM),
 * then, in a family with q/k/v biases, the three biases (adjacent: the GEMM's one bias vector),
 * and in a family with q/k norms, q_norm and k_norm. A block holds the family's tensors in this
 * order (llama_impl.slot: where each is among them, -1 when the family has none). */
enum { ATTN_NORM, Q_W, K_W, V_W, O_W, MLP_NORM, GATE_W, UP_W, DOWN_W, BLOCK_TENSORS,
       Q_B = BLOCK_TENSORS, K_B, V_B, Q_NORM, K_NORM, BLOCK_TENSORS_MAX };

/* One block's saved activations (rows = B*T positions), of type g->lm.t but the statistics. */
typedef struct llama_block_acts {
    void *ln1;                  /* [BT, C] input_layernorm's output */
    float *rstd1;               /* [BT] */
    void *qkv;                  /* [BT, QKV]: q | k | v heads, q and k rotated in place; with q/k
                                 * norms three planes instead: q [BT, NH·hd], k and v [BT, NKV·hd] */
    void *qk_raw;               /* q/k norms only: the projections' q and k planes, before the norms */
    float *rstd_qk;             /* q/k norms only: [BT·NH] q heads' statistics, then [BT·NKV] k's */
    float *lse;                 /* [B, NH, T]: attention's per-row log-sum-exp */
    void *atty;                 /* [BT, NH·hd] attention output, input of o_proj */
    void *res2;                 /* [BT, C] residual after attention */
    void *ln2;                  /* [BT, C] post_attention_layernorm's output */
    float *rstd2;
    void *gate_up;              /* [BT, 2F]: gate | up */
    void *h;                    /* [BT, F] silu(gate) * up, input of down_proj */
    void *res3;                 /* [BT, C] block output (down_proj's until the next norm adds res2) */
} llama_block_acts;

typedef struct llama_impl {
    lm_core lm;                 /* first, as lm_core.h asks */
    const llama_family *fam;
    recompute_mode recompute;   /* what backward rebuilds (lm_layout.h: which buffers the blocks share) */
    llama_shape s;
    int block_tensors;          /* the family's tensors per block */
    int slot[BLOCK_TENSORS_MAX]; /* each tensor's place among them, -1: not the family's */
    int64_t hd, QKV;            /* head size; qkv's width (n_head + 2·n_kv_head)·hd */
    size_t block_off[LLAMA_MAX_LAYERS + 1]; /* parameter offset of each block; [L] = model.norm */
    size_t off_embed, off_norm, off_head;   /* off_head: lm_head, or embed_tokens when tied */
    float *rope_cos, *rope_sin; /* [block_size, hd/2] */
    void *encoded;              /* [BT, C] */
    llama_block_acts blocks[LLAMA_MAX_LAYERS];
    void *lnf;                  /* [BT, C] model.norm's output */
    float *rstdf;
    /* backward scratch, shared by all blocks */
    void *dres, *dln, *datty, *dqkv, *dgate_up, *dh;
    void *dqk_raw;              /* q/k norms only: the gradient w.r.t. qk_raw */
} llama_impl;

/* Offset in elements of tensor i of block l in the parameter (and gradient) buffer. */
static inline size_t llama_block_offset(const model *m, int l, int i)
{
    const llama_impl *g = m->impl;
    return m->tensors[1 + l * g->block_tensors + g->slot[i]].offset;
}

/* The compute copy's parameter at element offset off (type g->lm.t). */
static inline const void *llama_weight(const llama_impl *g, size_t off)
{
    return lm_weight(&g->lm, off);
}

/* The passes, as lm_kind's forward and backward. */
int llama_forward(model *m, const int32_t *tokens, int64_t B, ddp_err *err);
int llama_backward(model *m, const int32_t *tokens, int64_t B, grad_ready_fn ready, void *ctx, ddp_err *err);

#endif
