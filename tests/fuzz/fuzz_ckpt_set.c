/* fuzz_ckpt_set.c — libFuzzer target for reading a sharded checkpoint set back (ckpt_manifest_read,
 * ckpt_set_load, and tensor by tensor: ckpt_set_open, ckpt_set_read_range; runtime/ckpt/ckpt_set.h).
 *
 * Every file of a set is an ordinary checkpoint whose CRCs the single-file target already fuzzes,
 * so this harness writes well-formed files (ckpt_write_atomic_as) of fuzzed content, to reach what a
 * set adds: the manifest's tables and the shards' pieces. Input: a flags byte, then parts separated
 * by "@@PART@@": the manifest's set/buffers, set/tensor_names, set/shard_names (text, a name a
 * line), set/buffer_len, set/tensor_dims, set/shard_info and set/extents (little-endian int64 rows
 * of 1, 2 + CKPT_MAX_NDIM, 2 and 4 columns; a partial row is dropped), then one part a shard: its
 * pieces' names, one a line, each written as float32 values v(prefix, element) when it parses as
 * "<prefix>@<offset>+<count>" (count up to MAX_PIECE), else as one value. Shard k is the file the
 * k-th line of set/shard_names names (the plain names alone; others are not written). With flag bit
 * 0 the harness overwrites set/shard_info's rows with the shards' true lengths and header CRCs, so
 * mutations reach the pieces. A set that reads back must name plain shard files, hold tensors of
 * valid shapes and distinct names (each inside its field) inside its buffers, whose values are the
 * pieces' (v of the buffer's element); the harness aborts otherwise. Must not print. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/ckpt/ckpt.h"
#include "runtime/ckpt/ckpt_set.h"
#include "tests/fuzz/fuzz_util.h"

#define INPUT_MAX_BYTES (256 * 1024)
#define TABLES 7
#define MAX_SHARDS 4
#define MAX_PIECE 4096
#define MAX_FLOATS (1 << 22) /* a set the harness loads whole: at most this many floats claimed */
#define DIMS_COLS (2 + CKPT_MAX_NDIM)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Element g of the buffer with prefix p: a value that tells buffers and elements apart. */
static float value_of(const char *prefix, int64_t g)
{
    uint32_t h = 2166136261u;
    for (const char *c = prefix; *c; c++)
        h = (h ^ (uint8_t)*c) * 16777619u;
    return (float)(h % 997) + (float)(g % 4093) / 4096.0f;
}

/* Line k of text (without its newline) into out; false when there is no such line or it is too long. */
static bool line_of(const fuzz_part *text, int k, char *out, size_t size)
{
    if (!text->p) /* a part the input does not have */
        return false;
    const char *p = (const char *)text->p, *end = p + text->n;
    for (int i = 0; p < end; i++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *stop = nl ? nl : end;
        if (i == k) {
            if ((size_t)(stop - p) >= size)
                return false;
            memcpy(out, p, (size_t)(stop - p));
            out[stop - p] = '\0';
            return true;
        }
        p = nl ? nl + 1 : end;
    }
    return false;
}

/* A name the harness may write as a file of its folder. */
static bool plain_name(const char *name)
{
    return name[0] && !strchr(name, '/') && strcmp(name, ".") && strcmp(name, "..") && strcmp(name, CKPT_SET_MANIFEST);
}

static const ckpt_header header = {.step = 7, .total_steps = 10, .world_size = 2, .model = "fuzz"};

/* Shard file `name`: the pieces the lines of `lines` name. */
static void write_shard(const char *name, const fuzz_part *lines)
{
    ckpt_tensor t[64];
    float *values[64];
    int n = 0;
    char piece[CKPT_NAME_MAX];
    for (int k = 0; n < 64 && line_of(lines, k, piece, sizeof piece); k++) {
        const char *at = strrchr(piece, '@');
        long long off = 0, cnt = 1;
        char end;
        if (!at || sscanf(at + 1, "%lld+%lld%c", &off, &cnt, &end) != 2 || off < 0 || off > INT64_MAX - MAX_PIECE ||
            cnt < 1 || cnt > MAX_PIECE)
            off = 0, cnt = 1, at = NULL;
        char prefix[CKPT_NAME_MAX];
        snprintf(prefix, sizeof prefix, "%.*s", at ? (int)(at - piece) : 0, piece);
        values[n] = malloc((size_t)cnt * sizeof(float));
        if (!values[n])
            abort();
        for (long long i = 0; i < cnt; i++)
            values[n][i] = value_of(prefix, off + i);
        t[n] = (ckpt_tensor){.dtype = CKPT_F32, .ndim = 1, .shape = {cnt}, .data = values[n]};
        snprintf(t[n].name, sizeof t[n].name, "%s", piece);
        n++;
    }
    const ckpt_state s = {.hdr = header, .n_tensors = n, .tensors = t};
    ddp_err err = {0};
    ckpt_write_atomic_as(fuzz_dir(), name, &s, NULL, &err); /* a table it refuses (a name twice): no file */
    for (int i = 0; i < n; i++)
        free(values[i]);
}

/* set/shard_info's rows made the shards' true lengths and header CRCs (a shard not there: left). */
static void repair_info(int64_t *info, int rows, const fuzz_part *names)
{
    char name[CKPT_NAME_MAX], path[512];
    for (int k = 0; k < rows; k++) {
        ckpt_loaded c;
        uint32_t crc;
        ddp_err err = {0};
        if (!line_of(names, k, name, sizeof name) || !plain_name(name))
            continue;
        fuzz_path(path, sizeof path, name);
        if (ckpt_read_table(path, &c, &crc, &err) == DDP_OK) {
            info[2 * k] = (int64_t)c.file_bytes;
            info[2 * k + 1] = crc;
        }
        ckpt_loaded_free(&c);
    }
}

/* The manifest from the parts' tables; the int64 tables copied to aligned rows. */
static void write_manifest(const fuzz_part *p, bool repair)
{
    static const char *const names[TABLES] = {"set/buffers", "set/tensor_names", "set/shard_names", "set/buffer_len",
                                              "set/tensor_dims", "set/shard_info", "set/extents"};
    static const int cols[TABLES] = {0, 0, 0, 1, DIMS_COLS, 2, 4};
    ckpt_tensor t[TABLES];
    int64_t *rows[TABLES] = {0};
    for (int i = 0; i < TABLES; i++) {
        t[i] = (ckpt_tensor){.dtype = cols[i] ? CKPT_I64 : CKPT_U8, .ndim = cols[i] ? 2 : 1};
        snprintf(t[i].name, sizeof t[i].name, "%s", names[i]);
        if (!cols[i]) {
            t[i].shape[0] = (int64_t)p[i].n, t[i].data = p[i].n ? p[i].p : (const uint8_t *)"";
            continue;
        }
        const size_t n = p[i].n / (8 * (size_t)cols[i]);
        rows[i] = calloc(n * (size_t)cols[i] + 1, sizeof(int64_t));
        if (!rows[i])
            abort();
        if (n)
            memcpy(rows[i], p[i].p, n * (size_t)cols[i] * 8);
        t[i].shape[0] = (int64_t)n, t[i].shape[1] = cols[i], t[i].data = rows[i];
    }
    if (repair)
        repair_info(rows[5], (int)t[5].shape[0], &p[2]);
    const ckpt_state s = {.hdr = header, .n_tensors = TABLES, .tensors = t};
    ddp_err err = {0};
    if (ckpt_write_atomic_as(fuzz_dir(), CKPT_SET_MANIFEST, &s, NULL, &err) != DDP_OK)
        abort(); /* seven distinct names: always writable */
    for (int i = 0; i < TABLES; i++)
        free(rows[i]);
}

/* A manifest that reads: plain shard names, tensors of valid shapes inside the buffers. */
static void check_manifest(const ckpt_manifest *m)
{
    for (int s = 0; s < m->n_shards; s++)
        if (strnlen(m->shards[s].name, CKPT_SET_SHARD_NAME_MAX) == CKPT_SET_SHARD_NAME_MAX ||
            !plain_name(m->shards[s].name))
            abort();
    for (int i = 0; i < m->n_tensors; i++) {
        const ckpt_set_tensor *t = &m->tensors[i];
        uint64_t numel = 1;
        if (strnlen(t->name, CKPT_NAME_MAX) == CKPT_NAME_MAX || !t->name[0] || t->ndim < 0 ||
            t->ndim > CKPT_MAX_NDIM || t->offset < 0)
            abort();
        for (int d = 0; d < t->ndim; d++) {
            if (t->shape[d] < 0 || (t->shape[d] && numel > (uint64_t)INT64_MAX / (uint64_t)t->shape[d]))
                abort();
            numel *= (uint64_t)t->shape[d];
        }
        if (numel > (uint64_t)(m->buffer_len - t->offset))
            abort();
        for (int j = 0; j < i; j++)
            if (!strcmp(m->tensors[j].name, t->name))
                abort();
    }
}

/* The prefix of the buffer a loaded tensor's name starts with, from the manifest's list. */
static const char *prefix_of(const ckpt_manifest *m, const char *name)
{
    for (int b = 0; b < m->n_buffers; b++)
        if (!strncmp(name, m->buffers[b], strlen(m->buffers[b])))
            return m->buffers[b];
    return NULL;
}

/* The set loaded whole: distinct names, sizes that match shapes, every value the pieces'. */
static void check_loaded(const ckpt_manifest *m, const ckpt_loaded *c)
{
    for (int i = 0; i < c->n_tensors; i++) {
        const ckpt_tensor *t = &c->tensors[i];
        if (ckpt_loaded_tensor(c, t->name) != t || ckpt_tensor_numel(t) * ckpt_dtype_size(t->dtype) != t->nbytes)
            abort();
        if (t->dtype != CKPT_F32)
            continue;
        const char *prefix = prefix_of(m, t->name);
        const ckpt_set_tensor *st = NULL;
        for (int k = 0; prefix && k < m->n_tensors; k++)
            if (!strcmp(m->tensors[k].name, t->name + strlen(prefix)))
                st = &m->tensors[k];
        if (!st)
            abort();
        const float *v = t->data;
        for (uint64_t j = 0; j < t->nbytes / 4; j++)
            if (v[j] != value_of(prefix, st->offset + (int64_t)j))
                abort();
    }
}

/* Tensor by tensor: each buffer's first elements read as the pieces hold them. */
static void check_reader(const ckpt_manifest *m)
{
    ckpt_set_reader *r;
    ddp_err err = {0};
    if (ckpt_set_open(fuzz_dir(), &r, &err) != DDP_OK)
        return;
    float out[64];
    const int64_t n = m->buffer_len < 64 ? m->buffer_len : 64;
    for (int b = 0; b < m->n_buffers; b++) {
        if (ckpt_set_read_range(r, m->buffers[b], 0, n, out, &err) != DDP_OK)
            abort(); /* the set opened: every piece is there */
        for (int64_t j = 0; j < n; j++)
            if (out[j] != value_of(m->buffers[b], j))
                abort();
    }
    ckpt_set_close(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > INPUT_MAX_BYTES)
        return 0;
    fuzz_part parts[TABLES + MAX_SHARDS] = {0};
    const size_t n = fuzz_split(data + 1, size - 1, "@@PART@@", 8, parts, TABLES + MAX_SHARDS);
    char name[CKPT_NAME_MAX];
    for (size_t k = TABLES; k < n; k++)
        if (line_of(&parts[2], (int)(k - TABLES), name, sizeof name) && plain_name(name))
            write_shard(name, &parts[k]);
    write_manifest(parts, data[0] & 1);

    ckpt_manifest m;
    ddp_err err = {0};
    if (ckpt_manifest_read(fuzz_dir(), &m, &err) == DDP_OK) {
        check_manifest(&m);
        ckpt_loaded c;
        if ((uint64_t)m.n_buffers * (uint64_t)m.buffer_len <= MAX_FLOATS &&
            ckpt_set_load(fuzz_dir(), &c, &err) == DDP_OK) {
            check_loaded(&m, &c);
            ckpt_loaded_free(&c);
            check_reader(&m);
        }
        ckpt_manifest_free(&m);
    } else if (m.tensors || m.shards || m.extents || !err.msg[0]) {
        abort(); /* a failed read leaves nothing behind and says why */
    }
    fuzz_clear_dir(fuzz_dir());
    return 0;
}
