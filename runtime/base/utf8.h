/* utf8.h — well-formed UTF-8 as Unicode defines it (no overlong forms, surrogates or code points
 * above U+10FFFF), one sequence at a time: the one check every reader of text (JSON, the
 * tokenizers' pre-tokenizers) and every writer that must hand on valid text (TensorBoard's text
 * plugin) shares. Must not allocate or know what the text is for. */
#ifndef DDP_UTF8_H
#define DDP_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* The length (1..4) of the well-formed sequence at p[0..n), n >= 1, with its code point in *cp;
 * 0 when there is none there (a stray continuation byte, an overlong form, a surrogate, above
 * U+10FFFF, cut short). */
size_t utf8_next(const uint8_t *p, size_t n, uint32_t *cp);
/* Where utf8_next gives 0: the bytes (1..3) that one U+FFFD replaces, Unicode's "maximal subpart"
 * (the longest start of a well-formed sequence there, at least one byte): what Python's
 * errors="replace" and the WHATWG decoder replace. */
size_t utf8_bad_len(const uint8_t *p, size_t n);
/* in[0..n) as well-formed UTF-8 into out (room for 3n bytes): each ill-formed part one U+FFFD, as
 * utf8_bad_len cuts them. Returns the bytes written. */
size_t utf8_replace_invalid(const uint8_t *in, size_t n, uint8_t *out);

#endif
