/* llama.c — the Llama transformer as Hugging Face's LlamaForCausalLM computes it: a token
 * embedding (no position embedding), n_layer pre-RMSNorm blocks (grouped-query causal
 * self-attention with rotary position embeddings on q and k, a SwiGLU MLP), a final RMSNorm and
 * lm_head (or the embedding, tied), no biases but the q/k/v projections' in a family that has them
 * (llama.h), trained with softmax cross-entropy on the next token. This file lays out parameters and activations, initialises them, describes and builds
 * the model; the passes are in llama_pass.c, and the plumbing every language model shares
 * (model_ops around the passes, the bf16 copy, the buffers) in lm_core.c.
 *
 * Parameters sit in one flat fp32 buffer under Hugging Face's names, in this order:
 * model.embed_tokens, each layer's input_layernorm, q/k/v_proj (adjacent, so one GEMM gives qkv),
 * o_proj, post_attention_layernorm, gate/up_proj (adjacent: one GEMM), down_proj, q/k/v_proj's
 * biases (adjacent, in a family that has them), q_norm and k_norm (in a family that has them),
 * then model.norm and lm_head (absent when tied). The embedding and lm_head have vocab_padded rows; the padding
 * rows stay zero, since no token selects them and the classifier gives their logits zero
 * gradient. The bf16 compute copy is lm_core's, shared with GPT-2; the RNG stream and everything
 * that runs on the device are as GPT-2's (gpt2.c). This file must not communicate, step an optimizer or read data. */
#include "llama_internal.h"
#include "lm_layout.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2.h"
#include "runtime/base/affix.h"
#include "runtime/base/exact_double.h"
#include "runtime/base/rng.h"

static const char *const block_tensor_names[BLOCK_TENSORS_MAX] = {
    "input_layernorm.weight", "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
    "self_attn.o_proj.weight", "post_attention_layernorm.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight",
    "mlp.down_proj.weight", "self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias",
    "self_attn.q_norm.weight", "self_attn.k_norm.weight"};

extern const struct llama_hf_family llama_hf_llama; /* llama_hf_write.c */
const llama_family llama_family_llama = {MODEL_LLAMA, "llama", "Llama", false, false, &llama_hf_llama};

int64_t llama_vocab_padded(int64_t vocab_size) { return gpt2_vocab_padded(vocab_size); }

/* ---- parameters --------------------------------------------------------------------------- */

/* Which of the block tensors the family has, and where each is among them (llama_impl.slot). */
static void family_slots(llama_impl *g)
{
    g->block_tensors = 0;
    for (int i = 0; i < BLOCK_TENSORS_MAX; i++) {
        bool has = i < BLOCK_TENSORS || (i <= V_B ? g->fam->qkv_bias : g->fam->qk_norm);
        g->slot[i] = has ? g->block_tensors++ : -1;
    }
}

static int lay_out_params(model *m, llama_impl *g, ddp_err *err)
{
    const llama_shape *s = &g->s;
    const int64_t C = s->n_embd, hd = llama_head_dim(s), F = s->ffn_hidden;
    const int64_t q = s->n_head * hd, kv = s->n_kv_head * hd;
    size_t off = 0;
    family_slots(g);
    g->off_embed = off;
    int rc = model_begin_unit(m, false, err); /* the embeddings */
    if (!rc)
        rc = model_add_tensor(m, "model.embed_tokens.weight", g->lm.Vp, C, true, &off, err);
    for (int l = 0; !rc && l < s->n_layer; l++) {
        g->block_off[l] = off;
        const int64_t rows[BLOCK_TENSORS_MAX] = {C, q, kv, kv, C, C, F, F, C, q, kv, kv, hd, hd};
        const int64_t cols[BLOCK_TENSORS_MAX] = {0, C, C, C, q, 0, C, C, F, 0, 0, 0, 0, 0};
        rc = model_begin_unit(m, true, err);
        for (int i = 0; !rc && i < BLOCK_TENSORS_MAX; i++) {
            if (g->slot[i] < 0)
                continue;
            char name[MODEL_TENSOR_NAME_MAX];
            snprintf(name, sizeof name, "model.layers.%d.%s", l, block_tensor_names[i]);
            rc = model_add_tensor(m, name, rows[i], cols[i], cols[i] != 0, &off, err);
        }
    }
    g->block_off[s->n_layer] = off;
    g->off_norm = off;
    if (!rc) /* model.norm and lm_head (a tied head is the embeddings unit's) */
        rc = model_begin_unit(m, false, err);
    if (!rc)
        rc = model_add_tensor(m, "model.norm.weight", C, 0, false, &off, err);
    g->off_head = s->tie_embeddings ? g->off_embed : off;
    if (!rc && !s->tie_embeddings)
        rc = model_add_tensor(m, "lm_head.weight", g->lm.Vp, C, true, &off, err);
    m->n_params = off;
    return rc;
}

/* Per token: every weight in a GEMM once — all but the input embedding, which is a lookup (a tied
 * embedding is the lm_head's GEMM, counted once), the RMSNorm weights included as GPT-2's LayerNorm
 * ones are — and attention's scores and mix over the T positions, NH·hd wide. */
static double train_flops_per_sample(const model *m, const llama_impl *g)
{
    double C = (double)g->s.n_embd, T = (double)g->lm.T, heads_width = (double)(g->s.n_head * g->hd);
    double gemm_weights = (double)m->n_params - (g->s.tie_embeddings ? 0.0 : (double)g->lm.Vp * C);
    return T * (6.0 * gemm_weights + 12.0 * (double)g->s.n_layer * heads_width * T);
}

static int check_layers(const llama_family *fam, const llama_shape *s, ddp_err *err)
{
    if (s->n_layer < 1 || s->n_layer > LLAMA_MAX_LAYERS)
        return ddp_fail(err, DDP_EUSAGE, "model.%s.n_layer: expected 1..%d, got %lld", fam->name, LLAMA_MAX_LAYERS,
                        (long long)s->n_layer);
    return DDP_OK;
}

int llama_tensor_table(const llama_family *fam, const llama_shape *shape, model *m, ddp_err *err)
{
    int rc = check_layers(fam, shape, err);
    if (rc)
        return rc;
    llama_impl *g = calloc(1, sizeof *g);
    if (!g)
        return ddp_fail(err, DDP_ERUNTIME, "out of host memory");
    g->fam = fam;
    g->s = *shape;
    g->lm.Vp = llama_vocab_padded(shape->vocab_size);
    rc = lay_out_params(m, g, err);
    free(g);
    if (rc)
        model_free_tensors(m);
    return rc;
}

bool llama_rope_scaled(const llama_shape *s) { return s->rope_scaling.factor > 1; }

/* A stretch llama_rope_frequency can apply: none, or finite numbers with 0 < low_freq_factor <
 * high_freq_factor and at least one original position. */
static bool rope_scaling_valid(const llama_shape *s)
{
    const llama_rope_scaling *r = &s->rope_scaling;
    return !llama_rope_scaled(s) || (isfinite(r->factor) && r->low_freq_factor > 0 && isfinite(r->high_freq_factor) &&
                                     r->high_freq_factor > r->low_freq_factor && r->original_max_positions >= 1);
}

double llama_rope_frequency(const llama_shape *s, int64_t j)
{
    const double head_size = (double)llama_head_dim(s);
    const double f = pow(s->rope_theta, -2.0 * (double)j / head_size);
    if (!llama_rope_scaled(s))
        return f;
    const llama_rope_scaling *r = &s->rope_scaling;
    const double wavelength = 2 * M_PI / f, L = (double)r->original_max_positions;
    if (wavelength < L / r->high_freq_factor)
        return f;
    if (wavelength > L / r->low_freq_factor)
        return f / r->factor;
    const double smooth = (L / wavelength - r->low_freq_factor) / (r->high_freq_factor - r->low_freq_factor);
    return (1 - smooth) * f / r->factor + smooth * f;
}

void llama_rope_tables(const llama_shape *s, int64_t positions, float *cos_out, float *sin_out)
{
    const int64_t half = llama_head_dim(s) / 2;
    for (int64_t j = 0; j < half; j++) {
        const double f = llama_rope_frequency(s, j);
        for (int64_t t = 0; t < positions; t++) {
            cos_out[t * half + j] = (float)cos((double)t * f);
            sin_out[t * half + j] = (float)sin((double)t * f);
        }
    }
}

/* ---- activations -------------------------------------------------------------------------- */

/* The Llama's activations (lm_layout.h) in the order they are allocated: the shared buffers (the
 * embeddings' output, the final RMSNorm, backward's scratch, its statistics; the logits are the
 * classifier's chunk, lm_layout.h), then
 * what each block keeps for its backward (activations, RMSNorm statistics, attention's
 * log-sum-exp: B·NH·T floats, linear in T) — under recompute, the block's output only (full) or
 * its GEMM and attention outputs too (selective), the rest one copy all blocks share; the RoPE
 * tables (cos and sin of T x hd/2: a row's T positions, which a packed row's documents restart
 * within) are fixed bytes, allocated by alloc_tables. A family with q/k norms keeps the q and k
 * planes before their norms and the norms' statistics too, as a GEMM's output is kept. */
static void llama_layout(const llama_family *fam, const llama_shape *s, const lm_run *run, int64_t T, lm_layout *L)
{
    const int64_t C = s->n_embd, NH = s->n_head, hd = llama_head_dim(s), F = s->ffn_hidden;
    const int64_t QKV = (NH + 2 * s->n_kv_head) * hd, QK = (NH + s->n_kv_head) * hd;
    size_check k = {0}; /* within the keys' ranges: 2^20 positions x 2^15 pairs */
    *L = (lm_layout){.n_layer = s->n_layer, .recompute = run->recompute,
                     .vocab_padded = llama_vocab_padded(s->vocab_size), .logits_bytes = run->logits_bytes,
                     .fixed_bytes = size_mul(&k, size_mul(&k, (size_t)T, (size_t)(hd / 2)), 2 * sizeof(float))};
#define SHARED(f, f32, width) lm_layout_shared(L, offsetof(llama_impl, f), f32, width)
#define BLOCK(f, f32, width, keep) lm_layout_block(L, offsetof(llama_block_acts, f), f32, width, LM_KEEP_##keep)
    SHARED(encoded, false, C);
    SHARED(lnf, false, C);
    SHARED(dres, false, C);
    SHARED(dln, false, C);
    SHARED(datty, false, NH * hd);
    SHARED(dqkv, false, QKV);
    SHARED(dgate_up, false, 2 * F);
    SHARED(dh, false, F);
    SHARED(rstdf, true, 1);
    BLOCK(ln1, false, C, NONE);
    BLOCK(qkv, false, QKV, SELECTIVE);
    BLOCK(atty, false, NH * hd, SELECTIVE);
    BLOCK(res2, false, C, SELECTIVE);
    BLOCK(ln2, false, C, NONE);
    BLOCK(gate_up, false, 2 * F, SELECTIVE);
    BLOCK(h, false, F, NONE);
    BLOCK(res3, false, C, ALWAYS);
    BLOCK(rstd1, true, 1, NONE);
    BLOCK(rstd2, true, 1, NONE);
    BLOCK(lse, true, NH, SELECTIVE);
    if (fam->qk_norm) {
        SHARED(dqk_raw, false, QK);
        BLOCK(qk_raw, false, QK, SELECTIVE);
        BLOCK(rstd_qk, true, NH + s->n_kv_head, SELECTIVE);
    }
#undef SHARED
#undef BLOCK
}

/* The RoPE tables of the row's T positions (not block_size's: a long context's would be hundreds
 * of MiB), uploaded once. */
static int alloc_tables(model *m, llama_impl *g, ddp_err *err)
{
    const struct device_ops *op = m->dev->ops;
    const int64_t n = g->lm.T * (g->hd / 2);
    float *host = malloc(2 * (size_t)n * sizeof *host);
    if (!host)
        return ddp_fail(err, DDP_ERUNTIME, "llama: out of host memory for the RoPE tables");
    llama_rope_tables(&g->s, g->lm.T, host, host + n);
    void *cos_p = NULL, *sin_p = NULL;
    int rc = lm_alloc(m, &cos_p, (size_t)n * sizeof(float), err);
    if (!rc)
        rc = lm_alloc(m, &sin_p, (size_t)n * sizeof(float), err);
    if (!rc)
        rc = op->upload(m->dev, cos_p, host, (size_t)n * sizeof(float), err);
    if (!rc)
        rc = op->upload(m->dev, sin_p, host + n, (size_t)n * sizeof(float), err);
    free(host);
    g->rope_cos = cos_p;
    g->rope_sin = sin_p;
    return rc;
}

/* The tables, the buffers, and the classifier's: model.norm's output through lm_head. */
static int alloc_acts(model *m, llama_impl *g, const lm_run *run, int64_t B, ddp_err *err)
{
    lm_layout L;
    llama_layout(g->fam, &g->s, run, g->lm.T, &L);
    int rc = alloc_tables(m, g, err);
    if (!rc)
        rc = lm_layout_alloc(m, &L, g, g->blocks, sizeof g->blocks[0], B * g->lm.T, err);
    g->lm.C = g->s.n_embd;
    g->lm.head_off = g->off_head;
    g->lm.head_x = g->lnf;
    g->lm.head_dx = g->dln;
    return rc;
}

int llama_activation_bytes(const llama_family *fam, const llama_shape *s, const lm_run *run, int64_t T, int64_t B,
                           size_t *bytes, ddp_err *err)
{
    lm_layout L;
    llama_layout(fam, s, run, T, &L);
    char widths[256];
    snprintf(widths, sizeof widths, "model.%s.n_embd=%lld, model.%s.ffn_hidden=%lld, model.%s.vocab_size=%lld",
             fam->name, (long long)s->n_embd, fam->name, (long long)s->ffn_hidden, fam->name, (long long)s->vocab_size);
    return lm_layout_plan(&L, run->compute, T, B, fam->name, widths, bytes, err);
}

/* ---- initialisation ----------------------------------------------------------------------- */

/* Every 2-D weight N(0, 0.02) (no depth scaling), RMSNorm weights 1, biases and the vocabulary's
 * padding rows 0, drawn in buffer order from the RNG_INIT stream. */
static void init_tensor(const model *m, const rng_key *key, const param_tensor *t, size_t lo, size_t hi, float *dst)
{
    const llama_impl *g = m->impl;
    size_t drawn = t->numel;
    if (t->shape[0] == g->lm.Vp && (t->offset == g->off_embed || t->offset == g->off_head))
        drawn = (size_t)g->s.vocab_size * (size_t)g->s.n_embd;
    float fill = has_suffix(t->name, ".bias") ? 0.0f : 1.0f;
    if (t->ndim == 2)
        model_draw_normal(key, lo, hi, drawn, 0.02, dst);
    else
        model_fill(dst, hi - lo, fill);
}

static const lm_kind llama_kind = {
    .name = "llama", .init_tensor = init_tensor, .forward = llama_forward, .backward = llama_backward};

/* ---- description -------------------------------------------------------------------------- */

void llama_format_shape(const llama_family *fam, const llama_shape *s, char *out, size_t size)
{
    char theta[32], eps[32], rope[160] = "";
    format_double_exact(s->rope_theta, theta, sizeof theta);
    format_double_exact(s->norm_eps, eps, sizeof eps);
    if (llama_rope_scaled(s)) {
        const llama_rope_scaling *r = &s->rope_scaling;
        char factor[32], low[32], high[32];
        format_double_exact(r->factor, factor, sizeof factor);
        format_double_exact(r->low_freq_factor, low, sizeof low);
        format_double_exact(r->high_freq_factor, high, sizeof high);
        snprintf(rope, sizeof rope, " rope_scaling=%s,%s,%s,%lld", factor, low, high,
                 (long long)r->original_max_positions);
    }
    char window[40] = "", head_dim[32] = "";
    if (s->sliding_window > 0)
        snprintf(window, sizeof window, " sliding_window=%lld", (long long)s->sliding_window);
    if (llama_shape_own_head_dim(s))
        snprintf(head_dim, sizeof head_dim, " head_dim=%lld", (long long)s->head_dim);
    snprintf(out, size,
             "%s n_layer=%lld n_head=%lld n_kv_head=%lld n_embd=%lld ffn_hidden=%lld block_size=%lld "
             "vocab_size=%lld rope_theta=%s norm_eps=%s tie_embeddings=%d%s%s%s",
             fam->name, (long long)s->n_layer, (long long)s->n_head, (long long)s->n_kv_head, (long long)s->n_embd,
             (long long)s->ffn_hidden, (long long)s->block_size, (long long)s->vocab_size, theta, eps,
             s->tie_embeddings ? 1 : 0, head_dim, rope, window);
}

static void describe(const llama_family *fam, char *out, size_t size, const llama_shape *s, int64_t T)
{
    char shape[MODEL_DESCRIPTION_MAX - 32]; /* the longest shape fits, with room left for seq_len */
    llama_format_shape(fam, s, shape, sizeof shape);
    snprintf(out, size, "%s seq_len=%lld", shape, (long long)T);
}

/* An optional field " NAME=V" (name is " NAME=") of a description, from *text on (moved past it):
 * its value, or 0 when it is not there. describe() writes such a field only when it is set, and
 * llama_parse_description compares its text with what describe() writes back. */
static int64_t parse_optional_size(const char **text, const char *name)
{
    long long v = 0;
    int end = -1;
    char format[48];
    snprintf(format, sizeof format, "%s%%lld%%n", name);
    if (!has_prefix(*text, name) || sscanf(*text, format, &v, &end) != 1 || end <= 0)
        return 0;
    *text += end;
    return v;
}

/* The rope_scaling field a scaled shape's description holds after head_dim, from *text on
 * (moved past it), into s; none there: no scaling (LLAMA_ROPE_UNSCALED). False for a field that is
 * there but not a stretch (a factor of 1 is never written) llama_rope_frequency can apply. */
static bool parse_rope_scaling(const char **text, llama_shape *s)
{
    llama_rope_scaling *r = &s->rope_scaling;
    *r = LLAMA_ROPE_UNSCALED;
    long long positions = 0;
    int end = -1;
    if (!has_prefix(*text, " rope_scaling="))
        return true;
    *r = (llama_rope_scaling){0};
    sscanf(*text, " rope_scaling=%lf,%lf,%lf,%lld%n", &r->factor, &r->low_freq_factor, &r->high_freq_factor,
           &positions, &end);
    r->original_max_positions = positions;
    *text += end > 0 ? end : 0;
    return end > 0 && llama_rope_scaled(s) && rope_scaling_valid(s);
}

int llama_parse_description(const llama_family *fam, const char *desc, llama_shape *shape, int64_t *seq_len,
                            ddp_err *err)
{
    long long v[8] = {0};
    double theta = 0, eps = 0;
    int tie = -1, end = -1, seq_end = -1;
    size_t name_len = strlen(fam->name);
    if (!strncmp(desc, fam->name, name_len))
        sscanf(desc + name_len,
               " n_layer=%lld n_head=%lld n_kv_head=%lld n_embd=%lld ffn_hidden=%lld block_size=%lld "
               "vocab_size=%lld rope_theta=%lf norm_eps=%lf tie_embeddings=%d%n",
               &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &theta, &eps, &tie, &end);
    llama_shape s = {.n_layer = v[0], .n_head = v[1], .n_kv_head = v[2], .n_embd = v[3], .ffn_hidden = v[4],
                     .block_size = v[5], .vocab_size = v[6], .rope_theta = theta, .norm_eps = eps,
                     .tie_embeddings = tie == 1};
    const char *rest = end > 0 ? desc + name_len + end : "";
    s.head_dim = parse_optional_size(&rest, " head_dim=");
    bool rope_ok = parse_rope_scaling(&rest, &s);
    s.sliding_window = parse_optional_size(&rest, " sliding_window=");
    sscanf(rest, " seq_len=%lld%n", &v[7], &seq_end);
    char again[2 * MODEL_DESCRIPTION_MAX] = "";
    if (seq_end > 0) /* exactly what describe() writes: no sign, no leading zeros, nothing after */
        describe(fam, again, sizeof again, &s, v[7]);
    bool sizes_ok = s.n_layer >= 1 && s.n_head >= 1 && s.n_kv_head >= 1 && s.n_embd >= 1 && s.ffn_hidden >= 1 &&
                    s.block_size >= 1 && s.vocab_size >= 1 && v[7] >= 1;
    bool reals_ok = isfinite(theta) && theta > 0 && isfinite(eps) && eps > 0 && (tie == 0 || tie == 1) && rope_ok;
    if (seq_end < 0 || strcmp(again, desc) != 0 || !sizes_ok || !reals_ok)
        return ddp_fail(err, DDP_EUSAGE, "not a %s model: \"%.200s\"", fam->title, desc);
    *shape = s;
    *seq_len = v[7];
    return DDP_OK;
}

/* ---- construction ------------------------------------------------------------------------- */

static int check_shape(const llama_family *fam, const llama_shape *s, const sample_layout *data, int64_t max_rows,
                       ddp_err *err)
{
    const char *k = fam->name;
    int rc = check_layers(fam, s, err);
    if (rc)
        return rc;
    if (s->head_dim < 0 || s->head_dim % 2)
        return ddp_fail(err, DDP_EUSAGE, "model.%s.head_dim %lld is not an even head size", k,
                        (long long)s->head_dim);
    if (s->n_head < 1 || s->n_embd < 1 || (!s->head_dim && (s->n_embd % s->n_head || (s->n_embd / s->n_head) % 2)))
        return ddp_fail(err, DDP_EUSAGE, "model.%s.n_embd %lld over model.%s.n_head %lld is not an even head size",
                        k, (long long)s->n_embd, k, (long long)s->n_head);
    if (s->n_kv_head < 1 || s->n_head % s->n_kv_head)
        return ddp_fail(err, DDP_EUSAGE, "model.%s.n_head %lld is not divisible by model.%s.n_kv_head %lld", k,
                        (long long)s->n_head, k, (long long)s->n_kv_head);
    if (s->ffn_hidden < 1 || !(s->rope_theta > 0) || !(s->norm_eps > 0))
        return ddp_fail(err, DDP_EUSAGE, "model.%s: ffn_hidden %lld, rope_theta %g and norm_eps %g must be "
                        "positive", k, (long long)s->ffn_hidden, s->rope_theta, s->norm_eps);
    const llama_rope_scaling *r = &s->rope_scaling;
    if (!rope_scaling_valid(s))
        return ddp_fail(err, DDP_EUSAGE, "model.%s.rope_scaling: factor %g needs 0 < low_freq_factor %g < "
                        "high_freq_factor %g and original_max_position_embeddings %lld >= 1", k, r->factor,
                        r->low_freq_factor, r->high_freq_factor, (long long)r->original_max_positions);
    if (s->sliding_window < 0 || (s->sliding_window > 0 && data->input.count > s->sliding_window))
        return ddp_fail(err, DDP_EUSAGE, "model.%s.sliding_window %lld is shorter than data.seq_len %lld: ddprun "
                        "attends to every earlier position, which is the window's attention only while the "
                        "sequence fits in it", k, (long long)s->sliding_window, (long long)data->input.count);
    return lm_check_data(k, data, s->block_size, s->vocab_size, max_rows, err);
}

int llama_create(const llama_family *fam, const llama_shape *shape, const lm_run *run, device *dev,
                 const sample_layout *data, int64_t max_rows, model_buffers buffers, model **out, ddp_err *err)
{
    *out = NULL;
    size_t act_bytes; /* the plan's figure: refuses a micro-batch whose buffers would not fit in 64 bits */
    int rc = check_shape(fam, shape, data, max_rows, err);
    if (!rc)
        rc = llama_activation_bytes(fam, shape, run, data->input.count, max_rows, &act_bytes, err);
    if (rc)
        return rc;
    model *m;
    if ((rc = lm_new(&llama_kind, sizeof(llama_impl), run->compute, dev, data, shape->vocab_size, max_rows, buffers,
                     &m, err)))
        return rc;
    llama_impl *g = m->impl;
    g->fam = fam;
    g->recompute = run->recompute;
    g->s = *shape;
    g->lm.Vp = llama_vocab_padded(shape->vocab_size);
    g->hd = llama_head_dim(shape);
    g->QKV = (shape->n_head + 2 * shape->n_kv_head) * g->hd;
    describe(fam, m->description, sizeof m->description, shape, g->lm.T);
    rc = lay_out_params(m, g, err);
    m->train_flops_per_sample = train_flops_per_sample(m, g);
    if (!rc)
        rc = lm_alloc_params(m, err);
    if (!rc)
        rc = alloc_acts(m, g, run, max_rows, err);
    return lm_build_end(m, rc, act_bytes, out, err);
}
