/* gpt2.c — the GPT-2 transformer: token and position embeddings, n_layer pre-LayerNorm blocks
 * (causal self-attention, tanh-GELU MLP of 4x width), a final LayerNorm and the output projection
 * tied to the token embedding, trained with softmax cross-entropy on the next token.
 *
 * Parameters sit in one flat buffer in PyTorch's order: wte, wpe, then each block's tensors
 * (h.L.ln_1 ... h.L.mlp.c_proj), then ln_f. Backward walks ln_f, the blocks last to first and the
 * embeddings, and reports each block's range through grad_ready as soon as it is final, so the
 * reducer all-reduces block L while block L-1 is still computing. wte has vocab_padded rows (a
 * multiple of 128, for the GEMMs); the padding rows stay zero, since no token selects them and
 * the classifier gives their logits zero gradient, and they never reach the loss or sampling.
 * Attention runs as batched GEMMs around a causal softmax. Everything runs as device ops, so the
 * same code serves every backend. This file must not communicate, step an optimizer or read data. */
#include "gpt2.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/rng.h"

/* Per block: 12 tensors, in this order. */
enum { LN1_W, LN1_B, QKV_W, QKV_B, ATTPROJ_W, ATTPROJ_B, LN2_W, LN2_B, FC_W, FC_B, FCPROJ_W, FCPROJ_B,
       BLOCK_TENSORS };
static const char *const block_tensor_names[BLOCK_TENSORS] = {
    "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
    "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
    "mlp.c_proj.weight", "mlp.c_proj.bias"};

/* One block's saved activations (rows = B*T positions). */
typedef struct gpt2_block_acts {
    float *ln1, *ln1_mean, *ln1_rstd;   /* [BT, C], [BT], [BT] */
    float *q, *k, *v;                   /* [B, NH, T, hs] each */
    float *att;                         /* [B, NH, T, T] softmax probabilities */
    float *atty;                        /* [BT, C] heads merged, input of c_proj */
    float *res2;                        /* [BT, C] residual after attention */
    float *ln2, *ln2_mean, *ln2_rstd;
    float *fch, *fch_gelu;              /* [BT, 4C] */
    float *res3;                        /* [BT, C] block output */
} gpt2_block_acts;

typedef struct gpt2_impl {
    cfg_gpt2 s;
    int64_t Vp;                /* vocab_size padded to GPT2_VOCAB_ALIGN */
    int64_t T;                 /* sequence length of the data (<= block_size) */
    size_t block_off[GPT2_MAX_LAYERS + 1];  /* parameter offset of each block; [L] = ln_f */
    size_t off_wte, off_wpe, off_lnf_w, off_lnf_b;
    float *encoded;            /* [BT, C] */
    gpt2_block_acts *blocks;
    float *lnf, *lnf_mean, *lnf_rstd;
    float *logits;             /* [BT, Vp]; the classifier writes dlogits over it */
    /* backward scratch, shared by all blocks */
    float *dres, *dln, *datty, *dqkv, *dq, *dk, *dv, *dyh, *datt, *dfch, *dfch_gelu;
    float *preatt;             /* [B, NH, T, T] scores before the softmax (forward scratch) */
    float *yh;                 /* [B, NH, T, hs] attention output before merging (forward scratch) */
    void *allocs[24];          /* the shared buffers of alloc_acts and the blocks' slab */
    int n_allocs;
    size_t act_bytes;          /* activation + scratch bytes, for the memory plan */
} gpt2_impl;

/* ---- parameters --------------------------------------------------------------------------- */

static int lay_out_params(model *m, gpt2_impl *g, ddp_err *err)
{
    const cfg_gpt2 *s = &g->s;
    int64_t C = s->n_embd;
    size_t off = 0;
    g->off_wte = off;
    int rc = model_add_tensor(m, "wte.weight", g->Vp, C, true, &off, err);
    g->off_wpe = off;
    if (!rc)
        rc = model_add_tensor(m, "wpe.weight", s->block_size, C, true, &off, err);
    for (int l = 0; !rc && l < s->n_layer; l++) {
        g->block_off[l] = off;
        const int64_t rows[BLOCK_TENSORS] = {C, C, 3 * C, 3 * C, C, C, C, C, 4 * C, 4 * C, C, C};
        const int64_t cols[BLOCK_TENSORS] = {0, 0, C, 0, C, 0, 0, 0, C, 0, 4 * C, 0};
        for (int i = 0; !rc && i < BLOCK_TENSORS; i++) {
            char name[48];
            snprintf(name, sizeof name, "h.%d.%s", l, block_tensor_names[i]);
            rc = model_add_tensor(m, name, rows[i], cols[i], cols[i] != 0, &off, err);
        }
    }
    g->block_off[s->n_layer] = off;
    g->off_lnf_w = off;
    if (!rc)
        rc = model_add_tensor(m, "ln_f.weight", C, 0, false, &off, err);
    g->off_lnf_b = off;
    if (!rc)
        rc = model_add_tensor(m, "ln_f.bias", C, 0, false, &off, err);
    m->n_params = off;
    return rc;
}

/* Pointer to tensor i of block l in params or grads. */
static float *block_tensor(const model *m, float *base, int l, int i)
{
    return base + m->tensors[2 + l * BLOCK_TENSORS + i].offset;
}

/* ---- activations -------------------------------------------------------------------------- */

static int act_alloc(model *m, gpt2_impl *g, float **p, int64_t count, ddp_err *err)
{
    if (g->n_allocs == (int)(sizeof g->allocs / sizeof g->allocs[0])) /* a layout change outgrew allocs[] */
        return ddp_fail(err, DDP_ERUNTIME, "gpt2: more than %d activation buffers",
                        (int)(sizeof g->allocs / sizeof g->allocs[0]));
    size_t bytes = (size_t)count * sizeof(float);
    int rc = m->dev->ops->alloc(m->dev, bytes, (void **)p, err);
    if (rc)
        return ddp_prefix(err, "gpt2: activations (%zu bytes)", bytes);
    g->allocs[g->n_allocs++] = *p;
    g->act_bytes += bytes;
    return DDP_OK;
}

/* Every block's saved activations in one slab, each block's part carved into its buffers, so the
 * number of allocations does not grow with depth. */
static int alloc_blocks(model *m, gpt2_impl *g, int64_t B, ddp_err *err)
{
    int64_t T = g->T, C = g->s.n_embd, NH = g->s.n_head, BT = B * T;
    const int64_t sizes[] = {BT * C, BT, BT, BT * C, BT * C, BT * C, B * NH * T * T, BT * C, BT * C, BT * C, BT, BT,
                             BT * 4 * C, BT * 4 * C, BT * C};
    enum { N_BUFS = sizeof sizes / sizeof sizes[0] };
    int64_t per_block = 0;
    for (int i = 0; i < N_BUFS; i++)
        per_block += (sizes[i] + 15) / 16 * 16; /* keep every buffer 64-byte aligned */
    float *slab;
    int rc = act_alloc(m, g, &slab, per_block * g->s.n_layer, err);
    for (int l = 0; !rc && l < g->s.n_layer; l++) {
        gpt2_block_acts *a = &g->blocks[l];
        float **const ptrs[N_BUFS] = {&a->ln1, &a->ln1_mean, &a->ln1_rstd, &a->q, &a->k, &a->v, &a->att,
                                      &a->atty, &a->res2, &a->ln2, &a->ln2_mean, &a->ln2_rstd, &a->fch,
                                      &a->fch_gelu, &a->res3};
        for (int i = 0; i < N_BUFS; i++) {
            *ptrs[i] = slab;
            slab += (sizes[i] + 15) / 16 * 16;
        }
    }
    return rc;
}

static int alloc_acts(model *m, gpt2_impl *g, int64_t B, ddp_err *err)
{
    int64_t T = g->T, C = g->s.n_embd, NH = g->s.n_head, BT = B * T, Vp = g->Vp;
    int64_t att = B * NH * T * T;
    struct { float **p; int64_t n; } bufs[] = {
        {&g->encoded, BT * C}, {&g->lnf, BT * C}, {&g->lnf_mean, BT}, {&g->lnf_rstd, BT},
        {&g->logits, BT * Vp}, {&g->dres, BT * C}, {&g->dln, BT * C}, {&g->datty, BT * C},
        {&g->dqkv, BT * 3 * C}, {&g->dq, BT * C}, {&g->dk, BT * C}, {&g->dv, BT * C}, {&g->dyh, BT * C},
        {&g->datt, att}, {&g->dfch, BT * 4 * C}, {&g->dfch_gelu, BT * 4 * C}, {&g->preatt, att},
        {&g->yh, BT * C},
    };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        int rc = act_alloc(m, g, bufs[i].p, bufs[i].n, err);
        if (rc)
            return rc;
    }
    g->blocks = calloc((size_t)g->s.n_layer, sizeof *g->blocks);
    if (!g->blocks)
        return ddp_fail(err, DDP_ERUNTIME, "gpt2: out of host memory");
    return alloc_blocks(m, g, B, err);
}

/* ---- forward ------------------------------------------------------------------------------ */

/* y[BT, out] = x[BT, in] · Wᵀ + b  (W is [out, in], PyTorch's Linear) */
static int linear_forward(model *m, const float *x, const float *w, const float *b, float *y, int64_t rows,
                          int64_t in, int64_t out, ddp_err *err)
{
    const struct device_ops *op = m->dev->ops;
    int rc = op->gemm(m->dev, false, true, rows, out, in, 1.0f, x, in, w, in, 0.0f, y, out, err);
    return rc ? rc : op->bias_add(m->dev, y, b, rows, out, err);
}

static int attention_forward(model *m, gpt2_impl *g, gpt2_block_acts *a, const float *qkv, int64_t B,
                             ddp_err *err)
{
    const struct device_ops *op = m->dev->ops;
    device *d = m->dev;
    int64_t T = g->T, NH = g->s.n_head, hs = g->s.n_embd / NH, BH = B * NH;
    float scale = (float)(1.0 / sqrt((double)hs));
    int rc = op->attention_split_heads(d, a->q, a->k, a->v, qkv, B, T, NH, hs, err);
    /* preatt[bh] = q[bh] · k[bh]ᵀ  (T x T) */
    if (!rc)
        rc = op->gemm_strided_batched(d, false, true, T, T, hs, 1.0f, a->q, hs, T * hs, a->k, hs, T * hs, 0.0f,
                                      g->preatt, T, T * T, BH, err);
    if (!rc)
        rc = op->causal_softmax_forward(d, a->att, g->preatt, scale, BH, T, err);
    /* yh[bh] = att[bh] · v[bh]  (T x hs) */
    if (!rc)
        rc = op->gemm_strided_batched(d, false, false, T, hs, T, 1.0f, a->att, T, T * T, a->v, hs, T * hs, 0.0f,
                                      g->yh, hs, T * hs, BH, err);
    if (!rc)
        rc = op->attention_merge_heads(d, a->atty, g->yh, B, T, NH, hs, err);
    return rc;
}

static int block_forward(model *m, gpt2_impl *g, int l, const float *res_in, int64_t B, ddp_err *err)
{
    const struct device_ops *op = m->dev->ops;
    device *d = m->dev;
    gpt2_block_acts *a = &g->blocks[l];
    int64_t C = g->s.n_embd, BT = B * g->T;
    float *P = m->params;
    float *qkv = g->dqkv; /* forward uses the backward scratch for the packed q|k|v */
    int rc = op->layernorm_forward(d, a->ln1, a->ln1_mean, a->ln1_rstd, res_in, block_tensor(m, P, l, LN1_W),
                                   block_tensor(m, P, l, LN1_B), BT, C, err);
    if (!rc)
        rc = linear_forward(m, a->ln1, block_tensor(m, P, l, QKV_W), block_tensor(m, P, l, QKV_B), qkv, BT, C,
                            3 * C, err);
    if (!rc)
        rc = attention_forward(m, g, a, qkv, B, err);
    if (!rc)
        rc = linear_forward(m, a->atty, block_tensor(m, P, l, ATTPROJ_W), block_tensor(m, P, l, ATTPROJ_B),
                            a->res2, BT, C, C, err);
    if (!rc)
        rc = op->add(d, a->res2, a->res2, res_in, (size_t)(BT * C), err);
    if (!rc)
        rc = op->layernorm_forward(d, a->ln2, a->ln2_mean, a->ln2_rstd, a->res2, block_tensor(m, P, l, LN2_W),
                                   block_tensor(m, P, l, LN2_B), BT, C, err);
    if (!rc)
        rc = linear_forward(m, a->ln2, block_tensor(m, P, l, FC_W), block_tensor(m, P, l, FC_B), a->fch, BT, C,
                            4 * C, err);
    if (!rc)
        rc = op->act_forward(d, ACT_GELU_TANH, a->fch, a->fch_gelu, (size_t)(BT * 4 * C), err);
    if (!rc)
        rc = linear_forward(m, a->fch_gelu, block_tensor(m, P, l, FCPROJ_W), block_tensor(m, P, l, FCPROJ_B),
                            a->res3, BT, 4 * C, C, err);
    if (!rc)
        rc = op->add(d, a->res3, a->res3, a->res2, (size_t)(BT * C), err);
    return rc ? ddp_prefix(err, "gpt2 forward h.%d", l) : DDP_OK;
}

/* Logits [BT, Vp] of the tokens [B, T] (device int32). */
static int forward(model *m, const int32_t *tokens, int64_t B, ddp_err *err)
{
    gpt2_impl *g = m->impl;
    const struct device_ops *op = m->dev->ops;
    device *d = m->dev;
    int64_t C = g->s.n_embd, BT = B * g->T;
    int rc = op->embedding_forward(d, g->encoded, tokens, m->params + g->off_wte, m->params + g->off_wpe, B,
                                   g->T, C, err);
    if (rc)
        return ddp_prefix(err, "gpt2 forward embedding");
    const float *res = g->encoded;
    for (int l = 0; l < g->s.n_layer; l++) {
        if ((rc = block_forward(m, g, l, res, B, err)))
            return rc;
        res = g->blocks[l].res3;
    }
    rc = op->layernorm_forward(d, g->lnf, g->lnf_mean, g->lnf_rstd, res, m->params + g->off_lnf_w,
                               m->params + g->off_lnf_b, BT, C, err);
    /* logits = lnf · wteᵀ over all padded rows: the padding columns are ignored by the classifier */
    if (!rc)
        rc = op->gemm(d, false, true, BT, g->Vp, C, 1.0f, g->lnf, C, m->params + g->off_wte, C, 0.0f,
                      g->logits, g->Vp, err);
    return rc ? ddp_prefix(err, "gpt2 forward ln_f/logits") : DDP_OK;
}

/* ---- backward ----------------------------------------------------------------------------- */

/* dx = dy · W (overwrite), dW += dyᵀ · x, db += column sums of dy. W is [out, in]. */
static int linear_backward(model *m, const float *dy, const float *x, const float *w, float *dx, float *dw,
                           float *db, int64_t rows, int64_t in, int64_t out, ddp_err *err)
{
    const struct device_ops *op = m->dev->ops;
    int rc = op->gemm(m->dev, true, false, out, in, rows, 1.0f, dy, out, x, in, 1.0f, dw, in, err);
    if (!rc)
        rc = op->bias_grad(m->dev, dy, db, rows, out, 1.0f, err);
    if (!rc && dx)
        rc = op->gemm(m->dev, false, false, rows, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in, err);
    return rc;
}

/* g->datty holds dLoss/d(atty); on exit g->dqkv holds dLoss/d(qkv). */
static int attention_backward(model *m, gpt2_impl *g, const gpt2_block_acts *a, int64_t B, ddp_err *err)
{
    const struct device_ops *op = m->dev->ops;
    device *d = m->dev;
    int64_t T = g->T, NH = g->s.n_head, hs = g->s.n_embd / NH, BH = B * NH;
    float scale = (float)(1.0 / sqrt((double)hs));
    int rc = op->attention_split_heads_grad(d, g->dyh, g->datty, B, T, NH, hs, err);
    /* datt = dyh · vᵀ ; dv = attᵀ · dyh */
    if (!rc)
        rc = op->gemm_strided_batched(d, false, true, T, T, hs, 1.0f, g->dyh, hs, T * hs, a->v, hs, T * hs, 0.0f,
                                      g->datt, T, T * T, BH, err);
    if (!rc)
        rc = op->gemm_strided_batched(d, true, false, T, hs, T, 1.0f, a->att, T, T * T, g->dyh, hs, T * hs, 0.0f,
                                      g->dv, hs, T * hs, BH, err);
    float *dpreatt = g->preatt; /* the forward scores are dead now: reuse their buffer */
    if (!rc)
        rc = op->causal_softmax_backward(d, dpreatt, g->datt, a->att, scale, BH, T, err);
    /* dq = dpreatt · k ; dk = dpreattᵀ · q */
    if (!rc)
        rc = op->gemm_strided_batched(d, false, false, T, hs, T, 1.0f, dpreatt, T, T * T, a->k, hs, T * hs, 0.0f,
                                      g->dq, hs, T * hs, BH, err);
    if (!rc)
        rc = op->gemm_strided_batched(d, true, false, T, hs, T, 1.0f, dpreatt, T, T * T, a->q, hs, T * hs, 0.0f,
                                      g->dk, hs, T * hs, BH, err);
    if (!rc)
        rc = op->attention_merge_heads_grad(d, g->dqkv, g->dq, g->dk, g->dv, B, T, NH, hs, err);
    return rc;
}

/* g->dres holds dLoss/d(block l output) on entry and dLoss/d(block l input) on exit. */
static int block_backward(model *m, gpt2_impl *g, int l, const float *res_in, int64_t B, ddp_err *err)
{
    const struct device_ops *op = m->dev->ops;
    device *d = m->dev;
    const gpt2_block_acts *a = &g->blocks[l];
    int64_t C = g->s.n_embd, BT = B * g->T;
    float *P = m->params, *G = m->grads;
    /* MLP: res3 = res2 + c_proj(gelu(c_fc(ln2(res2)))) */
    int rc = linear_backward(m, g->dres, a->fch_gelu, block_tensor(m, P, l, FCPROJ_W), g->dfch_gelu,
                             block_tensor(m, G, l, FCPROJ_W), block_tensor(m, G, l, FCPROJ_B), BT, 4 * C, C, err);
    if (!rc)
        rc = op->act_backward(d, ACT_GELU_TANH, a->fch, g->dfch_gelu, g->dfch, (size_t)(BT * 4 * C), err);
    if (!rc)
        rc = linear_backward(m, g->dfch, a->ln2, block_tensor(m, P, l, FC_W), g->dln, block_tensor(m, G, l, FC_W),
                             block_tensor(m, G, l, FC_B), BT, C, 4 * C, err);
    if (!rc)
        rc = op->layernorm_backward(d, g->dres, block_tensor(m, G, l, LN2_W), block_tensor(m, G, l, LN2_B), g->dln,
                                    a->res2, block_tensor(m, P, l, LN2_W), a->ln2_mean, a->ln2_rstd, BT, C, err);
    /* attention: res2 = res_in + c_proj(attn(ln1(res_in))) */
    if (!rc)
        rc = linear_backward(m, g->dres, a->atty, block_tensor(m, P, l, ATTPROJ_W), g->datty,
                             block_tensor(m, G, l, ATTPROJ_W), block_tensor(m, G, l, ATTPROJ_B), BT, C, C, err);
    if (!rc)
        rc = attention_backward(m, g, a, B, err);
    if (!rc)
        rc = linear_backward(m, g->dqkv, a->ln1, block_tensor(m, P, l, QKV_W), g->dln, block_tensor(m, G, l, QKV_W),
                             block_tensor(m, G, l, QKV_B), BT, C, 3 * C, err);
    if (!rc)
        rc = op->layernorm_backward(d, g->dres, block_tensor(m, G, l, LN1_W), block_tensor(m, G, l, LN1_B), g->dln,
                                    res_in, block_tensor(m, P, l, LN1_W), a->ln1_mean, a->ln1_rstd, BT, C, err);
    return rc ? ddp_prefix(err, "gpt2 backward h.%d", l) : DDP_OK;
}

static int backward(model *m, const int32_t *tokens, int64_t B, grad_ready_fn ready, void *ctx, ddp_err *err)
{
    gpt2_impl *g = m->impl;
    const struct device_ops *op = m->dev->ops;
    device *d = m->dev;
    int64_t C = g->s.n_embd, BT = B * g->T, L = g->s.n_layer;
    const float *res_out = L > 0 ? g->blocks[L - 1].res3 : g->encoded;
    /* g->logits holds dlogits now. Classifier: dwte += dlogitsᵀ · lnf, dlnf = dlogits · wte */
    int rc = op->gemm(d, true, false, g->Vp, C, BT, 1.0f, g->logits, g->Vp, g->lnf, C,
                      1.0f, m->grads + g->off_wte, C, err);
    if (!rc)
        rc = op->gemm(d, false, false, BT, C, g->Vp, 1.0f, g->logits, g->Vp,
                      m->params + g->off_wte, C, 0.0f, g->dln, C, err);
    if (!rc)
        rc = op->fill(d, g->dres, (size_t)(BT * C), 0.0f, err);
    if (!rc)
        rc = op->layernorm_backward(d, g->dres, m->grads + g->off_lnf_w, m->grads + g->off_lnf_b, g->dln, res_out,
                                    m->params + g->off_lnf_w, g->lnf_mean, g->lnf_rstd, BT, C, err);
    if (rc)
        return ddp_prefix(err, "gpt2 backward ln_f/classifier");
    if (ready)
        ready(ctx, g->block_off[L], m->n_params - g->block_off[L]);
    for (int l = (int)L - 1; l >= 0; l--) {
        const float *res_in = l > 0 ? g->blocks[l - 1].res3 : g->encoded;
        if ((rc = block_backward(m, g, l, res_in, B, err)))
            return rc;
        if (ready)
            ready(ctx, g->block_off[l], g->block_off[l + 1] - g->block_off[l]);
    }
    rc = op->embedding_backward(d, m->grads + g->off_wte, m->grads + g->off_wpe, g->dres, tokens, B, g->T, C, err);
    if (rc)
        return ddp_prefix(err, "gpt2 backward embedding");
    if (ready)
        ready(ctx, 0, g->block_off[0]);
    return DDP_OK;
}

/* ---- model_ops ---------------------------------------------------------------------------- */

static int check_batch(const model *m, const model_batch *b, ddp_err *err)
{
    if (b->rows < 1 || b->rows > m->max_rows)
        return ddp_fail(err, DDP_ERUNTIME, "gpt2: batch of %lld sequences, model was built for 1..%lld",
                        (long long)b->rows, (long long)m->max_rows);
    return DDP_OK;
}

static int classifier(model *m, const int32_t *targets, int64_t B, float grad_scale, bool want_grad, float *stats,
                      ddp_err *err)
{
    gpt2_impl *g = m->impl;
    int rc = m->dev->ops->softmax_xent(m->dev, g->logits, g->Vp, targets, B * g->T, g->s.vocab_size, grad_scale,
                                       want_grad ? g->logits : NULL, stats, err);
    return rc ? ddp_prefix(err, "gpt2 classifier") : DDP_OK;
}

static int gpt2_forward_backward(model *m, const model_batch *b, float grad_scale, bool accumulate,
                                 grad_ready_fn ready, void *ctx, float *stats, ddp_err *err)
{
    int rc = check_batch(m, b, err);
    /* Every gradient below is accumulated (GEMMs with beta 1, LayerNorm's += ...), so a fresh pass
     * starts from zero. */
    if (!rc && !accumulate)
        rc = m->dev->ops->fill(m->dev, m->grads, m->n_params, 0.0f, err);
    if (!rc)
        rc = forward(m, b->inputs, b->rows, err);
    if (!rc)
        rc = classifier(m, b->targets, b->rows, grad_scale, true, stats, err);
    if (!rc)
        rc = backward(m, b->inputs, b->rows, ready, ctx, err);
    return rc;
}

static int gpt2_evaluate(model *m, const model_batch *b, float *stats, ddp_err *err)
{
    int rc = check_batch(m, b, err);
    if (!rc)
        rc = forward(m, b->inputs, b->rows, err);
    return rc ? rc : classifier(m, b->targets, b->rows, 1.0f, false, stats, err);
}

static void gpt2_destroy(model *m)
{
    if (!m)
        return;
    gpt2_impl *g = m->impl;
    if (g) {
        for (int i = 0; i < g->n_allocs; i++)
            m->dev->ops->free(m->dev, g->allocs[i]);
        free(g->blocks);
        free(g);
    }
    m->dev->ops->free(m->dev, m->params);
    m->dev->ops->free(m->dev, m->grads);
    model_free_tensors(m);
    free(m);
}

/* GPT-2's initialisation: weights N(0, 0.02), the residual projections (attn.c_proj, mlp.c_proj)
 * N(0, 0.02/sqrt(2·n_layer)), biases 0, LayerNorm weights 1; wte's padding rows 0. */
static int gpt2_init_params(model *m, uint64_t seed, ddp_err *err)
{
    gpt2_impl *g = m->impl;
    float *host = calloc(m->n_params, sizeof *host);
    if (!host)
        return ddp_fail(err, DDP_ERUNTIME, "gpt2 init: out of host memory for %zu parameters", m->n_params);
    rng r;
    rng_seed(&r, seed, RNG_INIT);
    double resid_std = 0.02 / sqrt(2.0 * (double)g->s.n_layer);
    for (int i = 0; i < m->n_tensors; i++) {
        const param_tensor *t = &m->tensors[i];
        const char *name = t->name;
        size_t n = t->numel;
        if (!strcmp(name, "wte.weight"))
            n = (size_t)g->s.vocab_size * (size_t)g->s.n_embd;
        if (strstr(name, "ln_") && strstr(name, ".weight")) {
            for (size_t j = 0; j < n; j++)
                host[t->offset + j] = 1.0f;
        } else if (t->ndim == 2) {
            double std = strstr(name, "c_proj.weight") ? resid_std : 0.02;
            for (size_t j = 0; j < n; j++)
                host[t->offset + j] = (float)(rng_normal(&r) * std);
        }
    }
    int rc = m->dev->ops->upload(m->dev, m->params, host, m->n_params * sizeof *host, err);
    free(host);
    return rc ? ddp_prefix(err, "gpt2 init: uploading parameters") : DDP_OK;
}

static const float *gpt2_logits(const model *m, int64_t *ld);

static const struct model_ops gpt2_ops = {
    .forward_backward = gpt2_forward_backward,
    .evaluate = gpt2_evaluate,
    .init_params = gpt2_init_params,
    .logits = gpt2_logits,
    .destroy = gpt2_destroy,
};

/* ---- construction ------------------------------------------------------------------------- */

static int check_shape(const cfg_gpt2 *s, const sample_layout *data, int64_t max_rows, ddp_err *err)
{
    if (s->n_layer < 1 || s->n_layer > GPT2_MAX_LAYERS)
        return ddp_fail(err, DDP_EUSAGE, "model.gpt2.n_layer: expected 1..%d, got %lld", GPT2_MAX_LAYERS,
                        (long long)s->n_layer);
    if (s->n_head < 1 || s->n_embd < 1 || s->n_embd % s->n_head)
        return ddp_fail(err, DDP_EUSAGE, "model.gpt2.n_embd %lld is not divisible by model.gpt2.n_head %lld",
                        (long long)s->n_embd, (long long)s->n_head);
    char got[160];
    sample_layout_format(data, got, sizeof got);
    if (data->input.dtype != SAMPLE_I32 || data->input.count < 1 || !sample_field_equal(data->input, data->target))
        return ddp_fail(err, DDP_EUSAGE, "gpt2 takes token sequences (i32 x T -> i32 x T), the data has %s", got);
    if (data->input.count > s->block_size)
        return ddp_fail(err, DDP_EUSAGE, "data.seq_len %lld is over model.gpt2.block_size %lld",
                        (long long)data->input.count, (long long)s->block_size);
    if (data->n_classes > s->vocab_size)
        return ddp_fail(err, DDP_EUSAGE, "the data's vocabulary of %lld tokens is larger than model.gpt2.vocab_size "
                        "%lld", (long long)data->n_classes, (long long)s->vocab_size);
    if (max_rows < 1)
        return ddp_fail(err, DDP_EUSAGE, "gpt2: batch of %lld sequences", (long long)max_rows);
    return DDP_OK;
}

int64_t gpt2_vocab_padded(int64_t vocab_size)
{
    return (vocab_size + GPT2_VOCAB_ALIGN - 1) / GPT2_VOCAB_ALIGN * GPT2_VOCAB_ALIGN;
}

void gpt2_format_shape(const cfg_gpt2 *s, char *out, size_t size)
{
    snprintf(out, size, "gpt2 n_layer=%lld n_head=%lld n_embd=%lld block_size=%lld vocab_size=%lld",
             (long long)s->n_layer, (long long)s->n_head, (long long)s->n_embd, (long long)s->block_size,
             (long long)s->vocab_size);
}

static void describe(model *m, const cfg_gpt2 *s, int64_t T)
{
    char shape[192]; /* five int64 and their names fit; leaves room for seq_len in the description */
    gpt2_format_shape(s, shape, sizeof shape);
    snprintf(m->description, sizeof m->description, "%s seq_len=%lld", shape, (long long)T);
}

int gpt2_parse_description(const char *desc, cfg_gpt2 *shape, int64_t *seq_len, ddp_err *err)
{
    long long v[6] = {0};
    int end = -1;
    sscanf(desc, "gpt2 n_layer=%lld n_head=%lld n_embd=%lld block_size=%lld vocab_size=%lld seq_len=%lld%n", &v[0],
           &v[1], &v[2], &v[3], &v[4], &v[5], &end);
    cfg_gpt2 s = {.n_layer = v[0], .n_head = v[1], .n_embd = v[2], .block_size = v[3], .vocab_size = v[4]};
    char again[MODEL_DESCRIPTION_MAX + 32] = "";
    if (end > 0) { /* exactly what describe() writes: no sign, no leading zeros, nothing after */
        gpt2_format_shape(&s, again, sizeof again);
        snprintf(again + strlen(again), sizeof again - strlen(again), " seq_len=%lld", v[5]);
    }
    if (end < 0 || strcmp(again, desc) != 0 || s.n_layer < 1 || s.n_head < 1 || s.n_embd < 1 || s.block_size < 1 ||
        s.vocab_size < 1 || v[5] < 1)
        return ddp_fail(err, DDP_EUSAGE, "not a GPT-2 model: \"%.200s\"", desc);
    *shape = s;
    *seq_len = v[5];
    return DDP_OK;
}

int gpt2_create(const cfg_gpt2 *shape, device *dev, const sample_layout *data, int64_t max_rows, model **out,
                ddp_err *err)
{
    *out = NULL;
    int rc = check_shape(shape, data, max_rows, err);
    if (rc)
        return rc;
    model *m = calloc(1, sizeof *m);
    gpt2_impl *g = calloc(1, sizeof *g);
    if (!m || !g) {
        free(m);
        free(g);
        return ddp_fail(err, DDP_ERUNTIME, "gpt2: out of host memory");
    }
    m->ops = &gpt2_ops;
    m->dev = dev;
    m->impl = g;
    m->max_rows = max_rows;
    g->s = *shape;
    g->Vp = gpt2_vocab_padded(shape->vocab_size);
    g->T = data->input.count;
    m->io = (model_io){.sample = *data, .language_model = true};
    m->io.sample.n_classes = shape->vocab_size;
    describe(m, shape, g->T);
    rc = lay_out_params(m, g, err);
    size_t bytes = m->n_params * sizeof(float);
    if (!rc)
        rc = dev->ops->alloc(dev, bytes, (void **)&m->params, err);
    if (!rc)
        rc = dev->ops->alloc(dev, bytes, (void **)&m->grads, err);
    if (!rc)
        rc = alloc_acts(m, g, max_rows, err);
    m->activation_bytes = g->act_bytes;
    if (rc) {
        char what[MODEL_DESCRIPTION_MAX];
        snprintf(what, sizeof what, "%s", m->description);
        gpt2_destroy(m);
        return ddp_prefix(err, "gpt2: building %s for %lld sequences", what, (long long)max_rows);
    }
    *out = m;
    return DDP_OK;
}

static const float *gpt2_logits(const model *m, int64_t *ld)
{
    const gpt2_impl *g = m->impl;
    *ld = g->Vp;
    return g->logits;
}
