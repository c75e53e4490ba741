/* safetensors_write.c — writing a safetensors file (see safetensors_write.h for the layout).
 *
 * Owns the header's text (compact JSON, names escaped as JSON strings, padded to 8 bytes), the
 * name order and the packing of the data, and the float32 -> file dtype conversion in chunks.
 * The atomic write is runtime/base/replace_file.h's. Must not know what any tensor is for. */
#include "safetensors_write.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/base/half.h"
#include "runtime/base/replace_file.h"

#define CHUNK 65536 /* elements converted per write */
#define HEADER_ALIGN 8

uint64_t safetensors_out_numel(const st_out_tensor *t)
{
    uint64_t n = 1;
    for (int d = 0; d < t->ndim; d++)
        n *= (uint64_t)t->shape[d];
    return n;
}

/* ---- the header --------------------------------------------------------------------------- */

typedef struct text {
    char *p;
    size_t len, cap;
    bool oom;
} text;

static void put(text *t, const char *s, size_t n)
{
    if (t->oom)
        return;
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 4096;
        while (cap < t->len + n + 1)
            cap *= 2;
        char *p = realloc(t->p, cap);
        if (!p) {
            t->oom = true;
            return;
        }
        t->p = p, t->cap = cap;
    }
    memcpy(t->p + t->len, s, n);
    t->len += n;
    t->p[t->len] = 0;
}

static void puts_(text *t, const char *s) { put(t, s, strlen(s)); }

static void putf(text *t, const char *fmt, unsigned long long a, unsigned long long b)
{
    char buf[64];
    int n = snprintf(buf, sizeof buf, fmt, a, b);
    put(t, buf, (size_t)n);
}

/* s as a JSON string, escaped as serde_json escapes: \" \\ \b \f \n \r \t, other controls \u00XX. */
static void put_string(text *t, const char *s)
{
    put(t, "\"", 1);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        const char *esc = *c == '"' ? "\\\"" : *c == '\\' ? "\\\\" : *c == '\b' ? "\\b" : *c == '\f' ? "\\f"
                        : *c == '\n' ? "\\n" : *c == '\r' ? "\\r" : *c == '\t' ? "\\t" : NULL;
        if (esc)
            puts_(t, esc);
        else if (*c < 0x20)
            putf(t, "\\u%04llx", *c, 0);
        else
            put(t, (const char *)c, 1);
    }
    put(t, "\"", 1);
}

static int by_name(const void *a, const void *b)
{
    return strcmp((*(const st_out_tensor *const *)a)->name, (*(const st_out_tensor *const *)b)->name);
}

/* The header JSON, padded with spaces to a multiple of 8; order[] is the tensors in name order. */
static void header_text(text *t, const st_out_tensor *const *order, size_t n, st_dtype dtype)
{
    puts_(t, "{\"__metadata__\":{\"format\":\"pt\"}");
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        put(t, ",", 1);
        put_string(t, order[i]->name);
        puts_(t, ":{\"dtype\":\"");
        puts_(t, safetensors_dtype_name(dtype));
        puts_(t, "\",\"shape\":[");
        for (int d = 0; d < order[i]->ndim; d++)
            putf(t, d ? ",%llu" : "%llu", (unsigned long long)order[i]->shape[d], 0);
        uint64_t end = off + safetensors_out_numel(order[i]) * safetensors_dtype_size(dtype);
        putf(t, "],\"data_offsets\":[%llu,%llu]}", off, end);
        off = end;
    }
    put(t, "}", 1);
    while (t->len % HEADER_ALIGN)
        put(t, " ", 1);
}

/* ---- the file ----------------------------------------------------------------------------- */

typedef struct body {
    const st_out_tensor *const *order;
    size_t n;
    st_dtype dtype;
    const text *header;
} body;

/* n values as dtype, little-endian, into out. */
static size_t encode(const float *v, size_t n, st_dtype dtype, uint8_t *out)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u = dtype == ST_BF16 ? float_to_bf16(v[i]) : fp16_float_bits(v[i]);
        for (unsigned b = 0; b < safetensors_dtype_size(dtype); b++)
            *out++ = (uint8_t)(u >> (8 * b));
    }
    return n * safetensors_dtype_size(dtype);
}

static int write_body(int fd, const char *tmp, void *ctx, ddp_err *err)
{
    const body *b = ctx;
    uint8_t len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (uint8_t)((uint64_t)b->header->len >> (8 * i));
    int rc = replace_file_write(fd, tmp, len, sizeof len, err);
    if (!rc)
        rc = replace_file_write(fd, tmp, b->header->p, b->header->len, err);
    uint8_t *buf = rc ? NULL : malloc(4 * CHUNK);
    if (!rc && !buf)
        rc = ddp_fail(err, DDP_ERUNTIME, "%s: out of memory", tmp);
    for (size_t i = 0; !rc && i < b->n; i++) {
        uint64_t numel = safetensors_out_numel(b->order[i]);
        for (uint64_t done = 0; !rc && done < numel; done += CHUNK) {
            size_t k = numel - done < CHUNK ? (size_t)(numel - done) : CHUNK;
            rc = replace_file_write(fd, tmp, buf, encode(b->order[i]->values + done, k, b->dtype, buf), err);
        }
    }
    free(buf);
    return rc;
}

int safetensors_write(const char *path, const st_out_tensor *tensors, size_t n, st_dtype dtype, ddp_err *err)
{
    if (dtype != ST_F32 && dtype != ST_BF16)
        return ddp_fail(err, DDP_EUSAGE, "%s: writing %s is not supported (F32 or BF16)", path,
                        safetensors_dtype_name(dtype));
    const st_out_tensor **order = malloc((n ? n : 1) * sizeof *order);
    if (!order)
        return ddp_fail(err, DDP_ERUNTIME, "%s: out of memory", path);
    int rc = DDP_OK;
    for (size_t i = 0; i < n; i++) {
        order[i] = &tensors[i];
        if (tensors[i].ndim < 0 || tensors[i].ndim > SAFETENSORS_MAX_DIMS)
            rc = ddp_fail(err, DDP_EUSAGE, "%s: tensor %s has %d dimensions (at most %d)", path, tensors[i].name,
                          tensors[i].ndim, SAFETENSORS_MAX_DIMS);
    }
    qsort(order, n, sizeof *order, by_name);
    for (size_t i = 1; !rc && i < n; i++)
        if (!strcmp(order[i - 1]->name, order[i]->name))
            rc = ddp_fail(err, DDP_EUSAGE, "%s: tensor %s given twice", path, order[i]->name);
    text header = {0};
    if (!rc)
        header_text(&header, order, n, dtype);
    if (!rc && header.oom)
        rc = ddp_fail(err, DDP_ERUNTIME, "%s: out of memory for the header", path);
    if (!rc)
        rc = replace_file_fd(path, write_body, &(body){order, n, dtype, &header}, err);
    free(header.p);
    free(order);
    return rc;
}
