/* fuzz_doc_packing.c — libFuzzer target for fine-tuning data's reader and packer (doc_packing_open,
 * doc_packing_gather and doc_packing_targets, runtime/data/doc_packing.h) over the token shards it
 * sits beside (token_shards_open).
 *
 * Input: a flags byte, two bytes of T - 1 (little-endian), then up to two shards' files separated
 * by "@@PART@@", three a shard in the order .bin, .mask, .docs (train_000000.bin, .mask, .docs,
 * then train_000001's). With flag bit 0 each part is a file's body alone and the harness writes its
 * 1024-byte header (the .bin: uint16 tokens, counted from its length; the .mask: the .bin's token
 * count; the .docs: the lengths its body holds), so mutations reach the document lengths and the
 * mask bytes instead of dying at a magic. A packing that opens must cover every token of the stream
 * exactly once but those of the pieces it left out (no target; each kept piece has one), in rows of at most T positions whose pieces each lie inside one document of one
 * shard, and gather rows whose tokens are the stream's, whose targets are the next token of the same
 * document where the mask marks it (and -1 elsewhere, padding included), whose document bounds hold
 * each position, and whose target counts are the packing's; the harness aborts otherwise. Must not
 * print. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/data/doc_packing.h"
#include "runtime/data/token_shards.h"
#include "tests/fuzz/fuzz_util.h"

#define INPUT_MAX_BYTES (256 * 1024)
#define MAX_SHARDS 2
#define SEP "@@PART@@"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void *must_alloc(size_t n)
{
    void *p = calloc(n ? n : 1, 1);
    if (!p)
        abort();
    return p;
}

static void put_le32(uint8_t *p, uint32_t v)
{
    for (int b = 0; b < 4; b++)
        p[b] = (uint8_t)(v >> (8 * b));
}

/* The file `name` of the scratch folder: body alone, or after the header (magic, version, count). */
static void write_part(const char *name, const fuzz_part *body, bool header, uint32_t magic, uint32_t version,
                       uint32_t count)
{
    char path[512];
    fuzz_path(path, sizeof path, name);
    size_t head = header ? TOKEN_SHARD_HEADER_BYTES : 0;
    uint8_t *file = must_alloc(head + body->n);
    if (header) {
        put_le32(file, magic);
        put_le32(file + 4, version);
        put_le32(file + 8, count);
    }
    memcpy(file + head, body->p, body->n);
    fuzz_write_file(path, file, head + body->n);
    free(file);
}

/* Row r's pieces: inside the stream and one document, none longer than T, together at most T;
 * each token they cover marked in covered (none twice). */
static void check_pieces(const doc_packing *p, const token_shards *s, int64_t r, uint8_t *covered)
{
    int64_t used = 0;
    if (p->row_first[r + 1] < p->row_first[r])
        abort();
    for (int64_t k = p->row_first[r]; k < p->row_first[r + 1]; k++) {
        const int64_t at = p->piece_at[k], len = p->piece_len[k], end = p->piece_doc_end[k];
        if (len < 1 || len > p->T || at < 0 || at + len > end || end > s->total)
            abort();
        const int64_t shard = token_shards_shard_of(s, at);
        if (end > s->start[shard + 1]) /* a document never crosses into the next shard */
            abort();
        for (int64_t q = at; q < at + len; q++) {
            if (covered[q])
                abort();
            covered[q] = 1;
        }
        used += len;
    }
    if (used > p->T)
        abort();
}

/* Row r as gathered (tok, tgt, and bounds start / end) against the packing's pieces and the stream;
 * returns its targets. */
static int64_t check_row(const doc_packing *p, const token_shards *s, int64_t r, const int32_t *tok,
                         const int32_t *tgt, const int32_t *start, const int32_t *end)
{
    int64_t t = 0, targets = 0;
    for (int64_t k = p->row_first[r]; k < p->row_first[r + 1]; k++) {
        const int64_t at = p->piece_at[k], len = p->piece_len[k], doc_end = p->piece_doc_end[k];
        const int64_t shard = token_shards_shard_of(s, at), before = targets;
        for (int64_t i = 0; i < len; i++) {
            const int64_t q = at + i + 1;
            const bool trainable = q < doc_end && p->masks[shard][q - s->start[shard]];
            if ((uint32_t)tok[t + i] != token_shards_at(s, at + i) || start[t + i] != t || end[t + i] != t + len)
                abort();
            if (trainable ? (uint32_t)tgt[t + i] != token_shards_at(s, q) : tgt[t + i] != DOC_NO_TARGET)
                abort();
            targets += trainable;
        }
        if (targets == before) /* a piece without a target is left out */
            abort();
        t += len;
    }
    for (int64_t i = t; i < p->T; i++)
        if (tok[i] != 0 || tgt[i] != DOC_NO_TARGET || start[i] != t || end[i] != p->T)
            abort();
    return targets;
}

static void check_packing(const doc_packing *p, const token_shards *s, int64_t T)
{
    if (p->T != T || p->n_rows < 1 || p->row_first[0] != 0 || p->n_shards != s->count ||
        p->tokens + p->untrained_tokens != s->total || p->untrained_tokens < p->untrained_pieces)
        abort();
    uint8_t *covered = must_alloc((size_t)s->total);
    int32_t *tok = must_alloc((size_t)T * sizeof *tok), *tgt = must_alloc((size_t)T * sizeof *tgt);
    int32_t *docs = must_alloc(2 * (size_t)T * sizeof *docs);
    int64_t targets = 0, tokens = 0;
    for (int64_t r = 0; r < p->n_rows; r++) {
        check_pieces(p, s, r, covered);
        doc_packing_gather(p, s, &r, 1, tok, tgt, docs);
        const int64_t row = check_row(p, s, r, tok, tgt, docs, docs + T);
        if (row != p->row_targets[r] || doc_packing_targets(p, &r, 1) != row)
            abort();
        int64_t held = 0; /* its pieces' lengths: check_row found padding after them */
        for (int64_t k = p->row_first[r]; k < p->row_first[r + 1]; k++)
            held += p->piece_len[k];
        if (doc_packing_tokens(p, &r, 1) != held)
            abort();
        targets += row;
        tokens += held;
    }
    int64_t n_covered = 0; /* every token but the left-out pieces' (each covered once: check_pieces) */
    for (int64_t q = 0; q < s->total; q++)
        n_covered += covered[q];
    if (n_covered != p->tokens)
        abort();
    if (targets != p->targets || tokens != p->tokens)
        abort();
    free(covered), free(tok), free(tgt), free(docs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3 || size > INPUT_MAX_BYTES)
        return 0;
    const bool header = data[0] & 1;
    const int64_t T = 1 + (int64_t)(data[1] | data[2] << 8);
    fuzz_part parts[3 * MAX_SHARDS];
    const size_t n = fuzz_split(data + 3, size - 3, SEP, sizeof SEP - 1, parts, 3 * MAX_SHARDS);
    char name[64];
    for (size_t i = 0; i < n; i++) {
        const int shard = (int)(i / 3), kind = (int)(i % 3);
        const uint32_t bin_tokens = (uint32_t)(parts[3 * shard].n / 2);
        if (kind == 0) {
            snprintf(name, sizeof name, "train_%06d.bin", shard);
            write_part(name, &parts[i], header, TOKEN_SHARD_MAGIC_U16, TOKEN_SHARD_VERSION_U16, bin_tokens);
        } else if (kind == 1) {
            snprintf(name, sizeof name, "train_%06d.mask", shard);
            write_part(name, &parts[i], header, DOC_MASK_MAGIC, DOC_MASK_VERSION, bin_tokens);
        } else {
            snprintf(name, sizeof name, "train_%06d.docs", shard);
            write_part(name, &parts[i], header, DOC_LENGTHS_MAGIC, DOC_LENGTHS_VERSION, (uint32_t)(parts[i].n / 4));
        }
    }

    token_shards s;
    ddp_err err = {0};
    if (token_shards_open(fuzz_dir(), "train", &s, &err) == DDP_OK) {
        doc_packing p;
        if (doc_packing_open(fuzz_dir(), "train", &s, T, &p, &err) == DDP_OK)
            check_packing(&p, &s, T);
        else if (p.n_rows || p.row_first || p.masks || p.mask_maps || p.tokens)
            abort(); /* a failed open must leave *out zeroed */
        doc_packing_close(&p);
    }
    token_shards_close(&s);
    fuzz_clear_dir(fuzz_dir());
    return 0;
}
