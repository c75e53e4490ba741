/* llama_family_checks.h — the checks every kind of the Llama family's Hugging Face test makes the
 * same way (test_qwen2_hf.c, test_mistral_hf.c): a folder imported and exported again is the same
 * files, and a model's description reads back as its own kind's and no other's. Header only, for
 * tests; what differs between the kinds (the fixture, the refusals) stays in each test. */
#ifndef DDP_TESTS_LLAMA_FAMILY_CHECKS_H
#define DDP_TESTS_LLAMA_FAMILY_CHECKS_H

#include "models/llama_hf.h"
#include "models/model_files.h"
#include "tests/models/hf_folder_util.h"
#include "tests/models/hf_logits.h"

/* Folder `from` imported into m (of fam, shape), exported into dir as dtype: one safetensors file,
 * `from`'s model.safetensors byte for byte, its config.json but for transformers_version. */
static inline void family_export_matches(device *dev, const llama_family *fam, model *m, const llama_shape *shape,
                                         const char *from, st_dtype dtype, const char *dir)
{
    ddp_err err = {0};
    int files = 0;
    CHECK(llama_hf_load_model(fam, m, from, &err) == DDP_OK, "import %s: %s", from, err.msg);
    float *p = hf_params_of(dev, m);
    host_params h = {m, p, NULL};
    char a[700], b[700];
    mkdir(dir, 0777);
    CHECK(llama_hf_write(fam, dir, shape, NULL, dtype, HF_DEFAULT_SHARD_BYTES, host_src, &h, &files, &err) == DDP_OK,
          "export %s: %s", dir, err.msg);
    snprintf(a, sizeof a, "%s/model.safetensors", dir), snprintf(b, sizeof b, "%s/model.safetensors", from);
    CHECK(files == 1 && same_bytes(a, b), "%s: model.safetensors is %s's byte for byte", dir, from);
    CHECK(config_is_fixtures(dir, from), "%s: config.json is %s's", dir, from);
    free(p);
}

/* m's description (a model of fam, shape, T positions) begins with the kind's name, reads back to
 * the shape, is not a Llama's, and the registry rebuilds it as the kind. */
static inline void family_description_checks(const llama_family *fam, const model *m, const llama_shape *shape,
                                             int64_t T)
{
    llama_shape s;
    int64_t seq = 0;
    ddp_err err = {0};
    char name[32];
    snprintf(name, sizeof name, "%s n_layer=", fam->name);
    CHECK(!strncmp(m->description, name, strlen(name)), "description \"%s\"", m->description);
    CHECK(llama_parse_description(fam, m->description, &s, &seq, &err) == DDP_OK && seq == T &&
          !memcmp(&s, shape, sizeof s), "read back: %s", err.msg);
    CHECK(llama_parse_description(&llama_family_llama, m->description, &s, &seq, &err) == DDP_EUSAGE,
          "a %s description read as a Llama's", fam->title);
    model_opts o;
    CHECK(model_opts_from_description(m->description, &o, &seq, &err) == DDP_OK && o.kind == fam->kind,
          "the registry rebuilds it as %s: %s", fam->title, err.msg);
}

/* A config.json (folder `from`'s) without num_key_value_heads means the family's config class's
 * default `want` (LlamaConfig: 0, the heads), as transformers reads it: that many key/value heads,
 * or, when they do not divide the folder's heads, refused naming the default; null means the heads.
 * The folders go under tmp. */
static inline void family_kv_heads_absent(const llama_family *fam, const char *from, const char *tmp, int64_t want)
{
    int n;
    out_tensor *t = fixture_tensors(from, &n);
    char *config = fixture_config(from), *line = strstr(config, "  \"num_key_value_heads\"");
    CHECK(line != NULL, "%s/config.json has a num_key_value_heads line", from);
    if (line)
        memmove(line, strchr(line, '\n') + 1, strlen(strchr(line, '\n') + 1) + 1);
    llama_shape s;
    ddp_err err = {0};
    int rc = llama_hf_read_shape(fam, folder_variant(tmp, from, "nokv", config, t, n), &s, &err);
    if (want && rc == DDP_OK)
        CHECK(s.n_kv_head == want, "num_key_value_heads absent read as %lld, not %s's default %lld",
              (long long)s.n_kv_head, fam->title, (long long)want);
    else if (want)
        CHECK_STR_CONTAINS(err.msg, "(absent: ");
    else
        CHECK(rc == DDP_OK && s.n_kv_head == s.n_head, "num_key_value_heads absent: the heads: %s", err.msg);
    free(config);
    config = config_with(from, "num_key_value_heads", "null");
    rc = llama_hf_read_shape(fam, folder_variant(tmp, from, "nullkv", config, t, n), &s, &err);
    CHECK(rc == DDP_OK && s.n_kv_head == s.n_head, "num_key_value_heads null: the heads: %s", err.msg);
    free(config);
    free_tensors(t, n);
}

#endif
