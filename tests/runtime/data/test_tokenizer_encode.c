/* test_tokenizer_encode.c — the encoder (runtime/data/tokenizer_encode.c) on small hand-made
 * tokenizer.bin files: GPT-2's pre-tokenizer splits (expected pieces taken from Python's `regex`
 * module with the same pattern, ASCII and non-ASCII), the byte-pair merge (lowest id first, the
 * leftmost pair on a tie, a whole piece that is a token taken as is, the end-of-text token never
 * produced, the lower of two ids with the same bytes), the byte tokenizer's one id per byte, and
 * the refusals with their byte offsets (invalid UTF-8 of every kind, a byte without a token).
 * tests/scripts/test_tokenizer_encode.py checks the same encoder against tiktoken's GPT-2. */
#include "tests/check.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "runtime/data/tokenizer_encode.h"

static char dir[] = "/tmp/test_tokenizer_encode.XXXXXX";

/* Writes a tokenizer.bin of the given tokens (NUL-terminated strings; "" is byte 0) and loads it. */
static int make_tokenizer(const char *name, const char *const *tokens, int n, int eot, tokenizer_split split,
                          tokenizer *out)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    int32_t header[256] = {20240328, 2, n, eot, (int32_t)split};
    fwrite(header, 4, 256, f); /* the test machines are little-endian, like the files */
    for (int i = 0; i < n; i++) {
        size_t len = tokens[i][0] ? strlen(tokens[i]) : 1;
        fputc((int)len, f);
        fwrite(tokens[i], 1, len, f);
    }
    fclose(f);
    ddp_err err = {0};
    int rc = tokenizer_load(path, out, &err);
    CHECK(rc == DDP_OK, "%s: %s", name, err.msg);
    unlink(path);
    return rc;
}

/* Tokens 0..255 are the bytes; then extra. */
static int make_bpe(const char *name, const char *const *extra, int n_extra, int eot, tokenizer_split split,
                    tokenizer *out)
{
    static char bytes[256][2];
    const char *tokens[512];
    for (int b = 0; b < 256; b++) {
        bytes[b][0] = (char)b;
        tokens[b] = bytes[b];
    }
    for (int i = 0; i < n_extra; i++)
        tokens[256 + i] = extra[i];
    return make_tokenizer(name, tokens, 256 + n_extra, eot, split, out);
}

static void expect_ids(const tokenizer_encoder *e, const char *text, size_t len, const int32_t *want, int64_t n_want)
{
    int32_t *ids = NULL;
    int64_t n = -1;
    ddp_err err = {0};
    int rc = tokenizer_encode(e, text, len, &ids, &n, &err);
    CHECK(rc == DDP_OK, "encode \"%.60s\": %s", text, err.msg);
    bool same = rc == DDP_OK && n == n_want && (n == 0 || !memcmp(ids, want, (size_t)n * sizeof *ids));
    CHECK(same, "encode \"%.60s\": %lld ids, expected %lld; first %d, expected %d", text, (long long)n,
          (long long)n_want, n > 0 ? ids[0] : -1, n_want > 0 ? want[0] : -1);
    free(ids);
}

#define IDS(...) (const int32_t[]){__VA_ARGS__}, (int64_t)(sizeof (const int32_t[]){__VA_ARGS__} / sizeof(int32_t))

static void expect_refused(const tokenizer_encoder *e, const char *text, size_t len, const char *msg)
{
    int32_t *ids = (int32_t *)1;
    int64_t n = -1;
    ddp_err err = {0};
    int rc = tokenizer_encode(e, text, len, &ids, &n, &err);
    CHECK(rc == DDP_EUSAGE && ids == NULL && n == 0, "\"%s\" accepted (rc %d)", text, rc);
    CHECK(strstr(err.msg, msg) != NULL, "\"%s\": message \"%s\" lacks \"%s\"", text, err.msg, msg);
    if (rc == DDP_OK)
        free(ids);
}

static void test_merges(void)
{
    /* eot sits among the others on purpose; 262 repeats 257's bytes */
    const char *extra[] = {"ll", "he", "hell", "aa", "xyz", "<|endoftext|>", "he", "lo"};
    tokenizer t;
    if (make_bpe("bpe.bin", extra, 8, 261, TOKENIZER_SPLIT_UNSTATED, &t))
        return;
    tokenizer_encoder *e = NULL;
    ddp_err err = {0};
    CHECK(tokenizer_encoder_create(&t, &e, &err) == DDP_OK, "%s", err.msg);
    /* ll (256) first, then he (257), then hell (258); "lo" (263) never gets its chance */
    expect_ids(e, "hello", 5, IDS(258, 'o'));
    expect_ids(e, "aaa", 3, IDS(259, 'a'));          /* a tie: the leftmost pair */
    expect_ids(e, "aaaa", 4, IDS(259, 259));
    expect_ids(e, "xyz", 3, IDS(260));               /* no pair of it is a token, the whole piece is */
    expect_ids(e, " xyz", 4, IDS(' ', 'x', 'y', 'z'));
    expect_ids(e, "he", 2, IDS(257));                /* 262 has the same bytes: the lower id wins */
    expect_ids(e, "<|endoftext|>", 13, IDS('<', '|', 'e', 'n', 'd', 'o', 'f', 't', 'e', 'x', 't', '|', '>'));
    expect_ids(e, "", 0, NULL, 0);
    expect_ids(e, "a\0b", 3, IDS('a', 0, 'b'));
    /* UTF-8 passes through as bytes when no token joins them */
    expect_ids(e, "\xc3\xa9", 2, IDS(0xc3, 0xa9));
    expect_refused(e, "ok\xff", 3, "invalid UTF-8 at byte offset 2 (byte 0xFF)");
    expect_refused(e, "ab\xe2\x82", 4, "invalid UTF-8 at byte offset 2");     /* cut short */
    expect_refused(e, "\xc0\x80", 2, "invalid UTF-8 at byte offset 0");       /* overlong NUL */
    expect_refused(e, "\xe0\x80\xaf", 3, "invalid UTF-8 at byte offset 0");   /* overlong '/' */
    expect_refused(e, "x\xed\xa0\x80", 4, "invalid UTF-8 at byte offset 1");  /* a surrogate */
    expect_refused(e, "\xf4\x90\x80\x80", 4, "invalid UTF-8 at byte offset 0"); /* above U+10FFFF */
    expect_refused(e, "a\x80", 2, "invalid UTF-8 at byte offset 1");          /* stray continuation */
    expect_refused(e, "caf\xc3\xa9 \xe2\x28\xa1", 9, "invalid UTF-8 at byte offset 6");
    tokenizer_encoder_free(e);
    tokenizer_free(&t);
}

static void test_bytes_and_missing(void)
{
    tokenizer t;
    if (make_bpe("bytes.bin", NULL, 0, -1, TOKENIZER_SPLIT_GPT2, &t))
        return;
    tokenizer_encoder *e = NULL;
    ddp_err err = {0};
    CHECK(tokenizer_encoder_create(&t, &e, &err) == DDP_OK, "%s", err.msg);
    expect_ids(e, "h\xc3\xa9llo\n", 7, IDS('h', 0xc3, 0xa9, 'l', 'l', 'o', '\n'));
    tokenizer_encoder_free(e);
    tokenizer_free(&t);

    /* ASCII only: a non-ASCII byte has no token */
    const char *ascii[128];
    static char b[128][2];
    for (int i = 0; i < 128; i++) {
        b[i][0] = (char)i;
        ascii[i] = b[i];
    }
    if (make_tokenizer("ascii.bin", ascii, 128, -1, TOKENIZER_SPLIT_UNSTATED, &t))
        return;
    CHECK(tokenizer_encoder_create(&t, &e, &err) == DDP_OK, "%s", err.msg);
    expect_ids(e, "plain", 5, IDS('p', 'l', 'a', 'i', 'n'));
    expect_refused(e, "h\xc3\xa9llo", 6, "byte 0xC3 at byte offset 1 has no token");
    tokenizer_encoder_free(e);
    tokenizer_free(&t);
}

/* pieces: the expected split, joined by '|' (no case below contains '|'). */
static void expect_split(tokenizer_split split, const char *text, const char *pieces)
{
    size_t len = strlen(text), ends[256];
    ddp_err err = {0};
    int64_t n = tokenizer_pretokenize(split, text, len, ends, &err);
    char got[1024] = "";
    size_t used = 0, start = 0;
    for (int64_t i = 0; i < n && used < sizeof got - 64; i++) {
        used += (size_t)snprintf(got + used, sizeof got - used, "%s%.*s", i ? "|" : "", (int)(ends[i] - start),
                                 text + start);
        start = ends[i];
    }
    CHECK(n > 0 && !strcmp(got, pieces), "%s split of \"%s\": \"%s\", expected \"%s\" (%s)",
          tokenizer_split_name(split), text, got, pieces, n < 0 ? err.msg : "");
}

static void test_gpt2_split(void)
{
    expect_split(TOKENIZER_SPLIT_GPT2, "Hello world", "Hello| world");
    expect_split(TOKENIZER_SPLIT_GPT2, "I'm  here,   don't!", "I|'m| | here|,|  | don|'t|!");
    expect_split(TOKENIZER_SPLIT_GPT2, "  leading", " | leading");
    expect_split(TOKENIZER_SPLIT_GPT2, "trailing  ", "trailing|  ");
    expect_split(TOKENIZER_SPLIT_GPT2, "a\n\nb", "a|\n|\n|b");
    expect_split(TOKENIZER_SPLIT_GPT2, "x\t \ty", "x|\t |\t|y");
    expect_split(TOKENIZER_SPLIT_GPT2, "'S 's 'll 'LL 've 're 'd 'x", "'|S| '|s| '|ll| '|LL| '|ve| '|re| '|d| '|x");
    expect_split(TOKENIZER_SPLIT_GPT2, "?'s", "?'|s");
    expect_split(TOKENIZER_SPLIT_GPT2, "abc123def 4567", "abc|123|def| 4567");
    expect_split(TOKENIZER_SPLIT_GPT2, "...!? ", "...!?| ");
    expect_split(TOKENIZER_SPLIT_GPT2, "\n", "\n");
    expect_split(TOKENIZER_SPLIT_GPT2, "   ", "   ");
    expect_split(TOKENIZER_SPLIT_GPT2,
                 "caf\xc3\xa9 na\xc3\xafve\xe2\x80\x94\xe2\x80\x9cquoted\xe2\x80\x9d \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e "
                 "\xf0\x9f\x99\x82 \xd9\xa1\xd9\xa2\xd9\xa3 \xe2\x85\xab e\xcc\x81",
                 "caf\xc3\xa9| na\xc3\xafve|\xe2\x80\x94\xe2\x80\x9c|quoted|\xe2\x80\x9d| \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e|"
                 " \xf0\x9f\x99\x82| \xd9\xa1\xd9\xa2\xd9\xa3| \xe2\x85\xab| e|\xcc\x81");
    expect_split(TOKENIZER_SPLIT_GPT2, "a\xc2\xa0" "b\xe3\x80\x80" "c\xe2\x80\xa8" "d",
                 "a|\xc2\xa0|b|\xe3\x80\x80|c|\xe2\x80\xa8|d");
    size_t ends[4];
    ddp_err err = {0};
    CHECK(tokenizer_pretokenize(TOKENIZER_SPLIT_GPT2, "a\xff", 2, ends, &err) == -1 && strstr(err.msg, "byte offset 1"),
          "pretokenize of invalid UTF-8: %s", err.msg);
}

/* A text encoded under a split, with the tokens 0..255 (the bytes) and extra after them. */
typedef struct split_case {
    tokenizer_split split;
    const char *text;
    int32_t want[12];
    int n;
} split_case;

static void expect_split_cases(const char *const *extra, int n_extra, const split_case *cases, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        tokenizer t;
        if (make_bpe("split.bin", extra, n_extra, -1, cases[k].split, &t))
            return;
        tokenizer_encoder *e = NULL;
        ddp_err err = {0};
        CHECK(tokenizer_encoder_create(&t, &e, &err) == DDP_OK, "%s", err.msg);
        expect_ids(e, cases[k].text, strlen(cases[k].text), cases[k].want, cases[k].n);
        tokenizer_encoder_free(e);
        tokenizer_free(&t);
    }
}

/* The split the file records is the one the encoder uses: the same tokens, three files. */
static void test_split_from_file(void)
{
    /* 256 "12", 257 "123", 259 "!w", 261 "word" */
    const char *extra[] = {"12", "123", "12345", "!w", "wo", "word", " 1"};
    static const split_case cases[] = {
        {TOKENIZER_SPLIT_GPT2, "!word 12312", {'!', 261, ' ', 257, 256}, 5},             /* "!" "word" " 12312" */
        {TOKENIZER_SPLIT_LLAMA3, "!word 12312", {259, 'o', 'r', 'd', ' ', 257, 256}, 7}, /* "!word" " " "123" "12" */
        {TOKENIZER_SPLIT_QWEN2, "!word 12312", {259, 'o', 'r', 'd', ' ', '1', '2', '3', '1', '2'}, 10},
        /* e + U+0301 COMBINING ACUTE is U+00E9 in NFC, which Qwen2's split normalizes to first */
        {TOKENIZER_SPLIT_GPT2, "cafe\xcc\x81 \xcc\x81", {'c', 'a', 'f', 'e', 0xcc, 0x81, ' ', 0xcc, 0x81}, 9},
        {TOKENIZER_SPLIT_LLAMA3, "cafe\xcc\x81 \xcc\x81", {'c', 'a', 'f', 'e', 0xcc, 0x81, ' ', 0xcc, 0x81}, 9},
        {TOKENIZER_SPLIT_QWEN2, "cafe\xcc\x81 \xcc\x81", {'c', 'a', 'f', 0xc3, 0xa9, ' ', 0xcc, 0x81}, 8},
    };
    expect_split_cases(extra, 7, cases, sizeof cases / sizeof cases[0]);
}

/* Sentencepiece's BPE: ids 0..255 are the byte-fallback tokens <0x00>..<0xFF>, then pieces. The
 * merges start from characters, not bytes (from bytes, "yx" would merge before "é" formed, giving
 * 257 260); a character's own piece is taken over its byte's fallback token; a character without
 * a piece becomes its bytes' fallback tokens; the space before the text follows the split; and a
 * typed ▁ (U+2581, "\xe2\x96\x81") is the space it stands for, there too. */
static void test_sentencepiece(void)
{
    const char *extra[] = {"x\xc3\xa9", "yx", "y", "x", "\xc3\xa9", " ", " y"};
    static const split_case cases[] = {
        {TOKENIZER_SPLIT_SENTENCEPIECE_BARE, "yx\xc3\xa9", {258, 256}, 2},
        {TOKENIZER_SPLIT_SENTENCEPIECE_BARE, "yz\xc3\xa8", {258, 'z', 0xc3, 0xa8}, 4},
        {TOKENIZER_SPLIT_SENTENCEPIECE, "y", {262}, 1},                      /* " y" */
        {TOKENIZER_SPLIT_SENTENCEPIECE, "yx", {261, 257}, 2},                /* " " "yx": 257 before 262 */
        {TOKENIZER_SPLIT_SENTENCEPIECE, " yx", {261, 257}, 2},               /* it begins with a space */
        {TOKENIZER_SPLIT_SENTENCEPIECE_PREFIXED, " yx", {261, 261, 257}, 3}, /* a space before it all the same */
        {TOKENIZER_SPLIT_SENTENCEPIECE_PREFIXED, "x yx", {261, 259, 261, 257}, 4},
        {TOKENIZER_SPLIT_SENTENCEPIECE_BARE, "y\xe2\x96\x81y", {258, 262}, 2},          /* "y" " y" */
        {TOKENIZER_SPLIT_SENTENCEPIECE, "\xe2\x96\x81yx", {261, 257}, 2},             /* as " yx" */
        {TOKENIZER_SPLIT_SENTENCEPIECE_PREFIXED, "\xe2\x96\x81", {261, 261}, 2},       /* as " " */
        {TOKENIZER_SPLIT_SENTENCEPIECE_BARE, "\xe2\x96\x81\xe2\x96\x81y", {261, 262}, 2},
    };
    expect_split_cases(extra, 7, cases, sizeof cases / sizeof cases[0]);
    /* no fallback block: a character without a piece is refused, at its offset in the caller's text */
    tokenizer t;
    if (make_tokenizer("sp-nofallback.bin", extra, 7, -1, TOKENIZER_SPLIT_SENTENCEPIECE, &t))
        return;
    tokenizer_encoder *e = NULL;
    ddp_err err = {0};
    CHECK(tokenizer_encoder_create(&t, &e, &err) == DDP_OK, "%s", err.msg);
    expect_ids(e, "yx", 2, IDS(5, 1));
    expect_refused(e, "yxz", 3, "U+007A at byte offset 2 has no token in the tokenizer's vocabulary, which has no "
                   "byte fallback");
    expect_refused(e, "yx\xff", 3, "invalid UTF-8 at byte offset 2"); /* the prefix not counted */
    /* ... nor a ▁'s read as a space: the offset and the character are the caller's */
    expect_refused(e, "\xe2\x96\x81yxz", 6, "U+007A at byte offset 5 has no token");
    expect_refused(e, "y\xe2\x96\x81\xff", 5, "invalid UTF-8 at byte offset 4");
    tokenizer_encoder_free(e);
    tokenizer_free(&t);
    /* ... and without a piece for the space put first, that space is named (it has no offset) */
    if (make_tokenizer("sp-nospace.bin", extra, 5, -1, TOKENIZER_SPLIT_SENTENCEPIECE, &t))
        return;
    CHECK(tokenizer_encoder_create(&t, &e, &err) == DDP_OK, "%s", err.msg);
    expect_refused(e, "yx", 2, "the space put before the text has no token");
    tokenizer_encoder_free(e);
    tokenizer_free(&t);
}

/* The merge as tiktoken's _byte_pair_merge writes it, scanning for the lowest id each time: the
 * referee of the encoder's heap. Appends the ids of piece p[0..n) to ids. */
static int32_t find_token(const char *const *tokens, int n_tokens, const char *p, size_t n)
{
    for (int i = 0; i < n_tokens; i++)
        if (strlen(tokens[i]) == n && !memcmp(tokens[i], p, n))
            return 256 + i;
    return n == 1 ? (uint8_t)p[0] : -1;
}

static void reference_merge(const char *const *tokens, int n_tokens, const char *p, size_t n, int32_t *ids,
                            int64_t *count)
{
    size_t start[128], parts = n;
    for (size_t k = 0; k <= n; k++)
        start[k] = k;
    for (;;) {
        size_t best = 0;
        int32_t best_id = -1;
        for (size_t k = 0; k + 1 < parts; k++) {
            int32_t id = find_token(tokens, n_tokens, p + start[k], start[k + 2] - start[k]);
            if (id >= 0 && (best_id < 0 || id < best_id))
                best = k, best_id = id;
        }
        if (best_id < 0)
            break;
        memmove(start + best + 1, start + best + 2, (parts - best - 1) * sizeof *start);
        parts--;
    }
    for (size_t k = 0; k < parts; k++)
        ids[(*count)++] = find_token(tokens, n_tokens, p + start[k], start[k + 1] - start[k]);
}

/* Random vocabularies over "ab" and random words, against the scanning merge; then one piece of
 * 200,000 letters, which the scan would take 10^10 steps over: "a" * 2^k are the tokens, so it is
 * 1562 tokens of 128 a's, then one of 64. */
static void test_merge_heap(void)
{
    static char pool[40][8];
    const char *tokens[40];
    unsigned seed = 12345;
    for (int round = 0; round < 200; round++) {
        int n_tokens = 0;
        for (int i = 0; i < 40; i++) {
            size_t len = 2 + (seed = seed * 1103515245u + 12345u) % 5;
            for (size_t j = 0; j < len; j++)
                pool[i][j] = "ab"[(seed = seed * 1103515245u + 12345u) >> 16 & 1];
            pool[i][len] = '\0';
            if (find_token(tokens, n_tokens, pool[i], len) < 0) /* the lower id of a duplicate wins anyway */
                tokens[n_tokens++] = pool[i];
        }
        char word[100];
        size_t len = 1 + (seed = seed * 1103515245u + 12345u) % 99;
        for (size_t j = 0; j < len; j++)
            word[j] = "ab"[(seed = seed * 1103515245u + 12345u) >> 16 & 1];
        word[len] = '\0';
        int32_t want[100];
        int64_t n_want = 0;
        int32_t whole = find_token(tokens, n_tokens, word, len);
        if (whole >= 0)
            want[n_want++] = whole;
        else
            reference_merge(tokens, n_tokens, word, len, want, &n_want);
        tokenizer t;
        if (make_bpe("heap.bin", tokens, n_tokens, -1, TOKENIZER_SPLIT_GPT2, &t))
            return;
        tokenizer_encoder *e = NULL;
        ddp_err err = {0};
        CHECK(tokenizer_encoder_create(&t, &e, &err) == DDP_OK, "%s", err.msg);
        expect_ids(e, word, len, want, n_want);
        tokenizer_encoder_free(e);
        tokenizer_free(&t);
    }
    static char powers[7][129];
    const char *extra[7];
    for (int k = 0; k < 7; k++) { /* "aa" .. "a" * 128, ids 256 .. 262 (a token holds at most 255 bytes) */
        memset(powers[k], 'a', (size_t)2 << k);
        powers[k][(size_t)2 << k] = '\0';
        extra[k] = powers[k];
    }
    tokenizer t;
    if (make_bpe("long.bin", extra, 7, -1, TOKENIZER_SPLIT_GPT2, &t))
        return;
    tokenizer_encoder *e = NULL;
    ddp_err err = {0};
    CHECK(tokenizer_encoder_create(&t, &e, &err) == DDP_OK, "%s", err.msg);
    size_t len = 200000;
    char *text = malloc(len);
    static int32_t want[1563];
    for (int i = 0; i < 1562; i++)
        want[i] = 262; /* a * 128 */
    want[1562] = 261;  /* a * 64: 200,000 is 1562 * 128 + 64 */
    if (text) {
        memset(text, 'a', len);
        expect_ids(e, text, len, want, 1563);
    }
    free(text);
    tokenizer_encoder_free(e);
    tokenizer_free(&t);
}

/* Llama 3's and Qwen2's regexes (expected pieces from Python's `regex` module with the patterns in
 * tokenizer_encode.h): case-blind contractions (U+017F LONG S folds to 's'), a letter run's one-symbol
 * prefix, digits in threes or one by one, a symbol run with the line breaks after it, white space up
 * to its last line break. A file that states no split, or another one, is split as GPT-2's. */
static void test_llama3_split(void)
{
    expect_split(TOKENIZER_SPLIT_LLAMA3, "I'm  here,   don't!",
                 "I|'m| | here|,|  | don|'t|!");
    expect_split(TOKENIZER_SPLIT_LLAMA3, "'S 'Ll 'vE 're 'D 'x '\xc5\xbfx",
                 "'S| '|Ll| '|vE| '|re| '|D| '|x| '|\xc5\xbfx");
    expect_split(TOKENIZER_SPLIT_LLAMA3, "!word  ?x",
                 "!word| | ?|x");
    expect_split(TOKENIZER_SPLIT_LLAMA3, "12345 678\t9",
                 "123|45| |678|\t|9");
    expect_split(TOKENIZER_SPLIT_LLAMA3, "a\r\n\r\nb",
                 "a|\r\n\r\n|b");
    expect_split(TOKENIZER_SPLIT_LLAMA3, "x \n  y",
                 "x| \n| | y");
    expect_split(TOKENIZER_SPLIT_LLAMA3, "end.\n\nNext",
                 "end|.\n\n|Next");
    expect_split(TOKENIZER_SPLIT_LLAMA3, "  \tword\t",
                 "  |\tword|\t");
    expect_split(TOKENIZER_SPLIT_LLAMA3, " 123",
                 " |123");
    expect_split(TOKENIZER_SPLIT_LLAMA3,
                 "caf\xc3\xa9\xe2\x80\x94\xe2\x80\x9cq\xe2\x80\x9d \xe2\x85\xa5\xe2\x85\xa6 "
                 "\xd9\xa1\xd9\xa2\xd9\xa3\xd9\xa4",
                 "caf\xc3\xa9|\xe2\x80\x94\xe2\x80\x9c|q|\xe2\x80\x9d| |\xe2\x85\xa5\xe2\x85\xa6| "
                 "|\xd9\xa1\xd9\xa2\xd9\xa3|\xd9\xa4");
    expect_split(TOKENIZER_SPLIT_LLAMA3, "a\xc2\xa0" "b\xe3\x80\x80\n c",
                 "a|\xc2\xa0" "b|\xe3\x80\x80\n| c");
    expect_split(TOKENIZER_SPLIT_LLAMA3, "e\xcc\x81t\xc3\xa9",
                 "e|\xcc\x81t\xc3\xa9");
    expect_split(TOKENIZER_SPLIT_QWEN2, "12345 678\t9",
                 "1|2|3|4|5| |6|7|8|\t|9");
    expect_split(TOKENIZER_SPLIT_QWEN2, " 123",
                 " |1|2|3");
    expect_split(TOKENIZER_SPLIT_QWEN2, "\xe2\x85\xa5\xe2\x85\xa6 \xd9\xa1\xd9\xa2x",
                 "\xe2\x85\xa5|\xe2\x85\xa6| |\xd9\xa1|\xd9\xa2|x");
    expect_split(TOKENIZER_SPLIT_QWEN2, "'LL 'x!y",
                 "'LL| '|x|!y");
    expect_split(TOKENIZER_SPLIT_LLAMA3, "'\xc5\xbfx", "'\xc5\xbf|x");
    expect_split(TOKENIZER_SPLIT_LLAMA3, "x'Ll'Dy", "x|'Ll|'D|y");
    expect_split(TOKENIZER_SPLIT_UNSTATED, "!word 12345", "!|word| 12345");
    expect_split(TOKENIZER_SPLIT_OTHER, "!word 12345", "!|word| 12345");
}

int main(void)
{
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    test_merges();
    test_bytes_and_missing();
    test_gpt2_split();
    test_llama3_split();
    test_split_from_file();
    test_sentencepiece();
    test_merge_heap();
    rmdir(dir);
    return check_done("test_tokenizer_encode");
}
