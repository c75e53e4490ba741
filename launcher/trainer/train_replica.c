/* train_replica.c — what the step loop (train.c), checkpoints (train_ckpt.c, train_resume.c) and
 * evaluation (train_log.c) share about this rank's replica: its parameters, or a checkpoint's
 * saved buffers, made rank 0's a chunk at a time and the model told they changed, and the batch
 * staging buffers a micro-batch is chosen into, gathered and uploaded from, which it owns (struct
 * train_staging). Must not decide when any of it happens: its callers do. */
#include <stdio.h>
#include <stdlib.h>

#include "runtime/base/clock.h"
#include "runtime/base/log.h"
#include "runtime/base/max_chunk.h"
#include "train_agree.h"
#include "train_ckpt_state.h"
#include "train_replica.h"
#include "train_zero.h"

/* t->batch rows of sample indices, and of inputs and targets as m->io.sample lays them out (the
 * bytes dataset_gather produces), on the host and on the device. */
struct train_staging {
    int64_t *idx;
    int64_t rows;             /* rows of idx the next upload takes */
    void *inputs_host, *targets_host;
    void *inputs_dev, *targets_dev;
    int32_t *docs_host, *docs_dev; /* packed rows: their document bounds [2, rows, T]; else NULL */
    int64_t step_rows;        /* this rank's rows in the step's micro-batches (train_stage_count_step) */
    int64_t step_counts[2];   /* packed rows: trainable targets and tokens of the step over every rank */
};

int train_staging_open(train_job *t, ddp_err *err)
{
    struct train_staging *s = calloc(1, sizeof *s);
    t->staging = s;
    if (!s)
        return ddp_fail(err, DDP_ERUNTIME, "out of memory for batch staging");
    int64_t b = t->batch;
    size_t in = (size_t)b * sample_field_bytes(t->m->io.sample.input);
    size_t tgt = (size_t)b * sample_field_bytes(t->m->io.sample.target);
    s->idx = malloc((size_t)b * sizeof *s->idx);
    s->inputs_host = malloc(in);
    s->targets_host = malloc(tgt);
    if (!s->idx || !s->inputs_host || !s->targets_host)
        return ddp_fail(err, DDP_ERUNTIME, "out of memory for batch staging (%lld rows)", (long long)b);
    device *d = t->dev;
    int rc = d->ops->alloc(d, in, &s->inputs_dev, err);
    if (rc == DDP_OK)
        rc = d->ops->alloc(d, tgt, &s->targets_dev, err);
    size_t docs = 2 * (size_t)b * (size_t)t->m->io.sample.input.count * sizeof(int32_t);
    if (rc == DDP_OK && t->train.packed && !(s->docs_host = malloc(docs)))
        rc = ddp_fail(err, DDP_ERUNTIME, "out of memory for batch staging (%lld rows)", (long long)b);
    if (rc == DDP_OK && t->train.packed)
        rc = d->ops->alloc(d, docs, (void **)&s->docs_dev, err);
    return rc;
}

void train_staging_close(train_job *t)
{
    struct train_staging *s = t->staging;
    if (!s)
        return;
    if (t->dev) {
        t->dev->ops->free(t->dev, s->inputs_dev);
        t->dev->ops->free(t->dev, s->targets_dev);
        t->dev->ops->free(t->dev, s->docs_dev);
    }
    free(s->docs_host);
    free(s->idx);
    free(s->inputs_host);
    free(s->targets_host);
    free(s);
    t->staging = NULL;
}

void train_stage_next(train_job *t)
{
    t->staging->rows = sampler_next_batch(&t->smp, t->staging->idx);
}

void train_stage_range(train_job *t, int64_t begin, int64_t rows)
{
    for (int64_t r = 0; r < rows; r++)
        t->staging->idx[r] = begin + r;
    t->staging->rows = rows;
}

const int64_t *train_staged(const train_job *t, int64_t *rows)
{
    *rows = t->staging->rows;
    return t->staging->idx;
}

int train_stage_batch(train_job *t, const dataset *data, model_batch *b, ddp_err *err)
{
    device *d = t->dev;
    const struct train_staging *s = t->staging;
    const sample_layout *io = &t->m->io.sample;
    int64_t rows = s->rows;
    dataset_gather(data, s->idx, rows, s->inputs_host, s->targets_host, s->docs_host);
    int rc = d->ops->upload(d, s->inputs_dev, s->inputs_host, (size_t)rows * sample_field_bytes(io->input), err);
    if (rc == DDP_OK)
        rc = d->ops->upload(d, s->targets_dev, s->targets_host, (size_t)rows * sample_field_bytes(io->target), err);
    const bool packed = data->packed != NULL;
    if (rc == DDP_OK && packed)
        rc = d->ops->upload(d, s->docs_dev, s->docs_host, 2 * (size_t)rows * sample_field_bytes(io->input), err);
    *b = (model_batch){.inputs = s->inputs_dev, .targets = s->targets_dev, .rows = rows,
                       .docs = packed ? s->docs_dev : NULL};
    return rc;
}

int64_t train_steps_in(const train_job *t, int64_t micro_batches)
{
    return t->cfg->data.drop_last ? micro_batches / t->accum : (micro_batches + t->accum - 1) / t->accum;
}

int train_stage_count_step(train_job *t, int64_t *micro_batches, ddp_err *err)
{
    struct train_staging *s = t->staging;
    sampler ahead = t->smp; /* shares the epoch's order, which next_batch only reads */
    int64_t left = sampler_steps_left(&t->smp), micro = left < t->accum ? left : t->accum;
    *micro_batches = micro;
    s->step_rows = 0;
    int64_t *n = s->step_counts;
    n[0] = n[1] = 0;
    for (int64_t a = 0; a < micro; a++) {
        int64_t rows = sampler_next_batch(&ahead, s->idx);
        s->step_rows += rows;
        if (t->train.packed) {
            n[0] += dataset_targets(&t->train, s->idx, rows);
            n[1] += dataset_tokens(&t->train, s->idx, rows);
        }
    }
    if (!t->train.packed)
        return DDP_OK;
    snprintf(t->ctl->label, sizeof t->ctl->label, "the step's trainable targets and tokens");
    int rc = t->ctl->ops->allreduce(t->ctl, n, n, 2, DT_INT64, OP_SUM, NULL, err);
    t->ctl->label[0] = '\0';
    return rc;
}

float train_stage_grad_scale(const train_job *t)
{
    if (!t->train.packed)
        return 1.0f / ((float)t->staging->step_rows * (float)t->m->io.sample.target.count);
    const int64_t n = t->staging->step_counts[0];
    return n > 0 ? (float)((double)t->ctl->size / (double)n) : 0.0f;
}

double train_stage_step_terms(const train_job *t, int64_t rows)
{
    if (!t->train.packed)
        return (double)rows * (double)t->m->io.sample.target.count;
    return (double)t->staging->step_counts[0] / t->ctl->size;
}

double train_stage_step_tokens(const train_job *t, int64_t rows)
{
    if (!t->train.packed)
        return (double)rows * (double)t->m->io.sample.input.count;
    return (double)t->staging->step_counts[1] / t->ctl->size;
}

int train_params_changed(train_job *t, ddp_err *err)
{
    return train_zero_params_changed(t, err);
}

/* Floats [off, off + n) of rank 0's parameters into host: drawn from run.seed, or downloaded. */
static int fill_chunk(train_job *t, bool draw, size_t off, size_t n, float *host, ddp_err *err)
{
    model *m = t->m;
    if (!draw)
        return m->dev->ops->download(m->dev, host, m->params + off, n * sizeof *host, err);
    const param_piece piece = {.offset = off, .count = n, .at = 0};
    return model_init_params_pieces(m, t->cfg->run.seed, &piece, 1, host, NULL, err);
}

int train_host_chunk(size_t n, size_t *chunk, ddp_err *err)
{
    size_t limit = 0;
    int rc = max_chunk_read(&limit, err);
    *chunk = limit < TRAIN_HOST_CHUNK ? limit : TRAIN_HOST_CHUNK;
    *chunk = *chunk < n ? *chunk : n;
    return rc;
}

/* Rank 0's parameters, drawn (draw) or already on its device, onto every rank's device, chunk by
 * chunk (train_host_chunk); then the model is told they changed. */
static int share_params(train_job *t, bool draw, ddp_err *err)
{
    model *m = t->m;
    bool root = t->ctl->rank == 0, alone = t->ctl->size == 1;
    if (alone && !draw)
        return train_params_changed(t, err);
    size_t chunk = 0;
    int rc = train_host_chunk(m->n_params, &chunk, err);
    float *host = rc == DDP_OK ? malloc((chunk ? chunk : 1) * sizeof *host) : NULL;
    if (rc == DDP_OK && !host)
        rc = ddp_fail(err, DDP_ERUNTIME, "out of host memory for a chunk of %zu parameters", chunk);
    for (size_t off = 0; rc == DDP_OK && off < m->n_params; off += chunk) {
        size_t n = m->n_params - off < chunk ? m->n_params - off : chunk;
        if (root)
            rc = fill_chunk(t, draw, off, n, host, err);
        if (rc == DDP_OK && !alone)
            rc = t->ctl->ops->broadcast(t->ctl, host, n, DT_FLOAT, 0, NULL, err);
        if (rc == DDP_OK && (draw || !root)) /* rank 0's device has it already unless drawn */
            rc = m->dev->ops->upload(m->dev, m->params + off, host, n * sizeof *host, err);
    }
    free(host);
    return rc != DDP_OK ? rc : train_params_changed(t, err);
}

int train_draw_params(train_job *t, ddp_err *err)
{
    double t0 = monotonic_s();
    int64_t before = train_start_memory_mark();
    int rc = t->m->params_by_unit ? train_zero_draw_params(t, err) : share_params(t, true, err);
    if (rc == DDP_OK)
        rc = train_start_memory_log(t, "the initial draw", before, err);
    if (rc == DDP_OK)
        log_info("parameters: %zu drawn from run.seed %llu in %.1f s", t->m->n_params,
                 (unsigned long long)t->cfg->run.seed, monotonic_s() - t0);
    return rc;
}

int train_broadcast_params(train_job *t, ddp_err *err)
{
    return share_params(t, false, err);
}

int train_share_saved(train_job *t, train_chunk_fill fill, const void *ctx, ddp_err *err)
{
    const train_ckpt *c = t->ckpt;
    device *d = t->dev;
    size_t n = t->m->n_params, chunk = 0, n_state = t->opt->n_state;
    bool sharded = false;
    for (int b = 0; b < c->n_buffers; b++)
        sharded |= c->buffers[b].sharded;
    int rc = train_host_chunk(n, &chunk, err);
    float *buf = rc == DDP_OK ? malloc((chunk ? chunk : 1) * sizeof *buf) : NULL;
    float *shard = rc == DDP_OK && sharded ? calloc(n_state ? n_state : 1, sizeof *shard) : NULL; /* 0 in padding */
    if (rc == DDP_OK && (!buf || (sharded && !shard)))
        rc = ddp_fail_local(err, "out of host memory for a chunk of %zu floats%s", chunk, sharded ? " and a shard" : "");
    rc = train_agree(t, rc, "hold a chunk of the saved buffers on the host", err);
    int32_t local = DDP_OK;
    ddp_err why = {0};
    for (int b = 0; rc == DDP_OK && b < c->n_buffers; b++) {
        const saved_buffer *to = &c->buffers[b];
        for (size_t off = 0; rc == DDP_OK && off < n; off += chunk) {
            size_t k = n - off < chunk ? n - off : chunk;
            if (t->ctl->rank == 0)
                fill(t, ctx, b, off, k, buf);
            rc = t->ctl->ops->broadcast(t->ctl, buf, k, DT_FLOAT, 0, NULL, err);
            if (rc == DDP_OK && local == DDP_OK && to->sharded)
                train_zero_take_range(t, buf, off, k, shard);
            else if (rc == DDP_OK && local == DDP_OK)
                local = d->ops->upload(d, to->dev + off, buf, k * sizeof *buf, &why);
        }
        if (rc == DDP_OK && local == DDP_OK && to->sharded)
            local = d->ops->upload(d, to->dev, shard, n_state * sizeof *shard, &why);
    }
    free(buf);
    free(shard);
    if (rc != DDP_OK)
        return rc;
    if (local != DDP_OK)
        *err = why;
    return train_agree(t, local, "take up the saved buffers on its device", err);
}
