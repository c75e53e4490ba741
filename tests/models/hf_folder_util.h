/* hf_folder_util.h — what the Hugging Face import and export tests (test_gpt2_hf.c, test_llama_hf.c,
 * test_qwen2_hf.c, test_mistral_hf.c, test_llama_rope_scaling.c) build their folder variants with:
 * a fixture folder's tensors as float32, safetensors files and config.json texts written from them,
 * a model's parameters as a writer's source, and the export checks' comparisons. Header only, for
 * tests; it checks nothing about the code under test itself. */
#ifndef DDP_TESTS_HF_FOLDER_UTIL_H
#define DDP_TESTS_HF_FOLDER_UTIL_H

#include "tests/check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "models/model.h"
#include "runtime/hf/safetensors.h"

/* The parameters of model m held in host memory p (hf_params_of's copy), as an exporter's source
 * (gpt2_llmc_src, with host_src): lacks names a tensor to leave out, for a writer's refusal
 * (NULL: none). */
typedef struct host_params { const model *m; const float *p; const char *lacks; } host_params;

static inline const float *host_src(void *ctx, const char *name, size_t numel)
{
    const host_params *h = ctx;
    const param_tensor *t = model_find_tensor(h->m, name);
    return t && t->numel == numel && (!h->lacks || strcmp(name, h->lacks)) ? h->p + t->offset : NULL;
}

typedef struct out_tensor { char name[128]; int ndim; int64_t shape[2]; float *data; } out_tensor;

/* Writes dir/file of n float32 tensors, contiguous in the given order; one whose data is NULL is
 * written as U8 zeros (a mask buffer as older transformers saved GPT-2's attn.bias). */
static inline void write_safetensors(const char *dir, const char *file, const out_tensor *t, int n)
{
    char path[600], *header = malloc(1 << 16);
    size_t len = 0, off = 0;
    len += (size_t)sprintf(header + len, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (int i = 0; i < n; i++) {
        size_t bytes = (t[i].data ? 4 : 1) * (size_t)t[i].shape[0] * (size_t)(t[i].ndim > 1 ? t[i].shape[1] : 1);
        char dims[64];
        if (t[i].ndim > 1)
            snprintf(dims, sizeof dims, "%lld,%lld", (long long)t[i].shape[0], (long long)t[i].shape[1]);
        else
            snprintf(dims, sizeof dims, "%lld", (long long)t[i].shape[0]);
        len += (size_t)sprintf(header + len, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%s],\"data_offsets\":[%zu,%zu]}",
                               t[i].name, t[i].data ? "F32" : "U8", dims, off, off + bytes);
        off += bytes;
    }
    len += (size_t)sprintf(header + len, "}");
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "wb");
    uint64_t n8 = len;
    fwrite(&n8, 8, 1, f);
    fwrite(header, 1, len, f);
    for (int i = 0; i < n; i++) {
        size_t count = (size_t)t[i].shape[0] * (size_t)(t[i].ndim > 1 ? t[i].shape[1] : 1);
        if (t[i].data)
            fwrite(t[i].data, 4, count, f);
        else
            for (size_t k = 0; k < count; k++)
                fputc(0, f);
    }
    fclose(f);
    free(header);
}

/* dir/model.safetensors' tensors as float32, under their own names, with room for 4 more; n set. */
static inline out_tensor *fixture_tensors(const char *dir, int *n)
{
    char path[2200];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    safetensors st;
    ddp_err err = {0};
    CHECK(safetensors_open(path, &st, &err) == DDP_OK, "%s", err.msg);
    out_tensor *t = calloc(st.count + 4, sizeof *t);
    for (size_t i = 0; i < st.count; i++) {
        snprintf(t[i].name, sizeof t[i].name, "%s", st.tensors[i].name);
        t[i].ndim = st.tensors[i].ndim;
        t[i].shape[0] = st.tensors[i].shape[0];
        t[i].shape[1] = st.tensors[i].ndim > 1 ? st.tensors[i].shape[1] : 0;
        t[i].data = malloc(st.tensors[i].numel * sizeof(float));
        safetensors_to_f32(&st.tensors[i], t[i].data);
    }
    *n = (int)st.count;
    safetensors_close(&st);
    return t;
}

static inline out_tensor *find(out_tensor *t, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(t[i].name, name))
            return &t[i];
    return NULL;
}

static inline void free_tensors(out_tensor *t, int n)
{
    for (int i = 0; i < n; i++)
        free(t[i].data);
    free(t);
}

/* root/NAME holding src_dir's config.json (or `config` when given) and these tensors. */
static inline const char *folder_variant(const char *root, const char *src_dir, const char *name, const char *config,
                                  const out_tensor *t, int n)
{
    static char dir[512];
    snprintf(dir, sizeof dir, "%s/%s", root, name);
    mkdir(dir, 0755);
    char src[2200], dst[600], cmd[3000];
    snprintf(src, sizeof src, "%s/config.json", src_dir);
    snprintf(dst, sizeof dst, "%s/config.json", dir);
    if (config) {
        FILE *f = fopen(dst, "w");
        fputs(config, f);
        fclose(f);
    } else {
        snprintf(cmd, sizeof cmd, "cp '%s' '%s'", src, dst);
        CHECK(system(cmd) == 0, "%s", cmd);
    }
    write_safetensors(dir, "model.safetensors", t, n);
    return dir;
}

/* dir/config.json's text (calloc'd, 64 KiB). */
static inline char *fixture_config(const char *dir)
{
    char path[2200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "r");
    char *text = calloc(1, 1 << 16);
    if (f) {
        size_t n = fread(text, 1, (1 << 16) - 1, f);
        text[n] = '\0';
        fclose(f);
    }
    return text;
}

/* config.json's text (calloc'd, 64 KiB; freed here) with the line holding `"key":` replaced by
 * `"key": value,`. */
static inline char *text_with(char *text, const char *key, const char *value)
{
    char *out = calloc(1, 1 << 16), pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\":", key);
    char *at = strstr(text, pattern);
    CHECK(at != NULL, "config.json has no %s", key);
    if (!at)
        return text;
    char *eol = strchr(at, '\n');
    bool last = eol[-1] != ',';
    snprintf(out, 1 << 16, "%.*s\"%s\": %s%s%s", (int)(at - text), text, key, value, last ? "" : ",", eol);
    free(text);
    return out;
}

/* dir/config.json's text as text_with gives it. */
static inline char *config_with(const char *dir, const char *key, const char *value)
{
    return text_with(fixture_config(dir), key, value);
}

/* dir/config.json is the fixture's but for its transformers_version line (we are not transformers). */
static inline bool config_is_fixtures(const char *dir, const char *fixture_dir)
{
    char *ours = fixture_config(dir), *theirs = fixture_config(fixture_dir);
    char *line = strstr(theirs, "  \"transformers_version\"");
    CHECK(line != NULL, "%s/config.json has no transformers_version", fixture_dir);
    if (line)
        memmove(line, strchr(line, '\n') + 1, strlen(strchr(line, '\n') + 1) + 1);
    bool same = !strcmp(ours, theirs);
    if (!same)
        printf("exported config.json:\n%s\nfixture's (without transformers_version):\n%s\n", ours, theirs);
    free(ours);
    free(theirs);
    return same;
}

static inline bool same_bytes(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    bool same = fa && fb;
    for (int ca = 0, cb = 0; same && ca != EOF; same = ca == cb)
        ca = fgetc(fa), cb = fgetc(fb);
    if (fa)
        fclose(fa);
    if (fb)
        fclose(fb);
    return same;
}

/* The float32 bits rounded to bfloat16 (nearest, ties to even) and widened back. */
static inline float bf16_rounded(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&f, &u, 4);
    return f;
}

#endif
