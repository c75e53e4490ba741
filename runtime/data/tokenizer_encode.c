/* tokenizer_encode.c — encoding text into token ids (tokenizer_encode.h): NFC where the tokenizer
 * asks for it (unicode_nfc.h), the pieces its pre-tokenizer cuts (tokenizer_split.h) or
 * sentencepiece's segments, and the merge within each.
 *
 * Owns a hash map from token bytes to the lowest id spelling them (open addressing, FNV-1a), built
 * once per encoder; single bytes have a direct table. The end-of-text id is left out of both, so
 * it is never produced from text, and so are a sentencepiece vocabulary's 256 byte-fallback
 * tokens, which only stand for bytes of characters that have no token. The merge is tiktoken's
 * _byte_pair_merge, from bytes (byte-level BPE) or from characters (sentencepiece): quadratic in
 * a piece's length, which pieces keep short. Must not read files, print, or decode ids. */
#include "tokenizer_encode.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_split.h"
#include "unicode_nfc.h"

#define NO_RANK INT32_MAX

struct tokenizer_encoder {
    const tokenizer *tok;
    int32_t byte_id[256];  /* the single-byte token of each byte, -1 when none */
    int32_t *slots;        /* tokens of two or more bytes by hash; -1 = empty */
    size_t mask;           /* slots has mask + 1 entries, a power of two */
    bool sentencepiece;    /* merges start from characters; a space may go before the text */
    int32_t fallback;      /* sentencepiece: the id of byte 0x00's fallback token (<0x00>), -1 when none */
    bool word_cuts;        /* sentencepiece: no token has a space after another byte, so a word's
                            * first space starts a segment of its own */
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

/* The first of 256 consecutive ids spelling the bytes 0x00..0xFF in order (sentencepiece's
 * <0x00>..<0xFF>), or -1. */
static int32_t fallback_block(const tokenizer *t)
{
    for (int32_t id = 0; id + 256 <= t->vocab_size; id++) {
        int b = 0;
        for (size_t len; b < 256; b++) {
            const uint8_t *p = tokenizer_bytes(t, id + b, &len);
            if (len != 1 || p[0] != b)
                break;
        }
        if (b == 256)
            return id;
    }
    return -1;
}

/* Whether no token has a space after another byte (sentencepiece's whitespace-split vocabularies). */
static bool spaces_only_lead(const tokenizer *t)
{
    for (int32_t id = 0; id < t->vocab_size; id++) {
        size_t len;
        const uint8_t *b = tokenizer_bytes(t, id, &len);
        for (size_t j = 1; j < len; j++)
            if (b[j] == ' ' && b[j - 1] != ' ')
                return false;
    }
    return true;
}

static void index_tokens(tokenizer_encoder *e)
{
    const tokenizer *t = e->tok;
    for (int32_t id = 0; id < t->vocab_size; id++) {
        size_t len;
        const uint8_t *b = tokenizer_bytes(t, id, &len);
        bool fallback = e->fallback >= 0 && id >= e->fallback && id < e->fallback + 256;
        if (id == t->eot || fallback || lookup(e, b, len) >= 0) /* special, or a duplicate: the lower id wins */
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
    e->sentencepiece = t->split == TOKENIZER_SPLIT_SENTENCEPIECE || t->split == TOKENIZER_SPLIT_SENTENCEPIECE_BARE ||
                       t->split == TOKENIZER_SPLIT_SENTENCEPIECE_PREFIXED;
    e->fallback = e->sentencepiece ? fallback_block(t) : -1;
    e->word_cuts = e->sentencepiece && spaces_only_lead(t);
    memset(e->slots, 0xff, cap * sizeof *e->slots);
    memset(e->byte_id, 0xff, sizeof e->byte_id);
    index_tokens(e);
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

/* Merges the parts of p that s->start[0..parts] marks, the pair forming the lowest id first (the
 * leftmost on a tie), and appends the ids of the parts left. Every part must be a token. */
static void merge_parts(const tokenizer_encoder *e, const uint8_t *p, size_t parts, merge_scratch *s, int32_t *ids,
                        int64_t *count)
{
    for (size_t k = 0; k < parts; k++)
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
}

/* Appends the ids of byte-level piece p[0..n), which starts at byte offset at of the text. */
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
    for (size_t k = 0; k <= n; k++)
        s->start[k] = k;
    merge_parts(e, p, n, s, ids, count);
    return DDP_OK;
}

/* Appends the ids of code points [a, b) of c, merged from the characters up as sentencepiece's BPE. */
static void encode_segment(const tokenizer_encoder *e, const uint8_t *bytes, const cp_text *c, size_t a, size_t b,
                           merge_scratch *s, int32_t *ids, int64_t *count)
{
    if (a == b)
        return;
    for (size_t k = 0; k <= b - a; k++)
        s->start[k] = c->off[a + k] - c->off[a];
    merge_parts(e, bytes + c->off[a], b - a, s, ids, count);
}

/* Sentencepiece's BPE over the decoded text c of bytes: a character without a token becomes its
 * bytes' fallback tokens, which merge with nothing, so the segments between them (and, with
 * word_cuts, before each word's first space) are merged apart. shift is the bytes put before the
 * caller's text (its dummy prefix), for the offsets in messages. */
static int encode_sentencepiece(const tokenizer_encoder *e, const uint8_t *bytes, const cp_text *c, size_t shift,
                                merge_scratch *s, int32_t *ids, int64_t *count, ddp_err *err)
{
    size_t seg = 0;
    for (size_t i = 0; i < c->n; i++) {
        size_t at = c->off[i], n = c->off[i + 1] - at;
        if (lookup(e, bytes + at, n) < 0) {
            if (e->fallback < 0)
                return ddp_fail(err, DDP_EUSAGE, "U+%04X at byte offset %zu has no token in the tokenizer's "
                                "vocabulary, which has no byte fallback", c->cp[i], at - shift);
            encode_segment(e, bytes, c, seg, i, s, ids, count);
            for (size_t k = 0; k < n; k++)
                ids[(*count)++] = e->fallback + bytes[at + k];
            seg = i + 1;
        } else if (e->word_cuts && c->cp[i] == ' ' && i > seg && c->cp[i - 1] != ' ') {
            encode_segment(e, bytes, c, seg, i, s, ids, count);
            seg = i;
        }
    }
    encode_segment(e, bytes, c, seg, c->n, s, ids, count);
    return DDP_OK;
}

/* Encodes the decoded text c of bytes[0..len) into *ids (malloc'd) and *n; shift as above. */
static int encode_text(const tokenizer_encoder *e, const uint8_t *bytes, size_t len, const cp_text *c, size_t shift,
                       int32_t **ids, int64_t *n, ddp_err *err)
{
    merge_scratch s = {malloc((len + 1) * sizeof *s.start), malloc((len + 1) * sizeof *s.rank)};
    int32_t *out = malloc(len * sizeof *out); /* at most one id per byte */
    int rc = !s.start || !s.rank || !out
                 ? ddp_fail(err, DDP_ERUNTIME, "tokenizer: out of memory encoding %zu bytes", len) : DDP_OK;
    int64_t count = 0;
    if (!rc && e->sentencepiece)
        rc = encode_sentencepiece(e, bytes, c, shift, &s, out, &count, err);
    for (size_t i = 0; !rc && !e->sentencepiece && i < c->n;) {
        size_t j = split_piece_end(c, i, e->tok->split);
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

/* The text the merges start from, when it is not the caller's (*out malloc'd, else NULL): NFC's
 * for Qwen2's split, or sentencepiece's with its dummy prefix, a space, before it (*shift 1):
 * always, or as Hugging Face's Metaspace puts it, unless the text begins with a space. */
static int prepared_text(const tokenizer_encoder *e, const char *text, size_t len, char **out, size_t *out_len,
                         size_t *shift, ddp_err *err)
{
    *out = NULL;
    *shift = 0;
    tokenizer_split split = e->tok->split;
    if (split == TOKENIZER_SPLIT_QWEN2)
        return unicode_nfc(text, len, out, out_len, err);
    bool prefix = split == TOKENIZER_SPLIT_SENTENCEPIECE_PREFIXED ||
                  (split == TOKENIZER_SPLIT_SENTENCEPIECE && text[0] != ' ');
    if (!prefix)
        return DDP_OK;
    if (!(*out = malloc(len + 1)))
        return ddp_fail(err, DDP_ERUNTIME, "tokenizer: out of memory for %zu bytes of text", len + 1);
    (*out)[0] = ' ';
    memcpy(*out + 1, text, len);
    *out_len = len + 1;
    *shift = 1;
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
    int rc = cp_text_decode((const uint8_t *)text, len, &c, err); /* offsets in errors are the caller's text's */
    char *prepared = NULL;
    size_t prepared_len = 0, shift = 0;
    if (!rc)
        rc = prepared_text(e, text, len, &prepared, &prepared_len, &shift, err);
    if (!rc && prepared) { /* the text changed: its code points again */
        cp_text_free(&c);
        text = prepared;
        len = prepared_len;
        rc = cp_text_decode((const uint8_t *)text, len, &c, err);
    }
    if (!rc)
        rc = encode_text(e, (const uint8_t *)text, len, &c, shift, ids, n, err);
    cp_text_free(&c);
    free(prepared);
    return rc;
}
