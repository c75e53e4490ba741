/* config_model.c — the model kinds' config sections: each kind's keys (with their defaults) and checks.
 *
 * model.kind picks a model; its settings live in a section of their own named after it
 * (model.mlp for the MLP), so one model's settings never sit among another's. Adding a kind is
 * one key table and (when its keys constrain each other) one check, listed in
 * cfg_model_sections. A section of a kind other than model.kind is an error naming both,
 * reported where the later of the two was set. A GPT-2's or a Llama's shape may come from
 * checkpoint.init_from instead: the shape keys the config leaves out are pending (model.shape_pending,
 * by where each key was set, so a bool and a double count too) until the training job, which reads
 * the file, hands its shape to config_take_shape. A Llama's ffn_hidden 0 is resolved here by Llama's
 * multiple_of rule (unless left to checkpoint.init_from), so the model, the resolved config and the
 * hash see the width used. This file must not parse YAML
 * values (config_value.c) or know the general keys beyond those a kind's rules involve. */
#include "config_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const cfg_model_kind_names[] = {"mlp", "gpt2", "llama", NULL};

static const char *const act_names[] = {"relu", "gelu", "gelu_tanh", NULL};

#define KEYS(table) table, (int)(sizeof table / sizeof table[0])

/* Whether key path of a section's table (keys, n) is left to checkpoint.init_from: its bit in
 * model.shape_pending (set by cfg_check_model before the kind's check). */
static bool key_pending(const config *c, const cfg_key *keys, int n, const char *path)
{
    for (int i = 1; i < n; i++)
        if (!strcmp(keys[i].path, path))
            return c->model.shape_pending >> i & 1;
    return false;
}

/* ---- mlp ---- */

static const cfg_key mlp_keys[] = {
    SECTION("model.mlp"),
    {.path = "model.mlp.hidden", .type = KT_HIDDEN, .imin = 1, .imax = 1 << 20, .def = "[1024, 1024]",
     .hash = HASH_YES, .doc = "Hidden layer widths (the input width and class count come from the data)."},
    ENUM("model.mlp.activation", model.mlp.activation, act_names, "relu", HASH_YES, "Hidden-layer activation."),
};

/* ---- gpt2 ---- */

#define FROM_INIT " Left out with `checkpoint.init_from`: that file's or folder's."

/* GPT-2 small (124M), as llm.c and Hugging Face define it. The shape keys come in gpt2_shape's
 * field order (config_take_shape's names[] rely on it). */
static const cfg_key gpt2_keys[] = {
    SECTION("model.gpt2"),
    INT("model.gpt2.n_layer", model.gpt2.n_layer, 1, 96, "12", HASH_YES, "Transformer blocks." FROM_INIT),
    INT("model.gpt2.n_head", model.gpt2.n_head, 1, 1024, "12", HASH_YES,
        "Attention heads; must divide `model.gpt2.n_embd`." FROM_INIT),
    INT("model.gpt2.n_embd", model.gpt2.n_embd, 1, 1 << 16, "768", HASH_YES, "Channels." FROM_INIT),
    INT("model.gpt2.block_size", model.gpt2.block_size, 1, 1 << 20, "1024", HASH_YES,
        "Position embeddings (longest sequence); at least `data.seq_len`." FROM_INIT),
    INT("model.gpt2.vocab_size", model.gpt2.vocab_size, 2, 1 << 24, "50257", HASH_YES,
        "Vocabulary, at least the data's; padded to a multiple of 128 inside (the padding never reaches the "
        "loss or sampling). With gpt2, `optimizer.betas` defaults to `[0.9, 0.95]` and weight decay applies "
        "to 2-D tensors only." FROM_INIT),
};

/* GPT-2 trains with AdamW betas (0.9, 0.95): the model's default unless the file sets them. */
static int gpt2_check(cfg_loader *L)
{
    if (L->origin[cfg_key_find("optimizer.betas")].source < 0)
        L->c->optimizer.beta2 = 0.95;
    return DDP_OK;
}

static const char *config_file(const config *c) { return c->source[0] ? c->source : "the config"; }

static int not_divisible(const char *file, const char *name, int64_t v, const char *by_name, int64_t by,
                         ddp_err *err)
{
    return ddp_fail(err, DDP_EUSAGE, "checkpoint.init_from's %s: %s %lld is not divisible by %s %lld", file, name,
                    (long long)v, by_name, (long long)by);
}

/* data.seq_len against the block size (key) a shape from checkpoint.init_from brings (its name there). */
static int seq_len_fits(const config *c, const char *key, int64_t block_size, const char *name, const char *file,
                        ddp_err *err)
{
    if (c->data.kind != DATA_TOKENS || c->data.seq_len <= block_size)
        return DDP_OK;
    return ddp_fail(err, DDP_EUSAGE, "%s: data.seq_len: expected data.seq_len <= %s, got data.seq_len %lld with %s "
                    "%lld (%s %lld of checkpoint.init_from's %s)", config_file(c), key, (long long)c->data.seq_len,
                    key, (long long)block_size, name, (long long)block_size, file);
}

/* names: n_layer, n_head, n_embd, block_size, vocab_size */
static int gpt2_shape_check(const config *c, const char *file, const char *const names[], ddp_err *err)
{
    const gpt2_shape *s = &c->model.gpt2;
    if (s->n_embd % s->n_head)
        return not_divisible(file, names[2], s->n_embd, names[1], s->n_head, err);
    return seq_len_fits(c, "model.gpt2.block_size", s->block_size, names[3], file, err);
}

/* ---- llama ---- */

/* A small Llama (about GPT-2 small's size) with grouped-query attention; Llama 3's rope_theta
 * 500000 is set in configs. The shape keys come in llama_shape's field order (multiple_of, outside
 * it, is none of them). */
#define FROM_FOLDER " Left out with `checkpoint.init_from`: the folder's."

static const cfg_key llama_keys[] = {
    SECTION("model.llama"),
    INT("model.llama.n_layer", model.llama.n_layer, 1, LLAMA_MAX_LAYERS, "12", HASH_YES, "Transformer blocks." FROM_FOLDER),
    INT("model.llama.n_head", model.llama.n_head, 1, 1024, "12", HASH_YES,
        "Query heads; must divide `model.llama.n_embd`, leaving an even head size (RoPE rotates its two halves)."
        FROM_FOLDER),
    INT("model.llama.n_kv_head", model.llama.n_kv_head, 1, 1024, "4", HASH_YES,
        "Key/value heads (grouped-query attention: query head h reads key/value head h / (n_head / n_kv_head)); "
        "must divide `model.llama.n_head` (equal to it: multi-head attention)." FROM_FOLDER),
    INT("model.llama.n_embd", model.llama.n_embd, 2, 1 << 16, "768", HASH_YES, "Channels." FROM_FOLDER),
    INT("model.llama.ffn_hidden", model.llama.ffn_hidden, 0, 1 << 20, "0", HASH_YES,
        "Width of the SwiGLU MLP; 0: Llama's rule, 2·(4·n_embd)/3 (rounded down) rounded up to a multiple of "
        "`model.llama.multiple_of` (the resolved config holds the number). Left out with "
        "`checkpoint.init_from`: the folder's (not the rule's)."),
    INT("model.llama.multiple_of", model.llama_multiple_of, 1, 1 << 16, "256", HASH_NO,
        "What `model.llama.ffn_hidden: 0` rounds up to a multiple of (the width it gives is hashed)."),
    INT("model.llama.block_size", model.llama.block_size, 1, 1 << 20, "1024", HASH_YES,
        "Longest sequence (the RoPE tables' positions); at least `data.seq_len`." FROM_FOLDER),
    INT("model.llama.vocab_size", model.llama.vocab_size, 2, 1 << 24, "32000", HASH_YES,
        "Vocabulary, at least the data's; padded to a multiple of 128 inside (the padding never reaches the "
        "loss or sampling). With llama, `optimizer.betas` defaults to `[0.9, 0.95]` and weight decay applies "
        "to 2-D tensors only." FROM_FOLDER),
    NUM("model.llama.rope_theta", model.llama.rope_theta, NR_POSITIVE, "10000", HASH_YES,
        "RoPE base: head dimension pair j turns at rope_theta^(-2j/head_size) radians per position (Llama 3: "
        "500000)." FROM_FOLDER),
    NUM("model.llama.norm_eps", model.llama.norm_eps, NR_POSITIVE, "1e-5", HASH_YES, "RMSNorm's ε." FROM_FOLDER),
    BOOL("model.llama.tie_embeddings", model.llama.tie_embeddings, "false", HASH_YES,
         "The output projection is the token embedding (no `lm_head`)." FROM_FOLDER),
};

/* Llama's FFN width rule (Meta's reference code without ffn_dim_multiplier). */
static int64_t llama_ffn_hidden(int64_t n_embd, int64_t multiple_of)
{
    int64_t hidden = 2 * (4 * n_embd) / 3;
    return (hidden + multiple_of - 1) / multiple_of * multiple_of;
}

/* Betas as GPT-2's; ffn_hidden 0 becomes the rule's width, unless the width is left to
 * checkpoint.init_from (pending, the folder's). */
static int llama_check(cfg_loader *L)
{
    if (L->origin[cfg_key_find("optimizer.betas")].source < 0)
        L->c->optimizer.beta2 = 0.95;
    llama_shape *s = &L->c->model.llama;
    if (s->ffn_hidden == 0 && !key_pending(L->c, KEYS(llama_keys), "model.llama.ffn_hidden"))
        s->ffn_hidden = llama_ffn_hidden(s->n_embd, L->c->model.llama_multiple_of);
    return DDP_OK;
}

/* names: n_layer, n_head, n_kv_head, n_embd, ffn_hidden, block_size, vocab_size, rope_theta, norm_eps,
 * tie_embeddings */
static int llama_shape_check(const config *c, const char *file, const char *const names[], ddp_err *err)
{
    const llama_shape *s = &c->model.llama;
    if (s->n_embd % s->n_head)
        return not_divisible(file, names[3], s->n_embd, names[1], s->n_head, err);
    if (s->n_embd / s->n_head % 2)
        return ddp_fail(err, DDP_EUSAGE, "checkpoint.init_from's %s: %s %lld / %s %lld is an odd head size (RoPE "
                        "rotates its two halves)", file, names[3], (long long)s->n_embd, names[1],
                        (long long)s->n_head);
    if (s->n_head % s->n_kv_head)
        return not_divisible(file, names[1], s->n_head, names[2], s->n_kv_head, err);
    return seq_len_fits(c, "model.llama.block_size", s->block_size, names[5], file, err);
}

/* ---- the kinds ---- */

#define SHAPE(field, check) OFF(field), sizeof(((config *)0)->field), check

const cfg_model_section cfg_model_sections[] = {
    {MODEL_MLP, "model.mlp", KEYS(mlp_keys), NULL, 0, 0, NULL},
    {MODEL_GPT2, "model.gpt2", KEYS(gpt2_keys), gpt2_check, SHAPE(model.gpt2, gpt2_shape_check)},
    {MODEL_LLAMA, "model.llama", KEYS(llama_keys), llama_check, SHAPE(model.llama, llama_shape_check)},
};
const int cfg_n_model_sections = (int)(sizeof cfg_model_sections / sizeof cfg_model_sections[0]);
_Static_assert(sizeof cfg_model_sections / sizeof cfg_model_sections[0] ==
               sizeof cfg_model_kind_names / sizeof cfg_model_kind_names[0] - 1,
               "one section per model kind");
_Static_assert(sizeof gpt2_keys / sizeof gpt2_keys[0] <= 32 && sizeof llama_keys / sizeof llama_keys[0] <= 32,
               "model.shape_pending has a bit per section key");

/* The kind whose section holds key path, or NULL for a key outside every model section. */
static const cfg_model_section *section_of(const char *path)
{
    for (int s = 0; s < cfg_n_model_sections; s++) {
        size_t n = strlen(cfg_model_sections[s].path);
        if (!strncmp(path, cfg_model_sections[s].path, n) && (path[n] == '\0' || path[n] == '.'))
            return &cfg_model_sections[s];
    }
    return NULL;
}

bool cfg_model_key_active(const config *c, const cfg_key *k)
{
    const cfg_model_section *s = section_of(k->path);
    return !s || s->kind == c->model.kind;
}

/* A section set for another kind, reported like a contradiction (config_check.c): at the later
 * of the section and model.kind, naming both and where the earlier one was set. */
static int wrong_kind(cfg_loader *L, const cfg_model_section *s, int k_section)
{
    int k_kind = cfg_key_find("model.kind");
    cfg_pos sec = L->origin[k_section], kind = L->origin[k_kind];
    bool section_later = cfg_pos_later(sec, kind);
    char kind_text[64], earlier_at[CFG_PATH_MAX + 64];
    snprintf(kind_text, sizeof kind_text, "model.kind %s", cfg_model_kind_names[L->c->model.kind]);
    if (kind.source < 0)
        snprintf(earlier_at, sizeof earlier_at, "the default");
    else
        cfg_pos_label(L, section_later ? kind : sec, earlier_at, sizeof earlier_at);
    return cfg_error(L, section_later ? sec : kind, section_later ? s->path : "model.kind",
                     "expected %s only with model.kind %s, got %s with %s (%s)", s->path, cfg_key_leaf(s->path),
                     section_later ? s->path : kind_text, section_later ? kind_text : s->path, earlier_at);
}

/* ---- shapes from checkpoint.init_from ---- */

static const cfg_model_section *active_section(const config *c)
{
    for (int s = 0; s < cfg_n_model_sections; s++)
        if (cfg_model_sections[s].kind == c->model.kind)
            return &cfg_model_sections[s];
    return NULL;
}

static bool shape_key(const cfg_model_section *s, const cfg_key *k)
{
    return s->shape_size && k->type != KT_SECTION && k->off >= s->shape_off && k->off < s->shape_off + s->shape_size;
}

static size_t field_size(const cfg_key *k) { return k->type == KT_BOOL ? sizeof(bool) : sizeof(int64_t); }
_Static_assert(sizeof(int64_t) == sizeof(double), "a shape key is an int64_t, a double or a bool");

/* With checkpoint.init_from, the shape keys the file and the overrides leave out are pending, and 0
 * (false) rather than their defaults, which the file's shape would refuse: the checks across keys
 * (config_check.c) skip a 0. */
static void leave_shape_to_init_from(cfg_loader *L, const cfg_model_section *s)
{
    L->c->model.shape_pending = 0;
    for (int i = 1; L->c->checkpoint.init_from[0] && i < s->n_keys; i++)
        if (shape_key(s, &s->keys[i]) && L->origin[cfg_key_find(s->keys[i].path)].source < 0) {
            L->c->model.shape_pending |= 1u << i;
            memset((char *)L->c + s->keys[i].off, 0, field_size(&s->keys[i]));
        }
}

bool config_shape_pending(const config *c) { return c->model.shape_pending != 0; }

/* One shape key of want (the file's shape) against c (the config's): equal unless pending, and
 * within the key's range. Values compare as the exact text the resolved config would hold. */
static int take_key(const config *c, const config *want, const cfg_key *k, bool pending, const char *file,
                    const char *name, ddp_err *err)
{
    char set[64], there[64], expect[96];
    cfg_format_value(c, k, set, sizeof set);
    cfg_format_value(want, k, there, sizeof there);
    if (!pending && strcmp(set, there))
        return ddp_fail(err, DDP_EUSAGE, "%s: %s is %s, but checkpoint.init_from's %s has %s %s; leave %s out to "
                        "take it from there, or set it to %s", config_file(c), k->path, set, file, name, there,
                        k->path, there);
    const char *field = (const char *)want + k->off;
    if (k->type == KT_INT && (*(const int64_t *)field < k->imin || *(const int64_t *)field > k->imax))
        return ddp_fail(err, DDP_EUSAGE, "checkpoint.init_from's %s has %s %s, outside %s's range %lld..%lld", file,
                        name, there, k->path, (long long)k->imin, (long long)k->imax);
    cfg_expect(k, expect, sizeof expect);
    if (k->type == KT_NUM && !cfg_num_allowed(*(const double *)field, k->range))
        return ddp_fail(err, DDP_EUSAGE, "checkpoint.init_from's %s has %s %s, but %s must be %s", file, name,
                        there, k->path, expect);
    return DDP_OK;
}

/* The shape's values are checked against the keys' ranges too: a file's shape beyond them (a folder
 * allows larger ones) would give a config that does not load again. */
int config_take_shape(config *c, const config_shape *from, const char *file, const char *const names[],
                      ddp_err *err)
{
    const cfg_model_section *s = active_section(c);
    if (!s || !s->shape_size)
        return ddp_fail(err, DDP_EUSAGE, "model.kind %s takes no shape from checkpoint.init_from",
                        cfg_model_kind_names[c->model.kind]);
    config *want = malloc(sizeof *want);
    if (!want)
        return ddp_fail(err, DDP_ERUNTIME, "out of memory");
    memcpy(want, c, sizeof *c); /* field by field below: the padding stays the loader's zeros */
    for (int i = 1; i < s->n_keys; i++)
        if (shape_key(s, &s->keys[i]))
            memcpy((char *)want + s->keys[i].off, (const char *)from + (s->keys[i].off - s->shape_off),
                   field_size(&s->keys[i]));
    want->model.shape_pending = 0;
    int rc = DDP_OK;
    for (int i = 1, j = 0; rc == DDP_OK && i < s->n_keys; i++)
        if (shape_key(s, &s->keys[i]))
            rc = take_key(c, want, &s->keys[i], c->model.shape_pending >> i & 1, file, names[j++], err);
    if (rc == DDP_OK)
        rc = s->shape_check(want, file, names, err);
    if (rc == DDP_OK)
        memcpy(c, want, sizeof *c);
    free(want);
    return rc;
}

int cfg_check_model(cfg_loader *L)
{
    const cfg_model_section *active = NULL;
    for (int s = 0; s < cfg_n_model_sections; s++) {
        const cfg_model_section *sec = &cfg_model_sections[s];
        int k = cfg_key_find(sec->path);
        if (sec->kind == L->c->model.kind)
            active = sec;
        else if (L->origin[k].source >= 0)
            return wrong_kind(L, sec, k);
    }
    if (!active)
        return DDP_OK;
    leave_shape_to_init_from(L, active);
    return active->check ? active->check(L) : DDP_OK;
}
