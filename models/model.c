/* model.c — what every model shares: the parameter and gradient buffers, the named tensor table,
 * and PyTorch's default Linear initialisation over the flat parameter buffer.
 *
 * Initial values are generated on the host from the RNG_INIT stream and uploaded, so every rank
 * (and every backend) starts from bit-identical parameters for the same seed. This file must not
 * know any model: building one by kind is model_registry.c's. */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/checked_size.h"
#include "runtime/base/rng.h"

int model_alloc_params(model *m, ddp_err *err)
{
    device *d = m->dev;
    size_check k = {0};
    size_t bytes = size_mul(&k, size_add(&k, m->n_params, m->param_tail), sizeof(float));
    if (k.overflow)
        return ddp_fail(err, DDP_EUSAGE, "%zu parameters and %zu spare floats overflow 64 bits", m->n_params,
                        m->param_tail);
    int rc = m->params_by_unit ? DDP_OK : d->ops->alloc(d, bytes, (void **)&m->params, err);
    if (!rc && !m->grads_by_unit)
        rc = d->ops->alloc(d, bytes, (void **)&m->grads, err);
    if (!rc && m->param_tail > 0 && m->params)
        rc = d->ops->fill(d, TENSOR_F32, m->params + m->n_params, m->param_tail, 0.0f, err);
    if (!rc && m->param_tail > 0 && m->grads)
        rc = d->ops->fill(d, TENSOR_F32, m->grads + m->n_params, m->param_tail, 0.0f, err);
    return rc;
}

void model_set_grad_windows(model *m, grad_window_fn fn, void *ctx)
{
    m->grad_window = fn;
    m->grad_window_ctx = ctx;
}

/* The unit holding parameter offset: units are ascending and cover [0, n_params). */
static int unit_of(const model *m, size_t offset)
{
    int lo = 0, hi = m->n_units - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (m->units[mid].offset <= offset)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

void model_set_param_windows(model *m, param_window_fn fn, void *ctx)
{
    if (m->params)
        m->dev->ops->free(m->dev, m->params);
    m->params = NULL;
    m->param_window = fn;
    m->param_window_ctx = ctx;
}

const void *model_weight(model *m, const void *whole, size_t elem, size_t offset)
{
    if (!m->param_window)
        return (const char *)whole + offset * elem;
    int u = unit_of(m, offset);
    return (const char *)m->param_window(m->param_window_ctx, u) + (offset - m->units[u].offset) * elem;
}

float *model_grad(model *m, size_t offset)
{
    if (!m->grads_by_unit)
        return m->grads + offset;
    int u = unit_of(m, offset);
    return m->grad_window(m->grad_window_ctx, u) + (offset - m->units[u].offset);
}

int model_zero_grads(model *m, ddp_err *err)
{
    if (m->grads_by_unit)
        return DDP_OK;
    return m->dev->ops->fill(m->dev, TENSOR_F32, m->grads, m->n_params, 0.0f, err);
}

const param_tensor *model_find_tensor(const model *m, const char *name)
{
    for (int i = 0; i < m->n_tensors; i++)
        if (!strcmp(m->tensors[i].name, name))
            return &m->tensors[i];
    return NULL;
}

/* fan_in of the Linear layer a tensor belongs to: a weight's row length, or for "X.bias" the row
 * length of "X.weight" (nn.Linear bounds its bias by the weight's fan_in). */
static int64_t linear_fan_in(const model *m, const param_tensor *t)
{
    if (t->ndim >= 2)
        return t->shape[1];
    const char *dot = strrchr(t->name, '.');
    if (dot && !strcmp(dot, ".bias")) {
        char weight[sizeof t->name + 8];
        snprintf(weight, sizeof weight, "%.*s.weight", (int)(dot - t->name), t->name);
        const param_tensor *w = model_find_tensor(m, weight);
        if (w && w->ndim >= 2)
            return w->shape[1];
    }
    return t->shape[0];
}

int model_params_changed(model *m, uint64_t seed, uint64_t step, ddp_err *err)
{
    return m->ops->params_changed ? m->ops->params_changed(m, seed, step, err) : DDP_OK;
}

int model_begin_unit(model *m, bool block, ddp_err *err)
{
    if ((m->n_units & (m->n_units - 1)) == 0) { /* grow by doubling, as the tensor table */
        size_t cap = m->n_units ? 2 * (size_t)m->n_units : 16;
        model_unit *u = realloc(m->units, cap * sizeof *u);
        if (!u)
            return ddp_fail(err, DDP_ERUNTIME, "out of host memory for %zu parameter units", cap);
        m->units = u;
    }
    size_t end = m->n_tensors ? m->tensors[m->n_tensors - 1].offset + m->tensors[m->n_tensors - 1].numel : 0;
    m->units[m->n_units++] = (model_unit){.first_tensor = m->n_tensors, .offset = end, .block = block};
    return DDP_OK;
}

int model_add_tensor(model *m, const char *name, int64_t d0, int64_t d1, bool weight_decay, size_t *offset,
                     ddp_err *err)
{
    if (m->n_units == 0) { /* a model that names no units is one */
        int rc = model_begin_unit(m, false, err);
        if (rc)
            return rc;
    }
    /* grow by doubling: n_tensors is a power of two whenever the table is full */
    if ((m->n_tensors & (m->n_tensors - 1)) == 0) {
        size_t cap = m->n_tensors ? 2 * (size_t)m->n_tensors : 16;
        param_tensor *t = realloc(m->tensors, cap * sizeof *t);
        if (!t)
            return ddp_fail(err, DDP_ERUNTIME, "out of host memory for %zu parameter tensors", cap);
        m->tensors = t;
    }
    if (strlen(name) >= MODEL_TENSOR_NAME_MAX) /* a model's own names: never cut to look alike */
        return ddp_fail(err, DDP_ERUNTIME, "parameter tensor name %s is longer than %d bytes", name,
                        MODEL_TENSOR_NAME_MAX - 1);
    /* the buffer up to this tensor's end, in floats and in bytes, must fit in 64 bits */
    size_check k = {0};
    size_t numel = size_mul(&k, d0, d1 ? d1 : 1), end = size_add(&k, *offset, numel);
    (void)size_mul(&k, end, sizeof(float));
    if (k.overflow || d0 < 0 || d1 < 0)
        return ddp_fail(err, DDP_EUSAGE, "parameter tensor %s [%lld, %lld] at element %zu: the parameters overflow "
                        "64 bits; reduce the model's shape", name, (long long)d0, (long long)d1, *offset);
    param_tensor *t = &m->tensors[m->n_tensors++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = d1 ? 2 : 1;
    t->shape[0] = d0;
    t->shape[1] = d1;
    t->numel = numel;
    t->offset = *offset;
    t->weight_decay = weight_decay;
    model_unit *u = &m->units[m->n_units - 1];
    if (u->n_tensors++ == 0)
        u->offset = *offset;
    u->count = end - u->offset;
    *offset = end;
    return DDP_OK;
}

void model_free_tensors(model *m)
{
    free(m->tensors);
    m->tensors = NULL;
    m->n_tensors = 0;
    free(m->units);
    m->units = NULL;
    m->n_units = 0;
}

void model_init_linear_tensor(const model *m, const rng_key *key, const param_tensor *t, size_t lo, size_t hi,
                              float *dst)
{
    float bound = (float)(1.0 / sqrt((double)linear_fan_in(m, t)));
    rng_uniforms_at(key, lo, hi, -bound, bound, dst);
}

void model_draw_normal(const rng_key *key, size_t lo, size_t hi, size_t drawn, double std, float *dst)
{
    size_t mid = hi < drawn ? hi : drawn > lo ? drawn : lo;
    rng_normals_at(key, lo, mid, std, dst);
    model_fill(dst + (mid - lo), hi - mid, 0.0f);
}

void model_fill(float *dst, size_t n, float v)
{
    for (size_t j = 0; j < n; j++)
        dst[j] = v;
}
