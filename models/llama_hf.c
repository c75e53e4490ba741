/* llama_hf.c — a Llama from a Hugging Face `save_pretrained` folder (see llama_hf.h for the rules).
 *
 * Owns what LlamaConfig's keys must hold for our Llama and the mapping of the folder's tensors onto
 * the model's own tensor table (the same names and layouts: only the vocabulary rows differ).
 * Loading the result into the model is lm_hf.c's, the driver both importers share; the JSON, the
 * safetensors files and the folder's weights are runtime/hf's. Must not know checkpoints, configs
 * or the training loop. */
#include "llama_hf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/affix.h"
#include "lm_hf.h"

#define MAX_DIM (1 << 24)
#define SHAPE_KEYS "the shape needs num_hidden_layers, num_attention_heads, hidden_size, intermediate_size, " \
                   "max_position_embeddings and vocab_size"
/* ---- config.json -------------------------------------------------------------------------- */

/* architectures: absent, or [the family's]. */
static int check_architectures(const llama_family *fam, const json_doc *j, ddp_err *err)
{
    const char *arch = fam->hf->architecture;
    const json_node *v = json_object_get(j, json_root(j), "architectures");
    if (!v)
        return DDP_OK;
    const json_node *a = json_kind_of(v) == JSON_ARRAY && json_array_size(v) == 1 ? json_array_at(j, v, 0) : NULL;
    if (a && json_kind_of(a) == JSON_STRING && !strcmp(json_text(a), arch))
        return DDP_OK;
    char where[600];
    json_where(j, v, where, sizeof where);
    return ddp_fail(err, DDP_EUSAGE, "%s: architectures is not [\"%s\"]; ddprun imports %s", where, arch, arch);
}

/* Key `key` of object obj (named `name` in messages), a positive number, into *out; absent: def. */
static int read_positive_in(const json_doc *j, const json_node *obj, const char *key, const char *name, double def,
                            double *out, ddp_err *err)
{
    const json_node *v = json_object_get(j, obj, key);
    *out = def;
    if (v && (!json_double(v, out) || !(*out > 0)))
        return hf_key_fail(j, v, name, "expected a positive number", err);
    return DDP_OK;
}

/* Root key `key`, a positive number, into *out; absent: def. */
static int read_positive(const json_doc *j, const char *key, double def, double *out, ddp_err *err)
{
    return read_positive_in(j, json_root(j), key, key, def, out, err);
}

/* Where a folder's RoPE settings lie. transformers 5 writes them in one object, rope_parameters
 * (rope_theta, rope_type and a stretch's numbers); earlier versions wrote rope_theta and
 * rope_scaling at the root. Either is read; a folder with both must say the same in both. */
typedef struct rope_keys {
    const json_node *scaling;  /* the object holding rope_type and a stretch's numbers (or NULL, null) */
    const char *name;          /* "rope_scaling" or "rope_parameters", for messages */
} rope_keys;

/* The keys rope_parameters may hold: what ddprun reads of it. */
static const char *const rope_parameter_keys[] = {"rope_theta", "rope_type", "type", "factor", "low_freq_factor",
                                                  "high_freq_factor", "original_max_position_embeddings"};

/* Fills k and *theta (rope_theta, 10000 when neither layout says). */
static int find_rope_keys(const json_doc *j, rope_keys *k, double *theta, ddp_err *err)
{
    const json_node *root = json_root(j), *p = json_object_get(j, root, "rope_parameters");
    *k = (rope_keys){json_object_get(j, root, "rope_scaling"), "rope_scaling"};
    int rc = read_positive(j, "rope_theta", 10000.0, theta, err);
    if (rc || !p || json_kind_of(p) == JSON_NULL)
        return rc;
    if (json_kind_of(p) != JSON_OBJECT)
        return hf_key_fail(j, p, "rope_parameters", "expected an object", err);
    for (size_t i = 0; i < json_object_size(p); i++) {
        const json_node *v;
        const char *key = json_object_key(j, p, i, &v);
        size_t n = sizeof rope_parameter_keys / sizeof rope_parameter_keys[0], m = 0;
        while (m < n && strcmp(key, rope_parameter_keys[m]))
            m++;
        char name[96];
        snprintf(name, sizeof name, "rope_parameters.%s", key);
        if (m == n)
            return hf_key_fail(j, v, name, "ddprun reads rope_theta, rope_type and Llama 3's stretch there", err);
    }
    if (k->scaling && json_kind_of(k->scaling) != JSON_NULL)
        return hf_key_fail(j, k->scaling, "rope_scaling", "rope_parameters is set as well (transformers 5 keeps "
                           "the stretch there alone)", err);
    /* rope_theta in one of them is the folder's; in both, it must be the same */
    const json_node *outer = json_object_get(j, root, "rope_theta");
    double inner = 0;
    rc = read_positive_in(j, p, "rope_theta", "rope_parameters.rope_theta", *theta, &inner, err);
    if (!rc && outer && *theta != inner)
        rc = hf_key_fail(j, outer, "rope_theta", "rope_parameters.rope_theta says otherwise", err);
    *k = (rope_keys){p, "rope_parameters"};
    *theta = inner;
    return rc;
}

/* head_dim into s->head_dim: absent or null, 0, but for a family whose config class has a default
 * (head_dim_absent: Qwen3's absent 128, its null refused); hidden_size / num_attention_heads, 0 as
 * well (held as a config holds it: llama_shape_normalize_head_dim); a size of the heads' own, for a
 * family that reads the key (Llama, Mistral, Qwen3), if even and at most LLAMA_MAX_HEAD_DIM, and for
 * the others refused. */
static int read_head_dim(const llama_family *fam, const json_doc *j, llama_shape *s, ddp_err *err)
{
    const json_node *v = json_object_get(j, json_root(j), "head_dim");
    int64_t absent = fam->hf->head_dim ? fam->hf->head_dim_absent : 0;
    uint64_t hd = 0;
    s->head_dim = 0;
    if ((!v || json_kind_of(v) == JSON_NULL) && !absent)
        return DDP_OK;
    if (!v || json_kind_of(v) == JSON_NULL) {
        char why[96];
        snprintf(why, sizeof why, "expected an even head size (transformers' %s has no null head size)", fam->title);
        if (v)
            return hf_key_fail(j, v, "head_dim", why, err);
        hd = (uint64_t)absent;
    } else if (!json_uint(v, &hd) || hd > MAX_DIM) {
        hd = 0;
    }
    if (hd) {
        s->head_dim = (int64_t)hd;
        llama_shape_normalize_head_dim(s);
        if (!llama_shape_own_head_dim(s) || (fam->hf->head_dim && hd <= LLAMA_MAX_HEAD_DIM && hd % 2 == 0))
            return DDP_OK;
        s->head_dim = 0;
    }
    char why[160];
    if (fam->hf->head_dim)
        snprintf(why, sizeof why, "expected %san even head size up to %d (RoPE rotates its two halves)",
                 absent ? "" : "null or ", LLAMA_MAX_HEAD_DIM);
    else
        snprintf(why, sizeof why, "ddprun's %s has heads of hidden_size / num_attention_heads = %lld (or null)",
                 fam->title, (long long)(s->n_embd / s->n_head));
    return hf_key_fail(j, v, "head_dim", why, err);
}

/* num_key_value_heads (null: num_attention_heads; absent: the family's config class's default) and
 * head_dim (read_head_dim); without a head_dim, the heads divide hidden_size into even parts. */
static int read_heads(const llama_family *fam, const json_doc *j, llama_shape *s, ddp_err *err)
{
    const json_node *v = json_object_get(j, json_root(j), "num_key_value_heads");
    s->n_kv_head = !v && fam->hf->kv_heads_absent ? fam->hf->kv_heads_absent : s->n_head;
    int rc = v && json_kind_of(v) != JSON_NULL ? hf_key_size(j, "num_key_value_heads", MAX_DIM, &s->n_kv_head, "", err)
                                               : DDP_OK;
    if (!rc)
        rc = read_head_dim(fam, j, s, err);
    if (!rc && !s->head_dim && s->n_embd % s->n_head)
        return ddp_fail(err, DDP_EUSAGE, "%s: hidden_size %lld is not divisible by num_attention_heads %lld", j->name,
                        (long long)s->n_embd, (long long)s->n_head);
    if (!rc && s->n_head % s->n_kv_head)
        return ddp_fail(err, DDP_EUSAGE, "%s: num_attention_heads %lld is not divisible by num_key_value_heads %lld%s%s%s",
                        j->name, (long long)s->n_head, (long long)s->n_kv_head, v ? "" : " (absent: ",
                        v ? "" : fam->hf->architecture, v ? "" : "'s default)");
    if (!rc && llama_head_dim(s) % 2)
        return ddp_fail(err, DDP_EUSAGE, "%s: the head size hidden_size / num_attention_heads = %lld is odd (RoPE "
                        "rotates its two halves)", j->name, (long long)llama_head_dim(s));
    return rc;
}

/* sliding_window (a family that reads it: Mistral): absent, the config class's default
 * (LLAMA_HF_SLIDING_WINDOW_ABSENT); null, none (0); else a positive integer, the positions each
 * one sees. */
static int read_sliding_window(const json_doc *j, llama_shape *s, ddp_err *err)
{
    const json_node *v = json_object_get(j, json_root(j), "sliding_window");
    uint64_t window = 0;
    s->sliding_window = v ? 0 : LLAMA_HF_SLIDING_WINDOW_ABSENT;
    if (!v || json_kind_of(v) == JSON_NULL)
        return DDP_OK;
    if (!json_uint(v, &window) || window < 1 || window > MAX_DIM)
        return hf_key_fail(j, v, "sliding_window", "expected null or a positive integer", err);
    s->sliding_window = (int64_t)window;
    return DDP_OK;
}

/* A number of the stretch's object (k->scaling, its key `key`) into *out: positive, and finite. */
static int read_scaling_number(const json_doc *j, const rope_keys *k, const char *key, double *out, ddp_err *err)
{
    const json_node *v = json_object_get(j, k->scaling, key);
    char name[64];
    snprintf(name, sizeof name, "%s.%s", k->name, key);
    if (!v)
        return ddp_fail(err, DDP_EUSAGE, "%s: no %s (Llama 3's stretch has factor, low_freq_factor, "
                        "high_freq_factor and original_max_position_embeddings)", j->name, name);
    if (!json_double(v, out) || !(*out > 0) || !isfinite(*out))
        return hf_key_fail(j, v, name, "expected a positive number", err);
    return DDP_OK;
}

/* original_max_position_embeddings of the stretch's object into x: a positive integer. */
static int read_original_positions(const json_doc *j, const rope_keys *k, llama_rope_scaling *x, ddp_err *err)
{
    const json_node *v = json_object_get(j, k->scaling, "original_max_position_embeddings");
    uint64_t positions = 0;
    char name[80];
    snprintf(name, sizeof name, "%s.original_max_position_embeddings", k->name);
    if (!v)
        return ddp_fail(err, DDP_EUSAGE, "%s: no %s", j->name, name);
    if (!json_uint(v, &positions) || positions < 1 || positions > MAX_DIM)
        return hf_key_fail(j, v, name, "expected a positive integer", err);
    x->original_max_positions = (int64_t)positions;
    return DDP_OK;
}

/* The family's fixed rope_scaling key (a family that applies RoPE unscaled), or NULL. */
static const hf_fixed_key *unscaled_rule(const llama_family *fam)
{
    for (size_t i = 0; i < fam->hf->n_fixed_keys; i++)
        if (!strcmp(fam->hf->fixed_keys[i].key, "rope_scaling"))
            return &fam->hf->fixed_keys[i];
    return NULL;
}

/* The stretch (k: find_rope_keys'): absent, null or rope_type "default" (none), or Llama 3's
 * (rope_type, or the older type, "llama3"; both given, they must agree) with its four numbers, factor at least 1 and
 * low_freq_factor below high_freq_factor, into s->rope_scaling. Any other rope_type is refused,
 * naming it, and any but "default" for a family that applies RoPE unscaled. */
static int read_rope_scaling(const llama_family *fam, const json_doc *j, const rope_keys *k, llama_shape *s,
                             ddp_err *err)
{
    const json_node *r = k->scaling;
    s->rope_scaling = LLAMA_ROPE_UNSCALED;
    if (!r || json_kind_of(r) == JSON_NULL)
        return DDP_OK;
    char type_key[64];
    snprintf(type_key, sizeof type_key, "%s.rope_type", k->name);
    if (json_kind_of(r) != JSON_OBJECT)
        return hf_key_fail(j, r, k->name, "expected null or an object", err);
    const json_node *type = json_object_get(j, r, "rope_type"), *older = json_object_get(j, r, "type");
    /* transformers 4 lets the root's "type" overwrite "rope_type", 5 reads "rope_type": two names
     * that differ mean another stretch to one of them */
    if (type && older && !(json_kind_of(type) == JSON_STRING && json_kind_of(older) == JSON_STRING &&
                           !strcmp(json_text(type), json_text(older)))) {
        char older_key[64];
        snprintf(older_key, sizeof older_key, "%s.type", k->name);
        return hf_key_fail(j, older, older_key, "expected the same as its rope_type (transformers 4 reads type, 5 "
                           "rope_type: two different stretches)", err);
    }
    type = type ? type : older;
    const char *name = type && json_kind_of(type) == JSON_STRING ? json_text(type) : NULL;
    if (name && !strcmp(name, "default"))
        return DDP_OK;
    const hf_fixed_key *unscaled = unscaled_rule(fam);
    if (unscaled || !name || strcmp(name, "llama3"))
        return type ? hf_key_fail(j, type, type_key, unscaled ? unscaled->why : "ddprun's Llama stretches RoPE as "
                                  "Llama 3 does (\"llama3\") or not at all", err)
                    : hf_key_fail(j, r, k->name, "it has no rope_type", err);
    llama_rope_scaling *x = &s->rope_scaling;
    int rc = read_scaling_number(j, k, "factor", &x->factor, err);
    if (!rc)
        rc = read_scaling_number(j, k, "low_freq_factor", &x->low_freq_factor, err);
    if (!rc)
        rc = read_scaling_number(j, k, "high_freq_factor", &x->high_freq_factor, err);
    rc = rc ? rc : read_original_positions(j, k, x, err);
    char key[64];
    snprintf(key, sizeof key, "%s.factor", k->name);
    if (!rc && x->factor < 1)
        rc = hf_key_fail(j, json_object_get(j, r, "factor"), key, "expected at least 1", err);
    snprintf(key, sizeof key, "%s.low_freq_factor", k->name);
    char why[96];
    snprintf(why, sizeof why, "expected below %s.high_freq_factor", k->name);
    if (!rc && !(x->low_freq_factor < x->high_freq_factor))
        rc = hf_key_fail(j, json_object_get(j, r, "low_freq_factor"), key, why, err);
    if (!rc && !llama_rope_scaled(s)) /* factor 1 stretches nothing: the shape of a folder without it */
        s->rope_scaling = LLAMA_ROPE_UNSCALED;
    return rc;
}

static int shape_from(const llama_family *fam, const json_doc *j, llama_shape *s, ddp_err *err)
{
    memset(s, 0, sizeof *s);
    /* the fixed keys first: another family's folder is named by its model_type, not by a shape key
     * this family reads otherwise (Qwen3's head_dim read as Qwen2) */
    int rc = hf_check_fixed(j, fam->hf->fixed_keys, fam->hf->n_fixed_keys, err);
    if (!rc)
        rc = hf_key_size(j, "num_hidden_layers", LLAMA_MAX_LAYERS, &s->n_layer, SHAPE_KEYS, err);
    if (!rc)
        rc = hf_key_size(j, "num_attention_heads", MAX_DIM, &s->n_head, SHAPE_KEYS, err);
    if (!rc)
        rc = hf_key_size(j, "hidden_size", MAX_DIM, &s->n_embd, SHAPE_KEYS, err);
    if (!rc)
        rc = hf_key_size(j, "intermediate_size", MAX_DIM, &s->ffn_hidden, SHAPE_KEYS, err);
    if (!rc)
        rc = hf_key_size(j, "max_position_embeddings", MAX_DIM, &s->block_size, SHAPE_KEYS, err);
    if (!rc)
        rc = hf_key_size(j, "vocab_size", MAX_DIM, &s->vocab_size, SHAPE_KEYS, err);
    if (!rc)
        rc = read_heads(fam, j, s, err);
    rope_keys rope;
    if (!rc)
        rc = find_rope_keys(j, &rope, &s->rope_theta, err);
    if (!rc)
        rc = read_positive(j, "rms_norm_eps", 1e-6, &s->norm_eps, err);
    const json_node *tie = json_object_get(j, json_root(j), "tie_word_embeddings");
    if (!rc && tie && json_kind_of(tie) != JSON_BOOL)
        rc = hf_key_fail(j, tie, "tie_word_embeddings", "expected true or false", err);
    s->tie_embeddings = tie && !strcmp(json_text(tie), "true");
    if (!rc) /* after the fixed keys: a family that refuses any rope_scaling (Qwen2) says so first */
        rc = read_rope_scaling(fam, j, &rope, s, err);
    if (!rc && fam->hf->sliding_window)
        rc = read_sliding_window(j, s, err);
    return rc ? rc : check_architectures(fam, j, err);
}

int llama_hf_read_shape(const llama_family *fam, const char *dir, llama_shape *shape, ddp_err *err)
{
    json_doc j;
    int rc = hf_config_load(dir, &j, err);
    if (!rc)
        rc = shape_from(fam, &j, shape, err);
    json_doc_free(&j);
    return rc;
}

/* ---- tensors ------------------------------------------------------------------------------ */

bool llama_hf_vocab_rows(const char *name)
{
    return !strcmp(name, "model.embed_tokens.weight") || !strcmp(name, "lm_head.weight");
}

static int import_tensor(const lm_hf_import *im, const param_tensor *t, const st_tensor **from, ddp_err *err)
{
    const llama_shape *s = &im->shape->llama;
    const llama_family *fam = im->imp->ctx;
    const st_tensor *hf = *from = hf_weights_take(im->w, t->name);
    if (!hf)
        return ddp_fail(err, DDP_EUSAGE, "%s has no tensor %s: not %s's tensors?", im->w->path, t->name,
                        fam->hf->architecture);
    const char *file = hf_weights_file_of(im->w, hf);
    if (safetensors_check_readable(file, hf, err))
        return err->code;
    int64_t dims[2] = {llama_hf_vocab_rows(t->name) ? s->vocab_size : t->shape[0], t->ndim > 1 ? t->shape[1] : 0};
    if (hf->ndim != t->ndim || hf->shape[0] != dims[0] || (t->ndim > 1 && hf->shape[1] != dims[1])) {
        char have[96], want[96];
        hf_format_dims(hf->shape, hf->ndim, have, sizeof have);
        hf_format_dims(dims, t->ndim, want, sizeof want);
        return ddp_fail(err, DDP_EUSAGE, "%s: tensor %s is %s, expected %s", file, hf->name, have, want);
    }
    lm_hf_take_as_is(im, t, hf); /* the vocabulary's rows: the first vocab_size */
    return DDP_OK;
}

/* A tensor of the folder that is none of ours: a RoPE buffer (skipped), a tied lm_head (must equal
 * embed_tokens), nothing else. */
static int check_unused(void *ctx, const st_tensor *t, ddp_err *err)
{
    const lm_hf_import *im = ctx;
    const llama_shape *s = &im->shape->llama;
    if (has_suffix(t->name, ".rotary_emb.inv_freq"))
        return DDP_OK;
    const llama_family *fam = im->imp->ctx;
    if (strcmp(t->name, "lm_head.weight") || !s->tie_embeddings)
        return ddp_fail(err, DDP_EUSAGE, "%s: tensor %s is not one of the %s's%s", hf_weights_file_of(im->w, t),
                        t->name, fam->title, strcmp(t->name, "lm_head.weight") ? "" : " (config.json ties it to embed_tokens)");
    if (safetensors_check_readable(hf_weights_file_of(im->w, t), t, err))
        return err->code;
    bool tied = lm_hf_tied(im, t, "model.embed_tokens.weight");
    if (!tied)
        return ddp_fail(err, DDP_EUSAGE, "%s: lm_head.weight differs from model.embed_tokens.weight, which "
                        "tie_word_embeddings ties it to", hf_weights_file_of(im->w, t));
    return DDP_OK;
}

/* The family's shape, in the llama member whatever the family's kind: only this file reads it. */
static int folder_shape(const lm_hf_importer *imp, const char *dir, model_opts *shape, char *text, size_t size,
                        ddp_err *err)
{
    int rc = llama_hf_read_shape(imp->ctx, dir, &shape->llama, err);
    if (!rc)
        llama_format_shape(imp->ctx, &shape->llama, text, size);
    return rc;
}

int llama_hf_load_model(const llama_family *fam, model *m, const char *dir, ddp_err *err)
{
    const lm_hf_importer importer = {fam->kind, fam->title, fam, folder_shape, import_tensor, check_unused};
    return lm_hf_load_model(m, dir, &importer, err);
}

int llama_hf_load_pieces(const llama_family *fam, const model *m, const char *dir, const param_piece *pieces,
                         int n_pieces, float *host, ddp_err *err)
{
    const lm_hf_importer importer = {fam->kind, fam->title, fam, folder_shape, import_tensor, check_unused};
    return lm_hf_load_pieces(m, dir, &importer, pieces, n_pieces, host, err);
}
