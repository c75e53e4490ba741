/* gpt2_hf.c — a GPT-2 from a Hugging Face `save_pretrained` folder (see gpt2_hf.h for the rules).
 *
 * Owns what GPT2Config's keys must hold for our GPT-2, the mapping of HF's tensor names and
 * layouts onto the model's own tensor table (model.h's tensors[]: every HF name is one of ours,
 * optionally prefixed `transformer.`; a block's 2-D tensors are the Conv1D weights, stored
 * transposed), and loading the result into the model. The JSON and the safetensors file are
 * runtime/hf's. Must not know checkpoints, configs or the training loop. */
#include "gpt2_hf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "runtime/hf/json_doc.h"
#include "runtime/hf/safetensors.h"

#define CONFIG_MAX_BYTES (1 << 20)
#define MAX_DIM (1 << 24)
#define HF_PREFIX "transformer."

/* ---- config.json -------------------------------------------------------------------------- */

static int key_fail(const json_doc *j, const json_node *v, const char *key, const char *why, ddp_err *err)
{
    char where[600];
    json_where(j, v, where, sizeof where);
    const char *quote = json_kind_of(v) == JSON_STRING ? "\"" : "";
    return ddp_fail(err, DDP_EUSAGE, "%s: %s is %s%.80s%s; %s", where, key, quote, json_text(v), quote, why);
}

static int read_size(const json_doc *j, const json_node *root, const char *key, int64_t max, int64_t *out,
                     ddp_err *err)
{
    const json_node *v = json_object_get(j, root, key);
    if (!v)
        return ddp_fail(err, DDP_EUSAGE, "%s: no %s (GPT-2's shape needs n_layer, n_head, n_embd, n_positions and "
                        "vocab_size)", j->name, key);
    uint64_t u;
    if (!json_uint(v, &u) || u < 1 || u > (uint64_t)max) {
        char why[96];
        snprintf(why, sizeof why, "expected an integer in 1..%lld", (long long)max);
        return key_fail(j, v, key, why, err);
    }
    *out = (int64_t)u;
    return DDP_OK;
}

/* A key our GPT-2 has one value of: absent, or that value (text compared as JSON literal or string). */
typedef struct fixed_key {
    const char *key;
    const char *const accepted[3];  /* literal texts (strings without quotes) */
    json_kind kind;                 /* of the accepted values */
    const char *why;
} fixed_key;

static const fixed_key fixed_keys[] = {
    {"model_type", {"gpt2"}, JSON_STRING, "ddprun imports GPT-2 (model_type \"gpt2\")"},
    {"activation_function", {"gelu_new", "gelu_pytorch_tanh"}, JSON_STRING,
     "ddprun's GPT-2 computes the tanh GELU (gelu_new)"},
    {"tie_word_embeddings", {"true"}, JSON_BOOL, "ddprun's GPT-2 ties lm_head to wte"},
    {"scale_attn_weights", {"true"}, JSON_BOOL, "ddprun's GPT-2 scales attention scores by 1/sqrt(head size)"},
    {"scale_attn_by_inverse_layer_idx", {"false"}, JSON_BOOL, "ddprun's GPT-2 does not scale by the layer index"},
    {"add_cross_attention", {"false"}, JSON_BOOL, "ddprun's GPT-2 has no cross-attention"},
};

static int check_fixed(const json_doc *j, const json_node *root, const fixed_key *k, ddp_err *err)
{
    const json_node *v = json_object_get(j, root, k->key);
    if (!v || json_kind_of(v) != k->kind)
        return v ? key_fail(j, v, k->key, k->why, err) : DDP_OK;
    for (int i = 0; i < 3 && k->accepted[i]; i++)
        if (!strcmp(json_text(v), k->accepted[i]))
            return DDP_OK;
    return key_fail(j, v, k->key, k->why, err);
}

/* The keys whose value depends on the shape or is a number. */
static int check_numbers(const json_doc *j, const json_node *root, const gpt2_shape *s, ddp_err *err)
{
    const json_node *v = json_object_get(j, root, "n_inner");
    uint64_t inner;
    if (v && json_kind_of(v) != JSON_NULL && (!json_uint(v, &inner) || inner != 4 * (uint64_t)s->n_embd)) {
        char why[96];
        snprintf(why, sizeof why, "ddprun's GPT-2 has an MLP of 4·n_embd = %lld (or null)", (long long)(4 * s->n_embd));
        return key_fail(j, v, "n_inner", why, err);
    }
    v = json_object_get(j, root, "layer_norm_epsilon");
    double eps;
    if (v && (!json_double(v, &eps) || eps != 1e-5))
        return key_fail(j, v, "layer_norm_epsilon", "ddprun's GPT-2 computes LayerNorm with eps 1e-5", err);
    return DDP_OK;
}

static int shape_from(const json_doc *j, gpt2_shape *s, ddp_err *err)
{
    const json_node *root = json_root(j);
    if (json_kind_of(root) != JSON_OBJECT)
        return ddp_fail(err, DDP_EUSAGE, "%s: %s, expected an object", j->name, json_kind_name(json_kind_of(root)));
    int rc = read_size(j, root, "n_layer", GPT2_MAX_LAYERS, &s->n_layer, err);
    if (!rc)
        rc = read_size(j, root, "n_head", MAX_DIM, &s->n_head, err);
    if (!rc)
        rc = read_size(j, root, "n_embd", MAX_DIM, &s->n_embd, err);
    if (!rc)
        rc = read_size(j, root, "n_positions", MAX_DIM, &s->block_size, err);
    if (!rc)
        rc = read_size(j, root, "vocab_size", MAX_DIM, &s->vocab_size, err);
    if (!rc && s->n_embd % s->n_head)
        rc = ddp_fail(err, DDP_EUSAGE, "%s: n_embd %lld is not divisible by n_head %lld", j->name,
                      (long long)s->n_embd, (long long)s->n_head);
    for (size_t i = 0; !rc && i < sizeof fixed_keys / sizeof fixed_keys[0]; i++)
        rc = check_fixed(j, root, &fixed_keys[i], err);
    return rc ? rc : check_numbers(j, root, s, err);
}

int gpt2_hf_read_shape(const char *dir, gpt2_shape *shape, ddp_err *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, GPT2_HF_CONFIG);
    json_doc j;
    int rc = json_doc_load_file(&j, path, CONFIG_MAX_BYTES, err);
    if (!rc)
        rc = shape_from(&j, shape, err);
    json_doc_free(&j);
    return rc;
}

/* ---- tensors ------------------------------------------------------------------------------ */

/* The folder's safetensors files: model.safetensors, or the shards model.safetensors.index.json's
 * weight_map names (each tensor in exactly the file the map gives it). */
typedef struct weights {
    char path[4096];         /* the file, or the index: what messages name */
    safetensors *files;
    bool **used;             /* per file, per tensor */
    int n;
} weights;

typedef struct import {
    const char *path;        /* w->path */
    const weights *w;
    const model *m;
    const gpt2_shape *s;
    float *host;             /* m->n_params floats in the model's layout, zero where nothing is read */
} import;

static void format_dims(const int64_t *dims, int ndim, char *out, size_t size)
{
    size_t n = (size_t)snprintf(out, size, "[");
    for (int d = 0; d < ndim && n < size; d++)
        n += (size_t)snprintf(out + n, size - n, "%s%lld", d ? ", " : "", (long long)dims[d]);
    if (n < size)
        snprintf(out + n, size - n, "]");
}

/* HF's tensor for our tensor `name`: transformer.NAME or NAME, not both. */
static int find_hf(const import *im, const char *name, const st_tensor **out, ddp_err *err)
{
    char prefixed[128];
    snprintf(prefixed, sizeof prefixed, HF_PREFIX "%s", name);
    const st_tensor *a = NULL, *b = NULL;
    int ka = 0, kb = 0;
    for (int k = 0; k < im->w->n; k++) {
        const st_tensor *x = safetensors_find(&im->w->files[k], prefixed), *y = safetensors_find(&im->w->files[k], name);
        a = x ? x : a, ka = x ? k : ka;
        b = y ? y : b, kb = y ? k : kb;
    }
    if (a && b)
        return ddp_fail(err, DDP_EUSAGE, "%s holds both %s and %s", im->path, prefixed, name);
    if (!a && !b)
        return ddp_fail(err, DDP_EUSAGE, "%s has no tensor %s (or %s): not GPT-2's %s tensors?", im->path, prefixed,
                        name, "GPT2LMHeadModel");
    *out = a ? a : b;
    int k = a ? ka : kb;
    im->w->used[k][*out - im->w->files[k].tensors] = true;
    return DDP_OK;
}

bool gpt2_hf_layout(const gpt2_shape *s, const param_tensor *t, int64_t dims[2], int *ndim)
{
    *ndim = t->ndim;
    dims[0] = t->shape[0], dims[1] = t->ndim > 1 ? t->shape[1] : 0;
    if (!strcmp(t->name, "wte.weight"))
        dims[0] = s->vocab_size; /* our padding rows are not stored */
    bool conv1d = !strncmp(t->name, "h.", 2) && t->ndim == 2;
    if (conv1d)
        dims[0] = t->shape[1], dims[1] = t->shape[0];
    return conv1d;
}

static int import_tensor(const import *im, const param_tensor *t, ddp_err *err)
{
    const st_tensor *hf = NULL;
    int rc = find_hf(im, t->name, &hf, err);
    if (rc)
        return rc;
    int64_t dims[2];
    int ndim;
    bool transposed = gpt2_hf_layout(im->s, t, dims, &ndim);
    if (hf->ndim != ndim || hf->shape[0] != dims[0] || (ndim > 1 && hf->shape[1] != dims[1])) {
        char have[96], want[96];
        format_dims(hf->shape, hf->ndim, have, sizeof have);
        format_dims(dims, ndim, want, sizeof want);
        return ddp_fail(err, DDP_EUSAGE, "%s: tensor %s is %s, expected %s%s", im->path, hf->name, have, want,
                        transposed ? " (Conv1D: [in, out])" : "");
    }
    float *dst = im->host + t->offset;
    if (!transposed) {
        safetensors_to_f32(hf, dst); /* wte: the first vocab_size rows */
        return DDP_OK;
    }
    float *tmp = malloc(hf->numel * sizeof *tmp);
    if (!tmp)
        return ddp_fail(err, DDP_ERUNTIME, "%s: out of memory", im->path);
    safetensors_to_f32(hf, tmp);
    int64_t in = dims[0], out = dims[1];
    for (int64_t i = 0; i < in; i++)
        for (int64_t o = 0; o < out; o++)
            dst[o * in + i] = tmp[i * out + o];
    free(tmp);
    return DDP_OK;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

/* A tensor of the folder that is none of ours: a mask buffer (skipped), a tied lm_head (must equal
 * wte), nothing else. */
static int check_other(const import *im, const param_tensor *wte, const st_tensor *t, ddp_err *err)
{
    if (ends_with(t->name, ".attn.bias") || ends_with(t->name, ".attn.masked_bias"))
        return DDP_OK;
    if (strcmp(t->name, "lm_head.weight"))
        return ddp_fail(err, DDP_EUSAGE, "%s: tensor %s is not one of GPT-2's", im->path, t->name);
    size_t n = (size_t)(im->s->vocab_size * im->s->n_embd);
    float *head = t->numel == n ? malloc(n * sizeof *head) : NULL;
    if (head)
        safetensors_to_f32(t, head);
    bool tied = head && !memcmp(head, im->host + wte->offset, n * sizeof *head);
    free(head);
    if (!tied)
        return ddp_fail(err, DDP_EUSAGE, "%s: lm_head.weight differs from wte; ddprun's GPT-2 ties them", im->path);
    return DDP_OK;
}

static int check_rest(const import *im, ddp_err *err)
{
    const param_tensor *wte = model_find_tensor(im->m, "wte.weight");
    for (int k = 0; k < im->w->n; k++)
        for (size_t i = 0; i < im->w->files[k].count; i++) {
            int rc = im->w->used[k][i] ? DDP_OK : check_other(im, wte, &im->w->files[k].tensors[i], err);
            if (rc)
                return rc;
        }
    return DDP_OK;
}

static bool same_shape(const gpt2_shape *a, const gpt2_shape *b)
{
    return a->n_layer == b->n_layer && a->n_head == b->n_head && a->n_embd == b->n_embd &&
           a->block_size == b->block_size && a->vocab_size == b->vocab_size;
}

/* m's shape and DIR's, equal. */
static int check_shapes(const model *m, const char *dir, gpt2_shape *s, ddp_err *err)
{
    int64_t seq_len;
    if (gpt2_parse_description(m->description, s, &seq_len, err))
        return ddp_fail(err, DDP_EUSAGE, "%s: a Hugging Face GPT-2 folder; this model is %s", dir, m->description);
    gpt2_shape have;
    int rc = gpt2_hf_read_shape(dir, &have, err);
    if (!rc && !same_shape(&have, s)) {
        char have_txt[MODEL_DESCRIPTION_MAX], want_txt[MODEL_DESCRIPTION_MAX];
        gpt2_format_shape(&have, have_txt, sizeof have_txt);
        gpt2_format_shape(s, want_txt, sizeof want_txt);
        rc = ddp_fail(err, DDP_EUSAGE, "%s/%s describes %s, the model is %s", dir, GPT2_HF_CONFIG, have_txt, want_txt);
    }
    return rc;
}

/* ---- the folder's files ------------------------------------------------------------------- */

static void close_weights(weights *w)
{
    for (int k = 0; k < w->n; k++) {
        safetensors_close(&w->files[k]);
        free(w->used[k]);
    }
    free(w->files);
    free(w->used);
    w->files = NULL, w->used = NULL, w->n = 0;
}

/* Opens file name of dir as w's next file. */
static int add_file(weights *w, const char *dir, const char *name, ddp_err *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    safetensors *files = realloc(w->files, (size_t)(w->n + 1) * sizeof *files);
    bool **used = files ? realloc(w->used, (size_t)(w->n + 1) * sizeof *used) : NULL;
    if (files)
        w->files = files;
    if (used)
        w->used = used;
    if (!files || !used)
        return ddp_fail(err, DDP_ERUNTIME, "%s: out of memory", path);
    int rc = safetensors_open(path, &w->files[w->n], err);
    if (rc)
        return rc;
    if (!(w->used[w->n] = calloc(w->files[w->n].count + 1, sizeof(bool)))) {
        safetensors_close(&w->files[w->n]);
        return ddp_fail(err, DDP_ERUNTIME, "%s: out of memory", path);
    }
    w->n++;
    return DDP_OK;
}

/* The file of weight_map entry value v: a plain file name of the folder, opened once. */
static int shard_of(weights *w, const char *dir, const json_doc *j, const json_node *v, int *k, ddp_err *err)
{
    const char *name = json_text(v);
    if (json_kind_of(v) != JSON_STRING || !name[0] || name[0] == '.' || strchr(name, '/')) {
        char where[600];
        json_where(j, v, where, sizeof where);
        return ddp_fail(err, DDP_EUSAGE, "%s: weight_map names \"%.200s\", expected a file name of the folder", where,
                        name);
    }
    for (*k = 0; *k < w->n; (*k)++)
        if (!strcmp(strrchr(w->files[*k].path, '/') + 1, name))
            return DDP_OK;
    return add_file(w, dir, name, err);
}

/* DIR/model.safetensors.index.json: every shard its weight_map names, each tensor in the file the
 * map gives, and no tensor the map leaves out. */
static int open_index(weights *w, const char *dir, ddp_err *err)
{
    json_doc j;
    int rc = json_doc_load_file(&j, w->path, 64 << 20, err);
    const json_node *map = rc ? NULL : json_object_get(&j, json_root(&j), "weight_map");
    if (!rc && (!map || json_kind_of(map) != JSON_OBJECT))
        rc = ddp_fail(err, DDP_EUSAGE, "%s: no weight_map object", w->path);
    size_t listed = rc ? 0 : json_object_size(map), held = 0;
    for (size_t i = 0; !rc && i < listed; i++) {
        const json_node *v;
        const char *name = json_object_key(&j, map, i, &v);
        int k = 0;
        rc = shard_of(w, dir, &j, v, &k, err);
        if (!rc && !safetensors_find(&w->files[k], name))
            rc = ddp_fail(err, DDP_EUSAGE, "%s: weight_map puts tensor %.200s in %s, which does not hold it", w->path,
                          name, w->files[k].path);
    }
    for (int k = 0; k < w->n; k++)
        held += w->files[k].count;
    if (!rc && held != listed)
        rc = ddp_fail(err, DDP_EUSAGE, "%s: its files hold %zu tensors, weight_map lists %zu", w->path, held, listed);
    json_doc_free(&j);
    return rc;
}

static int open_weights(weights *w, const char *dir, ddp_err *err)
{
    memset(w, 0, sizeof *w);
    snprintf(w->path, sizeof w->path, "%s/%s", dir, GPT2_HF_WEIGHTS);
    struct stat sb;
    int rc;
    if (stat(w->path, &sb) == 0) {
        rc = add_file(w, dir, GPT2_HF_WEIGHTS, err);
    } else {
        snprintf(w->path, sizeof w->path, "%s/%s", dir, GPT2_HF_INDEX);
        rc = stat(w->path, &sb) == 0 ? open_index(w, dir, err)
                                     : ddp_fail(err, DDP_EUSAGE, "%s: neither %s nor %s", dir, GPT2_HF_WEIGHTS,
                                                GPT2_HF_INDEX);
    }
    if (rc)
        close_weights(w);
    return rc;
}

int gpt2_hf_load_model(model *m, const char *dir, ddp_err *err)
{
    gpt2_shape s;
    int rc = check_shapes(m, dir, &s, err);
    weights w;
    if (rc || (rc = open_weights(&w, dir, err)))
        return rc;
    import im = {w.path, &w, m, &s, calloc(m->n_params, sizeof(float))};
    if (!im.host)
        rc = ddp_fail(err, DDP_ERUNTIME, "%s: out of memory for %zu parameters", w.path, m->n_params);
    for (int i = 0; !rc && i < m->n_tensors; i++)
        rc = import_tensor(&im, &m->tensors[i], err);
    if (!rc)
        rc = check_rest(&im, err);
    if (!rc)
        rc = m->dev->ops->upload(m->dev, m->params, im.host, m->n_params * sizeof(float), err);
    free(im.host);
    close_weights(&w);
    return rc;
}
