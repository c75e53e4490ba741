/* hf_token_ids.h — a Hugging Face config.json's special token ids, bos_token_id and eos_token_id,
 * read from one folder for an export to write again. They say where generation starts and stops
 * (transformers' generate stops at any of eos_token_id's ids), belong to the tokenizer a model was
 * trained with, and nothing in the model's weights or shape holds them: the export takes them from
 * the folder the model came from (launcher/commands/ddprun_export.c says which).
 *
 * Each id is kept as the JSON text save_pretrained writes for it (json.dumps, indent 2, as the
 * value of a key of the top-level object): an integer ("128000"), null, or for eos_token_id a list
 * of integers (Llama 3.1 Instruct's three), one per line. Must not know model families: each
 * family's writer says what its config class writes for an id the folder left out. */
#ifndef DDP_HF_TOKEN_IDS_H
#define DDP_HF_TOKEN_IDS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "runtime/base/err.h"

#define HF_EOS_IDS_MAX 16 /* ids in an eos_token_id list (released models: up to 3) */

typedef struct hf_token_ids {
    bool read;   /* from a folder; false: every id is the family's default */
    /* JSON text, or "" where the folder's config.json has no such key */
    char bos[24];
    char eos[HF_EOS_IDS_MAX * 26 + 8];
} hf_token_ids;

/* DIR/config.json's bos_token_id and eos_token_id into *ids (ids->read true). Each must be absent,
 * null, a non-negative integer or, eos_token_id, a list of at most HF_EOS_IDS_MAX of them;
 * anything else is a usage error naming FILE:LINE:COL and the key. */
int hf_token_ids_read(const char *dir, hf_token_ids *ids, ddp_err *err);

/* config.json's line of one id, `  "bos_token_id": TEXT,` (eos_token_id's) and a line feed. TEXT
 * is the folder's; where ids is NULL or not read, or the folder has no such key, it is
 * class_default, what the family's config class holds then (NULL: None). None where the default is
 * None too is left out, as save_pretrained leaves out a value equal to both PretrainedConfig's and
 * the class's default. */
void hf_bos_token_id_write(FILE *f, const hf_token_ids *ids, const char *class_default);
void hf_eos_token_id_write(FILE *f, const hf_token_ids *ids, const char *class_default);

#endif
