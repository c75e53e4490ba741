/* llama_pass.c — the Llama's forward and backward passes as device ops (see llama.c for the model
 * and llama_internal.h for its state).
 *
 * Every activation is of the model's compute type g->lm.t; the weights come from g->lm.wp (the bf16
 * copy under precision bf16). Gradients are float: the weight-gradient GEMMs multiply
 * compute-type operands and add into the fp32 gradients (beta 1). Per block, one GEMM over the
 * adjacent q/k/v weights gives qkv (its epilogue adding the adjacent q/k/v biases in a family
 * that has them), RoPE rotates its q and k heads in place (one op over
 * n_head + n_kv_head heads), and the attention op reads q, k and v in place with grouped-query
 * heads. A family with q/k norms (Qwen3) takes three GEMMs instead, so that q and k come out as
 * planes of rows of one head each, which the RMSNorm op normalises as it does any rows (their
 * inputs kept for the backward); RoPE then runs once per plane. One GEMM over the adjacent gate/up
 * weights gives gate | up for the SwiGLU. Each residual add runs fused with the RMSNorm after it.
 * Backward reports each block's range through
 * grad_ready as soon as it is final, so the reducer all-reduces block L while block L-1 is still
 * computing. This file must not allocate, communicate, step an optimizer or read data. */
#include "llama_internal.h"

#include <math.h>

/* ---- forward ------------------------------------------------------------------------------ */

/* y[rows, out] = x[rows, in] · Wᵀ (W is [out, in] at parameter offset w_off; no bias). */
static int linear_forward(model *m, const llama_impl *g, const void *x, size_t w_off, void *y, int64_t rows,
                          int64_t in, int64_t out, ddp_err *err)
{
    return m->dev->ops->gemm(m->dev, g->lm.t, g->lm.t, false, true, rows, out, in, 1.0f, x, in, llama_weight(g, w_off),
                             in, 0.0f, y, out, err);
}

/* Element offset `elems` into a tensor of the model's compute type. */
static void *at(const llama_impl *g, const void *base, int64_t elems)
{
    return (char *)base + (size_t)elems * tensor_dtype_size(g->lm.t);
}

/* Where q, k and v are in a tensor of qkv's layout (the activations or their gradient) for B rows:
 * interleaved, q heads at column 0, k heads at NH·hd, v heads at (NH + NKV)·hd of each row of
 * QKV; with q/k norms, planes [BT, NH·hd], [BT, NKV·hd], [BT, NKV·hd] one after another, which
 * the norms (rows of hd) read and write in place. ld: q's row stride, then k's and v's. */
typedef struct qkv_view {
    void *q, *k, *v;
    int64_t ld_q, ld_kv;
} qkv_view;

static qkv_view qkv_of(const llama_impl *g, void *base, int64_t B)
{
    const int64_t BT = B * g->lm.T, q = g->s.n_head * g->hd, kv = g->s.n_kv_head * g->hd;
    if (g->fam->qk_norm)
        return (qkv_view){base, at(g, base, BT * q), at(g, base, BT * (q + kv)), q, kv};
    return (qkv_view){base, at(g, base, q), at(g, base, q + kv), g->QKV, g->QKV};
}

/* The attention op's view of qkv (qkv_of); the output [BT, NH·hd]. */
static attn_shape attention_shape(const llama_impl *g, const qkv_view *v, int64_t B)
{
    return (attn_shape){.B = B, .T = g->lm.T, .NH = g->s.n_head, .NKV = g->s.n_kv_head, .hs = g->hd,
                        .ld_q = v->ld_q, .ld_kv = v->ld_kv, .ld_o = g->s.n_head * g->hd,
                        .scale = (float)(1.0 / sqrt((double)g->hd)), .doc_start = g->lm.docs,
                        .doc_end = lm_doc_end(&g->lm, B)};
}

/* RoPE over the q and k heads of v (qkv_of): one op over NH + NKV heads when they share rows, one
 * per plane when they do not. */
static int rope(model *m, const llama_impl *g, const qkv_view *v, int64_t B, bool forward, ddp_err *err)
{
    const struct device_ops *op = m->dev->ops;
    const int64_t NH = g->s.n_head, NKV = g->s.n_kv_head;
    const bool planes = g->fam->qk_norm;
    const struct { void *x; int64_t ld, heads; } part[2] = {{v->q, v->ld_q, planes ? NH : NH + NKV},
                                                             {v->k, v->ld_kv, NKV}};
    int rc = DDP_OK;
    for (int i = 0; !rc && i < (planes ? 2 : 1); i++)
        rc = forward ? op->rope_forward(m->dev, g->lm.t, part[i].x, part[i].ld, B, g->lm.T, part[i].heads, g->hd,
                                        g->rope_cos, g->rope_sin, g->lm.docs, err)
                     : op->rope_backward(m->dev, g->lm.t, part[i].x, part[i].ld, B, g->lm.T, part[i].heads, g->hd,
                                         g->rope_cos, g->rope_sin, g->lm.docs, err);
    return rc;
}

/* With q/k norms: q and k by a GEMM each into qk_raw's planes, v by a third into qkv's v plane,
 * then each q and k head (a row of hd) RMS-normalised into qkv's q and k planes. */
static int qk_normed_projections(model *m, llama_impl *g, llama_block_acts *a, const size_t *p, int64_t B,
                                 ddp_err *err)
{
    const struct device_ops *op = m->dev->ops;
    const int64_t C = g->s.n_embd, BT = B * g->lm.T, NH = g->s.n_head, NKV = g->s.n_kv_head, hd = g->hd;
    const float eps = (float)g->s.norm_eps;
    const qkv_view v = qkv_of(g, a->qkv, B);
    void *k_raw = at(g, a->qk_raw, BT * NH * hd);
    int rc = linear_forward(m, g, a->ln1, p[Q_W], a->qk_raw, BT, C, NH * hd, err);
    if (!rc)
        rc = linear_forward(m, g, a->ln1, p[K_W], k_raw, BT, C, NKV * hd, err);
    if (!rc)
        rc = linear_forward(m, g, a->ln1, p[V_W], v.v, BT, C, NKV * hd, err);
    if (!rc)
        rc = op->rmsnorm_forward(m->dev, g->lm.t, v.q, a->rstd_qk, a->qk_raw, llama_weight(g, p[Q_NORM]), BT * NH, hd,
                                 eps, err);
    if (!rc)
        rc = op->rmsnorm_forward(m->dev, g->lm.t, v.k, a->rstd_qk + BT * NH, k_raw, llama_weight(g, p[K_NORM]),
                                 BT * NKV, hd, eps, err);
    return rc;
}

/* q, k and v: one GEMM over the adjacent q_proj, k_proj, v_proj (and their biases), or with q/k
 * norms qk_normed_projections. */
static int projections(model *m, llama_impl *g, llama_block_acts *a, const size_t *p, int64_t B, ddp_err *err)
{
    const int64_t C = g->s.n_embd, BT = B * g->lm.T;
    if (g->fam->qk_norm)
        return qk_normed_projections(m, g, a, p, B, err);
    if (g->fam->qkv_bias)
        return m->dev->ops->gemm_bias(m->dev, g->lm.t, false, true, BT, g->QKV, C, a->ln1, C, llama_weight(g, p[Q_W]),
                                      C, llama_weight(g, p[Q_B]), a->qkv, err);
    return linear_forward(m, g, a->ln1, p[Q_W], a->qkv, BT, C, g->QKV, err);
}

/* Block l's attention from its ln1 on: q, k and v (projections), RoPE, attention, and o_proj into
 * res2. */
static int attention_forward(model *m, llama_impl *g, llama_block_acts *a, const size_t *p, int64_t B, ddp_err *err)
{
    const struct device_ops *op = m->dev->ops;
    const int64_t C = g->s.n_embd, BT = B * g->lm.T, NH = g->s.n_head;
    const qkv_view v = qkv_of(g, a->qkv, B);
    int rc = projections(m, g, a, p, B, err);
    if (!rc)
        rc = rope(m, g, &v, B, true, err);
    if (!rc) {
        const attn_shape s = attention_shape(g, &v, B);
        rc = op->attention_forward(m->dev, g->lm.t, &s, a->atty, a->lse, v.q, v.k, v.v, err);
    }
    return rc ? rc : linear_forward(m, g, a->atty, p[O_W], a->res2, BT, NH * g->hd, C, err);
}

/* Block l's MLP input: gate | up (one GEMM over the adjacent gate_proj and up_proj) and h. */
static int mlp_forward(model *m, llama_impl *g, llama_block_acts *a, const size_t *p, int64_t BT, ddp_err *err)
{
    const int64_t C = g->s.n_embd, F = g->s.ffn_hidden;
    int rc = linear_forward(m, g, a->ln2, p[GATE_W], a->gate_up, BT, C, 2 * F, err);
    return rc ? rc : m->dev->ops->swiglu_forward(m->dev, g->lm.t, a->h, a->gate_up, BT, F, err);
}

/* The offsets of block l's tensors, by their enum; those the family lacks are 0 (never read). */
static void block_params(const model *m, const llama_impl *g, int l, size_t *p)
{
    for (int i = 0; i < BLOCK_TENSORS_MAX; i++)
        p[i] = g->slot[i] >= 0 ? llama_block_offset(m, l, i) : 0;
}

/* Block l's forward. Its input, the residual stream, is block l-1's res3 after the residual add
 * res3 += res2, which runs here fused with input_layernorm; block 0 reads the embeddings. The
 * block's own adds are fused likewise: res2 += res_in into post_attention_layernorm here, res3 +=
 * res2 into the next block's input_layernorm, or model.norm's (llama_forward). */
static int block_forward(model *m, llama_impl *g, int l, int64_t B, ddp_err *err)
{
    const struct device_ops *op = m->dev->ops;
    device *d = m->dev;
    const tensor_dtype t = g->lm.t;
    const float eps = (float)g->s.norm_eps;
    llama_block_acts *a = &g->blocks[l], *prev = l > 0 ? &g->blocks[l - 1] : NULL;
    const int64_t C = g->s.n_embd, F = g->s.ffn_hidden, BT = B * g->lm.T;
    size_t p[BLOCK_TENSORS_MAX];
    block_params(m, g, l, p);
    const void *norm1_w = llama_weight(g, p[ATTN_NORM]);
    const void *res_in = prev ? prev->res3 : g->encoded;
    int rc = prev ? op->residual_rmsnorm_forward(d, t, prev->res3, a->ln1, a->rstd1, prev->res3, prev->res2, norm1_w,
                                                 BT, C, eps, err)
                  : op->rmsnorm_forward(d, t, a->ln1, a->rstd1, res_in, norm1_w, BT, C, eps, err);
    if (!rc)
        rc = attention_forward(m, g, a, p, B, err);
    if (!rc)
        rc = op->residual_rmsnorm_forward(d, t, a->res2, a->ln2, a->rstd2, a->res2, res_in,
                                          llama_weight(g, p[MLP_NORM]), BT, C, eps, err);
    if (!rc)
        rc = mlp_forward(m, g, a, p, BT, err);
    if (!rc)
        rc = linear_forward(m, g, a->h, p[DOWN_W], a->res3, BT, F, C, err);
    return rc ? ddp_prefix(err, "llama forward model.layers.%d", l) : DDP_OK;
}

/* Before block l's backward under recompute: what the forward did not keep, rebuilt from the
 * block's input res_in (the residual stream, kept) by the same ops on the same values, so the bits
 * are the forward's (residual_rmsnorm_forward normalises the sum it stores: rmsnorm_forward of
 * that sum is the same). Selective rebuilds the norms and h from the kept res2 and gate_up; full
 * replays the block but down_proj, whose output backward does not read. The last block's are
 * still in place: the forward ended with it. */
static int block_recompute(model *m, llama_impl *g, int l, const void *res_in, int64_t B, ddp_err *err)
{
    if (g->recompute == RECOMPUTE_NONE || l == g->s.n_layer - 1)
        return DDP_OK;
    const struct device_ops *op = m->dev->ops;
    device *d = m->dev;
    const tensor_dtype t = g->lm.t;
    const float eps = (float)g->s.norm_eps;
    llama_block_acts *a = &g->blocks[l];
    const int64_t C = g->s.n_embd, F = g->s.ffn_hidden, BT = B * g->lm.T;
    size_t p[BLOCK_TENSORS_MAX];
    block_params(m, g, l, p);
    const void *norm2_w = llama_weight(g, p[MLP_NORM]);
    int rc = op->rmsnorm_forward(d, t, a->ln1, a->rstd1, res_in, llama_weight(g, p[ATTN_NORM]), BT, C, eps, err);
    if (g->recompute == RECOMPUTE_FULL) {
        if (!rc)
            rc = attention_forward(m, g, a, p, B, err);
        if (!rc)
            rc = op->residual_rmsnorm_forward(d, t, a->res2, a->ln2, a->rstd2, a->res2, res_in, norm2_w, BT, C, eps,
                                              err);
        if (!rc)
            rc = mlp_forward(m, g, a, p, BT, err);
    } else {
        if (!rc)
            rc = op->rmsnorm_forward(d, t, a->ln2, a->rstd2, a->res2, norm2_w, BT, C, eps, err);
        if (!rc)
            rc = op->swiglu_forward(d, t, a->h, a->gate_up, BT, F, err);
    }
    return rc ? ddp_prefix(err, "llama recompute model.layers.%d", l) : DDP_OK;
}

int llama_forward(model *m, const int32_t *tokens, int64_t B, ddp_err *err)
{
    llama_impl *g = m->impl;
    const struct device_ops *op = m->dev->ops;
    device *d = m->dev;
    const int64_t C = g->s.n_embd, BT = B * g->lm.T, L = g->s.n_layer;
    /* no position table: the positions are RoPE's */
    int rc = op->embedding_forward(d, g->lm.t, g->encoded, tokens, llama_weight(g, g->off_embed), NULL, NULL, B,
                                   g->lm.T, C, err);
    if (rc)
        return ddp_prefix(err, "llama forward embedding");
    for (int l = 0; l < L; l++)
        if ((rc = block_forward(m, g, l, B, err)))
            return rc;
    llama_block_acts *last = &g->blocks[L - 1];
    rc = op->residual_rmsnorm_forward(d, g->lm.t, last->res3, g->lnf, g->rstdf, last->res3, last->res2,
                                      llama_weight(g, g->off_norm), BT, C, (float)g->s.norm_eps, err);
    return rc ? ddp_prefix(err, "llama forward model.norm") : DDP_OK; /* lm_head: the classifier's (lm_core.c) */
}

/* ---- backward ----------------------------------------------------------------------------- */

/* dW += dyᵀ · x; dx = dy · W, overwritten, or added to dx when add_dx. W is [out, in] at
 * parameter offset w_off. */
static int linear_backward(model *m, const llama_impl *g, const void *dy, const void *x, size_t w_off, void *dx,
                           bool add_dx, int64_t rows, int64_t in, int64_t out, ddp_err *err)
{
    const struct device_ops *op = m->dev->ops;
    int rc = op->gemm(m->dev, g->lm.t, TENSOR_F32, true, false, out, in, rows, 1.0f, dy, out, x, in, 1.0f,
                      model_grad(m, w_off), in, err);
    return rc ? rc : op->gemm(m->dev, g->lm.t, g->lm.t, false, false, rows, in, out, 1.0f, dy, out,
                              llama_weight(g, w_off), in, add_dx ? 1.0f : 0.0f, dx, in, err);
}

/* With q/k norms: from the gradient w.r.t. the normed q and k planes (dqkv's, un-rotated) back
 * through the norms into dqk_raw, then through the three GEMMs: their weights' gradients and ln1's
 * gradient into g->dln. */
static int qk_normed_projections_backward(model *m, llama_impl *g, const llama_block_acts *a, const size_t *p,
                                          int64_t B, ddp_err *err)
{
    const struct device_ops *op = m->dev->ops;
    device *d = m->dev;
    const tensor_dtype t = g->lm.t;
    const int64_t C = g->s.n_embd, BT = B * g->lm.T, NH = g->s.n_head, NKV = g->s.n_kv_head, hd = g->hd;
    const qkv_view dv = qkv_of(g, g->dqkv, B);
    void *dk_raw = at(g, g->dqk_raw, BT * NH * hd);
    const void *k_raw = at(g, a->qk_raw, BT * NH * hd);
    int rc = op->fill(d, t, g->dqk_raw, (size_t)(BT * (NH + NKV) * hd), 0.0f, err); /* the norms add into it */
    if (!rc)
        rc = op->rmsnorm_backward(d, t, g->dqk_raw, model_grad(m, p[Q_NORM]), dv.q, a->qk_raw,
                                  llama_weight(g, p[Q_NORM]), a->rstd_qk, BT * NH, hd, err);
    if (!rc)
        rc = op->rmsnorm_backward(d, t, dk_raw, model_grad(m, p[K_NORM]), dv.k, k_raw, llama_weight(g, p[K_NORM]),
                                  a->rstd_qk + BT * NH, BT * NKV, hd, err);
    if (!rc)
        rc = linear_backward(m, g, g->dqk_raw, a->ln1, p[Q_W], g->dln, false, BT, C, NH * hd, err);
    if (!rc)
        rc = linear_backward(m, g, dk_raw, a->ln1, p[K_W], g->dln, true, BT, C, NKV * hd, err);
    return rc ? rc : linear_backward(m, g, dv.v, a->ln1, p[V_W], g->dln, true, BT, C, NKV * hd, err);
}

/* g->dres holds dLoss/d(block l output) on entry and dLoss/d(block l input) on exit. The residual
 * adds need no pass of their own: their gradient flows on unchanged, and each RMSNorm backward
 * adds its input's gradient into dres ("+="). */
static int block_backward(model *m, llama_impl *g, int l, const void *res_in, int64_t B, ddp_err *err)
{
    const struct device_ops *op = m->dev->ops;
    device *d = m->dev;
    const tensor_dtype t = g->lm.t;
    const llama_block_acts *a = &g->blocks[l];
    const int64_t C = g->s.n_embd, F = g->s.ffn_hidden, BT = B * g->lm.T, NH = g->s.n_head, hd = g->hd;
    size_t p[BLOCK_TENSORS_MAX];
    block_params(m, g, l, p);
    /* MLP: res3 = res2 + down(silu(gate(ln2)) * up(ln2)) */
    int rc = linear_backward(m, g, g->dres, a->h, p[DOWN_W], g->dh, false, BT, F, C, err);
    if (!rc)
        rc = op->swiglu_backward(d, t, g->dgate_up, g->dh, a->gate_up, BT, F, err);
    if (!rc)
        rc = linear_backward(m, g, g->dgate_up, a->ln2, p[GATE_W], g->dln, false, BT, C, 2 * F, err);
    if (!rc)
        rc = op->rmsnorm_backward(d, t, g->dres, model_grad(m, p[MLP_NORM]), g->dln, a->res2, llama_weight(g, p[MLP_NORM]),
                                  a->rstd2, BT, C, err);
    /* attention: res2 = res_in + o_proj(attn(rope(qkv(ln1(res_in))))) */
    if (!rc)
        rc = linear_backward(m, g, g->dres, a->atty, p[O_W], g->datty, false, BT, NH * hd, C, err);
    const qkv_view v = qkv_of(g, a->qkv, B), dv = qkv_of(g, g->dqkv, B);
    if (!rc) {
        const attn_shape s = attention_shape(g, &v, B);
        rc = op->attention_backward(d, t, &s, dv.q, dv.k, dv.v, g->datty, a->atty, a->lse, v.q, v.k, v.v, err);
    }
    if (!rc) /* the gradient w.r.t. the rotated q and k, back to the projections' (or the norms') outputs */
        rc = rope(m, g, &dv, B, false, err);
    if (!rc && g->fam->qkv_bias)
        rc = op->bias_grad(d, t, g->dqkv, model_grad(m, p[Q_B]), BT, g->QKV, 1.0f, err);
    if (!rc && g->fam->qk_norm)
        rc = qk_normed_projections_backward(m, g, a, p, B, err);
    else if (!rc)
        rc = linear_backward(m, g, g->dqkv, a->ln1, p[Q_W], g->dln, false, BT, C, g->QKV, err);
    if (!rc)
        rc = op->rmsnorm_backward(d, t, g->dres, model_grad(m, p[ATTN_NORM]), g->dln, res_in, llama_weight(g, p[ATTN_NORM]),
                                  a->rstd1, BT, C, err);
    return rc ? ddp_prefix(err, "llama backward model.layers.%d", l) : DDP_OK;
}

int llama_backward(model *m, const int32_t *tokens, int64_t B, grad_ready_fn ready, void *ctx, ddp_err *err)
{
    llama_impl *g = m->impl;
    const struct device_ops *op = m->dev->ops;
    device *d = m->dev;
    const tensor_dtype t = g->lm.t;
    const int64_t C = g->s.n_embd, BT = B * g->lm.T, L = g->s.n_layer;
    /* the classifier left lm_head's gradient and dlnf in g->dln (lm_core.head_dx) */
    int rc = op->fill(d, t, g->dres, (size_t)(BT * C), 0.0f, err);
    if (!rc)
        rc = op->rmsnorm_backward(d, t, g->dres, model_grad(m, g->off_norm), g->dln, g->blocks[L - 1].res3,
                                  llama_weight(g, g->off_norm), g->rstdf, BT, C, err);
    if (rc)
        return ddp_prefix(err, "llama backward model.norm");
    if (ready) /* model.norm and lm_head; a tied head's gradient is the embedding's, final below */
        ready(ctx, g->block_off[L], m->n_params - g->block_off[L]);
    for (int l = (int)L - 1; l >= 0; l--) {
        const void *res_in = l > 0 ? g->blocks[l - 1].res3 : g->encoded;
        if ((rc = block_recompute(m, g, l, res_in, B, err)) || (rc = block_backward(m, g, l, res_in, B, err)))
            return rc;
        if (ready)
            ready(ctx, g->block_off[l], g->block_off[l + 1] - g->block_off[l]);
    }
    rc = op->embedding_backward(d, t, model_grad(m, g->off_embed), NULL, g->dres, tokens, NULL, NULL, B, g->lm.T, C,
                                g->lm.Vp, err);
    if (rc)
        return ddp_prefix(err, "llama backward embedding");
    if (ready)
        ready(ctx, 0, g->block_off[0]);
    return DDP_OK;
}
