/* test_llama_hf.c — a Llama imported from and exported to a Hugging Face `save_pretrained` folder
 * (models/llama_hf.c, llama_hf_write.c) on the CPU backend, against fixture hf-llama-tiny: the
 * shape from config.json (checked against MANIFEST's header); the float32 import's logits against
 * the `logits` transformers computed, the bf16/ folder's against `logits_bf16` (and not within the
 * tolerance of `logits`, so the bf16 values were read as such); the same tensors split over two
 * shards with `rotary_emb.inv_freq` buffers added give the same logits; a tied Llama from a folder
 * without lm_head, or with one equal to embed_tokens, and one that differs refused. Refusals each
 * name the key or tensor and leave the parameters as they were: a missing tensor, a transposed
 * k_proj, a tensor the Llama lacks, an odd or oversized head_dim, heads not dividing hidden_size
 * without a head_dim, rope_scaling of another type than Llama 3's, hidden_act, attention_bias,
 * partial_rotary_factor 0.5 (1.0 taken), model_type, architectures, another shape (both named, also where only rope_theta differs or the
 * folder's heads are of their own size, head_dim, which the description then carries), and a GPT-2 model
 * (named). The export of the imported parameters: the fixture's model.safetensors byte for byte and
 * its config.json but for transformers_version; the bf16 import exported as bf16 is bf16/'s
 * model.safetensors byte for byte; sharded, imported back bit for bit; in bf16, each float32
 * rounded to nearest even; a tensor the source lacks refused with nothing written. Every shape
 * comes from MANIFEST and config.json, so another fixture made the same way passes unchanged. */
#include "tests/check.h"
#include "tests/fixture.h"

#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "models/gpt2.h"
#include "models/llama.h"
#include "models/llama_hf.h"
#include "tests/models/hf_folder_util.h"
#include "tests/models/llama_family_checks.h"
#include "tests/models/hf_logits.h"

/* The bf16 folder's values are exact in float32, so the same bound holds against `logits_bf16`. */
#define TOL (HF_LOGITS_TOL_FACTOR * HF_LLAMA_TINY_LOGITS_FLOOR)

static fixture_manifest fx;
static device *dev;
static llama_shape shape;
static int64_t B, T;
static char tmp[] = "/tmp/test_llama_hf.XXXXXX";
static char bf16_dir[sizeof fx.dir + 8];

static model *build_shape(const llama_shape *s)
{
    sample_layout data = {.input = {SAMPLE_I32, T}, .target = {SAMPLE_I32, T}, .n_classes = s->vocab_size};
    model *m = NULL;
    ddp_err err = {0};
    CHECK(llama_create(&llama_family_llama, s, &(lm_run){.compute = TENSOR_F32}, dev, &data, B, MODEL_BUFFERS_WHOLE, &m, &err) == DDP_OK, "llama_create: %s", err.msg);
    return m;
}

static model *build(void) { return build_shape(&shape); }

static float *params_of(model *m) { return hf_params_of(dev, m); }

static double logits_error(model *m, const int32_t *input, const float *ref)
{
    return hf_logits_error(dev, m, input, B, T, ref, shape.vocab_size);
}

static const char *variant(const char *name, const char *config, const out_tensor *t, int n)
{
    return folder_variant(tmp, fx.dir, name, config, t, n);
}

/* Loading dir into m fails naming needle (and needle2), and m's parameters stay as they were. */
static void refused(model *m, const char *dir, const char *needle, const char *needle2)
{
    float *before = params_of(m);
    ddp_err err = {0};
    CHECK(llama_hf_load_model(&llama_family_llama, m, dir, &err) == DDP_EUSAGE, "%s loaded", dir);
    CHECK_STR_CONTAINS(err.msg, needle);
    if (needle2)
        CHECK_STR_CONTAINS(err.msg, needle2);
    float *after = params_of(m);
    CHECK(!memcmp(before, after, m->n_params * sizeof *before), "a refused load changed the parameters");
    free(before);
    free(after);
}

static bool rows_zero(const float *p, const param_tensor *t, int64_t from_row)
{
    for (size_t i = (size_t)(from_row * t->shape[1]); i < t->numel; i++)
        if (p[t->offset + i] != 0.0f)
            return false;
    return true;
}

static void test_fixture(const int32_t *input, const float *ref, const float *ref_bf16)
{
    ddp_err err = {0};
    CHECK(fixture_header_int(&fx, "L") == shape.n_layer && fixture_header_int(&fx, "C") == shape.n_embd &&
          fixture_header_int(&fx, "NH") == shape.n_head && fixture_header_int(&fx, "NKV") == shape.n_kv_head &&
          fixture_header_int(&fx, "FFN") == shape.ffn_hidden && fixture_header_int(&fx, "NPOS") == shape.block_size &&
          fixture_header_int(&fx, "V") == shape.vocab_size &&
          fixture_header_double(&fx, "rope_theta") == shape.rope_theta && fixture_header_double(&fx, "norm_eps") == shape.norm_eps &&
          !shape.tie_embeddings,
          "config.json's shape is MANIFEST's");
    model *m = build();
    CHECK(model_init_params(m, 1, &err) == DDP_OK, "init: %s", err.msg);
    CHECK(llama_hf_load_model(&llama_family_llama, m, fx.dir, &err) == DDP_OK, "import: %s", err.msg);
    float *p = params_of(m);
    CHECK(rows_zero(p, model_find_tensor(m, "model.embed_tokens.weight"), shape.vocab_size) &&
          rows_zero(p, model_find_tensor(m, "lm_head.weight"), shape.vocab_size),
          "embed_tokens' and lm_head's padding rows are zero after the import");
    free(p);
    double e = logits_error(m, input, ref);
    printf("hf-llama-tiny: largest logit error %.3g of the largest logit (tolerance %.3g)\n", e, TOL);
    CHECK(e <= TOL, "logits differ from transformers' by %.3g", e);

    CHECK(llama_hf_load_model(&llama_family_llama, m, bf16_dir, &err) == DDP_OK, "bf16 import: %s", err.msg);
    e = logits_error(m, input, ref_bf16);
    printf("hf-llama-tiny/bf16: largest logit error %.3g against logits_bf16\n", e);
    CHECK(e <= TOL, "bf16 logits differ from transformers' by %.3g", e);
    CHECK(logits_error(m, input, ref) > TOL, "the bf16 folder gives the float32 logits: its values not bf16?");
    m->ops->destroy(m);
}

/* tmp/NAME: the tensors split over two shards and model.safetensors.index.json. */
/* llama_hf_load_pieces: three uneven pieces, laid out in host in another order, hold exactly the
 * whole import's values (ZeRO-3's shard of the folder). */
static void test_pieces(void)
{
    ddp_err err = {0};
    model *m = build();
    CHECK(llama_hf_load_model(&llama_family_llama, m, fx.dir, &err) == DDP_OK, "import: %s", err.msg);
    float *whole = params_of(m);
    size_t n = m->n_params, a = n / 7, b = n / 2 + 3;
    const param_piece pieces[] = {{b, n - b, 0}, {0, a, n - b}, {a + 5, b - a - 5, n - b + a}};
    float *host = malloc((n - 5) * sizeof *host);
    memset(host, 0xff, (n - 5) * sizeof *host);
    CHECK(llama_hf_load_pieces(&llama_family_llama, m, fx.dir, pieces, 3, host, &err) == DDP_OK, "pieces: %s",
          err.msg);
    bool same = true;
    for (int k = 0; k < 3; k++)
        same = same && !memcmp(host + pieces[k].at, whole + pieces[k].offset, pieces[k].count * sizeof *host);
    CHECK(same, "each piece holds the whole import's values");
    free(host);
    free(whole);
    m->ops->destroy(m);
}

static const char *sharded(const char *name, const out_tensor *t, int n, int split)
{
    const char *dir = variant(name, NULL, t, 0);
    char path[600], *json = calloc(1, 1 << 16);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    unlink(path);
    write_safetensors(dir, "model-00001-of-00002.safetensors", t, split);
    write_safetensors(dir, "model-00002-of-00002.safetensors", t + split, n - split);
    size_t len = (size_t)sprintf(json, "{\"metadata\": {\"total_size\": 1}, \"weight_map\": {");
    for (int i = 0; i < n; i++)
        len += (size_t)sprintf(json + len, "%s\"%s\": \"model-0000%d-of-00002.safetensors\"", i ? ", " : "", t[i].name,
                               i < split ? 1 : 2);
    sprintf(json + len, "}}\n");
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    FILE *f = fopen(path, "w");
    fputs(json, f);
    fclose(f);
    free(json);
    return dir;
}

/* Two shards, with the RoPE buffers older saves hold: the same logits. */
static void test_sharded(const int32_t *input, const float *ref)
{
    int n;
    out_tensor *t = fixture_tensors(fx.dir, &n);
    int64_t half = shape.n_embd / shape.n_head / 2;
    for (int l = 0; l < 2 && l < shape.n_layer; l++) {
        t[n] = (out_tensor){"", 1, {half, 0}, calloc((size_t)half, sizeof(float))};
        snprintf(t[n++].name, sizeof t[0].name, "model.layers.%d.self_attn.rotary_emb.inv_freq", l);
    }
    model *m = build();
    ddp_err err = {0};
    CHECK(llama_hf_load_model(&llama_family_llama, m, sharded("sharded", t, n, n / 2), &err) == DDP_OK, "sharded: %s", err.msg);
    CHECK(logits_error(m, input, ref) <= TOL, "logits from two shards");
    m->ops->destroy(m);
    free_tensors(t, n);
}

/* tie_word_embeddings true: no lm_head, or one equal to embed_tokens; one that differs refused. */
static void test_tied(void)
{
    llama_shape tied = shape;
    tied.tie_embeddings = true;
    model *m = build_shape(&tied);
    int n;
    out_tensor *t = fixture_tensors(fx.dir, &n);
    char *config = config_with(fx.dir, "tie_word_embeddings", "true");
    out_tensor *head = find(t, n, "lm_head.weight"), *embed = find(t, n, "model.embed_tokens.weight");
    memcpy(head->data, embed->data, sizeof(float) * (size_t)(embed->shape[0] * embed->shape[1]));
    ddp_err err = {0};
    CHECK(llama_hf_load_model(&llama_family_llama, m, variant("tied", config, t, n), &err) == DDP_OK, "tied, lm_head = embed: %s", err.msg);
    out_tensor moved = *head; /* lm_head last, then left out */
    *head = t[n - 1], t[n - 1] = moved;
    CHECK(llama_hf_load_model(&llama_family_llama, m, variant("tied-no-head", config, t, n - 1), &err) == DDP_OK, "tied: %s", err.msg);
    t[n - 1].data[3] += 1.0f;
    refused(m, variant("tied-differs", config, t, n), "lm_head.weight differs from model.embed_tokens.weight", NULL);
    free(config);
    m->ops->destroy(m);
    free_tensors(t, n);
}

static void test_refusals(void)
{
    model *m = build();
    ddp_err err = {0};
    CHECK(model_init_params(m, 7, &err) == DDP_OK, "init: %s", err.msg);
    int n;
    out_tensor *t = fixture_tensors(fx.dir, &n);

    out_tensor *norm = find(t, n, "model.norm.weight"), saved = *norm;
    *norm = t[n - 1];
    refused(m, variant("missing", NULL, t, n - 1), "has no tensor model.norm.weight", NULL);
    t[n - 1] = *norm, *norm = saved;

    out_tensor *k = find(t, n, "model.layers.0.self_attn.k_proj.weight");
    int64_t rows = k->shape[0], cols = k->shape[1];
    k->shape[0] = cols, k->shape[1] = rows;
    char want[200];
    snprintf(want, sizeof want, "tensor model.layers.0.self_attn.k_proj.weight is [%lld, %lld], expected [%lld, %lld]",
             (long long)cols, (long long)rows, (long long)rows, (long long)cols);
    refused(m, variant("transposed", NULL, t, n), want, NULL);
    k->shape[0] = rows, k->shape[1] = cols;

    t[n] = (out_tensor){"model.layers.0.self_attn.q_proj.bias", 1, {4, 0}, calloc(4, 4)};
    refused(m, variant("extra", NULL, t, n + 1), "tensor model.layers.0.self_attn.q_proj.bias is not one of the Llama's",
            NULL);

    char head_dim[32], why[160], heads[32], uneven[160];
    snprintf(heads, sizeof heads, "%lld", (long long)(shape.n_embd + 1));
    snprintf(uneven, sizeof uneven, "hidden_size %lld is not divisible by num_attention_heads %lld",
             (long long)shape.n_embd, (long long)(shape.n_embd + 1));
    int64_t hd = shape.n_embd / shape.n_head;
    snprintf(head_dim, sizeof head_dim, "%lld", (long long)(2 * hd + 1));
    snprintf(why, sizeof why, "head_dim is %lld; expected null or an even head size up to %d", (long long)(2 * hd + 1),
             LLAMA_MAX_HEAD_DIM);
    const struct { const char *key, *value, *needle; } keys[] = {
        {"head_dim", head_dim, why},
        {"head_dim", "1026", "head_dim is 1026; expected null or an even head size"},
        {"rope_scaling", "{\"type\": \"linear\", \"factor\": 2.0}",
         "rope_scaling.rope_type is \"linear\"; ddprun's Llama stretches RoPE as Llama 3 does"},
        {"hidden_act", "\"gelu\"", "hidden_act is \"gelu\"; ddprun's Llama computes SwiGLU with silu"},
        {"attention_bias", "true", "attention_bias is true"},
        {"model_type", "\"mistral\"", "model_type is \"mistral\""},
        {"rms_norm_eps", "0", "rms_norm_eps is 0; expected a positive number"},
        /* a key LlamaConfig reads without writing it, added after mlp_bias */
        {"mlp_bias", "false, \"partial_rotary_factor\": 0.5", "partial_rotary_factor is 0.5; ddprun's Llama rotates whole"},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        char *config = config_with(fx.dir, keys[i].key, keys[i].value);
        refused(m, variant("config", config, t, n), keys[i].needle, "config.json");
        free(config);
    }
    /* hidden_act swish is transformers' name for silu too */
    char *swish = config_with(fx.dir, "hidden_act", "\"swish\"");
    ddp_err swish_err = {0};
    CHECK(llama_hf_load_model(&llama_family_llama, m, variant("swish", swish, t, n), &swish_err) == DDP_OK,
          "hidden_act swish: %s", swish_err.msg);
    free(swish);
    char *whole = config_with(fx.dir, "mlp_bias", "false, \"partial_rotary_factor\": 1.0");
    CHECK(llama_hf_load_model(&llama_family_llama, m, variant("whole", whole, t, n), &swish_err) == DDP_OK,
          "partial_rotary_factor 1.0: %s", swish_err.msg);
    free(whole);
    /* heads that do not divide hidden_size, without a head_dim to size them */
    char *uneven_config = text_with(config_with(fx.dir, "head_dim", "null"), "num_attention_heads", heads);
    refused(m, variant("config", uneven_config, t, n), uneven, "config.json");
    free(uneven_config);

    char *config = fixture_config(fx.dir), *arch = strstr(config, "\"LlamaForCausalLM\""), *other_arch = calloc(1, 1 << 16);
    CHECK(arch != NULL, "config.json names no LlamaForCausalLM");
    if (arch)
        snprintf(other_arch, 1 << 16, "%.*s\"LlamaForSequenceClassification\"%s", (int)(arch - config), config,
                 arch + strlen("\"LlamaForCausalLM\""));
    refused(m, variant("config", other_arch, t, n), "architectures is not [\"LlamaForCausalLM\"]", "config.json:");
    free(other_arch);
    free(config);

    char kv[32], have[MODEL_DESCRIPTION_MAX], want_shape[MODEL_DESCRIPTION_MAX];
    snprintf(kv, sizeof kv, "%lld", (long long)shape.n_head);
    config = config_with(fx.dir, "num_key_value_heads", kv);
    llama_shape other = shape;
    other.n_kv_head = shape.n_head;
    llama_format_shape(&llama_family_llama, &other, have, sizeof have);
    llama_format_shape(&llama_family_llama, &shape, want_shape, sizeof want_shape);
    refused(m, variant("config", config, t, n), have, want_shape);
    free(config);
    /* the folder's heads are of its own size (twice the model's): another shape */
    snprintf(head_dim, sizeof head_dim, "%lld", (long long)(2 * hd));
    config = config_with(fx.dir, "head_dim", head_dim);
    other = shape;
    other.head_dim = 2 * hd;
    llama_format_shape(&llama_family_llama, &other, have, sizeof have);
    CHECK(strstr(have, " head_dim=") != NULL, "an own head_dim is not in the description: %s", have);
    refused(m, variant("config", config, t, n), have, want_shape);
    free(config);
    /* the shapes differ only in a real number */
    config = config_with(fx.dir, "rope_theta", "12345.5");
    other = shape;
    other.rope_theta = 12345.5;
    llama_format_shape(&llama_family_llama, &other, have, sizeof have);
    refused(m, variant("config", config, t, n), have, want_shape);
    free(config);
    m->ops->destroy(m);

    /* a model of another kind, of the same sizes */
    gpt2_shape gs = {shape.n_layer, shape.n_head, shape.n_embd, shape.block_size, shape.vocab_size};
    sample_layout data = {.input = {SAMPLE_I32, T}, .target = {SAMPLE_I32, T}, .n_classes = shape.vocab_size};
    CHECK(gpt2_create(&gs, &(lm_run){.compute = TENSOR_F32}, dev, &data, B, MODEL_BUFFERS_WHOLE, &m, &err) == DDP_OK, "gpt2_create: %s", err.msg);
    refused(m, fx.dir, "a Hugging Face Llama folder; this model is gpt2 n_layer=", NULL);
    m->ops->destroy(m);
    free_tensors(t, n + 1);
}

/* ---- export ------------------------------------------------------------------------------ */

static const char *export_dir(const char *name)
{
    static char dir[512];
    snprintf(dir, sizeof dir, "%s/%s", tmp, name);
    mkdir(dir, 0777);
    return dir;
}

static bool same_weights(const char *dir, const char *fixture_dir)
{
    char a[600], b[sizeof fx.dir + 32];
    snprintf(a, sizeof a, "%s/model.safetensors", dir), snprintf(b, sizeof b, "%s/model.safetensors", fixture_dir);
    return same_bytes(a, b);
}

static void test_export(void)
{
    model *m = build(), *back = build();
    ddp_err err = {0};
    int files = 0;
    CHECK(llama_hf_load_model(&llama_family_llama, m, bf16_dir, &err) == DDP_OK, "bf16 import: %s", err.msg);
    float *p = params_of(m);
    host_params h = {m, p, NULL};
    const char *dir = export_dir("export-bf16-fixture");
    CHECK(llama_hf_write(&llama_family_llama, dir, &shape, NULL, ST_BF16, HF_DEFAULT_SHARD_BYTES, host_src, &h, &files, &err) == DDP_OK,
          "bf16 export: %s", err.msg);
    CHECK(files == 1 && same_weights(dir, bf16_dir), "the bf16 export is bf16/model.safetensors byte for byte");
    CHECK(config_is_fixtures(dir, bf16_dir), "the bf16 export's config.json is bf16/'s");
    free(p);

    CHECK(llama_hf_load_model(&llama_family_llama, m, fx.dir, &err) == DDP_OK, "import: %s", err.msg);
    p = params_of(m);
    h.p = p;
    dir = export_dir("export");
    CHECK(llama_hf_write(&llama_family_llama, dir, &shape, NULL, ST_F32, HF_DEFAULT_SHARD_BYTES, host_src, &h, &files, &err) == DDP_OK,
          "export: %s", err.msg);
    CHECK(files == 1 && same_weights(dir, fx.dir), "the export's model.safetensors is the fixture's byte for byte");
    CHECK(config_is_fixtures(dir, fx.dir), "the export's config.json is the fixture's");

    dir = export_dir("export-shards");
    CHECK(llama_hf_write(&llama_family_llama, dir, &shape, NULL, ST_F32, m->n_params, host_src, &h, &files, &err) == DDP_OK, "sharded: %s",
          err.msg);
    CHECK(files >= 3, "%d shards of at most %zu bytes", files, m->n_params);
    CHECK(llama_hf_load_model(&llama_family_llama, back, dir, &err) == DDP_OK, "sharded export imported: %s", err.msg);
    float *q = params_of(back);
    CHECK(!memcmp(p, q, m->n_params * sizeof *p), "sharded export imported back bit for bit");
    free(q);

    dir = export_dir("export-bf16");
    CHECK(llama_hf_write(&llama_family_llama, dir, &shape, NULL, ST_BF16, HF_DEFAULT_SHARD_BYTES, host_src, &h, &files, &err) == DDP_OK,
          "bf16: %s", err.msg);
    CHECK(llama_hf_load_model(&llama_family_llama, back, dir, &err) == DDP_OK, "bf16 export imported: %s", err.msg);
    q = params_of(back);
    size_t bad = 0, moved = 0;
    for (size_t i = 0; i < m->n_params; i++)
        bad += bf16_rounded(p[i]) != q[i], moved += p[i] != q[i];
    CHECK(bad == 0 && moved > m->n_params / 2, "bf16: %zu of %zu parameters not rounded to nearest even (%zu moved)",
          bad, m->n_params, moved);
    free(q);

    dir = export_dir("export-lacking");
    h.lacks = "model.norm.weight";
    CHECK(llama_hf_write(&llama_family_llama, dir, &shape, NULL, ST_F32, HF_DEFAULT_SHARD_BYTES, host_src, &h, &files, &err) == DDP_EUSAGE,
          "a tensor the source lacks");
    CHECK_STR_CONTAINS(err.msg, "no tensor model.norm.weight");
    CHECK(rmdir(dir) == 0, "%s: nothing written", dir);
    free(p);
    m->ops->destroy(m);
    back->ops->destroy(back);
}

int main(void)
{
    ddp_err err = {0};
    if (fixture_manifest_read(&fx, "hf-llama-tiny") || device_cpu_create(&dev, &err) || !mkdtemp(tmp))
        return 1;
    snprintf(bf16_dir, sizeof bf16_dir, "%s/bf16", fx.dir);
    B = fixture_header_int(&fx, "B"), T = fixture_header_int(&fx, "T");
    CHECK(llama_hf_read_shape(&llama_family_llama, fx.dir, &shape, &err) == DDP_OK, "config.json: %s", err.msg);
    int32_t *input = fixture_load(&fx, "input", NULL);
    float *ref = fixture_load(&fx, "logits", NULL), *ref_bf16 = fixture_load(&fx, "logits_bf16", NULL);
    CHECK(input && ref && ref_bf16 && B > 0 && T > 0, "fixture input/logits/logits_bf16 and B, T");
    if (input && ref && ref_bf16 && !err.msg[0]) {
        test_fixture(input, ref, ref_bf16);
        test_sharded(input, ref);
        test_pieces();
        test_tied();
        test_refusals();
        family_kv_heads_absent(&llama_family_llama, fx.dir, tmp, 0);
        test_export();
    }
    free(input);
    free(ref);
    free(ref_bf16);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    CHECK(system(cmd) == 0, "%s", cmd);
    dev->ops->destroy(dev);
    return check_done("test_llama_hf");
}
