/* config_model.c — the model kinds' config sections: each kind's keys (with their defaults) and checks.
 *
 * model.kind picks a model; its settings live in a section of their own named after it
 * (model.mlp for the MLP), so one model's settings never sit among another's. Adding a kind is
 * one key table and (when its keys constrain each other) one check, listed in
 * cfg_model_sections. A section of a kind other than model.kind is an error naming both,
 * reported where the later of the two was set. A GPT-2's shape may come from
 * checkpoint.init_from instead: the keys the config leaves out stay 0 until the training job,
 * which reads the file, hands its shape to config_take_gpt2_shape. A Llama's ffn_hidden 0 is
 * resolved here by Llama's multiple_of rule, so the model, the resolved config and the hash see
 * the width used. This file must not parse YAML
 * values (config_value.c) or know the general keys beyond those a kind's rules involve. */
#include "config_internal.h"

#include <stdio.h>
#include <string.h>

const char *const cfg_model_kind_names[] = {"mlp", "gpt2", "llama", NULL};

static const char *const act_names[] = {"relu", "gelu", "gelu_tanh", NULL};

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
 * order (config_take_gpt2_shape relies on it). */
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
#define GPT2_SHAPE_KEYS 5
_Static_assert(sizeof(gpt2_shape) == GPT2_SHAPE_KEYS * sizeof(int64_t), "one key per gpt2_shape field");

static int64_t *shape_field(gpt2_shape *s, int i) { return (int64_t *[]){&s->n_layer, &s->n_head, &s->n_embd,
                                                                        &s->block_size, &s->vocab_size}[i]; }

/* GPT-2 trains with AdamW betas (0.9, 0.95): the model's default unless the file sets them. With
 * checkpoint.init_from, a shape key the file and the overrides leave out is 0 (to be taken from
 * it by config_take_gpt2_shape) rather than the default, which would be refused. */
static int gpt2_check(cfg_loader *L)
{
    if (L->origin[cfg_key_find("optimizer.betas")].source < 0)
        L->c->optimizer.beta2 = 0.95;
    for (int i = 0; L->c->checkpoint.init_from[0] && i < GPT2_SHAPE_KEYS; i++)
        if (L->origin[cfg_key_find(gpt2_keys[1 + i].path)].source < 0)
            *shape_field(&L->c->model.gpt2, i) = 0;
    return DDP_OK;
}

bool config_gpt2_shape_pending(const config *c)
{
    gpt2_shape s = c->model.gpt2;
    for (int i = 0; c->model.kind == MODEL_GPT2 && i < GPT2_SHAPE_KEYS; i++)
        if (*shape_field(&s, i) == 0)
            return true;
    return false;
}

/* The shape's values are checked against the keys' ranges too: a file's shape beyond them (a folder
 * allows larger ones) would give a config that does not load again. */
int config_take_gpt2_shape(config *c, const gpt2_shape *from, const char *file, const char *const names[],
                           ddp_err *err)
{
    gpt2_shape have = c->model.gpt2, want = *from;
    const char *config_file = c->source[0] ? c->source : "the config";
    for (int i = 0; i < GPT2_SHAPE_KEYS; i++) {
        const cfg_key *k = &gpt2_keys[1 + i];
        int64_t set = *shape_field(&have, i), there = *shape_field(&want, i);
        if (set && set != there)
            return ddp_fail(err, DDP_EUSAGE, "%s: %s is %lld, but checkpoint.init_from's %s has %s %lld; leave %s "
                            "out to take it from there, or set it to %lld", config_file, k->path, (long long)set,
                            file, names[i], (long long)there, k->path, (long long)there);
        if (there < k->imin || there > k->imax) /* the config could not be written and read back */
            return ddp_fail(err, DDP_EUSAGE, "checkpoint.init_from's %s has %s %lld, outside %s's range %lld..%lld",
                            file, names[i], (long long)there, k->path, (long long)k->imin, (long long)k->imax);
    }
    if (want.n_embd % want.n_head)
        return ddp_fail(err, DDP_EUSAGE, "checkpoint.init_from's %s: %s %lld is not divisible by %s %lld", file,
                        names[2], (long long)want.n_embd, names[1], (long long)want.n_head);
    if (c->data.kind == DATA_TOKENS && c->data.seq_len > want.block_size)
        return ddp_fail(err, DDP_EUSAGE, "%s: data.seq_len: expected data.seq_len <= model.gpt2.block_size, got "
                        "data.seq_len %lld with model.gpt2.block_size %lld (%s %lld of checkpoint.init_from's %s)",
                        config_file, (long long)c->data.seq_len, (long long)want.block_size, names[3],
                        (long long)want.block_size, file);
    c->model.gpt2 = want;
    return DDP_OK;
}

/* ---- llama ---- */

/* A small Llama (about GPT-2 small's size) with grouped-query attention; Llama 3's rope_theta
 * 500000 is set in configs. */
static const cfg_key llama_keys[] = {
    SECTION("model.llama"),
    INT("model.llama.n_layer", model.llama.n_layer, 1, 100, "12", HASH_YES, "Transformer blocks."),
    INT("model.llama.n_head", model.llama.n_head, 1, 1024, "12", HASH_YES,
        "Query heads; must divide `model.llama.n_embd`, leaving an even head size (RoPE rotates its two halves)."),
    INT("model.llama.n_kv_head", model.llama.n_kv_head, 1, 1024, "4", HASH_YES,
        "Key/value heads (grouped-query attention: query head h reads key/value head h / (n_head / n_kv_head)); "
        "must divide `model.llama.n_head` (equal to it: multi-head attention)."),
    INT("model.llama.n_embd", model.llama.n_embd, 2, 1 << 16, "768", HASH_YES, "Channels."),
    INT("model.llama.ffn_hidden", model.llama.ffn_hidden, 0, 1 << 20, "0", HASH_YES,
        "Width of the SwiGLU MLP; 0: Llama's rule, 2·(4·n_embd)/3 (rounded down) rounded up to a multiple of "
        "`model.llama.multiple_of` (the resolved config holds the number)."),
    INT("model.llama.multiple_of", model.llama_multiple_of, 1, 1 << 16, "256", HASH_NO,
        "What `model.llama.ffn_hidden: 0` rounds up to a multiple of (the width it gives is hashed)."),
    INT("model.llama.block_size", model.llama.block_size, 1, 1 << 20, "1024", HASH_YES,
        "Longest sequence (the RoPE tables' positions); at least `data.seq_len`."),
    INT("model.llama.vocab_size", model.llama.vocab_size, 2, 1 << 24, "32000", HASH_YES,
        "Vocabulary, at least the data's; padded to a multiple of 128 inside (the padding never reaches the "
        "loss or sampling). With llama, `optimizer.betas` defaults to `[0.9, 0.95]` and weight decay applies "
        "to 2-D tensors only."),
    NUM("model.llama.rope_theta", model.llama.rope_theta, NR_POSITIVE, "10000", HASH_YES,
        "RoPE base: head dimension pair j turns at rope_theta^(-2j/head_size) radians per position (Llama 3: "
        "500000)."),
    NUM("model.llama.norm_eps", model.llama.norm_eps, NR_POSITIVE, "1e-5", HASH_YES, "RMSNorm's ε."),
    BOOL("model.llama.tie_embeddings", model.llama.tie_embeddings, "false", HASH_YES,
         "The output projection is the token embedding (no `lm_head`)."),
};

/* Llama's FFN width rule (Meta's reference code without ffn_dim_multiplier). */
static int64_t llama_ffn_hidden(int64_t n_embd, int64_t multiple_of)
{
    int64_t hidden = 2 * (4 * n_embd) / 3;
    return (hidden + multiple_of - 1) / multiple_of * multiple_of;
}

/* Betas as GPT-2's; ffn_hidden 0 becomes the rule's width. */
static int llama_check(cfg_loader *L)
{
    if (L->origin[cfg_key_find("optimizer.betas")].source < 0)
        L->c->optimizer.beta2 = 0.95;
    llama_shape *s = &L->c->model.llama;
    if (s->ffn_hidden == 0)
        s->ffn_hidden = llama_ffn_hidden(s->n_embd, L->c->model.llama_multiple_of);
    return DDP_OK;
}

/* ---- the kinds ---- */

#define KEYS(table) table, (int)(sizeof table / sizeof table[0])

const cfg_model_section cfg_model_sections[] = {
    {MODEL_MLP, "model.mlp", KEYS(mlp_keys), NULL},
    {MODEL_GPT2, "model.gpt2", KEYS(gpt2_keys), gpt2_check},
    {MODEL_LLAMA, "model.llama", KEYS(llama_keys), llama_check},
};
const int cfg_n_model_sections = (int)(sizeof cfg_model_sections / sizeof cfg_model_sections[0]);
_Static_assert(sizeof cfg_model_sections / sizeof cfg_model_sections[0] ==
               sizeof cfg_model_kind_names / sizeof cfg_model_kind_names[0] - 1,
               "one section per model kind");

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
    return active && active->check ? active->check(L) : DDP_OK;
}
