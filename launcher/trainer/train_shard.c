/* train_shard.c — sharded checkpoints in the training job (checkpoint.sharded: true): what each
 * rank writes, in parallel with the others, and the commit (docs/checkpoint-format.md, "Sharded
 * checkpoints"); and what each rank reads back of a set on resume: its own extents of what it
 * shards, the whole of what it replicates, never the whole state through one host buffer.
 *
 * A rank's shard holds EXTENTS of the global flat buffers (the parameters and each optimizer state
 * buffer, n_params floats each), one per optimizer part: under ZeRO the rank's own parts (its
 * parameters at param_offset, its optimizer state at state_offset), and with replicated state the
 * rank's equal slice [r*n/N, (r+1)*n/N) of the optimizer's one part. A stage that shards the
 * parameters by the same parts writes the same extents: the format does not change. The shards are
 * written synchronously (the stall is the write) by each rank's ckpt_writer, which gives a write up
 * when the storage takes none of it for the writer's limit (train_ckpt.c); every rank then learns
 * whether every shard is durable (an all-reduce over t->ctl), rank 0 writes the manifest that commits
 * the set (ckpt_set_commit) through its writer too, every rank learns that verdict, and rank 0
 * hands the set to checkpoint.upload_cmd's uploader and starts the prune on its writer: every rank trains on meanwhile, rank 0 too, and the next save's
 * shard (or the job's end, train_ckpt_finish) waits for it, watched. A set being written counts
 * for nothing in a prune, newer than every set kept, so the next save's shards are safe from it.
 * Test-only: DDP_TEST_FAULT=slow-commit:0:STEP:SECONDS makes rank 0's commit of step STEP's set
 * take SECONDS longer, none of it taken by the storage (slow-prune: the prune after it);
 * shard-exit:RANK:STEP makes RANK exit with status 3 after its shard of step STEP is durable,
 * before the commit (a save killed part-way).
 * Must not decide when to save or what the buffers are (train_ckpt.c), nor the file layout
 * (runtime/ckpt/ckpt_set.c). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime/base/clock.h"
#include "runtime/base/dirs.h"
#include "runtime/base/log.h"
#include "runtime/base/test_fault.h"
#include "runtime/ckpt/ckpt_set.h"
#include "runtime/ckpt/ckpt_upload.h"
#include "train_agree.h"
#include "train_replica.h"
#include "train_shard.h"
#include "train_zero.h"

/* ---- checkpoint.dir shared by every rank ---- */

#define SHARED_PROBE ".ddprun-shared-"

/* dir/SHARED_PROBE<token>[-r<rank>] into path: rank 0's file (rank < 0), or another rank's own. */
static void probe_name(const char *dir, int64_t token, int rank, char *path, size_t cap)
{
    int n = snprintf(path, cap, "%s/" SHARED_PROBE "%016llx", dir, (unsigned long long)token);
    if (rank >= 0 && n > 0 && (size_t)n < cap)
        snprintf(path + n, cap - (size_t)n, "-r%d", rank);
}

/* The token of rank 0's file: drawn from its clock and pid, never 0 (0: no file made). */
static int64_t draw_token(void)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    uint64_t ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
    return (int64_t)((ns ^ ((uint64_t)getpid() << 40)) | 1u);
}

/* Another rank: rank 0's file is there, and a file of its own can be made there (and goes). */
static int see_probe(const char *dir, int64_t token, const comm *c, ddp_err *err)
{
    char path[CKPT_PATH_MAX + 64];
    probe_name(dir, token, -1, path, sizeof path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return ddp_fail(err, DDP_EUSAGE, "checkpoint directory %s on this rank's host (%s) is not the one rank 0 "
                        "writes: rank 0's file %s is not there (%s); with checkpoint.sharded: true every rank "
                        "writes its shard into it, so every host must see the same directory (a shared file "
                        "system)", dir, c->host, path + strlen(dir) + 1, strerror(errno));
    close(fd);
    probe_name(dir, token, c->rank, path, sizeof path);
    int rc = dir_try_file(dir, path + strlen(dir) + 1, err);
    return rc != DDP_OK ? ddp_prefix(err, "checkpoint directory %s on this rank's host (%s), where it writes its shard",
                                     dir, c->host)
                        : rc;
}

static void remove_probe(void *path) { unlink(path); }

int train_shard_check_dir(train_job *t, const char *dir, int mine, bool if_there, bool *checked, ddp_err *err)
{
    comm *c = t->ctl;
    char probe[CKPT_PATH_MAX + 64];
    int64_t token = 0;
    if (c->rank == 0 && mine == DDP_OK && (!if_there || path_is_dir(dir))) {
        int64_t drawn = draw_token();
        probe_name(dir, drawn, -1, probe, sizeof probe);
        if ((mine = dir_make_file(dir, probe + strlen(dir) + 1, err)) == DDP_OK)
            token = drawn;
        else
            ddp_prefix(err, "checkpoint directory %s", dir);
    }
    ddp_err lost = {0}; /* a failure of the broadcast: the agreement below fails for it too */
    if (c->ops->broadcast(c, &token, 1, DT_INT64, 0, NULL, &lost) != DDP_OK && mine == DDP_OK)
        mine = ddp_fail(err, lost.code, "%s", lost.msg);
    if (c->rank != 0 && token && mine == DDP_OK)
        mine = see_probe(dir, token, c, err);
    bool made = c->rank == 0 && token;
    *checked = token != 0;
    return train_agree_then(t, mine, "take checkpoint.dir for the sharded checkpoints (its error says why)",
                            made ? remove_probe : NULL, probe, err);
}

/* ---- a save ---- */

/* This rank's extents as optimizer parts (count > 0 only); *n may be 0 (more ranks than floats). */
static int my_extents(const train_job *t, optim_part **out, int *n, ddp_err *err)
{
    const optimizer *o = t->opt;
    *out = malloc(((size_t)o->n_parts + 1) * sizeof **out);
    if (!*out)
        return ddp_fail_local(err, "out of memory for the checkpoint's extents");
    *n = 0;
    if (!train_zero_active(t)) {
        size_t total = t->m->n_params, r = (size_t)t->ctl->rank, w = (size_t)t->ctl->size;
        size_t lo = r * total / w, hi = (r + 1) * total / w;
        if (hi > lo)
            (*out)[(*n)++] = (optim_part){.param_offset = lo, .state_offset = lo, .count = hi - lo};
        return DDP_OK;
    }
    for (int k = 0; k < o->n_parts; k++)
        if (o->parts[k].count > 0)
            (*out)[(*n)++] = o->parts[k];
    return DDP_OK;
}

/* The shard's pieces staged from the device into host, named as ckpt_set_piece_name says. */
static int stage(train_job *t, const train_shard_save *s, const optim_part *x, int nx, float *host,
                 ckpt_tensor *tensors, ddp_err *err)
{
    device *d = t->dev;
    size_t at = 0;
    int k = 0, rc = DDP_OK;
    for (int b = 0; b < s->n_buffers && rc == DDP_OK; b++)
        for (int e = 0; e < nx && rc == DDP_OK; e++, k++) {
            const train_shard_buffer *buf = &s->buffers[b];
            size_t from = buf->sharded ? x[e].state_offset : x[e].param_offset;
            rc = d->ops->download(d, host + at, buf->dev + from, x[e].count * sizeof(float), err);
            ckpt_tensor *p = &tensors[k];
            *p = (ckpt_tensor){.dtype = CKPT_F32, .ndim = 1, .shape = {(int64_t)x[e].count}, .data = host + at};
            ckpt_set_piece_name(buf->prefix, (int64_t)x[e].param_offset, (int64_t)x[e].count, p->name, sizeof p->name);
            at += x[e].count;
        }
    return rc;
}

/* Test-only: DDP_TEST_FAULT shard-exit at this rank and step. */
static void test_shard_exit(const train_job *t)
{
    test_fault f;
    if (test_fault_at("shard-exit", t->step, &f)) {
        log_warn("DDP_TEST_FAULT shard-exit: rank %d exits after writing its shard of step %lld", t->ctl->rank,
                 (long long)t->step);
        exit(3);
    }
}

/* This rank's shard of the set at set_dir, durable when DDP_OK; *bytes its size. Staged first, so
 * that the copy overlaps what is left of rank 0's previous prune, then that prune waited for
 * (*prune_wait_s, watched). */
static int write_own_shard(train_job *t, const train_shard_save *s, const char *set_dir, bool alternate,
                           uint64_t *bytes, double *prune_wait_s, ddp_err *err)
{
    optim_part *x = NULL;
    int nx = 0;
    *bytes = 0;
    int rc = my_extents(t, &x, &nx, err);
    size_t floats = 0;
    for (int e = 0; e < nx; e++)
        floats += x[e].count;
    float *host = rc ? NULL : malloc((floats * (size_t)s->n_buffers + 1) * sizeof *host);
    ckpt_tensor *tensors = rc ? NULL : calloc((size_t)(nx * s->n_buffers) + 1, sizeof *tensors);
    if (rc == DDP_OK && (!host || !tensors))
        rc = ddp_fail(err, DDP_ERUNTIME, "out of memory staging %zu floats for the checkpoint shard", floats);
    if (rc == DDP_OK)
        rc = stage(t, s, x, nx, host, tensors, err);
    char name[CKPT_SET_SHARD_NAME_MAX], path[CKPT_PATH_MAX];
    ckpt_set_shard_name(t->ctl->rank, t->ctl->size, alternate, name, sizeof name);
    ckpt_state st = {.hdr = s->hdr, .n_tensors = nx * s->n_buffers, .tensors = tensors};
    double w0 = monotonic_s();
    if (rc == DDP_OK)
        rc = ckpt_writer_wait(s->writer, NULL, err);
    *prune_wait_s = monotonic_s() - w0;
    if (rc == DDP_OK)
        rc = ckpt_writer_write_as(s->writer, set_dir, name, &st, path, err);
    for (int i = 0; rc == DDP_OK && i < st.n_tensors; i++)
        *bytes += ckpt_tensor_numel(&tensors[i]) * sizeof(float);
    free(x);
    if (ckpt_writer_stalled(s->writer)) /* its thread may still read them: the process is ending */
        return rc;
    free(host);
    free(tensors);
    return rc;
}

/* A buffer every rank holds whole, read and uploaded a chunk at a time (train_host_chunk). */
static int read_whole(train_job *t, ckpt_set_reader *r, const char *prefix, float *dev, ddp_err *err)
{
    size_t n = t->m->n_params, chunk = 0;
    int rc = train_host_chunk(n, &chunk, err);
    float *host = rc == DDP_OK ? malloc((chunk ? chunk : 1) * sizeof *host) : NULL;
    if (rc == DDP_OK && !host)
        rc = ddp_fail_local(err, "out of host memory for a chunk of %zu floats", chunk);
    for (size_t off = 0; rc == DDP_OK && off < n; off += chunk) {
        size_t k = n - off < chunk ? n - off : chunk;
        rc = ckpt_set_read_range(r, prefix, (int64_t)off, (int64_t)k, host, err);
        if (rc == DDP_OK && (rc = t->dev->ops->upload(t->dev, dev + off, host, k * sizeof *host, err)) != DDP_OK)
            ddp_mark_local(err, rc); /* the device could not take it */
    }
    free(host);
    return rc;
}

int train_shard_read_own(train_job *t, ckpt_set_reader *r, const char *prefix, float *dev, bool sharded,
                         ddp_err *err)
{
    if (!sharded)
        return read_whole(t, r, prefix, dev, err);
    optim_part *x = NULL;
    int nx = 0;
    size_t n = t->opt->n_state;
    float *host = calloc(n ? n : 1, sizeof *host);
    int rc = host ? my_extents(t, &x, &nx, err) : ddp_fail_local(err, "out of memory for %zu floats", n);
    for (int e = 0; rc == DDP_OK && e < nx; e++)
        rc = ckpt_set_read_range(r, prefix, (int64_t)x[e].param_offset, (int64_t)x[e].count, host + x[e].state_offset,
                                 err);
    if (rc == DDP_OK && (rc = t->dev->ops->upload(t->dev, dev, host, n * sizeof *host, err)) != DDP_OK)
        ddp_mark_local(err, rc);
    free(x);
    free(host);
    return rc;
}

/* Rank 0's commit (the manifest from the shards' tables, with this model's tensor table) and, once
 * every rank knows the set is committed, the prune: jobs of the rank's writer (ckpt_writer_run and
 * ckpt_writer_start), whose waits are watched. What they read is their own, as a job given up may
 * run on at any time. */
typedef struct commit_job {
    ckpt_manifest spec;          /* its tensor table and settings on the heap */
    char set_dir[CKPT_PATH_MAX], dir[CKPT_PATH_MAX];
    int n_shards, keep_last;
    bool alternate;
    ckpt_uploader *uploader;     /* rank 0's, or NULL */
} commit_job;

/* The commit counts each shard's table it reads (a few KB each, but one read per rank): it is given
 * up when it reads none for stall_s. The prune counts each file it removes. */
static int commit_main(void *ctx, _Atomic uint64_t *progress, ddp_err *err)
{
    commit_job *j = ctx;
    test_fault_sleep_at("slow-commit", j->spec.hdr.step);
    int rc = ckpt_set_commit(j->set_dir, &j->spec, j->n_shards, j->alternate, progress, err);
    return rc == DDP_OK ? dir_fsync(j->dir, err) : rc;
}

static void commit_job_free(commit_job *j)
{
    if (!j)
        return;
    free(j->spec.tensors);
    free((char *)j->spec.settings);
    free(j);
}

/* Hands the committed set to the uploader first, so that the prune spares what an upload still
 * reads (as ckpt_writer.c does for a file); runs while the ranks train on, and frees its job:
 * nobody waits for it but the next wait. The progress counter counts each file it removes. */
static int prune_main(void *ctx, _Atomic uint64_t *progress, ddp_err *err)
{
    commit_job *j = ctx;
    (void)err;
    double t0 = monotonic_s();
    uint64_t before = atomic_load(progress);
    char held[2][CKPT_PATH_MAX] = {"", ""};
    if (j->uploader) {
        ckpt_uploader_submit(j->uploader, j->set_dir, j->spec.hdr.step);
        ckpt_uploader_held(j->uploader, held);
    }
    const char *const held_paths[2] = {held[0], held[1]};
    test_fault_sleep_at("slow-prune", j->spec.hdr.step);
    ckpt_prune_after_save(j->dir, j->keep_last, j->set_dir, held_paths, 2, progress); /* a failure is a warning */
    uint64_t removed = atomic_load(progress) - before;
    if (removed > 0)
        log_info("checkpoint: after %s, older sets beyond checkpoint.keep_last removed in the background (%llu "
                 "files, %.1f ms)", j->set_dir, (unsigned long long)removed, 1e3 * (monotonic_s() - t0));
    commit_job_free(j);
    return DDP_OK;
}

static int commit_job_new(const train_job *t, const train_shard_save *s, const char *set_dir, bool alternate,
                          commit_job **out, ddp_err *err)
{
    const model *m = t->m;
    if (s->n_buffers > CKPT_SET_MAX_BUFFERS)
        return ddp_fail(err, DDP_EUSAGE, "checkpoint %s: %d buffers; a set holds %d", set_dir, s->n_buffers,
                        CKPT_SET_MAX_BUFFERS);
    commit_job *j = *out = calloc(1, sizeof *j);
    if (j) {
        j->spec = (ckpt_manifest){.hdr = s->hdr, .n_buffers = s->n_buffers, .buffer_len = (int64_t)m->n_params,
                                  .n_tensors = m->n_tensors, .settings_len = s->settings ? strlen(s->settings) : 0,
                                  .train_samples = s->train_samples};
        j->spec.tensors = calloc((size_t)m->n_tensors + 1, sizeof *j->spec.tensors);
        j->spec.settings = s->settings ? strdup(s->settings) : NULL;
    }
    if (!j || !j->spec.tensors || (s->settings && !j->spec.settings))
        return ddp_fail(err, DDP_ERUNTIME, "out of memory for the checkpoint manifest");
    for (int b = 0; b < s->n_buffers; b++)
        snprintf(j->spec.buffers[b], sizeof j->spec.buffers[b], "%s", s->buffers[b].prefix);
    for (int i = 0; i < m->n_tensors; i++) {
        ckpt_set_tensor *x = &j->spec.tensors[i];
        snprintf(x->name, sizeof x->name, "%s", m->tensors[i].name);
        x->ndim = m->tensors[i].ndim;
        memcpy(x->shape, m->tensors[i].shape, sizeof m->tensors[i].shape);
        x->offset = (int64_t)m->tensors[i].offset;
    }
    snprintf(j->set_dir, sizeof j->set_dir, "%s", set_dir);
    snprintf(j->dir, sizeof j->dir, "%s", s->dir);
    j->n_shards = t->ctl->size;
    j->keep_last = s->keep_last;
    j->alternate = alternate;
    j->uploader = s->uploader;
    return DDP_OK;
}

/* Rank 0: the commit's job, *job kept for the prune after it. */
static int commit(train_job *t, const train_shard_save *s, const char *set_dir, bool alternate, commit_job **job,
                  ddp_err *err)
{
    int rc = commit_job_new(t, s, set_dir, alternate, job, err);
    char what[CKPT_PATH_MAX + 64];
    snprintf(what, sizeof what, "the commit of %s (step %lld) made no progress", set_dir, (long long)s->hdr.step);
    return rc == DDP_OK ? ckpt_writer_run(s->writer, what, commit_main, *job, err) : rc;
}

/* Rank 0: j freed, unless its writer gave a job up (whose thread may still use it). */
static void commit_job_release(const train_shard_save *s, commit_job *j)
{
    if (!ckpt_writer_stalled(s->writer))
        commit_job_free(j);
}

/* Rank 0, the set at set_dir committed: the prune started, the commit's job j handed to it. */
static int start_prune(const train_shard_save *s, const char *set_dir, commit_job *j, ddp_err *err)
{
    char what[CKPT_PATH_MAX + 128];
    snprintf(what, sizeof what, "step %lld is committed (%s), but removing older ones beyond checkpoint.keep_last "
             "made no progress", (long long)s->hdr.step, set_dir);
    int rc = ckpt_writer_start(s->writer, what, prune_main, j, err);
    if (rc != DDP_OK)
        commit_job_release(s, j);
    return rc;
}

/* Every rank learns the sum of v (failures, bytes) over the ranks. */
static int agree(train_job *t, int64_t *v, int n, ddp_err *err)
{
    comm *c = t->ctl;
    snprintf(c->label, sizeof c->label, "checkpoint set");
    int rc = c->ops->allreduce(c, v, v, (size_t)n, DT_INT64, OP_SUM, NULL, err);
    c->label[0] = '\0';
    return rc;
}

/* Rank 0's wall clock to the microsecond, the same in every rank's copy of save->hdr: the save's
 * identity, which the commit checks every shard's header for; and rank 0's answer to whether the
 * shards take the alternate names (a committed set of this step is kept whole until the commit). */
static int share_save_identity(train_job *t, train_shard_save *save, const char *set_dir, bool *alternate,
                               ddp_err *err)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    save->hdr.save_time = (double)now.tv_sec + 1e-6 * (double)(now.tv_nsec / 1000);
    comm *c = t->ctl;
    int64_t alt = c->rank == 0 && ckpt_set_names_taken(set_dir, c->size);
    int rc = c->ops->broadcast(c, &save->hdr.save_time, 1, DT_DOUBLE, 0, NULL, err);
    if (rc == DDP_OK)
        rc = c->ops->broadcast(c, &alt, 1, DT_INT64, 0, NULL, err);
    *alternate = alt != 0;
    return rc;
}

int train_shard_write(train_job *t, const train_shard_save *shared, ckpt_write_stats *st, ddp_err *err)
{
    double t0 = monotonic_s();
    char set_dir[CKPT_PATH_MAX], name[64];
    train_shard_save save = *shared;
    const train_shard_save *s = &save;
    ckpt_set_dir_name(s->hdr.step, name, sizeof name);
    snprintf(set_dir, sizeof set_dir, "%s/%s", s->dir, name);
    uint64_t bytes = 0;
    bool alternate;
    int rc = share_save_identity(t, &save, set_dir, &alternate, err);
    if (rc != DDP_OK)
        return rc;
    double prune_wait_s = 0;
    rc = write_own_shard(t, s, set_dir, alternate, &bytes, &prune_wait_s, err); /* makes set_dir, watched */
    if (rc != DDP_OK)
        log_error("checkpoint: rank %d: %s", t->ctl->rank, err->msg);
    else
        test_shard_exit(t);
    int64_t v[2] = {rc != DDP_OK, (int64_t)bytes};
    int arc = agree(t, v, 2, err);
    if (arc != DDP_OK)
        return arc;
    if (v[0] > 0)
        return ddp_fail(err, DDP_ERUNTIME, "checkpoint %s: %lld rank(s) could not write their shard (errors above); "
                        "the set is not committed", set_dir, (long long)v[0]);
    commit_job *job = NULL;
    int64_t verdict[1] = {t->ctl->rank == 0 ? commit(t, s, set_dir, alternate, &job, err) != DDP_OK : 0};
    if (verdict[0])
        log_error("checkpoint: %s", err->msg);
    if ((arc = agree(t, verdict, 1, err)) != DDP_OK || verdict[0]) {
        if (t->ctl->rank == 0)
            commit_job_release(s, job);
        if (arc != DDP_OK)
            return arc;
        /* rank 0 said why above, before the agreement */
        return t->ctl->rank == 0 ? ddp_fail(err, DDP_ERUNTIME, "checkpoint %s: the set is not committed (the error "
                                            "above says why)", set_dir)
                                 : ddp_fail(err, DDP_ERUNTIME, "checkpoint %s: rank 0 could not commit the set", set_dir);
    }
    if (st)
        *st = (ckpt_write_stats){.write_s = monotonic_s() - t0 - prune_wait_s, .prune_s = prune_wait_s,
                                 .bytes = (uint64_t)v[1]};
    if (st)
        snprintf(st->path, sizeof st->path, "%s", set_dir);
    return t->ctl->rank == 0 ? start_prune(s, set_dir, job, err) : DDP_OK;
}
