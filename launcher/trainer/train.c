/* train.c — one rank's training job: setup, then the loop of optimizer steps.
 *
 * Owns the order of a step: gather the rank's batch (sampler), upload, forward/backward with the
 * reducer averaging gradient buckets as backward produces them, wait for the buckets, clip, step the
 * optimizer, agree across ranks whether to stop. Past the batch upload (a staging buffer may wait for
 * its previous copy) no part of a step waits for the device: the loss sums, the gradient norm and the
 * clip factor stay in device memory; only log lines, evaluation, text samples and checkpoints
 * download. Batches are staged as the bytes the model's io describes, so nothing here knows pixels
 * from token ids. With train.profile_steps the steps' phases and host work are marked for the profiler
 * (train_profile.c); with it off those marks do nothing. Each rank adds up its own step, collective-
 * wait and data times (train_ranks.c). Logging and evaluation live in train_log.c, checkpoints in
 * train_ckpt.c (resume: train_resume.c, start: train_init_from.c), the loss record and non-finite
 * checks in train_finite.c, what they share with the loop in train_replica.c. It owns the core job
 * (train_job.h) and each concern's opening and closing; the concerns' own state is theirs, reached
 * through their headers.
 * Must not know CPU from CUDA or MPI from NCCL: the device and communicator interfaces do; nor any
 * model's kind: model.h does. */
#include "train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/base/activity.h"
#include "runtime/base/clock.h"
#include "runtime/base/log.h"
#include "train_budget.h"
#include "train_ckpt.h"
#include "train_data.h"
#include "train_fault.h"
#include "train_finite.h"
#include "train_init_from.h"
#include "train_job.h"
#include "train_lock.h"
#include "train_log.h"
#include "train_observe.h"
#include "train_plan.h"
#include "train_profile.h"
#include "train_ranks.h"
#include "train_replica.h"
#include "train_sample.h"
#include "train_stop.h"
#include "train_tb.h"
#include "train_zero.h"

static int open_grad_comm(train_job *t, ddp_err *err)
{
    const config *c = t->cfg;
    bool nccl = c->ddp.backend == BACKEND_NCCL || (c->ddp.backend == BACKEND_AUTO && t->dev->kind == DEVICE_CUDA);
    if (!nccl) {
        if (t->dev->kind == DEVICE_CUDA)
            return ddp_fail(err, DDP_EUSAGE, "ddp.backend: mpi cannot reduce CUDA device buffers "
                            "(this Open MPI is not CUDA-aware); use ddp.backend: nccl or auto");
        t->grad_comm = t->ctl;
        return DDP_OK;
    }
    if (t->dev->kind != DEVICE_CUDA)
        return ddp_fail(err, DDP_EUSAGE, "ddp.backend: nccl needs device: cuda (this rank runs on %s)", t->dev->name);
    comm_nccl_opts o = {.compute_stream = t->dev->stream, .device = t->dev->index, .timeout_s = c->ddp.timeout_s,
                        .debug = c->ddp.debug};
    return comm_nccl_create(&o, &t->grad_comm, err);
}

/* The model says which tensors weight decay skips (its biases and norm parameters, as each kind declares).
 * Under ZeRO the optimizer covers this rank's shard of the reducer's buckets. */
static int make_optimizer(train_job *t, ddp_err *err)
{
    const model *m = t->m;
    int rc = train_zero_active(t) ? train_zero_optimizer(t, err)
                                  : optim_create(&t->cfg->optimizer, t->dev, m->n_params, &t->opt, err);
    optim_span *spans = rc ? NULL : malloc((size_t)m->n_tensors * sizeof *spans);
    if (!rc && !spans)
        rc = ddp_fail(err, DDP_ERUNTIME, "out of memory for %d tensor spans", m->n_tensors);
    int n = 0;
    for (int i = 0; !rc && i < m->n_tensors; i++)
        if (!m->tensors[i].weight_decay)
            spans[n++] = (optim_span){m->tensors[i].offset, m->tensors[i].numel};
    if (!rc && n > 0)
        rc = optim_set_no_decay(t->opt, spans, n, err);
    free(spans);
    return rc;
}

static int make_reducer(train_job *t, ddp_err *err)
{
    size_t *offs = malloc((size_t)t->m->n_tensors * sizeof *offs);
    if (!offs)
        return ddp_fail(err, DDP_ERUNTIME, "out of memory for %d tensor offsets", t->m->n_tensors);
    for (int i = 0; i < t->m->n_tensors; i++)
        offs[i] = t->m->tensors[i].offset;
    int rc = reducer_create(t->grad_comm, t->m->grads, t->m->n_params, offs, t->m->n_tensors,
                            t->cfg->ddp.bucket_mb, t->cfg->ddp.first_bucket_mb, &t->red, err);
    free(offs);
    if (rc == DDP_OK)
        reducer_set_device(t->red, t->dev);
    if (rc == DDP_OK && t->m->grads_by_unit)
        rc = train_zero_use_units(t, err);
    else if (rc == DDP_OK && train_zero_active(t))
        rc = reducer_use_zero(t->red, t->m->params, t->m->param_tail, err);
    if (rc == DDP_OK && t->cfg->ddp.grad_dtype == GRAD_BF16)
        rc = reducer_use_bf16(t->red, t->dev, err);
    return rc;
}

/* The per-rank split of a step's samples at this world size (config_batch_split): with
 * train.global_batch a world size that does not divide it ends the job here, before anything is
 * built, the same on every rank; train.micro_batch auto says which per-rank batch it chose. */
static int split_batch(train_job *t, ddp_err *err)
{
    const config *c = t->cfg;
    batch_split s;
    int rc = config_batch_split(c, t->ctl->size, &s, err);
    if (rc != DDP_OK)
        return rc;
    t->batch = s.batch;
    t->accum = s.accum;
    if (c->train.global_batch > 0 && t->ctl->rank == 0)
        log_info("train.global_batch %lld at %d rank%s: %lld per rank x %lld accumulation%s", (long long)c->train.global_batch,
                 t->ctl->size, t->ctl->size == 1 ? "" : "s", (long long)s.batch, (long long)s.accum,
                 c->train.micro_batch == MICRO_BATCH_AUTO ? " (train.micro_batch auto: the largest divisor up to "
                 "data.batch_size; the memory plan below is for it)" : "");
    return DDP_OK;
}

/* The device, the data, and the model built for them with its first parameters. */
static int setup_model(train_job *t, ddp_err *err)
{
    const config *c = t->cfg;
    const device_opts dev_opts = {.kind = c->device, .tf32 = c->cuda.tf32}; /* the device and cuda sections */
    const model_opts model = train_model_opts(c);
    char where[CFG_WHERE_MAX];
    int rc = device_open(&dev_opts, t->ctl->local_rank, &t->dev, err);
    if (rc == DDP_OK && c->precision == PRECISION_BF16 && t->dev->kind != DEVICE_CUDA)
        rc = ddp_fail(err, DDP_EUSAGE, "%s: precision: bf16 needs a GPU (the CPU backend computes in float32), and "
                      "this rank runs on %s; use precision: fp32 here", config_where(c, "precision", where, sizeof where),
                      t->dev->name);
    if (rc == DDP_OK)
        rc = train_ranks_check_gpus(t, err);
    if (rc == DDP_OK)
        rc = train_data_load(t, err);
    if (rc == DDP_OK)
        rc = model_create(&model, t->dev, &t->train.layout, t->batch, train_zero_buffers(c, t->ctl->size), &t->m,
                          err);
    if (rc == DDP_OK)
        rc = train_data_fits(t, err);
    return rc; /* the parameters: a resume's, else a fresh start's (train_init_from) */
}

static int setup(train_job *t, ddp_err *err)
{
    const config *c = t->cfg;
    int rc = split_batch(t, err);
    if (rc == DDP_OK)
        rc = train_fault_open(t, err);
    if (rc == DDP_OK)
        rc = setup_model(t, err);
    if (rc == DDP_OK)
        rc = open_grad_comm(t, err);
    if (rc == DDP_OK)
        rc = make_reducer(t, err);
    if (rc == DDP_OK)
        rc = train_observe_open(t, err);
    if (rc == DDP_OK)
        rc = make_optimizer(t, err);
    if (rc == DDP_OK) /* ZeRO-3: from now on each rank keeps only its shard */
        rc = train_zero_shard_params(t, err);
    if (rc == DDP_OK)
        rc = train_staging_open(t, err);
    if (rc == DDP_OK)
        rc = train_finite_open(t, err);
    if (rc == DDP_OK)
        rc = sampler_init(&t->smp, t->train.n, t->ctl->rank, t->ctl->size, t->batch,
                          c->data.shuffle, c->data.drop_last, c->run.seed, err);
    if (rc != DDP_OK)
        return rc;
    t->steps_per_epoch = train_steps_in(t, sampler_steps_per_epoch(&t->smp));
    if (t->steps_per_epoch < 1) {
        char where[CFG_WHERE_MAX]; /* the per-rank batch's, or the global batch's it came from */
        config_where(c, c->train.global_batch > 0 ? "train.global_batch" : "data.batch_size", where, sizeof where);
        return ddp_fail(err, DDP_EUSAGE, "%s: data.batch_size %lld x %d ranks x train.grad_accum %lld = %lld "
                        "samples per step is more than one epoch of %s (%lld samples)", where, (long long)t->batch,
                        t->ctl->size, (long long)t->accum, (long long)(t->batch * t->ctl->size * t->accum),
                        t->train.name, (long long)t->train.n);
    }
    t->total_steps = c->train.max_steps > 0 ? c->train.max_steps : c->train.epochs * t->steps_per_epoch;
    return DDP_OK;
}

/* One micro-batch: this rank's rows (chosen by train_stage_next) gathered and uploaded, then
 * forward and backward; *rows counts them. Gradients of the last micro-step of an optimizer step
 * are reduced while backward runs (no_sync for the others); under ZeRO-2, with no whole gradient
 * buffer to accumulate in, every micro-step's are, into this rank's shard. */
static int micro_step(train_job *t, bool first, bool last, int64_t *rows, ddp_err *err)
{
    model_batch b;
    int rc = train_enter(t, PHASE_DATA, err);
    if (rc == DDP_OK)
        rc = train_stage_batch(t, &t->train, &b, err);
    if (rc == DDP_OK)
        rc = train_leave(t, PHASE_DATA, err);
    if (rc != DDP_OK)
        return rc;
    float scale = train_stage_grad_scale(t); /* the loss: a mean over the global batch's targets */
    grad_ready_fn ready = NULL;
    void *ready_ctx = NULL;
    bool each = t->m->grads_by_unit;
    if (last || each) {
        reducer_begin(t->red, !first);
        ready = train_fault_grad_ready(t, &ready_ctx);
    }
    rc = train_enter(t, PHASE_COMPUTE, err);
    if (rc == DDP_OK)
        rc = t->m->ops->forward_backward(t->m, &b, scale, !first, ready, ready_ctx, train_finite_stats(t), err);
    if (rc == DDP_OK)
        rc = train_zero_check_windows(t, err);
    *rows += b.rows;
    if (rc == DDP_OK)
        rc = train_leave(t, PHASE_COMPUTE, err);
    if (rc == DDP_OK && each && !last) /* the next micro-step's backward reuses the windows */
        rc = reducer_finish(t->red, err);
    return rc;
}

/* Clipping, the update and the model's rebuild of what it derives from the parameters. */
static int update_params(train_job *t, double lr, ddp_err *err)
{
    int rc = DDP_OK;
    if (train_zero_active(t)) {
        rc = train_zero_step(t, lr, err);
    } else {
        const float *scale = NULL;
        if (t->opt->grad_clip > 0 && (rc = optim_grad_norm(t->opt, t->m->grads, &scale, err)) != DDP_OK)
            return rc;
        rc = optim_step(t->opt, t->m->params, t->m->grads, lr, scale, err);
    }
    return rc == DDP_OK ? train_params_changed(t, err) : rc;
}

/* The reduced gradients (the wait for them is the communication backward did not hide), then the
 * update; rows samples of this rank went into it. The norm is a full pass over the gradients: only
 * clipping needs it. It and the clip factor stay on the device, where the update reads the factor,
 * so the step does not wait. */
static int optimizer_step(train_job *t, int64_t rows, double *lr, ddp_err *err)
{
    int rc = train_fault_fail_step(t, err);
    if (rc == DDP_OK)
        rc = train_enter(t, PHASE_GRADIENT_WAIT, err);
    if (rc == DDP_OK)
        rc = reducer_finish(t->red, err);
    if (rc == DDP_OK)
        rc = train_leave(t, PHASE_GRADIENT_WAIT, err);
    if (rc != DDP_OK)
        return ddp_prefix(err, "gradient all-reduce at step %lld", (long long)t->step + 1);
    *lr = optim_lr_at(t->opt, t->step, t->total_steps);
    rc = train_enter(t, PHASE_OPTIMIZER, err);
    if (rc == DDP_OK)
        rc = update_params(t, *lr, err);
    t->step++;
    train_log_count_step(t, (double)rows * t->ctl->size, train_stage_step_terms(t, rows),
                         train_stage_step_tokens(t, rows));
    return rc == DDP_OK ? train_leave(t, PHASE_OPTIMIZER, err) : rc;
}

/* What the ranks agreed on after a step. */
typedef struct agreement {
    int stop;           /* TRAIN_STOP_*: what the ranks stop for, TRAIN_STOP_NONE to go on */
    bool ckpt_due;      /* rank 0's clock says checkpoint.every_minutes is due */
    int64_t nonfinite;  /* the vote naming the earliest non-finite finding, 0 when none */
} agreement;

/* Every rank must stop at the same step: a small MAX all-reduce per step makes a stop request
 * (signal or preemption notice) seen by any rank a decision of all ranks. It carries rank 0's
 * verdict on checkpoint.every_minutes too, so every rank saves at the same step (ZeRO's save
 * needs them all), each rank's vote on non-finite values found so far (train_finite.c), so
 * every rank stops at the same step, before any save, naming the same earliest finding, and
 * whether rank 0 knows a checkpoint of the job complete, so that any rank the stop deadline ends
 * says whether the job is resumable (exit 75). */
static int agree_stop(train_job *t, agreement *a, ddp_err *err)
{
    int rc = train_enter(t, PHASE_AGREE, err);
    int64_t flags[4] = {(int64_t)train_stop_requested, train_ckpt_clock_due(t) ? 1 : 0, train_finite_vote(t),
                        (int64_t)train_checkpoint_safe};
    if (rc == DDP_OK)
        rc = t->ctl->ops->allreduce(t->ctl, flags, flags, 4, DT_INT64, OP_MAX, NULL, err);
    if (rc == DDP_OK)
        rc = train_leave(t, PHASE_AGREE, err);
    if (rc == DDP_OK && flags[3])
        train_checkpoint_safe = 1;
    *a = (agreement){.stop = (int)flags[0], .ckpt_due = flags[1] != 0, .nonfinite = flags[2]};
    if (rc == DDP_OK && a->stop != TRAIN_STOP_NONE)
        train_stop_answered = 1; /* every rank now checkpoints and exits: the stop is answered */
    return rc;
}

/* The step's log line and text sample. */
static int log_and_sample(train_job *t, double lr, ddp_err *err)
{
    const config *c = t->cfg;
    int rc = DDP_OK;
    if (t->step % c->train.log_every == 0 || t->step == t->total_steps) {
        rc = train_enter(t, PHASE_LOG, err);
        if (rc == DDP_OK)
            rc = train_log_progress(t, lr, err);
        if (rc == DDP_OK)
            rc = train_leave(t, PHASE_LOG, err);
    }
    if (rc == DDP_OK && c->train.sample_every > 0 && t->step % c->train.sample_every == 0) {
        rc = train_enter(t, PHASE_SAMPLE, err);
        if (rc == DDP_OK)
            rc = train_sample_text(t, err);
        if (rc == DDP_OK)
            rc = train_leave(t, PHASE_SAMPLE, err);
    }
    return rc;
}

/* After a step's work or an evaluation between steps: the stop agreement (a stop request, a
 * non-finite value found so far, the checkpoint clock), then what it decided: the job ends on a
 * non-finite value, or saves when a stop or the clock asks. *stop: what the ranks agreed to stop
 * for (TRAIN_STOP_NONE: go on). */
static int settle(train_job *t, int *stop, ddp_err *err)
{
    agreement a = {.stop = TRAIN_STOP_NONE};
    int rc = agree_stop(t, &a, err);
    *stop = a.stop;
    int64_t writing, durable = train_ckpt_durable_step(t, &writing);
    if (rc == DDP_OK && a.nonfinite != 0)
        rc = train_finite_fail(t, a.nonfinite, durable, writing, err);
    if (rc == DDP_OK)
        rc = train_ckpt_maybe_save(t, a.stop != TRAIN_STOP_NONE || a.ckpt_due, err);
    if (rc == DDP_OK && t->ctl->rank == 0)
        rc = train_ckpt_poll(t, err);
    return rc;
}

/* One optimizer step: its micro-steps, the update, the finite check; then (outside the step's own
 * work) evaluation, the log line and sample, and settle. */
static int one_step(train_job *t, int *stop, ddp_err *err)
{
    const config *c = t->cfg;
    int rc = train_enter(t, PHASE_WORK, err);
    int64_t rows = 0, micro = 0;
    if (rc == DDP_OK)
        rc = train_stage_count_step(t, &micro, err);
    for (int64_t a = 0; a < micro && rc == DDP_OK; a++) {
        train_stage_next(t);
        rc = micro_step(t, a == 0, a == micro - 1, &rows, err);
    }
    double lr = 0;
    if (rc == DDP_OK)
        rc = optimizer_step(t, rows, &lr, err);
    if (rc == DDP_OK)
        rc = train_finite_step_done(t, err);
    if (rc == DDP_OK)
        rc = train_leave(t, PHASE_WORK, err);
    if (rc == DDP_OK && c->train.eval && c->train.eval_every > 0 && t->step % c->train.eval_every == 0)
        rc = train_evaluate(t, err);
    if (rc == DDP_OK)
        rc = log_and_sample(t, lr, err);
    *stop = TRAIN_STOP_NONE;
    return rc == DDP_OK ? settle(t, stop, err) : rc;
}

/* The steps of the current epoch; *stop: what the ranks agreed to stop for, TRAIN_STOP_NONE when
 * the epoch or the step budget ran out. */
static int run_epoch(train_job *t, int *stop, ddp_err *err)
{
    while (t->step < t->total_steps && train_steps_in(t, sampler_steps_left(&t->smp)) > 0) {
        int rc = train_enter(t, PHASE_STEP, err);
        if (rc == DDP_OK)
            rc = one_step(t, stop, err);
        if (rc == DDP_OK)
            rc = train_leave(t, PHASE_STEP, err);
        if (rc != DDP_OK || *stop != TRAIN_STOP_NONE)
            return rc;
    }
    return DDP_OK;
}

/* The evaluation that ends an epoch or the run (unless train.eval_every just did it), settled as a
 * step is: a non-finite loss ends the job (65), a stop during it saves and ends it (EPREEMPTED). */
static int evaluate_at_end(train_job *t, int *stop, ddp_err *err)
{
    train_eval last = train_log_last_eval(t);
    if (!t->cfg->train.eval || (last.done && last.step == t->step))
        return DDP_OK;
    int rc = train_evaluate(t, err);
    if (rc == DDP_OK)
        rc = settle(t, stop, err);
    return rc == DDP_OK && *stop != TRAIN_STOP_NONE ? DDP_EPREEMPTED : rc;
}

/* Epochs advance only when one is complete, together with the sampler, so every checkpoint
 * (periodic, on a stop signal, or the final one) pairs an epoch with a position inside it.
 * DDP_EPREEMPTED when the ranks agreed to stop, for *stop. */
static int train_loop(train_job *t, int64_t consumed, int *stop, ddp_err *err)
{
    const config *c = t->cfg;
    t->t_start = monotonic_s();
    train_log_start(t, t->t_start);
    t->start_step = t->step;
    int64_t last_epoch = c->train.max_steps > 0 ? INT64_MAX : c->train.epochs;
    int rc = sampler_set_epoch(&t->smp, t->epoch, consumed, err);
    /* resumed at the last step: its stop may have come before the last evaluation, or during it */
    if (rc == DDP_OK && t->step >= t->total_steps)
        rc = evaluate_at_end(t, stop, err);
    while (rc == DDP_OK && t->step < t->total_steps && t->epoch < last_epoch) {
        if ((rc = run_epoch(t, stop, err)) != DDP_OK)
            return rc;
        if (*stop != TRAIN_STOP_NONE)
            return DDP_EPREEMPTED;
        bool epoch_done = train_steps_in(t, sampler_steps_left(&t->smp)) == 0;
        if ((epoch_done || t->step >= t->total_steps) && (rc = evaluate_at_end(t, stop, err)) != DDP_OK)
            return rc;
        if (!epoch_done)
            break; /* the step budget ran out inside this epoch */
        t->epoch++;
        rc = sampler_set_epoch(&t->smp, t->epoch, 0, err);
    }
    return rc != DDP_OK ? rc : train_ckpt_maybe_save(t, c->checkpoint.final, err);
}

/* The gradient communicator's end, with what uses it (ZeRO's gathers, the reducer); once. After a
 * loop that every rank left in agreement, every rank ends it at once, before rank 0 waits for its
 * last checkpoint and upload: NCCL's destroy waits for the host's other ranks (an intra-node
 * collective), which would wait that long otherwise, past their teardown's limit. After a failure
 * it is aborted (a peer may never finish a collective) before the buffers its collectives use are
 * freed: cudaFree waits for the device, and so for a collective a dead peer never joins, until the
 * watchdog's timeout. The reducer and the gathers forget their requests first. */
static void end_collectives(train_job *t, bool failed)
{
    bool own = t->grad_comm && t->grad_comm != t->ctl;
    if (failed && own) {
        reducer_abandon(t->red);
        train_zero_abandon(t);
        t->grad_comm->ops->abort(t->grad_comm);
    }
    train_zero_close(t); /* before the communicator its gathers use */
    reducer_destroy(t->red);
    if (own && !failed)
        t->grad_comm->ops->destroy(t->grad_comm);
    t->red = NULL;
    t->grad_comm = NULL;
}

/* failed: the job ends on an error, so the gradient communicator is aborted rather than drained. */
static void teardown(train_job *t, bool failed)
{
    train_ckpt_close(t);
    train_profile_close(t); /* after the checkpoint writer, which may still report a write to it */
    train_tb_close(t);
    train_ranks_close(t);
    train_log_close(t);
    train_lock_release(t); /* after every other writer into run.dir */
    train_fault_close(t);
    train_budget_close(t);
    end_collectives(t, failed);
    optim_destroy(t->opt);
    train_observe_close(t);
    train_staging_close(t);
    train_finite_close(t);
    if (t->m)
        t->m->ops->destroy(t->m);
    if (t->dev)
        t->dev->ops->destroy(t->dev);
    sampler_free(&t->smp);
    dataset_free(&t->train);
    dataset_free(&t->test);
}

/* Everything before the first step: the job built, the checkpoint resumed (or the parameters
 * taken from checkpoint.init_from), run.dir locked and its files opened, the header logged. */
static int open_job(train_job *t, notice_watch *notice, int64_t *consumed, ddp_err *err)
{
    int rc = train_budget_open(t, notice, err);
    if (rc == DDP_OK)
        rc = setup(t, err);
    if (rc == DDP_OK)
        rc = train_ckpt_open(t, err);
    /* resume first: a checkpoint refused (another model, other settings) leaves run.dir untouched;
     * but a checkpoint.download_cmd that may run writes into it (its log, the checkpoints) */
    if (rc == DDP_OK)
        rc = train_lock_run_dir(t, train_ckpt_may_download(t), err);
    if (rc == DDP_OK)
        rc = train_ckpt_check_dir(t, true, err);
    if (rc == DDP_OK)
        rc = train_ckpt_resume(t, consumed, err);
    if (rc == DDP_OK)
        rc = train_lock_run_dir(t, true, err);
    if (rc == DDP_OK)
        rc = train_ckpt_check_dir(t, false, err);
    if (rc == DDP_OK)
        rc = train_log_open(t, err);
    if (rc == DDP_OK)
        rc = train_ranks_open(t, err);
    if (rc == DDP_OK)
        rc = train_tb_open(t, err);
    if (rc == DDP_OK) {
        train_log_header(t);
        rc = train_profile_open(t, err);
    }
    return rc;
}

/* After the loop (rc its verdict): the profile reported, the last save waited for, metrics.jsonl
 * made durable; any failure there is the job's. */
static int finish_job(train_job *t, int rc, ddp_err *err)
{
    bool ok = rc == DDP_OK || rc == DDP_EPREEMPTED;
    if (ok) {
        int prc = train_profile_finish(t, err);
        rc = prc != DDP_OK ? prc : rc;
    }
    ok = rc == DDP_OK || rc == DDP_EPREEMPTED;
    int rc2 = train_ckpt_finish(t, !ok, ok ? err : NULL);
    if (ok)
        rc = rc2 != DDP_OK ? rc2 : rc;
    if ((rc == DDP_OK || rc == DDP_EPREEMPTED) &&
        ((rc2 = train_log_finish(t, err)) != DDP_OK || (rc2 = train_tb_finish(t, err)) != DDP_OK))
        rc = rc2;
    return rc;
}

/* The job's last line: steps, time, why it stopped (stop, TRAIN_STOP_*, for DDP_EPREEMPTED; NONE:
 * the resume's download was stopped) and the latest evaluation. */
static void log_done(const train_job *t, int rc, int stop)
{
    double secs = t->t_start > 0 ? monotonic_s() - t->t_start : 0; /* 0: stopped before the loop */
    train_eval last = train_log_last_eval(t);
    char result[64] = "no evaluation";
    if (last.done && t->m->io.classifier)
        snprintf(result, sizeof result, "final test accuracy %.2f%%", 100.0 * last.acc);
    else if (last.done)
        snprintf(result, sizeof result, "final test loss %.4f", last.loss);
    const char *why = stop == TRAIN_STOP_NOTICE   ? " (stopped by the cloud's preemption notice, checkpoint saved)"
                      : stop == TRAIN_STOP_SIGNAL ? " (stopped by signal, checkpoint saved)"
                                                  : " (stopped while resuming, before any step: nothing to save)";
    log_info("done: %lld steps in %.1f s%s, %s", (long long)t->step, secs, rc == DDP_EPREEMPTED ? why : "", result);
}

static int train_job_run(const config *cfg, comm *ctl, notice_watch *notice, ddp_err *err)
{
    train_job t = {.cfg = cfg, .ctl = ctl};
    int64_t consumed = 0;
    int stop = TRAIN_STOP_NONE;
    int rc = open_job(&t, notice, &consumed, err);
    if (rc == DDP_OK) {
        if (t.step >= t.total_steps)
            log_info("nothing to train: %s already holds step %lld of %lld; use a new run.dir, or more "
                     "train.epochs / train.max_steps", cfg->run.dir,
                     (long long)t.step, (long long)t.total_steps);
        rc = train_loop(&t, consumed, &stop, err);
    }
    /* DDP_ENONFINITE, like a stop, is every rank's agreed decision: nothing is left in flight */
    bool agreed = rc == DDP_OK || rc == DDP_EPREEMPTED || rc == DDP_ENONFINITE;
    if (!agreed && err->msg[0]) {
        log_error("%s", err->msg); /* now: a peer's deadline may end this rank in the waits below */
        err->msg[0] = '\0';
    }
    if (agreed)
        end_collectives(&t, false);
    rc = finish_job(&t, rc, err);
    if (train_ckpt_stalled(&t)) { /* teardown closes files in run.dir, on storage that may answer
                                   * nothing more: this rank ends now, mpirun the rest */
        if (err->msg[0]) /* else said already, when the loop found it */
            log_error("%s", err->msg);
        fflush(stdout);
        _exit(DDP_ERUNTIME);
    }
    if (rc == DDP_OK || rc == DDP_EPREEMPTED)
        log_done(&t, rc, stop);
    teardown(&t, !agreed);
    return rc;
}

int train_run(const config *given, comm *ctl, notice_watch *notice, ddp_err *err)
{
    config *cfg = malloc(sizeof *cfg); /* given, with the shape checkpoint.init_from gives */
    if (!cfg)
        return ddp_fail(err, DDP_ERUNTIME, "out of memory");
    memcpy(cfg, given, sizeof *cfg);
    int rc = train_init_from_shape(cfg, ctl, err);
    rc = rc == DDP_OK ? train_job_run(cfg, ctl, notice, err) : rc;
    free(cfg);
    return rc;
}
