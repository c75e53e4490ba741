/* doc_packing.c — reading a split's .docs and .mask files and packing its documents into rows (see
 * doc_packing.h). Owns the two formats' checks, the pieces a long document is cut into, the
 * best-fit-decreasing packer (free space per row kept in a segment tree of counts, so placing a
 * piece costs O(log T)) and a row's tokens, targets and document bounds. Must not print. */
#include "doc_packing.h"
#include "runtime/base/open_input.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define HEADER_BYTES TOKEN_SHARD_HEADER_BYTES

static int32_t le32(const uint8_t *p)
{
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
}

/* The whole file at path, mapped read-only, at least HEADER_BYTES long. */
static int map_whole(const char *path, uint8_t **map, size_t *len, ddp_err *err)
{
    int fd;
    int rc = open_input(path, &fd, err);
    if (rc)
        return ddp_prefix(err, "data.packed needs scripts/prepare-chat's .docs and .mask beside every shard");
    struct stat st;
    if (fstat(fd, &st) != 0)
        rc = ddp_fail(err, DDP_ERUNTIME, "%s: cannot stat: %s", path, strerror(errno));
    else if (st.st_size < HEADER_BYTES)
        rc = ddp_fail(err, DDP_EUSAGE, "%s: %lld bytes is too short for the %d-byte header", path,
                      (long long)st.st_size, HEADER_BYTES);
    if (!rc) {
        void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED)
            rc = ddp_fail(err, DDP_ERUNTIME, "%s: cannot mmap: %s", path, strerror(errno));
        else
            *map = m, *len = (size_t)st.st_size;
    }
    close(fd);
    return rc;
}

static int check_header(const char *path, const uint8_t *map, int32_t magic, int32_t version, ddp_err *err)
{
    if (le32(map) != magic || le32(map + 4) != version)
        return ddp_fail(err, DDP_EUSAGE, "%s: magic %d version %d, expected %d version %d (scripts/prepare-chat's "
                        "format)", path, le32(map), le32(map + 4), magic, version);
    return DDP_OK;
}

/* Growing arrays of pieces: first stream position, length, document end, shard. */
typedef struct pieces {
    int64_t n, cap;
    int64_t *at, *doc_end;
    int32_t *len, *shard;
} pieces;

static int pieces_push(pieces *p, int64_t at, int32_t len, int64_t doc_end, int32_t shard)
{
    if (p->n == p->cap) {
        int64_t cap = p->cap ? 2 * p->cap : 1024;
        int64_t *a = realloc(p->at, (size_t)cap * sizeof *a);
        if (a)
            p->at = a;
        int64_t *e = a ? realloc(p->doc_end, (size_t)cap * sizeof *e) : NULL;
        if (e)
            p->doc_end = e;
        int32_t *l = e ? realloc(p->len, (size_t)cap * sizeof *l) : NULL;
        if (l)
            p->len = l;
        int32_t *s = l ? realloc(p->shard, (size_t)cap * sizeof *s) : NULL;
        if (!s)
            return DDP_ERUNTIME;
        p->shard = s;
        p->cap = cap;
    }
    p->at[p->n] = at, p->len[p->n] = len, p->doc_end[p->n] = doc_end, p->shard[p->n] = shard;
    p->n++;
    return DDP_OK;
}

static void pieces_free(pieces *p)
{
    free(p->at), free(p->doc_end), free(p->len), free(p->shard);
}

/* Shard k's .docs: its documents, cut into pieces of at most T, appended to out. */
static int read_docs(const char *path, const token_shards *s, int64_t k, int64_t T, pieces *out, doc_packing *p,
                     ddp_err *err)
{
    uint8_t *map = NULL;
    size_t len = 0;
    int rc = map_whole(path, &map, &len, err);
    if (!rc)
        rc = check_header(path, map, DOC_LENGTHS_MAGIC, DOC_LENGTHS_VERSION, err);
    int64_t n = rc ? 0 : le32(map + 8), pos = s->start[k], end = s->start[k + 1];
    if (!rc && n < 1)
        rc = ddp_fail(err, DDP_EUSAGE, "%s: its header says %lld documents; a shard holds at least one", path,
                      (long long)n);
    else if (!rc && len != (size_t)HEADER_BYTES + 4 * (size_t)n)
        rc = ddp_fail(err, DDP_EUSAGE, "%s: %zu bytes for %lld documents (expected %lld)", path, len, (long long)n,
                      (long long)(HEADER_BYTES + 4 * n));
    for (int64_t i = 0; !rc && i < n; i++) {
        int64_t dl = (uint32_t)le32(map + HEADER_BYTES + 4 * i);
        if (dl < 1 || dl > end - pos) {
            rc = dl < 1 ? ddp_fail(err, DDP_EUSAGE, "%s: document %lld has no tokens", path, (long long)i)
                        : ddp_fail(err, DDP_EUSAGE, "%s: document %lld of %lld tokens overruns %s's %lld tokens", path,
                                   (long long)i, (long long)dl, s->shards[k].path, (long long)s->shards[k].ntokens);
            break;
        }
        p->split_docs += dl > T;
        for (int64_t off = 0; !rc && off < dl; off += T)
            if (pieces_push(out, pos + off, (int32_t)(dl - off < T ? dl - off : T), pos + dl, (int32_t)k))
                rc = ddp_fail(err, DDP_ERUNTIME, "%s: out of memory for the documents' pieces", path);
        pos += dl;
    }
    p->docs += n;
    if (!rc && pos != end)
        rc = ddp_fail(err, DDP_EUSAGE, "%s: documents of %lld tokens in all, but %s holds %lld", path,
                      (long long)(pos - s->start[k]), s->shards[k].path, (long long)s->shards[k].ntokens);
    if (map)
        munmap(map, len);
    return rc;
}

/* Shard k's .mask, kept mapped: one 0 or 1 per token of the shard. */
static int map_mask(const char *path, const token_shards *s, int64_t k, doc_packing *p, ddp_err *err)
{
    int rc = map_whole(path, &p->mask_maps[k], &p->mask_lens[k], err);
    const uint8_t *map = p->mask_maps[k];
    if (!rc)
        rc = check_header(path, map, DOC_MASK_MAGIC, DOC_MASK_VERSION, err);
    int64_t nt = s->shards[k].ntokens;
    if (!rc && (le32(map + 8) != nt || p->mask_lens[k] != (size_t)(HEADER_BYTES + nt)))
        rc = ddp_fail(err, DDP_EUSAGE, "%s: a mask of %d tokens in %zu bytes, but %s holds %lld tokens", path,
                      le32(map + 8), p->mask_lens[k], s->shards[k].path, (long long)nt);
    for (int64_t i = 0; !rc && i < nt; i++)
        if (map[HEADER_BYTES + i] > 1)
            rc = ddp_fail(err, DDP_EUSAGE, "%s: token %lld's mask byte is %d, not 0 or 1", path, (long long)i,
                          map[HEADER_BYTES + i]);
    if (!rc)
        p->masks[k] = map + HEADER_BYTES;
    return rc;
}

/* ---- best-fit decreasing ---- */

/* Longest first, equal lengths in stream order: each piece's key is its shortfall from T above its
 * index (T < 2^21 and fewer than 2^40 pieces, so the key fits), sorted ascending. */
static int compare_key(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static void order_longest_first(const pieces *pc, int64_t T, int64_t *order)
{
    const int64_t index_bits = 40, index_mask = ((int64_t)1 << index_bits) - 1;
    for (int64_t i = 0; i < pc->n; i++)
        order[i] = (T - pc->len[i]) << index_bits | i;
    qsort(order, (size_t)pc->n, sizeof *order, compare_key);
    for (int64_t i = 0; i < pc->n; i++)
        order[i] &= index_mask;
}

/* Counts of open rows by free space 0..T in a segment tree of `leaves` leaves (a power of two). */
typedef struct free_tree {
    int64_t leaves, *count;
} free_tree;

static void tree_add(free_tree *t, int64_t c, int64_t delta)
{
    for (int64_t node = t->leaves + c; node >= 1; node /= 2)
        t->count[node] += delta;
}

/* The least free space >= need some open row has, or -1. */
static int64_t tree_fit(const free_tree *t, int64_t need)
{
    int64_t node = t->leaves + need;
    if (t->count[node] > 0)
        return need;
    while (node > 1) {
        if (node % 2 == 0 && t->count[node + 1] > 0) {
            node++;
            while (node < t->leaves)
                node = t->count[2 * node] > 0 ? 2 * node : 2 * node + 1;
            return node - t->leaves;
        }
        node /= 2;
    }
    return -1;
}

/* Each piece's row (row_of) and the rows' count: best fit, rows of equal free space taken last
 * opened first (a stack per free space). */
static int pack(const pieces *pc, int64_t T, const int64_t *order, int64_t *row_of, int64_t *n_rows)
{
    free_tree t = {1, NULL};
    while (t.leaves < T + 1)
        t.leaves *= 2;
    t.count = calloc((size_t)(2 * t.leaves), sizeof *t.count);
    int64_t *top = malloc((size_t)(T + 1) * sizeof *top), *below = malloc((size_t)pc->n * sizeof *below);
    int64_t *space = malloc((size_t)pc->n * sizeof *space);
    if (!t.count || !top || !below || !space) {
        free(t.count), free(top), free(below), free(space);
        return DDP_ERUNTIME;
    }
    for (int64_t c = 0; c <= T; c++)
        top[c] = -1;
    int64_t rows = 0;
    for (int64_t i = 0; i < pc->n; i++) {
        const int64_t piece = order[i], need = pc->len[piece], fit = tree_fit(&t, need);
        int64_t r;
        if (fit < 0) {
            r = rows++;
            space[r] = T;
        } else {
            r = top[fit];
            top[fit] = below[r];
            tree_add(&t, fit, -1);
        }
        row_of[piece] = r;
        space[r] -= need;
        if (space[r] > 0) {
            below[r] = top[space[r]];
            top[space[r]] = r;
            tree_add(&t, space[r], 1);
        }
    }
    free(t.count), free(top), free(below), free(space);
    *n_rows = rows;
    return DDP_OK;
}

/* Whether stream position q (in shard `shard`) is a target the loss counts for the position before
 * it: inside the same document (ending at doc_end) and marked trainable by the mask. */
static bool is_target(const doc_packing *p, const token_shards *s, int32_t shard, int64_t q, int64_t doc_end)
{
    return q < doc_end && p->masks[shard][q - s->start[shard]];
}

/* Piece i's trainable targets: its positions' next tokens the loss counts (its last position's is
 * the next piece's first token, when the document goes on). */
static int64_t piece_targets(const doc_packing *p, const token_shards *s, const pieces *pc, int64_t i)
{
    int64_t n = 0;
    for (int64_t q = pc->at[i] + 1; q <= pc->at[i] + pc->len[i]; q++)
        n += is_target(p, s, pc->shard[i], q, pc->doc_end[i]);
    return n;
}

/* Pieces without a target left out (counted in p): attention and positions restart at each piece,
 * so one adds nothing to any loss, and would only take a row's room and its compute. */
static void leave_out_untrained(doc_packing *p, const token_shards *s, pieces *pc)
{
    int64_t kept = 0;
    for (int64_t i = 0; i < pc->n; i++) {
        if (piece_targets(p, s, pc, i) == 0) {
            p->untrained_pieces++;
            p->untrained_tokens += pc->len[i];
            continue;
        }
        pc->at[kept] = pc->at[i], pc->len[kept] = pc->len[i];
        pc->doc_end[kept] = pc->doc_end[i], pc->shard[kept] = pc->shard[i];
        kept++;
    }
    pc->n = kept;
}

/* The rows' pieces in placement order, and each row's trainable targets and tokens. */
static int lay_out(doc_packing *p, const token_shards *s, const pieces *pc, const int64_t *order, const int64_t *row_of)
{
    p->row_first = calloc((size_t)p->n_rows + 1, sizeof *p->row_first);
    p->row_targets = calloc((size_t)p->n_rows, sizeof *p->row_targets);
    p->row_tokens = calloc((size_t)p->n_rows, sizeof *p->row_tokens);
    p->piece_at = malloc((size_t)pc->n * sizeof *p->piece_at);
    p->piece_doc_end = malloc((size_t)pc->n * sizeof *p->piece_doc_end);
    p->piece_len = malloc((size_t)pc->n * sizeof *p->piece_len);
    int64_t *fill = calloc((size_t)p->n_rows, sizeof *fill);
    if (!p->row_first || !p->row_targets || !p->row_tokens || !p->piece_at || !p->piece_doc_end || !p->piece_len || !fill) {
        free(fill);
        return DDP_ERUNTIME;
    }
    for (int64_t i = 0; i < pc->n; i++)
        p->row_first[row_of[i] + 1]++;
    for (int64_t r = 0; r < p->n_rows; r++)
        p->row_first[r + 1] += p->row_first[r];
    for (int64_t i = 0; i < pc->n; i++) {
        const int64_t piece = order[i], r = row_of[piece], slot = p->row_first[r] + fill[r]++;
        p->piece_at[slot] = pc->at[piece];
        p->piece_len[slot] = pc->len[piece];
        p->piece_doc_end[slot] = pc->doc_end[piece];
        const int64_t targets = piece_targets(p, s, pc, piece);
        p->row_targets[r] += targets;
        p->targets += targets;
        p->row_tokens[r] += pc->len[piece];
        p->tokens += pc->len[piece];
    }
    free(fill);
    return DDP_OK;
}

int doc_packing_open(const char *dir, const char *split, const token_shards *s, int64_t T, doc_packing *out,
                     ddp_err *err)
{
    memset(out, 0, sizeof *out);
    doc_packing *p = out;
    p->T = T;
    p->n_shards = s->count;
    p->masks = calloc((size_t)s->count, sizeof *p->masks);
    p->mask_maps = calloc((size_t)s->count, sizeof *p->mask_maps);
    p->mask_lens = calloc((size_t)s->count, sizeof *p->mask_lens);
    int rc = p->masks && p->mask_maps && p->mask_lens ? DDP_OK : ddp_fail(err, DDP_ERUNTIME, "out of memory");
    pieces pc = {0};
    char path[4200];
    for (int64_t k = 0; !rc && k < s->count; k++) {
        token_shard_file_name(path, sizeof path, dir, split, k, "docs");
        rc = read_docs(path, s, k, T, &pc, p, err);
        token_shard_file_name(path, sizeof path, dir, split, k, "mask");
        if (!rc)
            rc = map_mask(path, s, k, p, err);
    }
    if (!rc)
        leave_out_untrained(p, s, &pc);
    int64_t *order = rc || !pc.n ? NULL : malloc((size_t)pc.n * sizeof *order);
    int64_t *row_of = order ? malloc((size_t)pc.n * sizeof *row_of) : NULL;
    if (!rc && pc.n && !row_of)
        rc = ddp_fail(err, DDP_ERUNTIME, "%s/%s: out of memory packing %lld pieces", dir, split, (long long)pc.n);
    if (!rc && pc.n) {
        order_longest_first(&pc, T, order);
        if (pack(&pc, T, order, row_of, &p->n_rows) || lay_out(p, s, &pc, order, row_of))
            rc = ddp_fail(err, DDP_ERUNTIME, "%s/%s: out of memory packing %lld pieces", dir, split, (long long)pc.n);
    }
    if (!rc && p->targets == 0) /* every step's loss would be 0/0 and its gradient nothing */
        rc = ddp_fail(err, DDP_EUSAGE, "%s/%s_*.mask: no target among the split's %lld tokens (a target is a token "
                      "marked 1 after its document's first): nothing to train or evaluate on", dir, split,
                      (long long)s->total);
    free(order), free(row_of);
    pieces_free(&pc);
    if (rc)
        doc_packing_close(p);
    return rc;
}

void doc_packing_close(doc_packing *p)
{
    for (int64_t k = 0; p->mask_maps && k < p->n_shards; k++)
        if (p->mask_maps[k])
            munmap(p->mask_maps[k], p->mask_lens[k]);
    free(p->masks), free(p->mask_maps), free(p->mask_lens);
    free(p->row_first), free(p->piece_at), free(p->piece_doc_end), free(p->piece_len), free(p->row_targets);
    free(p->row_tokens);
    memset(p, 0, sizeof *p);
}

static void gather_row(const doc_packing *p, const token_shards *s, int64_t r, int32_t *tok, int32_t *tgt,
                       int32_t *start, int32_t *end)
{
    const int64_t T = p->T;
    int64_t t = 0;
    for (int64_t k = p->row_first[r]; k < p->row_first[r + 1]; k++) {
        const int64_t at = p->piece_at[k], len = p->piece_len[k], doc_end = p->piece_doc_end[k];
        const int32_t shard = (int32_t)token_shards_shard_of(s, at);
        token_shards_copy(s, at, len, tok + t);
        for (int64_t i = 0; i < len; i++) {
            const int64_t q = at + i + 1;
            const bool trainable = is_target(p, s, shard, q, doc_end);
            tgt[t + i] = !trainable ? DOC_NO_TARGET : i + 1 < len ? tok[t + i + 1] : (int32_t)token_shards_at(s, q);
            if (start)
                start[t + i] = (int32_t)t, end[t + i] = (int32_t)(t + len);
        }
        t += len;
    }
    for (int64_t i = t; i < T; i++) { /* padding: a document of its own, no targets */
        tok[i] = 0;
        tgt[i] = DOC_NO_TARGET;
        if (start)
            start[i] = (int32_t)t, end[i] = (int32_t)T;
    }
}

void doc_packing_gather(const doc_packing *p, const token_shards *s, const int64_t *idx, int64_t count,
                        int32_t *tokens, int32_t *targets, int32_t *docs)
{
    const int64_t T = p->T;
    for (int64_t i = 0; i < count; i++)
        gather_row(p, s, idx[i], tokens + i * T, targets + i * T, docs ? docs + i * T : NULL,
                   docs ? docs + (count + i) * T : NULL);
}

int64_t doc_packing_targets(const doc_packing *p, const int64_t *idx, int64_t count)
{
    int64_t n = 0;
    for (int64_t i = 0; i < count; i++)
        n += p->row_targets[idx[i]];
    return n;
}

int64_t doc_packing_tokens(const doc_packing *p, const int64_t *idx, int64_t count)
{
    int64_t n = 0;
    for (int64_t i = 0; i < count; i++)
        n += p->row_tokens[idx[i]];
    return n;
}
