/* train_ckpt.c — when and what a training job saves, and how it resumes.
 *
 * Parameters and optimizer state are replicated, so rank 0 alone snapshots them (device ->
 * host, then a deep copy by the background writer: that is the whole training stall) and
 * writes them with ckpt.h's atomic writer, together with the model's description. On resume
 * rank 0 finds and verifies the checkpoint, refuses one written for another model (naming
 * both), and broadcasts it, so ranks need no shared filesystem and a different world size is
 * fine: the sampler continues from the same number of globally consumed samples. Under ZeRO the
 * optimizer state is sharded: every rank takes part in a save (rank 0 collects the shards into
 * the same global layout, train_zero.c) and takes its shard from the full state on resume, so
 * checkpoints do not depend on ddp.zero or the world size. With checkpoint.sharded no rank
 * gathers anything: every rank writes its own shard and rank 0 commits the set (train_shard.c); a
 * resume reads either kind (ckpt_find_latest assembles a set on rank 0). No RNG state
 * is saved: every stream is derived from run.seed, its purpose and the epoch (README, "How it
 * works"; docs/checkpoint-format.md, "Resuming"). A job that loads no checkpoint and has
 * checkpoint.init_from starts from that llm.c model file (models/gpt2_llmc.h) or Hugging Face
 * folder (a directory), through the kind's row of models/model_files.h, instead, read by rank 0
 * and broadcast like a checkpoint; the model section's shape keys a config leaves out are
 * its shape, read by rank 0 and broadcast before anything is built, on a resume too (so the config
 * hash is the same). Before every save all ranks check that the parameters and optimizer state are
 * finite (train_finite.c): a checkpoint is never written from NaN or
 * infinite values, so the last finite one is never pruned for it. It owns the writer, the saved
 * buffers' staging and the save clock (struct train_ckpt).
 * Must not decide the file format (ckpt.c) or the loop order (train.c). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sys/stat.h>

#include "models/model_files.h"
#include "runtime/ckpt/ckpt.h"
#include "runtime/ckpt/ckpt_set.h"
#include "runtime/ckpt/ckpt_upload.h"
#include "runtime/base/activity.h"
#include "runtime/base/clock.h"
#include "runtime/base/dirs.h"
#include "runtime/base/log.h"
#include "runtime/device/device_prof.h"
#include "train_budget.h"
#include "train_ckpt.h"
#include "train_finite.h"
#include "train_replica.h"
#include "train_shard.h"
#include "train_stop.h"
#include "train_zero.h"

_Static_assert(MODEL_DESCRIPTION_MAX <= CKPT_MODEL_MAX, "a model description must fit the checkpoint header");

/* Per parameter tensor a checkpoint holds the parameters and each optimizer state buffer, under
 * a prefix per buffer: param/fc1.weight, optim/exp_avg/fc1.weight, ... */
#define MAX_SAVED_BUFFERS 4

typedef struct saved_buffer {
    char prefix[32];
    float *dev;                   /* n_params floats on the device, or this rank's shard */
    bool sharded;                 /* ZeRO optimizer state: dev holds the optimizer's n_state floats */
} saved_buffer;
_Static_assert(sizeof(((saved_buffer *)0)->prefix) - 1 + MODEL_TENSOR_NAME_MAX <= CKPT_NAME_MAX,
               "a buffer's prefix and a tensor's name fit a checkpoint's tensor name");

typedef struct train_ckpt {
    ckpt_writer *writer;          /* rank 0 only */
    ckpt_uploader *uploader;      /* rank 0, with checkpoint.upload_cmd */
    char dir[CFG_PATH_MAX + 16];  /* checkpoint.dir, or run.dir/checkpoints */
    char command_log[CFG_PATH_MAX + 32];
    saved_buffer buffers[MAX_SAVED_BUFFERS];
    int n_buffers;
    float *host;                  /* rank 0: staging, the buffers one after another */
    char *settings;               /* rank 0: config_hashed_settings, saved as meta/config */
    ckpt_tensor *tensors;
    int64_t last_saved_step;
    double last_save_time;        /* monotonic: when the latest save began (before the first: train_ckpt_open) */
    int restart_count;            /* this attempt (DDPRUN_RESTART_COUNT), saved in the header */
    double stall_s;               /* rank 0: the latest save's stall, from its start to the snapshot's submit */
    bool pending;                 /* rank 0: a write whose times are not yet reported (train_budget.c) */
    ckpt_write_observer observe;  /* checkpoint.sharded: told of each save's write (train_ckpt_observe) */
    void *observe_ctx;
} train_ckpt;

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

int train_ckpt_open(train_job *t, ddp_err *err)
{
    train_ckpt *c = calloc(1, sizeof *c);
    if (!c)
        return ddp_fail(err, DDP_ERUNTIME, "out of memory");
    t->ckpt = c;
    c->last_saved_step = -1;
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
    if (t->ctl->rank != 0)
        return DDP_OK;
    if (cfg->checkpoint.sharded) /* every rank stages its own shard (train_shard.c) */
        return (c->settings = config_hashed_settings(cfg)) ? DDP_OK
               : ddp_fail(err, DDP_ERUNTIME, "out of memory for the checkpoint's settings");
    size_t n = t->m->n_params, bufs = (size_t)c->n_buffers;
    c->host = malloc(n * bufs * sizeof(float));
    c->tensors = calloc((size_t)t->m->n_tensors * bufs + 1, sizeof *c->tensors);
    c->settings = config_hashed_settings(cfg);
    if (!c->host || !c->tensors || !c->settings)
        return ddp_fail(err, DDP_ERUNTIME, "out of memory for the checkpoint staging buffer");
    int rc = ckpt_writer_create(c->dir, (int)cfg->checkpoint.keep_last, &c->writer, err);
    if (rc == DDP_OK && cfg->checkpoint.upload_cmd[0]) {
        rc = ckpt_uploader_create(cfg->checkpoint.upload_cmd, cfg->checkpoint.command_timeout_s, c->command_log,
                                  &c->uploader, err);
        if (rc == DDP_OK)
            ckpt_writer_set_uploader(c->writer, c->uploader);
    }
    return rc;
}

int train_ckpt_check_dir(train_job *t, ddp_err *err)
{
    const train_ckpt *c = t->ckpt;
    if (t->ctl->rank != 0 || make_writable_dir(c->dir, err) == DDP_OK)
        return DDP_OK;
    return t->cfg->checkpoint.dir[0] ? ddp_prefix(err, "checkpoint.dir %s", c->dir)
                                     : ddp_prefix(err, "checkpoint directory %s (run.dir/checkpoints)", c->dir);
}

void train_ckpt_close(train_job *t)
{
    train_ckpt *c = t->ckpt;
    if (!c)
        return;
    if (c->writer)
        ckpt_writer_destroy(c->writer);
    ckpt_uploader_destroy(c->uploader); /* after the writer: its last write may still hand one over */
    free(c->host);
    free(c->tensors);
    free(c->settings);
    free(c);
    t->ckpt = NULL;
}

/* Describes params and optimizer state (already in c->host) as named tensors, then the settings
 * the config hash covers as text (meta/config), so that a refused resume can name what changed. */
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
    c->tensors[k] = (ckpt_tensor){.name = CKPT_SETTINGS_TENSOR, .dtype = CKPT_U8, .ndim = 1,
                                  .shape = {(int64_t)strlen(c->settings)}, .data = c->settings};
    return k + 1;
}

/* Rank 0: a save is complete on disk. */
static int written(train_job *t, train_ckpt *c, const ckpt_write_stats *st, ddp_err *err)
{
    train_checkpoint_safe = 1;
    return train_budget_written(t, st, c->stall_s, err);
}

static ckpt_header save_header(const train_job *t, const train_ckpt *c)
{
    ckpt_header h = {.step = t->step, .epoch = t->epoch, .consumed = t->smp.consumed, .total_steps = t->total_steps,
                     .optim_step = t->opt->step, .world_size = t->ctl->size, .restart_count = c->restart_count,
                     .config_hash = config_hash(t->cfg), .save_time = (double)time(NULL),
                     .elapsed_s = monotonic_s() - t->t_start};
    snprintf(h.model, sizeof h.model, "%s", t->m->description);
    return h;
}

/* checkpoint.sharded: every rank writes its shard now, rank 0 commits the set (train_shard.c). */
static int save_sharded(train_job *t, train_ckpt *c, ddp_err *err)
{
    train_shard_buffer b[MAX_SAVED_BUFFERS];
    for (int i = 0; i < c->n_buffers; i++)
        b[i] = (train_shard_buffer){c->buffers[i].prefix, c->buffers[i].dev, c->buffers[i].sharded};
    train_shard_save s = {.dir = c->dir, .buffers = b, .n_buffers = c->n_buffers, .hdr = save_header(t, c),
                          .settings = c->settings, .keep_last = (int)t->cfg->checkpoint.keep_last};
    ckpt_write_stats st;
    double t0 = monotonic_s();
    int rc = train_shard_write(t, &s, &st, err);
    c->stall_s = monotonic_s() - c->last_save_time;
    if (rc == DDP_OK && c->observe)
        c->observe(c->observe_ctx, "checkpoint write", t0, monotonic_s());
    if (rc == DDP_OK && t->ctl->rank == 0) {
        log_info("checkpoint: %s (%.1f MB in %d shards) written and committed in %.1f ms", st.path, st.bytes / 1e6,
                 t->ctl->size, 1e3 * st.write_s);
        rc = written(t, c, &st, err);
    }
    return rc;
}

static int snapshot_and_submit(train_job *t, train_ckpt *c, ddp_err *err)
{
    double t0 = monotonic_s();
    device *d = t->dev;
    size_t n = t->m->n_params, bytes = n * sizeof(float);
    int rc = DDP_OK;
    for (int b = 0; b < c->n_buffers && rc == DDP_OK; b++)
        if (!c->buffers[b].sharded) /* the sharded ones were collected */
            rc = d->ops->download(d, c->host + (size_t)b * n, c->buffers[b].dev, bytes, err);
    if (rc != DDP_OK)
        return rc;
    ckpt_state s = {.tensors = c->tensors, .n_tensors = describe_tensors(t, c), .hdr = save_header(t, c)};
    ckpt_write_stats st;
    if (c->pending && (rc = ckpt_writer_wait(c->writer, &st, err)) == DDP_OK) { /* submit would wait for it too */
        c->pending = false;
        rc = st.path[0] ? written(t, c, &st, err) : DDP_OK;
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
    return t->ctl->rank == 0 && minutes > 0 && monotonic_s() - t->ckpt->last_save_time >= 60.0 * minutes;
}

int train_ckpt_maybe_save(train_job *t, bool due, ddp_err *err)
{
    train_ckpt *c = t->ckpt;
    const config *cfg = t->cfg;
    if (cfg->checkpoint.every_steps > 0 && t->step % cfg->checkpoint.every_steps == 0)
        due = true;
    if (!due || c->last_saved_step == t->step)
        return DDP_OK;
    int rc = train_finite_check_state(t, c->last_saved_step, err);
    if (rc != DDP_OK)
        return rc;
    c->last_saved_step = t->step;
    c->last_save_time = monotonic_s();
    activity_set("saving the checkpoint of step %lld", (long long)t->step);
    if (cfg->checkpoint.sharded)
        return save_sharded(t, c, err);
    for (int b = 0; b < c->n_buffers && rc == DDP_OK; b++)
        if (c->buffers[b].sharded)
            rc = train_zero_collect(t, c->buffers[b].dev, c->host ? c->host + (size_t)b * t->m->n_params : NULL, err);
    if (rc != DDP_OK)
        return ddp_prefix(err, "checkpoint at step %lld: collecting the optimizer state", (long long)t->step);
    if (t->ctl->rank != 0)
        return DDP_OK;
    int range = device_prof_host_begin(t->dev->prof, "checkpoint snapshot", PROF_TRACK_HOST);
    rc = snapshot_and_submit(t, c, err);
    device_prof_host_end(t->dev->prof, range);
    c->stall_s = monotonic_s() - c->last_save_time;
    c->pending = rc == DDP_OK;
    return rc;
}

int train_ckpt_poll(train_job *t, ddp_err *err)
{
    train_ckpt *c = t->ckpt;
    ckpt_write_stats st;
    if (!c->pending || !ckpt_writer_poll(c->writer, &st))
        return DDP_OK;
    c->pending = false;
    return st.path[0] ? written(t, c, &st, err) : DDP_OK; /* a failure: the next submit's */
}

int64_t train_ckpt_last_saved(const train_job *t)
{
    const train_ckpt *c = t->ckpt;
    return c ? c->last_saved_step : -1;
}

int train_ckpt_finish(train_job *t, ddp_err *err)
{
    train_ckpt *c = t->ckpt;
    if (!c || !c->writer)
        return DDP_OK;
    ckpt_write_stats st;
    ddp_err local = {0};
    int rc = ckpt_writer_wait(c->writer, &st, err ? err : &local);
    if (rc == DDP_OK && st.path[0] && c->pending) {
        c->pending = false;
        rc = written(t, c, &st, err ? err : &local);
    }
    if (rc == DDP_OK && st.path[0]) /* a failed write was reported when it happened, never as written */
        log_info("checkpoint: %s (%.1f MB) written in %.1f ms (%.0f MB/s), older ones pruned in %.1f ms; "
                 "training stalled %.1f ms for the snapshot", st.path, st.bytes / 1e6, 1e3 * st.write_s,
                 st.write_s > 0 ? st.bytes / 1e6 / st.write_s : 0.0, 1e3 * st.prune_s, 1e3 * st.snapshot_s);
    if (c->uploader) {
        ckpt_uploader_drain(c->uploader);
        ddp_err e = {0}; /* what an upload held from pruning goes now */
        if (ckpt_prune(c->dir, (int)t->cfg->checkpoint.keep_last, NULL, &e) != DDP_OK)
            log_warn("checkpoint: %s", e.msg);
    }
    return rc;
}

/* ---- resume ------------------------------------------------------------------------- */

enum { HDR_STEP, HDR_EPOCH, HDR_CONSUMED, HDR_TOTAL, HDR_OPTIM_STEP, HDR_WORLD, HDR_N };

/* A checkpoint saved with other settings than this run's (of those config_hash covers): refused,
 * naming each that differs from the checkpoint's meta/config; one saved before checkpoints held
 * their settings can only be said to differ. */
static int refuse_other_settings(const train_job *t, const ckpt_loaded *ck, const char *used, ddp_err *err)
{
    const ckpt_tensor *saved = ckpt_loaded_tensor(ck, CKPT_SETTINGS_TENSOR);
    char changes[DDP_ERR_MSG / 2];
    bool text = saved && saved->dtype == CKPT_U8 && saved->ndim == 1;
    if (config_settings_changes(text ? saved->data : NULL, text ? saved->nbytes : 0, t->cfg, changes,
                                sizeof changes) > 0)
        return ddp_fail(err, DDP_EUSAGE, "%s was saved with other settings than this run's: %s; resume it with the "
                        "settings it was saved with, or set checkpoint.resume: never", used, changes);
    return ddp_fail(err, DDP_EUSAGE, "%s was saved by a run with different model, data or optimizer settings%s; "
                    "resume it with the same config, or set checkpoint.resume: never", used,
                    text ? "" : " (it does not record which: it was saved before checkpoints held their settings)");
}

/* Copies every saved buffer's tensors of a checkpoint written for this model into host. */
static int copy_tensors(const train_job *t, const ckpt_loaded *ck, const char *used, float *host, ddp_err *err)
{
    const model *m = t->m;
    const train_ckpt *c = t->ckpt;
    for (int b = 0; b < c->n_buffers; b++) {
        for (int i = 0; i < m->n_tensors; i++) {
            char name[CKPT_NAME_MAX];
            snprintf(name, sizeof name, "%s%s", c->buffers[b].prefix, m->tensors[i].name);
            const ckpt_tensor *x = ckpt_loaded_tensor(ck, name);
            if (!x || x->dtype != CKPT_F32 || ckpt_tensor_numel(x) != m->tensors[i].numel)
                return ddp_fail(err, DDP_EUSAGE, "%s: tensor %s is %s in the checkpoint; this model needs %zu float32 "
                                "values", used, name, x ? "of another shape or type" : "missing", m->tensors[i].numel);
            memcpy(host + (size_t)b * m->n_params + m->tensors[i].offset, x->data, m->tensors[i].numel * sizeof(float));
        }
    }
    return DDP_OK;
}

/* Rank 0: fills host (params | state buffers) and hdr from a verified checkpoint. Returns
 * DDP_OK, CKPT_NONE, or an error. */
static int load_on_rank0(train_job *t, float *host, int64_t *hdr, char *used, ddp_err *err)
{
    const config *cfg = t->cfg;
    ckpt_loaded ck = {0};
    int rc = CKPT_NONE;
    /* A restart by ddprun --max-restarts continues this run: its own newest checkpoint wins
     * over checkpoint.resume (never / a path), which only decides how the first attempt starts. */
    const train_ckpt *c = t->ckpt;
    bool own_newest = cfg->checkpoint.resume == RESUME_AUTO || c->restart_count > 0;
    if (own_newest)
        rc = ckpt_find_latest(c->dir, &ck, used, err);
    if (rc == CKPT_NONE && own_newest && cfg->checkpoint.download_cmd[0]) {
        rc = ckpt_download(cfg->checkpoint.download_cmd, c->dir, cfg->checkpoint.command_timeout_s, c->command_log,
                           err);
        if (rc == DDP_OK && (rc = ckpt_find_latest(c->dir, &ck, used, err)) == CKPT_NONE)
            log_info("checkpoint: checkpoint.download_cmd brought no checkpoint into %s", c->dir);
    }
    if (rc == CKPT_NONE && cfg->checkpoint.resume == RESUME_PATH) {
        snprintf(used, CKPT_PATH_MAX, "%s", cfg->checkpoint.resume_path);
        rc = ckpt_read_any(used, &ck, false, err); /* a file, or a sharded set's directory */
    }
    if (rc != DDP_OK)
        return rc;
    if (strcmp(ck.hdr.model, t->m->description) != 0)
        rc = ddp_fail(err, DDP_EUSAGE, "%s: checkpoint was written for %s, this run builds %s; resume with the model "
                      "settings it was written with, or set checkpoint.resume: never", used, ck.hdr.model,
                      t->m->description);
    else if (ck.hdr.config_hash != config_hash(cfg))
        rc = refuse_other_settings(t, &ck, used, err);
    else
        rc = copy_tensors(t, &ck, used, host, err);
    int64_t h[HDR_N] = {ck.hdr.step, ck.hdr.epoch, ck.hdr.consumed, ck.hdr.total_steps, ck.hdr.optim_step,
                        ck.hdr.world_size};
    memcpy(hdr, h, sizeof h);
    ckpt_loaded_free(&ck);
    return rc;
}

static int apply_resume(train_job *t, const float *host, const int64_t *hdr, const char *used, ddp_err *err)
{
    device *d = t->dev;
    train_ckpt *c = t->ckpt;
    size_t n = t->m->n_params, bytes = n * sizeof(float);
    int rc = DDP_OK;
    for (int b = 0; b < c->n_buffers && rc == DDP_OK; b++)
        rc = c->buffers[b].sharded ? train_zero_distribute(t, host + (size_t)b * n, c->buffers[b].dev, err)
                                   : d->ops->upload(d, c->buffers[b].dev, host + (size_t)b * n, bytes, err);
    t->step = hdr[HDR_STEP];
    t->epoch = hdr[HDR_EPOCH];
    t->opt->step = hdr[HDR_OPTIM_STEP];
    if (rc == DDP_OK)
        rc = train_params_changed(t, err);
    int world_at_save = (int)hdr[HDR_WORLD];
    c->last_saved_step = t->step;
    log_info("resumed from %s: step %lld, epoch %lld, %lld samples of the epoch consumed", used,
             (long long)t->step, (long long)t->epoch + 1, (long long)hdr[HDR_CONSUMED]);
    if (world_at_save != t->ctl->size)
        log_info("resume: world size changed from %d to %d ranks; the sampler continues with the rest of the epoch "
                 "split %d ways", world_at_save, t->ctl->size, t->ctl->size);
    return rc;
}

/* The LR schedule's horizon after a resume, from the config as it is now: train.max_steps, or the
 * steps done plus what is left of this epoch and of the remaining epochs at this world size. With
 * an unchanged config and world size that is the horizon the checkpoint was saved with; more
 * epochs or steps extend the run, and a new world size re-plans the rest. */
static void recompute_total(train_job *t, const int64_t *hdr)
{
    const config *cfg = t->cfg;
    if (cfg->train.max_steps > 0) {
        t->total_steps = cfg->train.max_steps;
        return;
    }
    int64_t left_now = 0;
    if (sampler_set_epoch(&t->smp, t->epoch, hdr[HDR_CONSUMED], NULL) == DDP_OK)
        left_now = sampler_steps_left(&t->smp) / t->accum;
    int64_t later_epochs = cfg->train.epochs - t->epoch - 1;
    t->total_steps = t->step + left_now + (later_epochs > 0 ? later_epochs * t->steps_per_epoch : 0);
}

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* model.kind's files (models/model_files.h); the config allows checkpoint.init_from only for a kind
 * that has them (config_check.c). */
static int kind_files(const config *cfg, const model_files **f, ddp_err *err)
{
    *f = model_files_of(cfg->model.kind);
    return *f ? DDP_OK : ddp_fail(err, DDP_EUSAGE, "checkpoint.init_from: this model.kind starts from no file");
}

int train_ckpt_take_shape(config *cfg, comm *ctl, ddp_err *err)
{
    if (!config_shape_pending(cfg))
        return DDP_OK;
    const model_files *f;
    int frc = kind_files(cfg, &f, err);
    if (frc != DDP_OK)
        return frc;
    const char *path = cfg->checkpoint.init_from, *kind = f->name;
    bool hf = is_dir(path);
    config_shape s;
    int64_t msg[1 + (sizeof s + sizeof(int64_t) - 1) / sizeof(int64_t)];
    memset(&s, 0, sizeof s);
    memset(msg, 0, sizeof msg);
    if (ctl->rank == 0) {
        activity_set("reading the model shape from checkpoint.init_from %s", path);
        msg[0] = f->read_shape(path, hf, &s, err); /* s: the kind's member */
        if (msg[0] != DDP_OK)
            ddp_prefix(err, "checkpoint.init_from, for the model.%s shape %s leaves out", kind, cfg->source);
        memcpy(msg + 1, &s, sizeof s);
    }
    int rc = ctl->ops->broadcast(ctl, msg, sizeof msg / sizeof msg[0], DT_INT64, 0, NULL, err);
    if (rc == DDP_OK && msg[0] != DDP_OK)
        return ctl->rank ? ddp_fail(err, (int)msg[0], "rank 0 could not read the shape of checkpoint.init_from %s",
                                    path) : (int)msg[0];
    if (rc != DDP_OK)
        return rc;
    memcpy(&s, msg + 1, sizeof s);
    char file[CFG_PATH_MAX + 16], text[512];
    snprintf(file, sizeof file, "%s%s", path, hf ? "/" HF_CONFIG : "");
    rc = config_take_shape(cfg, &s, file, hf ? f->hf_shape_names : f->llmc_shape_names, err);
    if (rc == DDP_OK && ctl->rank == 0) {
        f->format_shape(&s, text, sizeof text);
        log_info("model.%s shape from checkpoint.init_from %s: %s", kind, file, text);
    } else if (rc != DDP_OK && ctl->rank != 0) {
        err->msg[0] = '\0'; /* every rank found the same; rank 0 reports it */
    }
    return rc;
}

/* Rank 0's part of init_from_file: the parameters of the llm.c file or Hugging Face folder at path,
 * as model.kind's files read them. */
static int load_init_from(train_job *t, const char *path, bool hf, ddp_err *err)
{
    const model_files *f;
    int rc = kind_files(t->cfg, &f, err);
    return rc != DDP_OK ? rc : f->load(t->m, path, hf, err);
}

/* checkpoint.init_from, when nothing was resumed: rank 0 reads the llm.c file, or the Hugging Face
 * folder when the path is a directory, into its parameters (validated against this run's model
 * shape), every rank learns its verdict, then rank 0's parameters are broadcast. */
static int init_from_file(train_job *t, ddp_err *err)
{
    const char *path = t->cfg->checkpoint.init_from;
    if (!path[0])
        return DDP_OK;
    bool hf = is_dir(path);
    int32_t status = DDP_OK;
    activity_set("loading the parameters of checkpoint.init_from %s", path);
    /* ZeRO-3: the readers fill a whole model, which then goes into the shard */
    int rc = t->zero ? train_zero_unshard_params(t, err) : DDP_OK;
    if (rc != DDP_OK)
        return rc;
    if (t->ctl->rank == 0 && (status = load_init_from(t, path, hf, err)) != DDP_OK)
        ddp_prefix(err, "checkpoint.init_from");
    rc = t->ctl->ops->broadcast(t->ctl, &status, 1, DT_INT32, 0, NULL, err);
    if (rc == DDP_OK && status != DDP_OK) {
        if (t->ctl->rank != 0)
            ddp_fail(err, status, "rank 0 could not load checkpoint.init_from %s", path);
        return status;
    }
    if (rc == DDP_OK)
        log_info("parameters from the %s %s (checkpoint.init_from)", hf ? "Hugging Face folder" : "llm.c model file",
                 path);
    if (rc == DDP_OK)
        rc = train_broadcast_params(t, err);
    return rc == DDP_OK && t->zero ? train_zero_reshard_params(t, err) : rc;
}

int train_ckpt_resume(train_job *t, int64_t *consumed, ddp_err *err)
{
    const train_ckpt *c = t->ckpt;
    *consumed = 0;
    if (t->cfg->checkpoint.resume == RESUME_NEVER && c->restart_count == 0)
        return init_from_file(t, err);
    size_t n = t->m->n_params, total = n * (size_t)c->n_buffers;
    float *host = malloc(total * sizeof(float));
    if (!host)
        return ddp_fail(err, DDP_ERUNTIME, "out of memory for resume");
    int64_t hdr[HDR_N] = {0};
    char used[CKPT_PATH_MAX] = "";
    int32_t status = DDP_OK;
    activity_set("reading the last checkpoint in %s", c->dir);
    if (t->ctl->rank == 0)
        status = load_on_rank0(t, host, hdr, used, err);
    /* Every rank learns rank 0's verdict, so a bad checkpoint stops all of them cleanly. */
    int rc = t->ctl->ops->broadcast(t->ctl, &status, 1, DT_INT32, 0, NULL, err);
    if (rc == DDP_OK && status == DDP_OK) {
        train_checkpoint_safe = 1; /* rank 0 read it whole: a job ended now resumes from it */
        rc = t->ctl->ops->broadcast(t->ctl, hdr, HDR_N, DT_INT64, 0, NULL, err);
        if (rc == DDP_OK)
            rc = t->ctl->ops->broadcast(t->ctl, host, total, DT_FLOAT, 0, NULL, err);
        if (rc == DDP_OK)
            rc = apply_resume(t, host, hdr, used, err);
        if (rc == DDP_OK) {
            recompute_total(t, hdr);
            *consumed = hdr[HDR_CONSUMED];
        }
        if (rc == DDP_OK && t->cfg->checkpoint.init_from[0])
            log_info("checkpoint.init_from %s not used: the run resumed", t->cfg->checkpoint.init_from);
    } else if (rc == DDP_OK && status == CKPT_NONE) {
        if (t->cfg->checkpoint.resume == RESUME_AUTO)
            log_info("checkpoint: none in %s, starting fresh", c->dir);
        free(host);
        return init_from_file(t, err);
    } else if (rc == DDP_OK) {
        rc = status;
        if (t->ctl->rank != 0)
            ddp_fail(err, status, "rank 0 could not load the checkpoint");
    }
    free(host);
    return rc;
}
