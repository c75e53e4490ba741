/* train_ckpt.c — when and what a training job saves (its resume: train_resume.c).
 *
 * Parameters and optimizer state are replicated, so rank 0 alone snapshots them (device ->
 * host, then a deep copy by the background writer: that is the whole training stall) and
 * writes them with ckpt.h's atomic writer, together with the model's description and the
 * settings config_hash covers. Under ZeRO the optimizer state is sharded: every rank takes part
 * in a save (rank 0 collects the shards into the same global layout, train_zero.c), so
 * checkpoints do not depend on ddp.zero or the world size. With checkpoint.sharded no rank
 * gathers anything: every rank writes its own shard and rank 0 commits the set (train_shard.c).
 * Every save ends in an agreement over t->ctl, where a rank whose write goes on answers busy.
 * No RNG state is saved: every stream is derived from run.seed, its purpose and the epoch
 * (README, "How it works"; docs/checkpoint-format.md, "Resuming"). Before every save all ranks
 * check that the parameters and optimizer state are finite (train_finite.c): a checkpoint is
 * never written from NaN or infinite values, so the last finite one is never pruned for it. It
 * owns the writer, the saved buffers' staging and the save clock (struct train_ckpt,
 * train_ckpt_state.h), and the checks that checkpoint.dir holds one line of training
 * (train_ckpt_refuse_other_line, train_ckpt_check_hosts). Must not decide the file format
 * (ckpt.c) or the loop order (train.c).
 * Test-only: DDP_TEST_FAULT=slow-snapshot:0:STEP:SECONDS makes rank 0's copy of step STEP's state
 * from the device take SECONDS longer, as a large model's would. */
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/ckpt/ckpt.h"
#include "runtime/ckpt/ckpt_set.h"
#include "runtime/ckpt/ckpt_upload.h"
#include "runtime/base/activity.h"
#include "runtime/base/clock.h"
#include "runtime/base/command.h"
#include "runtime/base/dirs.h"
#include "runtime/base/log.h"
#include "runtime/base/test_fault.h"
#include "runtime/device/device_prof.h"
#include "train_agree.h"
#include "train_budget.h"
#include "train_ckpt.h"
#include "train_ckpt_state.h"
#include "train_finite.h"
#include "train_shard.h"
#include "train_stop.h"
#include "train_zero.h"

/* The parameters, then the optimizer state buffers it has, named as its fields. */
static void list_buffers(const train_job *t, train_ckpt *c)
{
    const optimizer *o = t->opt;
    const struct { const char *name; float *dev; } state[] = {
        {"momentum_buffer", o->momentum_buffer}, {"exp_avg", o->exp_avg}, {"exp_avg_sq", o->exp_avg_sq}};
    /* ZeRO-3's parameters are a shard, saved as the optimizer state is */
    c->buffers[0] = (saved_buffer){.prefix = "param/", .dev = train_zero_params(t, &(size_t){0}),
                                   .sharded = t->zero != NULL};
    c->n_buffers = 1;
    for (size_t i = 0; i < sizeof state / sizeof state[0]; i++) {
        if (!state[i].dev)
            continue;
        saved_buffer *b = &c->buffers[c->n_buffers++];
        snprintf(b->prefix, sizeof b->prefix, "optim/%s/", state[i].name);
        b->dev = state[i].dev;
        b->sharded = train_zero_active(t);
    }
}

static void keep_ranks_waiting(void *ctl) { comm_mpi_busy(ctl, "checkpoint write"); }

/* A write the storage takes nothing of is a hung rank, as a collective would be. During training,
 * half the collective deadline: the other ranks wait for this one in a collective of t->ctl under
 * the whole deadline, counted from before this rank's wait (the copy from the device comes first),
 * and this rank must name the storage before their verdict names it as late (ddprun would leave its
 * host out of a restart). While the write is in flight this rank answers their alarm that it is busy
 * (comm_mpi_busy, every second or quarter deadline), and their deadline starts over: slow storage is
 * not a hung rank. A write that stopped is given up within half the deadline, and the answers end. The job's end has the whole deadline (train_ckpt_finish). */
static void watch_writer(const train_job *t, ckpt_writer *w)
{
    double timeout = t->cfg->ddp.timeout_s;
    ckpt_writer_set_stall(w, timeout / 2, "half of ddp.timeout_s");
    ckpt_writer_set_keepalive(w, timeout / 4 < 1.0 ? timeout / 4 : 1.0, keep_ranks_waiting, t->ctl);
}

/* Rank 0, with checkpoint.upload_cmd: the uploader each save's file or set is handed to. */
static int open_uploader(const train_job *t, train_ckpt *c, ddp_err *err)
{
    const config *cfg = t->cfg;
    if (t->ctl->rank != 0 || !cfg->checkpoint.upload_cmd[0])
        return DDP_OK;
    return ckpt_uploader_create(cfg->checkpoint.upload_cmd, cfg->checkpoint.command_timeout_s, c->command_log,
                                &c->uploader, err);
}

/* checkpoint.sharded: every rank writes its shard through a writer of its own, so that a shard the
 * storage takes nothing of is given up and named, as rank 0's single file is: the write is
 * synchronous, and the other ranks wait for it in the agreement after it. */
static int open_shard_writer(train_job *t, train_ckpt *c, ddp_err *err)
{
    const config *cfg = t->cfg;
    if (t->ctl->rank == 0 && !(c->settings = config_settings(cfg, SETTINGS_RESUME)))
        return ddp_fail(err, DDP_ERUNTIME, "out of memory for the checkpoint's settings");
    int rc = ckpt_writer_create(c->dir, 0, &c->shard_writer, err);
    if (rc == DDP_OK)
        watch_writer(t, c->shard_writer);
    return rc == DDP_OK ? open_uploader(t, c, err) : rc;
}

int train_ckpt_open(train_job *t, ddp_err *err)
{
    train_ckpt *c = calloc(1, sizeof *c);
    if (!c)
        return ddp_fail(err, DDP_ERUNTIME, "out of memory");
    t->ckpt = c;
    c->last_saved_step = -1;
    c->durable_step = -1;
    c->last_save_time = monotonic_s();
    const char *rs = getenv("DDPRUN_RESTART_COUNT");
    c->restart_count = rs ? atoi(rs) : 0;
    const config *cfg = t->cfg;
    if (cfg->checkpoint.dir[0])
        snprintf(c->dir, sizeof c->dir, "%s", cfg->checkpoint.dir);
    else
        snprintf(c->dir, sizeof c->dir, "%s/checkpoints", cfg->run.dir);
    snprintf(c->command_log, sizeof c->command_log, "%s/checkpoint-commands.log", cfg->run.dir);
    list_buffers(t, c);
    if (cfg->checkpoint.sharded) /* every rank stages its own shard (train_shard.c) */
        return open_shard_writer(t, c, err);
    if (t->ctl->rank != 0)
        return DDP_OK;
    size_t n = t->m->n_params, bufs = (size_t)c->n_buffers;
    c->host = malloc(n * bufs * sizeof(float));
    c->tensors = calloc((size_t)t->m->n_tensors * bufs + 2, sizeof *c->tensors);
    c->settings = config_settings(cfg, SETTINGS_RESUME);
    if (!c->host || !c->tensors || !c->settings)
        return ddp_fail(err, DDP_ERUNTIME, "out of memory for the checkpoint staging buffer: %.1f GB, the whole "
                        "model's state on rank 0's host%s", (double)(n * bufs * sizeof(float)) / 1e9,
                        t->zero ? " (checkpoint.sharded: true stages only each rank's shard)" : "");
    int rc = ckpt_writer_create(c->dir, (int)cfg->checkpoint.keep_last, &c->writer, err);
    if (rc == DDP_OK)
        watch_writer(t, c->writer);
    if (rc == DDP_OK)
        rc = open_uploader(t, c, err);
    if (rc == DDP_OK && c->uploader)
        ckpt_writer_set_uploader(c->writer, c->uploader);
    return rc;
}

int train_ckpt_check_dir(train_job *t, bool before_resume, ddp_err *err)
{
    train_ckpt *c = t->ckpt;
    bool shared = t->cfg->checkpoint.sharded && t->ctl->size > 1;
    if (before_resume)
        return shared ? train_shard_check_dir(t, c->dir, DDP_OK, true, &c->dir_shared_seen, err) : DDP_OK;
    int rc = t->ctl->rank == 0 ? make_writable_dir(c->dir, err) : DDP_OK;
    if (rc != DDP_OK)
        rc = t->cfg->checkpoint.dir[0] ? ddp_prefix(err, "checkpoint.dir %s", c->dir)
                                       : ddp_prefix(err, "checkpoint directory %s (run.dir/checkpoints)", c->dir);
    /* seen before the resume: rank 0's verdict is its own, as without checkpoint.sharded */
    return shared && !c->dir_shared_seen ? train_shard_check_dir(t, c->dir, rc, false, &c->dir_shared_seen, err) : rc;
}

/* ---- one line of training per checkpoint.dir ---- */

/* Whether the checkpoint at path (a file, or a set's directory) lies in directory dir. */
static bool lies_in(const char *path, const char *dir)
{
    char copy[CKPT_PATH_MAX], a[PATH_MAX], b[PATH_MAX];
    snprintf(copy, sizeof copy, "%s", path); /* dirname may write into its argument */
    return realpath(dirname(copy), a) && realpath(dir, b) && !strcmp(a, b);
}

int train_ckpt_refuse_other_line(const train_job *t, const char *path, int64_t from, ddp_err *err)
{
    const char *dir = t->ckpt->dir;
    if (t->ckpt->restart_count > 0)
        return DDP_OK; /* what a restart finds there is this run's own, an unfinished save's included */
    ckpt_beyond held;
    char start[CKPT_PATH_MAX + 64];
    ddp_err unlisted = {0}; /* nothing a restart could take either: train_ckpt_check_dir names why */
    int64_t beyond = path && lies_in(path, dir) ? from : -1;
    if (ckpt_count_beyond(dir, beyond, &held, &unlisted) != DDP_OK || held.count == 0)
        return DDP_OK;
    if (!path)
        snprintf(start, sizeof start, "this fresh start (checkpoint.resume: never)");
    else
        snprintf(start, sizeof start, "step %lld of %s", (long long)from, path);
    return ddp_fail(err, DDP_EUSAGE, "checkpoint.dir %s holds %d checkpoint(s) that a restart would resume instead "
                    "of %s (the newest %s), and that pruning would keep before this run's own; move them out of %s "
                    "or set another checkpoint.dir (checkpoint.resume: auto continues from its newest)", dir,
                    held.count, start, held.newest, dir);
}

/* The newest checkpoint dir lists on this host (files and committed sets); none when this host
 * cannot list it, which holds nothing a resume here could take. */
static ckpt_beyond newest_listed(const char *dir)
{
    ckpt_beyond held;
    ddp_err unlisted = {0};
    (void)ckpt_count_beyond(dir, -1, &held, &unlisted); /* says none when it fails */
    return held;
}

/* Whether checkpoint name in dir was saved with this run's settings (its header's config hash):
 * what a restart with rank 0 on this host would take for the run's own. */
static bool saved_by_this_config(const train_job *t, const char *dir, const char *name)
{
    char path[CKPT_PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    ddp_err unread = {0};
    uint64_t hash = 0;
    if (ckpt_is_set_dir(path)) {
        ckpt_manifest m;
        if (ckpt_manifest_read(path, &m, &unread) == DDP_OK)
            hash = m.hdr.config_hash, ckpt_manifest_free(&m);
    } else {
        ckpt_loaded c = {0};
        if (ckpt_read_table(path, &c, NULL, &unread) == DDP_OK)
            hash = c.hdr.config_hash;
        ckpt_loaded_free(&c);
    }
    return hash == config_hash(t->cfg);
}

int train_ckpt_check_hosts(train_job *t, ddp_err *err)
{
    const char *dir = t->ckpt->dir;
    int64_t from = t->ctl->rank == 0 ? newest_listed(dir).newest_step : 0;
    from = from > t->step ? from : t->step;
    int rc = t->ctl->ops->broadcast(t->ctl, &from, 1, DT_INT64, 0, NULL, err);
    if (rc != DDP_OK)
        return rc;
    ckpt_beyond here = t->ctl->rank == 0 ? (ckpt_beyond){.newest_step = -1} : newest_listed(dir);
    int32_t mine = DDP_OK;
    bool own_line = t->cfg->checkpoint.resume == RESUME_AUTO || t->ckpt->restart_count > 0;
    if (here.newest_step > from && saved_by_this_config(t, dir, here.newest))
        mine = ddp_fail(err, DDP_EUSAGE, "checkpoint.dir %s on this host (%s, rank %d) holds %s of this config, "
                        "newer than step %lld, where rank 0 takes up the run: the folder is not shared between the "
                        "hosts (or this host sees more of it than rank 0's does). %s", dir, t->ctl->host,
                        t->ctl->rank, here.newest, (long long)from,
                        own_line ? "Start the job with this host first, copy the checkpoint into checkpoint.dir on "
                                   "rank 0's host, or set a checkpoint.dir every host shares"
                                 : "A restart with rank 0 on this host would resume it instead of this run's own "
                                   "line: move it out of checkpoint.dir on this host, or set another checkpoint.dir");
    return train_agree(t, mine, "take up the run: its host's checkpoint.dir holds a newer checkpoint", err);
}

void train_ckpt_close(train_job *t)
{
    train_ckpt *c = t->ckpt;
    if (!c)
        return;
    /* A writer is left to its thread when it gave a write up (a shard's with its staging,
     * train_shard.c); the uploader goes after both, as their last write or prune may still hand
     * it a checkpoint, and is left too when either may do so at any time. */
    bool left = ckpt_writer_destroy(c->writer);
    left |= ckpt_writer_destroy(c->shard_writer);
    if (!left)
        ckpt_uploader_destroy(c->uploader);
    free(c->host);
    free(c->tensors);
    free(c->settings);
    free(c);
    t->ckpt = NULL;
}

/* Describes params and optimizer state (already in c->host) as named tensors, then the settings
 * the config hash covers as text (meta/config), so that a refused resume can name what changed,
 * and the training split's size (meta/train_samples), which the sampler's position refers to. */
static int describe_tensors(train_job *t, train_ckpt *c)
{
    const model *m = t->m;
    int k = 0;
    for (int b = 0; b < c->n_buffers; b++) {
        for (int i = 0; i < m->n_tensors; i++, k++) {
            const param_tensor *p = &m->tensors[i];
            ckpt_tensor *x = &c->tensors[k];
            snprintf(x->name, sizeof x->name, "%s%s", c->buffers[b].prefix, p->name);
            x->dtype = CKPT_F32;
            x->ndim = p->ndim;
            memcpy(x->shape, p->shape, sizeof p->shape);
            x->data = c->host + (size_t)b * m->n_params + p->offset;
        }
    }
    c->tensors[k++] = (ckpt_tensor){.name = CKPT_SETTINGS_TENSOR, .dtype = CKPT_U8, .ndim = 1,
                                    .shape = {(int64_t)strlen(c->settings)}, .data = c->settings};
    c->tensors[k++] = (ckpt_tensor){.name = CKPT_TRAIN_SAMPLES_TENSOR, .dtype = CKPT_I64, .ndim = 1, .shape = {1},
                                    .data = &t->smp.n};
    return k;
}

/* Rank 0: a save is complete on disk. */
static int written(train_job *t, train_ckpt *c, const ckpt_write_stats *st, ddp_err *err)
{
    train_checkpoint_safe = 1;
    snprintf(c->last_written, sizeof c->last_written, "%s", st->path);
    c->durable_step = st->step;
    int rc = train_budget_written(t, st, c->stall_s, err);
    if (c->uploader) /* an upload of an earlier save may have ended since */
        train_budget_uploaded(t, ckpt_uploader_last_seconds(c->uploader));
    return rc;
}

/* Rank 0: a background write ended with status rc (why: its error). A failure is a warning the
 * first time (a full disk, a network mount's hiccup): training goes on and the next save, a
 * preemption's included, writes anew; a second in a row ends the job. Found at the job's end
 * (at_end), where the last step is not saved (checkpoint.final: false), it is judged the same: the
 * outcome must not depend on whether a poll saw it first. */
static int write_ended(train_job *t, train_ckpt *c, int rc, const ckpt_write_stats *st, const ddp_err *why,
                       bool at_end, ddp_err *err)
{
    c->pending = false;
    if (rc == DDP_OK) {
        c->last_write_failed = false;
        return st->path[0] ? written(t, c, st, err) : DDP_OK;
    }
    if (ckpt_writer_stalled(c->writer)) /* no later save can be written */
        return ddp_fail(err, rc, "%s", why->msg);
    if (c->last_write_failed)
        return ddp_fail(err, rc, "checkpoint of step %lld failed, as the save before it did: %s", (long long)st->step,
                        why->msg);
    c->last_write_failed = true;
    log_warn("checkpoint of step %lld failed: %s; %s", (long long)st->step, why->msg,
             at_end ? "the job's last step is not saved (checkpoint.final: false): its newest checkpoint is the one "
                      "before" : "training goes on and the next save tries again (a second failure in a row ends "
                      "the job)");
    return DDP_OK;
}

static ckpt_header save_header(const train_job *t, const train_ckpt *c)
{
    ckpt_header h = {.step = t->step, .epoch = t->epoch, .consumed = t->smp.consumed, .total_steps = t->total_steps,
                     .optim_step = t->opt->step, .world_size = t->ctl->size, .restart_count = c->restart_count,
                     .config_hash = config_hash(t->cfg), .save_time = (double)time(NULL),
                     .elapsed_s = c->elapsed_before_s + (monotonic_s() - t->t_start)};
    snprintf(h.model, sizeof h.model, "%s", t->m->description);
    return h;
}

/* checkpoint.sharded: every rank writes its shard now, rank 0 commits the set (train_shard.c). */
static int save_sharded(train_job *t, train_ckpt *c, ddp_err *err)
{
    train_shard_buffer b[MAX_SAVED_BUFFERS];
    for (int i = 0; i < c->n_buffers; i++)
        b[i] = (train_shard_buffer){c->buffers[i].prefix, c->buffers[i].dev, c->buffers[i].sharded};
    train_shard_save s = {.dir = c->dir, .writer = c->shard_writer, .buffers = b, .n_buffers = c->n_buffers,
                          .hdr = save_header(t, c),
                          .settings = c->settings, .train_samples = t->smp.n, .keep_last = (int)t->cfg->checkpoint.keep_last,
                          .uploader = c->uploader};
    ckpt_write_stats st;
    double t0 = monotonic_s();
    int rc = train_shard_write(t, &s, &st, err);
    c->stall_s = monotonic_s() - c->last_save_time;
    if (rc == DDP_OK && c->observe)
        c->observe(c->observe_ctx, "checkpoint write", t0, monotonic_s());
    if (rc == DDP_OK && t->ctl->rank == 0) {
        char waited[96] = "";
        if (st.prune_s >= 1e-3)
            snprintf(waited, sizeof waited, ", after %.1f ms waiting for the previous save's prune", 1e3 * st.prune_s);
        log_info("checkpoint: %s (%.1f MB in %d shards) written and committed in %.1f ms%s", st.path, st.bytes / 1e6,
                 t->ctl->size, 1e3 * st.write_s, waited);
        st.step = s.hdr.step;
        rc = written(t, c, &st, err);
    }
    return rc;
}

/* Rank 0: the state copied from the device (slowed by the test fault slow-snapshot, the file's
 * header), then submitted to the writer once the write before it is done. */
static int snapshot_and_submit(train_job *t, train_ckpt *c, ddp_err *err)
{
    double t0 = monotonic_s();
    device *d = t->dev;
    size_t n = t->m->n_params, bytes = n * sizeof(float);
    int rc = DDP_OK;
    for (int b = 0; b < c->n_buffers && rc == DDP_OK; b++)
        if (!c->buffers[b].sharded) /* the sharded ones were collected */
            rc = d->ops->download(d, c->host + (size_t)b * n, c->buffers[b].dev, bytes, err);
    test_fault_sleep_at("slow-snapshot", t->step);
    if (rc != DDP_OK)
        return rc;
    ckpt_state s = {.tensors = c->tensors, .n_tensors = describe_tensors(t, c), .hdr = save_header(t, c)};
    ckpt_write_stats st;
    if (c->pending) { /* submit would wait for it too */
        ddp_err why = {0};
        rc = write_ended(t, c, ckpt_writer_wait(c->writer, &st, &why), &st, &why, false, err);
    }
    if (rc == DDP_OK)
        rc = ckpt_writer_submit(c->writer, &s, err);
    if (rc == DDP_OK)
        log_info("checkpoint: step %lld snapshot taken in %.1f ms, writing in the background",
                 (long long)t->step, 1e3 * (monotonic_s() - t0));
    return rc;
}

void train_ckpt_observe(train_job *t, ckpt_write_observer observe, void *ctx)
{
    train_ckpt *c = t->ckpt;
    if (c && c->writer)
        ckpt_writer_set_observer(c->writer, observe, ctx);
    if (c)
        c->observe = observe, c->observe_ctx = ctx;
}

bool train_ckpt_clock_due(const train_job *t)
{
    double minutes = t->cfg->checkpoint.every_minutes;
    /* minutes of training: from this attempt's first step, not from before the resume's download */
    double since = t->ckpt->last_save_time > t->t_start ? t->ckpt->last_save_time : t->t_start;
    return t->ctl->rank == 0 && minutes > 0 && monotonic_s() - since >= 60.0 * minutes;
}

int train_ckpt_maybe_save(train_job *t, bool due, ddp_err *err)
{
    train_ckpt *c = t->ckpt;
    const config *cfg = t->cfg;
    if (cfg->checkpoint.every_steps > 0 && t->step % cfg->checkpoint.every_steps == 0)
        due = true;
    if (!due || c->last_saved_step == t->step)
        return DDP_OK;
    int64_t writing, durable = train_ckpt_durable_step(t, &writing);
    int rc = train_finite_check_state(t, durable, writing, err);
    if (rc != DDP_OK)
        return rc;
    c->last_saved_step = t->step;
    c->last_save_time = monotonic_s();
    if (t->ctl->rank == 0 && !c->marker_forgotten)
        ckpt_download_forget(c->dir), c->marker_forgotten = true;
    activity_set("saving the checkpoint of step %lld", (long long)t->step);
    if (cfg->checkpoint.sharded)
        return save_sharded(t, c, err);
    for (int b = 0; b < c->n_buffers && rc == DDP_OK; b++)
        if (c->buffers[b].sharded)
            rc = train_zero_collect(t, c->buffers[b].dev, c->host ? c->host + (size_t)b * t->m->n_params : NULL, err);
    if (rc != DDP_OK)
        return ddp_prefix(err, "checkpoint at step %lld: collecting the optimizer state", (long long)t->step);
    if (t->ctl->rank == 0) {
        int range = device_prof_host_begin(t->dev->prof, "checkpoint snapshot", PROF_TRACK_HOST);
        rc = snapshot_and_submit(t, c, err);
        device_prof_host_end(t->dev->prof, range);
        c->stall_s = monotonic_s() - c->last_save_time;
        c->pending = rc == DDP_OK;
    }
    /* The others wait for rank 0's snapshot, and the write before it that it waits for, here in a
     * collective of t->ctl, where it answers them busy (NCCL's watchdog in the next step's
     * gradient collectives would not ask), and learn whether it failed. Not when it gave the
     * write up: it exits at once (train.c), and mpirun ends them, before their verdict. */
    if (t->ctl->rank == 0 && ckpt_writer_stalled(c->writer))
        return rc;
    char what[64];
    snprintf(what, sizeof what, "save the checkpoint of step %lld", (long long)t->step);
    snprintf(t->ctl->label, sizeof t->ctl->label, "checkpoint save");
    rc = train_agree(t, rc, what, err);
    t->ctl->label[0] = '\0';
    return rc;
}

int train_ckpt_poll(train_job *t, ddp_err *err)
{
    train_ckpt *c = t->ckpt;
    ckpt_write_stats st;
    ddp_err why = {0};
    int rc;
    if (!c->pending || !ckpt_writer_poll(c->writer, &st, &rc, &why))
        return DDP_OK;
    return write_ended(t, c, rc, &st, &why, false, err);
}

bool train_ckpt_stalled(const train_job *t)
{
    const train_ckpt *c = t->ckpt;
    return c && ((c->writer && ckpt_writer_stalled(c->writer)) ||
                 (c->shard_writer && ckpt_writer_stalled(c->shard_writer)));
}

int64_t train_ckpt_durable_step(const train_job *t, int64_t *writing)
{
    const train_ckpt *c = t->ckpt;
    *writing = c && c->pending ? c->last_saved_step : -1;
    return c ? c->durable_step : -1;
}

/* Rank 0, after the loop: the last step's write failed (err holds why, when the wait found it);
 * its snapshot is taken again (the device holds the same state, and ZeRO's collected parts are
 * still in c->host) and written, waited for. err is cleared, or says why the job fails. */
static int write_last_again(train_job *t, train_ckpt *c, ckpt_write_stats *st, ddp_err *err)
{
    log_warn("checkpoint of step %lld, the job's last step, was not written (%s); writing it once more",
             (long long)t->step, err->msg[0] ? err->msg : "the warning above says why");
    err->msg[0] = '\0';
    ddp_err again = {0};
    c->pending = false;
    int rc = snapshot_and_submit(t, c, &again);
    if (rc == DDP_OK)
        rc = ckpt_writer_wait(c->writer, st, &again);
    if (rc == DDP_OK && st->path[0])
        return written(t, c, st, err);
    return ddp_fail(err, DDP_ERUNTIME, "checkpoint of step %lld, the job's last step, was not written twice (%s): "
                    "the job ends with its state unsaved", (long long)t->step, again.msg[0] ? again.msg : "no file");
}

/* Rank 0 at the job's end, after its writer: the last upload waited for, or ended when the job
 * failed or the storage stalled (its peers wait for this rank: an upload must not hold the job
 * for its time limit); then what uploads held from pruning goes. Returns rc. */
static int finish_uploads(train_job *t, train_ckpt *c, bool failed, bool stalled, int rc)
{
    if (!c->uploader)
        return rc;
    if (failed || stalled)
        ckpt_uploader_abandon(c->uploader);
    /* Stalled: the abandoned upload's end (its group's SIGTERM, then SIGKILL after the grace) is
     * waited for, but not its log's close, in run.dir, maybe on the storage that stopped */
    if (stalled && !ckpt_uploader_drain_for(c->uploader, COMMAND_KILL_GRACE_S + 1))
        log_warn("checkpoint: the upload was stopped but has not ended; the rank ends without it");
    if (stalled)
        return rc;
    ckpt_uploader_drain(c->uploader);
    train_budget_uploaded(t, ckpt_uploader_last_seconds(c->uploader));
    /* What an upload held from pruning goes now, counted from the newest checkpoint this job
     * wrote. A job that wrote none held none, and prunes nothing: the newest one there may be one
     * the resume found damaged and passed over, and keeping it instead of the one resumed from
     * would leave nothing to resume. */
    ddp_err e = {0};
    if (c->last_written[0] && ckpt_prune(c->dir, (int)t->cfg->checkpoint.keep_last, c->last_written, &e) != DDP_OK)
        log_warn("checkpoint: %s", e.msg);
    return rc;
}

/* checkpoint.sharded, at the job's end: rank 0's prune of the last set may still run on its writer,
 * and is waited for under the whole deadline. Its answers stay on: after a failure elsewhere the
 * other ranks may still wait in a collective, and must hear that this rank is busy, not hung (so
 * do train_ckpt_finish's for a single file). */
static int finish_shard_writer(train_job *t, train_ckpt *c, bool failed, ddp_err *err)
{
    ddp_err local = {0};
    ckpt_writer_set_stall(c->shard_writer, t->cfg->ddp.timeout_s, "ddp.timeout_s");
    int rc = ckpt_writer_wait(c->shard_writer, NULL, err ? err : &local);
    if (rc != DDP_OK && !err) /* the job failed already: this is no error of its own */
        log_warn("checkpoint: %s", local.msg);
    return finish_uploads(t, c, failed, ckpt_writer_stalled(c->shard_writer), rc);
}

int train_ckpt_finish(train_job *t, bool failed, ddp_err *err)
{
    train_ckpt *c = t->ckpt;
    if (!failed) /* no agreement comes after the loop: the job's end answers a stop request, whose
                  * deadline must not cut the final write or upload short */
        train_stop_answered = 1;
    if (c && c->shard_writer) /* no c->writer then */
        return finish_shard_writer(t, c, failed, err);
    if (!c || !c->writer)
        return DDP_OK;
    ckpt_write_stats st;
    ddp_err local = {0};
    /* No collective follows: the whole deadline. The writer's answers stay on, as after a failure
     * elsewhere the other ranks may still wait in a collective (finish_shard_writer's too). */
    ckpt_writer_set_stall(c->writer, t->cfg->ddp.timeout_s, "ddp.timeout_s");
    int rc = ckpt_writer_wait(c->writer, &st, err ? err : &local);
    bool stalled = ckpt_writer_stalled(c->writer); /* the storage may answer nothing more */
    if (rc != DDP_OK && !err && c->pending) /* the job failed already: this is no error of its own */
        log_warn("checkpoint of step %lld failed: %s", (long long)c->last_saved_step, local.msg);
    if (rc != DDP_OK && err && c->pending && c->last_saved_step < t->step) { /* an earlier step's, found now */
        ddp_err why = *err;
        err->msg[0] = '\0';
        rc = write_ended(t, c, rc, &st, &why, true, err);
    }
    if (rc == DDP_OK && st.path[0] && c->pending) {
        c->pending = false;
        rc = written(t, c, &st, err ? err : &local);
    }
    /* The save of the job's last step (a stop's, the final one) failed, found now or by a poll that
     * took it for a first failure the next save would make good, but none comes: written once more;
     * a second failure fails the job, as its state is not saved (a stop's exit 75 would tell the
     * launcher that it is). */
    if (!failed && c->last_saved_step == t->step && c->durable_step < t->step && !stalled) {
        rc = write_last_again(t, c, &st, err ? err : &local);
        stalled = ckpt_writer_stalled(c->writer);
    }
    if (rc == DDP_OK && st.path[0]) /* a failed write was reported when it happened, never as written */
        log_info("checkpoint: %s (%.1f MB) written in %.1f ms (%.0f MB/s), older ones pruned in %.1f ms; "
                 "training stalled %.1f ms for the snapshot", st.path, st.bytes / 1e6, 1e3 * st.write_s,
                 st.write_s > 0 ? st.bytes / 1e6 / st.write_s : 0.0, 1e3 * st.prune_s, 1e3 * st.snapshot_s);
    return finish_uploads(t, c, failed, stalled, rc);
}
