/* test_gpt2_hf.c — GPT-2 imported from a Hugging Face `save_pretrained` folder (models/gpt2_hf.c)
 * on the CPU backend, against fixture hf-gpt2-tiny: the shape from config.json (checked against
 * MANIFEST's header), the import, and a forward pass whose logits match those `transformers`
 * computed from the same files. Variants of the folder written here: names without
 * `transformer.`, with the attention mask buffers and a tied lm_head, and split over two shards
 * with model.safetensors.index.json (the same logits; a map that misplaces, leaves out or reaches
 * outside the folder refused; a tensor of another shape named with its shard); and the
 * refusals, each naming the key or tensor and leaving the model's parameters as they were: a
 * missing tensor, a Conv1D weight in [out, in], a tensor GPT-2 lacks, an untied lm_head, config
 * keys our GPT-2 cannot compute, and a shape other than the model's (both named). Every shape
 * comes from MANIFEST and config.json, so another fixture made the same way passes unchanged.
 * The export (models/gpt2_hf_write.c) of the imported parameters: the fixture's model.safetensors
 * byte for byte and a config.json of the same shape; sharded, imported back bit for bit; in bf16,
 * imported back as each float32 rounded to nearest even; a tensor the source lacks refused naming
 * it, nothing written; a sharded export failing part-way (a file-size limit) over an earlier one
 * leaves that one byte for byte as it was. */
#include "tests/check.h"
#include "tests/fixture.h"

#include <math.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "models/gpt2.h"
#include "models/gpt2_hf.h"
#include "tests/models/hf_folder_util.h"
#include "tests/models/hf_logits.h"

#define TOL (HF_LOGITS_TOL_FACTOR * HF_GPT2_TINY_LOGITS_FLOOR)

static fixture_manifest fx;
static device *dev;
static gpt2_shape shape;
static int64_t B, T;
static char tmp[] = "/tmp/test_gpt2_hf.XXXXXX";

static model *build(void)
{
    sample_layout data = {.input = {SAMPLE_I32, T}, .target = {SAMPLE_I32, T}, .n_classes = shape.vocab_size};
    model *m = NULL;
    ddp_err err = {0};
    CHECK(gpt2_create(&shape, &(lm_run){.compute = TENSOR_F32}, dev, &data, B, MODEL_BUFFERS_WHOLE, &m, &err) == DDP_OK, "gpt2_create: %s", err.msg);
    return m;
}

static float *params_of(model *m) { return hf_params_of(dev, m); }

static double logits_error(model *m, const int32_t *input, const float *ref)
{
    return hf_logits_error(dev, m, input, B, T, ref, shape.vocab_size);
}

/* ---- folder variants ---------------------------------------------------------------------- */

static const char *variant(const char *name, const char *config, const out_tensor *t, int n)
{
    return folder_variant(tmp, fx.dir, name, config, t, n);
}

/* Loading dir into m fails naming needle (and needle2), and m's parameters stay as they were. */
static void refused(model *m, const char *dir, const char *needle, const char *needle2)
{
    float *before = params_of(m);
    ddp_err err = {0};
    CHECK(gpt2_hf_load_model(m, dir, &err) == DDP_EUSAGE, "%s loaded", dir);
    CHECK_STR_CONTAINS(err.msg, needle);
    if (needle2)
        CHECK_STR_CONTAINS(err.msg, needle2);
    float *after = params_of(m);
    CHECK(!memcmp(before, after, m->n_params * sizeof *before), "a refused load changed the parameters");
    free(before);
    free(after);
}

static void test_fixture(const int32_t *input, const float *ref)
{
    ddp_err err = {0};
    CHECK(fixture_header_int(&fx, "L") == shape.n_layer && fixture_header_int(&fx, "C") == shape.n_embd &&
          fixture_header_int(&fx, "NH") == shape.n_head && fixture_header_int(&fx, "NPOS") == shape.block_size &&
          fixture_header_int(&fx, "V") == shape.vocab_size, "config.json's shape is MANIFEST's");
    model *m = build();
    CHECK(model_init_params(m, 1, &err) == DDP_OK, "init: %s", err.msg);
    CHECK(gpt2_hf_load_model(m, fx.dir, &err) == DDP_OK, "import: %s", err.msg);
    float *p = params_of(m);
    const param_tensor *wte = model_find_tensor(m, "wte.weight");
    bool padding_zero = true;
    for (size_t i = (size_t)(shape.vocab_size * shape.n_embd); i < wte->numel; i++)
        padding_zero &= p[wte->offset + i] == 0.0f;
    CHECK(padding_zero, "wte's padding rows are zero after the import");
    free(p);
    double e = logits_error(m, input, ref);
    printf("hf-gpt2-tiny: largest logit error %.3g of the largest logit (tolerance %.3g)\n", e,
           TOL);
    CHECK(e <= TOL, "logits differ from transformers' by %.3g", e);
    m->ops->destroy(m);
}

/* Names without `transformer.`, the mask buffers and a tied lm_head: the same logits. */
static void test_other_names(const int32_t *input, const float *ref)
{
    int n;
    out_tensor *t = fixture_tensors(fx.dir, &n);
    for (int i = 0; i < n; i++)
        if (!strncmp(t[i].name, "transformer.", 12)) {
            char stripped[sizeof t[i].name];
            snprintf(stripped, sizeof stripped, "%s", t[i].name + 12);
            memcpy(t[i].name, stripped, sizeof stripped);
        }
    out_tensor *wte = find(t, n, "wte.weight");
    size_t wte_n = (size_t)(wte->shape[0] * wte->shape[1]);
    t[n] = (out_tensor){"lm_head.weight", 2, {wte->shape[0], wte->shape[1]}, malloc(wte_n * 4)};
    memcpy(t[n].data, wte->data, wte_n * 4);
    t[n + 1] = (out_tensor){"h.0.attn.bias", 2, {shape.block_size, shape.block_size},
                            malloc(sizeof(float) * (size_t)(shape.block_size * shape.block_size))};
    for (int64_t i = 0; i < shape.block_size * shape.block_size; i++)
        t[n + 1].data[i] = 1.0f;
    t[n + 2] = (out_tensor){"h.0.attn.masked_bias", 1, {1, 0}, malloc(4)};
    t[n + 2].data[0] = -1e4f;
    const char *dir = variant("other-names", NULL, t, n + 3);
    model *m = build();
    ddp_err err = {0};
    CHECK(gpt2_hf_load_model(m, dir, &err) == DDP_OK, "import without the prefix: %s", err.msg);
    CHECK(logits_error(m, input, ref) <= TOL, "logits without the prefix");

    t[n].data[7] += 1.0f; /* lm_head no longer wte */
    refused(m, variant("untied", NULL, t, n + 1), "lm_head.weight differs from wte", NULL);
    m->ops->destroy(m);
    free_tensors(t, n + 3);
}

/* tmp/NAME: the tensors split over two shards and model.safetensors.index.json; `index` (printf
 * format of the two file names) replaces the index when given. */
static const char *sharded(const char *name, const out_tensor *t, int n, int split, const char *index)
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
    fputs(index ? index : json, f);
    fclose(f);
    free(json);
    return dir;
}

static void test_sharded(const int32_t *input, const float *ref)
{
    int n;
    out_tensor *t = fixture_tensors(fx.dir, &n);
    model *m = build();
    ddp_err err = {0};
    CHECK(gpt2_hf_load_model(m, sharded("sharded", t, n, n / 2, NULL), &err) == DDP_OK, "sharded: %s", err.msg);
    CHECK(logits_error(m, input, ref) <= TOL, "logits from two shards");
    char index[256];
    snprintf(index, sizeof index, "{\"weight_map\": {\"%s\": \"model-00002-of-00002.safetensors\"}}", t[0].name);
    char want[256];
    snprintf(want, sizeof want, "weight_map puts tensor %s in", t[0].name);
    refused(m, sharded("wrong-shard", t, n, n / 2, index), want, "which does not hold it");
    snprintf(index, sizeof index, "{\"weight_map\": {\"%s\": \"model-00001-of-00002.safetensors\"}}", t[0].name);
    refused(m, sharded("unlisted", t, n, n / 2, index), "weight_map lists 1", "its files hold");
    snprintf(index, sizeof index, "{\"weight_map\": {\"%s\": \"../x.safetensors\"}}", t[0].name);
    refused(m, sharded("outside", t, n, n / 2, index), "weight_map names \"../x.safetensors\", expected a file name", NULL);
    snprintf(index, sizeof index, "{\"weight_map\": {\"%s\": \"model-00009-of-00009.safetensors\"}}", t[0].name);
    refused(m, sharded("missing", t, n, n / 2, index), /* the index's line, then the file's own error */
            "model.safetensors.index.json:1:", "weight_map names \"model-00009-of-00009.safetensors\": ");
    int i = n - 1; /* a tensor of the second shard of another shape: named in that shard, not the index */
    while (i > n / 2 && (t[i].ndim != 2 || t[i].shape[0] == t[i].shape[1]))
        i--;
    CHECK(i > n / 2, "a matrix that is not square in the second shard");
    int64_t rows = t[i].shape[0];
    t[i].shape[0] = t[i].shape[1], t[i].shape[1] = rows;
    snprintf(want, sizeof want, "/model-00002-of-00002.safetensors: tensor %s is [", t[i].name);
    refused(m, sharded("misshapen", t, n, n / 2, NULL), want, NULL);
    t[i].shape[1] = t[i].shape[0], t[i].shape[0] = rows;
    m->ops->destroy(m);
    free_tensors(t, n);
}

/* ---- export ------------------------------------------------------------------------------ */

static const char *export_dir(const char *name)
{
    static char dir[512];
    snprintf(dir, sizeof dir, "%s/%s", tmp, name);
    mkdir(dir, 0777);
    return dir;
}

/* One file of dir, equal to the same file of ref. */
static bool same_file(const char *dir, const char *ref, const char *name)
{
    char a[600], b[600];
    snprintf(a, sizeof a, "%s/%s", dir, name), snprintf(b, sizeof b, "%s/%s", ref, name);
    return same_bytes(a, b);
}

/* A whole export beside a file of the user's, then a sharded one over it that a file-size limit
 * (RLIMIT_FSIZE, SIGXFSZ ignored: write fails with EFBIG, as on a full disk) stops part-way: the
 * earlier export and the user's file are as they were, no temporary folder is left, and an
 * unhindered sharded export then replaces it, keeping the user's file. */
static void broken_export(model *m, host_params *h)
{
    ddp_err err = {0};
    int files = 0;
    const char *ref = "export-ref", *name = "export-broken";
    char dir[512], notes[600], tmpdir[600];
    CHECK(gpt2_hf_write(export_dir(ref), &shape, NULL, ST_F32, HF_DEFAULT_SHARD_BYTES, host_src, h, &files, &err) == DDP_OK,
          "export: %s", err.msg);
    snprintf(dir, sizeof dir, "%s", export_dir(name));
    CHECK(gpt2_hf_write(dir, &shape, NULL, ST_F32, HF_DEFAULT_SHARD_BYTES, host_src, h, &files, &err) == DDP_OK,
          "export: %s", err.msg);
    snprintf(notes, sizeof notes, "%s/notes.txt", dir);
    FILE *f = fopen(notes, "w");
    CHECK(f && fputs("keep\n", f) >= 0 && fclose(f) == 0, "%s", notes);

    struct rlimit saved, small;
    CHECK(getrlimit(RLIMIT_FSIZE, &saved) == 0, "getrlimit");
    small = (struct rlimit){.rlim_cur = 2048, .rlim_max = saved.rlim_max};
    void (*was)(int) = signal(SIGXFSZ, SIG_IGN);
    CHECK(setrlimit(RLIMIT_FSIZE, &small) == 0, "setrlimit");
    int rc = gpt2_hf_write(dir, &shape, NULL, ST_F32, m->n_params, host_src, h, &files, &err);
    CHECK(setrlimit(RLIMIT_FSIZE, &saved) == 0, "setrlimit back");
    signal(SIGXFSZ, was);
    CHECK(rc == DDP_ERUNTIME, "an export past the file-size limit fails (rc %d)", rc);
    CHECK_STR_CONTAINS(err.msg, "File too large");
    CHECK(same_file(dir, export_dir(ref), "config.json") && same_file(dir, export_dir(ref), "model.safetensors"),
          "the earlier export's config.json and model.safetensors byte for byte as they were");
    snprintf(tmpdir, sizeof tmpdir, "%s/.%s.tmp.%ld", tmp, name, (long)getpid());
    CHECK(access(notes, F_OK) == 0 && access(tmpdir, F_OK) != 0, "the user's file kept, no %s left", tmpdir);

    CHECK(gpt2_hf_write(dir, &shape, NULL, ST_F32, m->n_params, host_src, h, &files, &err) == DDP_OK, "sharded: %s",
          err.msg);
    snprintf(tmpdir, sizeof tmpdir, "%s/model.safetensors", dir);
    CHECK(files > 1 && access(tmpdir, F_OK) != 0 && access(notes, F_OK) == 0,
          "replaced by %d shards: the earlier model.safetensors gone, the user's file kept", files);
}

static void test_export(void)
{
    model *m = build(), *back = build();
    ddp_err err = {0};
    CHECK(gpt2_hf_load_model(m, fx.dir, &err) == DDP_OK, "import: %s", err.msg);
    float *p = params_of(m);
    host_params h = {m, p, NULL};
    int files = 0;
    const char *dir = export_dir("export");
    CHECK(gpt2_hf_write(dir, &shape, NULL, ST_F32, HF_DEFAULT_SHARD_BYTES, host_src, &h, &files, &err) == DDP_OK,
          "export: %s", err.msg);
    char a[600], b[sizeof fx.dir + 32];
    snprintf(a, sizeof a, "%s/model.safetensors", dir), snprintf(b, sizeof b, "%s/model.safetensors", fx.dir);
    CHECK(files == 1 && same_bytes(a, b), "the export's model.safetensors is the fixture's byte for byte");
    gpt2_shape s = {0};
    CHECK(gpt2_hf_read_shape(dir, &s, &err) == DDP_OK && !memcmp(&s, &shape, sizeof s), "its config.json: %s", err.msg);

    dir = export_dir("export-shards");
    CHECK(gpt2_hf_write(dir, &shape, NULL, ST_F32, m->n_params, host_src, &h, &files, &err) == DDP_OK, "sharded: %s", err.msg);
    CHECK(files >= 4, "%d shards of at most %zu bytes", files, m->n_params);
    CHECK(gpt2_hf_load_model(back, dir, &err) == DDP_OK, "sharded export imported: %s", err.msg);
    float *q = params_of(back);
    CHECK(!memcmp(p, q, m->n_params * sizeof *p), "sharded export imported back bit for bit");
    free(q);

    broken_export(m, &h);

    dir = export_dir("export-bf16");
    CHECK(gpt2_hf_write(dir, &shape, NULL, ST_BF16, HF_DEFAULT_SHARD_BYTES, host_src, &h, &files, &err) == DDP_OK,
          "bf16: %s", err.msg);
    CHECK(gpt2_hf_load_model(back, dir, &err) == DDP_OK, "bf16 export imported: %s", err.msg);
    q = params_of(back);
    size_t bad = 0, moved = 0;
    for (size_t i = 0; i < m->n_params; i++)
        bad += bf16_rounded(p[i]) != q[i], moved += p[i] != q[i];
    CHECK(bad == 0 && moved > m->n_params / 2, "bf16: %zu of %zu parameters not rounded to nearest even (%zu moved)",
          bad, m->n_params, moved);
    free(q);

    dir = export_dir("export-lacking");
    h.lacks = "h.1.mlp.c_proj.bias";
    CHECK(gpt2_hf_write(dir, &shape, NULL, ST_F32, HF_DEFAULT_SHARD_BYTES, host_src, &h, &files, &err) == DDP_EUSAGE,
          "a tensor the source lacks");
    CHECK_STR_CONTAINS(err.msg, "no tensor h.1.mlp.c_proj.bias");
    CHECK(rmdir(dir) == 0, "%s: nothing written", dir);
    free(p);
    m->ops->destroy(m);
    back->ops->destroy(back);
}

static void test_refusals(void)
{
    model *m = build();
    ddp_err err = {0};
    CHECK(model_init_params(m, 7, &err) == DDP_OK, "init: %s", err.msg);
    int n;
    out_tensor *t = fixture_tensors(fx.dir, &n);

    out_tensor *lnf_b = find(t, n, "transformer.ln_f.bias");
    out_tensor saved = *lnf_b;
    *lnf_b = t[n - 1];
    refused(m, variant("missing", NULL, t, n - 1), "has no tensor transformer.ln_f.bias", NULL);
    t[n - 1] = *lnf_b, *lnf_b = saved;

    out_tensor *fc = find(t, n, "transformer.h.0.mlp.c_fc.weight");
    int64_t in = fc->shape[0], out = fc->shape[1];
    fc->shape[0] = out, fc->shape[1] = in; /* as if stored [out, in] */
    char want[160];
    snprintf(want, sizeof want, "tensor transformer.h.0.mlp.c_fc.weight is [%lld, %lld], expected [%lld, %lld] (Conv1D",
             (long long)out, (long long)in, (long long)in, (long long)out);
    refused(m, variant("conv1d-layout", NULL, t, n), want, NULL);
    fc->shape[0] = in, fc->shape[1] = out;

    /* a mask buffer saved as U8 (older transformers' attn.bias) is skipped like a float one; one of
     * our tensors saved so is refused naming it and its dtype */
    t[n] = (out_tensor){"transformer.h.0.attn.bias", 2, {T, T}, NULL};
    ddp_err u8_err = {0};
    CHECK(gpt2_hf_load_model(m, variant("u8-mask", NULL, t, n + 1), &u8_err) == DDP_OK, "a U8 attn.bias: %s",
          u8_err.msg);
    float *c_attn_b = find(t, n, "transformer.h.0.attn.c_attn.bias")->data;
    find(t, n, "transformer.h.0.attn.c_attn.bias")->data = NULL;
    refused(m, variant("u8-weight", NULL, t, n), "tensor transformer.h.0.attn.c_attn.bias is U8; ddprun reads F32", NULL);
    find(t, n, "transformer.h.0.attn.c_attn.bias")->data = c_attn_b;

    t[n] = (out_tensor){"transformer.h.0.attn.c_attn.extra", 1, {4, 0}, calloc(4, 4)};
    refused(m, variant("extra", NULL, t, n + 1), "tensor transformer.h.0.attn.c_attn.extra is not one of GPT-2's", NULL);

    const struct { const char *key, *value, *needle; } keys[] = {
        {"activation_function", "\"relu\"", "activation_function is \"relu\"; ddprun's GPT-2 computes the tanh GELU"},
        {"n_inner", "100", "n_inner is 100; ddprun's GPT-2 has an MLP of 4·n_embd"},
        {"layer_norm_epsilon", "1e-06", "layer_norm_epsilon is 1e-06"},
        {"model_type", "\"llama\"", "model_type is \"llama\""},
        {"n_head", "0", "n_head is 0; expected an integer in 1.."},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        char *config = config_with(fx.dir, keys[i].key, keys[i].value);
        refused(m, variant("config", config, t, n), keys[i].needle, "config.json:");
        free(config);
    }
    char *config = fixture_config(fx.dir), *tie = calloc(1, 1 << 16);
    snprintf(tie, 1 << 16, "{\"tie_word_embeddings\": false, %s", strchr(config, '{') + 1);
    refused(m, variant("config", tie, t, n), "config.json:1:25: tie_word_embeddings is false", NULL);
    /* GPT2Config's alias of a shape key (num_hidden_layers for n_layer), which transformers reads
     * over the key: alone it is the shape; beside the key with another value, refused */
    char alias[64], *at = strstr(config, "\"n_layer\":");
    snprintf(alias, sizeof alias, "\"num_hidden_layers\": %lld, ", (long long)(shape.n_layer + 1));
    snprintf(tie, 1 << 16, "{%s%s", alias, strchr(config, '{') + 1);
    refused(m, variant("config", tie, t, n), "num_hidden_layers is", "n_layer says");
    CHECK(at != NULL, "config.json has n_layer");
    if (at) {
        snprintf(tie, 1 << 16, "%.*s\"num_hidden_layers\":%s", (int)(at - config), config, at + strlen("\"n_layer\":"));
        gpt2_shape s;
        CHECK(gpt2_hf_read_shape(variant("alias", tie, t, n), &s, &err) == DDP_OK && s.n_layer == shape.n_layer,
              "num_hidden_layers alone read as n_layer %lld: %s", (long long)s.n_layer, err.msg);
    }
    free(tie);
    free(config);

    char n_layer[32], have[MODEL_DESCRIPTION_MAX], want_shape[MODEL_DESCRIPTION_MAX];
    snprintf(n_layer, sizeof n_layer, "%lld", (long long)(shape.n_layer + 1));
    config = config_with(fx.dir, "n_layer", n_layer);
    gpt2_shape other = shape;
    other.n_layer++;
    gpt2_format_shape(&other, have, sizeof have);
    gpt2_format_shape(&shape, want_shape, sizeof want_shape);
    refused(m, variant("config", config, t, n), have, want_shape);
    free(config);
    m->ops->destroy(m);
    free_tensors(t, n + 1);
}

int main(void)
{
    ddp_err err = {0};
    if (fixture_manifest_read(&fx, "hf-gpt2-tiny") || device_cpu_create(&dev, &err) || !mkdtemp(tmp))
        return 1;
    B = fixture_header_int(&fx, "B"), T = fixture_header_int(&fx, "T");
    CHECK(gpt2_hf_read_shape(fx.dir, &shape, &err) == DDP_OK, "config.json: %s", err.msg);
    int32_t *input = fixture_load(&fx, "input", NULL);
    float *ref = fixture_load(&fx, "logits", NULL);
    CHECK(input && ref && B > 0 && T > 0, "fixture input/logits and B, T");
    if (input && ref && !err.msg[0]) {
        test_fixture(input, ref);
        test_other_names(input, ref);
        test_sharded(input, ref);
        test_refusals();
        test_export();
    }
    free(input);
    free(ref);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    CHECK(system(cmd) == 0, "%s", cmd);
    dev->ops->destroy(dev);
    return check_done("test_gpt2_hf");
}
