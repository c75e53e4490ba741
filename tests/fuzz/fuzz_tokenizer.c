/* fuzz_tokenizer.c — libFuzzer target for the tokenizer table reader (tokenizer_load, then
 * tokenizer_bytes and tokenizer_decode; runtime/data/tokenizer.h) and the encoder built on the
 * table (runtime/data/tokenizer_encode.h).
 *
 * The input is the tokenizer.bin file. A table that loads must give every id bytes of length >= 1
 * and none outside it; decoding every id in small and large buffers must make progress as the
 * header promises; and text the encoder accepts must decode back to itself (to its NFC form
 * under Qwen2's split, which normalizes first; under sentencepiece's splits with each typed U+2581
 * a space and a space before it where the split puts one). The harness aborts
 * when any of that fails. The texts encoded are a fixed sample plus the first tokens' bytes glued
 * together (so they often are the table's own tokens). Must not print. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/data/tokenizer.h"
#include "runtime/data/tokenizer_encode.h"
#include "runtime/data/unicode_nfc.h"
#include "tests/fuzz/fuzz_util.h"

#define INPUT_MAX_BYTES (256 * 1024)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Decodes ids[0..n) through buffers of cap bytes and appends the text to out (out_cap bytes). */
static size_t decode_all(const tokenizer *t, const int32_t *ids, int64_t n, size_t cap, char *out, size_t out_cap)
{
    char *buf = malloc(cap);
    size_t total = 0;
    if (!buf)
        abort();
    for (int64_t done = 0; done < n;) {
        size_t written = 0;
        int64_t k = tokenizer_decode(t, ids + done, n - done, buf, cap, &written);
        if (k < 0 || k > n - done || written >= cap || buf[written] != '\0' ||
            (k == 0 && cap > TOKENIZER_MAX_TOKEN_BYTES))
            abort();
        if (k == 0)
            break; /* a small buffer may not hold the next token: the caller's business */
        if (out && total + written <= out_cap)
            memcpy(out + total, buf, written);
        total += written;
        done += k;
    }
    free(buf);
    return total;
}

static bool is_sentencepiece(tokenizer_split split)
{
    return split == TOKENIZER_SPLIT_SENTENCEPIECE || split == TOKENIZER_SPLIT_SENTENCEPIECE_BARE ||
           split == TOKENIZER_SPLIT_SENTENCEPIECE_PREFIXED;
}

/* The text sentencepiece's ids spell: text[0..len) with each U+2581 a space, after the space its
 * split puts before it (malloc'd into *out, *out_len). */
static void sentencepiece_spelling(tokenizer_split split, const char *text, size_t len, char **out, size_t *out_len)
{
    static const char meta[] = "\xe2\x96\x81";
    bool lead_meta = len >= 3 && !memcmp(text, meta, 3);
    bool space_before = split == TOKENIZER_SPLIT_SENTENCEPIECE_PREFIXED ||
                        (split == TOKENIZER_SPLIT_SENTENCEPIECE && text[0] != ' ' && !lead_meta);
    char *s = malloc(len + 1);
    if (!s)
        abort();
    size_t n = 0;
    if (space_before)
        s[n++] = ' ';
    for (size_t i = 0; i < len;) {
        bool is_meta = len - i >= 3 && !memcmp(text + i, meta, 3);
        s[n++] = is_meta ? ' ' : text[i];
        i += is_meta ? 3 : 1;
    }
    *out = s;
    *out_len = n;
}

static void encode_roundtrip(const tokenizer *t, const tokenizer_encoder *e, const char *text, size_t len)
{
    int32_t *ids = NULL;
    int64_t n = 0;
    ddp_err err = {0};
    if (tokenizer_encode(e, text, len, &ids, &n, &err) != DDP_OK) {
        if (ids)
            abort(); /* nothing is returned on error */
        return;
    }
    char *normal = NULL; /* the text the ids spell: NFC's when the split normalizes, sentencepiece's spelling */
    size_t normal_len = 0;
    if (t->split == TOKENIZER_SPLIT_QWEN2 && unicode_nfc(text, len, &normal, &normal_len, &err) != DDP_OK)
        abort(); /* the encoder took the text, so it is valid UTF-8 */
    if (is_sentencepiece(t->split))
        sentencepiece_spelling(t->split, text, len, &normal, &normal_len);
    const char *spelt = normal ? normal : text;
    size_t want = normal ? normal_len : len;
    char *back = malloc(want + 1);
    if (!back || n < 0 || (size_t)n > want)
        abort();
    size_t got = decode_all(t, ids, n, 512, back, want);
    if (got != want || memcmp(back, spelt, want) != 0)
        abort();
    free(back);
    free(normal);
    free(ids);
}

static void exercise(const tokenizer *t)
{
    if (t->vocab_size < 1 || t->eot < -1 || t->eot >= t->vocab_size)
        abort();
    int32_t *ids = malloc(((size_t)t->vocab_size + 2) * sizeof *ids);
    if (!ids)
        abort();
    size_t len;
    for (int32_t id = -1; id <= t->vocab_size; id++) {
        const uint8_t *b = tokenizer_bytes(t, id, &len);
        bool inside = id >= 0 && id < t->vocab_size;
        if (inside != (b != NULL) || (inside && len < 1) || (!inside && len != 0))
            abort();
        ids[id + 1] = id;
    }
    decode_all(t, ids, (int64_t)t->vocab_size + 2, 8, NULL, 0);
    decode_all(t, ids, (int64_t)t->vocab_size + 2, TOKENIZER_MAX_TOKEN_BYTES + 2, NULL, 0);
    free(ids);

    tokenizer_encoder *e;
    ddp_err err = {0};
    if (tokenizer_encoder_create(t, &e, &err) != DDP_OK)
        abort();
    /* ... with a decomposed e + acute and U+0958, which NFC turns into two code points, and a typed
     * U+2581, a space to sentencepiece */
    static const char sample[] =
        "Hello world, it's 12 o'clock!\n\tCaf\xc3\xa9  \xe4\xb8\xad   ok e\xcc\x81 \xe0\xa5\x98 \xe2\x96\x81x";
    encode_roundtrip(t, e, sample, sizeof sample - 1);
    char glued[1024];
    size_t used = 0;
    for (int32_t id = 0; id < t->vocab_size && id < 64; id++) {
        const uint8_t *b = tokenizer_bytes(t, id, &len);
        if (used + len > sizeof glued)
            break;
        memcpy(glued + used, b, len);
        used += len;
    }
    encode_roundtrip(t, e, glued, used);
    tokenizer_encoder_free(e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > INPUT_MAX_BYTES)
        return 0;
    char path[512];
    fuzz_path(path, sizeof path, "tokenizer.bin");
    fuzz_write_file(path, data, size);
    tokenizer t;
    ddp_err err = {0};
    if (tokenizer_load(path, &t, &err) == DDP_OK)
        exercise(&t);
    else if (t.vocab_size || t.entries || t.offset)
        abort(); /* a failed load must leave *out zeroed */
    tokenizer_free(&t);
    return 0;
}
