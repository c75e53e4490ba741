/* test_mistral_hf.c [FIXTURE] — Mistral (models/mistral.c: the Llama family with Mistral's files)
 * imported from and exported to a Hugging Face `save_pretrained` folder on the CPU backend, against
 * fixture hf-mistral-tiny, or hf-mistral-nemo-tiny (heads of their own size, head_dim, as
 * Mistral-Nemo's: then the description carries it): the shape from config.json (checked against
 * MANIFEST's header, HD its head size when given); the float32
 * import's logits against the `logits` transformers computed, within HF_LOGITS_TOL_FACTOR times the
 * header's floor (transformers' own float32 reload of the folder), the bf16/ folder's against
 * `logits_bf16`; the export of each import is the fixture's model.safetensors byte for byte and its
 * config.json but for transformers_version; the description read back as Mistral and not as a
 * Llama, and rebuilt as Mistral by the registry; Mistral-7B-v0.1's kind of folder, a sliding
 * window as long as the sequence, giving the same logits and written back; a shorter window
 * refused when the model is built; a window of 0, a rope_scaling and a Llama folder refused as
 * Mistral, and the Mistral folder as a Llama, each naming the key. Every shape comes from MANIFEST
 * and config.json, so another fixture made the same way passes unchanged. `--cuda`: the same on
 * the CUDA backend. */
#include "tests/check.h"
#include "tests/fixture.h"

#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "models/llama_hf.h"
#include "models/mistral.h"
#include "tests/models/llama_family_checks.h"

static double TOL; /* HF_LOGITS_TOL_FACTOR times MANIFEST's floor */
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
    int64_t hd = fixture_header_int(&fx, "HD") > 0 ? fixture_header_int(&fx, "HD") : shape.n_embd / shape.n_head;
    CHECK(llama_head_dim(&shape) == hd, "head size %lld, MANIFEST's %lld", (long long)llama_head_dim(&shape),
          (long long)hd);
    CHECK(llama_shape_own_head_dim(&shape) == (hd * shape.n_head != shape.n_embd),
          "head_dim %lld is the shape's own exactly when the heads are not n_embd wide", (long long)shape.head_dim);
    char field[48];
    snprintf(field, sizeof field, " head_dim=%lld", (long long)hd);
    CHECK((strstr(m->description, field) != NULL) == llama_shape_own_head_dim(&shape),
          "the description (%s) carries head_dim when the shape's own", m->description);
    /* FLOPs per sequence: 6 per GEMM weight (all but the untied input embedding), and attention's
     * scores and mix over the heads' width n_head · head size, which is not n_embd's here */
    const double C = (double)shape.n_embd, Vp = (double)llama_vocab_padded(shape.vocab_size);
    const double gemm_weights = (double)m->n_params - (shape.tie_embeddings ? 0 : Vp * C);
    const double heads_width = (double)(shape.n_head * hd);
    const double flops = (double)T * (6 * gemm_weights + 12.0 * (double)shape.n_layer * heads_width * (double)T);
    CHECK(fabs(m->train_flops_per_sample - flops) <= 1e-9 * flops, "FLOPs per sequence %.6g, expected %.6g",
          m->train_flops_per_sample, flops);
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

/* The fixture's folder with sliding_window T, as Mistral-7B-v0.1's has 4096: transformers masks the
 * positions a window has passed, and T positions never pass a window of T, so the fixture's logits
 * hold. The window is in the shape, the description and the exported config.json; one position
 * shorter, the model is refused when built. */
static void test_sliding_window(const int32_t *input, const float *ref)
{
    int n;
    out_tensor *t = fixture_tensors(fx.dir, &n);
    char value[32], out[600];
    snprintf(value, sizeof value, "%lld", (long long)T);
    char *config = config_with(fx.dir, "sliding_window", value);
    char dir[512];
    snprintf(dir, sizeof dir, "%s", folder_variant(tmp, fx.dir, "window", config, t, n));
    llama_shape s;
    ddp_err err = {0};
    CHECK(llama_hf_read_shape(&mistral_family, dir, &s, &err) == DDP_OK && s.sliding_window == T,
          "sliding_window %lld read as %lld: %s", (long long)T, (long long)s.sliding_window, err.msg);
    sample_layout data = {.input = {SAMPLE_I32, T}, .target = {SAMPLE_I32, T}, .n_classes = s.vocab_size};
    model *m = NULL;
    CHECK(llama_create(&mistral_family, &s, &(lm_run){.compute = TENSOR_F32}, dev, &data, B, MODEL_BUFFERS_WHOLE, &m,
                       &err) == DDP_OK, "create with sliding_window %lld: %s", (long long)T, err.msg);
    if (m && llama_hf_load_model(&mistral_family, m, dir, &err) == DDP_OK) {
        double e = hf_logits_error(dev, m, input, B, T, ref, s.vocab_size);
        printf("sliding_window %lld: logits within %.3g of the largest\n", (long long)T, e);
        CHECK(e <= TOL, "sliding_window %lld: logits off by %.3g", (long long)T, e);
        char field[48];
        snprintf(field, sizeof field, " sliding_window=%lld seq_len=", (long long)T);
        CHECK_STR_CONTAINS(m->description, field);
        family_description_checks(&mistral_family, m, &s, T);
        float *p = hf_params_of(dev, m);
        host_params h = {m, p, NULL};
        int files = 0;
        snprintf(out, sizeof out, "%s/window-export", tmp);
        mkdir(out, 0777);
        CHECK(llama_hf_write(&mistral_family, out, &s, NULL, ST_F32, HF_DEFAULT_SHARD_BYTES, host_src, &h, &files, &err) ==
              DDP_OK && config_is_fixtures(out, dir), "export: config.json is the folder's, window and all: %s", err.msg);
        free(p);
    }
    if (m)
        m->ops->destroy(m);
    s.sliding_window = T - 1;
    if (T > 1) {
        CHECK(llama_create(&mistral_family, &s, &(lm_run){.compute = TENSOR_F32}, dev, &data, B, MODEL_BUFFERS_WHOLE,
                           &m, &err) == DDP_EUSAGE, "a window shorter than the sequence built");
        char msg[128];
        snprintf(msg, sizeof msg, "model.mistral.sliding_window %lld is shorter than data.seq_len %lld",
                 (long long)(T - 1), (long long)T);
        CHECK_STR_CONTAINS(err.msg, msg);
    }
    free(config);
    free_tensors(t, n);
}

/* A config.json without sliding_window means MistralConfig's default window of 4096, as
 * transformers reads it (save_pretrained always writes the key; a hand-made config may not). */
static void test_sliding_window_absent(void)
{
    int n;
    out_tensor *t = fixture_tensors(fx.dir, &n);
    char *config = fixture_config(fx.dir), *line = strstr(config, "  \"sliding_window\"");
    CHECK(line != NULL, "the fixture's config.json has a sliding_window line");
    if (line)
        memmove(line, strchr(line, '\n') + 1, strlen(strchr(line, '\n') + 1) + 1);
    char dir[512];
    snprintf(dir, sizeof dir, "%s", folder_variant(tmp, fx.dir, "nowindow", config, t, n));
    llama_shape s;
    ddp_err err = {0};
    CHECK(llama_hf_read_shape(&mistral_family, dir, &s, &err) == DDP_OK && s.sliding_window == 4096,
          "sliding_window absent read as %lld (MistralConfig's default: 4096): %s", (long long)s.sliding_window,
          err.msg);
    free(config);
    free_tensors(t, n);
}

static void test_refusals(model *m)
{
    refused_with(m, "sliding_window", "0", "sliding_window is 0; expected null or a positive integer");
    refused_with(m, "sliding_window", "-4096", "sliding_window is -4096; expected null or a positive integer");
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

/* `--cuda` runs every check on the CUDA device (the emulated one in CI). */
int main(int argc, char **argv)
{
    ddp_err err = {0};
    const char *name = "hf-mistral-tiny";
    bool cuda = false;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--cuda"))
            cuda = true;
        else
            name = argv[i];
    const device_opts gpu_opts = {.kind = DEVICE_CUDA}; /* no TF32 */
    if (fixture_manifest_read(&fx, name) ||
        (cuda ? device_cuda_create(0, &gpu_opts, &dev, &err) : device_cpu_create(&dev, &err)) || !mkdtemp(tmp)) {
        fprintf(stderr, "test_mistral_hf: %s\n", err.msg);
        return 1;
    }
    snprintf(bf16_dir, sizeof bf16_dir, "%s/bf16", fx.dir);
    TOL = HF_LOGITS_TOL_FACTOR * fixture_header_double(&fx, "floor");
    CHECK(TOL > 0, "MANIFEST's header gives the float32 reload's floor (floor=)");
    B = fixture_header_int(&fx, "B"), T = fixture_header_int(&fx, "T");
    CHECK(llama_hf_read_shape(&mistral_family, fx.dir, &shape, &err) == DDP_OK, "config.json: %s", err.msg);
    int32_t *input = fixture_load(&fx, "input", NULL);
    float *ref = fixture_load(&fx, "logits", NULL), *ref_bf16 = fixture_load(&fx, "logits_bf16", NULL);
    CHECK(input && ref && ref_bf16 && B > 0 && T > 0, "fixture input/logits/logits_bf16 and B, T");
    model *m = input && ref && ref_bf16 && !err.msg[0] ? build() : NULL;
    if (m) {
        test_import(m, input, ref, ref_bf16);
        char dir[600];
        snprintf(dir, sizeof dir, "%s/export", tmp);
        family_export_matches(dev, &mistral_family, m, &shape, fx.dir, ST_F32, dir);
        snprintf(dir, sizeof dir, "%s/export-bf16", tmp);
        family_export_matches(dev, &mistral_family, m, &shape, bf16_dir, ST_BF16, dir);
        family_description_checks(&mistral_family, m, &shape, T);
        test_refusals(m);
        m->ops->destroy(m);
        test_sliding_window(input, ref);
        test_sliding_window_absent();
        family_kv_heads_absent(&mistral_family, fx.dir, tmp, 8);
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
