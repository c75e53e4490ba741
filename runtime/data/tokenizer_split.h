/* tokenizer_split.h — the encoder's view of text (runtime/data's own, not an interface for other
 * folders): valid UTF-8 decoded into code points with their Unicode classes and byte offsets, and
 * the end of each piece the tokenizer's pre-tokenizer regex cuts (tokenizer_encode.h lists them).
 * Must not know about token ids or merges. */
#ifndef DDP_TOKENIZER_SPLIT_H
#define DDP_TOKENIZER_SPLIT_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/base/err.h"
#include "tokenizer.h"

/* The text as code points: each one's class (unicode_class), value and byte offset (off[n] = the
 * text's length). */
typedef struct cp_text {
    uint8_t *cls;
    uint32_t *cp;
    size_t *off;
    size_t n;
} cp_text;

/* Decodes text[0..len) into *c (free it with cp_text_free, also after a failure). Invalid UTF-8 is
 * a usage error naming its byte offset in the caller's text, which begins shift bytes into text
 * (after a prefix the encoder put before it). */
int cp_text_decode(const uint8_t *text, size_t len, size_t shift, cp_text *c, ddp_err *err);
void cp_text_free(cp_text *c);

/* The end (code point index) of the piece starting at code point i under split's regex; GPT-2's
 * for the splits that have none of their own (unstated, other). */
size_t split_piece_end(const cp_text *c, size_t i, tokenizer_split split);

#endif
