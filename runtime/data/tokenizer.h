/* tokenizer.h — llm.c's tokenizer.bin (version 2): the bytes of every token id, for turning ids back
 * into text when printing samples (and for tokenizer_encode.h, which turns text into ids).
 *
 * Owns the file format checks: a header of 256 little-endian int32 (magic 20240328, version 2,
 * vocabulary size in 1..2^20, end-of-text id or -1, then ddprun's own fields, which llm.c leaves 0
 * and ignores: the pre-tokenizer that splits text before the merges, tokenizer_split below; the
 * vocabulary's fingerprint, its low and high 32 bits and 1, or three 0s where none is recorded),
 * then for each id in order a uint8 length >= 1 and that many bytes, and nothing after the last
 * entry. A failed load leaves *out zeroed with nothing allocated, and the error names the file and
 * what is wrong. Decoding only: encoding text is tokenizer_encode.c's (and scripts/prepare-text's)
 * job. This module must not print, and must not assume token bytes are
 * valid UTF-8 on their own (GPT-2 splits multi-byte characters across tokens). */
#ifndef DDP_TOKENIZER_H
#define DDP_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/base/err.h"

#define TOKENIZER_MAGIC 20240328
#define TOKENIZER_VERSION 2
#define TOKENIZER_HEADER_BYTES 1024 /* 256 int32 */
#define TOKENIZER_MAX_VOCAB (1 << 20)
#define TOKENIZER_MAX_TOKEN_BYTES 255 /* the length is one byte */

/* How text is split into pieces before byte-pair merges, as scripts/prepare-text records it (the
 * header's fifth int32). UNSTATED is what llm.c writes: its files are GPT-2's, so the encoder
 * splits as GPT-2 does. OTHER is a tokenizer whose split the encoder cannot reproduce: its
 * prompts are split as GPT-2's, which spells the same text. */
typedef enum tokenizer_split {
    TOKENIZER_SPLIT_UNSTATED = 0,
    TOKENIZER_SPLIT_GPT2 = 1,   /* GPT-2's regex (tiktoken's r50k; Hugging Face's ByteLevel) */
    TOKENIZER_SPLIT_LLAMA3 = 2, /* Llama 3's regex: numbers in threes, a letter run's one-symbol prefix */
    TOKENIZER_SPLIT_QWEN2 = 3,  /* Llama 3's with single digits, after NFC normalization (Qwen2, 2.5) */
    TOKENIZER_SPLIT_OTHER = 4,
    /* sentencepiece's BPE over characters with byte fallback, spaces standing for U+2581, and ... */
    TOKENIZER_SPLIT_SENTENCEPIECE = 5,          /* a space before a text that does not begin with one (Metaspace) */
    TOKENIZER_SPLIT_SENTENCEPIECE_BARE = 6,     /* no space put before the text */
    TOKENIZER_SPLIT_SENTENCEPIECE_PREFIXED = 7, /* a space before every text (Llama 2's normalizer) */
} tokenizer_split;
#define TOKENIZER_SPLIT_KINDS 8

/* The vocabulary's fingerprint, as scripts/prepare-text records it: FNV-1a 64 (runtime/base/fnv1a.h)
 * over every id of the Hugging Face tokenizer.json it was made from (the model's vocabulary and the
 * added tokens; for prepare-text's gpt2 and bytes tokenizers, as a byte-level tokenizer.json would
 * spell them) in increasing order: the id as 4 little-endian bytes, the token's string as the file
 * spells it (an added token's content where both give the id), a 0 byte. Equal fingerprints: the
 * same ids for the same text, chat markers included. hf_vocab.h computes it from a file. */
typedef struct tokenizer {
    int32_t vocab_size;
    int32_t eot;          /* end-of-text id, -1 when the tokenizer has none */
    tokenizer_split split;
    bool has_fingerprint; /* false: llm.c's file, or an older prepare-text's */
    uint64_t fingerprint;
    uint8_t *entries;     /* the file's entries after the header: length byte, then the bytes */
    uint32_t *offset;     /* vocab_size entries: offset[id] is id's length byte in entries */
} tokenizer;

int tokenizer_load(const char *path, tokenizer *out, ddp_err *err);
/* The split's name ("unstated", "gpt2", "llama3", "qwen2", "other", "sentencepiece", ...), for messages. */
const char *tokenizer_split_name(tokenizer_split s);
/* Frees everything; leaves *t zeroed. Safe on a zeroed struct. */
void tokenizer_free(tokenizer *t);

/* The bytes of id (not NUL-terminated) and their count in *len; NULL (and *len = 0) for an id
 * outside [0, vocab_size). */
const uint8_t *tokenizer_bytes(const tokenizer *t, int32_t id, size_t *len);

/* The id a text with no prompt starts from: the end-of-text token, else the lowest id spelling a
 * newline alone (10 only where ids are bytes), else 0. */
int32_t tokenizer_context_start(const tokenizer *t);

/* Decodes ids[0..n) into out (cap bytes), whole tokens only, stopping before the first token that
 * does not fit; out is always NUL-terminated when cap >= 1 and *written (if not NULL) gets the bytes
 * written, NUL excluded. An id outside the vocabulary decodes as U+FFFD (a sample being printed is
 * not worth failing over; tokenizer_bytes tells callers that care). Returns the number of ids
 * decoded, so a caller streams a long sequence by calling again from ids + that count; with
 * cap > TOKENIZER_MAX_TOKEN_BYTES every call decodes at least one id when n >= 1. */
int64_t tokenizer_decode(const tokenizer *t, const int32_t *ids, int64_t n, char *out, size_t cap,
                         size_t *written);

#endif
