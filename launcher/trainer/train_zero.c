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

#include "collectives/param_gather.h"
#include "models/model_files.h"
#include "runtime/base/dirs.h"
#include "runtime/base/log.h"
#include "train_agree.h"
#include "train_zero.h"

/* ZeRO-3's own state: this rank's parameter shard, laid out as the optimizer's state. */
typedef struct train_zero {
    float *params;          /* the fp32 master shard, n_state floats */
    uint16_t *params_bf16;  /* its bf16 copy under precision bf16 (what is gathered), else NULL */
    param_gather *gather;   /* the model's windows */
} train_zero;

bool train_zero_on(const config *c, int world)
{
    return c->ddp.zero >= 1 && world > 1;
}

bool train_zero_units(const config *c, int world)
{
    return c->ddp.zero >= 2 && world > 1;
}

bool train_zero_sharded_params(const config *c, int world)
{
    return c->ddp.zero == 3 && world > 1;
}

bool train_zero_active(const train_job *t)
{
    return train_zero_on(t->cfg, t->ctl->size);
}

model_buffers train_zero_buffers(const config *c, int world)
{
    if (train_zero_units(c, world))
        return (model_buffers){.grads_by_unit = true, .params_by_unit = train_zero_sharded_params(c, world)};
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
        rc = optim_update_part(o, k, train_zero_params(t, &(size_t){0}), train_zero_grads(t), lr, scale, err);
        if (rc == DDP_OK && !t->zero) /* ZeRO-3's next forward gathers */
            rc = reducer_gather(r, r->n_buckets - 1 - k, err);
    }
    if (rc == DDP_OK)
        rc = reducer_gather_finish(r, err);
    if (rc == DDP_OK)
        optim_end_step(o);
    return rc;
}

/* A shard's parts (their state) copied to their places in the global layout. */
static void place_parts(const optim_part *parts, int n, const float *shard, float *global)
{
    for (int k = 0; k < n; k++)
        memcpy(global + parts[k].param_offset, shard + parts[k].state_offset, parts[k].count * sizeof(float));
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
        place_parts(parts, r->n_buckets, mine, global);
    }
    /* rank 0 receives each rank's shard in turn (and sends its own back, which is dropped) */
    for (int from = 1; rc == DDP_OK && from < ctl->size; from++) {
        if (ctl->rank != 0 && ctl->rank != from)
            continue;
        int peer = ctl->rank == 0 ? from : 0;
        rc = ctl->ops->sendrecv(ctl, mine, peer, theirs, peer, n, DT_FLOAT, NULL, err);
        if (rc == DDP_OK && ctl->rank == 0) {
            rank_parts(r, from, parts);
            place_parts(parts, r->n_buckets, theirs, global);
        }
    }
    free(mine);
    free(theirs);
    free(parts);
    return rc;
}

void train_zero_take_range(const train_job *t, const float *chunk, size_t off, size_t n, float *shard)
{
    const optimizer *o = t->opt;
    for (int k = 0; k < o->n_parts; k++) {
        const optim_part *p = &o->parts[k];
        size_t lo = p->param_offset > off ? p->param_offset : off;
        size_t hi = p->param_offset + p->count < off + n ? p->param_offset + p->count : off + n;
        if (lo < hi)
            memcpy(shard + p->state_offset + (lo - p->param_offset), chunk + (lo - off), (hi - lo) * sizeof(float));
    }
}

/* ---- ZeRO-3 ------------------------------------------------------------------------------- */

float *train_zero_params(const train_job *t, size_t *n)
{
    *n = t->zero ? t->opt->n_state : t->m->n_params;
    return t->zero ? t->zero->params : t->m->params;
}

/* The bf16 copy of the shard, part by part with each element's global offset: the bits the whole
 * model's copy has (cast_f32_to_bf16_stochastic keys its rounding by the element). */
static int cast_shard(train_job *t, ddp_err *err)
{
    const optimizer *o = t->opt;
    train_zero *z = t->zero;
    int rc = DDP_OK;
    for (int k = 0; rc == DDP_OK && z->params_bf16 && k < o->n_parts; k++) {
        const optim_part *p = &o->parts[k];
        if (p->count > 0)
            rc = t->dev->ops->cast_f32_to_bf16_stochastic(t->dev, z->params + p->state_offset,
                                                          z->params_bf16 + p->state_offset, p->count,
                                                          t->cfg->run.seed, (uint64_t)o->step, p->param_offset, err);
    }
    return rc;
}

int train_zero_params_changed(train_job *t, ddp_err *err)
{
    if (!t->zero)
        return model_params_changed(t->m, t->cfg->run.seed, t->opt ? (uint64_t)t->opt->step : 0, err);
    int rc = cast_shard(t, err);
    if (rc == DDP_OK)
        rc = param_gather_invalidate(t->zero->gather, err);
    return rc ? ddp_prefix(err, "ZeRO-3 parameter shard") : DDP_OK;
}

static train_zero *zero_state(train_job *t)
{
    if (!t->zero)
        t->zero = calloc(1, sizeof *t->zero);
    return t->zero;
}

int train_zero_pieces(const train_job *t, param_piece **out, int *n, ddp_err *err)
{
    const optimizer *o = t->opt;
    *n = 0;
    *out = malloc(((size_t)o->n_parts + 1) * sizeof **out);
    if (!*out)
        return ddp_fail(err, DDP_ERUNTIME, "out of memory for %d parts", o->n_parts);
    for (int k = 0; k < o->n_parts; k++)
        if (o->parts[k].count > 0)
            (*out)[(*n)++] = (param_piece){o->parts[k].param_offset, o->parts[k].count, o->parts[k].state_offset};
    return DDP_OK;
}

/* Every rank's draw the same (rank 0's digest everyone's): a rank built or seeded otherwise would
 * hold pieces of another model, which no broadcast corrects under ZeRO-3. */
static int check_same_draw(train_job *t, uint64_t digest, ddp_err *err)
{
    uint64_t mine[2] = {digest, ~digest}, most[2]; /* one maximum gives both ends: ~max(~d) = min(d) */
    comm *c = t->ctl;
    int rc = c->ops->allreduce(c, mine, most, 2, DT_UINT64, OP_MAX, NULL, err);
    uint64_t hi = most[0], lo = ~most[1];
    if (rc == DDP_OK && lo != hi)
        rc = ddp_fail(err, DDP_ERUNTIME, "ZeRO-3: the ranks drew different initial parameters from run.seed %llu "
                      "(this rank's digest %016llx, others' %016llx): ranks of another build?",
                      (unsigned long long)t->cfg->run.seed, (unsigned long long)digest,
                      (unsigned long long)(digest == lo ? hi : lo));
    return rc;
}

/* The initial parameters' pieces this rank keeps, drawn into a host copy of the shard. */
static int draw_shard(train_job *t, ddp_err *err)
{
    size_t n = t->opt->n_state;
    float *host = calloc(n ? n : 1, sizeof *host);
    param_piece *pieces = NULL;
    int n_pieces = 0;
    uint64_t digest = 0;
    int rc = host ? train_zero_pieces(t, &pieces, &n_pieces, err)
                  : ddp_fail(err, DDP_ERUNTIME, "out of host memory for %zu initial parameters", n);
    if (rc == DDP_OK)
        rc = model_init_params_pieces(t->m, t->cfg->run.seed, pieces, n_pieces, host, &digest, err);
    if (rc == DDP_OK)
        rc = check_same_draw(t, digest, err);
    if (rc == DDP_OK)
        rc = t->dev->ops->upload(t->dev, t->zero->params, host, n * sizeof *host, err);
    free(pieces);
    free(host);
    return rc;
}

int train_zero_draw_params(train_job *t, ddp_err *err)
{
    int rc = draw_shard(t, err);
    return rc == DDP_OK ? train_zero_params_changed(t, err) : rc;
}

int train_zero_init_from_folder(train_job *t, const char *dir, ddp_err *err)
{
    const model_files *f = model_files_of(t->cfg->model.kind);
    size_t n = t->opt->n_state;
    float *host = calloc(n ? n : 1, sizeof *host);
    param_piece *pieces = NULL;
    int n_pieces = 0;
    int32_t mine = !f ? ddp_fail(err, DDP_EUSAGE, "this model.kind starts from no Hugging Face folder")
                 : !path_is_dir(dir) ? ddp_fail(err, DDP_EUSAGE, "%s is a folder where rank 0 runs but not on this "
                                                "rank's host: under ZeRO-3 every rank reads its own pieces of it, so "
                                                "every host needs it (or a filesystem they share)", dir)
                 : host ? train_zero_pieces(t, &pieces, &n_pieces, err)
                        : ddp_fail(err, DDP_ERUNTIME, "out of host memory for %zu parameters", n);
    if (mine == DDP_OK)
        mine = f->hf_load_pieces(t->m, dir, pieces, n_pieces, host, err);
    if (mine != DDP_OK)
        ddp_prefix(err, "checkpoint.init_from");
    char what[CFG_PATH_MAX + 64];
    snprintf(what, sizeof what, "load its pieces of checkpoint.init_from %s", dir);
    int rc = train_agree(t, mine, what, err);
    if (rc == DDP_OK)
        rc = t->dev->ops->upload(t->dev, t->zero->params, host, n * sizeof *host, err);
    free(pieces);
    free(host);
    return rc == DDP_OK ? train_zero_params_changed(t, err) : rc;
}

/* This rank's parts of the whole parameters on the device into the shard. */
static int take_shard(train_job *t, const float *whole, ddp_err *err)
{
    const optimizer *o = t->opt;
    device *d = t->dev;
    int rc = d->ops->fill(d, TENSOR_F32, t->zero->params, o->n_state, 0.0f, err);
    for (int k = 0; rc == DDP_OK && k < o->n_parts; k++) {
        const optim_part *p = &o->parts[k];
        if (p->count > 0)
            rc = d->ops->copy(d, t->zero->params + p->state_offset, whole + p->param_offset, p->count * sizeof(float),
                              err);
    }
    return rc;
}

int train_zero_unshard_params(train_job *t, ddp_err *err)
{
    model *m = t->m;
    int rc = m->dev->ops->alloc(m->dev, m->n_params * sizeof(float), (void **)&m->params, err);
    return rc ? ddp_prefix(err, "ZeRO-3: the whole model's %zu parameters for checkpoint.init_from", m->n_params)
              : DDP_OK;
}

int train_zero_reshard_params(train_job *t, ddp_err *err)
{
    model *m = t->m;
    int rc = take_shard(t, m->params, err);
    m->dev->ops->free(m->dev, m->params);
    m->params = NULL;
    return rc == DDP_OK ? train_zero_params_changed(t, err) : rc;
}

int train_zero_shard_params(train_job *t, ddp_err *err)
{
    if (!t->m->params_by_unit)
        return DDP_OK;
    device *d = t->dev;
    size_t n = t->opt->n_state;
    bool bf16 = t->m->act_dtype == TENSOR_BF16;
    train_zero *z = zero_state(t);
    if (!z)
        return ddp_fail(err, DDP_ERUNTIME, "out of memory");
    int rc = d->ops->alloc(d, n * sizeof(float), (void **)&z->params, err);
    if (rc == DDP_OK && bf16)
        rc = d->ops->alloc(d, n * sizeof(uint16_t), (void **)&z->params_bf16, err);
    if (rc == DDP_OK)
        rc = d->ops->fill(d, TENSOR_F32, z->params, n, 0.0f, err); /* until a resume or a fresh start fills it */
    if (rc == DDP_OK)
        rc = param_gather_create(t->red, d, t->m->act_dtype,
                                 bf16 ? (const void *)z->params_bf16 : (const void *)z->params, &z->gather, err);
    if (rc == DDP_OK)
        rc = cast_shard(t, err);
    if (rc != DDP_OK)
        return ddp_prefix(err, "ZeRO-3: this rank's parameter shard of %zu floats", n);
    optim_params_by_state(t->opt);
    model_set_param_windows(t->m, param_gather_window, z->gather);
    return DDP_OK;
}

int train_zero_check_windows(train_job *t, ddp_err *err)
{
    return t->zero ? param_gather_status(t->zero->gather, err) : DDP_OK;
}

void train_zero_abandon(train_job *t)
{
    if (t->zero)
        param_gather_abandon(t->zero->gather);
}

void train_zero_close(train_job *t)
{
    train_zero *z = t->zero;
    if (!z)
        return;
    param_gather_destroy(z->gather);
    if (z->params)
        t->dev->ops->free(t->dev, z->params);
    if (z->params_bf16)
        t->dev->ops->free(t->dev, z->params_bf16);
    free(z);
    t->zero = NULL;
}
