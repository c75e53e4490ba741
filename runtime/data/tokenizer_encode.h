/* tokenizer_encode.h — text to token ids with a tokenizer.bin (tokenizer.h), as the tokenizer's
 * pre-tokenizer code says: tiktoken's byte-level BPE (GPT-2, Llama 3, Qwen2; for the 256-token byte
 * tokenizer one id per byte) or sentencepiece's BPE (Llama 2, Mistral).
 *
 * Text must be valid UTF-8. Byte-level: it is first split by the pre-tokenizer's regex,
 *     GPT-2   '(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *     Llama 3 (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
 *             \s*[\r\n]+|\s+(?!\S)|\s+
 *     Qwen2   Llama 3's with \p{N} for \p{N}{1,3}, after NFC normalization of the text
 * (letters, numbers and white space are Unicode's classes: unicode_class.h). A piece whose bytes
 * are a token becomes that token; otherwise it starts as single bytes and the adjacent pair whose
 * concatenated bytes form the token with the lowest id is merged (the leftmost such pair on a
 * tie) until no pair forms a token. That is tiktoken's algorithm with the token id as the merge
 * rank, which is what these vocabularies' ids are (scripts/prepare-text records a split only for a
 * tokenizer whose merges come in the order of their ids). Sentencepiece: a space goes before the
 * text as the code says (tokenizer_split), the text starts as characters, and the same merge runs
 * from them; a character that is no token becomes the fallback tokens <0x00>..<0xFF> of its bytes
 * (256 consecutive ids spelling the bytes in order), which merge with nothing. The end-of-text
 * token is special: text spelling it is encoded as ordinary text (tiktoken's encode_ordinary).
 * Encoding only: this module must not read files or print. */
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
 * offset (for a Qwen2 split, a missing byte's offset is in the NFC-normalized text); nothing is
 * returned then. */
int tokenizer_encode(const tokenizer_encoder *e, const char *text, size_t len, int32_t **ids, int64_t *n,
                     ddp_err *err);

/* The pre-tokenizer alone (for tests), without normalization: splits text[0..len) into pieces as
 * split does, ends[i] getting the byte offset where piece i ends (ends has room for len entries).
 * Returns the piece count, or -1 with err set when the text is not valid UTF-8. */
int64_t tokenizer_pretokenize(tokenizer_split split, const char *text, size_t len, size_t *ends, ddp_err *err);

#endif
