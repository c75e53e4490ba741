/* dataset.c — in-memory datasets: the Fashion-MNIST gzipped IDX reader, synthetic data, gathering.
 *
 * Owns the IDX format checks (magic, dimensions, matching counts, exact payload length, label
 * range, the gzip framing around it) and the rule that a failed load leaves *out zeroed with nothing
 * allocated. Decompression is zlib's inflate. It must not know about ranks, batching order or
 * devices (sampler.h, device.h).
 */
#include "dataset.h"
#include "tokenizer.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "runtime/base/rng.h"
#include "runtime/base/open_input.h"

#define IDX_MAGIC_IMAGES 0x00000803u /* unsigned bytes, 3 dimensions */
#define IDX_MAGIC_LABELS 0x00000801u /* unsigned bytes, 1 dimension */
#define FMNIST_SIDE 28
#define FMNIST_CLASSES 10
#define FMNIST_PACKAGE "dataset-fashion-mnist"
/* Compressed input is read in IN_CHUNK pieces; payloads are inflated in slices that fit zlib's
 * unsigned lengths, into a buffer grown as data arrives so a header that lies about a huge count
 * fails on truncation, not on a giant malloc. */
#define IN_CHUNK ((size_t)1 << 18)
#define READ_SLICE ((size_t)1 << 24)

/* A gzipped IDX file as it is inflated. gzip's framing is checked here, not left to zlib's gz*
 * API, which takes bytes after the stream for nothing and reports a trailer found while filling
 * its buffer against whatever was being read: the file must start as gzip, a member that ends is
 * followed by nothing or by another member (gzip(1) reads concatenated members as one), and a
 * trailer that does not match is named as the trailer. */
typedef struct idx_file {
    const char *path;
    FILE *f;
    z_stream zs;
    bool inflating;       /* inflateInit2 succeeded */
    bool at_end;          /* the last member ended and nothing follows */
    uint8_t *in;          /* IN_CHUNK bytes of compressed input */
} idx_file;

/* Why inflating stopped short of what was asked. */
typedef enum idx_stop {
    IDX_DONE,             /* all of it */
    IDX_END,              /* the data ended (the stream, or the file in the middle of it) */
    IDX_TRUNCATED,        /* the file ended inside a gzip member */
    IDX_CORRUPT,          /* zlib's data error (zs.msg) */
    IDX_GARBAGE,          /* bytes after the last member that are no gzip member */
    IDX_IO,               /* a read error (errno) */
} idx_stop;

static void idx_close(idx_file *f)
{
    if (f->inflating)
        inflateEnd(&f->zs);
    free(f->in);
    if (f->f)
        fclose(f->f);
}

/* Input for inflate when it has used what it had; false at the end of the file or on a read error
 * (ferror says which). */
static bool idx_refill(idx_file *f)
{
    if (f->zs.avail_in > 0)
        return true;
    size_t n = fread(f->in, 1, IN_CHUNK, f->f);
    f->zs.next_in = f->in;
    f->zs.avail_in = (uInt)n;
    return n > 0;
}

/* After a member's end: another member follows (inflate reset for it), nothing does (at_end), or
 * something else does (IDX_GARBAGE). */
static idx_stop idx_next_member(idx_file *f)
{
    if (!idx_refill(f)) {
        f->at_end = !ferror(f->f);
        return f->at_end ? IDX_END : IDX_IO;
    }
    if (f->zs.avail_in == 1) { /* the second magic byte may be in the next read */
        f->in[0] = f->zs.next_in[0];
        size_t n = fread(f->in + 1, 1, IN_CHUNK - 1, f->f);
        f->zs.next_in = f->in;
        f->zs.avail_in = (uInt)(1 + n);
    }
    if (f->zs.avail_in < 2 || f->zs.next_in[0] != 0x1f || f->zs.next_in[1] != 0x8b)
        return IDX_GARBAGE;
    return inflateReset(&f->zs) == Z_OK ? IDX_DONE : IDX_CORRUPT;
}

/* Inflates up to len bytes into out; *got says how many came. IDX_DONE when all did. */
static idx_stop idx_inflate(idx_file *f, uint8_t *out, size_t len, size_t *got)
{
    *got = 0;
    while (*got < len) {
        if (f->at_end)
            return IDX_END;
        bool more = idx_refill(f);
        if (!more && ferror(f->f))
            return IDX_IO;
        size_t want = len - *got;
        uInt slice = want > UINT_MAX ? UINT_MAX : (uInt)want;
        f->zs.next_out = out + *got;
        f->zs.avail_out = slice;
        int r = inflate(&f->zs, Z_NO_FLUSH);
        *got += slice - f->zs.avail_out;
        if (r == Z_STREAM_END) {
            idx_stop next = idx_next_member(f);
            if (next != IDX_DONE && next != IDX_END)
                return next;
        } else if (r == Z_DATA_ERROR || r == Z_STREAM_ERROR || r == Z_NEED_DICT || r == Z_MEM_ERROR) {
            return IDX_CORRUPT;
        } else if (!more && r == Z_BUF_ERROR) {
            return IDX_TRUNCATED;
        }
    }
    return IDX_DONE;
}

static int idx_open(idx_file *f, const char *path, ddp_err *err)
{
    memset(f, 0, sizeof *f);
    f->path = path;
    errno = 0;
    if (fopen_input(path, &f->f, err) != DDP_OK) {
        if (errno == ENOENT)
            return ddp_fail(err, DDP_EUSAGE, "%s: file not found (Fashion-MNIST is shipped by the "
                            "Debian package %s)", path, FMNIST_PACKAGE);
        return err->code;
    }
    f->in = malloc(IN_CHUNK);
    f->inflating = f->in && inflateInit2(&f->zs, 16 + MAX_WBITS) == Z_OK; /* gzip framing only */
    if (!f->inflating) {
        idx_close(f);
        return ddp_fail(err, DDP_ERUNTIME, "%s: out of memory for zlib", path);
    }
    if (!idx_refill(f) && ferror(f->f)) {
        idx_close(f);
        return ddp_fail(err, DDP_ERUNTIME, "%s: read error: %s", path, strerror(errno));
    }
    if (f->zs.avail_in < 2 || f->in[0] != 0x1f || f->in[1] != 0x8b) { /* zlib would say only "incorrect header check" */
        idx_close(f);
        return ddp_fail(err, DDP_EUSAGE, "%s: not a gzip file (expected gzipped IDX data)", path);
    }
    return DDP_OK;
}

/* Bytes of the file from the current read position on, plus what inflate has not used. */
static long long idx_bytes_left(idx_file *f)
{
    long pos = ftell(f->f);
    long long left = f->zs.avail_in;
    if (pos >= 0 && fseek(f->f, 0, SEEK_END) == 0)
        left += ftell(f->f) - pos;
    return left;
}

/* The error for a stop short of want bytes of what (got of them came). */
static int idx_stopped(idx_file *f, idx_stop why, const char *what, size_t want, size_t got, ddp_err *err)
{
    const char *zmsg = f->zs.msg ? f->zs.msg : "unknown";
    switch (why) {
    case IDX_IO:
        return ddp_fail(err, DDP_ERUNTIME, "%s: read error in %s: %s", f->path, what, strerror(errno));
    case IDX_CORRUPT:
        if (!strcmp(zmsg, "incorrect data check") || !strcmp(zmsg, "incorrect length check"))
            return ddp_fail(err, DDP_EUSAGE, "%s: corrupt gzip stream: the %s in its trailer does not match the data "
                            "(zlib: %s)", f->path, strstr(zmsg, "data") ? "CRC-32" : "length", zmsg);
        return ddp_fail(err, DDP_EUSAGE, "%s: corrupt gzip data in %s (zlib: %s)", f->path, what, zmsg);
    case IDX_GARBAGE:
        return ddp_fail(err, DDP_EUSAGE, "%s: %lld bytes after the gzip stream, which are no gzip data", f->path,
                        idx_bytes_left(f));
    case IDX_TRUNCATED:
    case IDX_END:
    case IDX_DONE:
        break;
    }
    return ddp_fail(err, DDP_EUSAGE, "%s: truncated: %s needs %zu bytes, only %zu present%s", f->path, what, want,
                    got, why == IDX_TRUNCATED ? " (the gzip stream is cut short)" : "");
}

static int idx_read_exact(idx_file *f, void *buf, size_t len, const char *what, ddp_err *err)
{
    size_t got;
    idx_stop why = idx_inflate(f, buf, len, &got);
    return why == IDX_DONE ? DDP_OK : idx_stopped(f, why, what, len, got, err);
}

static int32_t be32s(const uint8_t *p)
{
    return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3]);
}

/* Reads the magic and `ndims` dimensions; IDX dimensions are signed 32-bit integers, and a
 * negative one is refused as such. */
static int idx_read_header(idx_file *f, uint32_t magic, int32_t *dims, int ndims, ddp_err *err)
{
    uint8_t hdr[4 + 4 * 3];
    int rc = idx_read_exact(f, hdr, 4 + 4 * (size_t)ndims, "the IDX header", err);
    if (rc)
        return rc;
    uint32_t got = (uint32_t)be32s(hdr);
    if (got != magic)
        return ddp_fail(err, DDP_EUSAGE, "%s: bad IDX magic 0x%08x, expected 0x%08x (%s)", f->path,
                        got, magic, magic == IDX_MAGIC_IMAGES ? "images" : "labels");
    for (int i = 0; i < ndims; i++) {
        dims[i] = be32s(hdr + 4 + 4 * i);
        if (dims[i] < 0)
            return ddp_fail(err, DDP_EUSAGE, "%s: IDX header: dimension %d is negative (%d)", f->path, i + 1, dims[i]);
    }
    return DDP_OK;
}

/* Reads exactly len payload bytes into a new buffer, then insists the data ends there: no byte
 * more, and the gzip stream's end (its trailer checked) with nothing after it. */
static int idx_read_payload(idx_file *f, size_t len, const char *what, uint8_t **out, ddp_err *err)
{
    size_t cap = len < READ_SLICE ? len : READ_SLICE, got = 0;
    uint8_t *buf = malloc(cap ? cap : 1);
    if (!buf)
        return ddp_fail(err, DDP_ERUNTIME, "%s: cannot allocate %zu bytes", f->path, cap);
    idx_stop why = IDX_DONE;
    while (got < len && why == IDX_DONE) {
        if (got == cap) {
            cap = len - cap < cap ? len : 2 * cap;
            uint8_t *grown = realloc(buf, cap);
            if (!grown) {
                free(buf);
                return ddp_fail(err, DDP_ERUNTIME, "%s: cannot allocate %zu bytes", f->path, cap);
            }
            buf = grown;
        }
        size_t slice = cap - got < READ_SLICE ? cap - got : READ_SLICE, n;
        why = idx_inflate(f, buf + got, slice, &n);
        got += n;
    }
    uint8_t extra;
    size_t n = 0;
    int rc = DDP_OK;
    if (why != IDX_DONE)
        rc = idx_stopped(f, why, what, len, got, err);
    else if ((why = idx_inflate(f, &extra, 1, &n)) == IDX_DONE)
        rc = ddp_fail(err, DDP_EUSAGE, "%s: trailing data after the %zu bytes of %s the header declares",
                      f->path, len, what);
    else if (why != IDX_END)
        rc = why == IDX_TRUNCATED ? ddp_fail(err, DDP_EUSAGE, "%s: truncated gzip stream after %s (its end is missing)",
                                             f->path, what)
                                  : idx_stopped(f, why, what, len, got, err);
    if (rc) {
        free(buf);
        return rc;
    }
    *out = buf;
    return DDP_OK;
}

/* u8 x features -> i32 x 1 class id in [0, classes) */
static sample_layout classification_layout(int64_t features, int64_t classes)
{
    return (sample_layout){.input = {SAMPLE_U8, features}, .target = {SAMPLE_I32, 1}, .n_classes = classes};
}

static int join_path(char *buf, size_t size, const char *dir, const char *file, ddp_err *err)
{
    int len = snprintf(buf, size, "%s/%s", dir, file);
    if (len < 0 || (size_t)len >= size)
        return ddp_fail(err, DDP_EUSAGE, "%s/%s: path too long", dir, file);
    return DDP_OK;
}

/* Reads the label file and widens its bytes to int32 class ids, the type models take. */
static int load_labels(const char *path, int32_t **labels, uint32_t *count, ddp_err *err)
{
    idx_file f;
    uint8_t *raw = NULL;
    int rc = idx_open(&f, path, err);
    if (rc)
        return rc;
    int32_t dims[1] = {0};
    rc = idx_read_header(&f, IDX_MAGIC_LABELS, dims, 1, err);
    *count = rc ? 0 : (uint32_t)dims[0];
    if (!rc && *count == 0)
        rc = ddp_fail(err, DDP_EUSAGE, "%s: header declares 0 labels", path);
    if (!rc)
        rc = idx_read_payload(&f, *count, "labels", &raw, err);
    idx_close(&f);
    if (rc)
        return rc;
    for (uint32_t i = 0; i < *count && !rc; i++)
        if (raw[i] >= FMNIST_CLASSES)
            rc = ddp_fail(err, DDP_EUSAGE, "%s: label %u of sample %u is not below %d", path, raw[i], i,
                          FMNIST_CLASSES);
    *labels = rc ? NULL : malloc((size_t)*count * sizeof **labels);
    if (!rc && !*labels)
        rc = ddp_fail(err, DDP_ERUNTIME, "%s: cannot allocate %u labels", path, *count);
    for (uint32_t i = 0; !rc && i < *count; i++)
        (*labels)[i] = raw[i];
    free(raw);
    return rc;
}

static int load_images(const char *path, uint32_t expect_count, const char *labels_path, uint8_t **images,
                       ddp_err *err)
{
    idx_file f;
    int32_t dims[3];
    int rc = idx_open(&f, path, err);
    if (rc)
        return rc;
    rc = idx_read_header(&f, IDX_MAGIC_IMAGES, dims, 3, err);
    if (!rc && (dims[1] != FMNIST_SIDE || dims[2] != FMNIST_SIDE))
        rc = ddp_fail(err, DDP_EUSAGE, "%s: images are %dx%d, expected %dx%d", path, dims[1], dims[2],
                      FMNIST_SIDE, FMNIST_SIDE);
    if (!rc && (uint32_t)dims[0] != expect_count)
        rc = ddp_fail(err, DDP_EUSAGE, "%s: header declares %d images but %s has %u labels", path,
                      dims[0], labels_path, expect_count);
    if (!rc)
        rc = idx_read_payload(&f, (size_t)dims[0] * FMNIST_SIDE * FMNIST_SIDE, "images", images, err);
    idx_close(&f);
    return rc;
}

int dataset_load_fashion_mnist(const char *dir, bool train, dataset *out, ddp_err *err)
{
    memset(out, 0, sizeof *out);
    const char *prefix = train ? "train" : "t10k";
    char file[64], images_path[4096], labels_path[4096];
    snprintf(file, sizeof file, "%s-labels-idx1-ubyte.gz", prefix);
    int rc = join_path(labels_path, sizeof labels_path, dir, file, err);
    snprintf(file, sizeof file, "%s-images-idx3-ubyte.gz", prefix);
    if (!rc)
        rc = join_path(images_path, sizeof images_path, dir, file, err);
    if (rc)
        return rc;

    int32_t *labels = NULL;
    uint8_t *images = NULL;
    uint32_t count = 0;
    rc = load_labels(labels_path, &labels, &count, err);
    if (!rc)
        rc = load_images(images_path, count, labels_path, &images, err);
    if (rc) {
        free(labels);
        return rc;
    }
    out->n = count;
    out->layout = classification_layout(FMNIST_SIDE * FMNIST_SIDE, FMNIST_CLASSES);
    out->inputs = images;
    out->targets = (uint8_t *)labels;
    snprintf(out->name, sizeof out->name, "fashion-mnist/%s", train ? "train" : "test");
    return DDP_OK;
}

/* label = argmax over classes of a fixed random projection of the centred pixels: a linear rule,
 * so a linear model can learn it exactly, and it depends only on (seed, features, classes). */
static void synthetic_labels(int64_t n, int64_t features, int64_t classes, const uint8_t *images,
                             const float *projection, int32_t *labels)
{
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *x = images + i * features;
        double best = 0;
        int32_t best_class = 0;
        for (int64_t c = 0; c < classes; c++) {
            const float *w = projection + c * features;
            double score = 0;
            for (int64_t f = 0; f < features; f++)
                score += (double)w[f] * ((double)x[f] - 127.5);
            if (c == 0 || score > best) {
                best = score;
                best_class = (int32_t)c;
            }
        }
        labels[i] = best_class;
    }
}

int dataset_make_synthetic(int64_t n, int64_t features, int64_t classes, uint64_t seed, bool test, dataset *out,
                           ddp_err *err)
{
    memset(out, 0, sizeof *out);
    if (n <= 0 || features <= 0 || classes < 2 || classes > 256)
        return ddp_fail(err, DDP_EUSAGE, "synthetic data: need n > 0, features > 0 and 2 <= classes <= 256"
                        " (got n=%lld features=%lld classes=%lld)", (long long)n, (long long)features,
                        (long long)classes);
    if (n > INT64_MAX / features || features > INT64_MAX / classes / (int64_t)sizeof(float))
        return ddp_fail(err, DDP_EUSAGE, "synthetic data: %lld x %lld bytes is too large", (long long)n,
                        (long long)features);
    uint8_t *images = malloc((size_t)(n * features));
    int32_t *labels = malloc((size_t)n * sizeof *labels);
    float *projection = malloc((size_t)(classes * features) * sizeof(float));
    out->inputs = images;
    out->targets = (uint8_t *)labels;
    if (!images || !labels || !projection) {
        free(projection);
        dataset_free(out);
        return ddp_fail(err, DDP_ERUNTIME, "synthetic data: cannot allocate %lld x %lld bytes",
                        (long long)n, (long long)features);
    }
    rng r;
    rng_seed(&r, seed, RNG_SYNTHETIC);
    for (int64_t i = 0; i < classes * features; i++)
        projection[i] = rng_uniform(&r, -1.0f, 1.0f);
    if (test) /* other images, the same rule */
        rng_seed(&r, seed, RNG_SYNTHETIC_TEST);
    for (int64_t i = 0; i < n * features; i += 8) {
        uint64_t bits = rng_next(&r);
        for (int64_t b = 0; b < 8 && i + b < n * features; b++)
            images[i + b] = (uint8_t)(bits >> (8 * b));
    }
    out->n = n;
    out->layout = classification_layout(features, classes);
    synthetic_labels(n, features, classes, images, projection, labels);
    free(projection);
    snprintf(out->name, sizeof out->name, "synthetic");
    return DDP_OK;
}

/* The vocabulary's size and fingerprint from DIR/tokenizer.bin's header (the decoding table
 * prepare-text writes); *has_fingerprint false where none is recorded. */
static int token_vocab(const char *dir, int64_t *vocab, bool *has_fingerprint, uint64_t *fingerprint, ddp_err *err)
{
    char path[4096];
    tokenizer tok;
    int rc = join_path(path, sizeof path, dir, "tokenizer.bin", err);
    if (rc)
        return rc;
    if ((rc = tokenizer_load(path, &tok, err)))
        return ddp_prefix(err, "data.path %s: scripts/prepare-text writes tokenizer.bin beside the shards", dir);
    *vocab = tok.vocab_size;
    *has_fingerprint = tok.has_fingerprint;
    *fingerprint = tok.fingerprint;
    tokenizer_free(&tok);
    return DDP_OK;
}

/* dataset_load_tokens' work; packed: the windows are only for packing's reads (seq_len 1), and
 * too few tokens are named as packing needs them, not as data.seq_len's. */
static int load_tokens(const char *dir, const char *split, int64_t seq_len, bool packed, dataset *out, ddp_err *err)
{
    memset(out, 0, sizeof *out);
    int64_t vocab = 0;
    bool has_fingerprint = false;
    uint64_t fingerprint = 0;
    int rc = token_vocab(dir, &vocab, &has_fingerprint, &fingerprint, err);
    if (rc)
        return rc;
    token_shards *s = calloc(1, sizeof *s);
    if (!s)
        return ddp_fail(err, DDP_ERUNTIME, "out of memory opening %s/%s shards", dir, split);
    rc = token_shards_open(dir, split, s, err);
    if (!rc)
        rc = token_shards_check_vocab(s, vocab, err);
    if (!rc && token_shards_windows(s, seq_len) < 1 && packed)
        rc = ddp_fail(err, DDP_EUSAGE, "%s/%s_*.bin: %lld token(s); packing needs at least 2 (a token and the next "
                      "one to predict)", dir, split, (long long)s->total);
    else if (!rc && token_shards_windows(s, seq_len) < 1)
        rc = ddp_fail(err, DDP_EUSAGE, "%s/%s_*.bin: %lld tokens is less than one window of data.seq_len %lld + 1",
                      dir, split, (long long)s->total, (long long)seq_len);
    if (rc) {
        token_shards_close(s);
        free(s);
        return rc;
    }
    out->tokens = s;
    out->n = token_shards_windows(s, seq_len);
    out->layout = (sample_layout){.input = {SAMPLE_I32, seq_len}, .target = {SAMPLE_I32, seq_len}, .n_classes = vocab};
    out->has_vocab_fingerprint = has_fingerprint;
    out->vocab_fingerprint = fingerprint;
    snprintf(out->name, sizeof out->name, "tokens/%s", split);
    return DDP_OK;
}

int dataset_load_tokens(const char *dir, const char *split, int64_t seq_len, dataset *out, ddp_err *err)
{
    return load_tokens(dir, split, seq_len, false, out, err);
}

int dataset_load_packed(const char *dir, const char *split, int64_t seq_len, dataset *out, ddp_err *err)
{
    int rc = load_tokens(dir, split, 1, true, out, err);
    doc_packing *p = rc ? NULL : calloc(1, sizeof *p);
    if (!rc && !p)
        rc = ddp_fail(err, DDP_ERUNTIME, "out of memory packing %s/%s", dir, split);
    if (!rc)
        rc = doc_packing_open(dir, split, out->tokens, seq_len, p, err);
    if (rc) {
        free(p);
        dataset_free(out);
        return rc;
    }
    out->packed = p;
    out->n = p->n_rows;
    out->layout.input.count = out->layout.target.count = seq_len;
    snprintf(out->name, sizeof out->name, "packed/%s", split);
    return DDP_OK;
}

void dataset_free(dataset *d)
{
    if (!d)
        return;
    if (d->packed) {
        doc_packing_close(d->packed);
        free(d->packed);
    }
    free(d->inputs);
    free(d->targets);
    if (d->tokens) {
        token_shards_close(d->tokens);
        free(d->tokens);
    }
    memset(d, 0, sizeof *d);
}

void dataset_gather(const dataset *d, const int64_t *idx, int64_t count, void *inputs_out, void *targets_out,
                    int32_t *docs_out)
{
    if (d->packed) {
        doc_packing_gather(d->packed, d->tokens, idx, count, inputs_out, targets_out, docs_out);
        return;
    }
    if (d->tokens) {
        token_shards_gather(d->tokens, d->layout.input.count, idx, count, inputs_out, targets_out);
        return;
    }
    size_t in = sample_field_bytes(d->layout.input), tgt = sample_field_bytes(d->layout.target);
    for (int64_t i = 0; i < count; i++) {
        memcpy((uint8_t *)inputs_out + (size_t)i * in, d->inputs + (size_t)idx[i] * in, in);
        memcpy((uint8_t *)targets_out + (size_t)i * tgt, d->targets + (size_t)idx[i] * tgt, tgt);
    }
}

int64_t dataset_targets(const dataset *d, const int64_t *idx, int64_t count)
{
    return d->packed ? doc_packing_targets(d->packed, idx, count) : count * d->layout.target.count;
}

int64_t dataset_tokens(const dataset *d, const int64_t *idx, int64_t count)
{
    return d->packed ? doc_packing_tokens(d->packed, idx, count) : count * d->layout.input.count;
}
