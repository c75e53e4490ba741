/* lm_core.c — the plumbing GPT-2 and the Llama share as language models (see lm_core.h): the
 * data checks, building and freeing the model's buffers, the classifier, and the model_ops, which
 * run it between the model's own passes and draw through lm_kind. It reaches the model only
 * through lm_core and lm_kind.
 * This file must not know any model's tensors or activations, communicate, step an optimizer or
 * read data. */
#include "lm_core.h"

#include <stdio.h>
#include <stdlib.h>

/* m->impl begins with its lm_core. */
static lm_core *core(const model *m) { return m->impl; }

static const struct model_ops lm_ops;
static void lm_destroy(model *m);

/* ---- construction ------------------------------------------------------------------------- */

int lm_check_data(const char *name, const sample_layout *data, int64_t block_size, int64_t vocab_size,
                  int64_t max_rows, ddp_err *err)
{
    char got[160];
    sample_layout_format(data, got, sizeof got);
    if (data->input.dtype != SAMPLE_I32 || data->input.count < 1 || !sample_field_equal(data->input, data->target))
        return ddp_fail(err, DDP_EUSAGE, "%s takes token sequences (i32 x T -> i32 x T), the data has %s", name, got);
    if (data->input.count > block_size)
        return ddp_fail(err, DDP_EUSAGE, "data.seq_len %lld is over model.%s.block_size %lld",
                        (long long)data->input.count, name, (long long)block_size);
    if (data->n_classes > vocab_size)
        return ddp_fail(err, DDP_EUSAGE, "the data's vocabulary of %lld tokens is larger than model.%s.vocab_size "
                        "%lld", (long long)data->n_classes, name, (long long)vocab_size);
    if (max_rows < 1)
        return ddp_fail(err, DDP_EUSAGE, "%s: batch of %lld sequences", name, (long long)max_rows);
    return DDP_OK;
}

int lm_activations_too_large(const char *name, int64_t n_layer, const char *widths, int64_t T, int64_t B,
                             ddp_err *err)
{
    return ddp_fail(err, DDP_EUSAGE, "%s: activation memory overflows 64 bits: model.%s.n_layer=%lld x (%s) x "
                    "data.seq_len=%lld x %lld sequences per rank (data.batch_size); reduce these", name, name,
                    (long long)n_layer, widths, (long long)T, (long long)B);
}

int lm_new(const lm_kind *kind, size_t impl_bytes, tensor_dtype compute, device *dev, const sample_layout *data,
           int64_t vocab_size, int64_t max_rows, model_buffers buffers, model **out, ddp_err *err)
{
    model *m = calloc(1, sizeof *m);
    lm_core *lm = calloc(1, impl_bytes);
    if (!m || !lm) {
        free(m);
        free(lm);
        return ddp_fail(err, DDP_ERUNTIME, "%s: out of host memory", kind->name);
    }
    m->ops = &lm_ops;
    m->dev = dev;
    m->impl = lm;
    m->max_rows = max_rows;
    m->param_tail = buffers.param_tail;
    m->grads_by_unit = buffers.grads_by_unit;
    m->params_by_unit = buffers.params_by_unit;
    lm->kind = kind;
    lm->m = m;
    lm->t = compute;
    m->act_dtype = compute;
    lm->T = data->input.count;
    m->io = (model_io){.sample = *data, .language_model = true};
    m->io.sample.n_classes = vocab_size;
    *out = m;
    return DDP_OK;
}

int lm_alloc_params(model *m, ddp_err *err)
{
    lm_core *lm = core(m);
    int rc = model_alloc_params(m, err);
    if (!rc && lm->t == TENSOR_BF16 && !m->params_by_unit) /* ZeRO-3 casts each rank's shard instead */
        rc = m->dev->ops->alloc(m->dev, m->n_params * sizeof(uint16_t), &lm->wp_bf16, err);
    lm->wp = lm->t == TENSOR_BF16 ? lm->wp_bf16 : m->params;
    return rc;
}

int lm_alloc(model *m, void **p, size_t bytes, ddp_err *err)
{
    lm_core *lm = core(m);
    const int max = (int)(sizeof lm->allocs / sizeof lm->allocs[0]);
    if (lm->n_allocs == max) /* a layout change outgrew allocs[] */
        return ddp_fail(err, DDP_ERUNTIME, "%s: more than %d activation buffers", lm->kind->name, max);
    int rc = m->dev->ops->alloc(m->dev, bytes, p, err);
    if (rc)
        return ddp_prefix(err, "%s: activations (%zu bytes)", lm->kind->name, bytes);
    lm->allocs[lm->n_allocs++] = *p;
    lm->act_bytes += bytes;
    return DDP_OK;
}

/* The create failed: frees m and prefixes err with what it was building; returns err's code. */
static int build_failed(model *m, ddp_err *err)
{
    const char *name = core(m)->kind->name;
    char what[MODEL_DESCRIPTION_MAX];
    snprintf(what, sizeof what, "%s", m->description);
    long long rows = (long long)m->max_rows;
    lm_destroy(m);
    return ddp_prefix(err, "%s: building %s for %lld sequences", name, what, rows);
}

int lm_build_end(model *m, int rc, size_t planned_act_bytes, model **out, ddp_err *err)
{
    const lm_core *lm = core(m);
    if (!rc && lm->act_bytes != planned_act_bytes) /* the layout changed on one side only */
        rc = ddp_fail(err, DDP_ERUNTIME, "activations of %zu bytes where the plan counts %zu", lm->act_bytes,
                      planned_act_bytes);
    m->activation_bytes = lm->act_bytes;
    if (rc)
        return build_failed(m, err);
    *out = m;
    return DDP_OK;
}

/* ---- model_ops ---------------------------------------------------------------------------- */

/* Also hands the batch's packing to the passes (lm_core.docs). */
static int check_batch(model *m, const model_batch *b, ddp_err *err)
{
    if (b->rows < 1 || b->rows > m->max_rows)
        return ddp_fail(err, DDP_ERUNTIME, "%s: batch of %lld sequences, model was built for 1..%lld",
                        core(m)->kind->name, (long long)b->rows, (long long)m->max_rows);
    core(m)->docs = b->docs;
    return DDP_OK;
}

/* Whether the classifier takes every row of a micro-batch at once, leaving all their logits. */
static bool whole_logits(const model *m) { return core(m)->logit_rows >= m->max_rows * core(m)->T; }

/* The logits of rows [r0, r0 + n) of head_x into lm->logits: head_x's rows · headᵀ. */
static int head_logits(model *m, int64_t r0, int64_t n, ddp_err *err)
{
    lm_core *lm = core(m);
    const void *x = (const char *)lm->head_x + (size_t)r0 * (size_t)lm->C * tensor_dtype_size(lm->t);
    return m->dev->ops->gemm(m->dev, lm->t, lm->t, false, true, n, lm->Vp, lm->C, 1.0f, x, lm->C,
                             lm_weight(lm, lm->head_off), lm->C, 0.0f, lm->logits, lm->Vp, err);
}

/* The head over rows [r0, r0 + n) of head_x: their logits into lm->logits, the softmax
 * cross-entropy over the first vocab_size (io.sample.n_classes) columns, and with want_grad the
 * dlogits over the logits, the head's gradient (+= dlogitsᵀ · x) and head_dx's rows (dlogits ·
 * head). The padding columns' logits are computed and ignored; their gradient is 0. */
static int classifier_chunk(model *m, const int32_t *targets, int64_t r0, int64_t n, float grad_scale,
                            bool want_grad, float *stats, ddp_err *err)
{
    lm_core *lm = core(m);
    const struct device_ops *op = m->dev->ops;
    device *d = m->dev;
    const tensor_dtype t = lm->t;
    const int64_t C = lm->C, Vp = lm->Vp;
    const size_t row = (size_t)C * tensor_dtype_size(t);
    const void *x = (const char *)lm->head_x + (size_t)r0 * row, *w = lm_weight(lm, lm->head_off);
    int rc = head_logits(m, r0, n, err);
    if (!rc)
        rc = op->softmax_xent(d, t, lm->logits, Vp, targets + r0, n, m->io.sample.n_classes, grad_scale,
                              want_grad ? lm->logits : NULL, stats, err);
    if (!rc && want_grad)
        rc = op->gemm(d, t, TENSOR_F32, true, false, Vp, C, n, 1.0f, lm->logits, Vp, x, C, 1.0f,
                      model_grad(m, lm->head_off), C, err);
    if (!rc && want_grad)
        rc = op->gemm(d, t, t, false, false, n, C, Vp, 1.0f, lm->logits, Vp, w, C, 0.0f,
                      (char *)lm->head_dx + (size_t)r0 * row, C, err);
    return rc;
}

/* The classifier over B sequences' rows, lm->logit_rows at a time: only a chunk's logits exist
 * at once, so a large vocabulary never holds a micro-batch's. The chunks' loss sums add into
 * stats in row order, and the head's gradient gets each chunk's product in turn: the same sums
 * in every run, whatever the rank count. */
static int classifier(model *m, const int32_t *targets, int64_t B, float grad_scale, bool want_grad, float *stats,
                      ddp_err *err)
{
    lm_core *lm = core(m);
    const int64_t BT = B * lm->T;
    int rc = DDP_OK;
    for (int64_t r0 = 0; !rc && r0 < BT; r0 += lm->logit_rows)
        rc = classifier_chunk(m, targets, r0, BT - r0 < lm->logit_rows ? BT - r0 : lm->logit_rows, grad_scale,
                              want_grad, stats, err);
    return rc ? ddp_prefix(err, "%s classifier", lm->kind->name) : DDP_OK;
}

static int lm_forward_backward(model *m, const model_batch *b, float grad_scale, bool accumulate, grad_ready_fn ready,
                        void *ctx, float *stats, ddp_err *err)
{
    const lm_kind *kind = core(m)->kind;
    int rc = check_batch(m, b, err);
    /* Every gradient the backward pass makes is accumulated (GEMMs with beta 1, the norms' +=),
     * so a fresh pass starts from zero. */
    if (!rc && !accumulate)
        rc = model_zero_grads(m, err);
    if (!rc)
        rc = kind->forward(m, b->inputs, b->rows, err);
    if (!rc)
        rc = classifier(m, b->targets, b->rows, grad_scale, true, stats, err);
    if (!rc)
        rc = kind->backward(m, b->inputs, b->rows, ready, ctx, err);
    return rc;
}

static int lm_evaluate(model *m, const model_batch *b, float *stats, ddp_err *err)
{
    int rc = check_batch(m, b, err);
    if (!rc)
        rc = core(m)->kind->forward(m, b->inputs, b->rows, err);
    return rc ? rc : classifier(m, b->targets, b->rows, 1.0f, false, stats, err);
}

static void lm_init_tensor(const model *m, const rng_key *key, const param_tensor *t, size_t lo, size_t hi,
                           float *dst)
{
    core(m)->kind->init_tensor(m, key, t, lo, hi, dst);
}

/* The compute copy of bf16: m->params rounded stochastically with the bits of (seed, step,
 * element), so the copy after a resume at step s equals the one the uninterrupted run made at
 * step s. */
static int lm_params_changed(model *m, uint64_t seed, uint64_t step, ddp_err *err)
{
    lm_core *lm = core(m);
    if (!lm->wp_bf16)
        return DDP_OK;
    int rc = m->dev->ops->cast_f32_to_bf16_stochastic(m->dev, m->params, lm->wp_bf16, m->n_params, seed, step, 0, err);
    return rc ? ddp_prefix(err, "%s: the bf16 copy of the parameters", lm->kind->name) : DDP_OK;
}

/* NULL when the classifier takes a micro-batch in chunks: no pass leaves all its logits. */
static const void *lm_logits(const model *m, int64_t *ld)
{
    const lm_core *lm = core(m);
    *ld = lm->Vp;
    return whole_logits(m) ? lm->logits : NULL;
}

static int lm_row_logits(model *m, int64_t row, const void **out, ddp_err *err)
{
    lm_core *lm = core(m);
    if (whole_logits(m)) {
        *out = (const char *)lm->logits + (size_t)row * (size_t)lm->Vp * tensor_dtype_size(lm->t);
        return DDP_OK;
    }
    *out = lm->logits;
    int rc = head_logits(m, row, 1, err);
    return rc ? ddp_prefix(err, "%s: the logits of row %lld", lm->kind->name, (long long)row) : DDP_OK;
}

/* Frees the model's buffers, the impl and m itself. */
static void lm_destroy(model *m)
{
    if (!m)
        return;
    lm_core *lm = core(m);
    if (lm) {
        for (int i = 0; i < lm->n_allocs; i++)
            m->dev->ops->free(m->dev, lm->allocs[i]);
        m->dev->ops->free(m->dev, lm->wp_bf16);
        free(lm); /* the whole impl: lm is its first member */
    }
    m->dev->ops->free(m->dev, m->params);
    if (m->grads)
        m->dev->ops->free(m->dev, m->grads);
    model_free_tensors(m);
    free(m);
}

static const struct model_ops lm_ops = {
    .forward_backward = lm_forward_backward,
    .evaluate = lm_evaluate,
    .init_tensor = lm_init_tensor,
    .params_changed = lm_params_changed,
    .logits = lm_logits,
    .row_logits = lm_row_logits,
    .destroy = lm_destroy,
};
