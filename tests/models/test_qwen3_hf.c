/* test_qwen3_hf.c [--cuda] — Qwen3 (models/qwen3.c: the Llama family with an RMSNorm over each q
 * and k head before RoPE, heads of their own size) against fixture hf-qwen3-tiny, transformers' own
 * save with its float64 logits, loss and gradients: the shape from config.json (MANIFEST's); the
 * float32 import's logits within HF_LOGITS_TOL_FACTOR times MANIFEST's floor of the largest, the
 * bf16/ folder's against logits_bf16; the mean loss over the fixture's targets, and every
 * parameter's gradient (q_norm's and k_norm's included) within that factor times grad_floor of its
 * tensor's largest; train.recompute selective and full giving the same gradients bit for bit in
 * less memory; the export of each import the fixture's model.safetensors byte for byte and its
 * config.json but for transformers_version; the description as Qwen3's, head_dim in it, rebuilt as
 * Qwen3 by the registry; the folder refused as a Llama's and as Qwen2's, a Qwen2 folder as Qwen3's,
 * attention_bias and use_sliding_window true refused naming the key, head_dim absent read as
 * Qwen3Config's 128 and null refused. Every shape comes from
 * MANIFEST and config.json, so another fixture made the same way passes unchanged. `--cuda`: the
 * same on the CUDA backend (the emulator's in emulated builds), and with precision bf16 the logits
 * and every gradient within tolerances derived from bf16 rounding (test_bf16). */
#include "tests/check.h"
#include "tests/fixture.h"
#include "tests/models/gfx_bf16.h"

#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "models/llama_hf.h"
#include "models/qwen2.h"
#include "models/qwen3.h"
#include "tests/models/llama_family_checks.h"

static gfx f; /* manifest: hf-qwen3-tiny's; m, B, T, dev, and the batch's device buffers */
static llama_shape shape;
static double floor_logits, floor_grads;
static char tmp[] = "/tmp/test_qwen3_hf.XXXXXX";

static model *build(gfx *g, const lm_run *run, ddp_err *err)
{
    sample_layout data = {.input = {SAMPLE_I32, g->T}, .target = {SAMPLE_I32, g->T}, .n_classes = shape.vocab_size};
    model *m = NULL;
    return llama_create(&qwen3_family, &shape, run, g->dev, &data, g->B, MODEL_BUFFERS_WHOLE, &m, err) ? NULL : m;
}

static void test_shape(void)
{
    const fixture_manifest *mf = &f.manifest;
    CHECK(fixture_header_int(mf, "L") == shape.n_layer && fixture_header_int(mf, "C") == shape.n_embd &&
          fixture_header_int(mf, "NH") == shape.n_head && fixture_header_int(mf, "NKV") == shape.n_kv_head &&
          fixture_header_int(mf, "HD") == llama_head_dim(&shape) && fixture_header_int(mf, "FFN") == shape.ffn_hidden &&
          fixture_header_int(mf, "V") == shape.vocab_size && fixture_header_int(mf, "tied") == shape.tie_embeddings,
          "config.json's shape is MANIFEST's");
    CHECK(llama_shape_own_head_dim(&shape) == (shape.n_embd != shape.n_head * fixture_header_int(mf, "HD")),
          "head_dim %lld held as the shape's own exactly when it is not n_embd / n_head", (long long)shape.head_dim);
}

static void test_logits(void)
{
    ddp_err err = {0};
    const double tol = HF_LOGITS_TOL_FACTOR * floor_logits;
    float *ref = fixture_load(&f.manifest, "logits", NULL), *ref_bf16 = fixture_load(&f.manifest, "logits_bf16", NULL);
    model_batch b = gfx_batch(&f);
    char bf16_dir[sizeof f.manifest.dir + 8];
    snprintf(bf16_dir, sizeof bf16_dir, "%s/bf16", f.manifest.dir);
    CHECK(llama_hf_load_model(&qwen3_family, f.m, bf16_dir, &err) == DDP_OK, "bf16 import: %s", err.msg);
    double e = hf_batch_logits_error(f.dev, f.m, &b, f.T, f.stats, ref_bf16, shape.vocab_size);
    printf("bf16 import: logits within %.3g of logits_bf16 (tolerance %.3g)\n", e, tol);
    CHECK(e <= tol, "bf16 logits off by %.3g", e);
    CHECK(llama_hf_load_model(&qwen3_family, f.m, f.manifest.dir, &err) == DDP_OK, "import: %s", err.msg);
    e = hf_batch_logits_error(f.dev, f.m, &b, f.T, f.stats, ref, shape.vocab_size);
    printf("float32 import: logits within %.3g of the largest (tolerance %.3g)\n", e, tol);
    CHECK(e <= tol, "float32 logits off by %.3g", e);
    free(ref), free(ref_bf16);
}

/* The fixture's next reference gradient from MANIFEST entry *i on (an entry `grad.<tensor>`): the
 * reference values, the first *numel values of m's tensor *t (the embedding's first vocab_size rows:
 * ours are padded); the caller frees them. NULL after the last. A reference that names no tensor of
 * m, or is larger than its tensor, fails the test and is passed over. */
static float *next_grad(const model *m, int *i, const param_tensor **t, int64_t *numel)
{
    while (*i < f.manifest.n_tensors) {
        const char *name = f.manifest.tensors[(*i)++].name;
        if (strncmp(name, "grad.", 5))
            continue;
        *t = model_find_tensor(m, name + 5);
        float *ref = fixture_load(&f.manifest, name, numel);
        const bool fits = *t && ref && (size_t)*numel <= (*t)->numel;
        CHECK(fits, "%s: a tensor of the model, of the fixture's size", name);
        if (fits)
            return ref;
        free(ref);
    }
    return NULL;
}

/* The loss and every gradient of the fixture's batch (f.m holds the float32 import). A log-softmax
 * moves by at most twice its logits' error, which is within tol times the largest logit. */
static void test_gradients(void)
{
    ddp_err err = {0};
    float *loss = fixture_load(&f.manifest, "loss", NULL), *logits = fixture_load(&f.manifest, "logits", NULL);
    int32_t *target = fixture_load(&f.manifest, "target", NULL);
    int64_t n_targets = 0, n = f.B * f.T;
    float largest = 0;
    for (int64_t i = 0; i < n; i++)
        n_targets += target[i] != XENT_NO_TARGET;
    for (int64_t i = 0; i < n * shape.vocab_size; i++)
        largest = fmaxf(largest, fabsf(logits[i]));
    f.dev->ops->fill(f.dev, TENSOR_F32, f.stats, 2, 0.0f, NULL);
    f.dev->ops->fill(f.dev, TENSOR_F32, f.m->grads, f.m->n_params, 0.0f, NULL);
    model_batch b = gfx_batch(&f);
    CHECK(f.m->ops->forward_backward(f.m, &b, 1.0f / (float)n_targets, false, NULL, NULL, f.stats, &err) == DDP_OK,
          "forward_backward: %s", err.msg);
    float stats[2];
    f.dev->ops->download(f.dev, stats, f.stats, sizeof stats, NULL);
    const double mean = stats[0] / (double)n_targets, loss_tol = 2 * HF_LOGITS_TOL_FACTOR * floor_logits * largest;
    printf("loss %.9g, transformers' %.9g (tolerance %.3g)\n", mean, (double)loss[0], loss_tol);
    CHECK(fabs(mean - loss[0]) <= loss_tol, "loss %.9g, transformers' %.9g", mean, (double)loss[0]);
    float *g = malloc(f.m->n_params * sizeof *g);
    f.dev->ops->download(f.dev, g, f.m->grads, f.m->n_params * sizeof *g, NULL);
    double worst = 0;
    int compared = 0;
    const param_tensor *t;
    int64_t numel = 0;
    float *ref;
    for (int i = 0; (ref = next_grad(f.m, &i, &t, &numel)) != NULL; free(ref)) {
        double diff = 0, big = 0;
        for (int64_t j = 0; j < numel; j++) {
            diff = fmax(diff, fabs((double)g[t->offset + j] - ref[j]));
            big = fmax(big, fabs((double)ref[j]));
        }
        CHECK(diff <= HF_LOGITS_TOL_FACTOR * floor_grads * big, "%s off by %.3g of its largest %.3g", t->name,
              diff / big, big);
        worst = fmax(worst, diff / big);
        compared++;
    }
    printf("%d gradients within %.3g of their largest (tolerance %.3g)\n", compared, worst,
           HF_LOGITS_TOL_FACTOR * floor_grads);
    CHECK(compared == f.m->n_tensors, "%d gradients compared, the model has %d tensors", compared, f.m->n_tensors);
    free(g), free(loss), free(logits), free(target);
}

/* ---- precision bf16 (CUDA) ------------------------------------------------------------------
 * Norm-wise tolerances, derived as test_llama_bf16.c derives the Llama's: one rounding to bf16 errs
 * with RMS 2^-8/sqrt(3), the stochastic weight copy with at most 2^-7/sqrt(6), independent errors
 * add in quadrature, a gain of 4 for the norms' divisions and the softmax. Qwen3's forward rounds
 * R = 3 + 13·L stored values (the Llama's 11 per layer and the q and k norms' outputs) and reads
 * W = 3 + 11·L rounded weight tensors (q_norm, k_norm); a layer's gradient carries 3 + 11 roundings
 * per layer above and including its own (the norms' input gradients), the embedding's the whole
 * stack, model.norm's 2. */
#define BF16_GAIN 4.0
static const double RNE2 = 1.0 / (65536.0 * 3.0), SR2 = 1.0 / (16384.0 * 6.0);

static double bf16_tolerance(const char *grad_of)
{
    const double L = (double)shape.n_layer, R = 3 + 13 * L, W = 3 + 11 * L;
    double back = 0;
    int layer = -1;
    if (grad_of && sscanf(grad_of, "model.layers.%d.", &layer) == 1)
        back = 3 + 11 * (L - layer);
    else if (grad_of)
        back = strcmp(grad_of, "model.embed_tokens.weight") ? 2 : 3 + 11 * L;
    return BF16_GAIN * sqrt((R + back) * RNE2 + W * SR2);
}

/* A bf16 model of the float32 folder: its logits and every gradient against transformers' float64
 * ones, and farther than float32 could be (bf16 is really used). */
static void test_bf16(void)
{
    ddp_err err = {0};
    gfx b = f;
    b.m = build(&b, &(lm_run){.compute = TENSOR_BF16}, &err);
    CHECK(b.m && llama_hf_load_model(&qwen3_family, b.m, f.manifest.dir, &err) == DDP_OK &&
          model_params_changed(b.m, 0, 0, &err) == DDP_OK, "bf16 model: %s", err.msg);
    if (!b.m)
        return;
    int32_t *target = fixture_load(&f.manifest, "target", NULL);
    int64_t n_targets = 0, V = shape.vocab_size;
    for (int64_t i = 0; i < f.B * f.T; i++)
        n_targets += target[i] != XENT_NO_TARGET;
    model_batch batch = gfx_batch(&b);
    f.dev->ops->fill(f.dev, TENSOR_F32, f.stats, 2, 0.0f, NULL);
    CHECK(b.m->ops->evaluate(b.m, &batch, f.stats, &err) == DDP_OK, "bf16 evaluate: %s", err.msg);
    float *logits = gfx_bf16_logits(&b, V), *ref = fixture_load(&f.manifest, "logits", NULL);
    CHECK(b.m->ops->forward_backward(b.m, &batch, 1.0f / (float)n_targets, false, NULL, NULL, f.stats, &err) == DDP_OK,
          "bf16 forward_backward: %s", err.msg); /* its logits become their gradient */
    const double e = gfx_rel_l2(logits, ref, (size_t)(f.B * f.T * V)), tol = bf16_tolerance(NULL);
    printf("bf16: logits within %.3g (norm-wise; tolerance %.3g)\n", e, tol);
    CHECK(e <= tol && e > 1e-4, "bf16 logits off by %.3g (tolerance %.3g; above 1e-4 if bf16 is used)", e, tol);
    float *g = malloc(b.m->n_params * sizeof *g);
    f.dev->ops->download(f.dev, g, b.m->grads, b.m->n_params * sizeof *g, NULL);
    double worst = 0;
    const param_tensor *t;
    int64_t numel = 0;
    float *gref;
    for (int i = 0; (gref = next_grad(b.m, &i, &t, &numel)) != NULL; free(gref)) {
        const double ge = gfx_rel_l2(g + t->offset, gref, (size_t)numel), gtol = bf16_tolerance(t->name);
        CHECK(ge <= gtol, "bf16 %s off by %.3g (tolerance %.3g)", t->name, ge, gtol);
        worst = fmax(worst, ge / gtol);
    }
    printf("bf16: every gradient within %.2f of its tolerance\n", worst);
    free(g), free(logits), free(ref), free(target);
    b.m->ops->destroy(b.m);
}

/* config.json's `key` set to value: refused as Qwen3, naming needle. */
static void refused_with(const char *key, const char *value, const char *needle)
{
    int n;
    out_tensor *t = fixture_tensors(f.manifest.dir, &n);
    char *config = config_with(f.manifest.dir, key, value);
    ddp_err err = {0};
    const char *dir = folder_variant(tmp, f.manifest.dir, "variant", config, t, n);
    CHECK(llama_hf_load_model(&qwen3_family, f.m, dir, &err) == DDP_EUSAGE, "%s %s loaded", key, value);
    CHECK_STR_CONTAINS(err.msg, needle);
    free(config);
    free_tensors(t, n);
}

static void test_refusals(void)
{
    llama_shape s;
    ddp_err err = {0};
    char qwen2_dir[sizeof f.manifest.dir + 32];
    refused_with("attention_bias", "true", "attention_bias is true; ddprun's Qwen3 has no q/k/v/o biases");
    refused_with("use_sliding_window", "true", "use_sliding_window is true; ddprun's Qwen3 attends to every earlier");
    CHECK(llama_hf_read_shape(&llama_family_llama, f.manifest.dir, &s, &err) == DDP_EUSAGE,
          "a Qwen3 folder as a Llama");
    CHECK_STR_CONTAINS(err.msg, "model_type is \"qwen3\"");
    CHECK(llama_hf_read_shape(&qwen2_family, f.manifest.dir, &s, &err) == DDP_EUSAGE, "a Qwen3 folder as Qwen2");
    CHECK_STR_CONTAINS(err.msg, "model_type is \"qwen3\"");
    snprintf(qwen2_dir, sizeof qwen2_dir, "%s/../hf-qwen2-tiny", f.manifest.dir);
    CHECK(llama_hf_read_shape(&qwen3_family, qwen2_dir, &s, &err) == DDP_EUSAGE, "a Qwen2 folder as Qwen3");
    CHECK_STR_CONTAINS(err.msg, "model_type is \"qwen2\"; ddprun imports Qwen3");
}

/* A config.json without head_dim means Qwen3Config's default of 128, as transformers reads it (the
 * released configs all have the key; a hand-made one may not), and a null one is refused. */
static void test_head_dim_absent(void)
{
    int n;
    out_tensor *t = fixture_tensors(f.manifest.dir, &n);
    char *config = fixture_config(f.manifest.dir), *line = strstr(config, "  \"head_dim\"");
    CHECK(line != NULL, "the fixture's config.json has a head_dim line");
    if (line)
        memmove(line, strchr(line, '\n') + 1, strlen(strchr(line, '\n') + 1) + 1);
    const char *dir = folder_variant(tmp, f.manifest.dir, "nohead", config, t, n);
    llama_shape s;
    ddp_err err = {0};
    CHECK(llama_hf_read_shape(&qwen3_family, dir, &s, &err) == DDP_OK && llama_head_dim(&s) == 128,
          "head_dim absent read as %lld (Qwen3Config's default: 128): %s", (long long)llama_head_dim(&s), err.msg);
    free(config);
    config = config_with(f.manifest.dir, "head_dim", "null");
    dir = folder_variant(tmp, f.manifest.dir, "nullhead", config, t, n);
    CHECK(llama_hf_read_shape(&qwen3_family, dir, &s, &err) == DDP_EUSAGE, "head_dim null read");
    CHECK_STR_CONTAINS(err.msg, "head_dim is null; expected an even head size");
    free(config);
    free_tensors(t, n);
}

int main(int argc, char **argv)
{
    bool cuda = argc > 1 && !strcmp(argv[1], "--cuda");
    ddp_err err = {0};
    f.dev = gfx_open_device(cuda);
    if (!f.dev || fixture_manifest_read(&f.manifest, "hf-qwen3-tiny") || !mkdtemp(tmp))
        return 1;
    f.B = fixture_header_int(&f.manifest, "B"), f.T = fixture_header_int(&f.manifest, "T");
    floor_logits = fixture_header_double(&f.manifest, "floor");
    floor_grads = fixture_header_double(&f.manifest, "grad_floor");
    CHECK(floor_logits > 0 && floor_grads > 0, "MANIFEST's header gives floor and grad_floor");
    CHECK(llama_hf_read_shape(&qwen3_family, f.manifest.dir, &shape, &err) == DDP_OK, "config.json: %s", err.msg);
    int32_t *input = fixture_load(&f.manifest, "input", NULL), *target = fixture_load(&f.manifest, "target", NULL);
    CHECK(input && target && f.B > 0 && f.T > 0, "fixture input, target, B and T");
    if (input && target && !err.msg[0] && floor_logits > 0 && floor_grads > 0 &&
        (f.m = build(&f, &(lm_run){.compute = TENSOR_F32}, &err))) {
        const size_t bytes = (size_t)(f.B * f.T) * sizeof(int32_t);
        f.tokens = gfx_device_copy(f.dev, input, bytes), f.targets = gfx_device_copy(f.dev, target, bytes);
        f.stats = gfx_device_copy(f.dev, (float[2]){0, 0}, 2 * sizeof(float));
        test_shape();
        test_logits();
        test_gradients();
        gfx_check_recompute(&f, build);
        if (cuda)
            test_bf16();
        char dir[600], bf16_dir[sizeof f.manifest.dir + 8];
        snprintf(bf16_dir, sizeof bf16_dir, "%s/bf16", f.manifest.dir);
        snprintf(dir, sizeof dir, "%s/export", tmp);
        family_export_matches(f.dev, &qwen3_family, f.m, &shape, f.manifest.dir, ST_F32, dir);
        snprintf(dir, sizeof dir, "%s/export-bf16", tmp);
        family_export_matches(f.dev, &qwen3_family, f.m, &shape, bf16_dir, ST_BF16, dir);
        family_description_checks(&qwen3_family, f.m, &shape, f.T);
        CHECK(!llama_shape_own_head_dim(&shape) || strstr(f.m->description, " head_dim="),
              "an own head_dim in the description: %s", f.m->description);
        test_refusals();
        test_head_dim_absent();
        family_kv_heads_absent(&qwen3_family, f.manifest.dir, tmp, 32);
    } else
        CHECK(0, "qwen3 build: %s", err.msg);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    CHECK(system(cmd) == 0, "%s", cmd);
    free(input), free(target);
    gfx_teardown(&f);
    f.dev->ops->destroy(f.dev);
    return check_done(cuda ? "test_qwen3_hf --cuda" : "test_qwen3_hf");
}
