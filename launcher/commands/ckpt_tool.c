/* ckpt_tool.c — `ddprun ckpt info PATH` and `ddprun ckpt diff A B`: what a user runs to see
 * what a checkpoint holds, whether it is intact, and whether two runs ended identical.
 *
 * diff's exit status covers the training state (tensors, step/epoch/sampler position, schedule,
 * optimizer step, config hash, model description, RNG states); provenance fields (save time, elapsed
 * time, restart count, world size) are printed when they differ but do not count, so an
 * interrupted-and-resumed run can be compared with an uninterrupted one. Either PATH may be a
 * sharded set's directory (runtime/ckpt/ckpt_set.h): info then lists its shards, each checked
 * against the manifest and its own CRCs, and diff compares the tensors the set assembles. info
 * checks CRCs a few MiB at a time, never holding a file in memory: a checkpoint larger than this
 * machine's memory is checked too, and one it cannot check for want of memory is said to be
 * unchecked, not bad.
 * This file only reads checkpoints; it must not modify them. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "runtime/base/log.h"
#include "runtime/ckpt/ckpt_set.h"

static void format_shape(const ckpt_tensor *t, char *out, size_t size)
{
    size_t pos = (size_t)snprintf(out, size, "[");
    for (int d = 0; d < t->ndim && pos < size; d++)
        pos += (size_t)snprintf(out + pos, size - pos, "%s%" PRId64, d ? "," : "", t->shape[d]);
    if (pos < size)
        snprintf(out + pos, size - pos, "]");
}

static void print_header(const ckpt_header *h)
{
    printf("step %" PRId64 "  epoch %" PRId64 "  consumed %" PRId64 "  total_steps %" PRId64
           "  optim_step %" PRId64 "\n", h->step, h->epoch, h->consumed, h->total_steps, h->optim_step);
    printf("world_size %d  restart_count %d  config_hash %016" PRIx64 "\n", h->world_size, h->restart_count,
           h->config_hash);
    printf("model %s\n", h->model);
    printf("save_time %.3f  elapsed_s %.3f\n", h->save_time, h->elapsed_s);
    for (int i = 0; i < h->n_rng; i++)
        printf("rng %-24s %016" PRIx64 " %016" PRIx64 " %016" PRIx64 " %016" PRIx64 "\n", h->rng[i].name,
               h->rng[i].state.s[0], h->rng[i].state.s[1], h->rng[i].state.s[2], h->rng[i].state.s[3]);
}

/* A set's shards, each checked a few MiB at a time; the count of bad ones, and in *unchecked
 * of those this machine could not check (its failure, not the shard's). */
static int list_shards(const char *dir, const ckpt_manifest *m, int *unchecked)
{
    int bad = 0;
    *unchecked = 0;
    for (int s = 0; s < m->n_shards; s++) {
        char path[CKPT_PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", dir, m->shards[s].name);
        int pieces = 0;
        int64_t floats = 0;
        for (int i = 0; i < m->n_extents; i++)
            if (m->extents[i].shard == s)
                pieces++, floats += m->extents[i].count;
        ddp_err err = {0};
        bool ok = ckpt_set_check_shard(dir, m, s, &err) == DDP_OK, mine = !ok && err.local;
        printf("shard %-28s %12" PRIu64 " bytes  header crc %08x  %d pieces  %" PRId64 " floats  %s\n",
               m->shards[s].name, m->shards[s].bytes, m->shards[s].header_crc, pieces, floats,
               ok ? "OK" : mine ? "UNCHECKED" : "BAD");
        if (!ok)
            printf("%s: %s\n", mine ? "UNCHECKED SHARD (this machine's failure, not the shard's)" : "BAD SHARD",
                   err.msg);
        bad += !ok && !mine;
        *unchecked += mine;
    }
    return bad;
}

static int set_info(const char *dir)
{
    ckpt_manifest m;
    ddp_err err = {0};
    if (ckpt_manifest_read(dir, &m, &err)) {
        log_error("%s", err.msg);
        return 1;
    }
    printf("%s: sharded set, %d shards, %d buffers of %" PRId64 " floats (", dir, m.n_shards, m.n_buffers, m.buffer_len);
    for (int b = 0; b < m.n_buffers; b++)
        printf("%s%s", b ? " " : "", m.buffers[b]);
    printf("), %d tensors each\n", m.n_tensors);
    print_header(&m.hdr);
    int unchecked, bad = list_shards(dir, &m, &unchecked);
    for (int i = 0; i < m.n_tensors; i++) {
        const ckpt_set_tensor *t = &m.tensors[i];
        ckpt_tensor x = {.ndim = t->ndim};
        memcpy(x.shape, t->shape, sizeof x.shape);
        char shape[256];
        format_shape(&x, shape, sizeof shape);
        printf("%-40s f32  %-20s offset %12" PRId64 "\n", t->name, shape, t->offset);
    }
    if (bad || !unchecked)
        printf("%s\n", bad ? "checkpoint is CORRUPT" : "all CRCs OK");
    else
        printf("%d shard(s) could not be checked on this machine (above); the others' CRCs are OK\n", unchecked);
    ckpt_manifest_free(&m);
    return bad || unchecked ? 1 : 0;
}

static int tool_info(const char *path)
{
    if (ckpt_is_set_dir(path))
        return set_info(path);
    ckpt_loaded c;
    ddp_err err = {0};
    if (ckpt_read_table(path, &c, NULL, &err) || ckpt_check_crcs(path, &c, &err)) {
        ckpt_loaded_free(&c); /* the table of a file whose CRCs could not be read; zeroed otherwise */
        log_error("%s", err.msg);
        return 1;
    }
    printf("%s: format %d, %" PRIu64 " bytes, %d tensors\n", path, CKPT_FORMAT_VERSION, c.file_bytes, c.n_tensors);
    print_header(&c.hdr);
    int bad = 0;
    for (int i = 0; i < c.n_tensors; i++) {
        const ckpt_tensor *t = &c.tensors[i];
        char shape[256];
        format_shape(t, shape, sizeof shape);
        printf("%-40s %-4s %-20s %12" PRIu64 " crc %08x %s\n", t->name, ckpt_dtype_name(t->dtype), shape,
               t->nbytes, t->crc, t->crc_ok ? "OK" : "BAD");
        bad += !t->crc_ok;
    }
    for (int i = 0; i < c.n_tensors; i++)
        if (!c.tensors[i].crc_ok)
            printf("BAD CRC: tensor %s\n", c.tensors[i].name);
    printf("%s\n", bad ? "checkpoint is CORRUPT" : "all CRCs OK");
    ckpt_loaded_free(&c);
    return bad ? 1 : 0;
}

static double element_as_double(const ckpt_tensor *t, uint64_t i)
{
    const uint8_t *p = t->data;
    switch (t->dtype) {
    case CKPT_F32: { float v; memcpy(&v, p + 4 * i, 4); return v; }
    case CKPT_F64: { double v; memcpy(&v, p + 8 * i, 8); return v; }
    case CKPT_I32: { int32_t v; memcpy(&v, p + 4 * i, 4); return (double)v; }
    case CKPT_I64: { int64_t v; memcpy(&v, p + 8 * i, 8); return (double)v; }
    case CKPT_U8: return p[i];
    case CKPT_BF16: {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        uint32_t bits = (uint32_t)h << 16;
        float v;
        memcpy(&v, &bits, 4);
        return v;
    }
    }
    return 0;
}

/* Returns 1 when a and b differ (and prints how), 0 when byte-identical. */
static int diff_tensor(const ckpt_tensor *a, const ckpt_tensor *b)
{
    char sa[256], sb[256];
    format_shape(a, sa, sizeof sa);
    format_shape(b, sb, sizeof sb);
    if (a->dtype != b->dtype || strcmp(sa, sb) != 0) {
        printf("tensor %s: %s %s vs %s %s\n", a->name, ckpt_dtype_name(a->dtype), sa, ckpt_dtype_name(b->dtype), sb);
        return 1;
    }
    if (memcmp(a->data, b->data, a->nbytes) == 0) {
        printf("tensor %-40s identical\n", a->name);
        return 0;
    }
    uint64_t n = ckpt_tensor_numel(a), n_diff = 0;
    size_t es = ckpt_dtype_size(a->dtype);
    double max_abs = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (memcmp((const uint8_t *)a->data + i * es, (const uint8_t *)b->data + i * es, es) == 0)
            continue;
        n_diff++;
        double d = fabs(element_as_double(a, i) - element_as_double(b, i));
        if (isnan(d) || d > max_abs)
            max_abs = isnan(d) || isnan(max_abs) ? NAN : d;
    }
    printf("tensor %-40s max|a-b| %.6g  (%" PRIu64 " of %" PRIu64 " elements differ)\n", a->name, max_abs, n_diff, n);
    return 1;
}

#define DIFF_I64(field, counts)                                                               \
    if (a->field != b->field) {                                                               \
        printf("header %s: %" PRId64 " vs %" PRId64 "%s\n", #field, (int64_t)a->field, (int64_t)b->field, \
               counts ? "" : " (not counted)");                                               \
        n += counts;                                                                          \
    }

static int diff_headers(const ckpt_header *a, const ckpt_header *b)
{
    int n = 0;
    DIFF_I64(step, 1) DIFF_I64(epoch, 1) DIFF_I64(consumed, 1) DIFF_I64(total_steps, 1)
    DIFF_I64(optim_step, 1) DIFF_I64(restart_count, 0) DIFF_I64(world_size, 0)
    if (a->save_time != b->save_time) /* provenance, like the two above */
        printf("header save_time: %.0f vs %.0f (not counted)\n", a->save_time, b->save_time);
    if (a->elapsed_s != b->elapsed_s)
        printf("header elapsed_s: %.3f vs %.3f (not counted)\n", a->elapsed_s, b->elapsed_s);
    if (a->config_hash != b->config_hash) {
        printf("header config_hash: %016" PRIx64 " vs %016" PRIx64 "\n", a->config_hash, b->config_hash);
        n++;
    }
    if (strcmp(a->model, b->model) != 0) {
        printf("header model: %s vs %s\n", a->model, b->model);
        n++;
    }
    for (int i = 0; i < a->n_rng; i++) {
        int j = 0;
        while (j < b->n_rng && strcmp(a->rng[i].name, b->rng[j].name) != 0)
            j++;
        if (j == b->n_rng || memcmp(&a->rng[i].state, &b->rng[j].state, sizeof(rng)) != 0) {
            printf("rng %s: %s\n", a->rng[i].name, j == b->n_rng ? "only in A" : "differs");
            n++;
        }
    }
    for (int j = 0; j < b->n_rng; j++) {
        int i = 0;
        while (i < a->n_rng && strcmp(a->rng[i].name, b->rng[j].name) != 0)
            i++;
        if (i == a->n_rng) {
            printf("rng %s: only in B\n", b->rng[j].name);
            n++;
        }
    }
    return n;
}

static int tool_diff(const char *path_a, const char *path_b)
{
    ckpt_loaded a, b;
    ddp_err err = {0};
    if (ckpt_read_any(path_a, &a, false, &err)) {
        log_error("%s", err.msg);
        return 1;
    }
    if (ckpt_read_any(path_b, &b, false, &err)) {
        log_error("%s", err.msg);
        ckpt_loaded_free(&a);
        return 1;
    }
    printf("A: %s (step %" PRId64 ")\nB: %s (step %" PRId64 ")\n", path_a, a.hdr.step, path_b, b.hdr.step);
    int n = diff_headers(&a.hdr, &b.hdr);
    for (int i = 0; i < a.n_tensors; i++) {
        const ckpt_tensor *tb = ckpt_loaded_tensor(&b, a.tensors[i].name);
        if (!tb) {
            printf("tensor %s: only in A\n", a.tensors[i].name);
            n++;
        } else {
            n += diff_tensor(&a.tensors[i], tb);
        }
    }
    for (int j = 0; j < b.n_tensors; j++)
        if (!ckpt_loaded_tensor(&a, b.tensors[j].name)) {
            printf("tensor %s: only in B\n", b.tensors[j].name);
            n++;
        }
    printf(n ? "DIFFERENT: %d difference(s)\n" : "IDENTICAL\n", n);
    ckpt_loaded_free(&a);
    ckpt_loaded_free(&b);
    return n ? 1 : 0;
}

int ckpt_tool_main(int argc, char **argv)
{
    const char *usage = "usage: ddprun ckpt info PATH\n       ddprun ckpt diff A B\n"
                        "       ddprun ckpt export --format llmc [--force] CHECKPOINT OUT.bin\n"
                        "       ddprun ckpt export --format hf [--dtype f32|bf16] [--max-shard-mb N] "
                        "[--token-ids-from SRC] [--force] CHECKPOINT DIR\n";
    int rc = 2;
    if (argc == 3 && strcmp(argv[1], "info") == 0)
        rc = tool_info(argv[2]);
    else if (argc == 4 && strcmp(argv[1], "diff") == 0)
        rc = tool_diff(argv[2], argv[3]);
    else
        fputs(usage, stderr);
    fflush(stdout);
    return rc;
}
