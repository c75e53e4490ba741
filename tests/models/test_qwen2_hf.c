/* test_qwen2_hf.c — Qwen2 (models/qwen2.c: the Llama family with q/k/v biases) imported from and
 * exported to a Hugging Face `save_pretrained` folder on the CPU backend, against fixture
 * hf-qwen2-tiny: the shape from config.json (checked against MANIFEST's header); the float32
 * import's logits against the `logits` transformers computed, the bf16/ folder's against
 * `logits_bf16`; the export of each import is the fixture's model.safetensors byte for byte and
 * its config.json but for transformers_version; the biases' gradients against central differences
 * of the loss (a bias whose gradient is dropped or misplaced fails); the description read back as
 * Qwen2 and not as a Llama; a Llama folder refused as Qwen2 and the Qwen2 folder as a Llama, each
 * naming model_type; a stretch in transformers 5's rope_parameters refused. Every shape comes from MANIFEST and config.json, so another fixture made the
 * same way passes unchanged. */
#include "tests/check.h"
#include "tests/fixture.h"

#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "models/llama_hf.h"
#include "models/qwen2.h"
#include "tests/models/llama_family_checks.h"

#define TOL (HF_LOGITS_TOL_FACTOR * HF_QWEN2_TINY_LOGITS_FLOOR)

static fixture_manifest fx;
static device *dev;
static llama_shape shape;
static int64_t B, T;
static char tmp[] = "/tmp/test_qwen2_hf.XXXXXX";
static char bf16_dir[sizeof fx.dir + 8];

static model *build(void)
{
    sample_layout data = {.input = {SAMPLE_I32, T}, .target = {SAMPLE_I32, T}, .n_classes = shape.vocab_size};
    model *m = NULL;
    ddp_err err = {0};
    CHECK(llama_create(&qwen2_family, &shape, &(lm_run){.compute = TENSOR_F32}, dev, &data, B, MODEL_BUFFERS_WHOLE, &m, &err) == DDP_OK, "create: %s",
          err.msg);
    return m;
}

static float *params_of(model *m) { return hf_params_of(dev, m); }

/* The batch: the fixture's input, its next tokens as the targets (the last position's own). */
typedef struct batch_dev { void *x, *y, *stats; model_batch b; } batch_dev;

static batch_dev batch_make(const int32_t *input)
{
    int64_t rows = B * T;
    int32_t *target = malloc(sizeof(int32_t) * (size_t)rows);
    for (int64_t i = 0; i < rows; i++)
        target[i] = (i + 1) % T ? input[i + 1] : input[i];
    batch_dev d = {0};
    dev->ops->alloc(dev, sizeof(int32_t) * (size_t)rows, &d.x, NULL);
    dev->ops->alloc(dev, sizeof(int32_t) * (size_t)rows, &d.y, NULL);
    dev->ops->alloc(dev, 2 * sizeof(float), &d.stats, NULL);
    dev->ops->upload(dev, d.x, input, sizeof(int32_t) * (size_t)rows, NULL);
    dev->ops->upload(dev, d.y, target, sizeof(int32_t) * (size_t)rows, NULL);
    free(target);
    d.b = (model_batch){.inputs = d.x, .targets = d.y, .rows = B};
    return d;
}

static void batch_free(batch_dev *d)
{
    dev->ops->free(dev, d->x);
    dev->ops->free(dev, d->y);
    dev->ops->free(dev, d->stats);
}

/* The summed loss of the batch (stats[0]). */
static double loss_of(model *m, batch_dev *d)
{
    float stats[2];
    ddp_err err = {0};
    dev->ops->fill(dev, TENSOR_F32, d->stats, 2, 0.0f, NULL);
    CHECK(m->ops->evaluate(m, &d->b, d->stats, &err) == DDP_OK, "evaluate: %s", err.msg);
    dev->ops->download(dev, stats, d->stats, sizeof stats, NULL);
    return stats[0];
}

static double logits_error(model *m, batch_dev *d, const float *ref)
{
    return hf_batch_logits_error(dev, m, &d->b, T, d->stats, ref, shape.vocab_size);
}

static void test_import(model *m, batch_dev *d, const float *ref, const float *ref_bf16)
{
    ddp_err err = {0};
    CHECK(fixture_header_int(&fx, "L") == shape.n_layer && fixture_header_int(&fx, "C") == shape.n_embd &&
          fixture_header_int(&fx, "NH") == shape.n_head && fixture_header_int(&fx, "NKV") == shape.n_kv_head &&
          fixture_header_int(&fx, "FFN") == shape.ffn_hidden && fixture_header_int(&fx, "V") == shape.vocab_size,
          "config.json's shape is MANIFEST's");
    CHECK(llama_hf_load_model(&qwen2_family, m, fx.dir, &err) == DDP_OK, "import: %s", err.msg);
    double e = logits_error(m, d, ref);
    printf("float32 import: logits within %.3g of the largest (tolerance %.3g)\n", e, TOL);
    CHECK(e <= TOL, "float32 logits off by %.3g", e);
    CHECK(llama_hf_load_model(&qwen2_family, m, bf16_dir, &err) == DDP_OK, "bf16 import: %s", err.msg);
    e = logits_error(m, d, ref_bf16);
    printf("bf16 import: logits within %.3g of logits_bf16\n", e);
    CHECK(e <= TOL, "bf16 logits off by %.3g", e);
    float *p = params_of(m);
    size_t inexact = 0;
    for (size_t i = 0; i < m->n_params; i++)
        inexact += p[i] != bf16_rounded(p[i]);
    CHECK(inexact == 0, "bf16 import: %zu parameters not bf16 values", inexact);
    free(p);
}

/* ---- the biases' gradients ----------------------------------------------------------------- */

/* Each layer's largest q, k and v bias gradients against central differences of the summed loss:
 * float32's loss rounding (a few ulps of the loss over 2h) bounds the difference's error. */
static void test_bias_grads(model *m, batch_dev *d)
{
    ddp_err err = {0};
    CHECK(llama_hf_load_model(&qwen2_family, m, fx.dir, &err) == DDP_OK, "import: %s", err.msg);
    dev->ops->fill(dev, TENSOR_F32, d->stats, 2, 0.0f, NULL);
    CHECK(m->ops->forward_backward(m, &d->b, 1.0f, false, NULL, NULL, d->stats, &err) == DDP_OK,
          "forward_backward: %s", err.msg);
    float *g = malloc(m->n_params * sizeof *g), *p = params_of(m);
    dev->ops->download(dev, g, m->grads, m->n_params * sizeof *g, NULL);
    const char *which[] = {"q_proj", "k_proj", "v_proj"};
    for (int l = 0; l < shape.n_layer; l++)
        for (int k = 0; k < 3; k++) {
            char name[96];
            snprintf(name, sizeof name, "model.layers.%d.self_attn.%s.bias", l, which[k]);
            const param_tensor *t = model_find_tensor(m, name);
            CHECK(t && t->ndim == 1, "%s is a tensor of the model", name);
            if (!t)
                continue;
            size_t at = t->offset;
            for (size_t i = 0; i < t->numel; i++)
                at = fabsf(g[t->offset + i]) > fabsf(g[at]) ? t->offset + i : at;
            const float h = 1e-2f, v = p[at];
            double lp, lm;
            p[at] = v + h, dev->ops->upload(dev, m->params, p, m->n_params * sizeof *p, NULL), lp = loss_of(m, d);
            p[at] = v - h, dev->ops->upload(dev, m->params, p, m->n_params * sizeof *p, NULL), lm = loss_of(m, d);
            p[at] = v, dev->ops->upload(dev, m->params, p, m->n_params * sizeof *p, NULL);
            double fd = (lp - lm) / (2 * h), loss_ulp = 8 * 1.2e-7 * fabs(lp) / (2 * h);
            double tol = 0.02 * fabs(fd) + loss_ulp;
            CHECK(fabs(fd - g[at]) <= tol && g[at] != 0, "%s: gradient %.6g, central difference %.6g (tolerance %.3g)",
                  name, g[at], fd, tol);
        }
    free(g);
    free(p);
}

/* ---- export, description, refusals ------------------------------------------------------- */


/* Loading dir fails naming needle. */
static void refused(model *m, const char *dir, const char *needle)
{
    ddp_err err = {0};
    CHECK(llama_hf_load_model(&qwen2_family, m, dir, &err) == DDP_EUSAGE, "%s loaded", dir);
    CHECK_STR_CONTAINS(err.msg, needle);
}

static void test_refusals(model *m)
{
    llama_shape s;
    ddp_err err = {0};
    int n;
    out_tensor *t = fixture_tensors(fx.dir, &n);
    out_tensor *bias = find(t, n, "model.layers.1.self_attn.k_proj.bias"), saved = *bias;
    *bias = t[n - 1];
    refused(m, folder_variant(tmp, fx.dir, "no-bias", NULL, t, n - 1), "has no tensor model.layers.1.self_attn.k_proj.bias");
    t[n - 1] = *bias, *bias = saved;
    char *config = config_with(fx.dir, "use_sliding_window", "true");
    refused(m, folder_variant(tmp, fx.dir, "sliding", config, t, n), "use_sliding_window");
    free(config);
    /* transformers 5 writes a stretch in rope_parameters, where no rope_scaling key refuses it */
    config = config_with(fx.dir, "rope_scaling", "null, \"rope_parameters\": {\"rope_type\": \"llama3\", \"factor\": 8.0, "
                         "\"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 16}");
    refused(m, folder_variant(tmp, fx.dir, "v5-stretch", config, t, n),
            "rope_parameters.rope_type is \"llama3\"; ddprun's Qwen2 applies RoPE unscaled");
    free(config);
    free_tensors(t, n);
    char llama_dir[sizeof fx.dir + 32];
    snprintf(llama_dir, sizeof llama_dir, "%s/../hf-llama-tiny", fx.dir);
    CHECK(llama_hf_read_shape(&qwen2_family, llama_dir, &s, &err) == DDP_EUSAGE, "a Llama folder read as Qwen2");
    CHECK_STR_CONTAINS(err.msg, "model_type");
    CHECK(llama_hf_read_shape(&llama_family_llama, fx.dir, &s, &err) == DDP_EUSAGE, "a Qwen2 folder read as a Llama");
    CHECK_STR_CONTAINS(err.msg, "model_type");
}

int main(void)
{
    ddp_err err = {0};
    if (fixture_manifest_read(&fx, "hf-qwen2-tiny") || device_cpu_create(&dev, &err) || !mkdtemp(tmp))
        return 1;
    snprintf(bf16_dir, sizeof bf16_dir, "%s/bf16", fx.dir);
    B = fixture_header_int(&fx, "B"), T = fixture_header_int(&fx, "T");
    CHECK(llama_hf_read_shape(&qwen2_family, fx.dir, &shape, &err) == DDP_OK, "config.json: %s", err.msg);
    int32_t *input = fixture_load(&fx, "input", NULL);
    float *ref = fixture_load(&fx, "logits", NULL), *ref_bf16 = fixture_load(&fx, "logits_bf16", NULL);
    CHECK(input && ref && ref_bf16 && B > 0 && T > 0, "fixture input/logits/logits_bf16 and B, T");
    if (input && ref && ref_bf16 && !err.msg[0]) {
        model *m = build();
        batch_dev d = batch_make(input);
        test_import(m, &d, ref, ref_bf16);
        test_bias_grads(m, &d);
        char dir[600];
        snprintf(dir, sizeof dir, "%s/export", tmp);
        family_export_matches(dev, &qwen2_family, m, &shape, fx.dir, ST_F32, dir);
        snprintf(dir, sizeof dir, "%s/export-bf16", tmp);
        family_export_matches(dev, &qwen2_family, m, &shape, bf16_dir, ST_BF16, dir);
        family_description_checks(&qwen2_family, m, &shape, T);
        test_refusals(m);
        family_kv_heads_absent(&qwen2_family, fx.dir, tmp, 32);
        batch_free(&d);
        m->ops->destroy(m);
    }
    free(input);
    free(ref);
    free(ref_bf16);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    CHECK(system(cmd) == 0, "%s", cmd);
    dev->ops->destroy(dev);
    return check_done("test_qwen2_hf");
}
