/* gpt2_pass.c — GPT-2's forward and backward passes as device ops (see gpt2.c for the model and
 * gpt2_internal.h for its state).
 *
 * Every activation is of the model's compute type g->lm.t and every op is told so; the weights
 * come from g->lm.wp (the bf16 copy under precision bf16). Gradients are float: the weight-gradient
 * GEMMs multiply compute-type operands and add into the fp32 gradients (beta 1), so gradient
 * accumulation across micro-batches and layers happens in fp32 in both precisions. Backward
 * reports each block's range through grad_ready as soon as it is final, so the reducer
 * all-reduces block L while block L-1 is still computing. Attention is one flash-attention op each
 * way, reading q, k and v in place from the QKV projection's output. In packed rows (lm_core.docs)
 * the attention and the position table go per document: a position is its offset in its document.
 * This file must not allocate, communicate, step an optimizer or read data. */
#include "gpt2_internal.h"

#include <math.h>

/* ---- forward ------------------------------------------------------------------------------ */

/* y[BT, out] = x[BT, in] · Wᵀ + b  (W is [out, in], PyTorch's Linear); w_off, b_off: parameter
 * offsets of W and b. With gelu_pre non-NULL, gelu_pre gets x · Wᵀ + b and y its GELU (the MLP's
 * c_fc): one op either way, whose epilogue adds the bias (and applies the GELU) as the GEMM
 * writes its output. */
static int linear_forward(model *m, const gpt2_impl *g, const void *x, size_t w_off, size_t b_off, void *gelu_pre,
                          void *y, int64_t rows, int64_t in, int64_t out, ddp_err *err)
{
    const struct device_ops *op = m->dev->ops;
    const void *w = gpt2_weight(g, w_off), *b = gpt2_weight(g, b_off);
    if (gelu_pre)
        return op->gemm_bias_gelu(m->dev, g->lm.t, false, true, rows, out, in, x, in, w, in, b, gelu_pre, y, err);
    return op->gemm_bias(m->dev, g->lm.t, false, true, rows, out, in, x, in, w, in, b, y, err);
}

/* The attention op's view of GPT-2's tensors: q, k and v read in place from the QKV projection's
 * [BT, 3C] output (row stride 3C), one key/value head per query head, the output [BT, C]; in
 * packed rows, per document. */
static attn_shape attention_shape(const gpt2_impl *g, int64_t B)
{
    const int64_t C = g->s.n_embd, NH = g->s.n_head, hs = C / NH;
    return (attn_shape){.B = B, .T = g->lm.T, .NH = NH, .NKV = NH, .hs = hs, .ld_q = 3 * C, .ld_kv = 3 * C, .ld_o = C,
                        .scale = (float)(1.0 / sqrt((double)hs)), .doc_start = g->lm.docs,
                        .doc_end = lm_doc_end(&g->lm, B)};
}

/* Element offset `elems` into a tensor of the model's compute type. */
static void *at(const gpt2_impl *g, const void *base, int64_t elems)
{
    return (char *)base + (size_t)elems * tensor_dtype_size(g->lm.t);
}

static int attention_forward(model *m, gpt2_impl *g, gpt2_block_acts *a, int64_t B, ddp_err *err)
{
    const attn_shape s = attention_shape(g, B);
    const int64_t C = g->s.n_embd;
    return m->dev->ops->attention_forward(m->dev, g->lm.t, &s, a->atty, a->lse, a->qkv, at(g, a->qkv, C),
                                          at(g, a->qkv, 2 * C), err);
}

static void block_params(const model *m, int l, size_t *p)
{
    for (int i = 0; i < BLOCK_TENSORS; i++)
        p[i] = gpt2_block_offset(m, l, i);
}

/* Block l from its ln1 to its MLP's GELU: qkv, attention, the attention's projection into res2,
 * res2 += res_in fused with ln2, and c_fc with its GELU. */
static int block_middle(model *m, gpt2_impl *g, gpt2_block_acts *a, const size_t *p, const void *res_in, int64_t B,
                        ddp_err *err)
{
    const int64_t C = g->s.n_embd, BT = B * g->lm.T;
    int rc = linear_forward(m, g, a->ln1, p[QKV_W], p[QKV_B], NULL, a->qkv, BT, C, 3 * C, err);
    if (!rc)
        rc = attention_forward(m, g, a, B, err);
    if (!rc)
        rc = linear_forward(m, g, a->atty, p[ATTPROJ_W], p[ATTPROJ_B], NULL, a->res2, BT, C, C, err);
    if (!rc)
        rc = m->dev->ops->residual_layernorm_forward(m->dev, g->lm.t, a->res2, a->ln2, a->ln2_mean, a->ln2_rstd,
                                                     a->res2, res_in, gpt2_weight(g, p[LN2_W]),
                                                     gpt2_weight(g, p[LN2_B]), BT, C, err);
    return rc ? rc : linear_forward(m, g, a->ln2, p[FC_W], p[FC_B], a->fch, a->fch_gelu, BT, C, 4 * C, err);
}

/* Block l's forward. Its input, the residual stream, is block l-1's res3 after the residual add
 * res3 += res2, which runs here fused with ln1 (residual_layernorm_forward); block 0 reads the
 * embeddings as they are. The block's own two residual adds are fused likewise: res2 += res_in
 * into ln2 here, res3 += res2 into the next block's ln1, or ln_f's (gpt2_forward). */
static int block_forward(model *m, gpt2_impl *g, int l, int64_t B, ddp_err *err)
{
    const struct device_ops *op = m->dev->ops;
    device *d = m->dev;
    const tensor_dtype t = g->lm.t;
    gpt2_block_acts *a = &g->blocks[l], *prev = l > 0 ? &g->blocks[l - 1] : NULL;
    int64_t C = g->s.n_embd, BT = B * g->lm.T;
    size_t p[BLOCK_TENSORS];
    block_params(m, l, p);
    const void *ln1_w = gpt2_weight(g, p[LN1_W]), *ln1_b = gpt2_weight(g, p[LN1_B]);
    const void *res_in = prev ? prev->res3 : g->encoded;
    int rc = prev ? op->residual_layernorm_forward(d, t, prev->res3, a->ln1, a->ln1_mean, a->ln1_rstd, prev->res3,
                                                   prev->res2, ln1_w, ln1_b, BT, C, err)
                  : op->layernorm_forward(d, t, a->ln1, a->ln1_mean, a->ln1_rstd, res_in, ln1_w, ln1_b, BT, C, err);
    if (!rc)
        rc = block_middle(m, g, a, p, res_in, B, err);
    /* res3 holds the MLP's output until the next LayerNorm adds res2 to it */
    if (!rc)
        rc = linear_forward(m, g, a->fch_gelu, p[FCPROJ_W], p[FCPROJ_B], NULL, a->res3, BT, 4 * C, C, err);
    return rc ? ddp_prefix(err, "gpt2 forward h.%d", l) : DDP_OK;
}

int gpt2_forward(model *m, const int32_t *tokens, int64_t B, ddp_err *err)
{
    gpt2_impl *g = m->impl;
    const struct device_ops *op = m->dev->ops;
    device *d = m->dev;
    int64_t C = g->s.n_embd, BT = B * g->lm.T, L = g->s.n_layer;
    int rc = op->embedding_forward(d, g->lm.t, g->encoded, tokens, gpt2_weight(g, g->off_wte),
                                   gpt2_weight(g, g->off_wpe), g->lm.docs, B, g->lm.T, C, err);
    if (rc)
        return ddp_prefix(err, "gpt2 forward embedding");
    for (int l = 0; l < L; l++)
        if ((rc = block_forward(m, g, l, B, err)))
            return rc;
    /* ln_f of the last block's output, its residual add res3 += res2 fused in */
    const void *lnf_w = gpt2_weight(g, g->off_lnf_w), *lnf_b = gpt2_weight(g, g->off_lnf_b);
    gpt2_block_acts *last = L > 0 ? &g->blocks[L - 1] : NULL;
    rc = last ? op->residual_layernorm_forward(d, g->lm.t, last->res3, g->lnf, g->lnf_mean, g->lnf_rstd, last->res3,
                                               last->res2, lnf_w, lnf_b, BT, C, err)
              : op->layernorm_forward(d, g->lm.t, g->lnf, g->lnf_mean, g->lnf_rstd, g->encoded, lnf_w, lnf_b, BT, C,
                                      err);
    return rc ? ddp_prefix(err, "gpt2 forward ln_f") : DDP_OK; /* the logits: the classifier's (lm_core.c) */
}

/* ---- backward ----------------------------------------------------------------------------- */

/* dx = dy · W (overwrite; skipped when dx is NULL), dW += dyᵀ · x, db += column sums of dy. W is
 * [out, in] at parameter offset w_off, b at b_off. With gelu_pre non-NULL, x was GELU(gelu_pre)
 * and dx is taken on through the GELU, to gelu_pre, by the same GEMM's epilogue. */
static int linear_backward(model *m, const gpt2_impl *g, const void *dy, const void *x, const void *gelu_pre,
                           size_t w_off, size_t b_off, void *dx, int64_t rows, int64_t in, int64_t out, ddp_err *err)
{
    const struct device_ops *op = m->dev->ops;
    const void *w = gpt2_weight(g, w_off);
    int rc = op->gemm(m->dev, g->lm.t, TENSOR_F32, true, false, out, in, rows, 1.0f, dy, out, x, in, 1.0f,
                      model_grad(m, w_off), in, err);
    if (!rc)
        rc = op->bias_grad(m->dev, g->lm.t, dy, model_grad(m, b_off), rows, out, 1.0f, err);
    if (rc || !dx)
        return rc;
    if (gelu_pre)
        return op->gemm_gelu_backward(m->dev, g->lm.t, false, false, rows, in, out, dy, out, w, in, gelu_pre, dx, err);
    return op->gemm(m->dev, g->lm.t, g->lm.t, false, false, rows, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in, err);
}

/* g->datty holds dLoss/d(atty); on exit g->dqkv holds dLoss/d(qkv): dq, dk and dv side by side. */
static int attention_backward(model *m, gpt2_impl *g, const gpt2_block_acts *a, int64_t B, ddp_err *err)
{
    const attn_shape s = attention_shape(g, B);
    const int64_t C = g->s.n_embd;
    return m->dev->ops->attention_backward(m->dev, g->lm.t, &s, g->dqkv, at(g, g->dqkv, C), at(g, g->dqkv, 2 * C),
                                           g->datty, a->atty, a->lse, a->qkv, at(g, a->qkv, C), at(g, a->qkv, 2 * C),
                                           err);
}

/* g->dres holds dLoss/d(block l output) on entry and dLoss/d(block l input) on exit. The residual
 * adds need no pass of their own: their gradient flows on unchanged, and each LayerNorm backward
 * adds its input's gradient into dres ("+="). */
static int block_backward(model *m, gpt2_impl *g, int l, const void *res_in, int64_t B, ddp_err *err)
{
    const struct device_ops *op = m->dev->ops;
    device *d = m->dev;
    const tensor_dtype t = g->lm.t;
    const gpt2_block_acts *a = &g->blocks[l];
    int64_t C = g->s.n_embd, BT = B * g->lm.T;
    size_t p[BLOCK_TENSORS];
    block_params(m, l, p);
    /* MLP: res3 = res2 + c_proj(gelu(c_fc(ln2(res2)))) */
    int rc = linear_backward(m, g, g->dres, a->fch_gelu, a->fch, p[FCPROJ_W], p[FCPROJ_B], g->dfch, BT, 4 * C, C,
                             err);
    if (!rc)
        rc = linear_backward(m, g, g->dfch, a->ln2, NULL, p[FC_W], p[FC_B], g->dln, BT, C, 4 * C, err);
    if (!rc)
        rc = op->layernorm_backward(d, t, g->dres, model_grad(m, p[LN2_W]), model_grad(m, p[LN2_B]), g->dln, a->res2,
                                    gpt2_weight(g, p[LN2_W]), a->ln2_mean, a->ln2_rstd, BT, C, err);
    /* attention: res2 = res_in + c_proj(attn(ln1(res_in))) */
    if (!rc)
        rc = linear_backward(m, g, g->dres, a->atty, NULL, p[ATTPROJ_W], p[ATTPROJ_B], g->datty, BT, C, C, err);
    if (!rc)
        rc = attention_backward(m, g, a, B, err);
    if (!rc)
        rc = linear_backward(m, g, g->dqkv, a->ln1, NULL, p[QKV_W], p[QKV_B], g->dln, BT, C, 3 * C, err);
    if (!rc)
        rc = op->layernorm_backward(d, t, g->dres, model_grad(m, p[LN1_W]), model_grad(m, p[LN1_B]), g->dln, res_in,
                                    gpt2_weight(g, p[LN1_W]), a->ln1_mean, a->ln1_rstd, BT, C, err);
    return rc ? ddp_prefix(err, "gpt2 backward h.%d", l) : DDP_OK;
}

/* Before block l's backward under recompute: what the forward did not keep, rebuilt from the
 * block's input res_in (kept) by the same ops on the same values, so the bits are the forward's
 * (residual_layernorm_forward normalises the sum it stores: layernorm_forward of that sum is the
 * same). Selective rebuilds the two LayerNorms from res_in and the kept res2; full replays the
 * block but c_proj, whose output backward does not read. The last block's are still in place. */
static int block_recompute(model *m, gpt2_impl *g, int l, const void *res_in, int64_t B, ddp_err *err)
{
    if (g->recompute == RECOMPUTE_NONE || l == g->s.n_layer - 1)
        return DDP_OK;
    const struct device_ops *op = m->dev->ops;
    device *d = m->dev;
    const tensor_dtype t = g->lm.t;
    gpt2_block_acts *a = &g->blocks[l];
    int64_t C = g->s.n_embd, BT = B * g->lm.T;
    size_t p[BLOCK_TENSORS];
    block_params(m, l, p);
    int rc = op->layernorm_forward(d, t, a->ln1, a->ln1_mean, a->ln1_rstd, res_in, gpt2_weight(g, p[LN1_W]),
                                   gpt2_weight(g, p[LN1_B]), BT, C, err);
    if (!rc)
        rc = g->recompute == RECOMPUTE_FULL
                 ? block_middle(m, g, a, p, res_in, B, err)
                 : op->layernorm_forward(d, t, a->ln2, a->ln2_mean, a->ln2_rstd, a->res2, gpt2_weight(g, p[LN2_W]),
                                         gpt2_weight(g, p[LN2_B]), BT, C, err);
    return rc ? ddp_prefix(err, "gpt2 recompute h.%d", l) : DDP_OK;
}

int gpt2_backward(model *m, const int32_t *tokens, int64_t B, grad_ready_fn ready, void *ctx, ddp_err *err)
{
    gpt2_impl *g = m->impl;
    const struct device_ops *op = m->dev->ops;
    device *d = m->dev;
    const tensor_dtype t = g->lm.t;
    int64_t C = g->s.n_embd, BT = B * g->lm.T, L = g->s.n_layer;
    const void *res_out = L > 0 ? g->blocks[L - 1].res3 : g->encoded;
    /* the classifier added wte's gradient and left dlnf in g->dln (lm_core.head_dx) */
    int rc = op->fill(d, t, g->dres, (size_t)(BT * C), 0.0f, err);
    if (!rc)
        rc = op->layernorm_backward(d, t, g->dres, model_grad(m, g->off_lnf_w), model_grad(m, g->off_lnf_b), g->dln, res_out,
                                    gpt2_weight(g, g->off_lnf_w), g->lnf_mean, g->lnf_rstd, BT, C, err);
    if (rc)
        return ddp_prefix(err, "gpt2 backward ln_f");
    if (ready)
        ready(ctx, g->block_off[L], m->n_params - g->block_off[L]);
    for (int l = (int)L - 1; l >= 0; l--) {
        const void *res_in = l > 0 ? g->blocks[l - 1].res3 : g->encoded;
        if ((rc = block_recompute(m, g, l, res_in, B, err)) || (rc = block_backward(m, g, l, res_in, B, err)))
            return rc;
        if (ready)
            ready(ctx, g->block_off[l], g->block_off[l + 1] - g->block_off[l]);
    }
    rc = op->embedding_backward(d, t, model_grad(m, g->off_wte), model_grad(m, g->off_wpe), g->dres, tokens,
                                g->lm.docs, lm_doc_end(&g->lm, B), B, g->lm.T, C, g->lm.Vp, err);
    if (rc)
        return ddp_prefix(err, "gpt2 backward embedding");
    if (ready)
        ready(ctx, 0, g->block_off[0]);
    return DDP_OK;
}
