/* train_resume.c — how a training job resumes (train_ckpt.h's train_ckpt_resume), or starts
 * from checkpoint.init_from when nothing is resumed (train_init_from.c).
 *
 * Rank 0 finds and verifies the checkpoint (ckpt_find_latest: the newest valid file or committed
 * sharded set, assembled whole), refuses one written for another model or settings (naming what
 * differs), and broadcasts it, so ranks need no shared filesystem and a different world size or
 * ZeRO stage is fine: the sampler continues from the same number of globally consumed samples and
 * each rank takes what it holds of each chunk of the broadcast (train_share_saved: under ZeRO its
 * shard; no rank but rank 0, which read the file, holds the whole state). A job that saves sharded
 * sets (checkpoint.sharded), or runs ZeRO-3, whose ranks never hold the whole model, reads a set
 * otherwise, so no rank holds the whole state on the host: rank 0 walks the checkpoints newest
 * first and names each set to every rank, which reads what it holds of it (train_shard_read_own:
 * its own extents of what it shards, the rest whole a chunk at a time, each piece's CRC checked as
 * it is read); a set that a rank finds damaged is named and the previous one tried, as
 * ckpt_find_latest does, and a single file ends the walk (read whole there, and resumed as
 * above). All of it waits under its own deadline, checkpoint.resume_timeout_s (resume_deadline_s).
 * Test-only: DDP_TEST_FAULT=slow-resume:RANK:STEP:SECONDS makes RANK take SECONDS longer after it
 * read a checkpoint of step STEP (rank 0 a whole one, any rank its pieces of a set); read-local:
 * RANK:STEP makes RANK's read of its pieces of step STEP's set fail as out of memory (a whole
 * checkpoint's: ckpt_read_entry).
 * Must not decide the file format (ckpt.c) or when to save (train_ckpt.c). */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/activity.h"
#include "runtime/base/log.h"
#include "runtime/base/test_fault.h"
#include "runtime/ckpt/ckpt_set.h"
#include "train_ckpt.h"
#include "train_ckpt_state.h"
#include "train_init_from.h"
#include "train_agree.h"
#include "train_replica.h"
#include "train_shard.h"
#include "train_stop.h"
#include "train_zero.h"

/* HDR_ELAPSED carries elapsed_s's bits (a double, exact through the int64 broadcast). */
enum { HDR_STEP, HDR_EPOCH, HDR_CONSUMED, HDR_TOTAL, HDR_OPTIM_STEP, HDR_WORLD, HDR_ELAPSED, HDR_N };

/* A checkpoint saved with other settings than this run's (of those config_hash covers): refused,
 * naming each that differs from the checkpoint's meta/config; one saved before checkpoints held
 * their settings can only be said to differ. */
static int refuse_other_settings(const train_job *t, const char *saved, size_t len, const char *used, ddp_err *err)
{
    char changes[DDP_ERR_MSG / 2];
    bool text = saved != NULL;
    if (config_settings_changes(saved, len, t->cfg, SETTINGS_RESUME, changes, sizeof changes) > 0)
        return ddp_fail(err, DDP_EUSAGE, "%s was saved with other settings than this run's: %s; resume it with the "
                        "settings it was saved with, or start fresh in another checkpoint.dir", used, changes);
    return ddp_fail(err, DDP_EUSAGE, "%s was saved by a run with different model, data or optimizer settings%s; "
                    "resume it with the same config, or start fresh in another checkpoint.dir", used,
                    text ? "" : " (it does not record which: it was saved before checkpoints held their settings)");
}

/* A checkpoint saved training on train_samples samples (0: not recorded) whose header's position
 * `consumed` would be taken in another training split: the epoch's order is a permutation of the
 * split's samples, so on other data the rest of the epoch would repeat some and skip others. */
static int refuse_other_data(const train_job *t, const ckpt_header *h, int64_t train_samples, const char *used,
                             ddp_err *err)
{
    if (train_samples == 0 || train_samples == t->smp.n)
        return DDP_OK;
    const char *packed = t->train.packed ? " (with data.packed, the rows the packing makes of the files: a ddprun "
                                           "older than 2026-12-06 packed pieces without a trainable target too, so "
                                           "its count may differ on the same files)" : "";
    return ddp_fail(err, DDP_EUSAGE, "%s was saved training on %lld samples, this run's training data has %lld%s: its "
                    "position (%lld samples of epoch %lld done) is one in the data it was saved with; resume with "
                    "that data, or start fresh in another checkpoint.dir (`ddprun ckpt export --format hf` and "
                    "checkpoint.init_from carry the parameters over)", used, (long long)train_samples,
                    (long long)t->smp.n, packed, (long long)h->consumed, (long long)h->epoch + 1);
}

/* A checkpoint of header h, settings text (NULL: none saved) and training split size (0: not
 * recorded) written for this model, these settings and this data; refused naming what differs. */
static int check_saved(const train_job *t, const ckpt_header *h, const char *settings, size_t len,
                       int64_t train_samples, const char *used, ddp_err *err)
{
    if (strcmp(h->model, t->m->description) != 0)
        return ddp_fail(err, DDP_EUSAGE, "%s: checkpoint was written for %s, this run builds %s; resume with the "
                        "model settings it was written with, or start fresh in another checkpoint.dir", used, h->model,
                        t->m->description);
    if (h->config_hash != config_hash(t->cfg))
        return refuse_other_settings(t, settings, len, used, err);
    return refuse_other_data(t, h, train_samples, used, err);
}

/* A header's fields a resume uses, in the order HDR_* gives them. */
static void header_fields(const ckpt_header *h, int64_t *hdr)
{
    int64_t v[HDR_N] = {h->step, h->epoch, h->consumed, h->total_steps, h->optim_step, h->world_size};
    memcpy(&v[HDR_ELAPSED], &h->elapsed_s, sizeof h->elapsed_s);
    memcpy(hdr, v, sizeof v);
}

/* Every saved buffer's tensors in a checkpoint written for this model, each checked: src[b *
 * n_tensors + i] is buffer b's tensor i. */
static int find_tensors(const train_job *t, const ckpt_loaded *ck, const char *used, const float **src, ddp_err *err)
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
            src[(size_t)b * (size_t)m->n_tensors + (size_t)i] = x->data;
        }
    }
    return DDP_OK;
}

/* Rank 0's train_chunk_fill: floats [off, off + n) of saved buffer b, from the checkpoint's
 * tensors (ctx: src as find_tensors gives them); zero where no tensor lies. */
static void fill_chunk(const train_job *t, const void *ctx, int b, size_t off, size_t n, float *out)
{
    const model *m = t->m;
    const float *const *src = ctx;
    memset(out, 0, n * sizeof *out);
    for (int i = 0; i < m->n_tensors; i++) {
        size_t start = m->tensors[i].offset, end = start + m->tensors[i].numel;
        size_t lo = start > off ? start : off, hi = end < off + n ? end : off + n;
        if (lo < hi)
            memcpy(out + (lo - off), src[(size_t)b * (size_t)m->n_tensors + (size_t)i] + (lo - start),
                   (hi - lo) * sizeof *out);
    }
}

/* A download's stop: a stop request (a signal, a preemption notice) ends it at once, and the job
 * with it (DDP_EPREEMPTED), instead of waiting for it up to checkpoint.command_timeout_s. */
static int stop_requested(void)
{
    return train_stop_requested != TRAIN_STOP_NONE;
}

/* A restart by ddprun --max-restarts continues this run: its own newest checkpoint wins over
 * checkpoint.resume (never / a path), which only decides how the first attempt starts. */
static bool resumes_own_newest(const train_job *t)
{
    return t->cfg->checkpoint.resume == RESUME_AUTO || t->ckpt->restart_count > 0;
}

bool train_ckpt_may_download(const train_job *t)
{
    return t->cfg->checkpoint.download_cmd[0] && resumes_own_newest(t);
}

/* Rank 0: the newest checkpoint of checkpoint.dir that try_entry takes (ckpt_find_latest_with),
 * and when there is none, none valid (what an interrupted download left: a file cut short, a set
 * without all its shards) or an earlier download's marker says it did not finish (the older
 * checkpoints whole, the newest missing), of what checkpoint.download_cmd brings into it. The command runs
 * at most once a resume, whichever reader asks first: the walk over a set's pieces, or
 * resume_whole's read when that walk ended at a single file. */
static int find_own_newest(train_job *t, ckpt_try_fn try_entry, void *ctx, char *used, ddp_err *err)
{
    train_ckpt *c = t->ckpt;
    bool unfinished = train_ckpt_may_download(t) && !c->downloaded && ckpt_download_unfinished(c->dir);
    int rc = unfinished ? CKPT_NONE : ckpt_find_latest_with(c->dir, try_entry, ctx, used, err);
    bool damaged = rc == CKPT_DAMAGED;
    if ((rc != CKPT_NONE && !damaged) || !train_ckpt_may_download(t) || c->downloaded)
        return damaged ? DDP_ERUNTIME : rc;
    if (damaged)
        log_warn("checkpoint: %s; running checkpoint.download_cmd (an interrupted download leaves files so)",
                 err->msg);
    *err = (ddp_err){0};
    c->downloaded = true;
    rc = ckpt_download(t->cfg->checkpoint.download_cmd, c->dir, t->cfg->checkpoint.command_timeout_s,
                       stop_requested, c->command_log, err);
    if (rc == DDP_OK && (rc = ckpt_find_latest_with(c->dir, try_entry, ctx, used, err)) == CKPT_NONE)
        log_info("checkpoint: checkpoint.download_cmd brought no checkpoint into %s", c->dir);
    return rc == CKPT_DAMAGED ? DDP_ERUNTIME : rc;
}

/* A fresh start's optimizer state is zero, as made; but a walk over sets reads each set's pieces
 * into the live buffers before the ranks agree on it, and one that ended with none taken (every
 * set damaged, and what checkpoint.download_cmd left holds none) leaves a passed-over set's. */
static int clear_optimizer_state(train_job *t, ddp_err *err)
{
    const train_ckpt *c = t->ckpt;
    int rc = DDP_OK;
    for (int b = 1; rc == DDP_OK && b < c->n_buffers; b++) /* 0: the parameters, drawn or read anew */
        rc = t->dev->ops->fill(t->dev, TENSOR_F32, c->buffers[b].dev,
                               c->buffers[b].sharded ? t->opt->n_state : t->m->n_params, 0.0f, err);
    return rc;
}

/* Rank 0: *ck and hdr from a verified checkpoint, and *src its tensors (find_tensors; the caller
 * frees both): the single file a walk over sets ended at (walked, read and verified by
 * file_ends_walk, its path in used; taken over), else the newest found. Returns DDP_OK, CKPT_NONE,
 * or an error. */
static int load_on_rank0(train_job *t, ckpt_loaded *walked, ckpt_loaded *ck_out, const float ***src, int64_t *hdr,
                         char *used, ddp_err *err)
{
    const config *cfg = t->cfg;
    ckpt_loaded ck = {0};
    int rc = CKPT_NONE;
    const train_ckpt *c = t->ckpt;
    if (walked->tensors) { /* a checkpoint has tensors: its parameters at least */
        ck = *walked, *walked = (ckpt_loaded){0};
        rc = DDP_OK;
    } else if (resumes_own_newest(t)) {
        rc = find_own_newest(t, ckpt_read_entry, &ck, used, err);
    }
    bool from_path = rc == CKPT_NONE && cfg->checkpoint.resume == RESUME_PATH;
    if (from_path) {
        snprintf(used, CKPT_PATH_MAX, "%s", cfg->checkpoint.resume_path);
        rc = ckpt_read_any(used, &ck, false, err); /* a file, or a sharded set's directory */
    }
    if (rc != DDP_OK)
        return rc;
    test_fault_sleep_at("slow-resume", ck.hdr.step);
    const ckpt_tensor *saved = ckpt_loaded_tensor(&ck, CKPT_SETTINGS_TENSOR);
    bool text = saved && saved->dtype == CKPT_U8 && saved->ndim == 1;
    int64_t train_samples;
    rc = ckpt_loaded_train_samples(&ck, used, &train_samples, err);
    if (rc == DDP_OK)
        rc = check_saved(t, &ck.hdr, text ? saved->data : NULL, text ? saved->nbytes : 0, train_samples, used, err);
    if (rc == DDP_OK && from_path)
        rc = train_ckpt_refuse_other_line(t, used, ck.hdr.step, err);
    size_t n_src = (size_t)t->m->n_tensors * (size_t)c->n_buffers;
    if (rc == DDP_OK && !(*src = malloc((n_src ? n_src : 1) * sizeof **src)))
        rc = ddp_fail_local(err, "out of memory for the table of %s", used);
    if (rc == DDP_OK)
        rc = find_tensors(t, &ck, used, *src, err);
    header_fields(&ck.hdr, hdr);
    *ck_out = ck;
    return rc;
}

/* The buffers are in place: the counters from hdr, the parameters' dependents rebuilt. */
static int finish_resume(train_job *t, const int64_t *hdr, const char *used, ddp_err *err)
{
    train_ckpt *c = t->ckpt;
    t->step = hdr[HDR_STEP];
    t->epoch = hdr[HDR_EPOCH];
    t->opt->step = hdr[HDR_OPTIM_STEP];
    memcpy(&c->elapsed_before_s, &hdr[HDR_ELAPSED], sizeof c->elapsed_before_s);
    int rc = train_params_changed(t, err);
    int world_at_save = (int)hdr[HDR_WORLD];
    c->last_saved_step = c->durable_step = t->step;
    log_info("resumed from %s: step %lld, epoch %lld, %lld samples of the epoch consumed", used,
             (long long)t->step, (long long)t->epoch + 1, (long long)hdr[HDR_CONSUMED]);
    int64_t per_rank = t->batch * t->accum; /* a step's samples per rank */
    if (world_at_save != t->ctl->size && t->cfg->train.global_batch > 0)
        log_info("resume: world size changed from %d to %d ranks; the sampler continues with the rest of the epoch "
                 "split %d ways", world_at_save, t->ctl->size, t->ctl->size);
    else if (world_at_save != t->ctl->size && t->ctl->rank == 0) /* fewer hosts after a restart, say: another step */
        log_warn("resume: world size changed from %d to %d ranks, so a step now takes %lld samples, not %lld, at the "
                 "same learning rate; train.global_batch keeps a step's samples whatever the ranks", world_at_save,
                 t->ctl->size, (long long)(per_rank * t->ctl->size), (long long)(per_rank * world_at_save));
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
    int64_t left_now = 0; /* none when every epoch is done: a final save's is the one after the last */
    if (t->epoch < cfg->train.epochs && sampler_set_epoch(&t->smp, t->epoch, hdr[HDR_CONSUMED], NULL) == DDP_OK)
        left_now = train_steps_in(t, sampler_steps_left(&t->smp));
    int64_t later_epochs = cfg->train.epochs - t->epoch - 1;
    t->total_steps = t->step + left_now + (later_epochs > 0 ? later_epochs * t->steps_per_epoch : 0);
}

/* ---- a sharded set: each rank reads what it holds of it --------------------------------------- */

enum { WALK_END, WALK_TRY };

/* A rank's verdict on a set: this machine could not hold or place what it read (err->local). */
#define LOCAL_FAILURE 3

/* A set's piece that cannot be opened or read is damage, which the walk passes over to the previous
 * set, whatever the code: a missing or unreadable shard is open_input's DDP_EUSAGE, which try_set
 * would take for a refusal of the settings (check_saved's). A local failure is none (the walk ends
 * with it, ckpt_find_latest_with). */
static int32_t damaged(int rc, const ddp_err *err)
{
    return rc == DDP_OK ? DDP_OK : err->local ? LOCAL_FAILURE : DDP_ERUNTIME;
}

/* A set's buffers laid out as this model's (a resume reads its ranges by this model's offsets):
 * their length, and every tensor at its offset with its number of elements, as find_tensors
 * demands of a whole checkpoint. Refused (DDP_EUSAGE) naming the first that differs. */
static int check_layout(const train_job *t, const ckpt_manifest *mf, const char *path, ddp_err *err)
{
    const model *m = t->m;
    if (mf->buffer_len != (int64_t)m->n_params)
        return ddp_fail(err, DDP_EUSAGE, "%s: buffers of %lld floats; this model has %zu parameters", path,
                        (long long)mf->buffer_len, m->n_params);
    for (int i = 0; i < m->n_tensors; i++) {
        const ckpt_set_tensor *x = NULL;
        for (int k = 0; k < mf->n_tensors && !x; k++)
            x = strcmp(mf->tensors[k].name, m->tensors[i].name) == 0 ? &mf->tensors[k] : NULL;
        if (!x || x->offset != (int64_t)m->tensors[i].offset ||
            ckpt_set_tensor_numel(x) != (int64_t)m->tensors[i].numel)
            return ddp_fail(err, DDP_EUSAGE, "%s: tensor %s is %s in the set; this model has %zu floats at offset "
                            "%zu", path, m->tensors[i].name, x ? "elsewhere or of another size" : "missing",
                            m->tensors[i].numel, m->tensors[i].offset);
    }
    return DDP_OK;
}

/* Every rank: what this rank holds of every saved buffer of the set at path, after the checks any
 * resume makes; every rank learns every rank's verdict (train_agree). */
static int read_own_pieces(train_job *t, const char *path, int64_t *hdr, ddp_err *err)
{
    train_ckpt *c = t->ckpt;
    ckpt_set_reader *r = NULL;
    int32_t mine = damaged(ckpt_set_open_pieces(path, &r, err), err);
    const ckpt_manifest *mf = mine == DDP_OK ? ckpt_set_reader_manifest(r) : NULL;
    if (mine == DDP_OK)
        mine = check_saved(t, &mf->hdr, mf->settings, (size_t)mf->settings_len, mf->train_samples, path, err);
    if (mine == DDP_OK)
        mine = check_layout(t, mf, path, err);
    for (int b = 0; mine == DDP_OK && b < c->n_buffers; b++)
        mine = damaged(train_shard_read_own(t, r, c->buffers[b].prefix, c->buffers[b].dev, c->buffers[b].sharded,
                                            err), err);
    test_fault f;
    if (mine == DDP_OK && test_fault_at("read-local", mf->hdr.step, &f))
        mine = damaged(ddp_fail_local(err, "DDP_TEST_FAULT read-local: out of memory for %s", path), err);
    if (mine == DDP_OK) {
        header_fields(&mf->hdr, hdr);
        test_fault_sleep_at("slow-resume", mf->hdr.step);
    }
    ckpt_set_close(r);
    if (mine != DDP_OK && t->ctl->rank != 0) /* rank 0 reports its own with the walk's warning */
        log_warn("%s", err->msg);
    char what[CKPT_PATH_MAX + 32];
    snprintf(what, sizeof what, "read what it holds of %s", path);
    int rc = train_agree(t, mine, what, err);
    if (rc == LOCAL_FAILURE) /* on every rank: the walk ends */
        rc = ddp_mark_local(err, err->code = DDP_ERUNTIME);
    return rc;
}

/* Rank 0 tells every rank what to do next: WALK_TRY the set at path, or WALK_END. */
static int announce(train_job *t, int what, const char *path, char msg[CKPT_PATH_MAX + 1], ddp_err *err)
{
    msg[0] = (char)what;
    snprintf(msg + 1, CKPT_PATH_MAX, "%s", path ? path : "");
    return t->ctl->ops->broadcast(t->ctl, msg, CKPT_PATH_MAX + 1, DT_UINT8, 0, NULL, err);
}

typedef struct piece_walk {
    train_job *t;
    int64_t *hdr;
    ckpt_loaded *file;        /* where a single file that ends the walk is kept */
    int refused;              /* a checkpoint of another model or settings: no fallback, as below */
    ddp_err refusal;
} piece_walk;

/* A single file ends the walk when it reads back whole, kept for resume_whole; a damaged one is
 * passed over like a damaged set, so that the sets before it are still read by pieces, not
 * assembled whole on rank 0 by resume_whole's own fallback. */
static int file_ends_walk(piece_walk *w, const char *path, ddp_err *why)
{
    return ckpt_read(path, w->file, why) == DDP_OK ? CKPT_STOP : DDP_ERUNTIME; /* a failed read leaves it empty */
}

/* Rank 0's ckpt_try_fn: a set is tried by every rank; a whole file ends the walk. */
static int try_set(void *ctx, const char *path, bool set, ddp_err *why)
{
    piece_walk *w = ctx;
    char msg[CKPT_PATH_MAX + 1];
    if (!set)
        return file_ends_walk(w, path, why);
    int rc = announce(w->t, WALK_TRY, path, msg, why);
    if (rc == DDP_OK)
        rc = read_own_pieces(w->t, path, w->hdr, why);
    if (rc == DDP_EUSAGE) {
        w->refused = rc, w->refusal = *why;
        return CKPT_STOP;
    }
    return rc;
}

/* Rank 0: the walk over checkpoint.dir (and what a download brings), else over checkpoint.resume's
 * set (a restart's too, while the run has saved none of its own), then WALK_END; its outcome. */
static int32_t lead_walk(train_job *t, int64_t *hdr, char *used, ckpt_loaded *file, ddp_err *err)
{
    const config *cfg = t->cfg;
    piece_walk w = {.t = t, .hdr = hdr, .file = file};
    int32_t outcome = CKPT_NONE;
    if (resumes_own_newest(t))
        outcome = find_own_newest(t, try_set, &w, used, err);
    if (outcome == CKPT_NONE && !w.refused && cfg->checkpoint.resume == RESUME_PATH &&
        ckpt_is_set_dir(cfg->checkpoint.resume_path)) {
        snprintf(used, CKPT_PATH_MAX, "%s", cfg->checkpoint.resume_path);
        outcome = try_set(&w, used, true, err);
        if (outcome == DDP_OK)
            outcome = train_ckpt_refuse_other_line(t, used, hdr[HDR_STEP], err);
    }
    if (w.refused)
        outcome = w.refused, *err = w.refusal;
    char msg[CKPT_PATH_MAX + 1];
    ddp_err e2 = {0};
    int rc = announce(t, WALK_END, NULL, msg, &e2);
    if (rc != DDP_OK)
        *err = e2;
    return rc != DDP_OK ? rc : outcome;
}

/* Other ranks: each set rank 0 names tried, until WALK_END; used: the last one. */
static int follow_walk(train_job *t, int64_t *hdr, char *used, ddp_err *err)
{
    for (;;) {
        char msg[CKPT_PATH_MAX + 1];
        int rc = t->ctl->ops->broadcast(t->ctl, msg, sizeof msg, DT_UINT8, 0, NULL, err);
        if (rc != DDP_OK || msg[0] == WALK_END)
            return rc;
        snprintf(used, CKPT_PATH_MAX, "%s", msg + 1);
        (void)read_own_pieces(t, used, hdr, err); /* rank 0 learnt the verdict too and decides */
    }
}

/* When the checkpoint to resume is a sharded set, every rank reads what it holds of it — a set
 * found damaged is named and the previous one tried, as ckpt_find_latest does. *done false: no set
 * to resume this way (none at all, or the newest is a single file, which rank 0 reads whole). */
static int resume_by_pieces(train_job *t, int64_t *hdr, char *used, ckpt_loaded *file, bool *done, ddp_err *err)
{
    int32_t outcome = t->ctl->rank == 0 ? lead_walk(t, hdr, used, file, err) : follow_walk(t, hdr, used, err);
    ddp_err bcast = {0};
    int rc = t->ctl->ops->broadcast(t->ctl, &outcome, 1, DT_INT32, 0, NULL, &bcast);
    if (rc != DDP_OK) {
        *err = bcast;
        return rc;
    }
    *done = outcome == DDP_OK;
    if (outcome == DDP_OK)
        log_info("resume from a sharded set: each rank read what it holds of %s", used);
    if (outcome == DDP_OK || outcome == CKPT_NONE || outcome == CKPT_STOP)
        return outcome == DDP_OK ? finish_resume(t, hdr, used, err) : DDP_OK;
    if (t->ctl->rank != 0 && !err->msg[0])
        ddp_fail(err, outcome, "rank 0 found no checkpoint to resume, or refused it (its messages say why)");
    return outcome;
}

/* A checkpoint was applied on every rank: a job ended now resumes from it. */
static int resumed(train_job *t, const int64_t *hdr, int64_t *consumed)
{
    train_checkpoint_safe = 1;
    recompute_total(t, hdr);
    *consumed = hdr[HDR_CONSUMED];
    if (t->cfg->checkpoint.init_from[0])
        log_info("checkpoint.init_from %s not used: the run resumed", t->cfg->checkpoint.init_from);
    return DDP_OK;
}

/* Rank 0 reads the checkpoint whole and broadcasts it a chunk at a time; every rank takes what it
 * holds of each chunk (train_share_saved). A fresh start reserves nothing. The memory the resume
 * took since `before` (the mark's, ahead of any walk over sets) is logged, rank 0's (the file) and
 * the others' (a chunk, and a shard under ZeRO) apart. */
static int resume_whole(train_job *t, ckpt_loaded *walked, char *used, int64_t before, int64_t *consumed,
                        ddp_err *err)
{
    const train_ckpt *c = t->ckpt;
    ckpt_loaded ck = {0};
    const float **src = NULL;
    int64_t hdr[HDR_N] = {0};
    int32_t status = DDP_OK;
    if (t->ctl->rank == 0)
        status = load_on_rank0(t, walked, &ck, &src, hdr, used, err);
    /* Every rank learns rank 0's verdict, so a bad checkpoint stops all of them cleanly. */
    int rc = t->ctl->ops->broadcast(t->ctl, &status, 1, DT_INT32, 0, NULL, err);
    if (rc == DDP_OK && status == DDP_OK) {
        rc = t->ctl->ops->broadcast(t->ctl, hdr, HDR_N, DT_INT64, 0, NULL, err);
        if (rc == DDP_OK)
            rc = train_share_saved(t, fill_chunk, src, err);
        if (rc == DDP_OK)
            rc = train_start_memory_log(t, "the resume of a checkpoint rank 0 read whole", before, err);
        if (rc == DDP_OK)
            rc = finish_resume(t, hdr, used, err);
        if (rc == DDP_OK)
            rc = resumed(t, hdr, consumed);
    } else if (rc == DDP_OK && status == CKPT_NONE) {
        if (t->cfg->checkpoint.resume == RESUME_AUTO)
            log_info("checkpoint: none in %s, starting fresh", c->dir);
        rc = train_agree(t, clear_optimizer_state(t, err), "clear the optimizer state", err);
        if (rc == DDP_OK)
            rc = train_init_from(t, err);
    } else if (rc == DDP_OK) {
        rc = status;
        if (t->ctl->rank != 0)
            ddp_fail(err, status, "rank 0 could not load the checkpoint");
    }
    free(src);
    ckpt_loaded_free(&ck);
    return rc;
}

/* wsd: a decay of one step or less decays no step (step j of D runs at progress j / D, and the
 * first is j = 0): refused, as the schedule asked for would silently be a constant one. */
static int check_wsd_decay(const train_job *t, const char *plan, ddp_err *err)
{
    const config *c = t->cfg;
    int64_t after = t->total_steps - c->optimizer.schedule.warmup_steps;
    double start, decay = optim_decay_window(c->optimizer.schedule.kind, c->optimizer.schedule.warmup_steps,
                                             c->optimizer.schedule.decay_fraction, t->total_steps, &start);
    if (c->optimizer.schedule.kind != SCHED_WSD || after < 1 || decay > 1.0 || t->step >= t->total_steps)
        return DDP_OK;
    char fix[64] = "run 2 or more steps after warm-up", where[CFG_WHERE_MAX];
    if (after > 1)
        snprintf(fix, sizeof fix, "raise it above %g or run more steps", 1.0 / (double)after);
    return ddp_fail(err, DDP_EUSAGE, "%s: optimizer.schedule.decay_fraction %g of the %lld step%s after warm-up "
                    "(%s) is %g step%s, and the decay's first step runs at the peak: no step would decay; %s",
                    config_where(c, "optimizer.schedule.decay_fraction", where, sizeof where),
                    c->optimizer.schedule.decay_fraction, (long long)after, after == 1 ? "" : "s", plan, decay,
                    decay == 1.0 ? "" : "s", fix);
}

/* The warm-up and a wsd decay against the run's horizon as the resume re-planned it (another world
 * size has another number of steps an epoch); a warm-up a resumed run has finished is not looked
 * at. The warm-up's bound by train.max_steps is the config's check. */
static int check_schedule(const train_job *t, ddp_err *err)
{
    const config *c = t->cfg;
    int64_t warmup = c->optimizer.schedule.warmup_steps;
    char plan[128], where[CFG_WHERE_MAX];
    if (t->step > 0)
        snprintf(plan, sizeof plan, "resumed at step %lld, %lld steps an epoch on %d ranks", (long long)t->step,
                 (long long)t->steps_per_epoch, t->ctl->size);
    else if (c->train.max_steps > 0)
        snprintf(plan, sizeof plan, "train.max_steps %lld", (long long)c->train.max_steps);
    else
        snprintf(plan, sizeof plan, "train.epochs %lld x %lld steps an epoch", (long long)c->train.epochs,
                 (long long)t->steps_per_epoch);
    if (warmup <= t->total_steps || t->step >= warmup)
        return check_wsd_decay(t, plan, err);
    return ddp_fail(err, DDP_EUSAGE, "%s: optimizer.schedule.warmup_steps %lld is more than the run's %lld steps "
                    "(%s): the LR would never reach optimizer.lr nor decay",
                    config_where(c, "optimizer.schedule.warmup_steps", where, sizeof where), (long long)warmup,
                    (long long)t->total_steps, plan);
}

static int resume_or_start(train_job *t, int64_t *consumed, ddp_err *err)
{
    *consumed = 0;
    if (t->cfg->checkpoint.resume == RESUME_NEVER && t->ckpt->restart_count == 0) {
        int32_t mine = t->ctl->rank == 0 ? train_ckpt_refuse_other_line(t, NULL, -1, err) : DDP_OK;
        int rc = train_agree(t, mine, "start fresh in checkpoint.dir", err);
        return rc == DDP_OK ? train_init_from(t, err) : rc;
    }
    activity_set("reading the last checkpoint in %s", t->ckpt->dir);
    int64_t hdr[HDR_N] = {0};
    char used[CKPT_PATH_MAX] = "";
    ckpt_loaded walked = {0};
    bool done = false, sets = t->zero || t->cfg->checkpoint.sharded; /* below ZeRO-3, single files walk no sets */
    int64_t before = train_start_memory_mark(); /* a walk that ends at a file read it whole */
    int rc = sets ? resume_by_pieces(t, hdr, used, &walked, &done, err) : DDP_OK;
    if (rc == DDP_OK && done)
        rc = train_start_memory_log(t, "the resume by pieces of a set", before, err);
    if (rc == DDP_OK && done)
        rc = resumed(t, hdr, consumed);
    else if (rc == DDP_OK)
        rc = resume_whole(t, &walked, used, before, consumed, err);
    ckpt_loaded_free(&walked); /* a failure before resume_whole took it; else empty */
    return rc;
}

/* The resume's collectives wait for the slowest reader (rank 0 reading a checkpoint or a folder
 * whole, or downloading; a rank reading its pieces), which may take longer than any collective of
 * a step: checkpoint.resume_timeout_s, raised to cover ddp.timeout_s and a download's own limit. */
static double resume_deadline_s(const config *c)
{
    double s = fmax(c->checkpoint.resume_timeout_s, c->ddp.timeout_s);
    return c->checkpoint.download_cmd[0] ? fmax(s, c->checkpoint.command_timeout_s + c->ddp.timeout_s) : s;
}

int train_ckpt_resume(train_job *t, int64_t *consumed, ddp_err *err)
{
    comm *ctl = t->ctl;
    snprintf(ctl->phase, sizeof ctl->phase, "%s", COMM_PHASE_RESUME);
    double deadline_s = resume_deadline_s(t->cfg);
    train_resume_limit_s = (sig_atomic_t)fmin(2 * deadline_s + 1, INT_MAX);
    int rc = comm_mpi_set_timeout(ctl, deadline_s, err);
    if (rc == DDP_OK)
        rc = resume_or_start(t, consumed, err);
    train_resume_limit_s = 0;
    ddp_err restore = {0};
    int rc2 = comm_mpi_set_timeout(ctl, t->cfg->ddp.timeout_s, &restore);
    ctl->phase[0] = '\0';
    if (rc == DDP_OK && rc2 != DDP_OK)
        rc = ddp_fail(err, rc2, "%s", restore.msg);
    if (rc == DDP_OK)
        rc = train_ckpt_check_hosts(t, err);
    return rc == DDP_OK ? check_schedule(t, err) : rc;
}
