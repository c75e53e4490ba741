/* ckpt_set_load.c — reading a sharded checkpoint set back (ckpt_set.h): whole, as the one
 * checkpoint a single file would have been (a resume, `ckpt diff`), or tensor by tensor from
 * read-only maps of the shard files (`ckpt export`), so that an export holds no copy of the model;
 * and checking a file's or a shard's CRCs a few MiB at a time (`ckpt info`), so that a checkpoint
 * larger than this machine's memory is checked too.
 *
 * Every shard is checked against the manifest (its length and header CRC) and every piece's CRC
 * before anything is returned. This file must not write or remove anything. */
#include "ckpt_set_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include "runtime/base/host_mem.h"
#include "runtime/base/open_input.h"

/* The stored header CRC in a file's preamble (bytes 24..27, little-endian). */
static uint32_t stored_header_crc(const ckpt_loaded *c)
{
    const uint8_t *p = c->blob_;
    return (uint32_t)p[24] | (uint32_t)p[25] << 8 | (uint32_t)p[26] << 16 | (uint32_t)p[27] << 24;
}

/* Extent e's piece in its shard's table tab (float32, e's count of them), its name in piece; NULL
 * when tab has no such tensor. */
static const ckpt_tensor *extent_piece(const ckpt_manifest *m, const ckpt_extent *e, const ckpt_loaded *tab,
                                       char piece[CKPT_NAME_MAX])
{
    ckpt_set_piece_name(m->buffers[e->buffer], e->offset, e->count, piece, CKPT_NAME_MAX);
    const ckpt_tensor *t = ckpt_loaded_tensor(tab, piece);
    return t && t->dtype == CKPT_F32 && ckpt_tensor_numel(t) == (uint64_t)e->count ? t : NULL;
}

/* Shard s read in full, its pieces copied into global (the buffers one after another). */
static int fill_from_shard(const char *set_dir, const ckpt_manifest *m, int s, float *global, ddp_err *err)
{
    char path[CKPT_PATH_MAX], piece[CKPT_NAME_MAX];
    snprintf(path, sizeof path, "%s/%s", set_dir, m->shards[s].name);
    ckpt_loaded c;
    if (ckpt_read(path, &c, err))
        return err->code;
    int rc = DDP_OK;
    if (c.file_bytes != m->shards[s].bytes || stored_header_crc(&c) != m->shards[s].header_crc)
        rc = ddp_fail(err, DDP_ERUNTIME, "checkpoint %s: %llu bytes with header CRC %08x; the manifest says %llu bytes "
                      "with %08x (a shard of another save)", path, (unsigned long long)c.file_bytes,
                      stored_header_crc(&c), (unsigned long long)m->shards[s].bytes, m->shards[s].header_crc);
    for (int i = 0; rc == DDP_OK && i < m->n_extents; i++) {
        const ckpt_extent *e = &m->extents[i];
        if (e->shard != s)
            continue;
        const ckpt_tensor *t = extent_piece(m, e, &c, piece);
        if (!t)
            rc = ddp_fail(err, DDP_ERUNTIME, "checkpoint %s: piece %s is missing", path, piece);
        else
            memcpy(global + (size_t)e->buffer * (size_t)m->buffer_len + (size_t)e->offset, t->data,
                   (size_t)e->count * sizeof(float));
    }
    ckpt_loaded_free(&c);
    return rc;
}

/* Where meta/train_samples lies in the assembled buffers' allocation, in floats: after the
 * buffers, 8-byte aligned; meta/config's bytes follow it. */
static size_t samples_at(const ckpt_manifest *m)
{
    size_t floats = (size_t)m->n_buffers * (size_t)m->buffer_len;
    return (floats + 1) & ~(size_t)1;
}

/* out's tensors over the assembled buffers, as a single file names them, then meta/config and
 * meta/train_samples (their bytes in the tail of global that ckpt_set_load reserves). */
static int describe(const ckpt_manifest *m, ckpt_loaded *out, float *global, ddp_err *err)
{
    int n = m->n_buffers * m->n_tensors;
    out->tensors = calloc((size_t)n + 3, sizeof *out->tensors);
    if (!out->tensors)
        return ddp_fail_local(err, "checkpoint: out of memory");
    int k = 0;
    for (int b = 0; b < m->n_buffers; b++)
        for (int i = 0; i < m->n_tensors; i++, k++) {
            ckpt_tensor *x = &out->tensors[k];
            const ckpt_set_tensor *t = &m->tensors[i];
            snprintf(x->name, sizeof x->name, "%s%s", m->buffers[b], t->name);
            x->dtype = CKPT_F32;
            x->ndim = t->ndim;
            memcpy(x->shape, t->shape, sizeof x->shape);
            x->data = global + (size_t)b * (size_t)m->buffer_len + (size_t)t->offset;
            x->nbytes = ckpt_tensor_numel(x) * sizeof(float);
            x->crc_ok = true; /* its pieces' CRCs were checked; crc stays 0: the set stores none for it */
        }
    int64_t *samples = (int64_t *)(global + samples_at(m));
    if (m->train_samples > 0) {
        *samples = m->train_samples;
        out->tensors[k++] = (ckpt_tensor){.name = CKPT_TRAIN_SAMPLES_TENSOR, .dtype = CKPT_I64, .ndim = 1,
                                          .shape = {1}, .data = samples, .nbytes = sizeof *samples, .crc_ok = true};
    }
    if (m->settings) {
        uint8_t *text = (uint8_t *)(samples + 1);
        memcpy(text, m->settings, m->settings_len);
        out->tensors[k] = (ckpt_tensor){.name = CKPT_SETTINGS_TENSOR, .dtype = CKPT_U8, .ndim = 1,
                                        .shape = {(int64_t)m->settings_len}, .data = text, .nbytes = m->settings_len,
                                        .crc_ok = true};
        k++;
    }
    out->n_tensors = k;
    return DDP_OK;
}

int ckpt_set_load(const char *set_dir, ckpt_loaded *out, ddp_err *err)
{
    memset(out, 0, sizeof *out);
    ckpt_manifest m;
    if (ckpt_manifest_read(set_dir, &m, err))
        return err->code;
    size_t floats = (size_t)m.n_buffers * (size_t)m.buffer_len;
    /* the buffers, then meta/train_samples and meta/config */
    float *global =
        aligned_alloc(CKPT_ALIGN, ckpt_align_up(samples_at(&m) * sizeof(float) + sizeof(int64_t) + m.settings_len + 1));
    int rc = global ? DDP_OK
                    : ddp_fail_local(err, "checkpoint %s: out of memory for %zu floats", set_dir, floats);
    ckpt_loaded c = {.hdr = m.hdr, .blob_ = global};
    for (int s = 0; rc == DDP_OK && s < m.n_shards; s++) {
        rc = fill_from_shard(set_dir, &m, s, global, err);
        c.file_bytes += m.shards[s].bytes;
    }
    if (rc == DDP_OK)
        rc = describe(&m, &c, global, err);
    c.file_bytes += m.raw_.file_bytes;
    ckpt_manifest_free(&m);
    if (rc != DDP_OK) {
        ckpt_loaded_free(&c);
        return rc;
    }
    *out = c;
    return DDP_OK;
}

int ckpt_read_any(const char *path, ckpt_loaded *out, bool lenient, ddp_err *err)
{
    if (ckpt_is_set_dir(path))
        return ckpt_set_load(path, out, err);
    return lenient ? ckpt_read_lenient(path, out, err) : ckpt_read(path, out, err);
}

/* ---- tensor by tensor ---------------------------------------------------------------------- */

struct ckpt_set_reader {
    char dir[CKPT_PATH_MAX];
    ckpt_manifest m;
    ckpt_loaded *tables;     /* each shard's table (file offsets of its pieces) */
    const uint8_t **maps;
    size_t *map_len;
    float **owned;           /* per buffer and tensor: a copy when it is split between shards */
};

/* What ckpt_check_crcs reads at a time. */
#define CRC_CHUNK_BYTES ((size_t)8 << 20)

/* The CRC of fd's bytes [at, at + n) into *crc, read CRC_CHUNK_BYTES at a time into buf. */
static int crc_of_range(int fd, const char *path, uint64_t at, uint64_t n, uint8_t *buf, uint32_t *crc, ddp_err *err)
{
    uLong c = crc32_z(0L, NULL, 0);
    for (uint64_t done = 0; done < n;) {
        size_t want = n - done < CRC_CHUNK_BYTES ? (size_t)(n - done) : CRC_CHUNK_BYTES;
        if (ckpt_read_at(fd, path, buf, want, at + done, err) != DDP_OK)
            return err->code;
        c = crc32_z(c, buf, want);
        done += want;
    }
    *crc = (uint32_t)c;
    return DDP_OK;
}

int ckpt_check_crcs(const char *path, ckpt_loaded *table, ddp_err *err)
{
    int fd;
    if (open_input(path, &fd, err) != DDP_OK)
        return ddp_prefix(err, "checkpoint");
    uint8_t *buf = malloc(CRC_CHUNK_BYTES);
    int rc = buf ? DDP_OK : ddp_fail_local(err, "checkpoint %s: out of memory for a read buffer", path);
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    for (int i = 0; rc == DDP_OK && i < table->n_tensors; i++) {
        ckpt_tensor *t = &table->tensors[i];
        uint32_t crc = 0;
        rc = crc_of_range(fd, path, t->file_offset, t->nbytes, buf, &crc, err);
        t->crc_ok = rc == DDP_OK && crc == t->crc;
    }
    free(buf);
    close(fd);
    return rc;
}

int ckpt_set_check_shard(const char *set_dir, const ckpt_manifest *m, int s, ddp_err *err)
{
    char path[CKPT_PATH_MAX], piece[CKPT_NAME_MAX];
    snprintf(path, sizeof path, "%s/%s", set_dir, m->shards[s].name);
    ckpt_loaded tab;
    if (ckpt_set_shard_table(set_dir, m, s, &tab, err))
        return err->code;
    int rc = ckpt_check_crcs(path, &tab, err);
    for (int i = 0; rc == DDP_OK && i < tab.n_tensors; i++)
        if (!tab.tensors[i].crc_ok)
            rc = ddp_fail(err, DDP_ERUNTIME, "checkpoint %s: CRC mismatch in tensor %s (data corrupt)", path,
                          tab.tensors[i].name);
    for (int i = 0; rc == DDP_OK && i < m->n_extents; i++)
        if (m->extents[i].shard == s && !extent_piece(m, &m->extents[i], &tab, piece))
            rc = ddp_fail(err, DDP_ERUNTIME, "checkpoint %s: piece %s is missing", path, piece);
    ckpt_loaded_free(&tab);
    return rc;
}

/* Piece t of shard s: its CRC checked through the map. */
static int check_piece(const ckpt_set_reader *r, int s, ckpt_tensor *t, ddp_err *err)
{
    if (!t->crc_ok && (uint32_t)crc32_z(0L, t->data, t->nbytes) != t->crc)
        return ddp_fail(err, DDP_ERUNTIME, "checkpoint %s/%s: CRC mismatch in tensor %s (data corrupt)", r->dir,
                        r->m.shards[s].name, t->name);
    t->crc_ok = true;
    return DDP_OK;
}

/* Maps shard s, and with check_all checks every piece's CRC through the map now. */
static int map_shard(ckpt_set_reader *r, const char *set_dir, int s, bool check_all, ddp_err *err)
{
    if (ckpt_set_shard_table(set_dir, &r->m, s, &r->tables[s], err))
        return err->code;
    char path[CKPT_PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", set_dir, r->m.shards[s].name);
    size_t len = (size_t)r->tables[s].file_bytes;
    int fd;
    if (open_input(path, &fd, err) != DDP_OK)
        return ddp_prefix(err, "checkpoint");
    void *p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
    int why = errno;
    close(fd);
    if (p == MAP_FAILED)   /* a map this machine cannot make (ENOMEM) is its failure */
        return why == ENOMEM ? ddp_fail_local(err, "checkpoint %s: cannot map it: %s", path, strerror(why))
                             : ddp_fail(err, DDP_ERUNTIME, "checkpoint %s: cannot map it: %s", path, strerror(why));
    r->maps[s] = p;
    r->map_len[s] = len;
    int rc = DDP_OK;
    for (int i = 0; i < r->tables[s].n_tensors && rc == DDP_OK; i++) {
        ckpt_tensor *t = &r->tables[s].tensors[i];
        t->data = r->maps[s] + t->file_offset;
        rc = check_all ? check_piece(r, s, t, err) : DDP_OK;
    }
    return rc;
}

/* Shard s's table entry for piece e (float32, e's count of them, as extent_piece asks), or NULL. */
static ckpt_tensor *piece_entry(ckpt_set_reader *r, const ckpt_extent *e)
{
    char name[CKPT_NAME_MAX];
    ckpt_set_piece_name(r->m.buffers[e->buffer], e->offset, e->count, name, sizeof name);
    ckpt_loaded *tab = &r->tables[e->shard];
    for (int i = 0; i < tab->n_tensors; i++) {
        ckpt_tensor *t = &tab->tensors[i];
        if (!strcmp(t->name, name))
            return t->dtype == CKPT_F32 && ckpt_tensor_numel(t) == (uint64_t)e->count ? t : NULL;
    }
    return NULL;
}

/* Every extent of the manifest is a piece of its shard's table: the cover alone leaves an extent
 * whose piece is missing, which a read would leave unfilled. */
static int check_pieces(ckpt_set_reader *r, ddp_err *err)
{
    for (int i = 0; i < r->m.n_extents; i++) {
        const ckpt_extent *e = &r->m.extents[i];
        if (!piece_entry(r, e))
            return ddp_fail(err, DDP_ERUNTIME, "checkpoint %s: the manifest's extent %d (%s elements %lld..%lld) is "
                            "not a piece of %s", r->dir, i, r->m.buffers[e->buffer], (long long)e->offset,
                            (long long)(e->offset + e->count), r->m.shards[e->shard].name);
    }
    return DDP_OK;
}

static int open_reader(const char *set_dir, bool check_all, ckpt_set_reader **out, ddp_err *err)
{
    *out = NULL;
    ckpt_set_reader *r = calloc(1, sizeof *r);
    if (!r)
        return ddp_fail_local(err, "checkpoint %s: out of memory", set_dir);
    snprintf(r->dir, sizeof r->dir, "%s", set_dir);
    int rc = ckpt_manifest_read(set_dir, &r->m, err);
    if (rc == DDP_OK) {
        size_t n = (size_t)r->m.n_shards + 1;
        r->tables = calloc(n, sizeof *r->tables);
        r->maps = calloc(n, sizeof *r->maps);
        r->map_len = calloc(n, sizeof *r->map_len);
        r->owned = calloc((size_t)r->m.n_buffers * (size_t)r->m.n_tensors + 1, sizeof *r->owned);
        if (!r->tables || !r->maps || !r->map_len || !r->owned)
            rc = ddp_fail_local(err, "checkpoint %s: out of memory", set_dir);
    }
    for (int s = 0; rc == DDP_OK && s < r->m.n_shards; s++)
        rc = map_shard(r, set_dir, s, check_all, err);
    if (rc == DDP_OK)
        rc = check_pieces(r, err);
    if (rc != DDP_OK) {
        ckpt_set_close(r);
        return rc;
    }
    *out = r;
    return DDP_OK;
}

int ckpt_set_open(const char *set_dir, ckpt_set_reader **out, ddp_err *err)
{
    return open_reader(set_dir, true, out, err);
}

int ckpt_set_open_pieces(const char *set_dir, ckpt_set_reader **out, ddp_err *err)
{
    return open_reader(set_dir, false, out, err);
}

const ckpt_manifest *ckpt_set_reader_manifest(const ckpt_set_reader *r) { return &r->m; }

/* Piece e's floats in its shard's map. */
static const float *piece_data(ckpt_set_reader *r, const ckpt_extent *e)
{
    const ckpt_tensor *t = piece_entry(r, e);
    return t ? (const float *)t->data : NULL;
}

/* Elements [lo, hi) of buffer b: in place when one piece holds them, else copied from each into
 * *copy (made on the first call). */
static const float *buffer_range(ckpt_set_reader *r, int b, int64_t lo, int64_t hi, float **copy)
{
    if (*copy)
        return *copy;
    for (int i = 0; i < r->m.n_extents; i++) {
        const ckpt_extent *e = &r->m.extents[i];
        int64_t from = e->offset > lo ? e->offset : lo, to = e->offset + e->count < hi ? e->offset + e->count : hi;
        const float *src = e->buffer == b && from < to ? piece_data(r, e) : NULL;
        if (!src)
            continue;
        if (from == lo && to == hi)
            return src + (lo - e->offset);
        if (!*copy && !(*copy = malloc((size_t)(hi - lo) * sizeof(float))))
            return NULL;
        memcpy(*copy + (from - lo), src + (from - e->offset), (size_t)(to - from) * sizeof(float));
    }
    return *copy; /* the cover was checked: every element came from one piece */
}

const float *ckpt_set_tensor_f32(ckpt_set_reader *r, const char *prefix, const char *name, size_t numel)
{
    int b = 0;
    while (b < r->m.n_buffers && strcmp(r->m.buffers[b], prefix) != 0)
        b++;
    for (int i = 0; b < r->m.n_buffers && i < r->m.n_tensors; i++) {
        const ckpt_set_tensor *t = &r->m.tensors[i];
        ckpt_tensor x = {.ndim = t->ndim};
        memcpy(x.shape, t->shape, sizeof x.shape);
        if (strcmp(t->name, name) == 0 && ckpt_tensor_numel(&x) == numel && numel > 0)
            return buffer_range(r, b, t->offset, t->offset + (int64_t)numel, &r->owned[b * r->m.n_tensors + i]);
    }
    return NULL;
}

int ckpt_set_read_range(ckpt_set_reader *r, const char *prefix, int64_t offset, int64_t count, float *out,
                        ddp_err *err)
{
    int b = 0;
    while (b < r->m.n_buffers && strcmp(r->m.buffers[b], prefix) != 0)
        b++;
    if (b == r->m.n_buffers)
        return ddp_fail(err, DDP_EUSAGE, "checkpoint %s holds no buffer %s", r->dir, prefix);
    if (offset < 0 || count < 0 || offset > r->m.buffer_len - count) /* no extent would fill it */
        return ddp_fail(err, DDP_EUSAGE, "checkpoint %s: elements [%lld, %lld) of %s lie past its buffers' %lld",
                        r->dir, (long long)offset, (long long)(offset + count), prefix, (long long)r->m.buffer_len);
    for (int i = 0; i < r->m.n_extents; i++) {
        const ckpt_extent *e = &r->m.extents[i];
        int64_t from = e->offset > offset ? e->offset : offset;
        int64_t to = e->offset + e->count < offset + count ? e->offset + e->count : offset + count;
        if (e->buffer != b || from >= to)
            continue;
        ckpt_tensor *t = piece_entry(r, e);
        if (!t)
            return ddp_fail(err, DDP_ERUNTIME, "checkpoint %s/%s lacks the piece of %s at %lld its manifest lists",
                            r->dir, r->m.shards[e->shard].name, prefix, (long long)e->offset);
        int rc = check_piece(r, e->shard, t, err);
        if (rc != DDP_OK)
            return rc;
        memcpy(out + (from - offset), (const float *)t->data + (from - e->offset), (size_t)(to - from) * sizeof *out);
        host_mem_release_pages(t->data, t->nbytes); /* read again from the file should it be needed */
    }
    return DDP_OK; /* the manifest's extents cover every buffer exactly once (ckpt_manifest_read) */
}

void ckpt_set_close(ckpt_set_reader *r)
{
    if (!r)
        return;
    for (int s = 0; r->maps && s < r->m.n_shards; s++)
        if (r->maps[s])
            munmap((void *)r->maps[s], r->map_len[s]);
    for (int s = 0; r->tables && s < r->m.n_shards; s++)
        ckpt_loaded_free(&r->tables[s]);
    for (int i = 0; r->owned && i < r->m.n_buffers * r->m.n_tensors; i++)
        free(r->owned[i]);
    free(r->tables), free(r->maps), free(r->map_len), free(r->owned);
    ckpt_manifest_free(&r->m);
    free(r);
}
