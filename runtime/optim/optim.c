/* optim.c — SGD (momentum, Nesterov, weight decay) and AdamW over the flat parameter buffer,
 * learning-rate schedules, and clipping by global gradient norm, with torch.optim semantics.
 *
 * The per-element arithmetic is a device op (sgd_step / adamw_step); this file holds the state
 * buffers, the step count, and the host-side scalar decisions (learning rate, AdamW's bias
 * corrections and decay, computed here once for both backends). The clip factor depends on the
 * gradients, so it is computed where they are: device ops (sumsq, clip_scale) write the norm and
 * the factor into two device scalars this file owns and the update reads the factor from there;
 * only optim_read_grad_norm brings the norm to the host. It must not communicate: the gradients
 * it sees are already averaged across ranks. */
#include "optim.h"

#include <math.h>
#include <stdlib.h>

static int alloc_zeroed(device *d, size_t n, float **out, ddp_err *err)
{
    void *p = NULL;
    int rc = d->ops->alloc(d, n * sizeof(float), &p, err);
    if (!rc)
        rc = d->ops->fill(d, TENSOR_F32, p, n, 0.0f, err);
    if (rc) {
        if (p)
            d->ops->free(d, p);
        return ddp_prefix(err, "optimizer state (%zu floats)", n);
    }
    *out = p;
    return DDP_OK;
}

/* The norm's and the clip factor's device scalars: sum of squares 0 (the sum of nothing, read as
 * norm 0 before the first optim_grad_norm) and factor 1. */
static int alloc_norm_scalars(optimizer *o, ddp_err *err)
{
    device *d = o->dev;
    int rc = d->ops->alloc(d, sizeof *o->grad_sumsq, (void **)&o->grad_sumsq, err);
    if (!rc)
        rc = d->ops->alloc(d, sizeof *o->clip_scale, (void **)&o->clip_scale, err);
    const double zero = 0.0;
    if (!rc)
        rc = d->ops->upload(d, o->grad_sumsq, &zero, sizeof zero, err);
    if (!rc)
        rc = d->ops->fill(d, TENSOR_F32, o->clip_scale, 1, 1.0f, err);
    return rc ? ddp_prefix(err, "optimizer: gradient norm scalars") : DDP_OK;
}

int optim_create(const config *cfg, device *dev, size_t n, optimizer **out, ddp_err *err)
{
    optimizer *o = calloc(1, sizeof *o);
    if (!o)
        return ddp_fail(err, DDP_ERUNTIME, "optimizer: out of host memory");
    o->kind = cfg->optimizer.kind;
    o->dev = dev;
    o->n = n;
    o->lr = cfg->optimizer.lr;
    o->weight_decay = cfg->optimizer.weight_decay;
    o->beta1 = cfg->optimizer.beta1;
    o->beta2 = cfg->optimizer.beta2;
    o->eps = cfg->optimizer.eps;
    o->momentum = cfg->optimizer.momentum;
    o->grad_clip = cfg->optimizer.grad_clip;
    o->nesterov = cfg->optimizer.nesterov;
    o->sched = cfg->optimizer.schedule.kind;
    o->warmup_steps = cfg->optimizer.schedule.warmup_steps;
    o->min_lr = cfg->optimizer.schedule.min_lr;
    /* SGD keeps a momentum buffer even at momentum 0 so checkpoints have one layout per kind */
    o->runs = malloc(sizeof *o->runs);
    if (!o->runs) {
        free(o);
        return ddp_fail(err, DDP_ERUNTIME, "optimizer: out of host memory");
    }
    o->runs[0] = (optim_span){0, n};
    o->n_runs = 1;
    o->decay_first = true;
    int rc = alloc_zeroed(dev, n, o->kind == OPT_SGD ? &o->momentum_buffer : &o->exp_avg, err);
    if (!rc && o->kind == OPT_ADAMW)
        rc = alloc_zeroed(dev, n, &o->exp_avg_sq, err);
    if (!rc)
        rc = alloc_norm_scalars(o, err);
    if (rc) {
        optim_destroy(o);
        return rc;
    }
    *out = o;
    return DDP_OK;
}

void optim_destroy(optimizer *o)
{
    if (!o)
        return;
    if (o->momentum_buffer)
        o->dev->ops->free(o->dev, o->momentum_buffer);
    if (o->exp_avg)
        o->dev->ops->free(o->dev, o->exp_avg);
    if (o->exp_avg_sq)
        o->dev->ops->free(o->dev, o->exp_avg_sq);
    o->dev->ops->free(o->dev, o->grad_sumsq);
    o->dev->ops->free(o->dev, o->clip_scale);
    free(o->runs);
    free(o);
}

double optim_lr_at(const optimizer *o, int64_t step, int64_t total_steps)
{
    if (step < 0)
        step = 0;
    if (o->warmup_steps > 0 && step < o->warmup_steps)
        return o->lr * (double)(step + 1) / (double)o->warmup_steps;
    if (o->sched == SCHED_CONSTANT)
        return o->lr;
    int64_t decay_steps = total_steps - o->warmup_steps;
    double progress = decay_steps > 0 ? (double)(step - o->warmup_steps) / (double)decay_steps : 1.0;
    if (progress > 1.0)
        progress = 1.0;
    return o->min_lr + 0.5 * (o->lr - o->min_lr) * (1.0 + cos(M_PI * progress));
}

int optim_grad_norm(optimizer *o, const float *grads, const float **scale, ddp_err *err)
{
    *scale = NULL;
    device *d = o->dev;
    int rc = d->ops->sumsq(d, grads, o->n, o->grad_sumsq, err);
    /* torch.nn.utils.clip_grad_norm_: the device op applies max_norm / (norm + 1e-6) only below
     * 1; a non-finite norm gives a factor of 0 or NaN, as in PyTorch: the caller decides. */
    if (!rc && o->grad_clip > 0.0) {
        rc = d->ops->clip_scale(d, o->grad_sumsq, o->grad_clip, o->clip_scale, err);
        *scale = o->clip_scale;
    }
    return rc ? ddp_prefix(err, "gradient norm") : DDP_OK;
}

int optim_read_grad_norm(optimizer *o, double *norm, ddp_err *err)
{
    double sumsq = 0.0;
    int rc = o->dev->ops->download(o->dev, &sumsq, o->grad_sumsq, sizeof sumsq, err);
    if (rc)
        return ddp_prefix(err, "reading the gradient norm");
    *norm = sqrt(sumsq);
    return DDP_OK;
}

int optim_set_no_decay(optimizer *o, const optim_span *spans, int n_spans, ddp_err *err)
{
    optim_span *runs = malloc((2 * (size_t)n_spans + 1) * sizeof *runs);
    if (!runs)
        return ddp_fail(err, DDP_ERUNTIME, "optimizer: out of host memory");
    int n = 0;
    bool decaying = true, first_decays = true;
    size_t pos = 0;
    /* walk [0, o->n), closing a run at every change between decayed and exempt */
    for (int i = 0; i <= n_spans; i++) {
        size_t start = i < n_spans ? spans[i].offset : o->n, end = i < n_spans ? start + spans[i].count : o->n;
        if (start < pos || end > o->n) {
            free(runs);
            return ddp_fail(err, DDP_ERUNTIME, "optimizer: no-decay span [%zu, %zu) is out of order or outside "
                            "[0, %zu)", start, end, o->n);
        }
        for (int part = 0; part < 2; part++) { /* the decayed gap, then the exempt span */
            size_t a = part ? start : pos, b = part ? end : start;
            bool decays = part == 0;
            if (a == b)
                continue;
            if (n > 0 && decays == decaying)
                runs[n - 1].count += b - a;
            else {
                if (n == 0)
                    first_decays = decays;
                runs[n++] = (optim_span){a, b - a};
                decaying = decays;
            }
        }
        pos = end;
    }
    free(o->runs);
    o->runs = runs;
    o->n_runs = n;
    o->decay_first = first_decays;
    return DDP_OK;
}

/* torch.optim.AdamW computes these in double and applies them to float32 tensors. */
adamw_args optim_adamw_args(float lr, float beta1, float beta2, float eps, float weight_decay, int64_t step)
{
    const double lr_d = lr, b1 = beta1, b2 = beta2;
    return (adamw_args){
        .beta1 = beta1,
        .beta2 = beta2,
        .eps = eps,
        .one_minus_beta1 = (float)(1.0 - b1),
        .one_minus_beta2 = (float)(1.0 - b2),
        .decay = (float)(1.0 - lr_d * (double)weight_decay),
        .step_size = (float)(lr_d / (1.0 - pow(b1, (double)step))),
        .bias2_sqrt = (float)sqrt(1.0 - pow(b2, (double)step)),
    };
}

/* One update of the elements in r, with weight decay wd. */
static int step_run(optimizer *o, optim_span r, float *params, const float *grads, double lr,
                    const float *grad_scale, double wd, ddp_err *err)
{
    size_t at = r.offset;
    if (o->kind == OPT_SGD) {
        sgd_args a = {
            .lr = (float)lr,
            .momentum = (float)o->momentum,
            .weight_decay = (float)wd,
            .nesterov = o->nesterov,
            .first_step = o->step == 0,
        };
        return o->dev->ops->sgd_step(o->dev, params + at, grads + at, grad_scale, o->momentum_buffer + at, r.count,
                                     &a, err);
    }
    adamw_args a = optim_adamw_args((float)lr, (float)o->beta1, (float)o->beta2, (float)o->eps, (float)wd,
                                    o->step + 1);
    return o->dev->ops->adamw_step(o->dev, params + at, grads + at, grad_scale, o->exp_avg + at, o->exp_avg_sq + at,
                                   r.count, &a, err);
}

int optim_step(optimizer *o, float *params, const float *grads, double lr, const float *grad_scale, ddp_err *err)
{
    int rc = DDP_OK;
    for (int i = 0; !rc && i < o->n_runs; i++) {
        bool decays = o->decay_first == (i % 2 == 0);
        rc = step_run(o, o->runs[i], params, grads, lr, grad_scale, decays ? o->weight_decay : 0.0, err);
    }
    if (rc)
        return ddp_prefix(err, "optimizer step %lld", (long long)(o->step + 1));
    o->step++;
    return DDP_OK;
}
