/* train_replica.c — what the step loop (train.c), checkpoints (train_ckpt.c) and evaluation
 * (train_log.c) share about this rank's replica: its parameters made rank 0's and the model told
 * they changed, and the batch staging buffers a micro-batch is gathered into and uploaded from.
 * Must not decide when any of it happens: its callers do. */
#include <stdlib.h>

#include "train_job.h"

int train_alloc_staging(train_job *t, ddp_err *err)
{
    int64_t b = t->batch;
    size_t in = (size_t)b * sample_field_bytes(t->m->io.sample.input);
    size_t tgt = (size_t)b * sample_field_bytes(t->m->io.sample.target);
    t->idx = malloc((size_t)b * sizeof *t->idx);
    t->inputs_host = malloc(in);
    t->targets_host = malloc(tgt);
    if (!t->idx || !t->inputs_host || !t->targets_host)
        return ddp_fail(err, DDP_ERUNTIME, "out of memory for batch staging (%lld rows)", (long long)b);
    device *d = t->dev;
    int rc = d->ops->alloc(d, in, &t->inputs_dev, err);
    if (rc == DDP_OK)
        rc = d->ops->alloc(d, tgt, &t->targets_dev, err);
    return rc;
}

int train_params_changed(train_job *t, ddp_err *err)
{
    return model_params_changed(t->m, t->cfg->run.seed, t->opt ? (uint64_t)t->opt->step : 0, err);
}

int train_broadcast_params(train_job *t, ddp_err *err)
{
    model *m = t->m;
    if (t->ctl->size == 1)
        return train_params_changed(t, err);
    float *host = malloc(m->n_params * sizeof(float));
    if (!host)
        return ddp_fail(err, DDP_ERUNTIME, "out of memory broadcasting parameters");
    int rc = m->dev->ops->download(m->dev, host, m->params, m->n_params * sizeof(float), err);
    if (rc == DDP_OK)
        rc = t->ctl->ops->broadcast(t->ctl, host, m->n_params, DT_FLOAT, 0, NULL, err);
    if (rc == DDP_OK)
        rc = m->dev->ops->upload(m->dev, m->params, host, m->n_params * sizeof(float), err);
    free(host);
    return rc != DDP_OK ? rc : train_params_changed(t, err);
}

int train_stage_batch(train_job *t, const dataset *data, int64_t rows, model_batch *b, ddp_err *err)
{
    device *d = t->dev;
    const sample_layout *io = &t->m->io.sample;
    dataset_gather(data, t->idx, rows, t->inputs_host, t->targets_host);
    int rc = d->ops->upload(d, t->inputs_dev, t->inputs_host, (size_t)rows * sample_field_bytes(io->input), err);
    if (rc == DDP_OK)
        rc = d->ops->upload(d, t->targets_dev, t->targets_host, (size_t)rows * sample_field_bytes(io->target), err);
    *b = (model_batch){.inputs = t->inputs_dev, .targets = t->targets_dev, .rows = rows};
    return rc;
}
