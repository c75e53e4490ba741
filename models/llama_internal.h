/* llama_internal.h — what llama.c (layout, memory, construction) and llama_pass.c (the forward and
 * backward passes) share: the model's private state and the two passes. Nothing outside
 * models/llama*.c includes it.
 *
 * Activations are of the model's compute type g->t: float, or bf16 with precision bf16, when the
 * passes read the parameters from g->wp, a bf16 copy of the fp32 master weights m->params (the
 * optimizer steps the master; params_changed rebuilds the copy). Gradients m->grads, RMSNorm
 * statistics and the RoPE tables are float in both. It must not hold code beyond address
 * arithmetic. */
#ifndef DDP_LLAMA_INTERNAL_H
#define DDP_LLAMA_INTERNAL_H

#include "llama.h"

/* Per block: 9 tensors, in this order (q, k, v adjacent: one GEMM; gate, up adjacent: one GEMM). */
enum { ATTN_NORM, Q_W, K_W, V_W, O_W, MLP_NORM, GATE_W, UP_W, DOWN_W, BLOCK_TENSORS };

/* One block's saved activations (rows = B*T positions), of type g->t but the statistics. */
typedef struct llama_block_acts {
    void *ln1;                  /* [BT, C] input_layernorm's output */
    float *rstd1;               /* [BT] */
    void *qkv;                  /* [BT, QKV]: q | k | v heads, q and k rotated in place */
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
    llama_shape s;
    tensor_dtype t;             /* activations' and GEMM operands' type */
    const void *wp;             /* the parameters the passes read: m->params (fp32) or the bf16 copy */
    void *wp_bf16;              /* precision bf16: the copy, n_params bf16 (NULL in fp32) */
    int64_t Vp;                 /* vocab_size padded */
    int64_t T;                  /* sequence length of the data (<= block_size) */
    int64_t hd, QKV;            /* head size; qkv's width (n_head + 2·n_kv_head)·hd */
    size_t block_off[LLAMA_MAX_LAYERS + 1]; /* parameter offset of each block; [L] = model.norm */
    size_t off_embed, off_norm, off_head;   /* off_head: lm_head, or embed_tokens when tied */
    float *rope_cos, *rope_sin; /* [block_size, hd/2] */
    void *encoded;              /* [BT, C] */
    llama_block_acts *blocks;
    void *lnf;                  /* [BT, C] model.norm's output */
    float *rstdf;
    void *logits;               /* [BT, Vp]; the classifier writes dlogits over it */
    /* backward scratch, shared by all blocks */
    void *dres, *dln, *datty, *dqkv, *dgate_up, *dh;
    void *allocs[24];           /* the shared buffers of alloc_acts and the blocks' slab */
    int n_allocs;
    size_t act_bytes;           /* activation, scratch and table bytes, for the memory plan */
} llama_impl;

/* Offset in elements of tensor i of block l in the parameter (and gradient) buffer. */
static inline size_t llama_block_offset(const model *m, int l, int i)
{
    return m->tensors[1 + l * BLOCK_TENSORS + i].offset;
}

/* The compute copy's parameter at element offset off (type g->t). */
static inline const void *llama_weight(const llama_impl *g, size_t off)
{
    return (const char *)g->wp + off * tensor_dtype_size(g->t);
}

/* Logits [BT, Vp] of the tokens [B, T] (device int32). */
int llama_forward(model *m, const int32_t *tokens, int64_t B, ddp_err *err);
/* The backward pass from the dlogits the classifier left in g->logits; reports each block's
 * gradient range through ready (may be NULL) as soon as it is final. */
int llama_backward(model *m, const int32_t *tokens, int64_t B, grad_ready_fn ready, void *ctx, ddp_err *err);

#endif
