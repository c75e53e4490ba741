/* optim.c — SGD (momentum, Nesterov, weight decay) and AdamW over the flat parameter buffer,
 * learning-rate schedules, and clipping by global gradient norm, with torch.optim semantics.
 *
 * The per-element arithmetic is a device op (sgd_step / adamw_step); this file holds the state
 * buffers, the step count, and the host-side scalar decisions (learning rate, AdamW's bias
 * corrections and decay, computed here once for both backends). The clip factor depends on the
 * gradients, so it is computed where they are: device ops (sumsq, clip_scale) write the norm and
 * the factor into two device scalars this file owns and the update reads the factor from there;
 * only optim_read_grad_norm brings the norm to the host. One update covers a part (the whole
 * model unless ZeRO gave it several), whatever its tensors' weight decay: the spans exempt from
 * it live in a device table the update reads. Under ZeRO it updates the parts it was given, with
 * state for those alone. It must not communicate: the gradients it sees are already averaged
 * across ranks. */
#include "optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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

static void free_state(optimizer *o)
{
    float **state[] = {&o->momentum_buffer, &o->exp_avg, &o->exp_avg_sq};
    for (size_t i = 0; i < sizeof state / sizeof state[0]; i++) {
        if (*state[i])
            o->dev->ops->free(o->dev, *state[i]);
        *state[i] = NULL;
    }
}

static int set_parts(optimizer *o, const optim_part *parts, int n_parts, size_t n_state, ddp_err *err)
{
    for (int i = 0; i < n_parts; i++) {
        const optim_part *p = &parts[i];
        bool after_previous = i == 0 || p->param_offset >= parts[i - 1].param_offset + parts[i - 1].count;
        if (!after_previous || p->param_offset + p->count > o->n || p->state_offset + p->count > n_state)
            return ddp_fail(err, DDP_ERUNTIME, "optimizer: part %d (parameters [%zu, +%zu), state at %zu) is out of "
                            "order or outside %zu parameters / %zu state elements", i, p->param_offset, p->count,
                            p->state_offset, o->n, n_state);
    }
    optim_part *copy = malloc((size_t)(n_parts > 0 ? n_parts : 1) * sizeof *copy);
    if (!copy)
        return ddp_fail(err, DDP_ERUNTIME, "optimizer: out of host memory");
    memcpy(copy, parts, (size_t)n_parts * sizeof *copy);
    o->parts = copy;
    o->n_parts = n_parts;
    o->n_state = n_state;
    if (n_parts > 1) {
        int rc = o->dev->ops->alloc(o->dev, (size_t)n_parts * sizeof(double), (void **)&o->part_sumsq, err);
        if (rc)
            return ddp_prefix(err, "optimizer: %d parts' gradient norms", n_parts);
    }
    /* SGD keeps a momentum buffer even at momentum 0 so checkpoints have one layout per kind */
    int rc = alloc_zeroed(o->dev, n_state, o->kind == OPT_SGD ? &o->momentum_buffer : &o->exp_avg, err);
    if (!rc && o->kind == OPT_ADAMW)
        rc = alloc_zeroed(o->dev, n_state, &o->exp_avg_sq, err);
    return rc;
}

int optim_create(const optim_opts *opts, device *dev, size_t n, optimizer **out, ddp_err *err)
{
    const optim_part all = {0, 0, n};
    return optim_create_parts(opts, dev, n, &all, 1, n, out, err);
}

int optim_create_parts(const optim_opts *opts, device *dev, size_t n, const optim_part *parts, int n_parts, size_t n_state,
                       optimizer **out, ddp_err *err)
{
    optimizer *o = calloc(1, sizeof *o);
    if (!o)
        return ddp_fail(err, DDP_ERUNTIME, "optimizer: out of host memory");
    o->kind = opts->kind;
    o->dev = dev;
    o->n = n;
    o->lr = opts->lr;
    o->weight_decay = opts->weight_decay;
    o->beta1 = opts->beta1;
    o->beta2 = opts->beta2;
    o->eps = opts->eps;
    o->momentum = opts->momentum;
    o->grad_clip = opts->grad_clip;
    o->nesterov = opts->nesterov;
    o->sched = opts->schedule.kind;
    o->warmup_steps = opts->schedule.warmup_steps;
    o->min_lr = opts->schedule.min_lr;
    o->decay_fraction = opts->schedule.decay_fraction;
    int rc = alloc_norm_scalars(o, err);
    if (!rc)
        rc = set_parts(o, parts, n_parts, n_state, err);
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
    free_state(o);
    if (o->grad_sumsq)
        o->dev->ops->free(o->dev, o->grad_sumsq);
    if (o->clip_scale)
        o->dev->ops->free(o->dev, o->clip_scale);
    if (o->part_sumsq)
        o->dev->ops->free(o->dev, o->part_sumsq);
    if (o->exempt_bounds)
        o->dev->ops->free(o->dev, o->exempt_bounds);
    free(o->parts);
    free(o);
}

double optim_decay_window(sched_kind kind, int64_t warmup_steps, double decay_fraction, int64_t total_steps,
                          double *start)
{
    double decay_steps = (double)(total_steps - warmup_steps);
    *start = (double)warmup_steps;
    if (kind == SCHED_WSD) {
        *start += decay_steps * (1.0 - decay_fraction);
        decay_steps *= decay_fraction;
    }
    return decay_steps;
}

double optim_lr_at(const optimizer *o, int64_t step, int64_t total_steps)
{
    if (step < 0)
        step = 0;
    if (o->warmup_steps > 0 && step < o->warmup_steps)
        return o->lr * (double)(step + 1) / (double)o->warmup_steps;
    if (o->sched == SCHED_CONSTANT)
        return o->lr;
    double start, decay_steps = optim_decay_window(o->sched, o->warmup_steps, o->decay_fraction, total_steps, &start);
    double progress = decay_steps > 0 ? ((double)step - start) / decay_steps : 1.0;
    if (o->sched == SCHED_WSD && progress <= 0.0) /* the stable part: the peak itself */
        return o->lr;
    if (progress > 1.0)
        progress = 1.0;
    if (o->sched == SCHED_COSINE)
        return o->min_lr + 0.5 * (o->lr - o->min_lr) * (1.0 + cos(M_PI * progress));
    return o->min_lr + (o->lr - o->min_lr) * (1.0 - progress);
}

/* One part: straight into grad_sumsq. Several: each into its slot, then their sum (the order is
 * fixed, so every step sums alike). */
int optim_grad_sumsq(optimizer *o, const float *grads, ddp_err *err)
{
    device *d = o->dev;
    int rc = DDP_OK;
    for (int k = 0; !rc && k < o->n_parts; k++) {
        const optim_part *p = &o->parts[k];
        size_t g_at = o->grads_by_state ? p->state_offset : p->param_offset;
        rc = d->ops->sumsq(d, grads + g_at, p->count, o->n_parts > 1 ? o->part_sumsq + k : o->grad_sumsq, err);
    }
    if (!rc && o->n_parts > 1)
        rc = d->ops->sum_f64(d, o->part_sumsq, (size_t)o->n_parts, o->grad_sumsq, err);
    return rc ? ddp_prefix(err, "gradient norm") : DDP_OK;
}

int optim_clip_scale(optimizer *o, const float **scale, ddp_err *err)
{
    *scale = NULL;
    if (o->grad_clip <= 0.0)
        return DDP_OK;
    /* torch.nn.utils.clip_grad_norm_: the device op applies max_norm / (norm + 1e-6) only below
     * 1; a non-finite norm gives a factor of 0 or NaN, as in PyTorch: the caller decides. */
    int rc = o->dev->ops->clip_scale(o->dev, o->grad_sumsq, o->grad_clip, o->clip_scale, err);
    *scale = o->clip_scale;
    return rc ? ddp_prefix(err, "gradient clip factor") : DDP_OK;
}

int optim_grad_norm(optimizer *o, const float *grads, const float **scale, ddp_err *err)
{
    *scale = NULL;
    int rc = optim_grad_sumsq(o, grads, err);
    return rc ? rc : optim_clip_scale(o, scale, err);
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

/* The exempt spans as ascending [start, end) bounds, adjacent spans merged (a zero-length span
 * adds nothing); *n_out bounds into out (room for 2 * n_spans). */
static int exempt_bounds(const optimizer *o, const optim_span *spans, int n_spans, size_t *out, size_t *n_out,
                         ddp_err *err)
{
    size_t n = 0, pos = 0;
    for (int i = 0; i < n_spans; i++) {
        size_t start = spans[i].offset, end = start + spans[i].count;
        if (start < pos || end < start || end > o->n)
            return ddp_fail(err, DDP_ERUNTIME, "optimizer: no-decay span [%zu, %zu) is out of order or outside "
                            "[0, %zu)", start, end, o->n);
        pos = end;
        if (start == end)
            continue;
        if (n > 0 && out[n - 1] == start)
            out[n - 1] = end;
        else {
            out[n++] = start;
            out[n++] = end;
        }
    }
    *n_out = n;
    return DDP_OK;
}

int optim_set_no_decay(optimizer *o, const optim_span *spans, int n_spans, ddp_err *err)
{
    device *d = o->dev;
    size_t *host = malloc((2 * (size_t)n_spans + 1) * sizeof *host), n = 0;
    if (!host)
        return ddp_fail(err, DDP_ERUNTIME, "optimizer: out of host memory");
    int rc = exempt_bounds(o, spans, n_spans, host, &n, err);
    size_t *dev_bounds = NULL;
    if (!rc && n > 0)
        rc = d->ops->alloc(d, n * sizeof *host, (void **)&dev_bounds, err);
    if (!rc && n > 0)
        rc = d->ops->upload(d, dev_bounds, host, n * sizeof *host, err);
    free(host);
    if (rc) {
        d->ops->free(d, dev_bounds);
        return ddp_prefix(err, "optimizer: the %zu bounds of the spans without weight decay", n);
    }
    d->ops->free(d, o->exempt_bounds);
    o->exempt_bounds = dev_bounds;
    o->n_exempt_bounds = n;
    return DDP_OK;
}

/* torch.optim.AdamW computes these in double from the hyperparameters as given (Python floats)
 * and applies them to float32 tensors. */
adamw_args optim_adamw_args(double lr, double beta1, double beta2, double eps, double weight_decay, int64_t step)
{
    return (adamw_args){
        .beta1 = (float)beta1,
        .beta2 = (float)beta2,
        .eps = (float)eps,
        .one_minus_beta1 = (float)(1.0 - beta1),
        .one_minus_beta2 = (float)(1.0 - beta2),
        .decay = (float)(1.0 - lr * weight_decay),
        .step_size = (float)(lr / (1.0 - pow(beta1, (double)step))),
        .bias2_sqrt = (float)sqrt(1.0 - pow(beta2, (double)step)),
    };
}

/* One update of a part: its count parameters (and gradients) at param_offset, their state at
 * state_offset, each element's weight decay looked up in the exemption table on the device. */
int optim_update_part(optimizer *o, int part, float *params, const float *grads, double lr, const float *grad_scale,
                      ddp_err *err)
{
    const optim_part *pt = &o->parts[part];
    const size_t s_at = pt->state_offset, g_at = o->grads_by_state ? s_at : pt->param_offset;
    const size_t p_at = o->params_by_state ? s_at : pt->param_offset;
    const decay_exempt exempt = {.bounds = o->exempt_bounds, .n_bounds = o->n_exempt_bounds, .first = pt->param_offset};
    int rc;
    if (o->kind == OPT_SGD) {
        sgd_args a = {
            .lr = (float)lr,
            .momentum = (float)o->momentum,
            .weight_decay = (float)o->weight_decay,
            .nesterov = o->nesterov,
            .first_step = o->step == 0,
            .exempt = exempt,
        };
        rc = o->dev->ops->sgd_step(o->dev, params + p_at, grads + g_at, grad_scale, o->momentum_buffer + s_at,
                                   pt->count, &a, err);
    } else {
        adamw_args a = optim_adamw_args(lr, o->beta1, o->beta2, o->eps, o->weight_decay, o->step + 1);
        a.exempt = exempt;
        rc = o->dev->ops->adamw_step(o->dev, params + p_at, grads + g_at, grad_scale, o->exp_avg + s_at,
                                     o->exp_avg_sq + s_at, pt->count, &a, err);
    }
    return rc ? ddp_prefix(err, "optimizer step %lld", (long long)(o->step + 1)) : DDP_OK;
}

void optim_grads_by_state(optimizer *o)
{
    o->grads_by_state = true;
}

void optim_params_by_state(optimizer *o)
{
    o->params_by_state = true;
}

void optim_end_step(optimizer *o)
{
    o->step++;
}

int optim_step(optimizer *o, float *params, const float *grads, double lr, const float *grad_scale, ddp_err *err)
{
    for (int k = 0; k < o->n_parts; k++) {
        int rc = optim_update_part(o, k, params, grads, lr, grad_scale, err);
        if (rc)
            return rc;
    }
    optim_end_step(o);
    return DDP_OK;
}
