/* tokenizer_split.c — UTF-8 decoding into code points with their classes, and the pre-tokenizer
 * regexes over them (tokenizer_split.h): GPT-2's, Llama 3's and Qwen2's, each a hand-written
 * matcher that tries the regex's alternatives in order. Must not know about token ids or merges. */
#include "tokenizer_split.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/utf8.h"
#include "tokenizer_encode.h"
#include "unicode_class.h"

/* The text as code points: each one's class, value and byte offset (off[n] = the text's length). */
void cp_text_free(cp_text *c)
{
    free(c->cls);
    free(c->cp);
    free(c->off);
}

int cp_text_decode(const uint8_t *text, size_t len, size_t shift, cp_text *c, ddp_err *err)
{
    memset(c, 0, sizeof *c);
    c->cls = malloc(len + 1);
    c->cp = malloc((len + 1) * sizeof *c->cp);
    c->off = malloc((len + 1) * sizeof *c->off);
    if (!c->cls || !c->cp || !c->off)
        return ddp_fail(err, DDP_ERUNTIME, "tokenizer: out of memory for %zu bytes of text", len);
    size_t pos = 0;
    while (pos < len) {
        uint32_t cp;
        size_t k = utf8_next(text + pos, len - pos, &cp);
        if (k == 0)
            return ddp_fail(err, DDP_EUSAGE, "invalid UTF-8 at byte offset %zu (byte 0x%02X)", pos - shift,
                            text[pos]);
        c->cls[c->n] = (uint8_t)unicode_class_of(cp);
        c->cp[c->n] = cp;
        c->off[c->n++] = pos;
        pos += k;
    }
    c->off[c->n] = len;
    return DDP_OK;
}

/* First index at or after i whose class differs from cls[i]. */
static size_t run_end(const cp_text *c, size_t i)
{
    size_t j = i + 1;
    while (j < c->n && c->cls[j] == c->cls[i])
        j++;
    return j;
}

static bool is_newline(uint32_t cp)
{
    return cp == '\r' || cp == '\n';
}

/* The contraction at i ("'s", "'ll", ...) as code points, or i when there is none; with fold, the
 * letters match in either case (Unicode's simple folding: 's' also matches U+017F LONG S). */
static size_t contraction_end(const cp_text *c, size_t i, bool fold)
{
    if (c->cp[i] != '\'' || i + 1 >= c->n)
        return i;
    uint32_t a = c->cp[i + 1], b = i + 2 < c->n ? c->cp[i + 2] : 0;
    if (fold) {
        a = a == 0x17F ? 's' : a < 0x80 && a >= 'A' && a <= 'Z' ? a + 32 : a;
        b = b < 0x80 && b >= 'A' && b <= 'Z' ? b + 32 : b;
    }
    if (a == 's' || a == 'd' || a == 'm' || a == 't')
        return i + 2;
    if ((a == 'l' && b == 'l') || (a == 'v' && b == 'e') || (a == 'r' && b == 'e'))
        return i + 3;
    return i;
}

/* GPT-2's '(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ at i: the
 * end (code point index) of the match, trying the alternatives in order. */
static size_t gpt2_piece_end(const cp_text *c, size_t i)
{
    size_t n = c->n, k = contraction_end(c, i, false);
    if (k > i)
        return k;
    /* " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+": a space joins the run of one class after it */
    if (c->cp[i] == ' ' && i + 1 < n && c->cls[i + 1] != UC_SPACE)
        return run_end(c, i + 1);
    if (c->cls[i] != UC_SPACE)
        return run_end(c, i);
    /* \s+(?!\S): white space up to, not including, the last one before a non-space; else \s+ */
    size_t j = run_end(c, i);
    return j < n && j - i >= 2 ? j - 1 : j;
}

/* Llama 3's (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
 * \s*[\r\n]+|\s+(?!\S)|\s+ at i, with \p{N}{1,max_digits} (Qwen2's regex is this one with \p{N}). */
static size_t llama3_piece_end(const cp_text *c, size_t i, size_t max_digits)
{
    size_t n = c->n, k = contraction_end(c, i, true);
    if (k > i)
        return k;
    const uint8_t *cls = c->cls;
    /* [^\r\n\p{L}\p{N}]?\p{L}+: a letter run, with the one symbol or space before it */
    if (cls[i] == UC_LETTER)
        return run_end(c, i);
    bool prefix = cls[i] != UC_NUMBER && !is_newline(c->cp[i]);
    if (prefix && i + 1 < n && cls[i + 1] == UC_LETTER)
        return run_end(c, i + 1);
    if (cls[i] == UC_NUMBER) { /* at most max_digits looked at: a long run's pieces stay linear in it */
        size_t j = i;
        while (j < n && j - i < max_digits && cls[j] == UC_NUMBER)
            j++;
        return j;
    }
    /* " ?[^\s\p{L}\p{N}]+[\r\n]*": a symbol run (after one space), and the line breaks after it */
    size_t from = c->cp[i] == ' ' && i + 1 < n && cls[i + 1] == UC_OTHER ? i + 1 : i;
    if (cls[from] == UC_OTHER) {
        size_t j = run_end(c, from);
        while (j < n && is_newline(c->cp[j]))
            j++;
        return j;
    }
    /* white space: \s*[\r\n]+ ends after its last line break; else \s+(?!\S), else \s+ */
    size_t j = run_end(c, i);
    for (size_t b = j; b > i; b--)
        if (is_newline(c->cp[b - 1]))
            return b;
    return j < n && j - i >= 2 ? j - 1 : j;
}

/* End (code point index) of the piece starting at i under the tokenizer's split. */
size_t split_piece_end(const cp_text *c, size_t i, tokenizer_split split)
{
    switch (split) {
    case TOKENIZER_SPLIT_LLAMA3:
        return llama3_piece_end(c, i, 3);
    case TOKENIZER_SPLIT_QWEN2:
        return llama3_piece_end(c, i, 1);
    default: /* GPT-2's, unstated (llm.c's GPT-2 files), or other: see tokenizer.h */
        return gpt2_piece_end(c, i);
    }
}

int64_t tokenizer_pretokenize(tokenizer_split split, const char *text, size_t len, size_t *ends, ddp_err *err)
{
    cp_text c;
    int rc = cp_text_decode((const uint8_t *)text, len, 0, &c, err);
    int64_t count = 0;
    for (size_t i = 0; !rc && i < c.n;) {
        size_t j = split_piece_end(&c, i, split);
        ends[count++] = c.off[j];
        i = j;
    }
    cp_text_free(&c);
    return rc ? -1 : count;
}
