/* test_llama.c — the Llama on the CPU backend against Hugging Face transformers' LlamaForCausalLM in
 * float64 (fixture llama-reference): our RoPE tables against the ones HF used, logits, loss,
 * every gradient and the global gradient norm at init (the vocabulary's padding rows keeping zero
 * gradient), and two 3-step AdamW trajectories (with and without clipping) with weight decay on
 * the 2-D tensors only, through the project's optimizer. Every shape comes from the fixture's
 * MANIFEST. Also: the tied variant against the untied model with lm_head = embed_tokens, the
 * initialisation, the description both ways, and the deepest model builds; train.recompute
 * selective and full give none's gradients bit for bit in less activation memory. The same
 * fixture checks, with the same tolerances, hold the CUDA backend to HF with `--cuda`. */
#include "tests/models/llama_fixture.h"

#include "runtime/device/device.h"

/* The logits [rows, V] of the last forward pass (the row stride must be the padded vocabulary). */
static float *download_logits(const gfx *f, int64_t V)
{
    int64_t rows = f->B * f->T, ld = 0;
    const void *p = f->m->ops->logits(f->m, &ld);
    CHECK(ld == f->Vp, "logits row stride %lld, padded vocabulary %lld", (long long)ld, (long long)f->Vp);
    float *all = malloc((size_t)(rows * ld) * 4), *packed = malloc((size_t)(rows * V) * 4);
    f->dev->ops->download(f->dev, all, p, (size_t)(rows * ld) * 4, NULL);
    for (int64_t r = 0; r < rows; r++)
        memcpy(packed + r * V, all + r * ld, (size_t)V * 4);
    free(all);
    return packed;
}

/* Our tables against rope.cos/rope.sin [T, hd] (columns j and j + hd/2 both hold angle t·f_j).
 * HF computed them in float32: f_j = 1/theta^(2j/hd) with the exponent, power and reciprocal
 * each rounded (relative error about (ln theta + 2)·2^-24 in f_j), the angle t·f_j rounded once
 * more, then cos/sin rounded; ours are exact angles rounded once. So the two differ by at most
 * t·f_j·(ln theta + 3)·2^-24 + 2·2^-24, and twice that is the tolerance; a wrong frequency or
 * pairing is off by O(1). */
static void check_rope_tables(const lfx *x)
{
    const int64_t T = x->f.T, hd = x->shape.n_embd / x->shape.n_head, half = hd / 2;
    float *cos_ours = malloc((size_t)(T * half) * 4), *sin_ours = malloc((size_t)(T * half) * 4);
    llama_rope_tables(&x->shape, T, cos_ours, sin_ours);
    float *ref[2] = {gfx_load(&x->f, "rope.cos", NULL), gfx_load(&x->f, "rope.sin", NULL)};
    const float *ours[2] = {cos_ours, sin_ours};
    const double u = ldexp(1.0, -24), lt = log(x->shape.rope_theta) + 3;
    for (int k = 0; k < 2 && ref[0] && ref[1]; k++) {
        double worst = 0, worst_ratio = 0;
        for (int64_t t = 0; t < T; t++)
            for (int64_t j = 0; j < hd; j++) {
                double f = pow(x->shape.rope_theta, -2.0 * (double)(j % half) / (double)hd);
                double tol = 2 * ((double)t * f * lt * u + 2 * u);
                double d = fabs((double)ours[k][t * half + j % half] - (double)ref[k][t * hd + j]);
                worst = fmax(worst, d);
                worst_ratio = fmax(worst_ratio, d / tol);
                CHECK(d <= tol, "rope.%s[%lld, %lld]: ours %.9g, HF's %.9g (tolerance %.3g)", k ? "sin" : "cos",
                      (long long)t, (long long)j, (double)ours[k][t * half + j % half], (double)ref[k][t * hd + j],
                      tol);
            }
        fprintf(stderr, "  %-36s max_abs=%.3g (%.2f of its tolerance at worst)\n", k ? "rope.sin" : "rope.cos",
                worst, worst_ratio);
    }
    free(ref[0]);
    free(ref[1]);
    free(cos_ours);
    free(sin_ours);
}

static void check_forward_backward(lfx *x)
{
    gfx *f = &x->f;
    ddp_err err = {0};
    device *d = f->dev;
    const int64_t rows = f->B * f->T, V = x->shape.vocab_size;
    CHECK(gfx_pass(f, false, &err) == 0, "evaluate: %s", err.msg);
    float *logits = download_logits(f, V), *ref = gfx_load(f, "logits", NULL), *loss = gfx_load(f, "loss", NULL);
    CHECK(ref && loss, "fixture logits/loss");
    if (ref)
        gfx_compare("logits", logits, ref, (size_t)(rows * V), LFX_RTOL, LFX_SCALE_ATOL, 0);
    if (loss) {
        fprintf(stderr, "  %-36s relative error %.3g\n", "loss", fabs(gfx_mean_loss(f) - loss[0]) / loss[0]);
        CHECK_CLOSE(gfx_mean_loss(f), loss[0], LFX_RTOL, 0);
    }
    free(ref);
    free(logits);

    CHECK(gfx_pass(f, true, &err) == 0, "forward_backward: %s", err.msg);
    if (loss)
        CHECK_CLOSE(gfx_mean_loss(f), loss[0], LFX_RTOL, 0);
    free(loss);
    gfx_compare_params(f, f->m->grads, "grad", LFX_RTOL, LFX_SCALE_ATOL, 0);
    double sumsq = 0, *sumsq_dev = NULL;
    CHECK(d->ops->alloc(d, sizeof sumsq, (void **)&sumsq_dev, &err) == 0 &&
          d->ops->sumsq(d, f->m->grads, f->m->n_params, sumsq_dev, &err) == 0 &&
          d->ops->download(d, &sumsq, sumsq_dev, sizeof sumsq, &err) == 0, "%s", err.msg);
    d->ops->free(d, sumsq_dev);
    float *norm = gfx_load(f, "grad_global_norm", NULL);
    if (norm) {
        fprintf(stderr, "  %-36s relative error %.3g\n", "grad_global_norm", fabs(sqrt(sumsq) - norm[0]) / norm[0]);
        CHECK_CLOSE(sqrt(sumsq), norm[0], LFX_RTOL, 0);
    }
    free(norm);
}

/* Host copy of a device float buffer. */
static float *download_floats(device *d, const float *src, size_t n)
{
    float *h = malloc(n * 4);
    d->ops->download(d, h, src, n * 4, NULL);
    return h;
}

/* The tied model is the untied one with lm_head = embed_tokens: the same logits, and its
 * embedding's gradient is the sum of the untied model's two (the classifier's and the input's).
 * Both run the same ops on the same values, so they agree to float32 summation order. */
static void check_tied(lfx *x)
{
    gfx *f = &x->f;
    if (x->shape.tie_embeddings)
        return; /* a tied fixture checked that already */
    model *untied = f->m, *tied = NULL;
    device *d = f->dev;
    ddp_err err = {0};
    llama_shape ts = x->shape;
    ts.tie_embeddings = true;
    sample_layout data = {.input = {SAMPLE_I32, f->T}, .target = {SAMPLE_I32, f->T}, .n_classes = ts.vocab_size};
    CHECK(llama_create(&llama_family_llama, &ts, &(lm_run){.compute = untied->act_dtype}, d, &data, f->B, MODEL_BUFFERS_WHOLE, &tied, &err) == 0, "tied: %s", err.msg);
    if (!tied)
        return;
    const param_tensor *emb = model_find_tensor(untied, "model.embed_tokens.weight"),
                       *head = model_find_tensor(untied, "lm_head.weight");
    CHECK(model_find_tensor(tied, "lm_head.weight") == NULL && tied->n_params == untied->n_params - head->numel,
          "a tied model has lm_head");
    /* FLOPs per sequence (the MFU's numerator): 6 per weight a GEMM reads per token — the blocks'
     * projections and norms, model.norm and the classifier over the padded vocabulary, but not the
     * input embedding, a lookup — plus 12·L·C·T for attention's scores and mix; the same whether the
     * classifier is tied or not */
    const double C = (double)ts.n_embd, hd = C / (double)ts.n_head, T = (double)f->T, F = (double)ts.ffn_hidden;
    const double q = (double)ts.n_head * hd, kv = (double)ts.n_kv_head * hd;
    const double Vp = (double)(head->numel / (size_t)ts.n_embd);
    const double gemm_weights = (double)ts.n_layer * (C * q + 2 * C * kv + q * C + 3 * C * F + 2 * C) + C + Vp * C;
    const double flops = T * (6 * gemm_weights + 12 * (double)ts.n_layer * C * T);
    CHECK(fabs(untied->train_flops_per_sample - flops) <= 1e-9 * flops &&
              fabs(tied->train_flops_per_sample - flops) <= 1e-9 * flops,
          "FLOPs per sequence: untied %.6g, tied %.6g, expected %.6g", untied->train_flops_per_sample,
          tied->train_flops_per_sample, flops);
    CHECK(gfx_upload_params(f, "init") == 0, "reloading init.*");
    d->ops->copy(d, untied->params + head->offset, untied->params + emb->offset, emb->numel * 4, NULL);
    d->ops->copy(d, tied->params, untied->params, tied->n_params * 4, NULL); /* lm_head is last */
    float *logits[2], *grads[2];
    const int64_t V = ts.vocab_size, rows = f->B * f->T;
    for (int k = 0; k < 2; k++) {
        f->m = k ? tied : untied;
        CHECK(gfx_pass(f, true, &err) == 0, "%s: %s", k ? "tied" : "untied", err.msg);
        grads[k] = download_floats(d, f->m->grads, f->m->n_params);
        CHECK(gfx_pass(f, false, &err) == 0, "%s: %s", k ? "tied" : "untied", err.msg);
        logits[k] = download_logits(f, V);
    }
    f->m = untied;
    for (size_t i = 0; i < emb->numel; i++)
        grads[0][emb->offset + i] += grads[0][head->offset + i];
    gfx_compare("tied logits", logits[1], logits[0], (size_t)(rows * V), 1e-6, 1e-6, 0);
    gfx_compare("tied embed_tokens gradient", grads[1] + emb->offset, grads[0] + emb->offset, emb->numel, 1e-6, 1e-6,
                0);
    gfx_compare("tied other gradients", grads[1] + emb->numel, grads[0] + emb->numel,
                tied->n_params - emb->numel, 1e-6, 1e-6, 0);
    for (int k = 0; k < 2; k++) {
        free(logits[k]);
        free(grads[k]);
    }
    tied->ops->destroy(tied);
}

/* init_params: every 2-D weight N(0, 0.02) (the sample's spread within a few standard errors),
 * the norms 1, the vocabulary's padding rows 0; the same seed gives the same values. */
static void check_init(lfx *x)
{
    gfx *f = &x->f;
    model *m = f->m;
    ddp_err err = {0};
    float *p[3];
    const uint64_t seeds[3] = {5, 5, 6};
    for (int k = 0; k < 3; k++) {
        CHECK(model_init_params(m, seeds[k], &err) == 0, "%s", err.msg);
        p[k] = download_floats(f->dev, m->params, m->n_params);
    }
    CHECK(memcmp(p[0], p[1], m->n_params * 4) == 0, "the same seed gave other parameters");
    CHECK(memcmp(p[0], p[2], m->n_params * 4) != 0, "another seed gave the same parameters");
    for (int i = 0; i < m->n_tensors; i++) {
        const param_tensor *t = &m->tensors[i];
        size_t live = t->shape[0] == f->Vp ? (size_t)(x->shape.vocab_size * x->shape.n_embd) : t->numel;
        double sum2 = 0;
        size_t off_one = 0, nonzero_pad = 0;
        for (size_t j = 0; j < t->numel; j++) {
            float v = p[0][t->offset + j];
            if (j >= live)
                nonzero_pad += v != 0;
            else if (t->ndim == 1)
                off_one += v != 1.0f;
            else
                sum2 += (double)v * v;
        }
        CHECK(nonzero_pad == 0 && off_one == 0, "%s: %zu padding values not 0, %zu norm weights not 1", t->name,
              nonzero_pad, off_one);
        if (t->ndim == 2) {
            double sd = sqrt(sum2 / (double)live); /* the spread of n normals errs by about 1/sqrt(2n) */
            CHECK(fabs(sd / 0.02 - 1) < 5 / sqrt(2.0 * (double)live), "%s: standard deviation %.4g", t->name, sd);
        }
    }
    for (int k = 0; k < 3; k++)
        free(p[k]);
}

static bool shape_equal(const llama_shape *a, const llama_shape *b)
{
    return a->n_layer == b->n_layer && a->n_head == b->n_head && a->n_kv_head == b->n_kv_head &&
           a->n_embd == b->n_embd && a->ffn_hidden == b->ffn_hidden && a->block_size == b->block_size &&
           a->vocab_size == b->vocab_size && a->rope_theta == b->rope_theta && a->norm_eps == b->norm_eps &&
           a->tie_embeddings == b->tie_embeddings && a->rope_scaling.factor == b->rope_scaling.factor &&
           a->rope_scaling.low_freq_factor == b->rope_scaling.low_freq_factor &&
           a->rope_scaling.high_freq_factor == b->rope_scaling.high_freq_factor &&
           a->rope_scaling.original_max_positions == b->rope_scaling.original_max_positions;
}

/* The description names the whole shape and parses back exactly; other texts are refused. */
static void check_description(lfx *x)
{
    llama_shape s = {0};
    int64_t T = 0;
    ddp_err err = {0};
    const char *desc = x->f.m->description;
    CHECK(llama_parse_description(&llama_family_llama, desc, &s, &T, &err) == 0, "%s", err.msg);
    CHECK(shape_equal(&s, &x->shape) && T == x->f.T, "\"%s\" parsed to another shape", desc);
    llama_shape odd = {3, 8, 1, 48, 100, 64, 50257, 500000, 1e-6, true, 0, LLAMA_ROPE_UNSCALED, 0};
    char text[MODEL_DESCRIPTION_MAX + 32];
    llama_format_shape(&llama_family_llama, &odd, text, sizeof text);
    strcat(text, " seq_len=64");
    CHECK(llama_parse_description(&llama_family_llama, text, &s, &T, &err) == 0 && shape_equal(&s, &odd) && T == 64, "%s: %s",
          text, err.msg);
    CHECK_STR_CONTAINS(text, "rope_theta=500000 norm_eps=1e-06 tie_embeddings=1 seq_len=64");
    /* Llama 3.2's stretch of the RoPE frequencies, and one with odd numbers, both ways */
    const llama_rope_scaling stretches[] = {{32, 1, 4, 8192}, {1.5, 0.25, 3.125, 17}};
    for (int i = 0; i < 2; i++) {
        llama_shape scaled = odd;
        scaled.rope_scaling = stretches[i];
        llama_format_shape(&llama_family_llama, &scaled, text, sizeof text);
        strcat(text, " seq_len=64");
        CHECK(llama_parse_description(&llama_family_llama, text, &s, &T, &err) == 0 && shape_equal(&s, &scaled) &&
              T == 64, "%s: %s", text, err.msg);
    }
    CHECK_STR_CONTAINS(text, "tie_embeddings=1 rope_scaling=1.5,0.25,3.125,17 seq_len=64");
    const char *bad[] = {"gpt2 n_layer=2 n_head=4 n_embd=64 block_size=16 vocab_size=300 seq_len=16",
                         "llama n_layer=2 n_head=4 n_kv_head=2 n_embd=64 ffn_hidden=176 block_size=16 vocab_size=300 "
                         "rope_theta=10000.0 norm_eps=1e-05 tie_embeddings=0 seq_len=16",
                         "llama n_layer=2 n_head=4 n_kv_head=2 n_embd=64 ffn_hidden=176 block_size=16 vocab_size=300 "
                         "rope_theta=10000 norm_eps=1e-05 tie_embeddings=2 seq_len=16",
                         "llama n_layer=2 n_head=4 n_kv_head=2 n_embd=64 ffn_hidden=176 block_size=16 vocab_size=300 "
                         "rope_theta=10000 norm_eps=1e-05 tie_embeddings=0 seq_len=16 ",
                         "llama n_layer=2 n_head=4 n_kv_head=2 n_embd=64 ffn_hidden=176 block_size=16 vocab_size=300 "
                         "rope_theta=-1 norm_eps=1e-05 tie_embeddings=0 seq_len=16",
                         /* a stretch of 1 (none: never written), bands crossed, a field short */
                         "llama n_layer=2 n_head=4 n_kv_head=2 n_embd=64 ffn_hidden=176 block_size=16 vocab_size=300 "
                         "rope_theta=10000 norm_eps=1e-05 tie_embeddings=0 rope_scaling=1,1,4,8192 seq_len=16",
                         "llama n_layer=2 n_head=4 n_kv_head=2 n_embd=64 ffn_hidden=176 block_size=16 vocab_size=300 "
                         "rope_theta=10000 norm_eps=1e-05 tie_embeddings=0 rope_scaling=8,4,4,8192 seq_len=16",
                         "llama n_layer=2 n_head=4 n_kv_head=2 n_embd=64 ffn_hidden=176 block_size=16 vocab_size=300 "
                         "rope_theta=10000 norm_eps=1e-05 tie_embeddings=0 rope_scaling=8,1,4 seq_len=16"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(llama_parse_description(&llama_family_llama, bad[i], &s, &T, &err) == DDP_EUSAGE, "accepted \"%s\"", bad[i]);
        CHECK_STR_CONTAINS(err.msg, "not a Llama model");
    }
}

/* model_create builds a Llama for model.kind llama, and the deepest model the config allows
 * builds (activations are not allocated per layer); a shape the config refuses is refused here
 * too, naming the keys. */
static void check_create(device *d)
{
    const model_opts opts = {.kind = MODEL_LLAMA,
                             .llama = {.n_layer = LLAMA_MAX_LAYERS, .n_head = 2, .n_kv_head = 1, .n_embd = 8,
                                       .ffn_hidden = 16, .block_size = 4, .vocab_size = 16, .rope_theta = 10000,
                                       .norm_eps = 1e-5}};
    sample_layout data = {.input = {SAMPLE_I32, 4}, .target = {SAMPLE_I32, 4}, .n_classes = 16};
    model *m = NULL;
    ddp_err err = {0};
    CHECK(model_create(&opts, d, &data, 2, MODEL_BUFFERS_WHOLE, &m, &err) == 0, "%d layers: %s", LLAMA_MAX_LAYERS, err.msg);
    if (m) {
        char want[32];
        snprintf(want, sizeof want, "llama n_layer=%d ", LLAMA_MAX_LAYERS);
        CHECK(!strncmp(m->description, want, strlen(want)), "description \"%s\"", m->description);
        m->ops->destroy(m);
    }
    llama_shape bad = opts.llama;
    bad.n_kv_head = 3;
    CHECK(llama_create(&llama_family_llama, &bad, &(lm_run){.compute = TENSOR_F32}, d, &data, 2, MODEL_BUFFERS_WHOLE, &m, &err) == DDP_EUSAGE, "n_kv_head 3 of 2 heads built");
    CHECK_STR_CONTAINS(err.msg, "model.llama.n_head 2 is not divisible by model.llama.n_kv_head 3");
    bad = opts.llama;
    bad.n_embd = 6; /* head size 3 */
    CHECK(llama_create(&llama_family_llama, &bad, &(lm_run){.compute = TENSOR_F32}, d, &data, 2, MODEL_BUFFERS_WHOLE, &m, &err) == DDP_EUSAGE, "odd head size built");
    CHECK_STR_CONTAINS(err.msg, "is not an even head size");
    bad = opts.llama;
    bad.rope_scaling = (llama_rope_scaling){8, 4, 2, 8192}; /* bands crossed */
    CHECK(llama_create(&llama_family_llama, &bad, &(lm_run){.compute = TENSOR_F32}, d, &data, 2, MODEL_BUFFERS_WHOLE,
                       &m, &err) == DDP_EUSAGE, "a stretch with crossed bands built");
    CHECK_STR_CONTAINS(err.msg, "model.llama.rope_scaling: factor 8 needs 0 < low_freq_factor 4 < high_freq_factor 2");
}

/* The deepest Llama the config allows has at least Llama 3.1 405B's 126 layers, and its tensor table
 * holds every Hugging Face name whole (the longest, model.layers.NNN.post_attention_layernorm.weight,
 * does not fit a 48-byte name): each is checked against the name built here in a buffer of its own. */
static void check_deepest_names(void)
{
    static const char *const block[] = {"input_layernorm.weight", "self_attn.q_proj.weight",
                                        "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                                        "self_attn.o_proj.weight", "post_attention_layernorm.weight",
                                        "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"};
    CHECK(LLAMA_MAX_LAYERS >= 126, "LLAMA_MAX_LAYERS %d is below Llama 3.1 405B's 126 layers", LLAMA_MAX_LAYERS);
    const llama_shape s = {.n_layer = LLAMA_MAX_LAYERS, .n_head = 2, .n_kv_head = 1, .n_embd = 8, .ffn_hidden = 16,
                           .block_size = 4, .vocab_size = 16, .rope_theta = 10000, .norm_eps = 1e-5};
    model tbl;
    memset(&tbl, 0, sizeof tbl);
    ddp_err err = {0};
    CHECK(llama_tensor_table(&llama_family_llama, &s, &tbl, &err) == DDP_OK, "%d layers: %s", LLAMA_MAX_LAYERS, err.msg);
    int n_block = (int)(sizeof block / sizeof block[0]);
    CHECK(tbl.n_tensors == 3 + LLAMA_MAX_LAYERS * n_block, "%d tensors", tbl.n_tensors);
    int wrong = 0;
    for (int l = 0; l < LLAMA_MAX_LAYERS && tbl.n_tensors == 3 + LLAMA_MAX_LAYERS * n_block; l++)
        for (int i = 0; i < n_block; i++) {
            char want[128];
            snprintf(want, sizeof want, "model.layers.%d.%s", l, block[i]);
            const char *have = tbl.tensors[1 + l * n_block + i].name;
            if (strcmp(have, want) && wrong++ < 3)
                CHECK(false, "tensor %d is \"%s\", expected \"%s\"", 1 + l * n_block + i, have, want);
        }
    CHECK(wrong == 0, "%d tensor names of %d layers not whole", wrong, LLAMA_MAX_LAYERS);
    /* a name that does not fit is refused, never cut short */
    char longest[MODEL_TENSOR_NAME_MAX + 1];
    memset(longest, 'x', MODEL_TENSOR_NAME_MAX);
    longest[MODEL_TENSOR_NAME_MAX] = '\0';
    size_t off = 0;
    int n = tbl.n_tensors;
    CHECK(model_add_tensor(&tbl, longest, 1, 0, false, &off, &err) == DDP_ERUNTIME && tbl.n_tensors == n,
          "a %d-byte tensor name taken", MODEL_TENSOR_NAME_MAX);
    CHECK_STR_CONTAINS(err.msg, "is longer than 63 bytes");
    longest[MODEL_TENSOR_NAME_MAX - 1] = '\0';
    CHECK(model_add_tensor(&tbl, longest, 1, 0, false, &off, &err) == DDP_OK &&
          !strcmp(tbl.tensors[n].name, longest), "a %d-byte tensor name not whole", MODEL_TENSOR_NAME_MAX - 1);
    model_free_tensors(&tbl);
}

/* `--cuda` runs the fixture checks on the CUDA device; the checks of the model's own code
 * (tables, tying, init, description) run on the CPU only. */
int main(int argc, char **argv)
{
    lfx x;
    bool cuda = argc > 1 && !strcmp(argv[1], "--cuda");
    device *d = gfx_open_device(cuda);
    CHECK(d != NULL, "device");
    if (!d)
        return check_done("test_llama");
    int rc = lfx_setup(&x, d, TENSOR_F32);
    CHECK(rc == 0, "fixture setup");
    if (!rc) {
        const llama_shape *s = &x.shape;
        fprintf(stderr, "llama-reference L=%lld C=%lld NH=%lld NKV=%lld FFN=%lld T=%lld V=%lld B=%lld%s on %s:\n",
                (long long)s->n_layer, (long long)s->n_embd, (long long)s->n_head, (long long)s->n_kv_head,
                (long long)s->ffn_hidden, (long long)x.f.T, (long long)s->vocab_size, (long long)x.f.B,
                s->tie_embeddings ? " tied" : "", d->name);
        if (!cuda)
            check_rope_tables(&x);
        check_forward_backward(&x);
        gfx_check_recompute(&x.f, lfx_build);
        gfx_check_chunked_classifier(&x.f, lfx_build, LFX_RTOL, LFX_SCALE_ATOL);
        gfx_check_trajectory(&x.f, "adamw", 0.0, LFX_RTOL, LFX_TRAJ_FLOORS);
        gfx_check_trajectory(&x.f, "adamw_clip", 0.5, LFX_RTOL, LFX_TRAJ_FLOORS);
        if (!cuda) {
            check_tied(&x);
            check_init(&x);
            check_description(&x);
            check_create(d);
            check_deepest_names();
        }
    }
    gfx_teardown(&x.f);
    d->ops->destroy(d);
    return check_done("test_llama");
}
