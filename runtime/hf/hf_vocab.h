/* hf_vocab.h — the vocabulary fingerprint (runtime/data/tokenizer.h's definition) of a Hugging Face
 * tokenizer.json, for the trainer to compare with the one scripts/prepare-text recorded in the
 * data's tokenizer.bin: equal, the data's ids stand for the text they stand for to that model.
 * Reads the model's vocabulary (BPE's and WordPiece's object of token to id, Unigram's list of
 * [token, score]) and added_tokens' ids and contents, nothing else: must not tokenize or know model
 * families. */
#ifndef DDP_HF_VOCAB_H
#define DDP_HF_VOCAB_H

#include <stdint.h>

#include "runtime/base/err.h"

#define HF_TOKENIZER_JSON "tokenizer.json"

/* The fingerprint of the tokenizer.json at path into *out. A file that is not one (unreadable, not
 * JSON, no model.vocab of those kinds, an added token without an id or a content, an id twice in
 * one of them, an id that is no integer below 2^31) is an error naming FILE:LINE:COL where it can. */
int hf_vocab_fingerprint(const char *path, uint64_t *out, ddp_err *err);

#endif
