/* generate_chat.h — `ddprun generate --chat`'s chat.json, which scripts/prepare-chat writes beside
 * tokenizer.bin (docs/sft-data.md): the token ids that wrap one user message the way the chat
 * template the model was fine-tuned on renders it, the id that ends the assistant's turn and the
 * model's other end ids (its generation_config.json's eos_token_id), which end an answer too.
 *
 * Owns finding the file (--chat-file, else chat.json in the tokenizer's folder), reading and
 * checking it, and the wrapping. Must not encode text, load tokenizers or draw tokens. */
#ifndef DDPRUN_GENERATE_CHAT_H
#define DDPRUN_GENERATE_CHAT_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/base/err.h"

#define CHAT_FILE_VERSION 2 /* 2 added also_stop; version 1 files are read too */
#define CHAT_FILE_MAX_BYTES (16u << 20)

typedef struct chat_wrap {
    int32_t *prefix, *suffix, *end_of_turn;  /* malloc'd; NULL when empty */
    int64_t n_prefix, n_suffix, n_end;
    int32_t stop;                            /* end_of_turn[0]: the draw ends when it is drawn */
    int32_t *stops;                          /* malloc'd: stop, then also_stop's ids; each ends the draw */
    int64_t n_stops;
    char path[4096];                         /* the file it came from, for messages */
} chat_wrap;

/* The chat.json to read into out: chat_file when given, else the one in tokenizer_path's folder. */
int chat_wrap_path(const char *chat_file, const char *tokenizer_path, char *out, size_t size, ddp_err *err);

/* Reads path: {"version": 2, "user_prefix": [ids], "user_suffix": [ids], "end_of_turn": [ids, at
 * least one], "stop": end_of_turn[0]} and optionally "also_stop": [ids], "template" and
 * "tokenizer" (strings, for people); every id below vocab_size, no other key (version 1: the same
 * without also_stop). Anything else is DDP_EUSAGE naming the file (and its line and column where a
 * value is at fault). c is zeroed first; free it with chat_wrap_free, also after a failure. */
int chat_wrap_load(const char *path, int32_t vocab_size, chat_wrap *c, ddp_err *err);
void chat_wrap_free(chat_wrap *c);

/* *out (malloc'd, with room for extra more ids) = prefix, ids[0..n), suffix; *n_out their count. */
int chat_wrap_ids(const chat_wrap *c, const int32_t *ids, int64_t n, int64_t extra, int32_t **out, int64_t *n_out,
                  ddp_err *err);

#endif
