/* ckpt_format.c — the checkpoint byte layout (docs/checkpoint-format.md): encoding the header
 * and tensor table, and reading a file back with every check done before anything is returned.
 *
 * Everything is encoded explicitly little-endian, byte by byte, so files move between machines.
 * This file must not write files, create directories or decide which checkpoint to use. */
#include "ckpt_internal.h"
#include "runtime/base/open_input.h"

#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static const size_t dtype_sizes[] = {4, 8, 4, 8, 1, 2};
static const char *const dtype_names[] = {"f32", "f64", "i32", "i64", "u8", "bf16"};
#define N_DTYPES 6

size_t ckpt_dtype_size(ckpt_dtype d) { return (unsigned)d < N_DTYPES ? dtype_sizes[d] : 0; }
const char *ckpt_dtype_name(ckpt_dtype d) { return (unsigned)d < N_DTYPES ? dtype_names[d] : "?"; }

uint64_t ckpt_tensor_numel(const ckpt_tensor *t)
{
    uint64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= (uint64_t)t->shape[i];
    return n;
}

uint64_t ckpt_tensor_bytes_checked(ckpt_dtype dtype, int ndim, const int64_t *shape)
{
    uint64_t n = ckpt_dtype_size(dtype);
    if (n == 0 || ndim < 0 || ndim > CKPT_MAX_NDIM)
        return UINT64_MAX;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return UINT64_MAX;
        if (shape[i] != 0 && n > UINT64_MAX / 2 / (uint64_t)shape[i])
            return UINT64_MAX;
        n *= (uint64_t)shape[i];
    }
    return n;
}

static int by_name(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

int ckpt_find_repeated_name(const void *items, int n, size_t stride, size_t name_at, const char **repeated)
{
    *repeated = NULL;
    if (n < 2)
        return 0;
    const char **names = malloc((size_t)n * sizeof *names);
    if (!names)
        return -1;
    for (int i = 0; i < n; i++)
        names[i] = (const char *)items + (size_t)i * stride + name_at;
    qsort(names, (size_t)n, sizeof *names, by_name);
    for (int i = 1; i < n && !*repeated; i++)
        if (!strcmp(names[i - 1], names[i]))
            *repeated = names[i];
    free(names);
    return 0;
}

/* ---- encoding ----------------------------------------------------------------------- */

typedef struct bytebuf { uint8_t *p; size_t len, cap; } bytebuf;

static void put_bytes(bytebuf *b, const void *src, size_t n)
{
    if (b->p && b->len + n <= b->cap)
        memcpy(b->p + b->len, src, n);
    b->len += n;   /* sizing pass (p == NULL) only counts */
}
static void put_le(bytebuf *b, uint64_t v, int nbytes)
{
    uint8_t tmp[8];
    for (int i = 0; i < nbytes; i++)
        tmp[i] = (uint8_t)(v >> (8 * i));
    put_bytes(b, tmp, (size_t)nbytes);
}
static void put_f64(bytebuf *b, double d)
{
    uint64_t v;
    memcpy(&v, &d, sizeof v);
    put_le(b, v, 8);
}
static void put_str(bytebuf *b, const char *s, size_t max)
{
    size_t n = strnlen(s, max - 1);
    put_le(b, n, 2);
    put_bytes(b, s, n);
}

/* header section (everything after the 32-byte preamble); see docs/checkpoint-format.md */
static void encode_header_section(bytebuf *b, const ckpt_state *s, const ckpt_layout *L)
{
    const ckpt_header *h = &s->hdr;
    put_le(b, (uint64_t)h->step, 8);
    put_le(b, (uint64_t)h->epoch, 8);
    put_le(b, (uint64_t)h->consumed, 8);
    put_le(b, (uint64_t)h->total_steps, 8);
    put_le(b, (uint64_t)h->optim_step, 8);
    put_le(b, (uint32_t)h->world_size, 4);
    put_le(b, (uint32_t)h->restart_count, 4);
    put_le(b, h->config_hash, 8);
    put_f64(b, h->save_time);
    put_f64(b, h->elapsed_s);
    put_str(b, h->model, CKPT_MODEL_MAX);
    put_le(b, (uint32_t)h->n_rng, 4);
    for (int i = 0; i < h->n_rng; i++) {
        put_str(b, h->rng[i].name, CKPT_NAME_MAX);
        for (int k = 0; k < 4; k++)
            put_le(b, h->rng[i].state.s[k], 8);
    }
    put_le(b, (uint32_t)s->n_tensors, 4);
    for (int i = 0; i < s->n_tensors; i++) {
        const ckpt_tensor *t = &s->tensors[i];
        put_str(b, t->name, CKPT_NAME_MAX);
        put_le(b, (uint8_t)t->dtype, 1);
        put_le(b, (uint8_t)t->ndim, 1);
        put_le(b, 0, 2);
        for (int d = 0; d < t->ndim; d++)
            put_le(b, (uint64_t)t->shape[d], 8);
        put_le(b, L->offset[i], 8);
        put_le(b, L->nbytes[i], 8);
        put_le(b, L->crc ? L->crc[i] : 0, 4);
    }
}

static int check_name(const char *what, const char *name, ddp_err *err)
{
    size_t n = strnlen(name, CKPT_NAME_MAX);
    if (n == 0 || n >= CKPT_NAME_MAX)
        return ddp_fail(err, DDP_EUSAGE, "checkpoint %s name is empty or longer than %d bytes",
                        what, CKPT_NAME_MAX - 1);
    return DDP_OK;
}

static int validate_state(const ckpt_state *s, ddp_err *err)
{
    const ckpt_header *h = &s->hdr;
    if (strnlen(h->model, CKPT_MODEL_MAX) >= CKPT_MODEL_MAX)
        return ddp_fail(err, DDP_EUSAGE, "checkpoint model description is not NUL-terminated");
    if (h->n_rng < 0 || h->n_rng > CKPT_MAX_RNG)
        return ddp_fail(err, DDP_EUSAGE, "checkpoint has %d RNG states (max %d)", h->n_rng, CKPT_MAX_RNG);
    for (int i = 0; i < h->n_rng; i++)
        if (check_name("RNG state", h->rng[i].name, err))
            return err->code;
    if (s->n_tensors < 0 || (s->n_tensors > 0 && !s->tensors))
        return ddp_fail(err, DDP_EUSAGE, "checkpoint tensor list is invalid");
    for (int i = 0; i < s->n_tensors; i++) {
        const ckpt_tensor *t = &s->tensors[i];
        if (check_name("tensor", t->name, err))
            return err->code;
        uint64_t nb = ckpt_tensor_bytes_checked(t->dtype, t->ndim, t->shape);
        if (nb == UINT64_MAX)
            return ddp_fail(err, DDP_EUSAGE, "checkpoint tensor %s: invalid dtype %d or shape", t->name, (int)t->dtype);
        if (nb > 0 && !t->data)
            return ddp_fail(err, DDP_EUSAGE, "checkpoint tensor %s has no data", t->name);
    }
    const char *twice;
    if (ckpt_find_repeated_name(s->tensors, s->n_tensors, sizeof *s->tensors, offsetof(ckpt_tensor, name), &twice))
        return ddp_fail(err, DDP_ERUNTIME, "checkpoint: out of memory checking %d tensor names", s->n_tensors);
    if (twice)
        return ddp_fail(err, DDP_EUSAGE, "checkpoint tensor name %s appears twice", twice);
    return DDP_OK;
}

int ckpt_layout_plan(const ckpt_state *s, ckpt_layout *L, ddp_err *err)
{
    memset(L, 0, sizeof *L);
    if (validate_state(s, err))
        return err->code;
    size_t n = (size_t)s->n_tensors;
    L->n = s->n_tensors;
    L->offset = calloc(n + 1, sizeof *L->offset);
    L->nbytes = calloc(n + 1, sizeof *L->nbytes);
    L->crc = calloc(n + 1, sizeof *L->crc);
    if (!L->offset || !L->nbytes || !L->crc) {
        ckpt_layout_free(L);
        return ddp_fail(err, DDP_ERUNTIME, "checkpoint layout: out of memory");
    }
    bytebuf sizing = {0};
    encode_header_section(&sizing, s, L);
    if (sizing.len > UINT32_MAX) {
        ckpt_layout_free(L);
        return ddp_fail(err, DDP_EUSAGE, "checkpoint header is too large (%zu bytes)", sizing.len);
    }
    L->header_len = (uint32_t)sizing.len;
    L->data_start = ckpt_align_up(CKPT_PREAMBLE_BYTES + sizing.len);
    uint64_t pos = L->data_start;
    L->file_len = pos;
    for (size_t i = 0; i < n; i++) {
        const ckpt_tensor *t = &s->tensors[i];
        L->nbytes[i] = ckpt_tensor_bytes_checked(t->dtype, t->ndim, t->shape);
        L->offset[i] = pos;
        L->file_len = pos + L->nbytes[i];
        pos = ckpt_align_up(L->file_len);
    }
    return DDP_OK;
}

void ckpt_layout_free(ckpt_layout *L)
{
    free(L->offset);
    free(L->nbytes);
    free(L->crc);
    memset(L, 0, sizeof *L);
}

int ckpt_header_encode(const ckpt_state *s, const ckpt_layout *L, uint8_t **out, ddp_err *err)
{
    uint8_t *buf = calloc(1, L->data_start);
    if (!buf)
        return ddp_fail(err, DDP_ERUNTIME, "checkpoint header: out of memory");
    bytebuf b = {buf, 0, L->data_start};
    put_bytes(&b, CKPT_MAGIC, 8);
    put_le(&b, CKPT_FORMAT_VERSION, 4);
    put_le(&b, L->header_len, 4);
    put_le(&b, L->file_len, 8);
    put_le(&b, 0, 8);   /* header CRC + reserved, filled below */
    encode_header_section(&b, s, L);
    uLong crc = crc32_z(0L, buf, 24);
    crc = crc32_z(crc, buf + CKPT_PREAMBLE_BYTES, L->header_len);
    bytebuf at_crc = {buf + 24, 0, 4};
    put_le(&at_crc, (uint32_t)crc, 4);
    *out = buf;
    return DDP_OK;
}

/* ---- decoding ----------------------------------------------------------------------- */

typedef struct reader { const uint8_t *p; size_t len, pos; bool bad; } reader;

static uint64_t get_le(reader *r, int nbytes)
{
    if (r->bad || r->len - r->pos < (size_t)nbytes) {
        r->bad = true;
        return 0;
    }
    uint64_t v = 0;
    for (int i = 0; i < nbytes; i++)
        v |= (uint64_t)r->p[r->pos + (size_t)i] << (8 * i);
    r->pos += (size_t)nbytes;
    return v;
}
static double get_f64(reader *r)
{
    uint64_t v = get_le(r, 8);
    double d;
    memcpy(&d, &v, sizeof d);
    return d;
}
static void get_str(reader *r, char *out, size_t max)
{
    size_t n = (size_t)get_le(r, 2);
    if (r->bad || n >= max || r->len - r->pos < n) {
        r->bad = true;
        out[0] = '\0';
        return;
    }
    memcpy(out, r->p + r->pos, n);
    out[n] = '\0';
    r->pos += n;
}

static int fail_file(ddp_err *err, const char *path, const char *fmt, const char *detail)
{
    char what[DDP_ERR_MSG / 2];
    snprintf(what, sizeof what, fmt, detail);
    return ddp_fail(err, DDP_ERUNTIME, "checkpoint %s: %s", path, what);
}

static int decode_header(const char *path, reader *r, ckpt_loaded *out, ddp_err *err)
{
    ckpt_header *h = &out->hdr;
    h->step = (int64_t)get_le(r, 8);
    h->epoch = (int64_t)get_le(r, 8);
    h->consumed = (int64_t)get_le(r, 8);
    h->total_steps = (int64_t)get_le(r, 8);
    h->optim_step = (int64_t)get_le(r, 8);
    h->world_size = (int32_t)get_le(r, 4);
    h->restart_count = (int32_t)get_le(r, 4);
    h->config_hash = get_le(r, 8);
    h->save_time = get_f64(r);
    h->elapsed_s = get_f64(r);
    get_str(r, h->model, CKPT_MODEL_MAX);
    uint64_t n_rng = get_le(r, 4);
    if (r->bad || n_rng > CKPT_MAX_RNG)
        return fail_file(err, path, "header is malformed (RNG list)%s", "");
    h->n_rng = (int)n_rng;
    for (int i = 0; i < h->n_rng; i++) {
        get_str(r, h->rng[i].name, CKPT_NAME_MAX);
        for (int k = 0; k < 4; k++)
            h->rng[i].state.s[k] = get_le(r, 8);
    }
    uint64_t n_t = get_le(r, 4);
    /* the smallest entry (a scalar with a one-byte name: length 2, name 1, dtype, ndim, 2 padding,
     * offset 8, bytes 8, CRC 4) takes 27 bytes, so a count beyond the remaining bytes is corrupt */
    if (r->bad || n_t > (r->len - r->pos) / 27)
        return fail_file(err, path, "header is malformed (tensor count)%s", "");
    out->n_tensors = (int)n_t;
    out->tensors = calloc(n_t + 1, sizeof *out->tensors);
    if (!out->tensors) /* this machine's failure: the walk must not pass the checkpoint over for it */
        return ddp_fail_local(err, "checkpoint %s: out of memory for its table of %llu tensors", path,
                              (unsigned long long)n_t);
    return DDP_OK;
}

static int decode_table(const char *path, reader *r, ckpt_loaded *out, uint64_t data_start, ddp_err *err)
{
    for (int i = 0; i < out->n_tensors; i++) {
        ckpt_tensor *t = &out->tensors[i];
        get_str(r, t->name, CKPT_NAME_MAX);
        t->dtype = (ckpt_dtype)get_le(r, 1);
        t->ndim = (int)get_le(r, 1);
        get_le(r, 2);
        if (r->bad || t->ndim > CKPT_MAX_NDIM)
            return fail_file(err, path, "tensor table is malformed%s", "");
        for (int d = 0; d < t->ndim; d++)
            t->shape[d] = (int64_t)get_le(r, 8);
        uint64_t offset = get_le(r, 8);
        t->nbytes = get_le(r, 8);
        t->crc = (uint32_t)get_le(r, 4);
        if (r->bad)
            return fail_file(err, path, "tensor table is truncated%s", "");
        if (t->name[0] == '\0' || ckpt_tensor_bytes_checked(t->dtype, t->ndim, t->shape) != t->nbytes)
            return fail_file(err, path, "tensor %s: dtype/shape do not match its byte length", t->name);
        if (offset % CKPT_ALIGN || offset < data_start || offset > out->file_bytes ||
            t->nbytes > out->file_bytes - offset)
            return fail_file(err, path, "tensor %s lies outside the file (truncated?)", t->name);
        t->file_offset = offset;
        t->data = (const uint8_t *)out->blob_ + offset;
    }
    if (r->pos != r->len)
        return fail_file(err, path, "header has trailing bytes%s", "");
    const char *twice;
    if (ckpt_find_repeated_name(out->tensors, out->n_tensors, sizeof *out->tensors, offsetof(ckpt_tensor, name),
                                &twice))
        return ddp_fail_local(err, "checkpoint %s: out of memory checking its tensor names", path);
    return twice ? fail_file(err, path, "tensor %s appears twice", twice) : DDP_OK;
}

int ckpt_read_at(int fd, const char *path, void *buf, uint64_t n, uint64_t at, ddp_err *err)
{
    for (uint64_t got = 0; got < n;) {
        uint64_t want = n - got > (1u << 30) ? (1u << 30) : n - got;   /* Linux reads at most 2 GiB - 4 KiB */
        ssize_t r = pread(fd, (uint8_t *)buf + got, (size_t)want, (off_t)(at + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return ddp_fail(err, DDP_ERUNTIME, "checkpoint %s: read: %s", path,
                            r < 0 ? strerror(errno) : "the file ended early (it shrank while being read)");
        got += (uint64_t)r;
    }
    return DDP_OK;
}

/* Reads the whole file into a 64-byte aligned buffer. */
static int slurp(const char *path, void **buf, uint64_t *size, ddp_err *err)
{
    int fd;
    if (open_input(path, &fd, err) != DDP_OK)
        return ddp_prefix(err, "checkpoint");
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return ddp_fail(err, DDP_ERUNTIME, "checkpoint %s: fstat: %s", path, strerror(e));
    }
    *size = (uint64_t)st.st_size;
    *buf = aligned_alloc(CKPT_ALIGN, ckpt_align_up(*size + 1));
    if (!*buf) {
        close(fd);
        return ddp_fail_local(err, "checkpoint %s: out of memory for its %llu bytes", path,
                              (unsigned long long)*size);
    }
    if (ckpt_read_at(fd, path, *buf, *size, 0, err) != DDP_OK) {
        close(fd);
        free(*buf);
        *buf = NULL;
        return err->code;
    }
    close(fd);
    return DDP_OK;
}

/* The magic and the header length only (ckpt_read_table reads the header after it). */
static int check_preamble_len(const char *path, const uint8_t *p, uint64_t size, uint32_t *header_len, ddp_err *err)
{
    if (size < CKPT_PREAMBLE_BYTES || memcmp(p, CKPT_MAGIC, 8) != 0)
        return fail_file(err, path, "not a ddprun checkpoint (bad magic or shorter than 32 bytes)%s", "");
    reader r = {p, CKPT_PREAMBLE_BYTES, 12, false};
    *header_len = (uint32_t)get_le(&r, 4);
    if (*header_len > size - CKPT_PREAMBLE_BYTES)
        return fail_file(err, path, "header length exceeds the file%s", "");
    return DDP_OK;
}

static int check_preamble(const char *path, const uint8_t *p, uint64_t size, uint32_t *header_len, ddp_err *err)
{
    if (size < CKPT_PREAMBLE_BYTES || memcmp(p, CKPT_MAGIC, 8) != 0)
        return fail_file(err, path, "not a ddprun checkpoint (bad magic or shorter than 32 bytes)%s", "");
    reader r = {p, CKPT_PREAMBLE_BYTES, 8, false};
    uint32_t version = (uint32_t)get_le(&r, 4);
    *header_len = (uint32_t)get_le(&r, 4);
    uint64_t file_len = get_le(&r, 8);
    uint32_t stored_crc = (uint32_t)get_le(&r, 4);
    char detail[160];
    if (version != CKPT_FORMAT_VERSION) {
        snprintf(detail, sizeof detail, "%u (this build reads %d%s)", version, CKPT_FORMAT_VERSION,
                 version < CKPT_FORMAT_VERSION ? "; older versions do not record the model's shape: see "
                 "docs/checkpoint-format.md, Compatibility" : "");
        return fail_file(err, path, "unsupported format version %s", detail);
    }
    if (file_len != size) {
        snprintf(detail, sizeof detail, "file is %llu bytes but its header says %llu",
                 (unsigned long long)size, (unsigned long long)file_len);
        return fail_file(err, path, "truncated or extended: %s", detail);
    }
    if (*header_len > size - CKPT_PREAMBLE_BYTES)
        return fail_file(err, path, "header length exceeds the file%s", "");
    uLong crc = crc32_z(crc32_z(0L, p, 24), p + CKPT_PREAMBLE_BYTES, *header_len);
    if ((uint32_t)crc != stored_crc) {
        snprintf(detail, sizeof detail, "stored %08x, computed %08x", stored_crc, (uint32_t)crc);
        return fail_file(err, path, "header CRC mismatch (%s)", detail);
    }
    return DDP_OK;
}

static int read_impl(const char *path, ckpt_loaded *out, bool strict, ddp_err *err)
{
    memset(out, 0, sizeof *out);
    ckpt_loaded c = {0};
    if (slurp(path, &c.blob_, &c.file_bytes, err))
        return err->code;
    uint32_t header_len = 0;
    int rc = check_preamble(path, c.blob_, c.file_bytes, &header_len, err);
    reader r = {rc ? NULL : (const uint8_t *)c.blob_ + CKPT_PREAMBLE_BYTES, header_len, 0, false};
    if (!rc)
        rc = decode_header(path, &r, &c, err);
    if (!rc)
        rc = decode_table(path, &r, &c, ckpt_align_up(CKPT_PREAMBLE_BYTES + (uint64_t)header_len), err);
    for (int i = 0; !rc && i < c.n_tensors; i++) {
        ckpt_tensor *t = &c.tensors[i];
        t->crc_ok = (uint32_t)crc32_z(0L, t->data, t->nbytes) == t->crc;
        if (!t->crc_ok && strict)
            rc = fail_file(err, path, "CRC mismatch in tensor %s (data corrupt)", t->name);
    }
    if (rc) {
        ckpt_loaded_free(&c);
        return rc;
    }
    *out = c;
    return DDP_OK;
}

/* The first n bytes of fd into a 64-byte aligned buffer (n + 1 at least, so n may be 0). */
static int read_prefix(int fd, const char *path, uint64_t n, void **buf, ddp_err *err)
{
    *buf = aligned_alloc(CKPT_ALIGN, ckpt_align_up(n + 1));
    if (!*buf)
        return ddp_fail_local(err, "checkpoint %s: out of memory for %llu bytes", path, (unsigned long long)n);
    if (ckpt_read_at(fd, path, *buf, n, 0, err) != DDP_OK) {
        free(*buf);
        *buf = NULL;
        return err->code;
    }
    return DDP_OK;
}

/* The preamble and header section of the file (c->blob_), c->file_bytes its length. */
static int read_header_bytes(const char *path, ckpt_loaded *c, uint32_t *header_len, ddp_err *err)
{
    int fd;
    if (open_input(path, &fd, err) != DDP_OK)
        return ddp_prefix(err, "checkpoint");
    struct stat st;
    int rc = fstat(fd, &st) == 0 ? DDP_OK : ddp_fail(err, DDP_ERUNTIME, "checkpoint %s: fstat: %s", path, strerror(errno));
    c->file_bytes = rc ? 0 : (uint64_t)st.st_size;
    uint64_t want = c->file_bytes < CKPT_PREAMBLE_BYTES ? c->file_bytes : CKPT_PREAMBLE_BYTES;
    if (!rc)
        rc = read_prefix(fd, path, want, &c->blob_, err);
    if (!rc)
        rc = check_preamble_len(path, c->blob_, c->file_bytes, header_len, err);
    if (!rc) {
        free(c->blob_);
        rc = read_prefix(fd, path, CKPT_PREAMBLE_BYTES + (uint64_t)*header_len, &c->blob_, err);
    }
    close(fd);
    return rc;
}

int ckpt_read_table(const char *path, ckpt_loaded *out, uint32_t *header_crc, ddp_err *err)
{
    memset(out, 0, sizeof *out);
    ckpt_loaded c = {0};
    uint32_t header_len = 0;
    int rc = read_header_bytes(path, &c, &header_len, err);
    if (!rc)
        rc = check_preamble(path, c.blob_, c.file_bytes, &header_len, err);
    reader r = {rc ? NULL : (const uint8_t *)c.blob_ + CKPT_PREAMBLE_BYTES, header_len, 0, false};
    if (!rc)
        rc = decode_header(path, &r, &c, err);
    if (!rc)
        rc = decode_table(path, &r, &c, ckpt_align_up(CKPT_PREAMBLE_BYTES + (uint64_t)header_len), err);
    if (rc) {
        ckpt_loaded_free(&c);
        return rc;
    }
    for (int i = 0; i < c.n_tensors; i++)
        c.tensors[i].data = NULL;
    if (header_crc)
        *header_crc = (uint32_t)(((const uint8_t *)c.blob_)[24] | ((const uint8_t *)c.blob_)[25] << 8 |
                                 ((const uint8_t *)c.blob_)[26] << 16 | (uint32_t)((const uint8_t *)c.blob_)[27] << 24);
    *out = c;
    return DDP_OK;
}

int ckpt_read(const char *path, ckpt_loaded *out, ddp_err *err) { return read_impl(path, out, true, err); }
int ckpt_read_lenient(const char *path, ckpt_loaded *out, ddp_err *err) { return read_impl(path, out, false, err); }

const ckpt_tensor *ckpt_loaded_tensor(const ckpt_loaded *c, const char *name)
{
    for (int i = 0; i < c->n_tensors; i++)
        if (strcmp(c->tensors[i].name, name) == 0)
            return &c->tensors[i];
    return NULL;
}

const rng *ckpt_loaded_rng(const ckpt_loaded *c, const char *name)
{
    for (int i = 0; i < c->hdr.n_rng; i++)
        if (strcmp(c->hdr.rng[i].name, name) == 0)
            return &c->hdr.rng[i].state;
    return NULL;
}

void ckpt_loaded_free(ckpt_loaded *c)
{
    free(c->tensors);
    free(c->blob_);
    memset(c, 0, sizeof *c);
}
