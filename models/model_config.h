/* model_config.h — what each model kind contributes to the config: its section's key rows and the
 * rules across them, one descriptor per kind (gpt2_config.c, llama_config.c, mlp_config.c), listed
 * in model_config_kinds (model_config.c).
 *
 * config/ composes the rows into its key table (their offsets are within model_kind_opts; it adds
 * where that struct lies in struct config), loads and checks them, and runs the hooks below; it
 * names no kind itself. A kind's rules see only its own options and the few general settings in
 * model_general. Declarations only; nothing here reads YAML or the config struct. */
#ifndef DDP_MODEL_CONFIG_H
#define DDP_MODEL_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "models/model_opts.h"
#include "runtime/base/cfg_rows.h"
#include "runtime/base/err.h"

/* The general settings a kind's rules read. */
typedef struct model_general {
    const char *file;   /* the config file ("the config" without one), for messages */
    bool tokens;        /* data.kind tokens */
    int64_t seq_len;    /* data.seq_len */
    uint32_t pending;   /* bit i: key i of the kind's rows is left to checkpoint.init_from */
    const void *shape;  /* the kind's shape in the model_kind_opts judged (shape_off); NULL without one */
} model_general;

/* A rule across two keys (a a key of the kind's, b any key), reported as config_check.c reports a
 * contradiction: at the later of the two, "expected RULE, got ...". A shape key left to
 * checkpoint.init_from is 0 until the shape is taken (shape_check judges it then): a rule skips a 0. */
typedef struct model_key_rule {
    const char *a, *b;
    bool (*bad)(const model_kind_opts *o, const model_general *g);
    const char *rule;
} model_key_rule;

/* A condition for hashing the HASH_KIND_RULE keys whose paths begin with prefix, so that the runs
 * that leave them at their defaults keep the hash they had before the keys were: hashes says
 * whether this run's are; name and when are the reference's ("scaled": "only when
 * `model.llama.rope_scaling.factor` is above 1"). */
typedef struct model_hash_rule {
    const char *prefix;
    bool (*hashes)(const model_kind_opts *o);
    const char *name, *when;
} model_hash_rule;

typedef struct model_config_kind {
    model_kind kind;
    const char *path;               /* "model.mlp": its last part is the model.kind value */
    const cfg_key *keys;            /* the section's own row first, then its keys (CFG_OFF: model_kind_opts) */
    int n_keys;
    /* A language model: takes token data, precision bf16 and checkpoint.init_from; title names it in
     * messages ("GPT-2"), and llmc_file / hf_folder say what checkpoint.init_from may name. */
    bool language_model;
    const char *title;
    bool llmc_file, hf_folder;
    /* AdamW's beta2 with this kind unless optimizer.betas is set (0: the general default). */
    double beta2;
    /* Settings whose value follows others' (Llama's ffn_hidden rule), after the load; NULL: none. */
    void (*resolve)(model_kind_opts *o, const model_general *g);
    const model_key_rule *rules;    /* checked in order, before the general contradictions */
    int n_rules;
    /* The kind's shape in model_kind_opts (offsetof, sizeof; 0 when checkpoint.init_from gives none):
     * the section's keys whose fields lie inside it are its shape keys, in the shape's field order. */
    size_t shape_off, shape_size;
    /* The shape's rules for a shape checkpoint.init_from gave (o holds it; file and names[] as
     * config_take_shape's), data.seq_len against its block size included: DDP_OK or DDP_EUSAGE. */
    int (*shape_check)(const model_kind_opts *o, const model_general *g, const char *file,
                       const char *const names[], ddp_err *err);
    /* When the kind's HASH_KIND_RULE keys are hashed (a key no rule covers: always). */
    const model_hash_rule *hash_rules;
    int n_hash_rules;
} model_config_kind;

/* The Llama family's rule for its head_dim key (the kinds that have one share its name). */
#define LLAMA_OWN_HEAD_DIM_RULE "own head size", "only when the kind's `head_dim` is set and is not `n_embd / n_head`"

#define MODEL_CONFIG_KEYS(table) table, (int)(sizeof table / sizeof table[0])

/* Every kind's descriptor, in model_kind order; model.kind's choices, NULL-terminated, in that order. */
extern const model_config_kind *const model_config_kinds[];
extern const int model_n_config_kinds;
extern const char *const model_kind_names[];

extern const model_config_kind mlp_config_kind, gpt2_config_kind, llama_config_kind, qwen2_config_kind,
    mistral_config_kind, qwen3_config_kind;

/* Helpers the kinds' rules and shape checks share (model_config.c): "checkpoint.init_from's FILE:
 * NAME V is not divisible by BY_NAME BY"; whether a token run's data.seq_len is over limit (a
 * block size or window; 0 is no limit), the one test behind the rules and the check of the limit
 * key a shape brings. */
int model_config_not_divisible(const char *file, const char *name, int64_t v, const char *by_name, int64_t by,
                               ddp_err *err);
bool model_config_seq_len_over(const model_general *g, int64_t limit);
int model_config_seq_len_fits(const model_general *g, const char *key, int64_t block_size, const char *name,
                              const char *file, ddp_err *err);

/* The Llama family's rules (llama_config.c), for any kind of the family (its llama_shape is
 * g->shape), as model_key_rule's bad: heads dividing the width and an even head size (without a
 * head_dim), an even head_dim, kv heads dividing the heads, data.seq_len within the block size;
 * and the checks of a shape checkpoint.init_from brought (names: n_layer, n_head, n_kv_head,
 * n_embd, ffn_hidden, block_size, vocab_size, rope_theta, norm_eps, tie_embeddings, head_dim;
 * block_key: the kind's block_size key). */
bool llama_rule_heads_uneven(const model_kind_opts *o, const model_general *g);
bool llama_rule_head_odd(const model_kind_opts *o, const model_general *g);
bool llama_rule_head_dim_odd(const model_kind_opts *o, const model_general *g);
bool llama_rule_kv_uneven(const model_kind_opts *o, const model_general *g);
bool llama_rule_seq_over_block(const model_kind_opts *o, const model_general *g);
int llama_config_check_shape(const model_general *g, const char *block_key, const char *file,
                             const char *const names[], ddp_err *err);

#endif
