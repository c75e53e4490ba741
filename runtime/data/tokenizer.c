/* tokenizer.c — loading and validating llm.c's tokenizer.bin; decoding ids to bytes.
 *
 * Owns the format checks (header, vocabulary range, end-of-text id, every entry's length byte, the
 * file's exact size) and the id -> bytes table. The file is read whole into memory (GPT-2's is half a
 * megabyte) and indexed once, so lookups are O(1). Header fields are decoded explicitly little-endian.
 * It must not print or encode text. */
#include "tokenizer.h"
#include "runtime/base/open_input.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* U+FFFD REPLACEMENT CHARACTER, for ids the vocabulary does not have */
static const char REPLACEMENT[] = "\xEF\xBF\xBD";

static int32_t le32(const uint8_t *p)
{
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
}

static int check_header(const char *path, const uint8_t *h, long long size, tokenizer *t, ddp_err *err)
{
    int32_t magic = le32(h), version = le32(h + 4), vocab = le32(h + 8), eot = le32(h + 12), split = le32(h + 16);
    if (magic != TOKENIZER_MAGIC)
        return ddp_fail(err, DDP_EUSAGE, "%s: bad magic %d, expected %d (an llm.c tokenizer.bin)", path,
                        magic, TOKENIZER_MAGIC);
    if (version != TOKENIZER_VERSION)
        return ddp_fail(err, DDP_EUSAGE, "%s: unsupported tokenizer version %d, expected %d", path,
                        version, TOKENIZER_VERSION);
    if (vocab < 1 || vocab > TOKENIZER_MAX_VOCAB)
        return ddp_fail(err, DDP_EUSAGE, "%s: vocabulary size %d is outside 1..%d", path, vocab,
                        TOKENIZER_MAX_VOCAB);
    if (eot < -1 || eot >= vocab)
        return ddp_fail(err, DDP_EUSAGE, "%s: end-of-text id %d is outside -1..%d", path, eot, vocab - 1);
    if (split < 0 || split >= TOKENIZER_SPLIT_KINDS)
        return ddp_fail(err, DDP_EUSAGE, "%s: pre-tokenizer %d (header int32 4) is not one of 0..%d that this "
                        "ddprun knows (a newer scripts/prepare-text's file?)", path, split, TOKENIZER_SPLIT_KINDS - 1);
    int32_t has = le32(h + 28);
    if (has != 0 && has != 1)
        return ddp_fail(err, DDP_EUSAGE, "%s: header int32 7 is %d: 1 says a vocabulary fingerprint precedes it, 0 "
                        "none", path, has);
    t->has_fingerprint = has == 1;
    t->fingerprint = (uint64_t)(uint32_t)le32(h + 20) | (uint64_t)(uint32_t)le32(h + 24) << 32;
    /* bounds the allocation below by what vocab entries can take, so a huge file fails here */
    long long most = TOKENIZER_HEADER_BYTES + (long long)vocab * (1 + TOKENIZER_MAX_TOKEN_BYTES);
    if (size > most)
        return ddp_fail(err, DDP_EUSAGE, "%s: %lld bytes is more than %d tokens can take (at most %lld): "
                        "trailing data", path, size, vocab, most);
    t->vocab_size = vocab;
    t->eot = eot;
    t->split = (tokenizer_split)split;
    return DDP_OK;
}

/* Walks the entries once, recording where each starts; byte positions in messages are file offsets. */
static int index_entries(const char *path, tokenizer *t, size_t len, ddp_err *err)
{
    size_t pos = 0;
    for (int32_t id = 0; id < t->vocab_size; id++) {
        long long at = TOKENIZER_HEADER_BYTES + (long long)pos;
        if (pos >= len)
            return ddp_fail(err, DDP_EUSAGE, "%s: truncated: the file ends at byte %lld, before the entry "
                            "of token %d of %d", path, at, id, t->vocab_size);
        unsigned n = t->entries[pos];
        if (n == 0)
            return ddp_fail(err, DDP_EUSAGE, "%s: token %d has length 0 (byte %lld); every token has at "
                            "least 1 byte", path, id, at);
        if (len - pos - 1 < n)
            return ddp_fail(err, DDP_EUSAGE, "%s: truncated: token %d needs %u bytes after byte %lld but "
                            "the file ends at byte %lld", path, id, n, at,
                            TOKENIZER_HEADER_BYTES + (long long)len);
        t->offset[id] = (uint32_t)pos;
        pos += 1 + n;
    }
    if (pos != len)
        return ddp_fail(err, DDP_EUSAGE, "%s: %zu trailing bytes after the %d tokens the header declares",
                        path, len - pos, t->vocab_size);
    return DDP_OK;
}

static int read_exact(FILE *f, const char *path, void *buf, size_t len, const char *what, ddp_err *err)
{
    size_t got = fread(buf, 1, len, f);
    if (got == len)
        return DDP_OK;
    if (ferror(f))
        return ddp_fail(err, DDP_ERUNTIME, "%s: read error in %s: %s", path, what, strerror(errno));
    /* the file shrank between fstat and here */
    return ddp_fail(err, DDP_EUSAGE, "%s: truncated: %s needs %zu bytes, only %zu present", path, what,
                    len, got);
}

/* Everything after the header: read, then indexed. */
static int load_entries(FILE *f, const char *path, size_t len, tokenizer *t, ddp_err *err)
{
    t->entries = malloc(len ? len : 1);
    t->offset = malloc((size_t)t->vocab_size * sizeof *t->offset);
    if (!t->entries || !t->offset)
        return ddp_fail(err, DDP_ERUNTIME, "%s: cannot allocate %zu bytes for %d tokens", path, len,
                        t->vocab_size);
    int rc = read_exact(f, path, t->entries, len, "the token table", err);
    return rc ? rc : index_entries(path, t, len, err);
}

static int load_file(FILE *f, const char *path, tokenizer *t, ddp_err *err)
{
    struct stat st;
    if (fstat(fileno(f), &st) != 0)
        return ddp_fail(err, DDP_ERUNTIME, "%s: cannot stat: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return ddp_fail(err, DDP_EUSAGE, "%s: not a regular file", path);
    if (st.st_size < TOKENIZER_HEADER_BYTES)
        return ddp_fail(err, DDP_EUSAGE, "%s: %lld bytes is too short for the %d-byte tokenizer header",
                        path, (long long)st.st_size, TOKENIZER_HEADER_BYTES);
    uint8_t header[TOKENIZER_HEADER_BYTES];
    int rc = read_exact(f, path, header, sizeof header, "the header", err);
    if (!rc)
        rc = check_header(path, header, (long long)st.st_size, t, err);
    if (!rc)
        rc = load_entries(f, path, (size_t)st.st_size - TOKENIZER_HEADER_BYTES, t, err);
    return rc;
}

int tokenizer_load(const char *path, tokenizer *out, ddp_err *err)
{
    memset(out, 0, sizeof *out);
    FILE *f;
    if (fopen_input(path, &f, err) != DDP_OK)
        return ddp_prefix(err, "the tokenizer (scripts/prepare-text makes it)");
    int rc = load_file(f, path, out, err);
    fclose(f);
    if (rc)
        tokenizer_free(out);
    return rc;
}

const char *tokenizer_split_name(tokenizer_split s)
{
    static const char *const names[TOKENIZER_SPLIT_KINDS] = {"unstated", "gpt2", "llama3", "qwen2", "other",
                                                             "sentencepiece", "sentencepiece-bare",
                                                             "sentencepiece-prefixed"};
    return (unsigned)s < TOKENIZER_SPLIT_KINDS ? names[s] : "?";
}

void tokenizer_free(tokenizer *t)
{
    if (!t)
        return;
    free(t->entries);
    free(t->offset);
    memset(t, 0, sizeof *t);
}

const uint8_t *tokenizer_bytes(const tokenizer *t, int32_t id, size_t *len)
{
    if (id < 0 || id >= t->vocab_size) {
        *len = 0;
        return NULL;
    }
    const uint8_t *entry = t->entries + t->offset[id];
    *len = entry[0];
    return entry + 1;
}

int32_t tokenizer_context_start(const tokenizer *t)
{
    if (t->eot >= 0)
        return t->eot;
    for (int32_t id = 0; id < t->vocab_size; id++) {
        size_t len;
        const uint8_t *b = tokenizer_bytes(t, id, &len);
        if (len == 1 && b[0] == '\n')
            return id;
    }
    return 0;
}

int64_t tokenizer_decode(const tokenizer *t, const int32_t *ids, int64_t n, char *out, size_t cap,
                         size_t *written)
{
    size_t used = 0;
    int64_t i = 0;
    for (; cap > 0 && i < n; i++) {
        size_t len;
        const uint8_t *bytes = tokenizer_bytes(t, ids[i], &len);
        if (!bytes)
            bytes = (const uint8_t *)REPLACEMENT, len = sizeof REPLACEMENT - 1;
        if (len > cap - 1 - used) /* keep room for the NUL */
            break;
        memcpy(out + used, bytes, len);
        used += len;
    }
    if (cap > 0)
        out[used] = '\0';
    if (written)
        *written = used;
    return i;
}
