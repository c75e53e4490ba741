/* tokenizer_encode.c — encoding text into token ids (tokenizer_encode.h): UTF-8 validation, NFC
 * where the tokenizer asks for it (unicode_nfc.h), the pre-tokenizers over code points, and
 * tiktoken's byte-pair merge within each piece.
 *
 * Owns a hash map from token bytes to the lowest id spelling them (open addressing, FNV-1a), built
 * once per encoder; single bytes have a direct table. The end-of-text id is left out of both, so
 * it is never produced from text. The merge is tiktoken's _byte_pair_merge: quadratic in a
 * piece's length, which pieces keep short. Must not read files, print, or decode ids. */
#include "tokenizer_encode.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "unicode_class.h"
#include "unicode_nfc.h"

#define NO_RANK INT32_MAX

struct tokenizer_encoder {
    const tokenizer *tok;
    int32_t byte_id[256];  /* the single-byte token of each byte, -1 when none */
    int32_t *slots;        /* tokens of two or more bytes by hash; -1 = empty */
    size_t mask;           /* slots has mask + 1 entries, a power of two */
};

static uint64_t hash_bytes(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* The id whose bytes are p[0..n), or -1. */
static int32_t lookup(const tokenizer_encoder *e, const uint8_t *p, size_t n)
{
    if (n == 1)
        return e->byte_id[p[0]];
    if (n == 0 || n > TOKENIZER_MAX_TOKEN_BYTES)
        return -1;
    for (size_t i = hash_bytes(p, n) & e->mask;; i = (i + 1) & e->mask) {
        int32_t id = e->slots[i];
        if (id < 0)
            return -1;
        size_t len;
        const uint8_t *b = tokenizer_bytes(e->tok, id, &len);
        if (len == n && memcmp(b, p, n) == 0)
            return id;
    }
}

int tokenizer_encoder_create(const tokenizer *t, tokenizer_encoder **out, ddp_err *err)
{
    *out = NULL;
    tokenizer_encoder *e = calloc(1, sizeof *e);
    size_t cap = 16;
    while (cap < 2 * (size_t)t->vocab_size)
        cap *= 2;
    int32_t *slots = e ? malloc(cap * sizeof *slots) : NULL;
    if (!slots) {
        free(e);
        return ddp_fail(err, DDP_ERUNTIME, "tokenizer: out of memory for the encoder's table of %d tokens",
                        t->vocab_size);
    }
    e->tok = t;
    e->slots = slots;
    e->mask = cap - 1;
    memset(e->slots, 0xff, cap * sizeof *e->slots);
    memset(e->byte_id, 0xff, sizeof e->byte_id);
    for (int32_t id = 0; id < t->vocab_size; id++) {
        size_t len;
        const uint8_t *b = tokenizer_bytes(t, id, &len);
        if (id == t->eot || lookup(e, b, len) >= 0) /* special, or a duplicate: the lower id wins */
            continue;
        if (len == 1) {
            e->byte_id[b[0]] = id;
            continue;
        }
        size_t i = hash_bytes(b, len) & e->mask;
        while (e->slots[i] >= 0)
            i = (i + 1) & e->mask;
        e->slots[i] = id;
    }
    *out = e;
    return DDP_OK;
}

void tokenizer_encoder_free(tokenizer_encoder *e)
{
    if (!e)
        return;
    free(e->slots);
    free(e);
}

/* ---- UTF-8 and the pre-tokenizer ---------------------------------------------------------- */

/* Length of the well-formed UTF-8 sequence at p[0..n) (1..4) with its code point in *cp, or 0
 * when it is not one (stray continuation, overlong form, surrogate, above U+10FFFF, cut short). */
static size_t utf8_next(const uint8_t *p, size_t n, uint32_t *cp)
{
    uint8_t b = p[0];
    if (b < 0x80) {
        *cp = b;
        return 1;
    }
    size_t len;
    uint8_t lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (b >= 0xC2 && b <= 0xDF)
        len = 2;
    else if (b >= 0xE0 && b <= 0xEF)
        len = 3, lo = b == 0xE0 ? 0xA0 : 0x80, hi = b == 0xED ? 0x9F : 0xBF;
    else if (b >= 0xF0 && b <= 0xF4)
        len = 4, lo = b == 0xF0 ? 0x90 : 0x80, hi = b == 0xF4 ? 0x8F : 0xBF;
    else
        return 0;
    if (n < len || p[1] < lo || p[1] > hi)
        return 0;
    uint32_t c = b & (0x7F >> len);
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return 0;
        c = c << 6 | (p[i] & 0x3F);
    }
    *cp = c;
    return len;
}

/* The text as code points: each one's class, value and byte offset (off[n] = the text's length). */
typedef struct cp_text {
    uint8_t *cls;
    uint32_t *cp;
    size_t *off;
    size_t n;
} cp_text;

static void cp_text_free(cp_text *c)
{
    free(c->cls);
    free(c->cp);
    free(c->off);
}

static int decode(const uint8_t *text, size_t len, cp_text *c, ddp_err *err)
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
            return ddp_fail(err, DDP_EUSAGE, "invalid UTF-8 at byte offset %zu (byte 0x%02X)", pos, text[pos]);
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
    if (cls[i] == UC_NUMBER) {
        size_t j = run_end(c, i);
        return j - i > max_digits ? i + max_digits : j;
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
static size_t piece_end(const cp_text *c, size_t i, tokenizer_split split)
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
    int rc = decode((const uint8_t *)text, len, &c, err);
    int64_t count = 0;
    for (size_t i = 0; !rc && i < c.n;) {
        size_t j = piece_end(&c, i, split);
        ends[count++] = c.off[j];
        i = j;
    }
    cp_text_free(&c);
    return rc ? -1 : count;
}

/* ---- byte-pair merge ---------------------------------------------------------------------- */

typedef struct merge_scratch {
    size_t *start;    /* parts: part k is p[start[k] .. start[k + 1]) */
    int32_t *rank;    /* rank[k]: id of parts k and k + 1 joined, NO_RANK when not a token */
} merge_scratch;

static int32_t pair_rank(const tokenizer_encoder *e, const uint8_t *p, const size_t *start, size_t k, size_t parts)
{
    if (k + 2 > parts)
        return NO_RANK;
    int32_t id = lookup(e, p + start[k], start[k + 2] - start[k]);
    return id < 0 ? NO_RANK : id;
}

/* Appends the ids of piece p[0..n), which starts at byte offset at of the text. */
static int encode_piece(const tokenizer_encoder *e, const uint8_t *p, size_t n, size_t at, merge_scratch *s,
                        int32_t *ids, int64_t *count, ddp_err *err)
{
    int32_t whole = lookup(e, p, n);
    if (whole >= 0) {
        ids[(*count)++] = whole;
        return DDP_OK;
    }
    for (size_t i = 0; i < n; i++)
        if (e->byte_id[p[i]] < 0)
            return ddp_fail(err, DDP_EUSAGE, "byte 0x%02X at byte offset %zu has no token in the tokenizer's "
                            "vocabulary", p[i], at + i);
    size_t parts = n;
    for (size_t k = 0; k <= n; k++)
        s->start[k] = k;
    for (size_t k = 0; k < n; k++)
        s->rank[k] = pair_rank(e, p, s->start, k, parts);
    for (;;) {
        size_t best = 0;
        for (size_t k = 1; k + 1 < parts; k++)
            if (s->rank[k] < s->rank[best])
                best = k;
        if (parts < 2 || s->rank[best] == NO_RANK)
            break;
        /* join parts best and best + 1: drop the boundary between them */
        memmove(s->start + best + 1, s->start + best + 2, (parts - best - 1) * sizeof *s->start);
        memmove(s->rank + best + 1, s->rank + best + 2, (parts - best - 2) * sizeof *s->rank);
        parts--;
        s->rank[best] = pair_rank(e, p, s->start, best, parts);
        if (best > 0)
            s->rank[best - 1] = pair_rank(e, p, s->start, best - 1, parts);
    }
    for (size_t k = 0; k < parts; k++)
        ids[(*count)++] = lookup(e, p + s->start[k], s->start[k + 1] - s->start[k]);
    return DDP_OK;
}

/* Encodes the decoded text c of bytes[0..len) into *ids (malloc'd) and *n. */
static int encode_pieces(const tokenizer_encoder *e, const uint8_t *bytes, size_t len, const cp_text *c,
                         int32_t **ids, int64_t *n, ddp_err *err)
{
    merge_scratch s = {malloc((len + 1) * sizeof *s.start), malloc((len + 1) * sizeof *s.rank)};
    int32_t *out = malloc(len * sizeof *out); /* at most one id per byte */
    int rc = !s.start || !s.rank || !out
                 ? ddp_fail(err, DDP_ERUNTIME, "tokenizer: out of memory encoding %zu bytes", len) : DDP_OK;
    int64_t count = 0;
    for (size_t i = 0; !rc && i < c->n;) {
        size_t j = piece_end(c, i, e->tok->split);
        rc = encode_piece(e, bytes + c->off[i], c->off[j] - c->off[i], c->off[i], &s, out, &count, err);
        i = j;
    }
    free(s.start);
    free(s.rank);
    if (rc) {
        free(out);
        return rc;
    }
    *ids = out;
    *n = count;
    return DDP_OK;
}

int tokenizer_encode(const tokenizer_encoder *e, const char *text, size_t len, int32_t **ids, int64_t *n,
                     ddp_err *err)
{
    *ids = NULL;
    *n = 0;
    if (len == 0)
        return DDP_OK;
    cp_text c;
    int rc = decode((const uint8_t *)text, len, &c, err); /* offsets in errors are the caller's text's */
    char *normal = NULL;
    size_t normal_len = 0;
    if (!rc && e->tok->split == TOKENIZER_SPLIT_QWEN2)
        rc = unicode_nfc(text, len, &normal, &normal_len, err);
    if (!rc && normal) { /* the text changed: its code points again */
        cp_text_free(&c);
        text = normal;
        len = normal_len;
        rc = decode((const uint8_t *)text, len, &c, err);
    }
    if (!rc)
        rc = encode_pieces(e, (const uint8_t *)text, len, &c, ids, n, err);
    cp_text_free(&c);
    free(normal);
    return rc;
}
