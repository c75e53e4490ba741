/* test_mistral_hf.c — Mistral (models/mistral.c: the Llama family with Mistral's files) imported
 * from and exported to a Hugging Face `save_pretrained` folder on the CPU backend, against fixture
 * hf-mistral-tiny: the shape from config.json (checked against MANIFEST's header); the float32
 * import's logits against the `logits` transformers computed, the bf16/ folder's against
 * `logits_bf16`; the export of each import is the fixture's model.safetensors byte for byte and its
 * config.json but for transformers_version; the description read back as Mistral and not as a
 * Llama, and rebuilt as Mistral by the registry; a sliding window, a rope_scaling and a Llama
 * folder refused as Mistral, and the Mistral folder as a Llama, each naming the key. Every shape
 * comes from MANIFEST and config.json, so another fixture made the same way passes unchanged. */
#include "tests/check.h"
#include "tests/fixture.h"

#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "models/llama_hf.h"
#include "models/mistral.h"
#include "tests/models/llama_family_checks.h"

#define TOL (HF_LOGITS_TOL_FACTOR * HF_MISTRAL_TINY_LOGITS_FLOOR)

static fixture_manifest fx;
static device *dev;
static llama_shape shape;
static int64_t B, T;
static char tmp[] = "/tmp/test_mistral_hf.XXXXXX";
static char bf16_dir[sizeof fx.dir + 8];

static model *build(void)
{
    sample_layout data = {.input = {SAMPLE_I32, T}, .target = {SAMPLE_I32, T}, .n_classes = shape.vocab_size};
    model *m = NULL;
    ddp_err err = {0};
    CHECK(llama_create(&mistral_family, &shape, &(lm_run){.compute = TENSOR_F32}, dev, &data, B, MODEL_BUFFERS_WHOLE,
                       &m, &err) == DDP_OK, "create: %s", err.msg);
    return m;
}

static void test_import(model *m, const int32_t *input, const float *ref, const float *ref_bf16)
{
    ddp_err err = {0};
    CHECK(fixture_header_int(&fx, "L") == shape.n_layer && fixture_header_int(&fx, "C") == shape.n_embd &&
          fixture_header_int(&fx, "NH") == shape.n_head && fixture_header_int(&fx, "NKV") == shape.n_kv_head &&
          fixture_header_int(&fx, "FFN") == shape.ffn_hidden && fixture_header_int(&fx, "NPOS") == shape.block_size &&
          fixture_header_int(&fx, "V") == shape.vocab_size && fixture_header_double(&fx, "rope_theta") == shape.rope_theta &&
          fixture_header_double(&fx, "norm_eps") == shape.norm_eps && !llama_rope_scaled(&shape),
          "config.json's shape is MANIFEST's");
    CHECK(llama_hf_load_model(&mistral_family, m, fx.dir, &err) == DDP_OK, "import: %s", err.msg);
    double e = hf_logits_error(dev, m, input, B, T, ref, shape.vocab_size);
    printf("float32 import: logits within %.3g of the largest (tolerance %.3g)\n", e, TOL);
    CHECK(e <= TOL, "float32 logits off by %.3g", e);
    CHECK(llama_hf_load_model(&mistral_family, m, bf16_dir, &err) == DDP_OK, "bf16 import: %s", err.msg);
    e = hf_logits_error(dev, m, input, B, T, ref_bf16, shape.vocab_size);
    printf("bf16 import: logits within %.3g of logits_bf16\n", e);
    CHECK(e <= TOL, "bf16 logits off by %.3g", e);
    CHECK(hf_logits_error(dev, m, input, B, T, ref, shape.vocab_size) > TOL,
          "the bf16 folder gives the float32 logits: its values not bf16?");
}


/* hf-mistral-tiny with config.json's `key` set to value: refused as Mistral, naming needle. */
static void refused_with(model *m, const char *key, const char *value, const char *needle)
{
    int n;
    out_tensor *t = fixture_tensors(fx.dir, &n);
    char *config = config_with(fx.dir, key, value);
    ddp_err err = {0};
    CHECK(llama_hf_load_model(&mistral_family, m, folder_variant(tmp, fx.dir, "variant", config, t, n), &err) ==
          DDP_EUSAGE, "%s %s loaded", key, value);
    CHECK_STR_CONTAINS(err.msg, needle);
    free(config);
    free_tensors(t, n);
}

static void test_refusals(model *m)
{
    refused_with(m, "sliding_window", "4096",
                 "sliding_window is 4096; ddprun's Mistral attends to every earlier position");
    refused_with(m, "rope_theta", "1000000.0, \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0}",
                 "rope_scaling is an object; ddprun's Mistral applies RoPE unscaled");
    refused_with(m, "hidden_act", "\"gelu\"", "hidden_act is \"gelu\"; ddprun's Mistral computes SwiGLU with silu");
    llama_shape s;
    ddp_err err = {0};
    char llama_dir[sizeof fx.dir + 32];
    snprintf(llama_dir, sizeof llama_dir, "%s/../hf-llama-tiny", fx.dir);
    CHECK(llama_hf_read_shape(&mistral_family, llama_dir, &s, &err) == DDP_EUSAGE, "a Llama folder read as Mistral");
    CHECK_STR_CONTAINS(err.msg, "model_type is \"llama\"; ddprun imports Mistral");
    CHECK(llama_hf_read_shape(&llama_family_llama, fx.dir, &s, &err) == DDP_EUSAGE, "a Mistral folder read as a Llama");
    CHECK_STR_CONTAINS(err.msg, "model_type is \"mistral\"");
}

int main(void)
{
    ddp_err err = {0};
    if (fixture_manifest_read(&fx, "hf-mistral-tiny") || device_cpu_create(&dev, &err) || !mkdtemp(tmp))
        return 1;
    snprintf(bf16_dir, sizeof bf16_dir, "%s/bf16", fx.dir);
    B = fixture_header_int(&fx, "B"), T = fixture_header_int(&fx, "T");
    CHECK(llama_hf_read_shape(&mistral_family, fx.dir, &shape, &err) == DDP_OK, "config.json: %s", err.msg);
    int32_t *input = fixture_load(&fx, "input", NULL);
    float *ref = fixture_load(&fx, "logits", NULL), *ref_bf16 = fixture_load(&fx, "logits_bf16", NULL);
    CHECK(input && ref && ref_bf16 && B > 0 && T > 0, "fixture input/logits/logits_bf16 and B, T");
    if (input && ref && ref_bf16 && !err.msg[0]) {
        model *m = build();
        test_import(m, input, ref, ref_bf16);
        char dir[600];
        snprintf(dir, sizeof dir, "%s/export", tmp);
        family_export_matches(dev, &mistral_family, m, &shape, fx.dir, ST_F32, dir);
        snprintf(dir, sizeof dir, "%s/export-bf16", tmp);
        family_export_matches(dev, &mistral_family, m, &shape, bf16_dir, ST_BF16, dir);
        family_description_checks(&mistral_family, m, &shape, T);
        test_refusals(m);
        m->ops->destroy(m);
    }
    free(input);
    free(ref);
    free(ref_bf16);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    CHECK(system(cmd) == 0, "%s", cmd);
    dev->ops->destroy(dev);
    return check_done("test_mistral_hf");
}
