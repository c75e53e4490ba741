/* hf_folder_write.c — a save_pretrained folder from laid-out tensors (see hf_folder_write.h).
 *
 * Owns the shard split (huggingface_hub's rule), the shard and index names and text, and which
 * names are an export's; the folder itself is written whole by runtime/base/replace_dir.h. The
 * safetensors layout is safetensors_write.c's, the tensors' names and layouts the model writer's.
 * Must not know any model. */
#include "hf_folder_write.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/base/affix.h"
#include "runtime/base/open_input.h"
#include "runtime/base/read_whole.h"
#include "json_doc.h"

#define FILE_NAME_MAX 64

typedef struct folder {
    const char *dir;           /* the temporary folder being filled */
    const st_out_tensor *t;
    int n;
    st_dtype dtype;
    int *shard;                /* per tensor: its file, 0-based */
    int n_shards;
    replace_file_stream_writer write_config;
    void *config_ctx;
    char *generation;          /* the source's generation_config.json, or NULL */
    size_t generation_len;
    const char *source;        /* the folder the tokenizer's files are copied from, or NULL */
} folder;

/* The tokenizer's files save_pretrained writes beside the weights (the chat template among them),
 * copied from the source folder when it has them, so that transformers and vLLM load the export
 * with the tokenizer it was trained with. */
static const char *const tokenizer_files[] = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                                              "added_tokens.json", "tokenizer.model", "vocab.json", "merges.txt",
                                              "chat_template.jinja", "chat_template.json", NULL};

static uint64_t tensor_bytes(const folder *x, int i)
{
    return safetensors_out_numel(&x->t[i]) * safetensors_dtype_size(x->dtype);
}

/* huggingface_hub's rule, in the given order: a tensor joins the open shard while the shard stays
 * within the limit; one above the limit gets a shard of its own, numbered when it is met. */
static void split(folder *x, uint64_t max_bytes)
{
    uint64_t open_bytes = 0;
    bool open = false;
    for (int i = 0; i < x->n; i++) {
        uint64_t b = tensor_bytes(x, i);
        if (b > max_bytes) {
            x->shard[i] = x->n_shards++;
            continue;
        }
        if (open && open_bytes + b > max_bytes) {
            for (int j = 0; j < i; j++)
                x->shard[j] = x->shard[j] < 0 ? x->n_shards : x->shard[j];
            x->n_shards++;
            open_bytes = 0;
        }
        x->shard[i] = -1, open = true;
        open_bytes += b;
    }
    for (int j = 0; j < x->n; j++)
        x->shard[j] = x->shard[j] < 0 ? x->n_shards : x->shard[j];
    x->n_shards += open;
}

static void shard_name(const folder *x, int k, char *out)
{
    if (x->n_shards == 1)
        snprintf(out, FILE_NAME_MAX, "%s", HF_WEIGHTS);
    else
        snprintf(out, FILE_NAME_MAX, "model-%05d-of-%05d.safetensors", k + 1, x->n_shards);
}

static int write_shard(const folder *x, int k, ddp_err *err)
{
    st_out_tensor *mine = malloc((size_t)x->n * sizeof *mine);
    if (!mine)
        return ddp_fail(err, DDP_ERUNTIME, "%s: out of memory", x->dir);
    size_t n = 0;
    for (int i = 0; i < x->n; i++)
        if (x->shard[i] == k)
            mine[n++] = x->t[i];
    char name[FILE_NAME_MAX], path[4096 + FILE_NAME_MAX];
    shard_name(x, k, name);
    snprintf(path, sizeof path, "%s/%s", x->dir, name);
    int rc = safetensors_write(path, mine, n, x->dtype, err);
    free(mine);
    return rc;
}

/* ---- the index ---------------------------------------------------------------------------- */

typedef struct entry {
    const char *name;
    int shard;
} entry;

static int by_name(const void *a, const void *b)
{
    return strcmp(((const entry *)a)->name, ((const entry *)b)->name);
}

static int write_index(FILE *f, void *ctx, ddp_err *err)
{
    const folder *x = ctx;
    entry *map = malloc((size_t)x->n * sizeof *map);
    if (!map)
        return ddp_fail(err, DDP_ERUNTIME, "%s: out of memory", x->dir);
    uint64_t total = 0;
    for (int i = 0; i < x->n; i++)
        map[i] = (entry){x->t[i].name, x->shard[i]}, total += tensor_bytes(x, i);
    qsort(map, (size_t)x->n, sizeof *map, by_name);
    fprintf(f, "{\n  \"metadata\": {\n    \"total_size\": %llu\n  },\n  \"weight_map\": {\n",
            (unsigned long long)total);
    for (int i = 0; i < x->n; i++) {
        char name[FILE_NAME_MAX];
        shard_name(x, map[i].shard, name);
        fprintf(f, "    \"%s\": \"%s\"%s\n", map[i].name, name, i + 1 < x->n ? "," : "");
    }
    fprintf(f, "  }\n}\n");
    free(map);
    return DDP_OK;
}

/* One file of the folder, whole (replace_file_stream). */
static int write_file(const folder *x, const char *name, replace_file_stream_writer w, void *ctx, ddp_err *err)
{
    char path[4096 + FILE_NAME_MAX];
    snprintf(path, sizeof path, "%s/%s", x->dir, name);
    return replace_file_stream(path, w, ctx, err);
}

bool hf_export_file(const char *name)
{
    return !strcmp(name, HF_CONFIG) || !strcmp(name, HF_GENERATION_CONFIG) ||
           (has_prefix(name, "model") && strstr(name, ".safetensors")) ||
           /* the model's weights in other formats (transformers', TensorFlow's, Flax's, Meta's and
            * Mistral's consolidated files and params.json), and a PEFT adapter, which transformers
            * loads over its base model instead of the folder's weights */
           has_prefix(name, "pytorch_model") || has_prefix(name, "tf_model") || has_prefix(name, "flax_model") ||
           has_prefix(name, "consolidated") || has_suffix(name, ".pth") || !strcmp(name, "params.json") ||
           has_prefix(name, "adapter_model") || !strcmp(name, "adapter_config.json");
}

bool hf_tokenizer_file(const char *name)
{
    for (int k = 0; tokenizer_files[k]; k++)
        if (!strcmp(name, tokenizer_files[k]))
            return true;
    /* other tokenizers' files: tokenizer.model.v3, Mistral's tekken.json, tiktoken's ranks */
    return has_prefix(name, "tokenizer") || !strcmp(name, "tekken.json") || has_suffix(name, ".tiktoken");
}

bool hf_export_or_tokenizer_file(const char *name) { return hf_export_file(name) || hf_tokenizer_file(name); }

static bool has_tokenizer(const char *source)
{
    char path[4096 + FILE_NAME_MAX];
    for (int k = 0; source && tokenizer_files[k]; k++) {
        snprintf(path, sizeof path, "%s/%s", source, tokenizer_files[k]);
        if (access(path, F_OK) == 0)
            return true;
    }
    return false;
}

static int write_generation(FILE *f, void *ctx, ddp_err *err)
{
    const folder *x = ctx;
    if (fwrite(x->generation, 1, x->generation_len, f) != x->generation_len)
        return ddp_fail(err, DDP_ERUNTIME, "%s/%s: write failed: %s", x->dir, HF_GENERATION_CONFIG, strerror(errno));
    return DDP_OK;
}

/* source/name opened into *f (path: its path, 4096 + FILE_NAME_MAX bytes), *f NULL when the source
 * has none; a FIFO or folder of that name is refused, as it would hold the export in open(). */
static int open_in_source(const char *source, const char *name, char *path, FILE **f, ddp_err *err)
{
    snprintf(path, 4096 + FILE_NAME_MAX, "%s/%s", source, name);
    ddp_err why = {0};
    *f = NULL;
    if (fopen_input(path, f, &why) != DDP_OK)
        return errno == ENOENT ? DDP_OK : (*err = why, why.code);
    return DDP_OK;
}

typedef struct copy_job {
    FILE *from;
    const char *from_path;
} copy_job;

static int copy_stream(FILE *f, void *ctx, ddp_err *err)
{
    const copy_job *c = ctx;
    char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, c->from)) > 0)
        if (fwrite(buf, 1, n, f) != n)
            return ddp_fail(err, DDP_ERUNTIME, "copying %s: write failed: %s", c->from_path, strerror(errno));
    return ferror(c->from) ? ddp_fail(err, DDP_ERUNTIME, "%s: read failed", c->from_path) : DDP_OK;
}

/* source/name into the folder, byte for byte, when the source has it. */
static int copy_from_source(const folder *x, const char *name, ddp_err *err)
{
    char from[4096 + FILE_NAME_MAX];
    copy_job c = {.from_path = from};
    int rc = open_in_source(x->source, name, from, &c.from, err);
    if (rc != DDP_OK || !c.from)
        return rc;
    rc = write_file(x, name, copy_stream, &c, err);
    fclose(c.from);
    return rc;
}

/* source/generation_config.json whole into x, when there is one: a JSON object, as transformers
 * reads it (its keys are transformers' business, not checked here). */
static int read_generation(folder *x, const char *source, ddp_err *err)
{
    char path[4096 + FILE_NAME_MAX];
    FILE *f;
    int rc = open_in_source(source, HF_GENERATION_CONFIG, path, &f, err);
    if (rc != DDP_OK || !f)
        return rc;
    rc = read_whole(f, path, HF_CONFIG_MAX_BYTES, &x->generation, &x->generation_len, err);
    fclose(f);
    json_doc j = {0};
    if (!rc)
        rc = json_doc_parse(&j, path, x->generation, x->generation_len, err);
    if (!rc && json_kind_of(json_root(&j)) != JSON_OBJECT)
        rc = ddp_fail(err, DDP_EUSAGE, "%s: expected a JSON object, as transformers writes it", path);
    json_doc_free(&j);
    return rc;
}

/* Every file into the empty temporary folder dir (replace_dir's writer), config.json last. */
static int write_folder(const char *dir, void *ctx, ddp_err *err)
{
    folder *x = ctx;
    x->dir = dir;
    int rc = DDP_OK;
    for (int k = 0; !rc && k < x->n_shards; k++)
        rc = write_shard(x, k, err);
    if (!rc && x->n_shards > 1)
        rc = write_file(x, HF_INDEX, write_index, x, err);
    if (!rc && x->generation)
        rc = write_file(x, HF_GENERATION_CONFIG, write_generation, x, err);
    for (int k = 0; !rc && x->source && tokenizer_files[k]; k++)
        rc = copy_from_source(x, tokenizer_files[k], err);
    if (!rc)
        rc = write_file(x, HF_CONFIG, x->write_config, x->config_ctx, err);
    return rc;
}

int hf_folder_write(const char *dir, const st_out_tensor *tensors, int n, st_dtype dtype, uint64_t max_shard_bytes,
                    replace_file_stream_writer write_config, void *ctx, const char *source, int *files,
                    ddp_err *err)
{
    if (dtype != ST_F32 && dtype != ST_BF16)
        return ddp_fail(err, DDP_EUSAGE, "%s: exporting %s is not supported (F32 or BF16)", dir,
                        safetensors_dtype_name(dtype));
    folder x = {.t = tensors, .n = n, .dtype = dtype, .shard = calloc((size_t)n + 1, sizeof(int)),
                .write_config = write_config, .config_ctx = ctx, .source = source};
    if (!x.shard)
        return ddp_fail(err, DDP_ERUNTIME, "%s: out of memory", dir);
    split(&x, max_shard_bytes);
    int rc = source ? read_generation(&x, source, err) : DDP_OK;
    if (!rc)
        rc = replace_dir(dir, write_folder, has_tokenizer(source) ? hf_export_or_tokenizer_file : hf_export_file,
                         HF_CONFIG, &x, err);
    if (!rc)
        *files = x.n_shards;
    free(x.shard);
    free(x.generation);
    return rc;
}
