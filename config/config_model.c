/* config_model.c — the model kinds' config sections, composed from the kinds' own descriptors
 * (models/model_config.h): their rows join the key table, their rules and shape checks run here.
 *
 * model.kind picks a model; its settings live in a section of their own named after it
 * (model.mlp for the MLP), so one model's settings never sit among another's. Adding a kind is
 * its descriptor in models/ (its rows, its rules); nothing here changes. A kind's rows locate
 * their fields in model_kind_opts: composing adds where it lies in struct config. A section of a
 * kind other than model.kind is an error naming both, reported where the later of the two was
 * set. A model's shape may come from checkpoint.init_from instead: the shape keys the config
 * leaves out are pending (model.shape_pending, by where each key was set, so a bool and a double
 * count too) until the training job, which reads the file, hands its shape to config_take_shape.
 * This file must not parse YAML values (config_value.c), know the general keys beyond those a
 * kind's rules involve, or name a model kind. */
#include "config_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/affix.h"

#define MODEL_OFF offsetof(config, model.opts)

/* Rows beyond CFG_MAX_KEYS are not copied: config_load refuses such a table (cfg_key_count) first. */
static cfg_key composed_keys[CFG_MAX_KEYS];
static cfg_model_section composed[CFG_MAX_KEYS]; /* each section has a row of its own at least */
static pthread_once_t composed_once = PTHREAD_ONCE_INIT;

/* Each kind's rows, copied with their fields' offsets made struct config's. */
static void compose(void)
{
    int n = 0;
    for (int s = 0; s < model_n_config_kinds && s < CFG_MAX_KEYS; s++) {
        const model_config_kind *kind = model_config_kinds[s];
        composed[s] = (cfg_model_section){kind, &composed_keys[n], kind->n_keys};
        for (int i = 0; i < kind->n_keys && n < CFG_MAX_KEYS; i++, n++) {
            composed_keys[n] = kind->keys[i];
            composed_keys[n].off += MODEL_OFF;
            composed_keys[n].list_off += composed_keys[n].type == KT_HIDDEN ? MODEL_OFF : 0;
        }
    }
}

const cfg_model_section *cfg_model_sections(void)
{
    pthread_once(&composed_once, compose);
    return composed;
}

static const char *config_file(const config *c) { return c->source[0] ? c->source : "the config"; }

static const cfg_model_section *active_section(const config *c);

/* The general settings a kind's rules read, and where its shape lies in c. */
static model_general general_of(const config *c)
{
    const cfg_model_section *s = active_section(c);
    const void *shape = s && s->kind->shape_size ? (const char *)&c->model.opts + s->kind->shape_off : NULL;
    return (model_general){config_file(c), c->data.kind == DATA_TOKENS, c->data.seq_len, c->model.shape_pending,
                           shape};
}

/* The kind whose section holds key path, or NULL for a key outside every model section. */
static const cfg_model_section *section_of(const char *path)
{
    const cfg_model_section *sections = cfg_model_sections();
    for (int s = 0; s < cfg_n_model_sections; s++) {
        size_t n = strlen(sections[s].kind->path);
        if (!strncmp(path, sections[s].kind->path, n) && (path[n] == '\0' || path[n] == '.'))
            return &sections[s];
    }
    return NULL;
}

bool cfg_model_key_active(const config *c, const cfg_key *k)
{
    const cfg_model_section *s = section_of(k->path);
    return !s || s->kind->kind == c->model.kind;
}

const char *cfg_model_section_name(const cfg_key *k)
{
    const cfg_model_section *s = section_of(k->path);
    return s ? cfg_key_leaf(s->kind->path) : NULL;
}

/* The kind's hash rule covering key k (its prefix begins k's path), or NULL. */
static const model_hash_rule *hash_rule_of(const cfg_key *k)
{
    const cfg_model_section *s = section_of(k->path);
    for (int i = 0; s && i < s->kind->n_hash_rules; i++)
        if (has_prefix(k->path, s->kind->hash_rules[i].prefix))
            return &s->kind->hash_rules[i];
    return NULL;
}

bool cfg_model_kind_rule_hashes(const config *c, const cfg_key *k)
{
    const model_hash_rule *r = hash_rule_of(k);
    return !r || r->hashes(&c->model.opts);
}

const char *cfg_model_kind_rule_name(const cfg_key *k)
{
    const model_hash_rule *r = hash_rule_of(k);
    return r ? r->name : cfg_model_section_name(k);
}

/* Whether a rule named name comes before kind s's rule i (kinds share rules: "own head size"). */
static bool rule_named_before(const cfg_model_section *sections, int s, int i, const char *name)
{
    for (int t = 0; t <= s; t++)
        for (int j = 0; j < (t < s ? sections[t].kind->n_hash_rules : i); j++)
            if (!strcmp(sections[t].kind->hash_rules[j].name, name))
                return true;
    return false;
}

void cfg_model_kind_rules_note(FILE *out)
{
    const cfg_model_section *sections = cfg_model_sections();
    for (int s = 0; s < cfg_n_model_sections; s++)
        for (int i = 0; i < sections[s].kind->n_hash_rules; i++) {
            const model_hash_rule *r = &sections[s].kind->hash_rules[i];
            if (!rule_named_before(sections, s, i, r->name))
                fprintf(out, "; \"(%s)\": %s", r->name, r->when);
        }
}

/* A section set for another kind, reported like a contradiction (config_check.c): at the later
 * of the section and model.kind, naming both and where the earlier one was set. */
static int wrong_kind(cfg_loader *L, const cfg_model_section *s, int k_section)
{
    int k_kind = cfg_key_find("model.kind");
    cfg_pos sec = L->c->origin[k_section], kind = L->c->origin[k_kind];
    bool section_later = cfg_pos_later(sec, kind);
    char kind_text[64], earlier_at[CFG_PATH_MAX + 64];
    snprintf(kind_text, sizeof kind_text, "model.kind %s", model_kind_names[L->c->model.kind]);
    if (kind.source < 0)
        snprintf(earlier_at, sizeof earlier_at, "the default");
    else
        cfg_pos_label(L, section_later ? kind : sec, earlier_at, sizeof earlier_at);
    const char *path = s->kind->path;
    return cfg_error(L, section_later ? sec : kind, section_later ? path : "model.kind",
                     "expected %s only with model.kind %s, got %s with %s (%s)", path, cfg_key_leaf(path),
                     section_later ? path : kind_text, section_later ? kind_text : path, earlier_at);
}

/* ---- shapes from checkpoint.init_from ---- */

static const cfg_model_section *active_section(const config *c)
{
    const cfg_model_section *sections = cfg_model_sections();
    for (int s = 0; s < cfg_n_model_sections; s++)
        if (sections[s].kind->kind == c->model.kind)
            return &sections[s];
    return NULL;
}

static bool shape_key(const cfg_model_section *s, const cfg_key *k)
{
    size_t off = MODEL_OFF + s->kind->shape_off;
    return s->kind->shape_size && k->type != KT_SECTION && k->off >= off && k->off < off + s->kind->shape_size;
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
        if (shape_key(s, &s->keys[i]) && L->c->origin[cfg_key_find(s->keys[i].path)].source < 0) {
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
    char set[64], there[64], expect[96], where[CFG_WHERE_MAX];
    cfg_format_value(c, k, set, sizeof set);
    cfg_format_value(want, k, there, sizeof there);
    if (!pending && strcmp(set, there))
        return ddp_fail(err, DDP_EUSAGE, "%s: %s is %s, but checkpoint.init_from's %s has %s %s; leave %s out to "
                        "take it from there, or set it to %s", config_where(c, k->path, where, sizeof where), k->path, set,
                        file, name, there, k->path, there);
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

/* Section s's shape keys whose bit is set in `which` (bit i: key i), copied into `to` from `from`,
 * where key k's value lies `shift` bytes before k->off (0 from another config). Field by field: the
 * padding stays the loader's zeros. */
static void copy_shape_keys(config *to, const void *from, size_t shift, const cfg_model_section *s, uint32_t which)
{
    for (int i = 1; i < s->n_keys; i++)
        if (shape_key(s, &s->keys[i]) && which >> i & 1)
            memcpy((char *)to + s->keys[i].off, (const char *)from + (s->keys[i].off - shift),
                   field_size(&s->keys[i]));
}

/* c as it resolves once its pending shape keys hold want's values (malloc'd; NULL: out of memory):
 * a key that resolves by others (head_dim set to n_embd / n_head, written 0) compares as it will be
 * held, not as the user set it while the keys it follows were pending. */
static config *settled_with(const config *c, const config *want, const cfg_model_section *s)
{
    config *have = malloc(sizeof *have);
    if (!have)
        return NULL;
    memcpy(have, c, sizeof *c);
    copy_shape_keys(have, want, 0, s, c->model.shape_pending);
    have->model.shape_pending = 0;
    if (s->kind->resolve) {
        model_general g = general_of(have);
        s->kind->resolve(&have->model.opts, &g);
    }
    return have;
}

/* The shape's values are checked against the keys' ranges too: a file's shape beyond them (a folder
 * allows larger ones) would give a config that does not load again. */
int config_take_shape(config *c, const config_shape *from, const char *file, const char *const names[],
                      ddp_err *err)
{
    const cfg_model_section *s = active_section(c);
    if (!s || !s->kind->shape_size)
        return ddp_fail(err, DDP_EUSAGE, "model.kind %s takes no shape from checkpoint.init_from",
                        model_kind_names[c->model.kind]);
    config *want = malloc(sizeof *want);
    if (!want)
        return ddp_fail(err, DDP_ERUNTIME, "out of memory");
    memcpy(want, c, sizeof *c);
    copy_shape_keys(want, from, MODEL_OFF + s->kind->shape_off, s, UINT32_MAX);
    want->model.shape_pending = 0;
    config *have = settled_with(c, want, s);
    int rc = have ? DDP_OK : ddp_fail(err, DDP_ERUNTIME, "out of memory");
    for (int i = 1, j = 0; rc == DDP_OK && i < s->n_keys; i++)
        if (shape_key(s, &s->keys[i]))
            rc = take_key(have, want, &s->keys[i], c->model.shape_pending >> i & 1, file, names[j++], err);
    free(have);
    model_general g = general_of(want);
    if (rc == DDP_OK)
        rc = s->kind->shape_check(&want->model.opts, &g, file, names, err);
    if (rc == DDP_OK)
        memcpy(c, want, sizeof *c);
    free(want);
    return rc;
}

/* A kind's declared defaults that follow another key: AdamW's beta2 unless optimizer.betas is set
 * (under SGD the betas stay at the table's default: set otherwise, config_check.c refuses them). */
static void kind_defaults(cfg_loader *L, const model_config_kind *kind)
{
    if (kind->beta2 && L->c->optimizer.kind == OPT_ADAMW && L->c->origin[cfg_key_find("optimizer.betas")].source < 0)
        L->c->optimizer.beta2 = kind->beta2;
}

int cfg_check_model(cfg_loader *L)
{
    const cfg_model_section *active = NULL, *sections = cfg_model_sections();
    for (int s = 0; s < cfg_n_model_sections; s++) {
        const cfg_model_section *sec = &sections[s];
        int k = cfg_key_find(sec->kind->path);
        if (sec->kind->kind == L->c->model.kind)
            active = sec;
        else if (L->c->origin[k].source >= 0)
            return wrong_kind(L, sec, k);
    }
    if (!active)
        return DDP_OK;
    leave_shape_to_init_from(L, active);
    kind_defaults(L, active->kind);
    if (active->kind->resolve) {
        model_general g = general_of(L->c);
        active->kind->resolve(&L->c->model.opts, &g);
    }
    return DDP_OK;
}

int cfg_check_model_rules(cfg_loader *L, int (*report)(cfg_loader *L, const char *a, const char *b, const char *rule))
{
    const cfg_model_section *s = active_section(L->c);
    model_general g = general_of(L->c);
    for (int i = 0; s && i < s->kind->n_rules; i++) {
        const model_key_rule *r = &s->kind->rules[i];
        if (r->bad(&L->c->model.opts, &g))
            return report(L, r->a, r->b, r->rule);
    }
    return DDP_OK;
}

/* ---- the language models, as the general rules name them ---- */

bool cfg_language_model(const config *c)
{
    const cfg_model_section *s = active_section(c);
    return s && s->kind->language_model;
}

/* "a", "a or b", "a, b or c": the names (field) of the kinds for which want(kind) holds. */
static void join_kinds(bool (*want)(const model_config_kind *k), bool title, char *out, size_t n)
{
    int count = 0, total = 0;
    for (int s = 0; s < model_n_config_kinds; s++)
        total += want(model_config_kinds[s]);
    size_t len = 0;
    out[0] = '\0';
    for (int s = 0; s < model_n_config_kinds && len < n; s++) {
        const model_config_kind *k = model_config_kinds[s];
        if (!want(k))
            continue;
        const char *sep = count == 0 ? "" : count == total - 1 ? " or " : ", ";
        int w = snprintf(out + len, n - len, "%s%s", sep, title ? k->title : cfg_key_leaf(k->path));
        len += w > 0 ? (size_t)w : 0;
        count++;
    }
}

static bool is_lm(const model_config_kind *k) { return k->language_model; }
static bool from_llmc(const model_config_kind *k) { return k->llmc_file; }
static bool from_hf(const model_config_kind *k) { return k->hf_folder; }

void cfg_language_model_names(char *out, size_t n) { join_kinds(is_lm, false, out, n); }

void cfg_init_from_files(char *out, size_t n)
{
    char llmc[128], hf[128];
    join_kinds(from_llmc, true, llmc, sizeof llmc);
    join_kinds(from_hf, true, hf, sizeof hf);
    snprintf(out, n, "an llm.c %s model file or a Hugging Face %s folder", llmc, hf);
}
