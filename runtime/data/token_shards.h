/* token_shards.h — a split's llm.c token shards (train_000000.bin, ...), mapped read-only and read
 * as one concatenated token stream cut into training windows.
 *
 * Owns the shard format checks, the rules that shards are numbered consecutively from 000000 and
 * that a dataset's shards (train and val) share one format, and the mapping from stream positions to
 * shards. A shard is a header of 256 little-endian int32 (magic, version, token count >= 1, zeros)
 * followed by exactly that many little-endian tokens, in one of llm.c's two formats (its
 * dev/data/data_common.py):
 *   magic 20240520, version 1: uint16 tokens (GPT-2's)
 *   magic 20240801, version 7: uint32 tokens (Llama 3's; vocabularies beyond 65,536 ids)
 * Window i covers stream positions [i*T, i*T + T + 1): its inputs are the first T tokens, its
 * targets the T after shifting by one, so consecutive windows share one token and a window may span
 * several shard files. A failed open leaves *out zeroed with nothing mapped or allocated, and the
 * error names the offending file. This module must not know about ranks, batching order
 * (sampler.h), models or devices, and must not print. Sizes and positions are int64_t: streams
 * beyond 2^31 tokens work. */
#ifndef DDP_TOKEN_SHARDS_H
#define DDP_TOKEN_SHARDS_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/base/err.h"

#define TOKEN_SHARD_HEADER_BYTES 1024 /* 256 int32 */
#define TOKEN_SHARD_MAGIC_U16 20240520
#define TOKEN_SHARD_VERSION_U16 1
#define TOKEN_SHARD_MAGIC_U32 20240801
#define TOKEN_SHARD_VERSION_U32 7

typedef struct token_shard {
    const uint8_t *map;   /* the whole file, mapped read-only */
    size_t map_len;       /* file size in bytes */
    const uint8_t *tokens;/* map + TOKEN_SHARD_HEADER_BYTES: ntokens tokens of token_bytes each, LE */
    int64_t ntokens;
    int token_bytes;      /* 2 (uint16 tokens) or 4 (uint32 tokens), from the header's magic */
    char *path;           /* "DIR/train_000003.bin" */
} token_shard;

typedef struct token_shards {
    int64_t count;        /* shard files */
    token_shard *shards;  /* count entries, in file-number order */
    int64_t *start;       /* count + 1 prefix sums: shard k holds stream [start[k], start[k+1]) */
    int64_t total;        /* tokens in the stream (= start[count]) */
    int token_bytes;      /* every shard's token_bytes: 2 or 4 */
} token_shards;

/* Maps DIR/SPLIT_NNNNNN.bin for NNNNNN = 000000, 000001, ... and validates every shard. split is a
 * file-name prefix such as "train" or "val". Errors (DDP_EUSAGE unless the system failed): no shards,
 * a numbering gap (names the missing file), a shard that is too short for its header, has a bad magic
 * or a version other than its magic's, declares < 1 token, is truncated or has trailing bytes (names
 * the file and the sizes, counted in its own token size), or holds tokens of another size than shard
 * 000000 (names both files). On any error *out is all zero. */
int token_shards_open(const char *dir, const char *split, token_shards *out, ddp_err *err);
/* The splits of one dataset (train, val) share one format too: DDP_EUSAGE naming b's first shard and
 * a's when their token sizes differ. Both must be open. */
int token_shards_check_same_format(const token_shards *a, const token_shards *b, ddp_err *err);
/* Unmaps and frees everything; leaves *s zeroed. Safe on a zeroed struct. */
void token_shards_close(token_shards *s);
/* "DIR/SPLIT_NNNNNN.EXT", the name of shard k's file of kind ext ("bin"; scripts/prepare-chat's
 * "docs" and "mask" beside it), into out (n bytes; NULL when n is 0): snprintf's count. */
int token_shard_file_name(char *out, size_t n, const char *dir, const char *split, int64_t k, const char *ext);

/* Non-overlapping training windows of T (>= 1) tokens: (total - 1) / T; 0 when T < 1. */
int64_t token_shards_windows(const token_shards *s, int64_t T);
/* For i < count, w = window_idx[i] (0 <= w < token_shards_windows(s, T)):
 * inputs[i*T + t] = stream[w*T + t], targets[i*T + t] = stream[w*T + t + 1], for t < T.
 * Ids are exact below 2^31, which token_shards_check_vocab with any vocab_size <= INT32_MAX ensures;
 * callers run that first (dataset_load_tokens does). */
void token_shards_gather(const token_shards *s, int64_t T, const int64_t *window_idx, int64_t count,
                         int32_t *inputs, int32_t *targets);
/* The shard holding stream position pos (0 <= pos < total): the last k with start[k] <= pos (every
 * shard is non-empty, so pos < start[k + 1] too); O(log shards). */
int64_t token_shards_shard_of(const token_shards *s, int64_t pos);
/* dst[i] = stream[pos + i] for i < n (0 <= pos, pos + n <= total), crossing into as many following
 * shards as it takes; ids exact as token_shards_gather's. */
void token_shards_copy(const token_shards *s, int64_t pos, int64_t n, int32_t *dst);
/* The token at stream position pos (0 <= pos < total), as stored (uint32 ids above INT32_MAX stay
 * positive). For tests and diagnostics, not hot loops. */
uint32_t token_shards_at(const token_shards *s, int64_t pos);
/* Scans every token once (nothing to scan when vocab_size exceeds every id the token size holds).
 * An id >= vocab_size is a DDP_EUSAGE error naming the first such token:
 * "token 300 at DIR/train_000000.bin:1234 is >= vocab_size 256", where 1234 is the token's 0-based
 * index within that shard (its byte offset is 1024 + token_bytes * 1234). Callers add the config key
 * by prefixing the message. vocab_size must be >= 1. */
int token_shards_check_vocab(const token_shards *s, int64_t vocab_size, ddp_err *err);

#endif
