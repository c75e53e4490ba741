/* safetensors.c — mapping and validating a safetensors file (see safetensors.h for the format and
 * the rules).
 *
 * Owns the header's bounds, each entry's fields (the JSON itself is json_doc.c's), the dtype
 * table, the data area's coverage (sorted by offset: no gap, no overlap, nothing after) and the
 * conversion to float32. Must not know what any tensor is for. */
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/base/half.h"
#include "runtime/base/host_mem.h"
#include "runtime/hf/json_doc.h"
#include "runtime/base/open_input.h"

static const struct { const char *name; st_dtype dtype; unsigned size; } dtypes[] = {
    {"F32", ST_F32, 4},   {"F16", ST_F16, 2},   {"BF16", ST_BF16, 2}, {"F64", ST_F64, 8},
    {"F8_E4M3", ST_F8_E4M3, 1}, {"F8_E5M2", ST_F8_E5M2, 1}, {"BOOL", ST_BOOL, 1}, {"U8", ST_U8, 1},
    {"I8", ST_I8, 1},     {"I16", ST_I16, 2},   {"U16", ST_U16, 2},   {"I32", ST_I32, 4},
    {"U32", ST_U32, 4},   {"I64", ST_I64, 8},   {"U64", ST_U64, 8}};

const char *safetensors_dtype_name(st_dtype d) { return dtypes[d].name; }
unsigned safetensors_dtype_size(st_dtype d) { return dtypes[d].size; }
bool safetensors_dtype_readable(st_dtype d) { return d == ST_F32 || d == ST_F16 || d == ST_BF16; }

int safetensors_check_readable(const char *path, const st_tensor *t, ddp_err *err)
{
    return safetensors_dtype_readable(t->dtype)
               ? DDP_OK
               : ddp_fail(err, DDP_EUSAGE, "%s: tensor %s is %s; ddprun reads F32, F16 and BF16 tensors", path,
                          t->name, dtypes[t->dtype].name);
}

/* ---- one header entry --------------------------------------------------------------------- */

typedef struct entry_ctx {
    const json_doc *j;
    const char *name;        /* the tensor's */
    uint64_t data_len;
    ddp_err *err;
} entry_ctx;

static int entry_fail(const entry_ctx *c, const json_node *at, const char *fmt, const char *detail)
{
    char where[600], what[400];
    json_where(c->j, at, where, sizeof where);
    snprintf(what, sizeof what, fmt, detail);
    return ddp_fail(c->err, DDP_EUSAGE, "%s: tensor %.200s: %s", where, c->name, what);
}

static int read_dtype(const entry_ctx *c, const json_node *v, st_tensor *t)
{
    if (json_kind_of(v) != JSON_STRING)
        return entry_fail(c, v, "dtype is %s, expected a string", json_kind_name(json_kind_of(v)));
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (!strcmp(json_text(v), dtypes[i].name)) {
            t->dtype = dtypes[i].dtype;
            return DDP_OK;
        }
    return entry_fail(c, v, "dtype \"%.40s\" is not one of the format's", json_text(v));
}

static int read_shape(const entry_ctx *c, const json_node *v, st_tensor *t)
{
    if (json_kind_of(v) != JSON_ARRAY)
        return entry_fail(c, v, "shape is %s, expected an array of sizes", json_kind_name(json_kind_of(v)));
    if (json_array_size(v) > SAFETENSORS_MAX_DIMS)
        return entry_fail(c, v, "shape has more than %s dimensions", "8");
    t->ndim = (int)json_array_size(v);
    t->numel = 1;
    for (int d = 0; d < t->ndim; d++) {
        const json_node *dim = json_array_at(c->j, v, (size_t)d);
        uint64_t n;
        if (!json_uint(dim, &n) || n > INT64_MAX)
            return entry_fail(c, dim, "shape entry \"%.40s\" is not a size (an integer >= 0)", json_text(dim));
        if (__builtin_mul_overflow(t->numel, n, &t->numel) || t->numel > INT64_MAX)
            return entry_fail(c, dim, "the shape's element count overflows%s", "");
        t->shape[d] = (int64_t)n;
    }
    return DDP_OK;
}

static int read_offsets(const entry_ctx *c, const json_node *v, st_tensor *t)
{
    if (json_kind_of(v) != JSON_ARRAY || json_array_size(v) != 2 || !json_uint(json_array_at(c->j, v, 0), &t->begin) ||
        !json_uint(json_array_at(c->j, v, 1), &t->end))
        return entry_fail(c, v, "data_offsets is not [begin, end] (two integers >= 0)%s", "");
    char detail[160];
    if (t->begin > t->end) {
        snprintf(detail, sizeof detail, "%llu > %llu", (unsigned long long)t->begin, (unsigned long long)t->end);
        return entry_fail(c, v, "data_offsets begin after they end (%s)", detail);
    }
    if (t->end > c->data_len) {
        snprintf(detail, sizeof detail, "ends at byte %llu of a data area of %llu bytes", (unsigned long long)t->end,
                 (unsigned long long)c->data_len);
        return entry_fail(c, v, "data_offsets beyond the file: %s", detail);
    }
    uint64_t want;
    if (__builtin_mul_overflow(t->numel, (uint64_t)dtypes[t->dtype].size, &want)) {
        snprintf(detail, sizeof detail, "%llu %s", (unsigned long long)t->numel, dtypes[t->dtype].name);
        return entry_fail(c, v, "the shape's %s values overflow a byte count", detail);
    }
    if (want != t->end - t->begin) {
        snprintf(detail, sizeof detail, "%llu bytes, but its shape of %llu %s values needs %llu",
                 (unsigned long long)(t->end - t->begin), (unsigned long long)t->numel, dtypes[t->dtype].name,
                 (unsigned long long)want);
        return entry_fail(c, v, "data_offsets span %s", detail);
    }
    return DDP_OK;
}

/* Entry value v of tensor c->name into *t (dtype first: the size check needs it). */
static int read_entry(const entry_ctx *c, const json_node *v, st_tensor *t)
{
    if (json_kind_of(v) != JSON_OBJECT)
        return entry_fail(c, v, "its entry is %s, expected an object", json_kind_name(json_kind_of(v)));
    static const char *const fields[] = {"dtype", "shape", "data_offsets"};
    for (size_t i = 0; i < json_object_size(v); i++) {
        const json_node *value;
        const char *key = json_object_key(c->j, v, i, &value);
        if (strcmp(key, fields[0]) && strcmp(key, fields[1]) && strcmp(key, fields[2]))
            return entry_fail(c, value, "unknown field \"%.60s\" (entries hold dtype, shape and data_offsets)", key);
    }
    const json_node *f[3];
    for (int i = 0; i < 3; i++)
        if (!(f[i] = json_object_get(c->j, v, fields[i])))
            return entry_fail(c, v, "no %s", fields[i]);
    int rc = read_dtype(c, f[0], t);
    if (!rc)
        rc = read_shape(c, f[1], t);
    return rc ? rc : read_offsets(c, f[2], t);
}

static int check_metadata(const json_doc *j, const json_node *v, ddp_err *err)
{
    char where[600];
    json_where(j, v, where, sizeof where);
    if (json_kind_of(v) != JSON_OBJECT)
        return ddp_fail(err, DDP_EUSAGE, "%s: __metadata__ is %s, expected an object of strings", where,
                        json_kind_name(json_kind_of(v)));
    for (size_t i = 0; i < json_object_size(v); i++) {
        const json_node *value;
        const char *key = json_object_key(j, v, i, &value);
        if (json_kind_of(value) != JSON_STRING) {
            json_where(j, value, where, sizeof where);
            return ddp_fail(err, DDP_EUSAGE, "%s: __metadata__ \"%.100s\" is %s, expected a string", where, key,
                            json_kind_name(json_kind_of(value)));
        }
    }
    return DDP_OK;
}

/* ---- the data area ------------------------------------------------------------------------ */

static int by_offset(const void *a, const void *b)
{
    const st_tensor *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return (x->end > y->end) - (x->end < y->end);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const st_tensor *)a)->name, ((const st_tensor *)b)->name);
}

/* The tensors cover [0, data_len) exactly once, in some order. */
static int check_coverage(safetensors *st, uint64_t data_len, ddp_err *err)
{
    qsort(st->tensors, st->count, sizeof *st->tensors, by_offset);
    uint64_t at = 0;
    for (size_t i = 0; i < st->count; i++) {
        const st_tensor *t = &st->tensors[i];
        if (t->begin < at)
            return ddp_fail(err, DDP_EUSAGE, "%s: tensor %.200s (bytes %llu..%llu) overlaps tensor %.200s (ending at "
                            "%llu)", st->path, t->name, (unsigned long long)t->begin, (unsigned long long)t->end,
                            st->tensors[i - 1].name, (unsigned long long)at);
        if (t->begin > at)
            return ddp_fail(err, DDP_EUSAGE, "%s: bytes %llu..%llu of the data area belong to no tensor (tensor "
                            "%.200s starts at %llu)", st->path, (unsigned long long)at, (unsigned long long)t->begin,
                            t->name, (unsigned long long)t->begin);
        at = t->end;
    }
    if (at != data_len)
        return ddp_fail(err, DDP_EUSAGE, "%s: %llu bytes after the last tensor's data (the tensors end at byte %llu of "
                        "%llu)", st->path, (unsigned long long)(data_len - at), (unsigned long long)at,
                        (unsigned long long)data_len);
    qsort(st->tensors, st->count, sizeof *st->tensors, by_name);
    return DDP_OK;
}

/* ---- open and close ----------------------------------------------------------------------- */

static uint64_t get_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static int map_file(const char *path, safetensors *st, ddp_err *err)
{
    int fd;
    int orc = open_input(path, &fd, err);
    if (orc != DDP_OK)
        return orc;
    struct stat sb;
    int rc = DDP_OK;
    if (fstat(fd, &sb) != 0)
        rc = ddp_fail(err, DDP_ERUNTIME, "%s: cannot stat: %s", path, strerror(errno));
    else if (!S_ISREG(sb.st_mode))
        rc = ddp_fail(err, DDP_EUSAGE, "%s: not a regular file", path);
    else if (sb.st_size < 8)
        rc = ddp_fail(err, DDP_EUSAGE, "%s: %lld bytes is too short for a safetensors file (an 8-byte header "
                      "length first)", path, (long long)sb.st_size);
    if (!rc) {
        void *p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED)
            rc = ddp_fail(err, DDP_ERUNTIME, "%s: cannot map: %s", path, strerror(errno));
        else
            st->map = p, st->map_len = (size_t)sb.st_size;
    }
    close(fd);
    return rc;
}

static int read_header(safetensors *st, const json_doc *j, uint64_t data_len, ddp_err *err)
{
    const json_node *root = json_root(j);
    if (json_kind_of(root) != JSON_OBJECT)
        return ddp_fail(err, DDP_EUSAGE, "%s: the header is %s, expected an object", st->path,
                        json_kind_name(json_kind_of(root)));
    st->tensors = calloc(json_object_size(root) + 1, sizeof *st->tensors);
    if (!st->tensors)
        return ddp_fail(err, DDP_ERUNTIME, "%s: out of memory", st->path);
    for (size_t i = 0; i < json_object_size(root); i++) {
        const json_node *v;
        const char *key = json_object_key(j, root, i, &v);
        int rc;
        if (!strcmp(key, "__metadata__")) {
            rc = check_metadata(j, v, err);
        } else {
            st_tensor *t = &st->tensors[st->count];
            entry_ctx c = {j, key, data_len, err};
            rc = read_entry(&c, v, t);
            if (!rc && !(t->name = strdup(key)))
                rc = ddp_fail(err, DDP_ERUNTIME, "%s: out of memory", st->path);
            if (!rc)
                st->count++;
        }
        if (rc)
            return rc;
    }
    return check_coverage(st, data_len, err);
}

int safetensors_open(const char *path, safetensors *out, ddp_err *err)
{
    memset(out, 0, sizeof *out);
    if (!(out->path = strdup(path)))
        return ddp_fail(err, DDP_ERUNTIME, "%s: out of memory", path);
    int rc = map_file(path, out, err);
    uint64_t n = rc ? 0 : get_le64(out->map);
    if (!rc && n > out->map_len - 8)
        rc = ddp_fail(err, DDP_EUSAGE, "%s: header length %llu runs past the file's %zu bytes", path,
                      (unsigned long long)n, out->map_len);
    else if (!rc && n > SAFETENSORS_MAX_HEADER)
        rc = ddp_fail(err, DDP_EUSAGE, "%s: header length %llu is above the limit of %d bytes", path,
                      (unsigned long long)n, SAFETENSORS_MAX_HEADER);
    json_doc j = {0};
    if (!rc)
        rc = json_doc_parse(&j, path, (const char *)out->map + 8, (size_t)n, err);
    if (!rc)
        rc = read_header(out, &j, out->map_len - 8 - n, err);
    json_doc_free(&j);
    for (size_t i = 0; !rc && i < out->count; i++)
        out->tensors[i].data = out->map + 8 + n + out->tensors[i].begin;
    if (rc)
        safetensors_close(out);
    return rc;
}

void safetensors_close(safetensors *st)
{
    for (size_t i = 0; st->tensors && i < st->count; i++)
        free(st->tensors[i].name);
    free(st->tensors);
    if (st->map)
        munmap((void *)st->map, st->map_len);
    free(st->path);
    memset(st, 0, sizeof *st);
}

const st_tensor *safetensors_find(const safetensors *st, const char *name)
{
    st_tensor key = {.name = (char *)name};
    return st->count ? bsearch(&key, st->tensors, st->count, sizeof *st->tensors, by_name) : NULL;
}

void safetensors_to_f32_range(const st_tensor *t, uint64_t first, uint64_t n, float *out)
{
    const uint8_t *p = t->data;
    for (uint64_t i = first; i < first + n; i++) {
        if (t->dtype == ST_F32) {
            uint32_t bits = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
                            (uint32_t)p[4 * i + 3] << 24;
            out[i - first] = fp16_bits_float(bits);
        } else {
            uint16_t h = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
            out[i - first] = t->dtype == ST_F16 ? half_to_float(h) : bf16_to_float(h);
        }
    }
}

void safetensors_to_f32(const st_tensor *t, float *out) { safetensors_to_f32_range(t, 0, t->numel, out); }

bool safetensors_equal_f32(const st_tensor *a, const st_tensor *b)
{
    enum { BLOCK = 4096 };
    float x[BLOCK], y[BLOCK];
    if (a->numel != b->numel || !safetensors_dtype_readable(a->dtype) || !safetensors_dtype_readable(b->dtype))
        return false;
    for (uint64_t i = 0; i < a->numel; i += BLOCK) {
        uint64_t n = a->numel - i < BLOCK ? a->numel - i : BLOCK;
        safetensors_to_f32_range(a, i, n, x);
        safetensors_to_f32_range(b, i, n, y);
        if (memcmp(x, y, n * sizeof *x))
            return false;
    }
    return true;
}

void safetensors_release(const st_tensor *t) { host_mem_release_pages(t->data, t->end - t->begin); }
