/* gpt2.c — the GPT-2 transformer: token and position embeddings, n_layer pre-LayerNorm blocks
 * (causal self-attention, tanh-GELU MLP of 4x width), a final LayerNorm and the output projection
 * tied to the token embedding, trained with softmax cross-entropy on the next token. This file
 * lays out parameters and activations, initialises them and builds the model; the passes are in
 * gpt2_pass.c, and the plumbing every language model shares (model_ops around the passes, the
 * bf16 copy, the buffers) in lm_core.c.
 *
 * Parameters sit in one flat fp32 buffer in PyTorch's order: wte, wpe, then each block's tensors
 * (h.L.ln_1 ... h.L.mlp.c_proj), then ln_f. wte has vocab_padded rows (a multiple of 128, for the
 * GEMMs); the padding rows stay zero, since no token selects them and the classifier gives their
 * logits zero gradient, and they never reach the loss or sampling. With a bf16 compute type the
 * passes read a bf16 copy of the parameters, rounded stochastically from the fp32 master weights
 * by params_changed (keyed by seed, optimizer step and element, so a resume rebuilds it bit for
 * bit). Everything runs as device ops, so the same code serves every backend. This file must not
 * communicate, step an optimizer or read data. */
#include "gpt2_internal.h"
#include "lm_layout.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/rng.h"

static const char *const block_tensor_names[BLOCK_TENSORS] = {
    "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
    "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
    "mlp.c_proj.weight", "mlp.c_proj.bias"};

/* ---- parameters --------------------------------------------------------------------------- */

static int lay_out_params(model *m, gpt2_impl *g, ddp_err *err)
{
    const gpt2_shape *s = &g->s;
    int64_t C = s->n_embd;
    size_t off = 0;
    g->off_wte = off;
    int rc = model_begin_unit(m, false, err); /* the embeddings */
    if (!rc)
        rc = model_add_tensor(m, "wte.weight", g->lm.Vp, C, true, &off, err);
    g->off_wpe = off;
    if (!rc)
        rc = model_add_tensor(m, "wpe.weight", s->block_size, C, true, &off, err);
    for (int l = 0; !rc && l < s->n_layer; l++) {
        g->block_off[l] = off;
        const int64_t rows[BLOCK_TENSORS] = {C, C, 3 * C, 3 * C, C, C, C, C, 4 * C, 4 * C, C, C};
        const int64_t cols[BLOCK_TENSORS] = {0, 0, C, 0, C, 0, 0, 0, C, 0, 4 * C, 0};
        rc = model_begin_unit(m, true, err);
        for (int i = 0; !rc && i < BLOCK_TENSORS; i++) {
            char name[MODEL_TENSOR_NAME_MAX];
            snprintf(name, sizeof name, "h.%d.%s", l, block_tensor_names[i]);
            rc = model_add_tensor(m, name, rows[i], cols[i], cols[i] != 0, &off, err);
        }
    }
    g->block_off[s->n_layer] = off;
    g->off_lnf_w = off;
    if (!rc) /* ln_f; the head is wte, the embeddings unit's */
        rc = model_begin_unit(m, false, err);
    if (!rc)
        rc = model_add_tensor(m, "ln_f.weight", C, 0, false, &off, err);
    g->off_lnf_b = off;
    if (!rc)
        rc = model_add_tensor(m, "ln_f.bias", C, 0, false, &off, err);
    m->n_params = off;
    return rc;
}

/* Per token: every weight but the position table's in a GEMM (wte once, as the lm_head: nanoGPT's
 * and PaLM's count), and attention's scores and mix over the T positions. */
static double train_flops_per_sample(const model *m, const gpt2_impl *g)
{
    double C = (double)g->s.n_embd, T = (double)g->lm.T;
    double gemm_weights = (double)m->n_params - (double)g->s.block_size * C;
    return T * (6.0 * gemm_weights + 12.0 * (double)g->s.n_layer * C * T);
}

int gpt2_tensor_table(const gpt2_shape *shape, model *m, ddp_err *err)
{
    if (shape->n_layer < 1 || shape->n_layer > GPT2_MAX_LAYERS)
        return ddp_fail(err, DDP_EUSAGE, "gpt2 n_layer=%lld: expected 1..%d", (long long)shape->n_layer,
                        GPT2_MAX_LAYERS);
    gpt2_impl *g = calloc(1, sizeof *g);
    if (!g)
        return ddp_fail(err, DDP_ERUNTIME, "out of host memory");
    g->s = *shape;
    g->lm.Vp = gpt2_vocab_padded(shape->vocab_size);
    int rc = lay_out_params(m, g, err);
    free(g);
    if (rc)
        model_free_tensors(m);
    return rc;
}

/* ---- activations -------------------------------------------------------------------------- */

/* GPT-2's activations (lm_layout.h) in the order they are allocated: the shared buffers (the
 * embeddings' output, the final LayerNorm, backward's scratch, its statistics; the logits are the
 * classifier's chunk, lm_layout.h), then
 * what each block keeps for its backward (activations, LayerNorm statistics, attention's
 * log-sum-exp: B·NH·T floats, linear in T) — under recompute, the block's output only (full) or
 * all but the LayerNorms' outputs and statistics (selective: the GELU's output is the fused GEMM
 * epilogue's, which no element-wise op reproduces bit for bit), the rest one copy all blocks share. */
static void gpt2_layout(const gpt2_shape *s, const lm_run *run, lm_layout *L)
{
    const int64_t C = s->n_embd;
    *L = (lm_layout){.n_layer = s->n_layer, .recompute = run->recompute, .vocab_padded = gpt2_vocab_padded(s->vocab_size),
                     .logits_bytes = run->logits_bytes};
#define SHARED(f, f32, width) lm_layout_shared(L, offsetof(gpt2_impl, f), f32, width)
#define BLOCK(f, f32, width, keep) lm_layout_block(L, offsetof(gpt2_block_acts, f), f32, width, LM_KEEP_##keep)
    SHARED(encoded, false, C);
    SHARED(lnf, false, C);
    SHARED(dres, false, C);
    SHARED(dln, false, C);
    SHARED(datty, false, C);
    SHARED(dqkv, false, 3 * C);
    SHARED(dfch, false, 4 * C);
    SHARED(lnf_mean, true, 1);
    SHARED(lnf_rstd, true, 1);
    BLOCK(ln1, false, C, NONE);
    BLOCK(qkv, false, 3 * C, SELECTIVE);
    BLOCK(atty, false, C, SELECTIVE);
    BLOCK(res2, false, C, SELECTIVE);
    BLOCK(ln2, false, C, NONE);
    BLOCK(fch, false, 4 * C, SELECTIVE);
    BLOCK(fch_gelu, false, 4 * C, SELECTIVE);
    BLOCK(res3, false, C, ALWAYS);
    BLOCK(ln1_mean, true, 1, NONE);
    BLOCK(ln1_rstd, true, 1, NONE);
    BLOCK(ln2_mean, true, 1, NONE);
    BLOCK(ln2_rstd, true, 1, NONE);
    BLOCK(lse, true, s->n_head, SELECTIVE);
#undef SHARED
#undef BLOCK
}

/* The buffers, and the classifier's: ln_f's output through the tied wte. */
static int alloc_acts(model *m, gpt2_impl *g, const lm_run *run, int64_t B, ddp_err *err)
{
    lm_layout L;
    gpt2_layout(&g->s, run, &L);
    int rc = lm_layout_alloc(m, &L, g, g->blocks, sizeof g->blocks[0], B * g->lm.T, err);
    g->lm.C = g->s.n_embd;
    g->lm.head_off = g->off_wte;
    g->lm.head_x = g->lnf;
    g->lm.head_dx = g->dln;
    return rc;
}

int gpt2_activation_bytes(const gpt2_shape *s, const lm_run *run, int64_t T, int64_t B, size_t *bytes, ddp_err *err)
{
    lm_layout L;
    gpt2_layout(s, run, &L);
    char widths[128];
    snprintf(widths, sizeof widths, "model.gpt2.n_embd=%lld, model.gpt2.vocab_size=%lld", (long long)s->n_embd,
             (long long)s->vocab_size);
    return lm_layout_plan(&L, run->compute, T, B, "gpt2", widths, bytes, err);
}

/* ---- initialisation ----------------------------------------------------------------------- */

/* GPT-2's initialisation: weights N(0, 0.02), the residual projections (attn.c_proj, mlp.c_proj)
 * N(0, 0.02/sqrt(2·n_layer)), biases 0, LayerNorm weights 1; wte's padding rows 0. */
static void init_tensor(const model *m, const rng_key *key, const param_tensor *t, size_t lo, size_t hi, float *dst)
{
    const gpt2_impl *g = m->impl;
    const char *name = t->name;
    size_t drawn = t->numel;
    if (!strcmp(name, "wte.weight"))
        drawn = (size_t)g->s.vocab_size * (size_t)g->s.n_embd;
    if (strstr(name, "ln_") && strstr(name, ".weight")) {
        model_fill(dst, hi - lo, 1.0f);
    } else if (t->ndim == 2) {
        double std = strstr(name, "c_proj.weight") ? 0.02 / sqrt(2.0 * (double)g->s.n_layer) : 0.02;
        model_draw_normal(key, lo, hi, drawn, std, dst);
    } else {
        model_fill(dst, hi - lo, 0.0f);
    }
}

static const lm_kind gpt2_kind = {
    .name = "gpt2", .init_tensor = init_tensor, .forward = gpt2_forward, .backward = gpt2_backward};

/* ---- construction ------------------------------------------------------------------------- */

static int check_shape(const gpt2_shape *s, const sample_layout *data, int64_t max_rows, ddp_err *err)
{
    if (s->n_layer < 1 || s->n_layer > GPT2_MAX_LAYERS)
        return ddp_fail(err, DDP_EUSAGE, "model.gpt2.n_layer: expected 1..%d, got %lld", GPT2_MAX_LAYERS,
                        (long long)s->n_layer);
    if (s->n_head < 1 || s->n_embd < 1 || s->n_embd % s->n_head)
        return ddp_fail(err, DDP_EUSAGE, "model.gpt2.n_embd %lld is not divisible by model.gpt2.n_head %lld",
                        (long long)s->n_embd, (long long)s->n_head);
    return lm_check_data("gpt2", data, s->block_size, s->vocab_size, max_rows, err);
}

int64_t gpt2_vocab_padded(int64_t vocab_size)
{
    return (vocab_size + GPT2_VOCAB_ALIGN - 1) / GPT2_VOCAB_ALIGN * GPT2_VOCAB_ALIGN;
}

void gpt2_format_shape(const gpt2_shape *s, char *out, size_t size)
{
    snprintf(out, size, "gpt2 n_layer=%lld n_head=%lld n_embd=%lld block_size=%lld vocab_size=%lld",
             (long long)s->n_layer, (long long)s->n_head, (long long)s->n_embd, (long long)s->block_size,
             (long long)s->vocab_size);
}

static void describe(model *m, const gpt2_shape *s, int64_t T)
{
    char shape[192]; /* five int64 and their names fit; leaves room for seq_len in the description */
    gpt2_format_shape(s, shape, sizeof shape);
    snprintf(m->description, sizeof m->description, "%s seq_len=%lld", shape, (long long)T);
}

int gpt2_parse_description(const char *desc, gpt2_shape *shape, int64_t *seq_len, ddp_err *err)
{
    long long v[6] = {0};
    int end = -1;
    sscanf(desc, "gpt2 n_layer=%lld n_head=%lld n_embd=%lld block_size=%lld vocab_size=%lld seq_len=%lld%n", &v[0],
           &v[1], &v[2], &v[3], &v[4], &v[5], &end);
    gpt2_shape s = {.n_layer = v[0], .n_head = v[1], .n_embd = v[2], .block_size = v[3], .vocab_size = v[4]};
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

int gpt2_create(const gpt2_shape *shape, const lm_run *run, device *dev, const sample_layout *data, int64_t max_rows,
                model_buffers buffers, model **out, ddp_err *err)
{
    *out = NULL;
    size_t act_bytes; /* the plan's figure: refuses a micro-batch whose buffers would not fit in 64 bits */
    int rc = check_shape(shape, data, max_rows, err);
    if (!rc)
        rc = gpt2_activation_bytes(shape, run, data->input.count, max_rows, &act_bytes, err);
    if (rc)
        return rc;
    model *m;
    if ((rc = lm_new(&gpt2_kind, sizeof(gpt2_impl), run->compute, dev, data, shape->vocab_size, max_rows, buffers, &m,
                     err)))
        return rc;
    gpt2_impl *g = m->impl;
    g->s = *shape;
    g->recompute = run->recompute;
    g->lm.Vp = gpt2_vocab_padded(shape->vocab_size);
    describe(m, shape, g->lm.T);
    rc = lay_out_params(m, g, err);
    m->train_flops_per_sample = train_flops_per_sample(m, g);
    if (!rc)
        rc = lm_alloc_params(m, err);
    if (!rc)
        rc = alloc_acts(m, g, run, max_rows, err);
    return lm_build_end(m, rc, act_bytes, out, err);
}
