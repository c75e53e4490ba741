/* shard_test_files.h — the files the token-shard and tokenizer.bin tests write (one test program
 * each includes it): llm.c shards of uint16 and uint32 tokens, raw bytes, a fresh directory per
 * case under a temporary one, and the count of this process's mappings of files under a directory.
 * Test code only: static inline, so a program that uses part of it is not warned about the rest. */
#ifndef DDP_TEST_SHARD_TEST_FILES_H
#define DDP_TEST_SHARD_TEST_FILES_H

#include <errno.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char tmpdir[256];

static inline void die(const char *what, const char *path)
{
    fprintf(stderr, "test setup: %s %s: %s\n", what, path, strerror(errno));
    exit(1);
}

static inline void put_le32(uint8_t *p, int32_t v)
{
    uint32_t u = (uint32_t)v;
    p[0] = (uint8_t)u, p[1] = (uint8_t)(u >> 8), p[2] = (uint8_t)(u >> 16), p[3] = (uint8_t)(u >> 24);
}

static inline void write_raw(const char *path, const uint8_t *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0)
        die("cannot write", path);
}

/* A fresh empty directory under tmpdir, named after the case for readable messages. */
static inline void fresh_dir(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", tmpdir, name);
    if (mkdir(out, 0700) != 0)
        die("cannot mkdir", out);
}

/* Shard bytes of `width`-byte tokens (2: magic 20240520, version 1; 4: magic 20240801, version 7):
 * a header declaring `declared` tokens, then the n tokens at `tokens` (n may differ, to corrupt). */
static inline uint8_t *shard_file_bytes(const void *tokens, size_t width, int64_t n, int32_t declared, size_t *len)
{
    *len = 1024 + width * (size_t)n;
    uint8_t *b = calloc(*len, 1);
    if (!b)
        die("out of memory", "");
    put_le32(b, width == 2 ? 20240520 : 20240801);
    put_le32(b + 4, width == 2 ? 1 : 7);
    put_le32(b + 8, declared);
    for (int64_t i = 0; i < n; i++) {
        uint32_t v = width == 2 ? ((const uint16_t *)tokens)[i] : ((const uint32_t *)tokens)[i];
        for (size_t k = 0; k < width; k++)
            b[1024 + width * (size_t)i + k] = (uint8_t)(v >> (8 * k));
    }
    return b;
}

static inline uint8_t *shard_bytes(const uint16_t *tokens, int64_t n, int32_t declared, size_t *len)
{
    return shard_file_bytes(tokens, 2, n, declared, len);
}

static inline uint8_t *shard32_bytes(const uint32_t *tokens, int64_t n, int32_t declared, size_t *len)
{
    return shard_file_bytes(tokens, 4, n, declared, len);
}

static inline void shard_name(char *out, size_t cap, const char *dir, const char *split, int k)
{
    /* a path that does not fit is a broken test setup, never a silently shorter name */
    if (snprintf(out, cap, "%s/%s_%06d.bin", dir, split, k) >= (int)cap)
        die("shard path too long: ", dir);
}

/* dir/split_00000k.bin holding the n `width`-byte tokens at `tokens`, its header right. */
static inline void write_shard_file(const char *dir, const char *split, int k, const void *tokens, size_t width,
                                    int64_t n)
{
    char path[512];
    size_t len;
    uint8_t *b = shard_file_bytes(tokens, width, n, (int32_t)n, &len);
    shard_name(path, sizeof path, dir, split, k);
    write_raw(path, b, len);
    free(b);
}

static inline void write_shard(const char *dir, const char *split, int k, const uint16_t *tokens, int64_t n)
{
    write_shard_file(dir, split, k, tokens, 2, n);
}

static inline void write_shard32(const char *dir, const char *split, int k, const uint32_t *tokens, int64_t n)
{
    write_shard_file(dir, split, k, tokens, 4, n);
}

/* Mappings of files under dir in this process: what a failed open or a close must leave at 0. */
static inline int count_maps(const char *dir)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        die("cannot read", "/proc/self/maps");
    char line[1024], prefix[600];
    snprintf(prefix, sizeof prefix, "%s/", dir); /* so "empty" does not count "empty_file" */
    int n = 0;
    while (fgets(line, sizeof line, f))
        n += strstr(line, prefix) != NULL;
    fclose(f);
    return n;
}

static inline int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

/* tmpdir made (named after the test program) before a test's cases, and removed with all it
 * holds after them. */
static inline void files_begin(const char *name)
{
    snprintf(tmpdir, sizeof tmpdir, "%s/ddptest_%s.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", name);
    if (!mkdtemp(tmpdir))
        die("cannot create", tmpdir);
}

static inline void files_end(void) { nftw(tmpdir, remove_one, 16, FTW_DEPTH | FTW_PHYS); }

#endif
