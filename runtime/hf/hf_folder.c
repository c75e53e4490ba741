/* hf_folder.c — a Hugging Face folder's config.json keys and weights (see hf_folder.h).
 *
 * Owns finding the weights (model.safetensors or the index's shards), the index's rules, the
 * taken/unused bookkeeping, and the config key checks every model reader shares. The file formats
 * are json_doc.c's and safetensors.c's. Must not know any model. */
#include "hf_folder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define INDEX_MAX_BYTES (64 << 20)

/* ---- config.json -------------------------------------------------------------------------- */

int hf_config_load(const char *dir, json_doc *j, ddp_err *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, HF_CONFIG);
    int rc = json_doc_load_file(j, path, HF_CONFIG_MAX_BYTES, err);
    const json_node *root = rc ? NULL : json_root(j);
    if (root && json_kind_of(root) != JSON_OBJECT)
        rc = ddp_fail(err, DDP_EUSAGE, "%s: %s, expected an object", j->name, json_kind_name(json_kind_of(root)));
    return rc;
}

int hf_key_fail(const json_doc *j, const json_node *v, const char *key, const char *why, ddp_err *err)
{
    char where[600];
    json_where(j, v, where, sizeof where);
    json_kind k = json_kind_of(v);
    if (k == JSON_OBJECT || k == JSON_ARRAY)
        return ddp_fail(err, DDP_EUSAGE, "%s: %s is %s; %s", where, key, json_kind_name(k), why);
    const char *quote = k == JSON_STRING ? "\"" : "";
    return ddp_fail(err, DDP_EUSAGE, "%s: %s is %s%.80s%s; %s", where, key, quote, json_text(v), quote, why);
}

int hf_key_size(const json_doc *j, const char *key, int64_t max, int64_t *out, const char *needs, ddp_err *err)
{
    const json_node *v = json_object_get(j, json_root(j), key);
    if (!v)
        return ddp_fail(err, DDP_EUSAGE, "%s: no %s (%s)", j->name, key, needs);
    uint64_t u;
    if (!json_uint(v, &u) || u < 1 || u > (uint64_t)max) {
        char why[96];
        snprintf(why, sizeof why, "expected an integer in 1..%lld", (long long)max);
        return hf_key_fail(j, v, key, why, err);
    }
    *out = (int64_t)u;
    return DDP_OK;
}

static int check_one(const json_doc *j, const hf_fixed_key *k, ddp_err *err)
{
    const json_node *v = json_object_get(j, json_root(j), k->key);
    if (!v || json_kind_of(v) != k->kind)
        return v ? hf_key_fail(j, v, k->key, k->why, err) : DDP_OK;
    for (int i = 0; i < 3 && k->accepted[i]; i++)
        if (k->kind == JSON_NUMBER ? strtod(json_text(v), NULL) == strtod(k->accepted[i], NULL)
                                   : !strcmp(json_text(v), k->accepted[i]))
            return DDP_OK;
    return hf_key_fail(j, v, k->key, k->why, err);
}

int hf_check_fixed(const json_doc *j, const hf_fixed_key *keys, size_t n, ddp_err *err)
{
    int rc = DDP_OK;
    for (size_t i = 0; !rc && i < n; i++)
        rc = check_one(j, &keys[i], err);
    return rc;
}

void hf_format_dims(const int64_t *dims, int ndim, char *out, size_t size)
{
    size_t n = (size_t)snprintf(out, size, "[");
    for (int d = 0; d < ndim && n < size; d++)
        n += (size_t)snprintf(out + n, size - n, "%s%lld", d ? ", " : "", (long long)dims[d]);
    if (n < size)
        snprintf(out + n, size - n, "]");
}

/* ---- the weights -------------------------------------------------------------------------- */

void hf_weights_close(hf_weights *w)
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
static int add_file(hf_weights *w, const char *dir, const char *name, ddp_err *err)
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
static int shard_of(hf_weights *w, const char *dir, const json_doc *j, const json_node *v, int *k, ddp_err *err)
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
    int rc = add_file(w, dir, name, err);
    if (rc != DDP_OK) { /* the file's own error, after where the index asks for it */
        char where[600];
        json_where(j, v, where, sizeof where);
        ddp_prefix(err, "%s: weight_map names \"%.200s\"", where, name);
    }
    return rc;
}

/* DIR/model.safetensors.index.json: every shard its weight_map names, each tensor in the file the
 * map gives, and no tensor the map leaves out. */
static int open_index(hf_weights *w, const char *dir, ddp_err *err)
{
    json_doc j;
    int rc = json_doc_load_file(&j, w->path, INDEX_MAX_BYTES, err);
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

int hf_weights_open(hf_weights *w, const char *dir, ddp_err *err)
{
    char weights[sizeof w->path], index[sizeof w->path]; /* not formatted into w: gcc -O2 with UBSan warns */
    snprintf(weights, sizeof weights, "%s/%s", dir, HF_WEIGHTS);
    snprintf(index, sizeof index, "%s/%s", dir, HF_INDEX);
    memset(w, 0, sizeof *w);
    struct stat sb;
    bool single = stat(weights, &sb) == 0;
    memcpy(w->path, single ? weights : index, sizeof w->path);
    int rc;
    if (single) {
        rc = add_file(w, dir, HF_WEIGHTS, err);
    } else {
        rc = stat(w->path, &sb) == 0 ? open_index(w, dir, err)
                                     : ddp_fail(err, DDP_EUSAGE, "%s: neither %s nor %s", dir, HF_WEIGHTS, HF_INDEX);
    }
    if (rc)
        hf_weights_close(w);
    return rc;
}

const st_tensor *hf_weights_take(hf_weights *w, const char *name)
{
    for (int k = 0; k < w->n; k++) {
        const st_tensor *t = safetensors_find(&w->files[k], name);
        if (t) {
            w->used[k][t - w->files[k].tensors] = true;
            return t;
        }
    }
    return NULL;
}

const char *hf_weights_file_of(const hf_weights *w, const st_tensor *t)
{
    for (int k = 0; k < w->n; k++)
        for (size_t i = 0; i < w->files[k].count; i++)
            if (&w->files[k].tensors[i] == t)
                return w->files[k].path;
    return w->path;
}

int hf_weights_each_unused(const hf_weights *w, int (*fn)(void *ctx, const st_tensor *t, ddp_err *err), void *ctx,
                           ddp_err *err)
{
    for (int k = 0; k < w->n; k++)
        for (size_t i = 0; i < w->files[k].count; i++) {
            int rc = w->used[k][i] ? DDP_OK : fn(ctx, &w->files[k].tensors[i], err);
            if (rc)
                return rc;
        }
    return DDP_OK;
}
