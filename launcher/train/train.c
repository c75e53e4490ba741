/* train.c — one rank's training job: setup, then the loop of optimizer steps.
 *
 * Owns the order of a step: gather the rank's batch (sampler), upload, forward/backward with the
 * reducer averaging gradient buckets as backward produces them, wait for the buckets, clip, step
 * the optimizer, agree across ranks whether to stop. Logging/evaluation live in train_log.c and
 * checkpoints in train_ckpt.c. Must not know CPU from CUDA or MPI from NCCL: the device and
 * communicator interfaces do. */
#include "train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/clock.h"
#include "runtime/base/gpu_share.h"
#include "runtime/base/log.h"
#include "trainer.h"

volatile sig_atomic_t train_stop_requested = 0;

static int load_data(trainer *t, ddp_err *err)
{
    const config *c = t->cfg;
    int rc;
    if (c->data.kind == DATA_FASHION_MNIST) {
        rc = dataset_load_fashion_mnist(c->data.path, true, &t->train, err);
        if (rc == DDP_OK)
            rc = dataset_load_fashion_mnist(c->data.path, false, &t->test, err);
    } else {
        rc = dataset_make_synthetic(c->data.synthetic_train, c->data.synthetic_features,
                                    c->data.synthetic_classes, c->run.seed, &t->train, err);
        if (rc == DDP_OK)
            rc = dataset_make_synthetic(c->data.synthetic_test, c->data.synthetic_features,
                                        c->data.synthetic_classes, c->run.seed + 1, &t->test, err);
    }
    return rc;
}

static int alloc_staging(trainer *t, ddp_err *err)
{
    int64_t b = t->cfg->data.batch_size, f = t->train.features;
    t->idx = malloc((size_t)b * sizeof *t->idx);
    t->x_host = malloc((size_t)(b * f));
    t->y_host = malloc((size_t)b * sizeof *t->y_host);
    if (!t->idx || !t->x_host || !t->y_host)
        return ddp_fail(err, DDP_ERUNTIME, "out of memory for batch staging (%lld rows)", (long long)b);
    device *d = t->dev;
    int rc = d->ops->alloc(d, (size_t)(b * f), &t->x_dev, err);
    if (rc == DDP_OK)
        rc = d->ops->alloc(d, (size_t)b * sizeof(int32_t), (void **)&t->y_dev, err);
    if (rc == DDP_OK)
        rc = d->ops->alloc(d, 2 * sizeof(float), (void **)&t->stats_dev, err);
    if (rc == DDP_OK)
        rc = d->ops->fill(d, t->stats_dev, 2, 0.0f, err);
    return rc;
}

/* Replicas start identical by construction (same seed) and by a broadcast from rank 0, so a
 * rank with a different build or seed cannot silently diverge. */
static int init_params(trainer *t, ddp_err *err)
{
    model *m = t->m;
    int rc = model_init_params(m, t->cfg->run.seed, err);
    if (rc != DDP_OK || t->ctl->size == 1)
        return rc;
    float *host = malloc(m->n_params * sizeof(float));
    if (!host)
        return ddp_fail(err, DDP_ERUNTIME, "out of memory broadcasting parameters");
    rc = m->dev->ops->download(m->dev, host, m->params, m->n_params * sizeof(float), err);
    if (rc == DDP_OK)
        rc = t->ctl->ops->broadcast(t->ctl, host, m->n_params, DT_FLOAT, 0, NULL, err);
    if (rc == DDP_OK)
        rc = m->dev->ops->upload(m->dev, m->params, host, m->n_params * sizeof(float), err);
    free(host);
    return rc;
}

/* One rank per GPU: more ranks on this host than GPUs visible is an error at startup (ranks
 * would silently share GPUs) unless DDPRUN_ALLOW_GPU_SHARING=1. */
static int check_gpu_count(trainer *t, ddp_err *err)
{
    if (t->dev->kind != DEVICE_CUDA)
        return DDP_OK;
    char reason[256] = "";
    int gpus = device_cuda_count(reason, sizeof reason);
    return gpu_share_check(t->ctl->local_size, gpus, t->ctl->host, reason, err);
}

static int open_grad_comm(trainer *t, ddp_err *err)
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
    return comm_nccl_create(t->dev->stream, t->dev->index, c->ddp.timeout_s, c->ddp.debug, &t->grad_comm, err);
}

static int make_reducer(trainer *t, ddp_err *err)
{
    size_t offs[MODEL_MAX_TENSORS];
    for (int i = 0; i < t->m->n_tensors; i++)
        offs[i] = t->m->tensors[i].offset;
    int rc = reducer_create(t->grad_comm, t->m->grads, t->m->n_params, offs, t->m->n_tensors,
                            t->cfg->ddp.bucket_mb, t->cfg->ddp.first_bucket_mb, &t->red, err);
    if (rc == DDP_OK && t->cfg->ddp.grad_dtype == GRAD_BF16)
        rc = reducer_use_bf16(t->red, t->dev, err);
    if (rc == DDP_OK)
        rc = t->dev->ops->timer_create(t->dev, &t->comm_exposed, err);
    return rc;
}

/* Test-only: DDP_TEST_TRACE_DIR makes each rank append "epoch index" for every sample it trains
 * on, so tests can prove each sample of an interrupted epoch is used exactly once. */
static int open_trace(trainer *t, ddp_err *err)
{
    const char *dir = getenv("DDP_TEST_TRACE_DIR");
    if (!dir)
        return DDP_OK;
    char path[CFG_PATH_MAX];
    snprintf(path, sizeof path, "%s/trace-w%d-r%d.txt", dir, t->ctl->size, t->ctl->rank);
    t->trace = fopen(path, "a");
    return t->trace ? DDP_OK : ddp_fail(err, DDP_ERUNTIME, "cannot open %s", path);
}

static int setup(trainer *t, ddp_err *err)
{
    const config *c = t->cfg;
    const char *rs = getenv("DDPRUN_RESTART_COUNT");
    t->restart_count = rs ? atoi(rs) : 0;
    int trc = open_trace(t, err);
    if (trc != DDP_OK)
        return trc;
    int rc = device_open(c, t->ctl->local_rank, &t->dev, err);
    if (rc == DDP_OK)
        rc = check_gpu_count(t, err);
    if (rc == DDP_OK)
        rc = load_data(t, err);
    if (rc == DDP_OK)
        rc = model_create(c, t->dev, t->train.features, t->train.classes, c->data.batch_size, &t->m, err);
    if (rc == DDP_OK)
        rc = init_params(t, err);
    if (rc == DDP_OK)
        rc = optim_create(c, t->dev, t->m->n_params, &t->opt, err);
    if (rc == DDP_OK)
        rc = open_grad_comm(t, err);
    if (rc == DDP_OK)
        rc = make_reducer(t, err);
    if (rc == DDP_OK)
        rc = alloc_staging(t, err);
    if (rc == DDP_OK)
        rc = sampler_init(&t->smp, t->train.n, t->ctl->rank, t->ctl->size, c->data.batch_size,
                          c->data.shuffle, c->data.drop_last, c->run.seed, err);
    if (rc != DDP_OK)
        return rc;
    t->steps_per_epoch = sampler_steps_per_epoch(&t->smp) / c->train.grad_accum;
    if (t->steps_per_epoch < 1)
        return ddp_fail(err, DDP_EUSAGE, "%s: data.batch_size %lld x %d ranks x train.grad_accum %lld = %lld "
                        "samples per step is more than one epoch of %s (%lld samples)", c->source,
                        (long long)c->data.batch_size, t->ctl->size, (long long)c->train.grad_accum,
                        (long long)(c->data.batch_size * t->ctl->size * c->train.grad_accum),
                        t->train.name, (long long)t->train.n);
    t->total_steps = c->train.max_steps > 0 ? c->train.max_steps : c->train.epochs * t->steps_per_epoch;
    return DDP_OK;
}

/* One micro-batch: gather this rank's rows, upload, forward/backward. Gradients of the last
 * micro-step of an optimizer step are reduced while backward runs (no_sync for the others). */
static int micro_step(trainer *t, int64_t rows, bool first, bool last, ddp_err *err)
{
    device *d = t->dev;
    int64_t f = t->train.features;
    dataset_gather(&t->train, t->idx, rows, t->x_host, t->y_host);
    for (int64_t i = 0; t->trace && i < rows; i++)
        fprintf(t->trace, "%lld %lld\n", (long long)t->epoch, (long long)t->idx[i]);
    int rc = d->ops->upload(d, t->x_dev, t->x_host, (size_t)(rows * f), err);
    if (rc == DDP_OK)
        rc = d->ops->upload(d, t->y_dev, t->y_host, (size_t)rows * sizeof(int32_t), err);
    if (rc != DDP_OK)
        return rc;
    model_batch b = {.inputs = t->x_dev, .targets = t->y_dev, .rows = rows};
    float scale = 1.0f / ((float)rows * (float)t->cfg->train.grad_accum);
    if (last)
        reducer_begin(t->red);
    rc = t->m->ops->forward_backward(t->m, &b, scale, !first, last ? reducer_grad_ready : NULL,
                                     last ? t->red : NULL, t->stats_dev, err);
    t->samples_acc += (double)rows * t->ctl->size;
    return rc;
}

/* Communication exposed (not hidden by backward) is the compute stream's time from the end of
 * backward until the reduced gradients are usable: timed on the device, read at log lines. */
static int reduce_gradients(trainer *t, ddp_err *err)
{
    device *d = t->dev;
    int rc = d->ops->timer_start(d, t->comm_exposed, err);
    if (rc == DDP_OK)
        rc = reducer_finish(t->red, err);
    if (rc == DDP_OK)
        rc = d->ops->timer_stop(d, t->comm_exposed, err);
    return rc;
}

static int optimizer_step(trainer *t, double *lr, ddp_err *err)
{
    int rc = reduce_gradients(t, err);
    if (rc != DDP_OK)
        return ddp_prefix(err, "gradient all-reduce at step %lld", (long long)t->step + 1);
    /* The norm is a full pass over the gradients (and a device sync): only clipping needs it. */
    double norm = 0;
    float scale = 1.0f;
    if (t->opt->grad_clip > 0 && (rc = optim_grad_norm(t->opt, t->m->grads, &norm, &scale, err)) != DDP_OK)
        return rc;
    *lr = optim_lr_at(t->opt, t->step, t->total_steps);
    rc = optim_step(t->opt, t->m->params, t->m->grads, *lr, scale, err);
    t->step++;
    t->steps_acc++;
    return rc;
}

/* Test-only fault switch, DDP_TEST_FAULT=KIND:RANK:STEP (KIND kill | stop | exit), active only on
 * the first attempt of a job (DDPRUN_RESTART_COUNT unset or 0): `kill` SIGKILLs the rank, `stop`
 * acts as if that rank alone received the stop signal, `exit` exits with status 3. Each fires
 * after optimizer step STEP, so integration tests hit exact, reproducible points. */
static void test_fault(const trainer *t)
{
    const char *spec = getenv("DDP_TEST_FAULT");
    char kind[16];
    int rank;
    long long step;
    if (!spec || t->restart_count != 0 || sscanf(spec, "%15[a-z]:%d:%lld", kind, &rank, &step) != 3)
        return;
    if (rank != t->ctl->rank || step != t->step)
        return;
    if (strcmp(kind, "kill") == 0)
        raise(SIGKILL);
    else if (strcmp(kind, "stop") == 0)
        train_stop_requested = 1;
    else if (strcmp(kind, "exit") == 0)
        exit(3);
}

/* Every rank must stop at the same step: a one-int MAX all-reduce per step makes a signal seen
 * by any rank a decision of all ranks. */
static int agree_stop(trainer *t, bool *stop, ddp_err *err)
{
    int32_t flag = train_stop_requested ? 1 : 0;
    int rc = t->ctl->ops->allreduce(t->ctl, &flag, &flag, 1, DT_INT32, OP_MAX, NULL, err);
    *stop = flag != 0;
    return rc;
}

static int run_epoch(trainer *t, bool *stopped, ddp_err *err)
{
    const config *c = t->cfg;
    int64_t accum = c->train.grad_accum;
    while (t->step < t->total_steps && sampler_steps_left(&t->smp) >= accum) {
        int rc = DDP_OK;
        for (int64_t a = 0; a < accum && rc == DDP_OK; a++) {
            int64_t rows = sampler_next_batch(&t->smp, t->idx);
            rc = micro_step(t, rows, a == 0, a == accum - 1, err);
        }
        double lr = 0;
        if (rc == DDP_OK)
            rc = optimizer_step(t, &lr, err);
        if (rc == DDP_OK && (t->step % c->train.log_every == 0 || t->step == t->total_steps))
            rc = train_log_progress(t, lr, err);
        test_fault(t);
        bool stop = false;
        if (rc == DDP_OK)
            rc = agree_stop(t, &stop, err);
        if (rc == DDP_OK)
            rc = train_ckpt_maybe_save(t, stop, err);
        if (rc != DDP_OK)
            return rc;
        if (stop) {
            *stopped = true;
            return DDP_OK;
        }
    }
    return DDP_OK;
}

/* Epochs advance only when one is complete, together with the sampler, so every checkpoint
 * (periodic, on a stop signal, or the final one) pairs an epoch with a position inside it. */
static int train_loop(trainer *t, int64_t consumed, ddp_err *err)
{
    const config *c = t->cfg;
    t->t_start = t->t_last_log = monotonic_s();
    int64_t last_epoch = c->train.max_steps > 0 ? INT64_MAX : c->train.epochs;
    int rc = sampler_set_epoch(&t->smp, t->epoch, consumed, err);
    while (rc == DDP_OK && t->step < t->total_steps && t->epoch < last_epoch) {
        bool stopped = false;
        if ((rc = run_epoch(t, &stopped, err)) != DDP_OK)
            return rc;
        if (stopped)
            return DDP_EPREEMPTED;
        bool epoch_done = sampler_steps_left(&t->smp) < c->train.grad_accum;
        if (c->train.eval && (epoch_done || t->step >= t->total_steps) && (rc = train_evaluate(t, err)) != DDP_OK)
            return rc;
        if (!epoch_done)
            break; /* the step budget ran out inside this epoch */
        t->epoch++;
        rc = sampler_set_epoch(&t->smp, t->epoch, 0, err);
    }
    return rc != DDP_OK ? rc : train_ckpt_maybe_save(t, 1, err);
}

static void teardown(trainer *t)
{
    train_ckpt_close(t);
    train_log_close(t);
    if (t->trace)
        fclose(t->trace);
    reducer_destroy(t->red);
    if (t->grad_comm && t->grad_comm != t->ctl)
        t->grad_comm->ops->destroy(t->grad_comm);
    optim_destroy(t->opt);
    if (t->dev) {
        t->dev->ops->timer_destroy(t->dev, t->comm_exposed);
        t->dev->ops->free(t->dev, t->x_dev);
        t->dev->ops->free(t->dev, t->y_dev);
        t->dev->ops->free(t->dev, t->stats_dev);
    }
    if (t->m)
        t->m->ops->destroy(t->m);
    if (t->dev)
        t->dev->ops->destroy(t->dev);
    sampler_free(&t->smp);
    dataset_free(&t->train);
    dataset_free(&t->test);
    free(t->idx);
    free(t->x_host);
    free(t->y_host);
}

int train_run(const config *cfg, comm *ctl, ddp_err *err)
{
    trainer t = {.cfg = cfg, .ctl = ctl, .last_test_acc = -1};
    int64_t consumed = 0;
    int rc = setup(&t, err);
    if (rc == DDP_OK)
        rc = train_log_open(&t, err);
    if (rc == DDP_OK)
        rc = train_ckpt_open(&t, err);
    if (rc == DDP_OK)
        rc = train_ckpt_resume(&t, &consumed, err);
    if (rc == DDP_OK) {
        train_log_header(&t);
        if (t.step >= t.total_steps)
            log_info("nothing to train: %s already holds step %lld of %lld; use a new run.dir, "
                     "checkpoint.resume=never, or more train.epochs / train.max_steps", cfg->run.dir,
                     (long long)t.step, (long long)t.total_steps);
        rc = train_loop(&t, consumed, err);
    }
    int rc2 = train_ckpt_finish(&t, rc == DDP_OK || rc == DDP_EPREEMPTED ? err : NULL);
    if (rc == DDP_OK || rc == DDP_EPREEMPTED)
        rc = rc2 != DDP_OK ? rc2 : rc;
    if (rc == DDP_OK || rc == DDP_EPREEMPTED) {
        double secs = monotonic_s() - t.t_start;
        char acc[64] = "no evaluation";
        if (t.last_test_acc >= 0)
            snprintf(acc, sizeof acc, "final test accuracy %.2f%%", 100.0 * t.last_test_acc);
        log_info("done: %lld steps in %.1f s%s, %s", (long long)t.step, secs,
                 rc == DDP_EPREEMPTED ? " (stopped by signal, checkpoint saved)" : "", acc);
    }
    teardown(&t);
    return rc;
}
