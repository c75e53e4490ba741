/* test_tokenizer_bin.c — llm.c's tokenizer.bin (suite 'data'): a file written here from the
 * format's definition (magic 20240328, version 2, 256 single bytes, multi-byte pieces up to 255
 * bytes, the end-of-text id, the pre-tokenizer, the vocabulary fingerprint) is read back piece by
 * piece (a file without the fingerprint too), and every malformed
 * one (each header field wrong, a piece cut short or of length 0, trailing bytes, too short, missing) is rejected
 * naming the file and what is wrong; an empty prompt's first id is the end-of-text id, else the
 * id spelling a newline. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/check.h"
#include "runtime/data/tokenizer.h"
#include "shard_test_files.h"

#define TOK_VOCAB 260
#define TOK_EOT 259
static const char *const MULTI[] = {"th", "e ", NULL /* 255 x 'x' */, "<|endoftext|>"};

static uint8_t *tokenizer_file(size_t *len)
{
    uint8_t *b = calloc(1024 + TOK_VOCAB * 256, 1);
    put_le32(b, 20240328);
    put_le32(b + 4, 2);
    put_le32(b + 8, TOK_VOCAB);
    put_le32(b + 12, TOK_EOT);
    put_le32(b + 16, TOKENIZER_SPLIT_QWEN2);
    put_le32(b + 20, (int32_t)0x89abcdef), put_le32(b + 24, 0x01234567), put_le32(b + 28, 1);
    size_t pos = 1024;
    for (int id = 0; id < 256; id++)
        b[pos++] = 1, b[pos++] = (uint8_t)id;
    for (int j = 0; j < 4; j++) {
        size_t n = MULTI[j] ? strlen(MULTI[j]) : 255;
        b[pos++] = (uint8_t)n;
        for (size_t i = 0; i < n; i++)
            b[pos++] = MULTI[j] ? (uint8_t)MULTI[j][i] : 'x';
    }
    *len = pos;
    return b;
}

static void check_tokenizer_good(const char *path)
{
    tokenizer t;
    ddp_err err = {0};
    int rc = tokenizer_load(path, &t, &err);
    CHECK(rc == DDP_OK, "tokenizer load: %s", err.msg);
    if (rc)
        return;
    CHECK_EQ_INT(t.vocab_size, TOK_VOCAB);
    CHECK_EQ_INT(t.eot, TOK_EOT);
    CHECK(t.split == TOKENIZER_SPLIT_QWEN2, "pre-tokenizer %d (%s), the file's is 3", (int)t.split,
          tokenizer_split_name(t.split));
    CHECK(t.has_fingerprint && t.fingerprint == 0x0123456789abcdefull, "the fingerprint %016llx",
          (unsigned long long)t.fingerprint);
    size_t len;
    const uint8_t *p;
    for (int id = 0; id < 256; id++) {
        p = tokenizer_bytes(&t, id, &len);
        CHECK(p && len == 1 && p[0] == id, "byte token %d", id);
    }
    p = tokenizer_bytes(&t, 258, &len);
    CHECK(p && len == 255 && p[0] == 'x' && p[254] == 'x', "the 255-byte token");
    p = tokenizer_bytes(&t, TOK_EOT, &len);
    CHECK(p && len == 13 && memcmp(p, "<|endoftext|>", 13) == 0, "end-of-text token");
    CHECK(tokenizer_bytes(&t, -1, &len) == NULL && len == 0, "id -1 has no bytes");
    CHECK(tokenizer_bytes(&t, TOK_VOCAB, &len) == NULL && len == 0, "id vocab_size has no bytes");

    /* round trip: ids for "the cat<|endoftext|>" */
    const int32_t ids[] = {256, 257, 'c', 'a', 't', TOK_EOT};
    char out[64];
    size_t written = 99;
    CHECK_EQ_INT(tokenizer_decode(&t, ids, 6, out, sizeof out, &written), 6);
    CHECK(strcmp(out, "the cat<|endoftext|>") == 0 && written == 20, "decoded \"%s\" (%zu bytes)", out, written);
    /* whole tokens only: 5 bytes of room hold "th", "e " and the NUL, so decoding stops before "c" */
    CHECK_EQ_INT(tokenizer_decode(&t, ids, 6, out, 5, &written), 2);
    CHECK(strcmp(out, "the ") == 0 && written == 4, "cut decode gave \"%s\"", out);
    CHECK_EQ_INT(tokenizer_decode(&t, ids, 6, out, 0, &written), 0);
    CHECK_EQ_INT(written, 0);
    const int32_t odd[] = {-1, TOK_VOCAB, 'a'};
    CHECK_EQ_INT(tokenizer_decode(&t, odd, 3, out, sizeof out, &written), 3);
    CHECK(strcmp(out, "\xEF\xBF\xBD\xEF\xBF\xBD" "a") == 0, "out-of-range ids decode as U+FFFD");

    /* streaming every id through a buffer of 256 bytes reassembles the whole table */
    int32_t all[TOK_VOCAB];
    for (int i = 0; i < TOK_VOCAB; i++)
        all[i] = i;
    char want[1024 + TOK_VOCAB * 256], got[sizeof want], buf[256];
    size_t want_len = 0, got_len = 0;
    for (int i = 0; i < TOK_VOCAB; i++) {
        p = tokenizer_bytes(&t, i, &len);
        memcpy(want + want_len, p, len);
        want_len += len;
    }
    int64_t done = 0, calls = 0;
    while (done < TOK_VOCAB && calls++ < 1000) {
        int64_t k = tokenizer_decode(&t, all + done, TOK_VOCAB - done, buf, sizeof buf, &written);
        CHECK(k >= 1, "streaming decode made no progress at id %lld", (long long)done);
        memcpy(got + got_len, buf, written);
        got_len += written, done += k;
    }
    CHECK(done == TOK_VOCAB && got_len == want_len && memcmp(got, want, want_len) == 0,
          "streamed decode differs (%zu of %zu bytes)", got_len, want_len);
    tokenizer_free(&t);
    CHECK(t.entries == NULL && t.offset == NULL && t.vocab_size == 0, "tokenizer_free zeroes");
}

static void expect_tokenizer_error(const char *name, const uint8_t *bytes, size_t len, const char *n1,
                                   const char *n2)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    if (bytes)
        write_raw(path, bytes, len);
    tokenizer t;
    memset(&t, 0xab, sizeof t);
    ddp_err err = {0};
    int rc = tokenizer_load(path, &t, &err);
    CHECK(rc == DDP_EUSAGE, "%s: rc %d (msg: %s)", name, rc, err.msg);
    CHECK_STR_CONTAINS(err.msg, name);
    CHECK_STR_CONTAINS(err.msg, n1);
    if (n2)
        CHECK_STR_CONTAINS(err.msg, n2);
    CHECK(t.entries == NULL && t.offset == NULL && t.vocab_size == 0 && t.eot == 0, "%s: not zeroed", name);
    if (rc == DDP_OK)
        tokenizer_free(&t);
}

/* A copy of the good file with the int32 at byte `at` replaced. */
static void bad_field(const char *name, const uint8_t *good, size_t len, size_t at, int32_t v, const char *n1,
                      const char *n2)
{
    uint8_t *b = malloc(len);
    memcpy(b, good, len);
    put_le32(b + at, v);
    expect_tokenizer_error(name, b, len, n1, n2);
    free(b);
}

static void check_tokenizer(void)
{
    size_t len;
    uint8_t *good = tokenizer_file(&len);
    char path[512];
    snprintf(path, sizeof path, "%s/tokenizer.bin", tmpdir);
    write_raw(path, good, len);
    check_tokenizer_good(path);

    bad_field("tok_magic.bin", good, len, 0, 20240520, "bad magic 20240520", "20240328");
    bad_field("tok_version.bin", good, len, 4, 1, "version 1", "expected 2");
    bad_field("tok_vocab0.bin", good, len, 8, 0, "vocabulary size 0", NULL);
    bad_field("tok_vocab_neg.bin", good, len, 8, -3, "vocabulary size -3", NULL);
    bad_field("tok_vocab_huge.bin", good, len, 8, (1 << 20) + 1, "vocabulary size 1048577", NULL);
    /* one id fewer (and no end-of-text id, which would now be out of range): the last entry is left over */
    uint8_t *less = malloc(len);
    memcpy(less, good, len);
    put_le32(less + 8, TOK_VOCAB - 1);
    put_le32(less + 12, -1);
    expect_tokenizer_error("tok_vocab_less.bin", less, len, "14 trailing bytes", "259 tokens");
    free(less);
    bad_field("tok_eot_gone.bin", good, len, 8, TOK_VOCAB - 1, "end-of-text id 259", "-1..258");
    bad_field("tok_vocab_more.bin", good, len, 8, TOK_VOCAB + 1, "truncated", "token 260 of 261");
    bad_field("tok_eot_big.bin", good, len, 12, TOK_VOCAB, "end-of-text id 260", NULL);
    bad_field("tok_eot_neg.bin", good, len, 12, -2, "end-of-text id -2", NULL);
    bad_field("tok_split_new.bin", good, len, 16, TOKENIZER_SPLIT_KINDS, "pre-tokenizer 8 (header int32 4)", "0..7");
    bad_field("tok_split_neg.bin", good, len, 16, -1, "pre-tokenizer -1", NULL);
    bad_field("tok_fingerprint_flag.bin", good, len, 28, 2, "header int32 7 is 2", NULL);
    uint8_t *none = malloc(len); /* llm.c's header, an older prepare-text's: no fingerprint, read */
    memcpy(none, good, len);
    memset(none + 20, 0, 12);
    write_raw(path, none, len);
    tokenizer t;
    ddp_err err = {0};
    CHECK(tokenizer_load(path, &t, &err) == DDP_OK && !t.has_fingerprint, "no fingerprint: %s", err.msg);
    tokenizer_free(&t);
    free(none);
    uint8_t *b = malloc(len + 1);
    memcpy(b, good, len);
    b[len] = 'z';
    expect_tokenizer_error("tok_trailing.bin", b, len + 1, "1 trailing bytes", NULL);
    expect_tokenizer_error("tok_cut_last.bin", b, len - 1, "truncated", "token 259");
    expect_tokenizer_error("tok_cut_mid.bin", b, 1024 + 11, "truncated", "token 5 needs 1 bytes");
    expect_tokenizer_error("tok_short.bin", b, 500, "500 bytes is too short", NULL);
    expect_tokenizer_error("tok_empty.bin", b, 0, "0 bytes is too short", NULL);
    b[1024 + 2 * 100] = 0; /* id 100's length byte */
    expect_tokenizer_error("tok_zero_len.bin", b, len, "token 100 has length 0", "byte 1224");
    free(b);
    expect_tokenizer_error("tok_missing.bin", NULL, 0, "No such file", "scripts/prepare-text");
    free(good);
}

/* tokenizer_context_start: the end-of-text id; without one, the id spelling "\n" (10 where ids are
 * bytes, another where they are not). */
static void check_context_start(void)
{
    size_t len;
    uint8_t *b = tokenizer_file(&len);
    char path[512];
    snprintf(path, sizeof path, "%s/tok_start.bin", tmpdir);
    const int32_t newline_at[] = {-1, '\n', '+'};
    for (int k = 0; k < 3; k++) {
        if (k > 0)
            put_le32(b + 12, -1);
        if (k == 2) /* bytes 10 and 43 trade ids: id 10 spells "+", id 43 "\n" */
            b[1024 + 2 * '\n' + 1] = '+', b[1024 + 2 * '+' + 1] = '\n';
        write_raw(path, b, len);
        tokenizer t;
        ddp_err err = {0};
        CHECK(tokenizer_load(path, &t, &err) == DDP_OK, "%s", err.msg);
        CHECK_EQ_INT(tokenizer_context_start(&t), k == 0 ? TOK_EOT : newline_at[k]);
        tokenizer_free(&t);
    }
    free(b);
}

int main(void)
{
    files_begin("tokenizer_bin");
    check_tokenizer();
    check_context_start();
    files_end();
    return check_done("test_tokenizer_bin");
}
