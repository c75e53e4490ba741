/* tokenizer_encode.h — text to token ids with a tokenizer.bin (tokenizer.h): tiktoken's byte-level
 * BPE as GPT-2 uses it, which for the 256-token byte tokenizer is one id per byte.
 *
 * Text must be valid UTF-8. It is first split by GPT-2's pre-tokenizer regex
 *     '(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * (letters, numbers and white space are Unicode's classes: unicode_class.h). A piece whose bytes
 * are a token becomes that token; otherwise it starts as single bytes and the adjacent pair whose
 * concatenated bytes form the token with the lowest id is merged (the leftmost such pair on a
 * tie) until no pair forms a token. That is tiktoken's algorithm with the token id as the merge
 * rank, which is what GPT-2's ids are (scripts/prepare-text writes tokenizer.bin in that order);
 * for a tokenizer whose ids are not merge ranks the result is not its tokenization. The
 * end-of-text token is special: text spelling "<|endoftext|>" is encoded as ordinary text
 * (tiktoken's encode_ordinary). Encoding only: this module must not read files or print. */
#ifndef DDP_TOKENIZER_ENCODE_H
#define DDP_TOKENIZER_ENCODE_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/base/err.h"
#include "tokenizer.h"

typedef struct tokenizer_encoder tokenizer_encoder;

/* Indexes t's tokens by their bytes; t must outlive the encoder. Fails only out of memory. */
int tokenizer_encoder_create(const tokenizer *t, tokenizer_encoder **out, ddp_err *err);
void tokenizer_encoder_free(tokenizer_encoder *e);

/* Encodes text[0..len): *ids (malloc'd, the caller frees it; NULL when len is 0) gets *n ids.
 * Invalid UTF-8, or a byte that no single-byte token spells, is a usage error naming the byte
 * offset; nothing is returned then. */
int tokenizer_encode(const tokenizer_encoder *e, const char *text, size_t len, int32_t **ids, int64_t *n,
                     ddp_err *err);

/* The pre-tokenizer alone (for tests): splits text[0..len) into pieces, ends[i] getting the byte
 * offset where piece i ends (ends has room for len entries). Returns the piece count, or -1 with
 * err set when the text is not valid UTF-8. */
int64_t tokenizer_pretokenize(const char *text, size_t len, size_t *ends, ddp_err *err);

#endif
