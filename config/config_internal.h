/* config_internal.h — what the config*.c files share and nobody else may use.
 *
 * The key table is the single description of every setting: its dotted path, type, range,
 * default, whether the config hash covers it, a one-line description, and where it lives in
 * struct config. It comes in parts: the general keys (config_keys.c) and each model kind's
 * section (config_model.c), walked as one depth-first sequence through cfg_key_at. The loader
 * (config.c) fills the defaults from it and walks YAML against it, one value at a time through
 * config_value.c; the checks (config_check.c, config_model.c), the writer and hash
 * (config_write.c) and the reference document (config_reference.c, docs/config-reference.md)
 * iterate it. Locations are tracked per key so contradictions can name the later of two
 * settings. Not a public header. */
#ifndef DDP_CONFIG_INTERNAL_H
#define DDP_CONFIG_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <yaml.h>

#include "config.h"

typedef enum key_type {
    KT_SECTION, /* a mapping of further keys */
    KT_INT,     /* int64_t in [imin, imax] */
    KT_UINT,    /* uint64_t, any value (run.seed) */
    KT_NUM,     /* finite double, range by num_range */
    KT_BOOL,
    KT_STR,     /* non-empty char[CFG_PATH_MAX] */
    KT_OPT_PATH,/* char[CFG_PATH_MAX], "" (or nothing) = not set */
    KT_COMMAND, /* a shell command, char[CFG_PATH_MAX], "" = none; choices[] = its {placeholders} */
    KT_ENUM,    /* int-sized enum; choices[] in enum order */
    KT_HIDDEN,  /* model.mlp.hidden: list of 1..MLP_MAX_HIDDEN ints in [imin, imax] */
    KT_BETAS,   /* optimizer.betas: [beta1, beta2], each a KT_NUM in [0, 1) */
    KT_RESUME,  /* checkpoint.resume: auto | never | path */
    KT_SIGNAL,  /* checkpoint.signal: a signal name -> number */
} key_type;

typedef enum num_range { NR_POSITIVE, NR_NONNEG, NR_UNIT } num_range; /* >0, >=0, [0,1) */

/* When the config hash covers a key (config_write.c): never, always, or only when the setting it
 * belongs to is chosen (SGD's momentum under AdamW cannot affect a run). A model kind's keys are
 * covered only with that kind besides (cfg_model_key_active). HASH_PER_RANK: while
 * train.global_batch is 0 (with it, the per-rank split follows the world size and the hash covers
 * the global batch, HASH_GLOBAL_BATCH, instead). */
typedef enum hash_rule {
    HASH_NO, HASH_YES, HASH_SGD, HASH_ADAMW, HASH_COSINE, HASH_SYNTHETIC, HASH_TOKENS, HASH_PER_RANK,
    HASH_GLOBAL_BATCH
} hash_rule;

typedef struct cfg_key {
    const char *path;           /* "optimizer.schedule.kind" */
    key_type type;
    size_t off;                 /* offsetof(config, field); unused for sections and lists */
    int64_t imin, imax;         /* KT_INT and KT_HIDDEN elements */
    num_range range;            /* KT_NUM and KT_BETAS elements */
    const char *const *choices; /* KT_ENUM / KT_SIGNAL names, NULL-terminated */
    /* the default, as the YAML text a file would hold ("128", "[1024, 1024]", "\"\"" for none):
     * read through the same parser as a file's values, and shown as is in the reference */
    const char *def;
    hash_rule hash;
    const char *doc;            /* what it does, one Markdown sentence or a few (the reference's) */
} cfg_key;

/* Row constructors for the key tables (config_keys.c, config_model.c): path, field, range or
 * choices, default, hash rule, description. Paths and commands default to "" (none). */
#define OFF(field) offsetof(config, field)
#define SECTION(p) {.path = p, .type = KT_SECTION}
#define INT(p, f, lo, hi, d, h, text) \
    {.path = p, .type = KT_INT, .off = OFF(f), .imin = lo, .imax = hi, .def = d, .hash = h, .doc = text}
#define NUM(p, f, r, d, h, text) {.path = p, .type = KT_NUM, .off = OFF(f), .range = r, .def = d, .hash = h, .doc = text}
#define BOOL(p, f, d, h, text) {.path = p, .type = KT_BOOL, .off = OFF(f), .def = d, .hash = h, .doc = text}
#define STR(p, f, d, text) {.path = p, .type = KT_STR, .off = OFF(f), .def = d, .doc = text}
#define OPT_PATH(p, f, text) {.path = p, .type = KT_OPT_PATH, .off = OFF(f), .def = "\"\"", .doc = text}
#define COMMAND(p, f, names, text) \
    {.path = p, .type = KT_COMMAND, .off = OFF(f), .choices = names, .def = "\"\"", .doc = text}
#define ENUM(p, f, names, d, h, text) \
    {.path = p, .type = KT_ENUM, .off = OFF(f), .choices = names, .def = d, .hash = h, .doc = text}
#define BIG INT64_MAX
#define I32 INT32_MAX

/* Key i of the whole table in depth-first order (every section is followed by its own keys; the
 * writer relies on it), or NULL past the end. Indices are stable: cfg_loader.origin uses them. */
const cfg_key *cfg_key_at(int i);
int cfg_key_count(void);
#define CFG_MAX_KEYS 96
#define CFG_KEY_MAX 256         /* longest dotted path we accept, NUL included */

int cfg_key_find(const char *path);          /* index for cfg_key_at, or -1 */
void cfg_key_parent(const char *path, char *out, size_t n); /* "a.b.c" -> "a.b", "a" -> "" */
const char *cfg_key_leaf(const char *path);  /* "a.b.c" -> "c" */
/* Whether a KT_NUM value is finite and in range r (the loader's rule, for values from elsewhere). */
bool cfg_num_allowed(double v, num_range r);
/* "a positive number", "an integer >= 1", "one of sgd, adamw", ... */
void cfg_expect(const cfg_key *k, char *out, size_t n);
/* The value as text: plain scalars, "[1024, 1024]" for lists (also used by the writer/hash). */
void cfg_format_value(const config *c, const cfg_key *k, char *out, size_t n);
/* checkpoint.signal's choices (NULL-terminated) and the name of a signal number among them (NULL
 * when not one we accept); config_value.c maps each name to its number. */
extern const char *const cfg_signal_names[];
const char *cfg_signal_name(int signo);

/* Where a value came from: source -1 = default, 0 = the file, N = override N (1-based). */
typedef struct cfg_pos { int source, line, col; } cfg_pos;

/* How marks of one parsed YAML text map to positions: override columns are shifted by the
 * offset of the value inside `key.path=value`. */
typedef struct cfg_src { int source, col_offset; } cfg_src;

typedef struct cfg_loader {
    config *c;
    ddp_err *err;
    const char *file;                  /* label for source 0 */
    cfg_pos origin[CFG_MAX_KEYS];      /* where each key was last set */
} cfg_loader;

cfg_pos cfg_node_pos(const cfg_src *s, const yaml_node_t *node);
int cfg_pos_later(cfg_pos a, cfg_pos b);     /* 1 when a was set after b */
/* Formats "LABEL:LINE:COL: KEY: MESSAGE" (KEY omitted when NULL) into L->err; returns DDP_EUSAGE. */
int cfg_error(const cfg_loader *L, cfg_pos at, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void cfg_pos_label(const cfg_loader *L, cfg_pos at, char *out, size_t n); /* "x.yaml:3:7" */

/* An explicit tag on nd that the loader does not honour: a scalar's tag other than the core
 * !!str, !!int, !!float, !!bool, !!null (which decide how it reads), or a list or mapping tagged
 * as something else. DDP_OK, or the error naming key (may be NULL) and the tag. */
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

/* Required sections and contradictory settings (config_check.c). */
int cfg_check(cfg_loader *L);

/* ---- model kinds (config_model.c) ---- */

/* One model kind: model.kind's value NAME selects it and its settings live in the section
 * model.NAME. Adding a kind is one of these (a key table and a check) plus its enum value
 * (models/model_opts.h). */
typedef struct cfg_model_section {
    model_kind kind;
    const char *path;               /* "model.mlp"; its last part is the model.kind value */
    const cfg_key *keys;            /* the section's own row first, then its keys */
    int n_keys;
    int (*check)(cfg_loader *L);    /* rules across the section's keys; NULL when there are none */
    /* The kind's shape in struct config (offsetof, sizeof; 0 when checkpoint.init_from gives none):
     * the section's keys whose fields lie inside it are its shape keys, in the shape's field order. */
    size_t shape_off, shape_size;
    /* The shape's rules across its keys for a shape checkpoint.init_from gave (c holds it; names as
     * config_take_shape's), data.seq_len against its block size included: DDP_OK or DDP_EUSAGE. */
    int (*shape_check)(const config *c, const char *file, const char *const names[], ddp_err *err);
} cfg_model_section;

extern const cfg_model_section cfg_model_sections[];
extern const int cfg_n_model_sections;
extern const char *const cfg_model_kind_names[]; /* model.kind's choices, in enum order */

/* false for the keys of a model kind other than c->model.kind: they are neither written nor hashed */
bool cfg_model_key_active(const config *c, const cfg_key *k);
/* Rejects a section of a kind other than model.kind (naming both), then runs the active kind's check. */
int cfg_check_model(cfg_loader *L);

#endif
