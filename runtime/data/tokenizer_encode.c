/* tokenizer_encode.c — encoding text into token ids (tokenizer_encode.h): NFC where the tokenizer
 * asks for it (unicode_nfc.h), the pieces its pre-tokenizer cuts (tokenizer_split.h) or
 * sentencepiece's segments (a typed ▁ read as the space it stands for), and the merge within each.
 *
 * Owns a hash map from token bytes to the lowest id spelling them (open addressing, FNV-1a), built
 * once per encoder; single bytes have a direct table. The end-of-text id is left out of both, so
 * it is never produced from text, and so are a sentencepiece vocabulary's 256 byte-fallback
 * tokens, which only stand for bytes of characters that have no token. The merge is tiktoken's
 * (the pair forming the lowest id first), from bytes (byte-level BPE) or from characters
 * (sentencepiece), with a heap, so a long piece (a page of Chinese is one) costs n log n, not n².
 * Must not read files, print, or decode ids. */
#include "tokenizer_encode.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/fnv1a.h"
#include "tokenizer_split.h"
#include "unicode_nfc.h"

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

static uint64_t hash_bytes(const uint8_t *p, size_t n) { return fnv1a64(FNV1A64_BASIS, p, n); }

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

/* A candidate merge on the heap: parts left and its right neighbour, which ended at byte end when
 * the entry was made (a part only grows, so a changed end or a merged-away left part means stale). */
typedef struct merge_entry {
    int32_t rank;  /* the id the two parts form */
    uint32_t left; /* the left part's index; also its start's order, so the leftmost wins a tie */
    uint32_t end;
} merge_entry;

/* Grown to the longest piece so far: parts linked in a list (start, end, next, prev; NONE ends
 * it), a dead flag per part, and the heap of candidate merges (each merge adds at most two). */
typedef struct merge_scratch {
    size_t cap;
    uint32_t *start, *end, *next, *prev;
    uint8_t *dead;
    merge_entry *heap;
    size_t heap_n;
} merge_scratch;

#define NONE UINT32_MAX

static void merge_scratch_free(merge_scratch *s)
{
    free(s->start), free(s->end), free(s->next), free(s->prev), free(s->dead), free(s->heap);
    memset(s, 0, sizeof *s);
}

/* Room for a piece of n parts (start has n + 1 entries, the heap 3n). */
static int merge_scratch_reserve(merge_scratch *s, size_t n, ddp_err *err)
{
    if (n <= s->cap)
        return DDP_OK;
    size_t cap = n > 2 * s->cap ? n : 2 * s->cap;
    merge_scratch grown = {cap, malloc((cap + 1) * sizeof *s->start), malloc(cap * sizeof *s->end),
                           malloc(cap * sizeof *s->next), malloc(cap * sizeof *s->prev), malloc(cap),
                           malloc(3 * cap * sizeof *s->heap), 0};
    if (!grown.start || !grown.end || !grown.next || !grown.prev || !grown.dead || !grown.heap) {
        merge_scratch_free(&grown);
        return ddp_fail(err, DDP_ERUNTIME, "tokenizer: out of memory merging a piece of %zu bytes", n);
    }
    merge_scratch_free(s);
    *s = grown;
    return DDP_OK;
}

static bool entry_before(const merge_entry *a, const merge_entry *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static void heap_push(merge_scratch *s, merge_entry x)
{
    size_t i = s->heap_n++;
    for (; i > 0 && entry_before(&x, &s->heap[(i - 1) / 2]); i = (i - 1) / 2)
        s->heap[i] = s->heap[(i - 1) / 2];
    s->heap[i] = x;
}

static merge_entry heap_pop(merge_scratch *s)
{
    merge_entry top = s->heap[0], last = s->heap[--s->heap_n];
    size_t i = 0;
    for (size_t c; (c = 2 * i + 1) < s->heap_n; i = c) {
        if (c + 1 < s->heap_n && entry_before(&s->heap[c + 1], &s->heap[c]))
            c++;
        if (!entry_before(&s->heap[c], &last))
            break;
        s->heap[i] = s->heap[c];
    }
    if (s->heap_n > 0)
        s->heap[i] = last;
    return top;
}

/* Pushes the merge of part k with its right neighbour when the two form a token. */
static void push_pair(const tokenizer_encoder *e, const uint8_t *p, merge_scratch *s, uint32_t k)
{
    uint32_t r = s->next[k];
    if (r == NONE)
        return;
    int32_t id = lookup(e, p + s->start[k], s->end[r] - s->start[k]);
    if (id >= 0)
        heap_push(s, (merge_entry){id, k, s->end[r]});
}

/* Merges the parts of p that s->start[0..parts] marks, the pair forming the lowest id first (the
 * leftmost on a tie), and appends the ids of the parts left: tiktoken's merge, in O(n log n) with
 * a heap of candidate merges whose stale entries are skipped. Every part must be a token. */
static void merge_parts(const tokenizer_encoder *e, const uint8_t *p, size_t parts, merge_scratch *s, int32_t *ids,
                        int64_t *count)
{
    for (uint32_t k = 0; k < parts; k++) {
        s->end[k] = s->start[k + 1];
        s->next[k] = k + 1 < parts ? k + 1 : NONE;
        s->prev[k] = k > 0 ? k - 1 : NONE;
        s->dead[k] = 0;
    }
    s->heap_n = 0;
    for (uint32_t k = 0; k + 1 < parts; k++)
        push_pair(e, p, s, k);
    while (s->heap_n > 0) {
        merge_entry m = heap_pop(s);
        uint32_t k = m.left, r = s->next[k];
        if (s->dead[k] || r == NONE || s->end[r] != m.end)
            continue; /* stale: a part of it has merged since */
        s->end[k] = s->end[r]; /* k absorbs r */
        s->next[k] = s->next[r];
        if (s->next[r] != NONE)
            s->prev[s->next[r]] = k;
        s->dead[r] = 1;
        push_pair(e, p, s, k);
        if (s->prev[k] != NONE)
            push_pair(e, p, s, s->prev[k]);
    }
    for (uint32_t k = 0; k != NONE; k = s->next[k])
        ids[(*count)++] = lookup(e, p + s->start[k], s->end[k] - s->start[k]);
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
    int rc = merge_scratch_reserve(s, n, err);
    if (rc)
        return rc;
    for (size_t k = 0; k <= n; k++)
        s->start[k] = (uint32_t)k;
    merge_parts(e, p, n, s, ids, count);
    return DDP_OK;
}

/* Appends the ids of code points [a, b) of c, merged from the characters up as sentencepiece's BPE. */
static int encode_segment(const tokenizer_encoder *e, const uint8_t *bytes, const cp_text *c, size_t a, size_t b,
                          merge_scratch *s, int32_t *ids, int64_t *count, ddp_err *err)
{
    int rc = a < b ? merge_scratch_reserve(s, b - a, err) : DDP_OK;
    if (rc || a == b)
        return rc;
    for (size_t k = 0; k <= b - a; k++)
        s->start[k] = (uint32_t)(c->off[a + k] - c->off[a]);
    merge_parts(e, bytes + c->off[a], b - a, s, ids, count);
    return DDP_OK;
}

/* Sentencepiece's BPE over the decoded text c of bytes: a character without a token becomes its
 * bytes' fallback tokens, which merge with nothing, so the segments between them (and, with
 * word_cuts, before each word's first space) are merged apart. Messages name a character as
 * named has it (c's code points one for one) at its offset in the caller's text, which begins
 * shift bytes into named's (after the dummy prefix). */
static int encode_sentencepiece(const tokenizer_encoder *e, const uint8_t *bytes, const cp_text *c,
                                const cp_text *named, size_t shift, merge_scratch *s, int32_t *ids, int64_t *count,
                                ddp_err *err)
{
    size_t seg = 0;
    int rc = DDP_OK;
    for (size_t i = 0; !rc && i < c->n; i++) {
        size_t at = c->off[i], n = c->off[i + 1] - at;
        if (lookup(e, bytes + at, n) < 0) {
            if (e->fallback < 0 && named->off[i] < shift) /* the space a sentencepiece split puts first */
                return ddp_fail(err, DDP_EUSAGE, "the space put before the text has no token in the tokenizer's "
                                "vocabulary, which has no byte fallback");
            if (e->fallback < 0)
                return ddp_fail(err, DDP_EUSAGE, "U+%04X at byte offset %zu has no token in the tokenizer's "
                                "vocabulary, which has no byte fallback", named->cp[i], named->off[i] - shift);
            rc = encode_segment(e, bytes, c, seg, i, s, ids, count, err);
            for (size_t k = 0; k < n; k++)
                ids[(*count)++] = e->fallback + bytes[at + k];
            seg = i + 1;
        } else if (e->word_cuts && c->cp[i] == ' ' && i > seg && c->cp[i - 1] != ' ') {
            rc = encode_segment(e, bytes, c, seg, i, s, ids, count, err);
            seg = i;
        }
    }
    return rc ? rc : encode_segment(e, bytes, c, seg, c->n, s, ids, count, err);
}

/* Encodes the decoded text c of bytes[0..len) into *ids (malloc'd) and *n; named and shift as above. */
static int encode_text(const tokenizer_encoder *e, const uint8_t *bytes, size_t len, const cp_text *c,
                       const cp_text *named, size_t shift, int32_t **ids, int64_t *n, ddp_err *err)
{
    merge_scratch s = {0};
    int32_t *out = malloc(len * sizeof *out); /* at most one id per byte */
    int rc = !out ? ddp_fail(err, DDP_ERUNTIME, "tokenizer: out of memory for the ids of %zu bytes", len) : DDP_OK;
    int64_t count = 0;
    if (!rc && e->sentencepiece)
        rc = encode_sentencepiece(e, bytes, c, named, shift, &s, out, &count, err);
    for (size_t i = 0; !rc && !e->sentencepiece && i < c->n;) {
        size_t j = split_piece_end(c, i, e->tok->split);
        rc = encode_piece(e, bytes + c->off[i], c->off[j] - c->off[i], c->off[i], &s, out, &count, err);
        i = j;
    }
    merge_scratch_free(&s);
    if (rc) {
        free(out);
        return rc;
    }
    *ids = out;
    *n = count;
    return DDP_OK;
}

/* U+2581 (▁), the character sentencepiece writes a space as. */
static const char META_SPACE[] = "\xe2\x96\x81";

static bool is_meta_space(const char *p, size_t n)
{
    return n >= 3 && memcmp(p, META_SPACE, 3) == 0;
}

/* Sentencepiece's text with its dummy prefix, a space, before it (*out malloc'd, *shift 1):
 * always, or as Hugging Face's Metaspace puts it, unless the text begins with a space or a ▁
 * (which it reads as one, spaced_text). Otherwise *out is NULL. */
static int prefixed_text(const tokenizer_encoder *e, const char *text, size_t len, char **out, size_t *shift,
                         ddp_err *err)
{
    *out = NULL;
    *shift = 0;
    tokenizer_split split = e->tok->split;
    bool prefix = split == TOKENIZER_SPLIT_SENTENCEPIECE_PREFIXED ||
                  (split == TOKENIZER_SPLIT_SENTENCEPIECE && text[0] != ' ' && !is_meta_space(text, len));
    if (!prefix)
        return DDP_OK;
    if (!(*out = malloc(len + 1)))
        return ddp_fail(err, DDP_ERUNTIME, "tokenizer: out of memory for %zu bytes of text", len + 1);
    (*out)[0] = ' ';
    memcpy(*out + 1, text, len);
    *shift = 1;
    return DDP_OK;
}

/* Qwen2's split merges the NFC form of *text, decoded into c: when that differs, *out (malloc'd)
 * holds it, *text and *len point to it and c holds its code points. The caller's text was decoded
 * first, so that invalid UTF-8 is named at its own offset. */
static int normalized_text(const char **text, size_t *len, cp_text *c, char **out, ddp_err *err)
{
    size_t out_len = 0;
    int rc = unicode_nfc(*text, *len, out, &out_len, err);
    if (rc || !*out)
        return rc;
    *text = *out;
    *len = out_len;
    cp_text_free(c);
    return cp_text_decode((const uint8_t *)*out, out_len, 0, c, err);
}

/* Sentencepiece turns every space into ▁ before anything else reads the text, so a ▁ typed in it is
 * that space to the merges; the vocabulary (tokenizer.bin) spells pieces with spaces. When text[0..len)
 * (decoded in c) has a ▁, *out (malloc'd) holds it with each ▁ a space and spaced its code points,
 * one for each of c's; otherwise *out is NULL and spaced untouched. */
static int spaced_text(const char *text, size_t len, const cp_text *c, char **out, size_t *out_len, cp_text *spaced,
                       ddp_err *err)
{
    *out = NULL;
    size_t metas = 0;
    for (size_t i = 0; i < c->n; i++)
        metas += c->cp[i] == 0x2581;
    if (!metas)
        return DDP_OK;
    if (!(*out = malloc(len - 2 * metas)))
        return ddp_fail(err, DDP_ERUNTIME, "tokenizer: out of memory for %zu bytes of text", len);
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        bool meta = is_meta_space(text + i, len - i);
        (*out)[n++] = meta ? ' ' : text[i];
        i += meta ? 3 : 1;
    }
    *out_len = n;
    return cp_text_decode((const uint8_t *)*out, n, 0, spaced, err);
}

int tokenizer_encode(const tokenizer_encoder *e, const char *text, size_t len, int32_t **ids, int64_t *n,
                     ddp_err *err)
{
    *ids = NULL;
    *n = 0;
    if (len == 0)
        return DDP_OK;
    if (len >= UINT32_MAX - 1) /* the merge counts a piece's bytes in 32 bits */
        return ddp_fail(err, DDP_EUSAGE, "%zu bytes of text; the encoder takes at most %u", len, UINT32_MAX - 2);
    char *prepared = NULL;
    size_t shift = 0;
    int rc = prefixed_text(e, text, len, &prepared, &shift, err);
    if (rc)
        return rc;
    if (prepared) {
        text = prepared;
        len += shift;
    }
    cp_text c, spaced = {0};
    char *spaced_bytes = NULL;
    size_t spaced_len = 0;
    rc = cp_text_decode((const uint8_t *)text, len, shift, &c, err);
    if (!rc && e->tok->split == TOKENIZER_SPLIT_QWEN2) /* never prefixed: prepared is NULL here */
        rc = normalized_text(&text, &len, &c, &prepared, err);
    if (!rc && e->sentencepiece)
        rc = spaced_text(text, len, &c, &spaced_bytes, &spaced_len, &spaced, err);
    if (!rc && spaced_bytes)
        rc = encode_text(e, (const uint8_t *)spaced_bytes, spaced_len, &spaced, &c, shift, ids, n, err);
    else if (!rc)
        rc = encode_text(e, (const uint8_t *)text, len, &c, &c, shift, ids, n, err);
    cp_text_free(&spaced);
    cp_text_free(&c);
    free(spaced_bytes);
    free(prepared);
    return rc;
}
