/* ckpt_set.c — sharded checkpoint sets (ckpt_set.h): names, the manifest's encoding as an ordinary
 * checkpoint file of its own (docs/checkpoint-format.md, "Sharded checkpoints"), the commit that
 * writes it after reading the shards' tables (then clears what else the set's directory holds), the
 * choice of shard names that leaves a committed set of the same step whole until then, the
 * check that the extents cover every buffer exactly once, and the removal of a whole set.
 *
 * Reading a set back, whole or tensor by tensor, is ckpt_set_load.c's. This file
 * must not write a shard, talk to other ranks or decide when a set is written; the manifest is
 * written only once every shard checked out. */
#include "ckpt_set_internal.h"

#include <dirent.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/base/dirs.h"
#include "runtime/base/log.h"

#define DIMS_COLS (2 + CKPT_MAX_NDIM)

void ckpt_set_dir_name(int64_t step, char *out, size_t size) { snprintf(out, size, "ckpt-%08lld", (long long)step); }

void ckpt_set_shard_name(int shard, int n_shards, bool alternate, char *out, size_t size)
{
    snprintf(out, size, "shard-%05d-of-%05d%s.ddp", shard, n_shards, alternate ? "-alt" : "");
}

void ckpt_set_piece_name(const char *prefix, int64_t offset, int64_t count, char *out, size_t size)
{
    snprintf(out, size, "%s@%lld+%lld", prefix, (long long)offset, (long long)count);
}

int ckpt_set_parse_piece(const ckpt_manifest *m, const char *name, int *buffer, int64_t *offset, int64_t *count)
{
    const char *at = strrchr(name, '@');
    if (!at)
        return -1;
    for (int b = 0; b < m->n_buffers; b++) {
        size_t len = strlen(m->buffers[b]);
        long long off, cnt;
        char end;
        if ((size_t)(at - name) == len && strncmp(name, m->buffers[b], len) == 0 &&
            sscanf(at + 1, "%lld+%lld%c", &off, &cnt, &end) == 2 && off >= 0 && cnt > 0) {
            *buffer = b, *offset = off, *count = cnt;
            return 0;
        }
    }
    return -1;
}

static void path_in(const char *dir, const char *name, char *out)
{
    snprintf(out, CKPT_PATH_MAX, "%s/%s", dir, name);
}

/* ---- the manifest's checks: tensors, shard names, the extents' cover ----------------------- */

static const ckpt_extent *sort_base;
static int by_offset(const void *a, const void *b)
{
    int64_t x = sort_base[*(const int *)a].offset, y = sort_base[*(const int *)b].offset;
    return x < y ? -1 : x > y;
}

/* Buffer b's extents in offset order must tile [0, buffer_len) exactly. */
static int check_buffer_cover(const ckpt_manifest *m, int b, int *idx, const char *what, ddp_err *err)
{
    int n = 0;
    for (int i = 0; i < m->n_extents; i++)
        if (m->extents[i].buffer == b)
            idx[n++] = i;
    sort_base = m->extents;
    qsort(idx, (size_t)n, sizeof *idx, by_offset);
    int64_t at = 0;
    for (int k = 0; k < n; k++) {
        const ckpt_extent *e = &m->extents[idx[k]];
        if (e->offset != at)
            return ddp_fail(err, DDP_ERUNTIME, "%s: buffer %s: elements [%lld, %lld) are %s (%s)", what,
                            m->buffers[b], (long long)(e->offset < at ? e->offset : at),
                            (long long)(e->offset < at ? at : e->offset), e->offset < at ? "held twice" : "held by no shard",
                            m->shards[e->shard].name);
        at = e->offset + e->count;
    }
    if (at != m->buffer_len)
        return ddp_fail(err, DDP_ERUNTIME, "%s: buffer %s: elements [%lld, %lld) are held by no shard", what,
                        m->buffers[b], (long long)at, (long long)m->buffer_len);
    return DDP_OK;
}

int64_t ckpt_set_tensor_numel(const ckpt_set_tensor *t)
{
    return (int64_t)(ckpt_tensor_bytes_checked(CKPT_F32, t->ndim, t->shape) / sizeof(float));
}

/* Each tensor named once (a name of one line, which with each buffer's prefix fits a checkpoint's
 * name, as the set read whole names it) and of a valid shape inside the buffers, as a single file's
 * reader requires of its table; what names the set in errors. */
static int check_tensors(const ckpt_manifest *m, const char *what, ddp_err *err)
{
    int longest = 0; /* the buffer with the longest prefix */
    for (int b = 1; b < m->n_buffers; b++)
        if (strlen(m->buffers[b]) > strlen(m->buffers[longest]))
            longest = b;
    for (int i = 0; i < m->n_tensors; i++) {
        const ckpt_set_tensor *t = &m->tensors[i];
        const uint64_t bytes = ckpt_tensor_bytes_checked(CKPT_F32, t->ndim, t->shape);
        if (!t->name[0] || strchr(t->name, '\n') || bytes == UINT64_MAX)
            return ddp_fail(err, DDP_ERUNTIME, "%s: tensor \"%s\" has no name or an invalid shape", what, t->name);
        if (t->offset < 0 || t->offset > m->buffer_len ||
            bytes / sizeof(float) > (uint64_t)(m->buffer_len - t->offset))
            return ddp_fail(err, DDP_ERUNTIME, "%s: tensor %s lies outside the buffers", what, t->name);
        if (m->n_buffers > 0 && strlen(m->buffers[longest]) + strlen(t->name) >= CKPT_NAME_MAX)
            return ddp_fail(err, DDP_ERUNTIME, "%s: tensor %s%s: a name of over %d bytes", what, m->buffers[longest],
                            t->name, CKPT_NAME_MAX - 1);
    }
    const char *twice;
    if (ckpt_find_repeated_name(m->tensors, m->n_tensors, sizeof *m->tensors, offsetof(ckpt_set_tensor, name), &twice))
        return ddp_fail(err, DDP_ERUNTIME, "%s: out of memory checking %d tensor names", what, m->n_tensors);
    return twice ? ddp_fail(err, DDP_ERUNTIME, "%s: tensor %s appears twice", what, twice) : DDP_OK;
}

/* Each shard a file of the set's own directory, named once: a manifest never sends a read elsewhere. */
static int check_shard_names(const ckpt_manifest *m, const char *what, ddp_err *err)
{
    for (int s = 0; s < m->n_shards; s++) {
        const char *name = m->shards[s].name;
        if (!name[0] || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, "..") ||
            !strcmp(name, CKPT_SET_MANIFEST))
            return ddp_fail(err, DDP_ERUNTIME, "%s: shard \"%s\" is not a file name of the set's directory", what,
                            name);
    }
    const char *twice;
    if (ckpt_find_repeated_name(m->shards, m->n_shards, sizeof *m->shards, offsetof(ckpt_set_shard, name), &twice))
        return ddp_fail(err, DDP_ERUNTIME, "%s: out of memory checking %d shard names", what, m->n_shards);
    return twice ? ddp_fail(err, DDP_ERUNTIME, "%s: shard %s appears twice", what, twice) : DDP_OK;
}

int ckpt_set_check_cover(const ckpt_manifest *m, const char *what, ddp_err *err)
{
    for (int i = 0; i < m->n_extents; i++) {
        const ckpt_extent *e = &m->extents[i];
        if (e->shard < 0 || e->shard >= m->n_shards || e->buffer < 0 || e->buffer >= m->n_buffers || e->count <= 0 ||
            e->offset < 0 || e->offset > m->buffer_len - e->count)
            return ddp_fail(err, DDP_ERUNTIME, "%s: extent %d (shard %d, buffer %d, [%lld, +%lld)) is out of range",
                            what, i, e->shard, e->buffer, (long long)e->offset, (long long)e->count);
    }
    int *idx = malloc(((size_t)m->n_extents + 1) * sizeof *idx);
    if (!idx)
        return ddp_fail(err, DDP_ERUNTIME, "%s: out of memory", what);
    int rc = DDP_OK;
    for (int b = 0; b < m->n_buffers && rc == DDP_OK; b++)
        rc = check_buffer_cover(m, b, idx, what, err);
    free(idx);
    return rc;
}

/* ---- the manifest as a checkpoint file ----------------------------------------------------- */

/* Text of n names of `stride` bytes each, one a line. */
static char *join_lines(const char *names, size_t stride, int n, size_t *len)
{
    size_t total = 1;
    for (int i = 0; i < n; i++)
        total += strlen(names + (size_t)i * stride) + 1;
    char *out = malloc(total), *p = out;
    if (!out)
        return NULL;
    for (int i = 0; i < n; i++)
        p += sprintf(p, "%s\n", names + (size_t)i * stride);
    *len = (size_t)(p - out);
    return out;
}

static ckpt_tensor u8_tensor(const void *data, size_t len)
{
    return (ckpt_tensor){.dtype = CKPT_U8, .ndim = 1, .shape = {(int64_t)len}, .data = data};
}

static ckpt_tensor i64_tensor(const int64_t *data, int rows, int cols)
{
    return (ckpt_tensor){.dtype = CKPT_I64, .ndim = 2, .shape = {rows, cols}, .data = data};
}

typedef struct manifest_parts {
    char *buffers, *tensor_names, *shard_names;
    size_t buffers_len, tensor_names_len, shard_names_len;
    int64_t *dims, *info, *extents;
} manifest_parts;

static void free_parts(manifest_parts *p)
{
    free(p->buffers), free(p->tensor_names), free(p->shard_names);
    free(p->dims), free(p->info), free(p->extents);
}

static int encode_parts(const ckpt_manifest *m, manifest_parts *p)
{
    memset(p, 0, sizeof *p);
    p->buffers = join_lines(m->buffers[0], CKPT_SET_PREFIX_MAX, m->n_buffers, &p->buffers_len);
    p->tensor_names = join_lines(m->tensors[0].name, sizeof m->tensors[0], m->n_tensors, &p->tensor_names_len);
    p->shard_names = join_lines(m->shards[0].name, sizeof m->shards[0], m->n_shards, &p->shard_names_len);
    p->dims = calloc((size_t)m->n_tensors * DIMS_COLS + 1, sizeof *p->dims);
    p->info = calloc((size_t)m->n_shards * 2 + 1, sizeof *p->info);
    p->extents = calloc((size_t)m->n_extents * 4 + 1, sizeof *p->extents);
    if (!p->buffers || !p->tensor_names || !p->shard_names || !p->dims || !p->info || !p->extents)
        return -1;
    for (int i = 0; i < m->n_tensors; i++) {
        int64_t *d = p->dims + (size_t)i * DIMS_COLS;
        d[0] = m->tensors[i].offset, d[1] = m->tensors[i].ndim;
        memcpy(d + 2, m->tensors[i].shape, sizeof m->tensors[i].shape);
    }
    for (int i = 0; i < m->n_shards; i++)
        p->info[2 * i] = (int64_t)m->shards[i].bytes, p->info[2 * i + 1] = m->shards[i].header_crc;
    for (int i = 0; i < m->n_extents; i++) {
        const ckpt_extent *e = &m->extents[i];
        int64_t *x = p->extents + (size_t)i * 4;
        x[0] = e->shard, x[1] = e->buffer, x[2] = e->offset, x[3] = e->count;
    }
    return 0;
}

static int write_manifest(const char *set_dir, const ckpt_manifest *m, ddp_err *err)
{
    manifest_parts p;
    int64_t len = m->buffer_len;
    if (encode_parts(m, &p)) {
        free_parts(&p);
        return ddp_fail_local(err, "checkpoint %s: out of memory for the manifest", set_dir);
    }
    ckpt_tensor t[10];
    int n = 0;
    const struct { const char *name; const char *text; size_t len; } texts[] = {
        {"set/buffers", p.buffers, p.buffers_len}, {"set/tensor_names", p.tensor_names, p.tensor_names_len},
        {"set/shard_names", p.shard_names, p.shard_names_len}};
    for (int i = 0; i < 3; i++) {
        t[n] = u8_tensor(texts[i].text, texts[i].len);
        snprintf(t[n++].name, CKPT_NAME_MAX, "%s", texts[i].name);
    }
    const struct { const char *name; const int64_t *data; int rows, cols; } tables[] = {
        {"set/buffer_len", &len, 1, 1}, {"set/tensor_dims", p.dims, m->n_tensors, DIMS_COLS},
        {"set/shard_info", p.info, m->n_shards, 2}, {"set/extents", p.extents, m->n_extents, 4}};
    for (int i = 0; i < 4; i++) {
        t[n] = i64_tensor(tables[i].data, tables[i].rows, tables[i].cols);
        snprintf(t[n++].name, CKPT_NAME_MAX, "%s", tables[i].name);
    }
    if (m->settings) {
        t[n] = u8_tensor(m->settings, m->settings_len);
        snprintf(t[n++].name, CKPT_NAME_MAX, "%s", CKPT_SETTINGS_TENSOR);
    }
    if (m->train_samples > 0) {
        t[n] = (ckpt_tensor){.dtype = CKPT_I64, .ndim = 1, .shape = {1}, .data = &m->train_samples};
        snprintf(t[n++].name, CKPT_NAME_MAX, "%s", CKPT_TRAIN_SAMPLES_TENSOR);
    }
    ckpt_state s = {.hdr = m->hdr, .n_tensors = n, .tensors = t};
    int rc = ckpt_write_atomic_as(set_dir, CKPT_SET_MANIFEST, &s, NULL, err);
    free_parts(&p);
    return rc;
}

/* ---- commit --------------------------------------------------------------------------------- */

/* Removes set_dir's manifest when there is one (before its shards are removed: never a manifest
 * over shards it does not describe); *removed says whether there was one. */
static int uncommit(const char *set_dir, bool *removed, ddp_err *err)
{
    char path[CKPT_PATH_MAX];
    path_in(set_dir, CKPT_SET_MANIFEST, path);
    *removed = unlink(path) == 0;
    if (*removed)
        return dir_fsync(set_dir, err);
    return errno == ENOENT ? DDP_OK : ddp_fail(err, DDP_ERUNTIME, "checkpoint %s: cannot remove: %s", path, strerror(errno));
}

/* Room in m->extents (*cap of them) for n more. */
static int reserve_extents(ckpt_manifest *m, int *cap, int n)
{
    if (m->n_extents + n <= *cap)
        return 0;
    int want = 2 * (m->n_extents + n);
    ckpt_extent *grown = realloc(m->extents, (size_t)want * sizeof *grown);
    if (!grown)
        return -1;
    m->extents = grown;
    *cap = want;
    return 0;
}

/* Shard s's pieces as extents of m (appended). */
static int add_shard(const char *set_dir, ckpt_manifest *m, int s, int *cap, ddp_err *err)
{
    char path[CKPT_PATH_MAX];
    path_in(set_dir, m->shards[s].name, path);
    ckpt_loaded tab;
    if (ckpt_read_table(path, &tab, &m->shards[s].header_crc, err))
        return err->code;
    m->shards[s].bytes = tab.file_bytes;
    int rc = tab.hdr.step == m->hdr.step ? DDP_OK
             : ddp_fail(err, DDP_ERUNTIME, "checkpoint %s: step %lld, not the set's %lld", path,
                        (long long)tab.hdr.step, (long long)m->hdr.step);
    /* every shard of one save carries its save_time (rank 0's, shared), world size and config hash:
     * a file of the same step left by another save (a killed attempt's, another run's) is not one */
    if (rc == DDP_OK && (tab.hdr.save_time != m->hdr.save_time || tab.hdr.world_size != m->hdr.world_size ||
                         tab.hdr.config_hash != m->hdr.config_hash))
        rc = ddp_fail(err, DDP_ERUNTIME, "checkpoint %s: a shard of another save (saved at %.6f by %d ranks, config "
                      "hash %016llx; this save's: %.6f, %d, %016llx)", path, tab.hdr.save_time, tab.hdr.world_size,
                      (unsigned long long)tab.hdr.config_hash, m->hdr.save_time, m->hdr.world_size,
                      (unsigned long long)m->hdr.config_hash);
    if (rc == DDP_OK && reserve_extents(m, cap, tab.n_tensors) != 0)
        rc = ddp_fail_local(err, "checkpoint %s: out of memory for %d pieces", path, tab.n_tensors);
    for (int i = 0; rc == DDP_OK && i < tab.n_tensors; i++) {
        ckpt_extent *e = &m->extents[m->n_extents];
        int b;
        if (ckpt_set_parse_piece(m, tab.tensors[i].name, &b, &e->offset, &e->count) != 0 ||
            tab.tensors[i].dtype != CKPT_F32 || ckpt_tensor_numel(&tab.tensors[i]) != (uint64_t)e->count)
            rc = ddp_fail(err, DDP_ERUNTIME, "checkpoint %s: tensor %s is no piece of this set's buffers", path,
                          tab.tensors[i].name);
        else
            e->shard = s, e->buffer = b, m->n_extents++;
    }
    ckpt_loaded_free(&tab);
    return rc;
}

/* Everything in set_dir but m's shards and the manifest that commits them: the shards of the set
 * this one replaced, the temporaries of writes an earlier attempt left there when it died, and the
 * shards of an earlier attempt at this step. Only once the manifest is durable (the set it replaced
 * is whole until then), and when every rank's write into the set has ended: before, another host's
 * rank may still be writing its temporary, whose process id this host cannot check. */
static void remove_leftovers(const char *set_dir, const ckpt_manifest *m)
{
    DIR *d = opendir(set_dir);
    if (!d) {
        log_warn("checkpoint %s: cannot list it to remove what earlier saves left: %s", set_dir, strerror(errno));
        return;
    }
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        bool ours = strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
                    strcmp(de->d_name, CKPT_SET_MANIFEST) == 0;
        for (int s = 0; !ours && s < m->n_shards; s++)
            ours = strcmp(de->d_name, m->shards[s].name) == 0;
        if (!ours && unlinkat(dirfd(d), de->d_name, 0) == 0)
            log_warn("checkpoint: removed %s/%s, an earlier or interrupted save's", set_dir, de->d_name);
    }
    closedir(d);
}

bool ckpt_set_names_taken(const char *set_dir, int n_shards)
{
    ckpt_manifest m;
    ddp_err ignored = {0};
    if (ckpt_manifest_read(set_dir, &m, &ignored) != DDP_OK)
        return false; /* no committed set here: nothing to keep whole */
    bool taken = false;
    char plain[CKPT_SET_SHARD_NAME_MAX];
    for (int s = 0; s < m.n_shards && !taken; s++)
        for (int k = 0; k < n_shards && !taken; k++) {
            ckpt_set_shard_name(k, n_shards, false, plain, sizeof plain);
            taken = strcmp(m.shards[s].name, plain) == 0;
        }
    ckpt_manifest_free(&m);
    return taken;
}

int ckpt_set_commit(const char *set_dir, const ckpt_manifest *spec, int n_shards, bool alternate,
                    _Atomic uint64_t *progress, ddp_err *err)
{
    ckpt_manifest m = *spec;
    int cap = 4 * n_shards * spec->n_buffers;   /* grown as the shards' tables are read */
    m.n_shards = n_shards;
    m.n_extents = 0;
    m.shards = calloc((size_t)n_shards, sizeof *m.shards);
    m.extents = calloc((size_t)cap, sizeof *m.extents);
    int rc = m.shards && m.extents ? DDP_OK : ddp_fail_local(err, "checkpoint %s: out of memory", set_dir);
    for (int s = 0; rc == DDP_OK && s < n_shards; s++) {
        ckpt_set_shard_name(s, n_shards, alternate, m.shards[s].name, sizeof m.shards[s].name);
        rc = add_shard(set_dir, &m, s, &cap, err);
        if (rc == DDP_OK && progress) /* at thousands of shards, the tables' reads take a while */
            atomic_fetch_add_explicit(progress, 1, memory_order_relaxed);
    }
    char what[CKPT_PATH_MAX + 32];
    snprintf(what, sizeof what, "checkpoint %s", set_dir);
    if (rc == DDP_OK)
        rc = check_tensors(&m, what, err);
    if (rc == DDP_OK)
        rc = ckpt_set_check_cover(&m, what, err);
    if (rc == DDP_OK)
        rc = write_manifest(set_dir, &m, err);
    if (rc == DDP_OK)
        remove_leftovers(set_dir, &m);
    free(m.shards);
    free(m.extents);
    return rc;
}

/* ---- reading the manifest ------------------------------------------------------------------ */

static const ckpt_tensor *table_of(const ckpt_loaded *c, const char *name, ckpt_dtype dt, int64_t cols)
{
    const ckpt_tensor *t = ckpt_loaded_tensor(c, name);
    if (!t || t->dtype != dt || (dt == CKPT_I64 && (t->ndim != 2 || t->shape[1] != cols)) || (dt == CKPT_U8 && t->ndim != 1))
        return NULL;
    return t;
}

/* Splits text into at most max lines, each a string of fewer than `size` bytes into a field of that
 * size at out, the fields `stride` bytes apart (a member of an array of structs); the count, or -1. */
static int split_lines(const ckpt_tensor *t, char *out, size_t size, size_t stride, int max)
{
    const char *p = t->data, *end = p + t->nbytes;
    int n = 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl || n == max || (size_t)(nl - p) >= size)
            return -1;
        memcpy(out + (size_t)n * stride, p, (size_t)(nl - p));
        out[(size_t)n * stride + (size_t)(nl - p)] = '\0';
        p = nl + 1, n++;
    }
    return n;
}

static int decode_manifest(ckpt_manifest *m, const char *path, ddp_err *err)
{
    const ckpt_loaded *c = &m->raw_;
    const ckpt_tensor *buf = table_of(c, "set/buffers", CKPT_U8, 0), *len = table_of(c, "set/buffer_len", CKPT_I64, 1),
                      *names = table_of(c, "set/tensor_names", CKPT_U8, 0),
                      *dims = table_of(c, "set/tensor_dims", CKPT_I64, DIMS_COLS),
                      *snames = table_of(c, "set/shard_names", CKPT_U8, 0), *info = table_of(c, "set/shard_info", CKPT_I64, 2),
                      *ext = table_of(c, "set/extents", CKPT_I64, 4), *settings = ckpt_loaded_tensor(c, CKPT_SETTINGS_TENSOR);
    if (!buf || !len || !names || !dims || !snames || !info || !ext || len->shape[0] != 1)
        return ddp_fail(err, DDP_ERUNTIME, "checkpoint %s: not a manifest (a set/ table is missing or malformed)", path);
    m->buffer_len = ((const int64_t *)len->data)[0];
    m->n_buffers = split_lines(buf, m->buffers[0], CKPT_SET_PREFIX_MAX, CKPT_SET_PREFIX_MAX, CKPT_SET_MAX_BUFFERS);
    m->n_tensors = (int)dims->shape[0], m->n_shards = (int)info->shape[0], m->n_extents = (int)ext->shape[0];
    m->tensors = calloc((size_t)m->n_tensors + 1, sizeof *m->tensors);
    m->shards = calloc((size_t)m->n_shards + 1, sizeof *m->shards);
    m->extents = calloc((size_t)m->n_extents + 1, sizeof *m->extents);
    if (!m->tensors || !m->shards || !m->extents)
        return ddp_fail_local(err, "checkpoint %s: out of memory", path);
    if (m->n_buffers < 1 ||
        split_lines(names, m->tensors[0].name, CKPT_NAME_MAX, sizeof m->tensors[0], m->n_tensors) != m->n_tensors ||
        split_lines(snames, m->shards[0].name, CKPT_SET_SHARD_NAME_MAX, sizeof m->shards[0], m->n_shards) !=
            m->n_shards)
        return ddp_fail(err, DDP_ERUNTIME, "checkpoint %s: manifest's name lists do not match its tables", path);
    for (int i = 0; i < m->n_tensors; i++) {
        const int64_t *d = (const int64_t *)dims->data + (size_t)i * DIMS_COLS;
        m->tensors[i].offset = d[0], m->tensors[i].ndim = (int)d[1];
        if (d[1] < 0 || d[1] > CKPT_MAX_NDIM)
            return ddp_fail(err, DDP_ERUNTIME, "checkpoint %s: tensor %s has %lld dimensions", path, m->tensors[i].name,
                            (long long)d[1]);
        memcpy(m->tensors[i].shape, d + 2, sizeof m->tensors[i].shape);
    }
    for (int i = 0; i < m->n_shards; i++) {
        const int64_t *x = (const int64_t *)info->data + 2 * i;
        m->shards[i].bytes = (uint64_t)x[0], m->shards[i].header_crc = (uint32_t)x[1];
    }
    for (int i = 0; i < m->n_extents; i++) {
        const int64_t *x = (const int64_t *)ext->data + (size_t)i * 4;
        m->extents[i] = (ckpt_extent){(int32_t)x[0], (int32_t)x[1], x[2], x[3]};
    }
    if (settings && (settings->dtype != CKPT_U8 || settings->ndim != 1))
        return ddp_fail(err, DDP_ERUNTIME, "checkpoint %s: the manifest's %s is not text (u8, one dimension)", path,
                        CKPT_SETTINGS_TENSOR);
    if (settings)
        m->settings = settings->data, m->settings_len = settings->nbytes;
    return ckpt_loaded_train_samples(c, path, &m->train_samples, err);
}

/* set_dir has no manifest: a save that did not finish, or a folder of checkpoints (run.dir's
 * checkpoints/, named where one of them was meant), said as such. */
static int no_manifest(const char *set_dir, ddp_err *err)
{
    ckpt_beyond held;
    ddp_err ignored = {0};
    if (ckpt_count_beyond(set_dir, -1, &held, &ignored) == DDP_OK && held.count > 0)
        return ddp_fail(err, DDP_EUSAGE, "%s is a folder of %d checkpoint%s, not one checkpoint: name one of them "
                        "(the newest: %s/%s)", set_dir, held.count, held.count == 1 ? "" : "s", set_dir, held.newest);
    return ddp_fail(err, DDP_ERUNTIME, "checkpoint %s: no %s (a save that did not finish: not a checkpoint)",
                    set_dir, CKPT_SET_MANIFEST);
}

int ckpt_manifest_read(const char *set_dir, ckpt_manifest *m, ddp_err *err)
{
    memset(m, 0, sizeof *m);
    char path[CKPT_PATH_MAX];
    path_in(set_dir, CKPT_SET_MANIFEST, path);
    struct stat st;
    if (stat(path, &st) != 0 && errno == ENOENT)
        return no_manifest(set_dir, err);
    int rc = ckpt_read(path, &m->raw_, err);
    if (rc == DDP_OK) {
        m->hdr = m->raw_.hdr;
        rc = decode_manifest(m, path, err);
    }
    char what[CKPT_PATH_MAX + 32];
    snprintf(what, sizeof what, "checkpoint %s", path);
    if (rc == DDP_OK)
        rc = check_tensors(m, what, err);
    if (rc == DDP_OK)
        rc = check_shard_names(m, what, err);
    if (rc == DDP_OK)
        rc = ckpt_set_check_cover(m, path, err);
    if (rc != DDP_OK)
        ckpt_manifest_free(m);
    return rc;
}

void ckpt_manifest_free(ckpt_manifest *m)
{
    free(m->tensors);
    free(m->shards);
    free(m->extents);
    ckpt_loaded_free(&m->raw_);
    memset(m, 0, sizeof *m);
}

int ckpt_set_shard_table(const char *set_dir, const ckpt_manifest *m, int s, ckpt_loaded *table, ddp_err *err)
{
    char path[CKPT_PATH_MAX];
    path_in(set_dir, m->shards[s].name, path);
    uint32_t crc = 0;
    int rc = ckpt_read_table(path, table, &crc, err);
    if (rc == DDP_OK && (table->file_bytes != m->shards[s].bytes || crc != m->shards[s].header_crc)) {
        rc = ddp_fail(err, DDP_ERUNTIME, "checkpoint %s: %llu bytes with header CRC %08x; the manifest says %llu "
                      "bytes with %08x (a shard of another save)", path, (unsigned long long)table->file_bytes, crc,
                      (unsigned long long)m->shards[s].bytes, m->shards[s].header_crc);
        ckpt_loaded_free(table);
    }
    return rc;
}

/* ---- removal ------------------------------------------------------------------------------ */

int ckpt_set_remove(const char *set_dir, _Atomic uint64_t *progress, ddp_err *err)
{
    bool had_manifest = false;
    int rc = uncommit(set_dir, &had_manifest, err);
    if (rc != DDP_OK)
        return rc;
    if (progress && had_manifest)
        atomic_fetch_add_explicit(progress, 1, memory_order_relaxed);
    DIR *d = opendir(set_dir);
    if (!d)
        return ddp_fail(err, DDP_ERUNTIME, "checkpoint %s: %s", set_dir, strerror(errno));
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (unlinkat(dirfd(d), de->d_name, 0) != 0)
            rc = rc ? rc : ddp_fail(err, DDP_ERUNTIME, "checkpoint %s/%s: cannot remove: %s", set_dir, de->d_name,
                                    strerror(errno));
        else if (progress)
            atomic_fetch_add_explicit(progress, 1, memory_order_relaxed);
    }
    closedir(d);
    if (rc == DDP_OK && rmdir(set_dir) != 0)
        rc = ddp_fail(err, DDP_ERUNTIME, "checkpoint %s: cannot remove: %s", set_dir, strerror(errno));
    return rc;
}

bool ckpt_is_set_dir(const char *path) { return path_is_dir(path); }
