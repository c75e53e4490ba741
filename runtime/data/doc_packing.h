/* doc_packing.h — fine-tuning data as packed rows: a split's documents (scripts/prepare-chat's
 * SPLIT_NNNNNN.docs) and loss masks (SPLIT_NNNNNN.mask) beside its token shards, packed whole into
 * rows of T positions.
 *
 * Packing is best-fit decreasing: documents longest first (ties in stream order), each into the
 * open row whose free space fits it most tightly, a new row when none does; what is left of a row
 * is padding (token 0, no target, a document of its own). A document longer than T is cut into
 * pieces of T (the last shorter), each packed like a document; positions and attention restart at
 * each piece, so a piece without a trainable target (all prompt) adds nothing to any loss and is
 * left out. The result depends only on the files and T, so every rank packs the same rows.
 *
 * A row's target at position t is the next token of the same document when the mask marks that
 * token trainable, else XENT_NO_TARGET (-1): a prompt's tokens are never targets (its last
 * position's is the answer's first token); a document's last position and padding have none.
 * Its document bounds are the attention op's doc_start / doc_end (device.h). Files are checked
 * against the shards before any row is built (magic, version, counts, lengths summing to each
 * shard's tokens, mask bytes 0 or 1) and a bad one is named; nothing is half-loaded. Must not know
 * ranks, batching order, models or devices, and must not print. */
#ifndef DDP_DOC_PACKING_H
#define DDP_DOC_PACKING_H

#include <stdint.h>

#include "runtime/base/err.h"
#include "runtime/data/token_shards.h"

#define DOC_MASK_MAGIC 20250611
#define DOC_MASK_VERSION 1
#define DOC_LENGTHS_MAGIC 20250612
#define DOC_LENGTHS_VERSION 1
#define DOC_NO_TARGET (-1) /* device.h's XENT_NO_TARGET, without including the device layer */

typedef struct doc_packing {
    int64_t T;
    int64_t n_rows;
    int64_t *row_first;     /* n_rows + 1: row r holds pieces [row_first[r], row_first[r + 1]) */
    int64_t *piece_at;      /* each piece's first stream position, in row order */
    int64_t *piece_doc_end; /* one past the last stream position of the piece's document */
    int32_t *piece_len;
    int64_t *row_targets;   /* trainable targets of each row */
    int64_t *row_tokens;    /* positions of each row that hold tokens (not padding) */
    const uint8_t **masks;  /* per shard: its .mask's bytes, one per token (mapped) */
    uint8_t **mask_maps;
    size_t *mask_lens;
    int64_t n_shards;
    /* the report: tokens and targets of the rows; the pieces without a target left out */
    int64_t docs, split_docs, tokens, targets, untrained_pieces, untrained_tokens;
} doc_packing;

/* Reads DIR/SPLIT_NNNNNN.docs and .mask for every shard of s (already opened from DIR, SPLIT) and
 * packs rows of T positions. DDP_EUSAGE naming the file for a missing, short, foreign or
 * inconsistent one, and naming the masks when no token of the split is a target. On failure *out
 * is zeroed. */
int doc_packing_open(const char *dir, const char *split, const token_shards *s, int64_t T, doc_packing *out,
                     ddp_err *err);
void doc_packing_close(doc_packing *p);

/* Rows idx[0..count): tokens [count, T], targets [count, T] (next token or DOC_NO_TARGET), and,
 * when docs is not NULL, the bounds [2, count, T]: the planes of doc_start then doc_end. */
void doc_packing_gather(const doc_packing *p, const token_shards *s, const int64_t *idx, int64_t count,
                        int32_t *tokens, int32_t *targets, int32_t *docs);

/* The trainable targets of rows idx[0..count). */
int64_t doc_packing_targets(const doc_packing *p, const int64_t *idx, int64_t count);
/* The positions of rows idx[0..count) that hold tokens (not padding). */
int64_t doc_packing_tokens(const doc_packing *p, const int64_t *idx, int64_t count);

#endif
