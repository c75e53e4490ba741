/* fuzz_token_shards.c — libFuzzer target for the token-shard reader (token_shards_open and the
 * stream lookups, runtime/data/token_shards.h).
 *
 * Input: a flags byte, the window length T - 1, the vocabulary size (2 bytes, little-endian; 0
 * means 65536), then the shards' files separated by "@@SHARD@@" (at most 8), written as
 * train_000000.bin, train_000001.bin, ... Flag bit 0 makes the harness set each shard's token
 * count to what its length holds (2 or 4 bytes a token, by the magic it has), so mutations get past
 * the size check to the rest; bit 1 numbers the shards from 000001 (a gap); bit 2 adds a folder
 * named like the next shard; bit 3 adds 65536 to the vocabulary size, so uint32 shards' scans meet
 * vocabularies beyond uint16. An open that succeeds must give a stream of one token size whose
 * windows, lookups and vocabulary scan agree with each other and stay inside the mapped files (the
 * harness checks that and aborts otherwise). Must not print. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "runtime/data/token_shards.h"
#include "tests/fuzz/fuzz_util.h"

#define INPUT_MAX_BYTES (256 * 1024)
#define MAX_SHARDS 8
#define SEP "@@SHARD@@"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_stream(const token_shards *s, int64_t T, int64_t vocab)
{
    if (s->count < 1 || s->total < s->count || s->start[0] != 0 || s->start[s->count] != s->total)
        abort();
    if (s->token_bytes != 2 && s->token_bytes != 4)
        abort();
    for (int64_t k = 0; k < s->count; k++)
        if (s->shards[k].token_bytes != s->token_bytes)
            abort();
    ddp_err err = {0};
    int64_t bad = -1; /* the first token >= vocab, found the slow way */
    for (int64_t pos = 0; pos < s->total && bad < 0; pos++)
        if (token_shards_at(s, pos) >= vocab)
            bad = pos;
    if ((token_shards_check_vocab(s, vocab, &err) == DDP_OK) != (bad < 0))
        abort();
    int64_t windows = token_shards_windows(s, T);
    if (windows != (s->total - 1) / T)
        abort();
    int32_t *in = malloc((size_t)T * sizeof *in), *tgt = malloc((size_t)T * sizeof *tgt);
    if (!in || !tgt)
        abort();
    int64_t picks[3] = {0, windows / 2, windows - 1};
    for (int i = 0; i < 3 && windows > 0; i++) {
        token_shards_gather(s, T, &picks[i], 1, in, tgt);
        for (int64_t t = 0; t < T; t++)
            if ((uint32_t)in[t] != token_shards_at(s, picks[i] * T + t) ||
                (uint32_t)tgt[t] != token_shards_at(s, picks[i] * T + t + 1))
                abort();
    }
    free(in);
    free(tgt);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4 || size > INPUT_MAX_BYTES)
        return 0;
    uint8_t flags = data[0];
    int64_t T = (int64_t)data[1] + 1;
    int64_t vocab = data[2] | data[3] << 8;
    vocab = (vocab ? vocab : 65536) + (flags & 8 ? 65536 : 0);
    fuzz_part parts[MAX_SHARDS];
    size_t n = fuzz_split(data + 4, size - 4, SEP, sizeof SEP - 1, parts, MAX_SHARDS);
    char name[64], path[512];
    int first = flags & 2 ? 1 : 0;
    for (size_t k = 0; k < n; k++) {
        snprintf(name, sizeof name, "train_%06d.bin", first + (int)k);
        fuzz_path(path, sizeof path, name);
        uint8_t *file = malloc(parts[k].n ? parts[k].n : 1);
        if (!file)
            abort();
        memcpy(file, parts[k].p, parts[k].n);
        if ((flags & 1) && parts[k].n >= TOKEN_SHARD_HEADER_BYTES) {
            /* the magic's token size; the reader refuses any other magic anyway */
            uint32_t magic = (uint32_t)file[0] | (uint32_t)file[1] << 8 | (uint32_t)file[2] << 16 |
                             (uint32_t)file[3] << 24;
            size_t width = magic == TOKEN_SHARD_MAGIC_U32 ? 4 : 2;
            uint32_t count = (uint32_t)((parts[k].n - TOKEN_SHARD_HEADER_BYTES) / width);
            for (int b = 0; b < 4; b++)
                file[8 + b] = (uint8_t)(count >> (8 * b));
        }
        fuzz_write_file(path, file, parts[k].n);
        free(file);
    }
    if (flags & 4) {
        snprintf(name, sizeof name, "train_%06d.bin", first + (int)n);
        fuzz_path(path, sizeof path, name);
        if (mkdir(path, 0700) != 0)
            abort();
    }

    token_shards s;
    ddp_err err = {0};
    if (token_shards_open(fuzz_dir(), "train", &s, &err) == DDP_OK)
        check_stream(&s, T, vocab);
    else if (s.count || s.shards || s.start || s.total)
        abort(); /* a failed open must leave *out zeroed */
    token_shards_close(&s);
    fuzz_clear_dir(fuzz_dir());
    return 0;
}
