/* gpt2_hf_write.c — a GPT-2 as a Hugging Face `save_pretrained` folder (see gpt2_hf.h for what
 * is written).
 *
 * Owns the export's side of the mapping (our tensor table, gpt2.h's, through gpt2_hf_layout),
 * the shard split (huggingface_hub's split_state_dict_into_shards rule), the index and config.json
 * texts as transformers writes them (json.dumps, indent 2, sorted keys), the order of the writes
 * (an earlier config.json removed first, the new one written last) and the removal of an earlier
 * export's stale weight files. The safetensors layout is runtime/hf/safetensors_write.c's.
 * Must not know checkpoints, configs or the training loop: callers say where each tensor is. */
#include "gpt2_hf.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/base/replace_file.h"
#include "runtime/hf/safetensors_write.h"

#define HF_PREFIX "transformer."
#define FILE_NAME_MAX 64

typedef struct hf_export {
    const char *dir;
    const gpt2_shape *s;
    st_dtype dtype;
    model tbl;                 /* our tensor table (names, shapes), not a built model */
    st_out_tensor *t;          /* tbl's tensors as HF stores them, in tbl's order */
    char (*names)[sizeof(HF_PREFIX) + 48];
    float **owned;             /* transposed copies (Conv1D weights), else NULL */
    int *shard;                /* per tensor: its file, 0-based */
    int n_shards;
} hf_export;

static void free_export(hf_export *x)
{
    for (int i = 0; x->owned && i < x->tbl.n_tensors; i++)
        free(x->owned[i]);
    free(x->owned);
    free(x->t);
    free(x->names);
    free(x->shard);
    model_free_tensors(&x->tbl);
}

static uint64_t tensor_bytes(const hf_export *x, int i)
{
    return safetensors_out_numel(&x->t[i]) * safetensors_dtype_size(x->dtype);
}

/* Tensor i of our table, as HF stores it, from src. */
static int gather_one(hf_export *x, int i, gpt2_llmc_src src, void *ctx, ddp_err *err)
{
    const param_tensor *p = &x->tbl.tensors[i];
    const float *v = src(ctx, p->name, p->numel);
    if (!v)
        return ddp_fail(err, DDP_EUSAGE, "%s: no tensor %s of %zu float32 values to export", x->dir, p->name,
                        p->numel);
    st_out_tensor *t = &x->t[i];
    snprintf(x->names[i], sizeof x->names[i], HF_PREFIX "%s", p->name);
    t->name = x->names[i];
    bool transposed = gpt2_hf_layout(x->s, p, t->shape, &t->ndim);
    t->values = v; /* wte: its first vocab_size rows are the prefix */
    if (!transposed)
        return DDP_OK;
    int64_t in = t->shape[0], out = t->shape[1];
    if (!(x->owned[i] = malloc(p->numel * sizeof(float))))
        return ddp_fail(err, DDP_ERUNTIME, "%s: out of memory", x->dir);
    for (int64_t o = 0; o < out; o++)
        for (int64_t k = 0; k < in; k++)
            x->owned[i][k * out + o] = v[o * in + k];
    t->values = x->owned[i];
    return DDP_OK;
}

/* huggingface_hub's rule, in the model's order: a tensor joins the open shard while the shard
 * stays within the limit; one above the limit gets a shard of its own, numbered when it is met. */
static void split(hf_export *x, uint64_t max_bytes)
{
    int n = x->tbl.n_tensors;
    uint64_t open_bytes = 0;
    bool open = false;
    for (int i = 0; i < n; i++) {
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
    for (int j = 0; j < n; j++)
        x->shard[j] = x->shard[j] < 0 ? x->n_shards : x->shard[j];
    x->n_shards += open;
}

static void shard_name(const hf_export *x, int k, char *out)
{
    if (x->n_shards == 1)
        snprintf(out, FILE_NAME_MAX, "%s", GPT2_HF_WEIGHTS);
    else
        snprintf(out, FILE_NAME_MAX, "model-%05d-of-%05d.safetensors", k + 1, x->n_shards);
}

static int write_shard(const hf_export *x, int k, ddp_err *err)
{
    st_out_tensor *mine = malloc((size_t)x->tbl.n_tensors * sizeof *mine);
    if (!mine)
        return ddp_fail(err, DDP_ERUNTIME, "%s: out of memory", x->dir);
    size_t n = 0;
    for (int i = 0; i < x->tbl.n_tensors; i++)
        if (x->shard[i] == k)
            mine[n++] = x->t[i];
    char name[FILE_NAME_MAX], path[4096 + FILE_NAME_MAX];
    shard_name(x, k, name);
    snprintf(path, sizeof path, "%s/%s", x->dir, name);
    int rc = safetensors_write(path, mine, n, x->dtype, err);
    free(mine);
    return rc;
}

/* ---- the JSON files ----------------------------------------------------------------------- */

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
    const hf_export *x = ctx;
    int n = x->tbl.n_tensors;
    entry *map = malloc((size_t)n * sizeof *map);
    if (!map)
        return ddp_fail(err, DDP_ERUNTIME, "%s: out of memory", x->dir);
    uint64_t total = 0;
    for (int i = 0; i < n; i++)
        map[i] = (entry){x->t[i].name, x->shard[i]}, total += tensor_bytes(x, i);
    qsort(map, (size_t)n, sizeof *map, by_name);
    fprintf(f, "{\n  \"metadata\": {\n    \"total_size\": %llu\n  },\n  \"weight_map\": {\n",
            (unsigned long long)total);
    for (int i = 0; i < n; i++) {
        char name[FILE_NAME_MAX];
        shard_name(x, map[i].shard, name);
        fprintf(f, "    \"%s\": \"%s\"%s\n", map[i].name, name, i + 1 < n ? "," : "");
    }
    fprintf(f, "  }\n}\n");
    free(map);
    return DDP_OK;
}

/* GPT2Config as save_pretrained writes it: our shape, and every other key at the value our GPT-2
 * computes (gpt2_hf.c's import accepts exactly these) or GPT2Config's default. */
static int write_config(FILE *f, void *ctx, ddp_err *err)
{
    (void)err;
    const hf_export *x = ctx;
    const gpt2_shape *s = x->s;
    fprintf(f, "{\n  \"activation_function\": \"gelu_new\",\n  \"architectures\": [\n    \"GPT2LMHeadModel\"\n  ],\n"
               "  \"attn_pdrop\": 0.1,\n  \"bos_token_id\": 50256,\n  \"embd_pdrop\": 0.1,\n"
               "  \"eos_token_id\": 50256,\n  \"initializer_range\": 0.02,\n  \"layer_norm_epsilon\": 1e-05,\n"
               "  \"model_type\": \"gpt2\",\n  \"n_ctx\": %lld,\n  \"n_embd\": %lld,\n  \"n_head\": %lld,\n"
               "  \"n_inner\": null,\n  \"n_layer\": %lld,\n  \"n_positions\": %lld,\n",
            (long long)s->block_size, (long long)s->n_embd, (long long)s->n_head, (long long)s->n_layer,
            (long long)s->block_size);
    fprintf(f, "  \"reorder_and_upcast_attn\": false,\n  \"resid_pdrop\": 0.1,\n"
               "  \"scale_attn_by_inverse_layer_idx\": false,\n  \"scale_attn_weights\": true,\n"
               "  \"summary_activation\": null,\n  \"summary_first_dropout\": 0.1,\n"
               "  \"summary_proj_to_labels\": true,\n  \"summary_type\": \"cls_index\",\n"
               "  \"summary_use_proj\": true,\n  \"tie_word_embeddings\": true,\n  \"torch_dtype\": \"%s\",\n"
               "  \"use_cache\": true,\n  \"vocab_size\": %lld\n}\n",
            x->dtype == ST_BF16 ? "bfloat16" : "float32", (long long)s->vocab_size);
    return DDP_OK;
}

static int write_json(const hf_export *x, const char *name, replace_file_stream_writer w, ddp_err *err)
{
    char path[4096 + FILE_NAME_MAX];
    snprintf(path, sizeof path, "%s/%s", x->dir, name);
    return replace_file_stream(path, w, (void *)x, err);
}

/* An earlier export's weight file this one did not write: model.safetensors, the index, or a
 * model-K-of-N.safetensors shard of another split. */
static bool stale(const hf_export *x, const char *name)
{
    int k, n, end = 0;
    bool shard = sscanf(name, "model-%5d-of-%5d.safetensors%n", &k, &n, &end) == 2 && end &&
                 !name[end] && strlen(name) == strlen("model-00001-of-00001.safetensors");
    if (x->n_shards == 1)
        return shard || !strcmp(name, GPT2_HF_INDEX);
    return !strcmp(name, GPT2_HF_WEIGHTS) || (shard && (n != x->n_shards || k < 1 || k > n));
}

static int remove_stale(const hf_export *x, ddp_err *err)
{
    DIR *d = opendir(x->dir);
    if (!d)
        return ddp_fail(err, DDP_ERUNTIME, "%s: cannot list: %s", x->dir, strerror(errno));
    int rc = DDP_OK;
    for (struct dirent *e; !rc && (e = readdir(d));) {
        char path[4096 + 256];
        snprintf(path, sizeof path, "%s/%s", x->dir, e->d_name);
        if (stale(x, e->d_name) && unlink(path) != 0)
            rc = ddp_fail(err, DDP_ERUNTIME, "%s: cannot remove an earlier export's file: %s", path, strerror(errno));
    }
    closedir(d);
    return rc;
}

/* An earlier export's config.json goes first (and the new one is written last), so a folder an
 * export failed in part-way is never read as a model. */
static int remove_config(const hf_export *x, ddp_err *err)
{
    char path[4096 + FILE_NAME_MAX];
    snprintf(path, sizeof path, "%s/%s", x->dir, GPT2_HF_CONFIG);
    if (unlink(path) != 0 && errno != ENOENT)
        return ddp_fail(err, DDP_ERUNTIME, "%s: cannot remove the earlier export's: %s", path, strerror(errno));
    return DDP_OK;
}

int gpt2_hf_write(const char *dir, const gpt2_shape *shape, st_dtype dtype, uint64_t max_shard_bytes,
                  gpt2_llmc_src src, void *ctx, int *files, ddp_err *err)
{
    hf_export x = {.dir = dir, .s = shape, .dtype = dtype};
    if (dtype != ST_F32 && dtype != ST_BF16)
        return ddp_fail(err, DDP_EUSAGE, "%s: exporting %s is not supported (F32 or BF16)", dir,
                        safetensors_dtype_name(dtype));
    int rc = gpt2_tensor_table(shape, &x.tbl, err);
    if (rc)
        return rc;
    size_t n = (size_t)x.tbl.n_tensors;
    x.t = calloc(n, sizeof *x.t), x.names = calloc(n, sizeof *x.names);
    x.owned = calloc(n, sizeof *x.owned), x.shard = calloc(n, sizeof *x.shard);
    if (!x.t || !x.names || !x.owned || !x.shard)
        rc = ddp_fail(err, DDP_ERUNTIME, "%s: out of memory", dir);
    for (int i = 0; !rc && i < x.tbl.n_tensors; i++) /* every source first: nothing written when one is missing */
        rc = gather_one(&x, i, src, ctx, err);
    if (!rc)
        split(&x, max_shard_bytes);
    if (!rc)
        rc = remove_config(&x, err);
    for (int k = 0; !rc && k < x.n_shards; k++)
        rc = write_shard(&x, k, err);
    if (!rc && x.n_shards > 1)
        rc = write_json(&x, GPT2_HF_INDEX, write_index, err);
    if (!rc)
        rc = write_json(&x, GPT2_HF_CONFIG, write_config, err);
    if (!rc)
        rc = remove_stale(&x, err);
    if (!rc)
        *files = x.n_shards;
    free_export(&x);
    return rc;
}
