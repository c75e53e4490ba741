/* cfg_rows.h — the config key table's row type and its row constructors.
 *
 * A row describes one setting: its dotted path, type, range, default, whether the config hash
 * covers it, a one-line description, and where its field lies. The general keys' rows (config/)
 * locate their fields in struct config; a model kind's rows (models/, the kind's *_config.c)
 * locate theirs in the models' own options struct (models/model_opts.h's model_kind_opts), and
 * config/ composes them into its table by adding where that struct lies in struct config. Here so
 * that both layers can write rows; nothing here reads or checks a value. Before using a
 * constructor, a file defines CFG_OFF(field): the offset of field in the struct its rows describe. */
#ifndef DDP_CFG_ROWS_H
#define DDP_CFG_ROWS_H

#include <stddef.h>
#include <stdint.h>

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
    KT_HIDDEN,  /* a list of layer widths (the MLP's): 1..CFG_LIST_MAX ints in [imin, imax]; off: its
                 * count (an int), list_off: its int64_t entries */
    KT_BETAS,   /* optimizer.betas: [beta1, beta2], each a KT_NUM in [0, 1) */
    KT_RESUME,  /* checkpoint.resume: auto | never | path */
    KT_SIGNAL,  /* checkpoint.signal: a signal name -> number */
} key_type;

/* >0, >=0, [0,1), (0,1], and [0.1, 120] (a poll interval in seconds: more often would hammer the
 * service asked, rarer would miss the longest lead a cloud gives, AWS's two minutes) */
typedef enum num_range { NR_POSITIVE, NR_NONNEG, NR_UNIT, NR_FRACTION, NR_POLL } num_range;

/* When the config hash covers a key (config_write.c): never, always, or only when the setting it
 * belongs to is chosen (SGD's momentum under AdamW cannot affect a run). A model kind's keys are
 * covered only with that kind besides (cfg_model_key_active). HASH_PER_RANK: while
 * train.global_batch is 0 (with it, the per-rank split follows the world size and the hash covers
 * the global batch, HASH_GLOBAL_BATCH, instead). HASH_PACKED: only when data.packed is true, so
 * the checkpoints of runs on windows of tokens keep their hash. HASH_KIND_RULE: only when the
 * model kind's own rule for the key says so (its descriptor's hash_rules: a Llama's rope_scaling
 * keys while they stretch the frequencies, so the runs without a stretch keep their hash). */
typedef enum hash_rule {
    HASH_NO, HASH_YES, HASH_SGD, HASH_ADAMW, HASH_DECAY, HASH_WSD, HASH_SYNTHETIC, HASH_TOKENS, HASH_PER_RANK,
    HASH_GLOBAL_BATCH, HASH_PACKED, HASH_KIND_RULE
} hash_rule;

typedef struct cfg_key {
    const char *path;           /* "optimizer.schedule.kind" */
    key_type type;
    size_t off;                 /* CFG_OFF(field); unused for sections */
    size_t list_off;            /* KT_HIDDEN: CFG_OFF of its entries */
    int64_t imin, imax;         /* KT_INT and KT_HIDDEN elements */
    num_range range;            /* KT_NUM and KT_BETAS elements */
    const char *const *choices; /* KT_ENUM / KT_SIGNAL names, NULL-terminated */
    /* the default, as the YAML text a file would hold ("128", "[1024, 1024]", "\"\"" for none):
     * read through the same parser as a file's values, and shown as is in the reference */
    const char *def;
    hash_rule hash;
    const char *doc;            /* what it does, one Markdown sentence or a few (the reference's) */
} cfg_key;

/* Row constructors for the key tables (config/config_keys.c, the model kinds' *_config.c): path,
 * field, range or choices, default, hash rule, description. Paths and commands default to ""
 * (none). */
#define SECTION(p) {.path = p, .type = KT_SECTION}
#define INT(p, f, lo, hi, d, h, text) \
    {.path = p, .type = KT_INT, .off = CFG_OFF(f), .imin = lo, .imax = hi, .def = d, .hash = h, .doc = text}
#define NUM(p, f, r, d, h, text) {.path = p, .type = KT_NUM, .off = CFG_OFF(f), .range = r, .def = d, .hash = h, .doc = text}
#define BOOL(p, f, d, h, text) {.path = p, .type = KT_BOOL, .off = CFG_OFF(f), .def = d, .hash = h, .doc = text}
#define STR(p, f, d, text) {.path = p, .type = KT_STR, .off = CFG_OFF(f), .def = d, .doc = text}
#define OPT_PATH(p, f, text) {.path = p, .type = KT_OPT_PATH, .off = CFG_OFF(f), .def = "\"\"", .doc = text}
#define COMMAND(p, f, names, text) \
    {.path = p, .type = KT_COMMAND, .off = CFG_OFF(f), .choices = names, .def = "\"\"", .doc = text}
#define ENUM(p, f, names, d, h, text) \
    {.path = p, .type = KT_ENUM, .off = CFG_OFF(f), .choices = names, .def = d, .hash = h, .doc = text}
#define CFG_LIST_MAX 16 /* KT_HIDDEN's most entries */
#define BIG INT64_MAX
#define I32 INT32_MAX

#endif
