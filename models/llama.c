/* llama.c — the Llama transformer as Hugging Face's LlamaForCausalLM computes it: a token
 * embedding (no position embedding), n_layer pre-RMSNorm blocks (grouped-query causal
 * self-attention with rotary position embeddings on q and k, a SwiGLU MLP), a final RMSNorm and
 * lm_head (or the embedding, tied), no biases, trained with softmax cross-entropy on the next
 * token. This file lays out parameters and activations, builds the model and offers model_ops;
 * the passes are in llama_pass.c.
 *
 * Parameters sit in one flat fp32 buffer under Hugging Face's names, in this order:
 * model.embed_tokens, each layer's input_layernorm, q/k/v_proj (adjacent, so one GEMM gives qkv),
 * o_proj, post_attention_layernorm, gate/up_proj (adjacent: one GEMM), down_proj, then model.norm
 * and lm_head (absent when tied). The embedding and lm_head have vocab_padded rows; the padding
 * rows stay zero, since no token selects them and the classifier gives their logits zero
 * gradient. The bf16 compute copy, the RNG stream and everything that runs on the device are as
 * GPT-2's (gpt2.c). This file must not communicate, step an optimizer or read data. */
#include "llama_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2.h"
#include "runtime/base/exact_double.h"
#include "runtime/base/rng.h"

static const char *const block_tensor_names[BLOCK_TENSORS] = {
    "input_layernorm.weight", "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
    "self_attn.o_proj.weight", "post_attention_layernorm.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight",
    "mlp.down_proj.weight"};

int64_t llama_vocab_padded(int64_t vocab_size) { return gpt2_vocab_padded(vocab_size); }

/* ---- parameters --------------------------------------------------------------------------- */

static int lay_out_params(model *m, llama_impl *g, ddp_err *err)
{
    const llama_shape *s = &g->s;
    const int64_t C = s->n_embd, hd = C / s->n_head, F = s->ffn_hidden;
    const int64_t q = s->n_head * hd, kv = s->n_kv_head * hd;
    size_t off = 0;
    g->off_embed = off;
    int rc = model_add_tensor(m, "model.embed_tokens.weight", g->Vp, C, true, &off, err);
    for (int l = 0; !rc && l < s->n_layer; l++) {
        g->block_off[l] = off;
        const int64_t rows[BLOCK_TENSORS] = {C, q, kv, kv, C, C, F, F, C};
        const int64_t cols[BLOCK_TENSORS] = {0, C, C, C, q, 0, C, C, F};
        for (int i = 0; !rc && i < BLOCK_TENSORS; i++) {
            char name[MODEL_TENSOR_NAME_MAX];
            snprintf(name, sizeof name, "model.layers.%d.%s", l, block_tensor_names[i]);
            rc = model_add_tensor(m, name, rows[i], cols[i], cols[i] != 0, &off, err);
        }
    }
    g->block_off[s->n_layer] = off;
    g->off_norm = off;
    if (!rc)
        rc = model_add_tensor(m, "model.norm.weight", C, 0, false, &off, err);
    g->off_head = s->tie_embeddings ? g->off_embed : off;
    if (!rc && !s->tie_embeddings)
        rc = model_add_tensor(m, "lm_head.weight", g->Vp, C, true, &off, err);
    m->n_params = off;
    return rc;
}

/* Per token: every weight in a GEMM once — all but the input embedding, which is a lookup (a tied
 * embedding is the lm_head's GEMM, counted once), the RMSNorm weights included as GPT-2's LayerNorm
 * ones are — and attention's scores and mix over the T positions (NH·hd = C). */
static double train_flops_per_sample(const model *m, const llama_impl *g)
{
    double C = (double)g->s.n_embd, T = (double)g->T;
    double gemm_weights = (double)m->n_params - (g->s.tie_embeddings ? 0.0 : (double)g->Vp * C);
    return T * (6.0 * gemm_weights + 12.0 * (double)g->s.n_layer * C * T);
}

static int check_layers(const llama_shape *s, ddp_err *err)
{
    if (s->n_layer < 1 || s->n_layer > LLAMA_MAX_LAYERS)
        return ddp_fail(err, DDP_EUSAGE, "model.llama.n_layer: expected 1..%d, got %lld", LLAMA_MAX_LAYERS,
                        (long long)s->n_layer);
    return DDP_OK;
}

int llama_tensor_table(const llama_shape *shape, model *m, ddp_err *err)
{
    int rc = check_layers(shape, err);
    if (rc)
        return rc;
    llama_impl *g = calloc(1, sizeof *g);
    if (!g)
        return ddp_fail(err, DDP_ERUNTIME, "out of host memory");
    g->s = *shape;
    g->Vp = llama_vocab_padded(shape->vocab_size);
    rc = lay_out_params(m, g, err);
    free(g);
    if (rc)
        model_free_tensors(m);
    return rc;
}

void llama_rope_tables(int64_t positions, int64_t head_size, double rope_theta, float *cos_out, float *sin_out)
{
    const int64_t half = head_size / 2;
    for (int64_t j = 0; j < half; j++) {
        double f = pow(rope_theta, -2.0 * (double)j / (double)head_size);
        for (int64_t t = 0; t < positions; t++) {
            cos_out[t * half + j] = (float)cos((double)t * f);
            sin_out[t * half + j] = (float)sin((double)t * f);
        }
    }
}

/* ---- activations -------------------------------------------------------------------------- */

static int act_alloc(model *m, llama_impl *g, void **p, size_t bytes, ddp_err *err)
{
    if (g->n_allocs == (int)(sizeof g->allocs / sizeof g->allocs[0])) /* a layout change outgrew allocs[] */
        return ddp_fail(err, DDP_ERUNTIME, "llama: more than %d activation buffers",
                        (int)(sizeof g->allocs / sizeof g->allocs[0]));
    int rc = m->dev->ops->alloc(m->dev, bytes, p, err);
    if (rc)
        return ddp_prefix(err, "llama: activations (%zu bytes)", bytes);
    g->allocs[g->n_allocs++] = *p;
    g->act_bytes += bytes;
    return DDP_OK;
}

/* A buffer of count elements, in bytes rounded up to 64 so every buffer carved after it stays
 * 64-byte aligned. */
static size_t aligned_bytes(int64_t count, size_t elem) { return ((size_t)count * elem + 63) / 64 * 64; }

/* Every block's saved activations in one slab, so the number of allocations does not grow with
 * depth: the activations of type g->t, then the RMSNorm statistics and attention's log-sum-exp
 * (float). */
static int alloc_blocks(model *m, llama_impl *g, int64_t B, ddp_err *err)
{
    const int64_t T = g->T, C = g->s.n_embd, NH = g->s.n_head, F = g->s.ffn_hidden, BT = B * T;
    const size_t act = tensor_dtype_size(g->t);
    const int64_t act_sizes[] = {BT * C, BT * g->QKV, BT * NH * g->hd, BT * C, BT * C, BT * 2 * F, BT * F, BT * C};
    enum { N_ACTS = sizeof act_sizes / sizeof act_sizes[0], N_STATS = 2 };
    size_t per_block = N_STATS * aligned_bytes(BT, sizeof(float)) + aligned_bytes(B * NH * T, sizeof(float));
    for (int i = 0; i < N_ACTS; i++)
        per_block += aligned_bytes(act_sizes[i], act);
    void *base;
    int rc = act_alloc(m, g, &base, per_block * (size_t)g->s.n_layer, err);
    char *slab = base;
    for (int l = 0; !rc && l < g->s.n_layer; l++) {
        llama_block_acts *a = &g->blocks[l];
        void **const acts[N_ACTS] = {&a->ln1, &a->qkv, &a->atty, &a->res2, &a->ln2, &a->gate_up, &a->h, &a->res3};
        float **const stats[N_STATS] = {&a->rstd1, &a->rstd2};
        for (int i = 0; i < N_ACTS; i++) {
            *acts[i] = slab;
            slab += aligned_bytes(act_sizes[i], act);
        }
        for (int i = 0; i < N_STATS; i++) {
            *stats[i] = (float *)(void *)slab;
            slab += aligned_bytes(BT, sizeof(float));
        }
        a->lse = (float *)(void *)slab;
        slab += aligned_bytes(B * NH * T, sizeof(float));
    }
    return rc;
}

/* The RoPE tables, uploaded once. */
static int alloc_tables(model *m, llama_impl *g, ddp_err *err)
{
    const struct device_ops *op = m->dev->ops;
    const int64_t n = g->s.block_size * (g->hd / 2);
    float *host = malloc(2 * (size_t)n * sizeof *host);
    if (!host)
        return ddp_fail(err, DDP_ERUNTIME, "llama: out of host memory for the RoPE tables");
    llama_rope_tables(g->s.block_size, g->hd, g->s.rope_theta, host, host + n);
    void *cos_p = NULL, *sin_p = NULL;
    int rc = act_alloc(m, g, &cos_p, (size_t)n * sizeof(float), err);
    if (!rc)
        rc = act_alloc(m, g, &sin_p, (size_t)n * sizeof(float), err);
    if (!rc)
        rc = op->upload(m->dev, cos_p, host, (size_t)n * sizeof(float), err);
    if (!rc)
        rc = op->upload(m->dev, sin_p, host + n, (size_t)n * sizeof(float), err);
    free(host);
    g->rope_cos = cos_p;
    g->rope_sin = sin_p;
    return rc;
}

static int alloc_acts(model *m, llama_impl *g, int64_t B, ddp_err *err)
{
    const int64_t T = g->T, C = g->s.n_embd, BT = B * T, F = g->s.ffn_hidden;
    const size_t act = tensor_dtype_size(g->t);
    struct { void **p; int64_t n; } bufs[] = {
        {&g->encoded, BT * C}, {&g->lnf, BT * C},  {&g->logits, BT * g->Vp},       {&g->dres, BT * C},
        {&g->dln, BT * C},     {&g->datty, BT * g->s.n_head * g->hd}, {&g->dqkv, BT * g->QKV},
        {&g->dgate_up, BT * 2 * F}, {&g->dh, BT * F},
    };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        int rc = act_alloc(m, g, bufs[i].p, (size_t)bufs[i].n * act, err);
        if (rc)
            return rc;
    }
    void *p;
    int rc = act_alloc(m, g, &p, (size_t)BT * sizeof(float), err);
    if (rc)
        return rc;
    g->rstdf = p;
    if ((rc = alloc_tables(m, g, err)))
        return rc;
    g->blocks = calloc((size_t)g->s.n_layer, sizeof *g->blocks);
    if (!g->blocks)
        return ddp_fail(err, DDP_ERUNTIME, "llama: out of host memory");
    return alloc_blocks(m, g, B, err);
}

size_t llama_activation_bytes(const llama_shape *s, tensor_dtype compute, int64_t T, int64_t B)
{
    const int64_t C = s->n_embd, NH = s->n_head, hd = C / NH, F = s->ffn_hidden, BT = B * T;
    const int64_t QKV = (NH + 2 * s->n_kv_head) * hd, Vp = llama_vocab_padded(s->vocab_size);
    const size_t act = tensor_dtype_size(compute);
    /* alloc_acts' shared buffers and final RMSNorm statistics */
    size_t bytes = (size_t)(BT * C * 4 + BT * Vp + BT * NH * hd + BT * QKV + BT * 2 * F + BT * F) * act +
                   (size_t)BT * sizeof(float);
    /* alloc_tables: cos and sin */
    bytes += 2 * (size_t)(s->block_size * (hd / 2)) * sizeof(float);
    /* alloc_blocks' slab */
    const int64_t block_acts[] = {BT * C, BT * QKV, BT * NH * hd, BT * C, BT * C, BT * 2 * F, BT * F, BT * C};
    size_t per_block = 2 * aligned_bytes(BT, sizeof(float)) + aligned_bytes(B * NH * T, sizeof(float));
    for (size_t i = 0; i < sizeof block_acts / sizeof block_acts[0]; i++)
        per_block += aligned_bytes(block_acts[i], act);
    return bytes + per_block * (size_t)s->n_layer;
}

/* ---- model_ops ---------------------------------------------------------------------------- */

static int check_batch(const model *m, const model_batch *b, ddp_err *err)
{
    if (b->rows < 1 || b->rows > m->max_rows)
        return ddp_fail(err, DDP_ERUNTIME, "llama: batch of %lld sequences, model was built for 1..%lld",
                        (long long)b->rows, (long long)m->max_rows);
    return DDP_OK;
}

static int classifier(model *m, const int32_t *targets, int64_t B, float grad_scale, bool want_grad, float *stats,
                      ddp_err *err)
{
    llama_impl *g = m->impl;
    int rc = m->dev->ops->softmax_xent(m->dev, g->t, g->logits, g->Vp, targets, B * g->T, g->s.vocab_size,
                                       grad_scale, want_grad ? g->logits : NULL, stats, err);
    return rc ? ddp_prefix(err, "llama classifier") : DDP_OK;
}

static int llama_forward_backward(model *m, const model_batch *b, float grad_scale, bool accumulate,
                                  grad_ready_fn ready, void *ctx, float *stats, ddp_err *err)
{
    int rc = check_batch(m, b, err);
    /* every gradient below is accumulated (GEMMs with beta 1, RMSNorm's +=), so a fresh pass
     * starts from zero */
    if (!rc && !accumulate)
        rc = m->dev->ops->fill(m->dev, TENSOR_F32, m->grads, m->n_params, 0.0f, err);
    if (!rc)
        rc = llama_forward(m, b->inputs, b->rows, err);
    if (!rc)
        rc = classifier(m, b->targets, b->rows, grad_scale, true, stats, err);
    if (!rc)
        rc = llama_backward(m, b->inputs, b->rows, ready, ctx, err);
    return rc;
}

static int llama_evaluate(model *m, const model_batch *b, float *stats, ddp_err *err)
{
    int rc = check_batch(m, b, err);
    if (!rc)
        rc = llama_forward(m, b->inputs, b->rows, err);
    return rc ? rc : classifier(m, b->targets, b->rows, 1.0f, false, stats, err);
}

static void llama_destroy(model *m)
{
    if (!m)
        return;
    llama_impl *g = m->impl;
    if (g) {
        for (int i = 0; i < g->n_allocs; i++)
            m->dev->ops->free(m->dev, g->allocs[i]);
        m->dev->ops->free(m->dev, g->wp_bf16);
        free(g->blocks);
        free(g);
    }
    m->dev->ops->free(m->dev, m->params);
    m->dev->ops->free(m->dev, m->grads);
    model_free_tensors(m);
    free(m);
}

/* Every 2-D weight N(0, 0.02) (no depth scaling), RMSNorm weights 1, the vocabulary's padding
 * rows 0, drawn in buffer order from the RNG_INIT stream. */
static int llama_init_params(model *m, uint64_t seed, ddp_err *err)
{
    llama_impl *g = m->impl;
    float *host = calloc(m->n_params, sizeof *host);
    if (!host)
        return ddp_fail(err, DDP_ERUNTIME, "llama init: out of host memory for %zu parameters", m->n_params);
    rng r;
    rng_seed(&r, seed, RNG_INIT);
    for (int i = 0; i < m->n_tensors; i++) {
        const param_tensor *t = &m->tensors[i];
        size_t n = t->numel;
        if (t->shape[0] == g->Vp && (t->offset == g->off_embed || t->offset == g->off_head))
            n = (size_t)g->s.vocab_size * (size_t)g->s.n_embd;
        for (size_t j = 0; j < n; j++)
            host[t->offset + j] = t->ndim == 2 ? (float)(rng_normal(&r) * 0.02) : 1.0f;
    }
    int rc = m->dev->ops->upload(m->dev, m->params, host, m->n_params * sizeof *host, err);
    free(host);
    return rc ? ddp_prefix(err, "llama init: uploading parameters") : DDP_OK;
}

/* The bf16 compute copy, rounded stochastically from (seed, step, element) as GPT-2's. */
static int llama_params_changed(model *m, uint64_t seed, uint64_t step, ddp_err *err)
{
    llama_impl *g = m->impl;
    if (!g->wp_bf16)
        return DDP_OK;
    int rc = m->dev->ops->cast_f32_to_bf16_stochastic(m->dev, m->params, g->wp_bf16, m->n_params, seed, step, 0, err);
    return rc ? ddp_prefix(err, "llama: the bf16 copy of the parameters") : DDP_OK;
}

static const void *llama_logits(const model *m, int64_t *ld)
{
    const llama_impl *g = m->impl;
    *ld = g->Vp;
    return g->logits;
}

static const struct model_ops llama_ops = {
    .forward_backward = llama_forward_backward,
    .evaluate = llama_evaluate,
    .init_params = llama_init_params,
    .params_changed = llama_params_changed,
    .logits = llama_logits,
    .destroy = llama_destroy,
};

/* ---- description -------------------------------------------------------------------------- */

void llama_format_shape(const llama_shape *s, char *out, size_t size)
{
    char theta[32], eps[32];
    format_double_exact(s->rope_theta, theta, sizeof theta);
    format_double_exact(s->norm_eps, eps, sizeof eps);
    snprintf(out, size,
             "llama n_layer=%lld n_head=%lld n_kv_head=%lld n_embd=%lld ffn_hidden=%lld block_size=%lld "
             "vocab_size=%lld rope_theta=%s norm_eps=%s tie_embeddings=%d",
             (long long)s->n_layer, (long long)s->n_head, (long long)s->n_kv_head, (long long)s->n_embd,
             (long long)s->ffn_hidden, (long long)s->block_size, (long long)s->vocab_size, theta, eps,
             s->tie_embeddings ? 1 : 0);
}

static void describe(char *out, size_t size, const llama_shape *s, int64_t T)
{
    char shape[MODEL_DESCRIPTION_MAX - 32]; /* the longest shape fits, with room left for seq_len */
    llama_format_shape(s, shape, sizeof shape);
    snprintf(out, size, "%s seq_len=%lld", shape, (long long)T);
}

int llama_parse_description(const char *desc, llama_shape *shape, int64_t *seq_len, ddp_err *err)
{
    long long v[8] = {0};
    double theta = 0, eps = 0;
    int tie = -1, end = -1;
    sscanf(desc,
           "llama n_layer=%lld n_head=%lld n_kv_head=%lld n_embd=%lld ffn_hidden=%lld block_size=%lld "
           "vocab_size=%lld rope_theta=%lf norm_eps=%lf tie_embeddings=%d seq_len=%lld%n",
           &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &theta, &eps, &tie, &v[7], &end);
    llama_shape s = {.n_layer = v[0], .n_head = v[1], .n_kv_head = v[2], .n_embd = v[3], .ffn_hidden = v[4],
                     .block_size = v[5], .vocab_size = v[6], .rope_theta = theta, .norm_eps = eps,
                     .tie_embeddings = tie == 1};
    char again[2 * MODEL_DESCRIPTION_MAX] = "";
    if (end > 0) /* exactly what describe() writes: no sign, no leading zeros, nothing after */
        describe(again, sizeof again, &s, v[7]);
    bool sizes_ok = s.n_layer >= 1 && s.n_head >= 1 && s.n_kv_head >= 1 && s.n_embd >= 1 && s.ffn_hidden >= 1 &&
                    s.block_size >= 1 && s.vocab_size >= 1 && v[7] >= 1;
    bool reals_ok = isfinite(theta) && theta > 0 && isfinite(eps) && eps > 0 && (tie == 0 || tie == 1);
    if (end < 0 || strcmp(again, desc) != 0 || !sizes_ok || !reals_ok)
        return ddp_fail(err, DDP_EUSAGE, "not a Llama model: \"%.200s\"", desc);
    *shape = s;
    *seq_len = v[7];
    return DDP_OK;
}

/* ---- construction ------------------------------------------------------------------------- */

static int check_shape(const llama_shape *s, const sample_layout *data, int64_t max_rows, ddp_err *err)
{
    int rc = check_layers(s, err);
    if (rc)
        return rc;
    if (s->n_head < 1 || s->n_embd < 1 || s->n_embd % s->n_head || (s->n_embd / s->n_head) % 2)
        return ddp_fail(err, DDP_EUSAGE, "model.llama.n_embd %lld over model.llama.n_head %lld is not an even head "
                        "size", (long long)s->n_embd, (long long)s->n_head);
    if (s->n_kv_head < 1 || s->n_head % s->n_kv_head)
        return ddp_fail(err, DDP_EUSAGE, "model.llama.n_head %lld is not divisible by model.llama.n_kv_head %lld",
                        (long long)s->n_head, (long long)s->n_kv_head);
    if (s->ffn_hidden < 1 || !(s->rope_theta > 0) || !(s->norm_eps > 0))
        return ddp_fail(err, DDP_EUSAGE, "model.llama: ffn_hidden %lld, rope_theta %g and norm_eps %g must be "
                        "positive", (long long)s->ffn_hidden, s->rope_theta, s->norm_eps);
    char got[160];
    sample_layout_format(data, got, sizeof got);
    if (data->input.dtype != SAMPLE_I32 || data->input.count < 1 || !sample_field_equal(data->input, data->target))
        return ddp_fail(err, DDP_EUSAGE, "llama takes token sequences (i32 x T -> i32 x T), the data has %s", got);
    if (data->input.count > s->block_size)
        return ddp_fail(err, DDP_EUSAGE, "data.seq_len %lld is over model.llama.block_size %lld",
                        (long long)data->input.count, (long long)s->block_size);
    if (data->n_classes > s->vocab_size)
        return ddp_fail(err, DDP_EUSAGE, "the data's vocabulary of %lld tokens is larger than model.llama.vocab_size "
                        "%lld", (long long)data->n_classes, (long long)s->vocab_size);
    if (max_rows < 1)
        return ddp_fail(err, DDP_EUSAGE, "llama: batch of %lld sequences", (long long)max_rows);
    return DDP_OK;
}

int llama_create(const llama_shape *shape, tensor_dtype compute, device *dev, const sample_layout *data,
                 int64_t max_rows, size_t param_tail, model **out, ddp_err *err)
{
    *out = NULL;
    int rc = check_shape(shape, data, max_rows, err);
    if (rc)
        return rc;
    model *m = calloc(1, sizeof *m);
    llama_impl *g = calloc(1, sizeof *g);
    if (!m || !g) {
        free(m);
        free(g);
        return ddp_fail(err, DDP_ERUNTIME, "llama: out of host memory");
    }
    m->ops = &llama_ops;
    m->dev = dev;
    m->impl = g;
    m->max_rows = max_rows;
    m->param_tail = param_tail;
    g->s = *shape;
    g->t = compute;
    m->act_dtype = compute;
    g->Vp = llama_vocab_padded(shape->vocab_size);
    g->T = data->input.count;
    g->hd = shape->n_embd / shape->n_head;
    g->QKV = (shape->n_head + 2 * shape->n_kv_head) * g->hd;
    m->io = (model_io){.sample = *data, .language_model = true};
    m->io.sample.n_classes = shape->vocab_size;
    describe(m->description, sizeof m->description, shape, g->T);
    rc = lay_out_params(m, g, err);
    m->train_flops_per_sample = train_flops_per_sample(m, g);
    if (!rc)
        rc = model_alloc_params(m, err);
    if (!rc && compute == TENSOR_BF16)
        rc = dev->ops->alloc(dev, m->n_params * sizeof(uint16_t), &g->wp_bf16, err);
    g->wp = compute == TENSOR_BF16 ? g->wp_bf16 : m->params;
    if (!rc)
        rc = alloc_acts(m, g, max_rows, err);
    m->activation_bytes = g->act_bytes;
    if (rc) {
        char what[MODEL_DESCRIPTION_MAX];
        snprintf(what, sizeof what, "%s", m->description);
        llama_destroy(m);
        return ddp_prefix(err, "llama: building %s for %lld sequences", what, (long long)max_rows);
    }
    *out = m;
    return DDP_OK;
}
