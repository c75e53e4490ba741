/* train_zero.c — ZeRO-1 and ZeRO-2 (ddp.zero: 1, 2) in the training job: the optimizer over this
 * rank's shard, its step, and moving the sharded optimizer state to and from the checkpoint's
 * global layout. ZeRO-2 differs only in where gradients live: the model has no whole gradient
 * buffer, the reducer's buckets are the model's units and the optimizer reads this rank's
 * gradient shard (reducer.h).
 *
 * The reducer cuts the gradient buckets into one block per rank and reduce-scatters them in
 * place (reducer.h); this file makes the optimizer update this rank's blocks only, with state for
 * those alone, and all-gathers each bucket's parameters as soon as its block is updated, while
 * the next block is. Clipping sees the same global norm as without ZeRO: each rank's sum of
 * squares is all-reduced before the clip factor is taken. Checkpoints keep the optimizer state
 * in the global layout (by parameter name and offset, as without ZeRO): rank 0 collects every
 * rank's blocks to save, and on resume each rank takes its blocks from the full state, so a job
 * resumes at any world size with ZeRO on or off. Must not decide when to save (train_ckpt.c) or
 * the order of a step (train.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_zero.h"

bool train_zero_on(const config *c, int world)
{
    return c->ddp.zero >= 1 && world > 1;
}

bool train_zero_units(const config *c, int world)
{
    return c->ddp.zero == 2 && world > 1;
}

bool train_zero_active(const train_job *t)
{
    return train_zero_on(t->cfg, t->ctl->size);
}

model_buffers train_zero_buffers(const config *c, int world)
{
    if (train_zero_units(c, world))
        return (model_buffers){.grads_by_unit = true};
    return (model_buffers){.param_tail = train_zero_on(c, world) ? (size_t)world - 1 : 0};
}

int train_zero_use_units(train_job *t, ddp_err *err)
{
    model *m = t->m;
    size_t *offs = malloc((size_t)m->n_units * sizeof *offs);
    if (!offs)
        return ddp_fail(err, DDP_ERUNTIME, "out of memory for %d unit offsets", m->n_units);
    for (int u = 0; u < m->n_units; u++)
        offs[u] = m->units[u].offset;
    int rc = reducer_use_zero_units(t->red, offs, m->n_units, m->params, t->dev, err);
    free(offs);
    if (rc == DDP_OK)
        model_set_grad_windows(m, reducer_unit_window, t->red);
    return rc;
}

const float *train_zero_grads(const train_job *t)
{
    return t->red->units ? t->red->shard_grads : t->m->grads;
}

/* Rank `rank`'s blocks as optimizer parts, in ascending parameter order (the reverse of the
 * buckets' reduction order): part k is bucket n_buckets - 1 - k. */
static void rank_parts(const reducer *r, int rank, optim_part *parts)
{
    for (int k = 0; k < r->n_buckets; k++) {
        optim_part *p = &parts[k];
        reducer_zero_part(r, r->n_buckets - 1 - k, rank, &p->param_offset, &p->state_offset, &p->count);
    }
}

int train_zero_optimizer(train_job *t, ddp_err *err)
{
    const reducer *r = t->red;
    optim_part *parts = malloc((size_t)r->n_buckets * sizeof *parts);
    if (!parts)
        return ddp_fail(err, DDP_ERUNTIME, "out of memory for %d optimizer parts", r->n_buckets);
    rank_parts(r, t->ctl->rank, parts);
    int rc = optim_create_parts(&t->cfg->optimizer, t->dev, t->m->n_params, parts, r->n_buckets, r->shard_n, &t->opt, err);
    free(parts);
    if (rc == DDP_OK && r->units)
        optim_grads_by_state(t->opt);
    return rc;
}

/* The global norm from every rank's sum of squares, and the clip factor from it, on the device. */
static int clip_scale(train_job *t, const float **scale, ddp_err *err)
{
    optimizer *o = t->opt;
    comm *c = t->grad_comm;
    int rc = optim_grad_sumsq(o, train_zero_grads(t), err);
    snprintf(c->label, sizeof c->label, "gradient norm");
    if (rc == DDP_OK)
        rc = c->ops->allreduce(c, o->grad_sumsq, o->grad_sumsq, 1, DT_DOUBLE, OP_SUM, NULL, err);
    c->label[0] = '\0';
    return rc == DDP_OK ? optim_clip_scale(o, scale, err) : rc;
}

int train_zero_step(train_job *t, double lr, ddp_err *err)
{
    optimizer *o = t->opt;
    reducer *r = t->red;
    const float *scale = NULL;
    int rc = o->grad_clip > 0 ? clip_scale(t, &scale, err) : DDP_OK;
    for (int k = 0; rc == DDP_OK && k < o->n_parts; k++) {
        rc = optim_update_part(o, k, t->m->params, train_zero_grads(t), lr, scale, err);
        if (rc == DDP_OK)
            rc = reducer_gather(r, r->n_buckets - 1 - k, err);
    }
    if (rc == DDP_OK)
        rc = reducer_gather_finish(r, err);
    if (rc == DDP_OK)
        optim_end_step(o);
    return rc;
}

/* Copies between a shard (its parts' state) and the global layout, in either direction. */
static void copy_parts(const optim_part *parts, int n, float *shard, float *global, bool to_global)
{
    for (int k = 0; k < n; k++) {
        float *s = shard + parts[k].state_offset, *g = global + parts[k].param_offset;
        size_t bytes = parts[k].count * sizeof(float);
        memmove(to_global ? g : s, to_global ? s : g, bytes);
    }
}

int train_zero_collect(train_job *t, const float *state, float *global, ddp_err *err)
{
    const reducer *r = t->red;
    comm *ctl = t->ctl;
    size_t n = r->shard_n;
    float *mine = malloc(n * sizeof *mine), *theirs = malloc(n * sizeof *theirs);
    optim_part *parts = malloc((size_t)r->n_buckets * sizeof *parts);
    int rc = mine && theirs && parts ? DDP_OK
                                     : ddp_fail(err, DDP_ERUNTIME, "out of memory collecting %zu state floats", n);
    if (rc == DDP_OK)
        rc = t->dev->ops->download(t->dev, mine, state, n * sizeof *mine, err);
    if (rc == DDP_OK && ctl->rank == 0) {
        rank_parts(r, 0, parts);
        copy_parts(parts, r->n_buckets, mine, global, true);
    }
    /* rank 0 receives each rank's shard in turn (and sends its own back, which is dropped) */
    for (int from = 1; rc == DDP_OK && from < ctl->size; from++) {
        if (ctl->rank != 0 && ctl->rank != from)
            continue;
        int peer = ctl->rank == 0 ? from : 0;
        rc = ctl->ops->sendrecv(ctl, mine, peer, theirs, peer, n, DT_FLOAT, NULL, err);
        if (rc == DDP_OK && ctl->rank == 0) {
            rank_parts(r, from, parts);
            copy_parts(parts, r->n_buckets, theirs, global, true);
        }
    }
    free(mine);
    free(theirs);
    free(parts);
    return rc;
}

int train_zero_distribute(train_job *t, const float *global, float *state, ddp_err *err)
{
    const optimizer *o = t->opt;
    float *mine = calloc(o->n_state, sizeof *mine);
    if (!mine)
        return ddp_fail(err, DDP_ERUNTIME, "out of memory for %zu state floats", o->n_state);
    copy_parts(o->parts, o->n_parts, mine, (float *)global, false);
    int rc = t->dev->ops->upload(t->dev, state, mine, o->n_state * sizeof *mine, err);
    free(mine);
    return rc;
}
