/* train_ckpt.c — when and what a training job saves, and how it resumes.
 *
 * Parameters and optimizer state are replicated, so rank 0 alone snapshots them (device ->
 * host, then a deep copy by the background writer: that is the whole training stall) and
 * writes them with ckpt.h's atomic writer. On resume rank 0 finds and verifies the checkpoint
 * and broadcasts it, so ranks need no shared filesystem and a different world size is fine:
 * the sampler continues from the same number of globally consumed samples.
 * Must not decide the file format (ckpt.c) or the loop order (train.c). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/ckpt/ckpt.h"
#include "runtime/base/clock.h"
#include "runtime/base/log.h"
#include "trainer.h"

typedef struct train_ckpt {
    ckpt_writer *writer;          /* rank 0 only */
    char dir[CFG_PATH_MAX + 16];
    float *host;                  /* rank 0: params | state0 | state1 staging */
    ckpt_tensor *tensors;
    int64_t last_saved_step;
} train_ckpt;

static const char *state_prefix(const optimizer *o, int which)
{
    if (o->kind == OPT_SGD)
        return "optim/momentum/";
    return which == 0 ? "optim/exp_avg/" : "optim/exp_avg_sq/";
}

static int n_state_buffers(const optimizer *o) { return o->state1 ? 2 : 1; }

int train_ckpt_open(trainer *t, ddp_err *err)
{
    train_ckpt *c = calloc(1, sizeof *c);
    if (!c)
        return ddp_fail(err, DDP_ERUNTIME, "out of memory");
    t->ckpt = c;
    c->last_saved_step = -1;
    t->last_ckpt_time = monotonic_s();
    snprintf(c->dir, sizeof c->dir, "%s/checkpoints", t->cfg->run.dir);
    if (t->ctl->rank != 0)
        return DDP_OK;
    size_t n = t->m->n_params, bufs = 1 + (size_t)n_state_buffers(t->opt);
    c->host = malloc(n * bufs * sizeof(float));
    c->tensors = calloc((size_t)t->m->n_tensors * bufs, sizeof *c->tensors);
    if (!c->host || !c->tensors)
        return ddp_fail(err, DDP_ERUNTIME, "out of memory for the checkpoint staging buffer");
    return ckpt_writer_create(c->dir, (int)t->cfg->checkpoint.keep_last, &c->writer, err);
}

void train_ckpt_close(trainer *t)
{
    train_ckpt *c = t->ckpt;
    if (!c)
        return;
    if (c->writer)
        ckpt_writer_destroy(c->writer);
    free(c->host);
    free(c->tensors);
    free(c);
    t->ckpt = NULL;
}

/* Describes params and optimizer state (already in c->host) as named tensors. */
static int describe_tensors(trainer *t, train_ckpt *c)
{
    const model *m = t->m;
    int k = 0;
    for (int b = 0; b < 1 + n_state_buffers(t->opt); b++) {
        const char *prefix = b == 0 ? "param/" : state_prefix(t->opt, b - 1);
        for (int i = 0; i < m->n_tensors; i++, k++) {
            const param_tensor *p = &m->tensors[i];
            ckpt_tensor *x = &c->tensors[k];
            snprintf(x->name, sizeof x->name, "%s%s", prefix, p->name);
            x->dtype = CKPT_F32;
            x->ndim = p->ndim;
            memcpy(x->shape, p->shape, sizeof p->shape);
            x->data = c->host + (size_t)b * m->n_params + p->offset;
        }
    }
    return k;
}

static int snapshot_and_submit(trainer *t, train_ckpt *c, ddp_err *err)
{
    double t0 = monotonic_s();
    device *d = t->dev;
    size_t n = t->m->n_params, bytes = n * sizeof(float);
    int rc = d->ops->download(d, c->host, t->m->params, bytes, err);
    if (rc == DDP_OK)
        rc = d->ops->download(d, c->host + n, t->opt->state0, bytes, err);
    if (rc == DDP_OK && t->opt->state1)
        rc = d->ops->download(d, c->host + 2 * n, t->opt->state1, bytes, err);
    if (rc != DDP_OK)
        return rc;
    ckpt_state s = {.tensors = c->tensors, .n_tensors = describe_tensors(t, c)};
    s.hdr = (ckpt_header){.step = t->step, .epoch = t->epoch, .consumed = t->smp.consumed,
                          .total_steps = t->total_steps, .optim_step = t->opt->step,
                          .world_size = t->ctl->size, .restart_count = t->restart_count,
                          .config_hash = config_hash(t->cfg), .save_time = (double)time(NULL),
                          .elapsed_s = monotonic_s() - t->t_start};
    snprintf(s.hdr.model_kind, sizeof s.hdr.model_kind, "mlp");
    rc = ckpt_writer_submit(c->writer, &s, err);
    if (rc == DDP_OK)
        log_info("checkpoint: step %lld snapshot taken in %.1f ms, writing in the background",
                 (long long)t->step, 1e3 * (monotonic_s() - t0));
    return rc;
}

int train_ckpt_maybe_save(trainer *t, int force, ddp_err *err)
{
    train_ckpt *c = t->ckpt;
    const config *cfg = t->cfg;
    bool due = force;
    if (cfg->checkpoint.every_steps > 0 && t->step % cfg->checkpoint.every_steps == 0)
        due = true;
    /* every_minutes is decided by rank 0's clock alone: only rank 0 writes. */
    if (cfg->checkpoint.every_minutes > 0 && monotonic_s() - t->last_ckpt_time >= 60.0 * cfg->checkpoint.every_minutes)
        due = true;
    if (!due || c->last_saved_step == t->step)
        return DDP_OK;
    c->last_saved_step = t->step;
    t->last_ckpt_time = monotonic_s();
    if (t->ctl->rank != 0)
        return DDP_OK;
    return snapshot_and_submit(t, c, err);
}

int train_ckpt_finish(trainer *t, ddp_err *err)
{
    train_ckpt *c = t->ckpt;
    if (!c || !c->writer)
        return DDP_OK;
    ckpt_write_stats st;
    ddp_err local = {0};
    int rc = ckpt_writer_wait(c->writer, &st, err ? err : &local);
    if (rc == DDP_OK && st.bytes > 0)
        log_info("checkpoint: %s (%.1f MB) written in %.1f ms (%.0f MB/s); training stalled %.1f ms for the snapshot",
                 st.path, st.bytes / 1e6, 1e3 * st.write_s, st.write_s > 0 ? st.bytes / 1e6 / st.write_s : 0.0,
                 1e3 * st.snapshot_s);
    return rc;
}

/* ---- resume ------------------------------------------------------------------------- */

enum { HDR_STEP, HDR_EPOCH, HDR_CONSUMED, HDR_TOTAL, HDR_OPTIM_STEP, HDR_WORLD, HDR_HASH_MATCH, HDR_N };

/* Rank 0: fills host (params | state buffers) and hdr from a verified checkpoint. Returns
 * DDP_OK, CKPT_NONE, or an error. */
static int load_on_rank0(trainer *t, float *host, int64_t *hdr, char *used, ddp_err *err)
{
    const config *cfg = t->cfg;
    ckpt_loaded ck = {0};
    int rc = CKPT_NONE;
    /* A restart by ddprun --max-restarts continues this run: its own newest checkpoint wins
     * over checkpoint.resume (never / a path), which only decides how the first attempt starts. */
    if (cfg->checkpoint.resume == RESUME_AUTO || t->restart_count > 0)
        rc = ckpt_find_latest(((train_ckpt *)t->ckpt)->dir, &ck, used, err);
    if (rc == CKPT_NONE && cfg->checkpoint.resume == RESUME_PATH) {
        snprintf(used, CKPT_PATH_MAX, "%s", cfg->checkpoint.resume_path);
        rc = ckpt_read(used, &ck, err);
    }
    if (rc != DDP_OK)
        return rc;
    const model *m = t->m;
    for (int b = 0; b < 1 + n_state_buffers(t->opt) && rc == DDP_OK; b++) {
        const char *prefix = b == 0 ? "param/" : state_prefix(t->opt, b - 1);
        for (int i = 0; i < m->n_tensors; i++) {
            char name[CKPT_NAME_MAX];
            snprintf(name, sizeof name, "%s%s", prefix, m->tensors[i].name);
            const ckpt_tensor *x = ckpt_loaded_tensor(&ck, name);
            if (!x || x->dtype != CKPT_F32 || ckpt_tensor_numel(x) != m->tensors[i].numel) {
                rc = ddp_fail(err, DDP_EUSAGE, "%s: tensor %s is %s in the checkpoint; this model needs %zu float32 values",
                              used, name, x ? "of another shape or type" : "missing", m->tensors[i].numel);
                break;
            }
            memcpy(host + (size_t)b * m->n_params + m->tensors[i].offset, x->data, m->tensors[i].numel * sizeof(float));
        }
    }
    int64_t h[HDR_N] = {ck.hdr.step, ck.hdr.epoch, ck.hdr.consumed, ck.hdr.total_steps, ck.hdr.optim_step,
                        ck.hdr.world_size, ck.hdr.config_hash == config_hash(cfg)};
    memcpy(hdr, h, sizeof h);
    ckpt_loaded_free(&ck);
    return rc;
}

static int apply_resume(trainer *t, const float *host, const int64_t *hdr, const char *used, ddp_err *err)
{
    if (!hdr[HDR_HASH_MATCH])
        return ddp_fail(err, DDP_EUSAGE, "%s was saved by a run with different model, data or optimizer settings; "
                        "resume it with the same config, or set checkpoint.resume: never", used);
    device *d = t->dev;
    size_t n = t->m->n_params, bytes = n * sizeof(float);
    int rc = d->ops->upload(d, t->m->params, host, bytes, err);
    if (rc == DDP_OK)
        rc = d->ops->upload(d, t->opt->state0, host + n, bytes, err);
    if (rc == DDP_OK && t->opt->state1)
        rc = d->ops->upload(d, t->opt->state1, host + 2 * n, bytes, err);
    t->step = hdr[HDR_STEP];
    t->epoch = hdr[HDR_EPOCH];
    t->opt->step = hdr[HDR_OPTIM_STEP];
    t->world_at_save = (int)hdr[HDR_WORLD];
    ((train_ckpt *)t->ckpt)->last_saved_step = t->step;
    log_info("resumed from %s: step %lld, epoch %lld, %lld samples of the epoch consumed", used,
             (long long)t->step, (long long)t->epoch + 1, (long long)hdr[HDR_CONSUMED]);
    if (t->world_at_save != t->ctl->size)
        log_info("resume: world size changed from %d to %d ranks; the sampler continues with the rest of the epoch "
                 "split %d ways", t->world_at_save, t->ctl->size, t->ctl->size);
    return rc;
}

/* The LR schedule's horizon after a resume, from the config as it is now: train.max_steps, or the
 * steps done plus what is left of this epoch and of the remaining epochs at this world size. With
 * an unchanged config and world size that is the horizon the checkpoint was saved with; more
 * epochs or steps extend the run, and a new world size re-plans the rest. */
static void recompute_total(trainer *t, const int64_t *hdr)
{
    const config *cfg = t->cfg;
    if (cfg->train.max_steps > 0) {
        t->total_steps = cfg->train.max_steps;
        return;
    }
    int64_t left_now = 0;
    if (sampler_set_epoch(&t->smp, t->epoch, hdr[HDR_CONSUMED], NULL) == DDP_OK)
        left_now = sampler_steps_left(&t->smp) / cfg->train.grad_accum;
    int64_t later_epochs = cfg->train.epochs - t->epoch - 1;
    t->total_steps = t->step + left_now + (later_epochs > 0 ? later_epochs * t->steps_per_epoch : 0);
}

int train_ckpt_resume(trainer *t, int64_t *consumed, ddp_err *err)
{
    *consumed = 0;
    if (t->cfg->checkpoint.resume == RESUME_NEVER && t->restart_count == 0)
        return DDP_OK;
    size_t n = t->m->n_params, total = n * (1 + (size_t)n_state_buffers(t->opt));
    float *host = malloc(total * sizeof(float));
    if (!host)
        return ddp_fail(err, DDP_ERUNTIME, "out of memory for resume");
    int64_t hdr[HDR_N] = {0};
    char used[CKPT_PATH_MAX] = "";
    int32_t status = DDP_OK;
    if (t->ctl->rank == 0)
        status = load_on_rank0(t, host, hdr, used, err);
    /* Every rank learns rank 0's verdict, so a bad checkpoint stops all of them cleanly. */
    int rc = t->ctl->ops->broadcast(t->ctl, &status, 1, DT_INT32, 0, NULL, err);
    if (rc == DDP_OK && status == DDP_OK) {
        rc = t->ctl->ops->broadcast(t->ctl, hdr, HDR_N, DT_INT64, 0, NULL, err);
        if (rc == DDP_OK)
            rc = t->ctl->ops->broadcast(t->ctl, host, total, DT_FLOAT, 0, NULL, err);
        if (rc == DDP_OK)
            rc = apply_resume(t, host, hdr, used, err);
        if (rc == DDP_OK) {
            recompute_total(t, hdr);
            *consumed = hdr[HDR_CONSUMED];
        }
    } else if (rc == DDP_OK && status == CKPT_NONE) {
        if (t->cfg->checkpoint.resume == RESUME_AUTO)
            log_info("checkpoint: none in %s, starting fresh", ((train_ckpt *)t->ckpt)->dir);
    } else if (rc == DDP_OK) {
        rc = status;
        if (t->ctl->rank != 0)
            ddp_fail(err, status, "rank 0 could not load the checkpoint");
    }
    free(host);
    return rc;
}
