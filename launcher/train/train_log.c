/* train_log.c — what a training job tells its user: the header, a progress line every
 * train.log_every steps, test-set evaluation, and run.dir/metrics.jsonl (rank 0 writes it).
 * Evaluation counts every test sample exactly once across ranks (no sampler padding).
 * Must not change training state: it only reads it (evaluation runs the model forward only). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/clock.h"
#include "runtime/base/dirs.h"
#include "runtime/base/log.h"
#include "trainer.h"

int train_log_open(trainer *t, ddp_err *err)
{
    if (t->ctl->rank != 0)
        return DDP_OK;
    const char *dir = t->cfg->run.dir;
    int rc = make_dirs(dir, err) ? ddp_prefix(err, "run.dir") : DDP_OK;
    char path[CFG_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/config.resolved.yaml", dir);
    if (rc == DDP_OK)
        rc = config_write_resolved(t->cfg, path, err);
    if (rc != DDP_OK)
        return rc;
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    t->metrics = fopen(path, "a");
    if (!t->metrics)
        return ddp_fail(err, DDP_ERUNTIME, "cannot open %s: %s", path, strerror(errno));
    return DDP_OK;
}

void train_log_close(trainer *t)
{
    if (t->metrics)
        fclose(t->metrics);
    t->metrics = NULL;
}

void train_log_header(trainer *t)
{
    const config *c = t->cfg;
    log_info("ddprun: %d rank%s, device %s, gradient backend %s, %d bucket%s", t->ctl->size,
             t->ctl->size == 1 ? "" : "s", t->dev->name, t->grad_comm->ops->name, t->red->n_buckets,
             t->red->n_buckets == 1 ? "" : "s");
    char shape[256] = "";
    size_t len = 0;
    for (int i = 0; i < c->model.n_hidden && len < sizeof shape - 16; i++)
        len += (size_t)snprintf(shape + len, sizeof shape - len, "-%lld", (long long)c->model.hidden[i]);
    log_info("model: mlp %lld%s-%lld (%s), %zu parameters", (long long)t->m->in_features, shape,
             (long long)t->m->n_classes, act_kind_name(c->model.activation), t->m->n_params);
    log_info("data: %s %lld samples, %s %lld samples; global batch %lld = %lld per rank x %d ranks x %lld accumulation",
             t->train.name, (long long)t->train.n, t->test.name, (long long)t->test.n,
             (long long)(c->data.batch_size * t->ctl->size * c->train.grad_accum), (long long)c->data.batch_size,
             t->ctl->size, (long long)c->train.grad_accum);
    log_info("schedule: %lld steps per epoch, %lld steps in total, starting at step %lld (epoch %lld)",
             (long long)t->steps_per_epoch, (long long)t->total_steps, (long long)t->step, (long long)t->epoch + 1);
}

/* Averages the loss/accuracy accumulated on the device since the last line over all ranks, and
 * the per-step communication exposed (ms the step waited for gradients after backward; the
 * download has synchronised, so taking the timer costs no extra wait). */
int train_log_progress(trainer *t, double lr, ddp_err *err)
{
    device *d = t->dev;
    float st[2];
    double exposed_ms = 0;
    int rc = d->ops->download(d, st, t->stats_dev, sizeof st, err);
    if (rc == DDP_OK)
        rc = d->ops->fill(d, t->stats_dev, 2, 0.0f, err);
    if (rc == DDP_OK)
        rc = d->ops->timer_take_ms(d, t->comm_exposed, &exposed_ms, err);
    double sums[4] = {st[0], st[1], t->samples_acc / t->ctl->size, exposed_ms / t->ctl->size};
    if (rc == DDP_OK)
        rc = t->ctl->ops->allreduce(t->ctl, sums, sums, 4, DT_DOUBLE, OP_SUM, NULL, err);
    if (rc != DDP_OK)
        return rc;
    double now = monotonic_s(), dt = now - t->t_last_log;
    double n = sums[2] > 0 ? sums[2] : 1, steps = t->steps_acc > 0 ? (double)t->steps_acc : 1;
    double loss = sums[0] / n, acc = sums[1] / n, sps = t->samples_acc / dt;
    double ms_step = 1e3 * dt / steps, comm_ms = sums[3] / steps;
    log_info("epoch %lld step %lld/%lld loss %.4f acc %.1f%% lr %.3e | %.0f samples/s %.2f ms/step "
             "%.2f ms comm exposed", (long long)t->epoch + 1, (long long)t->step, (long long)t->total_steps, loss,
             100 * acc, lr, sps, ms_step, comm_ms);
    if (t->metrics) {
        fprintf(t->metrics, "{\"kind\":\"train\",\"epoch\":%lld,\"step\":%lld,\"loss\":%.6g,\"acc\":%.6g,"
                "\"lr\":%.6g,\"samples_per_s\":%.1f,\"ms_per_step\":%.4f,\"comm_exposed_ms\":%.4f}\n",
                (long long)t->epoch + 1, (long long)t->step, loss, acc, lr, sps, ms_step, comm_ms);
        fflush(t->metrics);
    }
    t->t_last_log = now;
    t->steps_acc = 0;
    t->samples_acc = 0;
    return DDP_OK;
}

int train_evaluate(trainer *t, ddp_err *err)
{
    device *d = t->dev;
    int64_t begin, end, bs = t->cfg->data.batch_size, f = t->test.features;
    sampler_eval_range(t->test.n, t->ctl->rank, t->ctl->size, &begin, &end);
    float *stats = NULL;
    int rc = d->ops->alloc(d, 2 * sizeof(float), (void **)&stats, err);
    if (rc == DDP_OK)
        rc = d->ops->fill(d, stats, 2, 0.0f, err);
    for (int64_t i = begin; i < end && rc == DDP_OK; i += bs) {
        int64_t rows = end - i < bs ? end - i : bs;
        for (int64_t r = 0; r < rows; r++)
            t->idx[r] = i + r;
        dataset_gather(&t->test, t->idx, rows, t->x_host, t->y_host);
        rc = d->ops->upload(d, t->x_dev, t->x_host, (size_t)(rows * f), err);
        if (rc == DDP_OK)
            rc = d->ops->upload(d, t->y_dev, t->y_host, (size_t)rows * sizeof(int32_t), err);
        model_batch b = {.inputs = t->x_dev, .targets = t->y_dev, .rows = rows};
        if (rc == DDP_OK)
            rc = t->m->ops->evaluate(t->m, &b, stats, err);
    }
    float st[2] = {0, 0};
    if (rc == DDP_OK)
        rc = d->ops->download(d, st, stats, sizeof st, err);
    d->ops->free(d, stats);
    double sums[3] = {st[0], st[1], (double)(end - begin)};
    if (rc == DDP_OK)
        rc = t->ctl->ops->allreduce(t->ctl, sums, sums, 3, DT_DOUBLE, OP_SUM, NULL, err);
    if (rc != DDP_OK)
        return ddp_prefix(err, "evaluation");
    t->last_test_loss = sums[0] / sums[2];
    t->last_test_acc = sums[1] / sums[2];
    log_info("eval epoch %lld step %lld: test loss %.4f, test accuracy %.2f%% (%.0f samples)", (long long)t->epoch + 1,
             (long long)t->step, t->last_test_loss, 100 * t->last_test_acc, sums[2]);
    if (t->metrics) {
        fprintf(t->metrics, "{\"kind\":\"eval\",\"epoch\":%lld,\"step\":%lld,\"test_loss\":%.6g,\"test_acc\":%.6g,"
                "\"samples\":%.0f}\n", (long long)t->epoch + 1, (long long)t->step, t->last_test_loss,
                t->last_test_acc, sums[2]);
        fflush(t->metrics);
    }
    return DDP_OK;
}
