/* config_internal.h — what the config*.c files share and nobody else may use.
 *
 * The key table is the single description of every setting: its dotted path, type, range,
 * default, whether the config hash covers it, a one-line description, and where it lives in
 * struct config. It comes in parts: the general keys (config_keys.c) and each model kind's
 * section (its rows in models/, composed by config_model.c), walked as one depth-first sequence
 * through cfg_key_at. The loader
 * (config.c) fills the defaults from it and walks YAML against it, one value at a time through
 * config_value.c; the checks (config_check.c, config_model.c and the kinds' hooks), the writer and hash
 * (config_write.c) and the reference document (config_reference.c, docs/config-reference.md)
 * iterate it. Locations are tracked per key so contradictions can name the later of two
 * settings. Not a public header. */
#ifndef DDP_CONFIG_INTERNAL_H
#define DDP_CONFIG_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <yaml.h>

#include "config.h"
#include "models/model_config.h"
#include "runtime/base/cfg_rows.h"

/* The general keys' rows (config_keys.c) locate their fields in struct config. */
#define CFG_OFF(field) offsetof(config, field)

/* Key i of the whole table in depth-first order (every section is followed by its own keys; the
 * writer relies on it), or NULL past the end. Indices are stable: config.origin uses them. */
const cfg_key *cfg_key_at(int i);
int cfg_key_count(void);
#define CFG_KEY_MAX 256         /* longest dotted path we accept, NUL included */

int cfg_key_find(const char *path);          /* index for cfg_key_at, or -1 */
void cfg_key_parent(const char *path, char *out, size_t n); /* "a.b.c" -> "a.b", "a" -> "" */
const char *cfg_key_leaf(const char *path);  /* "a.b.c" -> "c" */
/* Whether a KT_NUM value is finite and in range r (the loader's rule, for values from elsewhere). */
bool cfg_num_allowed(double v, num_range r);
/* "a positive number", "an integer >= 1", "one of sgd, adamw", ... */
void cfg_expect(const cfg_key *k, char *out, size_t n);
/* A KT_HIDDEN list's count and entries in c. */
static inline int cfg_list_count(const config *c, const cfg_key *k) { return *(const int *)((const char *)c + k->off); }
static inline const int64_t *cfg_list_entries(const config *c, const cfg_key *k)
{
    return (const int64_t *)((const char *)c + k->list_off);
}
/* The value as text: plain scalars, "[1024, 1024]" for lists (also used by the writer/hash). */
void cfg_format_value(const config *c, const cfg_key *k, char *out, size_t n);
/* checkpoint.signal's choices (NULL-terminated) and the name of a signal number among them (NULL
 * when not one we accept); config_value.c maps each name to its number. */
extern const char *const cfg_signal_names[];
const char *cfg_signal_name(int signo);

/* How marks of one parsed YAML text map to positions: override columns are shifted by the
 * offset of the value inside `key.path=value`. */
typedef struct cfg_src { int source, col_offset; } cfg_src;

typedef struct cfg_loader {
    config *c;
    ddp_err *err;
    const char *file;                  /* label for source 0 */
    bool in_file[CFG_MAX_KEYS];        /* the file (source 0) set it, whatever overrides did after */
    bool record;                       /* config_load_record: a run's record, idle keys taken as written */
} cfg_loader;

cfg_pos cfg_node_pos(const cfg_src *s, const yaml_node_t *node);
int cfg_pos_later(cfg_pos a, cfg_pos b);     /* 1 when a was set after b */
/* Formats "LABEL:LINE:COL: KEY: MESSAGE" (KEY omitted when NULL) into L->err; returns DDP_EUSAGE. */
int cfg_error(const cfg_loader *L, cfg_pos at, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void cfg_pos_label(const cfg_loader *L, cfg_pos at, char *out, size_t n); /* "x.yaml:3:7" */

/* A scalar holding a NUL byte (readers go by C strings), or an explicit tag on nd that the loader
 * does not honour: a scalar's tag other than the core !!str, !!int, !!float, !!bool, !!null (which
 * decide how it reads), or a list or mapping tagged as something else. DDP_OK, or the error naming
 * key (may be NULL) and the byte or the tag. Every value and list item passes here. */
int cfg_check_tag(cfg_loader *L, const cfg_src *s, const yaml_node_t *nd, const char *key);

/* Parses one non-section value node into L->c (config_value.c). */
int cfg_parse_value(cfg_loader *L, const cfg_src *s, yaml_document_t *doc, yaml_node_t *node,
                    const cfg_key *k);
/* Every setting's default into L->c, from the key table's texts through cfg_parse_value (L->c
 * zeroed first, padding included, so that two loads of one file compare equal; config_keys.c).
 * DDP_OK, or DDP_ERUNTIME naming a default its key refuses: a mistake in the table. */
int cfg_defaults(cfg_loader *L);
/* What the user wrote, for "got ...": the scalar in quotes, "nothing", "a list", "a mapping". */
void cfg_describe(const yaml_node_t *nd, char *out, size_t n);
/* OSA edit distance, case-insensitive; stops counting at cap+1. */
int cfg_edit_distance(const char *a, const char *b, int cap);
/* Distance a near miss may have from a name of this length. */
int cfg_near_limit(const char *name);
/* "unknown key" at `at` for section.name, naming the nearest known key or the section's keys
 * (config_suggest.c); returns DDP_EUSAGE. */
int cfg_unknown_key(const cfg_loader *L, cfg_pos at, const char *section, const char *name);

/* Required sections and contradictory settings (config_check.c). */
int cfg_check(cfg_loader *L);

/* ---- model kinds (config_model.c) ---- */

/* One model kind's section in the key table: its descriptor (models/model_config.h) and its rows
 * with their offsets made struct config's. model.kind's value NAME selects it and its settings live
 * in the section model.NAME. */
typedef struct cfg_model_section {
    const model_config_kind *kind;
    const cfg_key *keys;            /* the section's own row first, then its keys */
    int n_keys;
} cfg_model_section;

/* The sections, in model_kind order (composed on first use); how many. */
const cfg_model_section *cfg_model_sections(void);
#define cfg_n_model_sections model_n_config_kinds

/* false for the keys of a model kind other than c->model.kind: they are neither written nor hashed */
bool cfg_model_key_active(const config *c, const cfg_key *k);
/* The model kind's name whose section holds key k (model.kind's value), or NULL outside every
 * model section. */
const char *cfg_model_section_name(const cfg_key *k);
/* A HASH_KIND_RULE key k: whether its kind's rule for it hashes it in c, and what the reference
 * calls that condition. */
bool cfg_model_kind_rule_hashes(const config *c, const cfg_key *k);
const char *cfg_model_kind_rule_name(const cfg_key *k);
/* The kinds' hash rules for the reference's note: "; \"(NAME)\": WHEN" for each name once. */
void cfg_model_kind_rules_note(FILE *out);
/* Rejects a section of a kind other than model.kind (naming both), then applies the active kind's
 * defaults (AdamW's beta2) and resolves its derived settings. */
int cfg_check_model(cfg_loader *L);
/* The active kind's rules across keys, each reported as a contradiction through report (config_check.c). */
int cfg_check_model_rules(cfg_loader *L, int (*report)(cfg_loader *L, const char *a, const char *b,
                                                        const char *rule));
/* Whether model.kind is a language model; the language models' kind names ("a or b"), and
 * "an llm.c TITLE model file or a Hugging Face TITLE or TITLE folder" (what checkpoint.init_from
 * may name, by the kinds' titles), composed from the kinds' descriptors. */
bool cfg_language_model(const config *c);
void cfg_language_model_names(char *out, size_t n);
void cfg_init_from_files(char *out, size_t n);

#endif
