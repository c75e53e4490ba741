/* hf_folder.h — a Hugging Face `save_pretrained` folder without knowing which model it holds:
 * config.json's keys as a model's reader checks them, and the weights, model.safetensors or the
 * shards model.safetensors.index.json's weight_map names, looked up by tensor name with each
 * tensor's use tracked, so that a reader can refuse what it did not take.
 *
 * The weights: each shard a plain file name of the folder, opened once (safetensors.h validates
 * each whole), every tensor in exactly the file the map gives it and none the map leaves out.
 * Errors name the file (and FILE:LINE:COL of a config key). Must not know model names, shapes or
 * layouts (models/ does), and must not print. The writing side is hf_folder_write.h. */
#ifndef DDP_HF_FOLDER_H
#define DDP_HF_FOLDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "json_doc.h"
#include "safetensors.h"

#define HF_CONFIG "config.json"
#define HF_WEIGHTS "model.safetensors"
#define HF_INDEX "model.safetensors.index.json"   /* the sharded form: weight_map, tensor to file */
#define HF_GENERATION_CONFIG "generation_config.json" /* generate()'s defaults: end ids, sampling */
/* config.json's (and generation_config.json's) size limit: far above any model's, a larger file
 * is the wrong file */
#define HF_CONFIG_MAX_BYTES (1 << 20)

/* ---- config.json ---- */

/* DIR/config.json parsed into *j (free with json_doc_free, also after a failure); its root must be
 * an object. */
int hf_config_load(const char *dir, json_doc *j, ddp_err *err);

/* A usage error "FILE:LINE:COL: KEY is VALUE; WHY" about config key `key` of value v ("is an
 * object", "is an array" for those). */
int hf_key_fail(const json_doc *j, const json_node *v, const char *key, const char *why, ddp_err *err);

/* Root key `key`, an integer in 1..max, into *out; absent: an error naming `needs` (the keys the
 * model's shape needs). */
int hf_key_size(const json_doc *j, const char *key, int64_t max, int64_t *out, const char *needs, ddp_err *err);

/* A key the model has one value of: absent, or one of `accepted` (literal texts, strings without
 * quotes; a number's compared by value, so 1.0 and 1e0 are 1) of JSON kind `kind`; otherwise
 * refused with `why`. */
typedef struct hf_fixed_key {
    const char *key;
    const char *const accepted[3];
    json_kind kind;
    const char *why;
} hf_fixed_key;

int hf_check_fixed(const json_doc *j, const hf_fixed_key *keys, size_t n, ddp_err *err);

/* ---- the weights ---- */

typedef struct hf_weights {
    char path[4096];         /* model.safetensors, or the index: what messages about the folder name */
    safetensors *files;
    bool **used;             /* per file, per tensor: taken */
    int n;
} hf_weights;

/* Opens DIR's weights (model.safetensors, else the index and its shards); nothing stays open on
 * failure. */
int hf_weights_open(hf_weights *w, const char *dir, ddp_err *err);
void hf_weights_close(hf_weights *w);

/* The tensor called name in any of the files, marked taken; NULL when none holds it. */
const st_tensor *hf_weights_take(hf_weights *w, const char *name);

/* The file that holds t, one of w's tensors (a shard of a sharded folder): what a message about t
 * names. w->path when t is none of them. */
const char *hf_weights_file_of(const hf_weights *w, const st_tensor *t);

/* Calls fn on every tensor not taken, in file then name order, until one fails. */
int hf_weights_each_unused(const hf_weights *w, int (*fn)(void *ctx, const st_tensor *t, ddp_err *err), void *ctx,
                           ddp_err *err);

/* "[d0, d1, ...]" into out. */
void hf_format_dims(const int64_t *dims, int ndim, char *out, size_t size);

#endif
