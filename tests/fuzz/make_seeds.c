/* make_seeds.c — writes the binary part of the committed seed corpus (corpus/ckpt, corpus/idx,
 * corpus/token_shards, corpus/tokenizer, corpus/safetensors, corpus/doc_packing, corpus/hf_folder,
 * corpus/ckpt_set) in the harnesses' input layouts: small valid files, each made by the project's
 * own writer where it has one (checkpoints: ckpt_write_atomic; Hugging Face folders: gpt2_hf_write,
 * llama_hf_write) and by the format's documentation otherwise, plus a few near misses. The text
 * seeds (config, bench_args) are written by hand. Run as
 * `build-fuzz/tests/fuzz/fuzz_make_seeds tests/fuzz/corpus SCRATCH` after
 * `meson compile -C build-fuzz fuzz_make_seeds` (not built by default); it only writes into the
 * folders it is given (checkpoints and folders go through SCRATCH) and must not be part of any test. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "models/gpt2_hf.h"
#include "models/llama_hf.h"
#include "models/mistral.h"
#include "models/qwen3.h"
#include "models/qwen2.h"
#include "runtime/ckpt/ckpt.h"
#include "runtime/data/doc_packing.h"
#include "runtime/data/token_shards.h"
#include "runtime/data/tokenizer.h"

static const char *out_dir;

static void put(const char *target, const char *name, const void *a, size_t an, const void *b, size_t bn)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s/%s", out_dir, target, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(a, 1, an, f) != an || (bn && fwrite(b, 1, bn, f) != bn) || fclose(f)) {
        perror(path);
        exit(1);
    }
}

static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f || fseek(f, 0, SEEK_END))
        exit(1);
    *n = (size_t)ftell(f);
    rewind(f);
    uint8_t *p = malloc(*n);
    if (!p || fread(p, 1, *n, f) != *n)
        exit(1);
    fclose(f);
    return p;
}

static void le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static void be32(uint8_t *p, uint32_t v) { p[0] = v >> 24, p[1] = v >> 16 & 255, p[2] = v >> 8 & 255, p[3] = v & 255; }

/* ---- checkpoints: flags byte + file ---- */

static void ckpt_seeds(const char *scratch)
{
    float w[6] = {1, -2, 3.5f, 0, 1e-3f, 7};
    int64_t steps[1] = {42};
    uint16_t half[3] = {0x3f80, 0xbf80, 0};
    ckpt_tensor t[3] = {
        {.name = "param/fc1.weight", .dtype = CKPT_F32, .ndim = 2, .shape = {2, 3}, .data = w},
        {.name = "optim/step", .dtype = CKPT_I64, .ndim = 0, .data = steps},
        {.name = "param/bias", .dtype = CKPT_BF16, .ndim = 1, .shape = {3}, .data = half},
    };
    ckpt_state s = {.hdr = {.step = 7, .epoch = 1, .consumed = 640, .total_steps = 100, .optim_step = 7,
                            .world_size = 2, .config_hash = 0x1234abcd, .save_time = 1.7e9, .elapsed_s = 12.5,
                            .model = "mlp hidden=[3] activation=relu", .n_rng = 1},
                    .n_tensors = 3, .tensors = t};
    snprintf(s.hdr.rng[0].name, CKPT_NAME_MAX, "sampler");
    s.hdr.rng[0].state = (rng){{1, 2, 3, 4}};
    char path[CKPT_PATH_MAX];
    ddp_err err = {0};
    if (ckpt_write_atomic(scratch, &s, path, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
    size_t n;
    uint8_t *f = slurp(path, &n);
    uint8_t flags = 0;
    put("ckpt", "valid", &flags, 1, f, n);
    flags = 1; /* harness repairs the preamble: a table edit still reaches the table checks */
    put("ckpt", "valid-repair", &flags, 1, f, n);
    flags = 3;
    f[n - 1] ^= 0x55; /* tensor CRC mismatch, read leniently */
    put("ckpt", "bad-tensor-crc-lenient", &flags, 1, f, n);
    flags = 1;
    put("ckpt", "truncated", &flags, 1, f, n - 7);
    free(f);
    s.n_tensors = 0;
    s.hdr.n_rng = 0;
    s.hdr.step = 8;
    if (ckpt_write_atomic(scratch, &s, path, &err))
        exit(1);
    f = slurp(path, &n);
    flags = 0;
    put("ckpt", "empty", &flags, 1, f, n);
    free(f);
}

/* ---- IDX: flags, labels length (u16 LE), labels file, images file ---- */

static uint8_t *gzip_bytes(const uint8_t *p, size_t n, size_t *out_n)
{
    uLongf cap = compressBound(n) + 64;
    uint8_t *out = malloc(cap);
    z_stream z = {0};
    if (!out || deflateInit2(&z, 6, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        exit(1);
    z.next_in = (Bytef *)p, z.avail_in = (uInt)n, z.next_out = out, z.avail_out = (uInt)cap;
    if (deflate(&z, Z_FINISH) != Z_STREAM_END)
        exit(1);
    *out_n = z.total_out;
    deflateEnd(&z);
    return out;
}

static void idx_seed(const char *name, uint8_t flags, int count, int label_bad, int side)
{
    uint8_t labels[8 + 8], images[16 + 8 * 28 * 28];
    be32(labels, 0x801), be32(labels + 4, (uint32_t)count);
    be32(images, 0x803), be32(images + 4, (uint32_t)count), be32(images + 8, (uint32_t)side);
    be32(images + 12, 28);
    for (int i = 0; i < count; i++)
        labels[8 + i] = (uint8_t)(label_bad && i == count - 1 ? 10 : (i * 3) % 10);
    for (int i = 0; i < count * 28 * 28; i++)
        images[16 + i] = (uint8_t)(i * 7);
    size_t ln = 8 + (size_t)count, in = 16 + (size_t)count * 28 * 28;
    uint8_t *lp = labels, *ip = images, *lz = NULL, *iz = NULL;
    if (!(flags & 1)) /* the harness writes these bytes as they are: give it real gzip */
        lp = lz = gzip_bytes(labels, ln, &ln);
    if (!(flags & 2))
        ip = iz = gzip_bytes(images, in, &in);
    uint8_t *buf = malloc(3 + ln + in);
    buf[0] = flags, buf[1] = (uint8_t)ln, buf[2] = (uint8_t)(ln >> 8);
    memcpy(buf + 3, lp, ln);
    memcpy(buf + 3 + ln, ip, in);
    put("idx", name, buf, 3 + ln + in, NULL, 0);
    free(buf), free(lz), free(iz);
}

/* ---- token shards: flags, T - 1, vocab (u16 LE), shards separated by @@SHARD@@ ---- */

/* A shard of uint16 tokens (width 2) or uint32 tokens (width 4, ids past 65535 among them). */
static size_t shard(uint8_t *p, int ntok, int width, int version, int start)
{
    memset(p, 0, TOKEN_SHARD_HEADER_BYTES);
    le(p, width == 2 ? TOKEN_SHARD_MAGIC_U16 : TOKEN_SHARD_MAGIC_U32, 4);
    le(p + 4, (uint64_t)version, 4), le(p + 8, (uint64_t)ntok, 4);
    for (int i = 0; i < ntok; i++) {
        uint64_t id = (uint64_t)((start + i * 37) % 256) + (width == 4 ? 65536u * (uint64_t)(i % 3) : 0);
        le(p + TOKEN_SHARD_HEADER_BYTES + (size_t)width * (size_t)i, id, width);
    }
    return TOKEN_SHARD_HEADER_BYTES + (size_t)width * (size_t)ntok;
}

/* widths: each shard's token width in turn (2 or 4); version 0 is the width's own. */
static void shards_seed(const char *name, uint8_t flags, int T, int vocab, int nshards, const int *widths,
                        int version)
{
    static uint8_t buf[4 + 4 * (TOKEN_SHARD_HEADER_BYTES + 4 * 25 + 9)];
    size_t n = 4;
    buf[0] = flags, buf[1] = (uint8_t)(T - 1), buf[2] = (uint8_t)vocab, buf[3] = (uint8_t)(vocab >> 8);
    for (int k = 0; k < nshards; k++) {
        if (k)
            memcpy(buf + n, "@@SHARD@@", 9), n += 9;
        int own = widths[k] == 2 ? TOKEN_SHARD_VERSION_U16 : TOKEN_SHARD_VERSION_U32;
        n += shard(buf + n, 10 + 5 * k, widths[k], version ? version : own, k);
    }
    put("token_shards", name, buf, n, NULL, 0);
}

/* ---- fine-tuning data: flags, T - 1 (u16 LE), then .bin, .mask, .docs per shard ---- */

/* One shard's three parts after a separator (none before the first): with `header`, the bodies
 * alone (the harness writes the headers), else whole files. Tokens count up from `first`; the mask
 * marks every third token but the first of each document, plus `bad_mask` at token 2 when set; the
 * documents' lengths are `docs`. */
static size_t packing_shard(uint8_t *p, bool header, int first, int ntokens, const int *docs, int ndocs,
                            uint8_t bad_mask, bool separator)
{
    size_t n = 0, head = header ? 0 : TOKEN_SHARD_HEADER_BYTES;
    const uint32_t magic[3] = {TOKEN_SHARD_MAGIC_U16, DOC_MASK_MAGIC, DOC_LENGTHS_MAGIC};
    const uint32_t version[3] = {TOKEN_SHARD_VERSION_U16, DOC_MASK_VERSION, DOC_LENGTHS_VERSION};
    const uint32_t count[3] = {(uint32_t)ntokens, (uint32_t)ntokens, (uint32_t)ndocs};
    for (int part = 0; part < 3; part++) {
        if (separator || part)
            memcpy(p + n, "@@PART@@", 8), n += 8;
        if (head) {
            memset(p + n, 0, head);
            le(p + n, magic[part], 4), le(p + n + 4, version[part], 4), le(p + n + 8, count[part], 4);
            n += head;
        }
        for (int i = 0, doc = 0, left = docs[0]; part < 2 && i < ntokens; i++, left--) {
            if (left == 0)
                left = docs[++doc];
            if (part == 0)
                le(p + n, (uint64_t)(first + i), 2), n += 2;
            else
                p[n++] = i == 2 && bad_mask ? bad_mask : left != docs[doc] && i % 3 != 0;
        }
        for (int d = 0; part == 2 && d < ndocs; d++)
            le(p + n, (uint64_t)docs[d], 4), n += 4;
    }
    return n;
}

static void packing_seeds(void)
{
    static uint8_t buf[3 + 2 * 3 * (TOKEN_SHARD_HEADER_BYTES + 8 + 4 * 64)];
    static const int docs_a[3] = {5, 12, 3}, docs_b[1] = {10}, long_doc[1] = {11}, overrun[2] = {15, 6};
    struct {
        const char *name;
        uint8_t flags;
        int T, ntokens[2];
        const int *docs[2];
        int ndocs[2];
        uint8_t bad_mask;
    } seeds[] = {
        {"two-shards-repair", 1, 8, {20, 10}, {docs_a, docs_b}, {3, 1}, 0},
        {"long-document", 1, 4, {11, 0}, {long_doc, NULL}, {1, 0}, 0},
        {"whole-files", 0, 8, {20, 10}, {docs_a, docs_b}, {3, 1}, 0},
        {"docs-overrun", 1, 8, {20, 0}, {overrun, NULL}, {2, 0}, 0},
        {"mask-byte-2", 1, 8, {20, 0}, {docs_a, NULL}, {3, 0}, 2},
    };
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
        buf[0] = seeds[i].flags, buf[1] = (uint8_t)(seeds[i].T - 1), buf[2] = 0;
        size_t n = 3;
        for (int k = 0; k < 2 && seeds[i].ntokens[k]; k++)
            n += packing_shard(buf + n, seeds[i].flags & 1, 100 * k, seeds[i].ntokens[k], seeds[i].docs[k],
                               seeds[i].ndocs[k], seeds[i].bad_mask, k > 0);
        put("doc_packing", seeds[i].name, buf, n, NULL, 0);
    }
}

/* ---- tokenizer.bin: bytes 0..255, a few merges, and <|endoftext|>; each pre-tokenizer ---- */

static void tokenizer_seed(const char *name, int eot_present, int zero_len, tokenizer_split split)
{
    static const char *const merges[] = {" t", "he", "th", "the", " the", "in", "ll", "ello", "12", "123",
                                         "\xc3\xa9", "<|endoftext|>"};
    static uint8_t buf[TOKENIZER_HEADER_BYTES + 256 * 2 + 128];
    int n_merges = (int)(sizeof merges / sizeof merges[0]) - !eot_present;
    int vocab = 256 + n_merges;
    memset(buf, 0, TOKENIZER_HEADER_BYTES);
    le(buf, TOKENIZER_MAGIC, 4), le(buf + 4, TOKENIZER_VERSION, 4), le(buf + 8, (uint64_t)vocab, 4);
    le(buf + 12, eot_present ? (uint64_t)(vocab - 1) : 0xffffffffu, 4);
    le(buf + 16, (uint64_t)split, 4);
    size_t n = TOKENIZER_HEADER_BYTES;
    for (int b = 0; b < 256; b++)
        buf[n++] = 1, buf[n++] = (uint8_t)b;
    for (int i = 0; i < n_merges; i++) {
        size_t len = strlen(merges[i]);
        buf[n++] = (uint8_t)(zero_len && i == 2 ? 0 : len);
        memcpy(buf + n, merges[i], len);
        n += len;
    }
    put("tokenizer", name, buf, n, NULL, 0);
}

/* ---- safetensors: flags byte + file (bit 0: HEADER@@DATA@@DATA, the harness writes the length) ---- */

static void safetensors_seed(const char *name, uint8_t flags, const char *header)
{
    uint8_t data[28];
    for (int i = 0; i < 28; i++)
        data[i] = (uint8_t)(i * 37 + 11);
    uint8_t buf[1024];
    size_t hn = strlen(header), n = 1;
    buf[0] = flags;
    if (flags & 1) {
        memcpy(buf + n, header, hn), n += hn;
        memcpy(buf + n, "@@DATA@@", 8), n += 8;
    } else {
        le(buf + n, hn, 8), n += 8;
        memcpy(buf + n, header, hn), n += hn;
    }
    memcpy(buf + n, data, sizeof data), n += sizeof data;
    put("safetensors", name, buf, n, NULL, 0);
}

static void safetensors_seeds(void)
{
    const char *valid = "{\"__metadata__\":{\"format\":\"pt\"},\"h.0.w\":{\"dtype\":\"F32\",\"shape\":[2,2],"
                        "\"data_offsets\":[0,16]},\"b\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[16,24]},"
                        "\"c\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[24,28]}}  ";
    safetensors_seed("valid", 0x00, valid);
    safetensors_seed("valid-repair", 0x01, valid);
    safetensors_seed("overlap", 0x01, "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                                      "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[12,28]}}");
    safetensors_seed("f64", 0x01, "{\"a\":{\"dtype\":\"F64\",\"shape\":[3],\"data_offsets\":[0,24]}}");
    safetensors_seed("pretty", 0x01, "{\n  \"a\": {\"dtype\": \"F16\", \"shape\": [14], \"data_offsets\": [0, 28]}\n}\n");
    /* JSON that the reader must take (every escape, a surrogate pair) and near misses it must refuse */
    safetensors_seed("escapes", 0x01, "{\"a\\/\\\"\\\\\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00\":{\"dtype\":\"BF16\","
                                      "\"shape\":[14],\"data_offsets\":[0,28]}}");
    safetensors_seed("escape-x", 0x01, "{\"\\x77eight\":{\"dtype\":\"BF16\",\"shape\":[14],\"data_offsets\":[0,28]}}");
    safetensors_seed("raw-newline", 0x01, "{\"wei\nght\":{\"dtype\":\"BF16\",\"shape\":[14],\"data_offsets\":[0,28]}}");
    safetensors_seed("lone-surrogate", 0x01, "{\"\\ud83d\":{\"dtype\":\"BF16\",\"shape\":[14],\"data_offsets\":[0,28]}}");
    safetensors_seed("trailing-comma", 0x01, "{\"a\":{\"dtype\":\"BF16\",\"shape\":[14],\"data_offsets\":[0,28],},}");
    safetensors_seed("leading-zero", 0x01, "{\"a\":{\"dtype\":\"BF16\",\"shape\":[014],\"data_offsets\":[0,28]}}");
    safetensors_seed("nan-comment", 0x01, "{\"a\":{\"dtype\":\"BF16\",\"shape\":[NaN],/* c */\"data_offsets\":[0,28]}}");
    safetensors_seed("trailing-text", 0x01, "{\"a\":{\"dtype\":\"BF16\",\"shape\":[14],\"data_offsets\":[0,28]}} x");
}

/* ---- sharded checkpoint sets: flags, the manifest's seven tables, each shard's piece names ---- */

static size_t set_text(uint8_t *p, const char *text)
{
    memcpy(p, "@@PART@@", 8);
    memcpy(p + 8, text, strlen(text));
    return 8 + strlen(text);
}

static size_t set_rows(uint8_t *p, const int64_t *v, int n)
{
    memcpy(p, "@@PART@@", 8);
    for (int i = 0; i < n; i++)
        le(p + 8 + 8 * i, (uint64_t)v[i], 8);
    return 8 + 8 * (size_t)n;
}

/* Two buffers of 10 elements over two shards, tensor a [2, 3] at 0 and b [dims] at b_at (named `b`),
 * the extents `ext` (4 a row), the shards named in `shards`. */
static void set_seed(const char *name, uint8_t flags, const char *b, const int64_t *b_dims, int64_t b_at,
                     const int64_t *ext, int n_ext, const char *shards)
{
    static uint8_t buf[8192];
    const int cols = 2 + CKPT_MAX_NDIM;
    int64_t dims[2 * (2 + CKPT_MAX_NDIM)] = {0}, len = 10, info[4] = {0};
    dims[0] = 0, dims[1] = 2, dims[2] = 2, dims[3] = 3;
    dims[cols] = b_at, dims[cols + 1] = b_dims[0];
    for (int d = 0; d < b_dims[0]; d++)
        dims[cols + 2 + d] = b_dims[1 + d];
    char tensors[256];
    snprintf(tensors, sizeof tensors, "a\n%s\n", b);
    static const char buffers[] = "param/\noptim/m/\n"; /* the first part: no separator before it */
    size_t n = 1 + strlen(buffers);
    buf[0] = flags;
    memcpy(buf + 1, buffers, n - 1);
    n += set_text(buf + n, tensors);
    n += set_text(buf + n, shards);
    n += set_rows(buf + n, &len, 1);
    n += set_rows(buf + n, dims, 2 * cols);
    n += set_rows(buf + n, info, 4);
    n += set_rows(buf + n, ext, 4 * n_ext);
    n += set_text(buf + n, "param/@0+5\noptim/m/@0+5\n");
    n += set_text(buf + n, "param/@5+5\noptim/m/@5+5\n");
    put("ckpt_set", name, buf, n, NULL, 0);
}

static void set_seeds(void)
{
    static const int64_t good[16] = {0, 0, 0, 5, 0, 1, 0, 5, 1, 0, 5, 5, 1, 1, 5, 5};
    static const int64_t twice[16] = {0, 0, 0, 5, 0, 1, 0, 5, 1, 0, 4, 6, 1, 1, 5, 5};
    static const int64_t gap[12] = {0, 0, 0, 5, 0, 1, 0, 5, 1, 1, 5, 5};
    static const int64_t b4[2] = {1, 4}, b1[2] = {1, 1}, negative[3] = {2, -1, -4};
    const char *plain = "shard-00001-of-00002.ddp\nshard-00002-of-00002.ddp\n";
    set_seed("two-shards-repair", 1, "b", b4, 6, good, 4, plain);
    set_seed("two-shards-stale-info", 0, "b", b4, 6, good, 4, plain);
    set_seed("held-twice", 1, "b", b4, 6, twice, 4, plain);
    set_seed("gap", 1, "b", b4, 6, gap, 3, plain);
    set_seed("negative-dims", 1, "b", negative, 6, good, 4, plain);
    set_seed("tensor-past-the-end", 1, "b", b1, 1000, good, 4, plain);
    set_seed("name-twice", 1, "a", b4, 6, good, 4, plain);
    char over[CKPT_NAME_MAX + 8]; /* a name longer than a manifest's name field */
    memset(over, 'y', sizeof over - 1);
    over[sizeof over - 1] = '\0';
    set_seed("name-over-its-field", 1, over, b4, 6, good, 4, plain);
    set_seed("shard-outside", 1, "b", b4, 6, good, 4, "shard-00001-of-00002.ddp\n../shard-00002-of-00002.ddp\n");
}

/* ---- Hugging Face folders: flags (the family), then config.json, the index, the safetensors files ---- */

static const float *seed_values(void *ctx, const char *name, size_t numel)
{
    static float v[1 << 16];
    (void)ctx, (void)name;
    if (numel > sizeof v / sizeof v[0])
        exit(1);
    for (size_t i = 0; i < numel; i++)
        v[i] = (float)((int)(i % 17) - 8) / 16.0f;
    return v;
}

/* Appends "@@FILE@@" (unless first) and dir/name: as it is, or (safetensors) as its JSON header,
 * "@@DATA@@" and its data; a file that is not there adds an empty part. */
static size_t folder_part(uint8_t *buf, size_t n, const char *dir, const char *name, bool safetensors, bool first)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (!first)
        memcpy(buf + n, "@@FILE@@", 8), n += 8;
    FILE *f = fopen(path, "rb");
    if (!f)
        return n;
    fclose(f);
    size_t len;
    uint8_t *file = slurp(path, &len);
    if (!safetensors) {
        memcpy(buf + n, file, len), n += len;
    } else {
        uint64_t head = 0;
        for (int i = 0; i < 8; i++)
            head |= (uint64_t)file[i] << (8 * i);
        memcpy(buf + n, file + 8, head), n += head;
        memcpy(buf + n, "@@DATA@@", 8), n += 8;
        memcpy(buf + n, file + 8 + head, len - 8 - head), n += len - 8 - head;
    }
    free(file);
    return n;
}

/* The folder dir, which `files` safetensors files hold, in the harness's layout. */
static void folder_seed(const char *name, uint8_t flags, const char *dir, int files)
{
    static uint8_t buf[1 << 18];
    char shard[64];
    size_t n = 1;
    buf[0] = flags;
    if (files < 1 || files > 4) /* the harness takes up to four */
        exit(1);
    n = folder_part(buf, n, dir, HF_CONFIG, false, true);
    n = folder_part(buf, n, dir, HF_INDEX, false, false);
    for (int k = 1; k <= files; k++) {
        if (files > 1)
            snprintf(shard, sizeof shard, "model-%05d-of-%05d.safetensors", k, files);
        n = folder_part(buf, n, dir, files > 1 ? shard : HF_WEIGHTS, true, false);
    }
    put("hf_folder", name, buf, n, NULL, 0);
}

static void hf_folder_seeds(const char *scratch)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/hf", scratch);
    const gpt2_shape gpt2 = {.n_layer = 1, .n_head = 2, .n_embd = 8, .block_size = 16, .vocab_size = 20};
    const llama_shape llama = {.n_layer = 1, .n_head = 2, .n_kv_head = 1, .n_embd = 8, .ffn_hidden = 16,
                               .block_size = 16, .vocab_size = 20, .rope_theta = 10000, .norm_eps = 1e-5};
    llama_shape tied = llama, stretched = llama, windowed = llama, own_heads = llama;
    tied.tie_embeddings = true;
    stretched.rope_scaling = (llama_rope_scaling){32, 1, 4, 8192}; /* Llama 3.2's */
    windowed.sliding_window = 8;                                    /* as Mistral-7B-v0.1's 4096 */
    own_heads.head_dim = 6;                                         /* 12 wide over 8, as Mistral-Nemo's */
    int files = 0;
    ddp_err err = {0};
    if (gpt2_hf_write(dir, &gpt2, NULL, ST_F32, 1 << 20, seed_values, NULL, &files, &err))
        exit(1);
    folder_seed("gpt2", 0, dir, files);
    if (gpt2_hf_write(dir, &gpt2, NULL, ST_BF16, 1600, seed_values, NULL, &files, &err))
        exit(1);
    folder_seed("gpt2-bf16-sharded", 0, dir, files);
    if (llama_hf_write(&llama_family_llama, dir, &llama, NULL, ST_F32, 1 << 20, seed_values, NULL, &files, &err))
        exit(1);
    folder_seed("llama", 1, dir, files);
    if (llama_hf_write(&llama_family_llama, dir, &tied, NULL, ST_BF16, 1000, seed_values, NULL, &files, &err))
        exit(1);
    folder_seed("llama-tied-bf16-sharded", 1, dir, files);
    if (llama_hf_write(&llama_family_llama, dir, &stretched, NULL, ST_F32, 1 << 20, seed_values, NULL, &files, &err))
        exit(1);
    folder_seed("llama-rope-scaled", 1, dir, files);
    if (llama_hf_write(&qwen2_family, dir, &llama, NULL, ST_F32, 1 << 20, seed_values, NULL, &files, &err))
        exit(1);
    folder_seed("qwen2", 2, dir, files);
    folder_seed("qwen2-as-llama", 1, dir, files);
    if (llama_hf_write(&mistral_family, dir, &llama, NULL, ST_F32, 1 << 20, seed_values, NULL, &files, &err))
        exit(1);
    folder_seed("mistral", 3, dir, files);
    if (llama_hf_write(&mistral_family, dir, &windowed, NULL, ST_F32, 1 << 20, seed_values, NULL, &files, &err))
        exit(1);
    folder_seed("mistral-windowed", 3, dir, files);
    if (llama_hf_write(&mistral_family, dir, &own_heads, NULL, ST_F32, 1 << 20, seed_values, NULL, &files, &err))
        exit(1);
    folder_seed("mistral-own-heads", 3, dir, files);
    if (llama_hf_write(&qwen3_family, dir, &own_heads, NULL, ST_F32, 1 << 20, seed_values, NULL, &files, &err))
        exit(1);
    folder_seed("qwen3-own-heads", 4, dir, files);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: fuzz_make_seeds CORPUS_DIR SCRATCH_DIR\n");
        return 2;
    }
    out_dir = argv[1];
    ckpt_seeds(argv[2]);
    idx_seed("valid-t10k", 0x03, 3, 0, 28);
    idx_seed("valid-train", 0x07, 2, 0, 28);
    idx_seed("real-gzip", 0x00, 1, 0, 28);
    idx_seed("label-out-of-range", 0x03, 3, 1, 28);
    idx_seed("wrong-side", 0x03, 1, 0, 27);
    idx_seed("images-missing", 0x0b, 2, 0, 28);
    static const int u16[3] = {2, 2, 2}, u32[3] = {4, 4, 4}, mixed[2] = {2, 4};
    shards_seed("two-shards", 0x00, 3, 256, 2, u16, 0);
    shards_seed("three-shards-repair", 0x01, 8, 200, 3, u16, 0);
    shards_seed("one-shard-big-vocab", 0x00, 1, 0, 1, u16, 0);
    shards_seed("gap", 0x02, 2, 256, 2, u16, 0);
    shards_seed("folder-next", 0x04, 2, 256, 1, u16, 0);
    shards_seed("bad-version", 0x00, 2, 256, 1, u16, 2);
    shards_seed("u32-two-shards-wide-vocab", 0x08, 3, 70000 - 65536, 2, u32, 0);
    shards_seed("u32-three-shards-repair", 0x09, 8, 0, 3, u32, 0);
    shards_seed("u32-narrow-vocab", 0x00, 2, 256, 1, u32, 0);
    shards_seed("u32-version-2", 0x00, 2, 256, 1, u32, 2);
    shards_seed("mixed-widths", 0x08, 2, 0, 2, mixed, 0);
    tokenizer_seed("bytes-merges-eot", 1, 0, TOKENIZER_SPLIT_UNSTATED);
    tokenizer_seed("bytes-merges", 0, 0, TOKENIZER_SPLIT_GPT2);
    tokenizer_seed("zero-length", 1, 1, TOKENIZER_SPLIT_UNSTATED);
    tokenizer_seed("llama3-split", 1, 0, TOKENIZER_SPLIT_LLAMA3);
    tokenizer_seed("qwen2-split", 1, 0, TOKENIZER_SPLIT_QWEN2);
    tokenizer_seed("sentencepiece-split", 1, 0, TOKENIZER_SPLIT_SENTENCEPIECE);
    safetensors_seeds();
    packing_seeds();
    hf_folder_seeds(argv[2]);
    set_seeds();
    return 0;
}
