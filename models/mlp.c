/* mlp.c — the multi-layer perceptron: Linear layers fc1..fcN in PyTorch's layout (weight [out, in],
 * y = x·Wᵀ + b), the configured activation between layers and none after the last, softmax
 * cross-entropy on top.
 *
 * Parameters sit in one flat buffer in the order fc1.weight, fc1.bias, fc2.weight, ... so each
 * layer's [weight, bias] is one contiguous range; backward walks the layers last to first and
 * reports each range through grad_ready the moment its gradient is final. Everything runs as
 * device ops, so the same code serves the CPU and CUDA backends. This file must not communicate,
 * step an optimizer or touch files. */
#include "mlp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/checked_size.h"

#define MLP_MAX_LAYERS (MLP_MAX_HIDDEN + 1)

typedef struct mlp_layer {
    int64_t in, out;
    size_t w_off, b_off; /* element offsets into params/grads */
    float *z;            /* pre-activation output [max_rows, out]; logits for the last layer */
    float *h;            /* act(z) [max_rows, out]; NULL for the last layer */
} mlp_layer;

typedef struct mlp_impl {
    int n_layers;
    mlp_layer layer[MLP_MAX_LAYERS];
    act_kind act;
    float *x_f32;       /* converted uint8 inputs [max_rows, input width] */
    float *dz, *dh;     /* backward scratch [max_rows, widest layer] each */
    int64_t last_rows;  /* rows of the last forward pass, for mlp_logits */
} mlp_impl;

static int check_rows(const model *m, int64_t rows, ddp_err *err)
{
    if (rows < 1 || rows > m->max_rows)
        return ddp_fail(err, DDP_ERUNTIME, "mlp: batch of %lld rows, model was built for 1..%lld", (long long)rows,
                        (long long)m->max_rows);
    return DDP_OK;
}

/* The parameter at element offset off: in m->params, or under ZeRO-3 in its layer's gathered window. */
static const float *mlp_w(model *m, size_t off)
{
    return model_weight(m, m->params, sizeof(float), off);
}

/* Logits end up in the last layer's z. */
static int mlp_forward(model *m, const float *x, int64_t rows, ddp_err *err)
{
    mlp_impl *p = m->impl;
    const struct device_ops *op = m->dev->ops;
    const float *in = x;
    for (int l = 0; l < p->n_layers; l++) {
        mlp_layer *L = &p->layer[l];
        int rc = op->gemm_bias(m->dev, TENSOR_F32, false, true, rows, L->out, L->in, in, L->in, mlp_w(m, L->w_off),
                               L->in, mlp_w(m, L->b_off), L->z, err);
        if (!rc && L->h)
            rc = op->act_forward(m->dev, TENSOR_F32, p->act, L->z, L->h, (size_t)(rows * L->out), err);
        if (rc)
            return ddp_prefix(err, "mlp forward fc%d", l + 1);
        in = L->h;
    }
    p->last_rows = rows;
    return DDP_OK;
}

/* One layer's backward: dz holds dLoss/dz for layer l on entry; on exit (l > 0) it holds
 * dLoss/dz for layer l-1. */
static int layer_backward(model *m, int l, const float *x, int64_t rows, bool accumulate, ddp_err *err)
{
    mlp_impl *p = m->impl;
    const struct device_ops *op = m->dev->ops;
    mlp_layer *L = &p->layer[l];
    const float *layer_in = l > 0 ? p->layer[l - 1].h : x;
    float beta = accumulate && !m->grads_by_unit ? 1.0f : 0.0f;
    /* dW[out,in] = dzᵀ · input ; db = column sums of dz */
    int rc = op->gemm(m->dev, TENSOR_F32, TENSOR_F32, true, false, L->out, L->in, rows, 1.0f, p->dz, L->out, layer_in,
                      L->in, beta, model_grad(m, L->w_off), L->in, err);
    if (!rc)
        rc = op->bias_grad(m->dev, TENSOR_F32, p->dz, model_grad(m, L->b_off), rows, L->out, beta, err);
    if (!rc && l > 0) {
        /* dh[rows,in] = dz · W, then through the previous layer's activation back into dz */
        rc = op->gemm(m->dev, TENSOR_F32, TENSOR_F32, false, false, rows, L->in, L->out, 1.0f, p->dz, L->out,
                      mlp_w(m, L->w_off), L->in, 0.0f, p->dh, L->in, err);
        if (!rc)
            rc = op->act_backward(m->dev, TENSOR_F32, p->act, p->layer[l - 1].z, p->dh, p->dz, (size_t)(rows * L->in),
                                  err);
    }
    return rc ? ddp_prefix(err, "mlp backward fc%d", l + 1) : DDP_OK;
}

/* Forward pass and the loss over the top layer's logits: dlogits (NULL for evaluation) gets the
 * loss gradient times grad_scale, stats the loss sum and correct count. */
static int forward_loss(model *m, const float *x, const int32_t *targets, int64_t rows, float grad_scale,
                        float *dlogits, float *stats, ddp_err *err)
{
    mlp_impl *p = m->impl;
    int rc = check_rows(m, rows, err);
    if (!rc)
        rc = mlp_forward(m, x, rows, err);
    if (rc)
        return rc;
    mlp_layer *top = &p->layer[p->n_layers - 1];
    rc = m->dev->ops->softmax_xent(m->dev, TENSOR_F32, top->z, top->out, targets, rows, top->out, grad_scale, dlogits,
                                   stats, err);
    return rc ? ddp_prefix(err, "mlp loss") : DDP_OK;
}

int mlp_forward_backward_f32(model *m, const float *x, const int32_t *targets, int64_t rows, float grad_scale,
                             bool accumulate, grad_ready_fn grad_ready, void *ctx, float *stats, ddp_err *err)
{
    mlp_impl *p = m->impl;
    int rc = forward_loss(m, x, targets, rows, grad_scale, p->dz, stats, err);
    if (rc)
        return rc;
    for (int l = p->n_layers - 1; l >= 0; l--) {
        rc = layer_backward(m, l, x, rows, accumulate, err);
        if (rc)
            return rc;
        mlp_layer *L = &p->layer[l];
        if (grad_ready)
            grad_ready(ctx, L->w_off, (size_t)(L->in * L->out + L->out));
    }
    return DDP_OK;
}

int mlp_evaluate_f32(model *m, const float *x, const int32_t *targets, int64_t rows, float *stats, ddp_err *err)
{
    int rc = forward_loss(m, x, targets, rows, 1.0f, NULL, stats, err);
    return rc ? ddp_prefix(err, "mlp evaluate") : DDP_OK;
}

const float *mlp_logits(const model *m)
{
    const mlp_impl *p = m->impl;
    return p->layer[p->n_layers - 1].z;
}

/* uint8 pixels -> normalised floats in x_f32 */
static int convert_inputs(model *m, const model_batch *b, ddp_err *err)
{
    mlp_impl *p = m->impl;
    int rc = check_rows(m, b->rows, err);
    if (rc)
        return rc;
    rc = m->dev->ops->u8_to_f32(m->dev, b->inputs, p->x_f32, (size_t)(b->rows * m->io.sample.input.count),
                                MLP_INPUT_MEAN, 1.0f / MLP_INPUT_STD, err);
    return rc ? ddp_prefix(err, "mlp input conversion") : DDP_OK;
}

static int mlp_forward_backward(model *m, const model_batch *b, float grad_scale, bool accumulate,
                                grad_ready_fn grad_ready, void *ctx, float *stats, ddp_err *err)
{
    int rc = convert_inputs(m, b, err);
    if (rc)
        return rc;
    mlp_impl *p = m->impl;
    return mlp_forward_backward_f32(m, p->x_f32, b->targets, b->rows, grad_scale, accumulate, grad_ready, ctx, stats,
                                    err);
}

static int mlp_evaluate(model *m, const model_batch *b, float *stats, ddp_err *err)
{
    int rc = convert_inputs(m, b, err);
    if (rc)
        return rc;
    mlp_impl *p = m->impl;
    return mlp_evaluate_f32(m, p->x_f32, b->targets, b->rows, stats, err);
}

static void free_buffer(device *d, float *ptr)
{
    if (ptr)
        d->ops->free(d, ptr);
}

static void mlp_destroy(model *m)
{
    if (!m)
        return;
    mlp_impl *p = m->impl;
    device *d = m->dev;
    if (p) {
        for (int l = 0; l < p->n_layers; l++) {
            free_buffer(d, p->layer[l].z);
            free_buffer(d, p->layer[l].h);
        }
        free_buffer(d, p->x_f32);
        free_buffer(d, p->dz);
        free_buffer(d, p->dh);
        free(p);
    }
    free_buffer(d, m->params);
    free_buffer(d, m->grads);
    model_free_tensors(m);
    free(m);
}

static const struct model_ops mlp_ops = {
    .forward_backward = mlp_forward_backward,
    .evaluate = mlp_evaluate,
    .init_tensor = model_init_linear_tensor,
    .destroy = mlp_destroy,
};

/* Lays out fc1..fcN in the flat buffer and records each layer's widths and offsets. Weight decay
 * applies to every tensor, as in PyTorch's default single parameter group. */
static int build_layout(model *m, mlp_impl *p, const mlp_opts *opts, ddp_err *err)
{
    size_t offset = 0;
    int64_t in = m->io.sample.input.count;
    p->n_layers = opts->n_hidden + 1;
    for (int l = 0; l < p->n_layers; l++) {
        int64_t out = l < opts->n_hidden ? opts->hidden[l] : m->io.sample.n_classes;
        char name[MODEL_TENSOR_NAME_MAX];
        p->layer[l].in = in;
        p->layer[l].out = out;
        snprintf(name, sizeof name, "fc%d.weight", l + 1);
        p->layer[l].w_off = offset;
        int rc = model_begin_unit(m, false, err); /* a layer: its weight and bias */
        if (!rc)
            rc = model_add_tensor(m, name, out, in, true, &offset, err);
        snprintf(name, sizeof name, "fc%d.bias", l + 1);
        p->layer[l].b_off = offset;
        if (!rc)
            rc = model_add_tensor(m, name, out, 0, true, &offset, err);
        if (rc)
            return rc;
        m->train_flops_per_sample += 6.0 * (double)in * (double)out;
        in = out;
    }
    m->n_params = offset;
    return DDP_OK;
}

/* Allocates an activation buffer of rows x width floats, counting it in m->activation_bytes; sizes
 * that do not fit in 64 bits are refused before anything is asked of the device. */
static int alloc_floats(model *m, int64_t rows, int64_t width, float **out, ddp_err *err)
{
    size_check k = {0};
    size_t bytes = size_mul(&k, size_mul(&k, rows, width), sizeof(float));
    size_t total = size_add(&k, m->activation_bytes, bytes);
    if (k.overflow)
        return ddp_fail(err, DDP_EUSAGE, "activations of %lld rows (data.batch_size) x %lld floats overflow 64 bits "
                        "(with the %zu bytes before them); reduce data.batch_size or model.mlp.hidden",
                        (long long)rows, (long long)width, m->activation_bytes);
    void *ptr = NULL;
    int rc = m->dev->ops->alloc(m->dev, bytes, &ptr, err);
    m->activation_bytes = rc ? m->activation_bytes : total;
    *out = ptr;
    return rc;
}

static int alloc_buffers(model *m, mlp_impl *p, ddp_err *err)
{
    const int64_t rows = m->max_rows;
    int64_t widest = 0;
    int rc = model_alloc_params(m, err);
    if (!rc)
        rc = alloc_floats(m, rows, m->io.sample.input.count, &p->x_f32, err);
    for (int l = 0; !rc && l < p->n_layers; l++) {
        mlp_layer *L = &p->layer[l];
        widest = L->out > widest ? L->out : widest;
        rc = alloc_floats(m, rows, L->out, &L->z, err);
        if (!rc && l < p->n_layers - 1)
            rc = alloc_floats(m, rows, L->out, &L->h, err);
    }
    if (!rc)
        rc = alloc_floats(m, rows, widest, &p->dz, err);
    if (!rc)
        rc = alloc_floats(m, rows, widest, &p->dh, err);
    return rc;
}

/* "mlp hidden=[1024,1024] activation=relu in=784 classes=10" */
static void describe(model *m, const mlp_opts *opts)
{
    char *out = m->description;
    size_t n = sizeof m->description, used = (size_t)snprintf(out, n, "mlp hidden=[");
    for (int l = 0; l < opts->n_hidden && used < n; l++)
        used += (size_t)snprintf(out + used, n - used, "%s%lld", l ? "," : "", (long long)opts->hidden[l]);
    if (used < n)
        snprintf(out + used, n - used, "] activation=%s in=%lld classes=%lld", act_kind_name(opts->activation),
                 (long long)m->io.sample.input.count, (long long)m->io.sample.n_classes);
}

/* Pixels in, one class id out (u8 x in -> i32 x 1 in [0, classes)), and positive layer widths. */
static int check_shape(const mlp_opts *opts, const sample_layout *data, int64_t max_rows, ddp_err *err)
{
    char got[160];
    sample_layout_format(data, got, sizeof got);
    if (data->input.dtype != SAMPLE_U8 || data->input.count < 1 || data->target.dtype != SAMPLE_I32 ||
        data->target.count != 1 || data->n_classes < 2)
        return ddp_fail(err, DDP_EUSAGE, "mlp: takes samples of u8 pixels -> one i32 class id of at least 2 "
                        "classes, the data has %s", got);
    if (max_rows < 1 || opts->n_hidden < 0 || opts->n_hidden > MLP_MAX_HIDDEN)
        return ddp_fail(err, DDP_EUSAGE, "mlp: bad shape (max_rows %lld, %d hidden)", (long long)max_rows,
                        opts->n_hidden);
    for (int l = 0; l < opts->n_hidden; l++)
        if (opts->hidden[l] < 1)
            return ddp_fail(err, DDP_EUSAGE, "mlp: model.mlp.hidden[%d] is %lld, must be positive", l,
                            (long long)opts->hidden[l]);
    return DDP_OK;
}

int mlp_create(const mlp_opts *opts, device *dev, const sample_layout *data, int64_t max_rows, model_buffers buffers,
               model **out, ddp_err *err)
{
    int rc = check_shape(opts, data, max_rows, err);
    if (rc)
        return rc;
    model *m = calloc(1, sizeof *m);
    mlp_impl *p = calloc(1, sizeof *p);
    if (!m || !p) {
        free(m);
        free(p);
        return ddp_fail(err, DDP_ERUNTIME, "mlp: out of host memory");
    }
    m->ops = &mlp_ops;
    m->dev = dev;
    m->impl = p;
    m->io = (model_io){.sample = *data, .classifier = true};
    m->max_rows = max_rows;
    m->param_tail = buffers.param_tail;
    m->grads_by_unit = buffers.grads_by_unit;
    m->params_by_unit = buffers.params_by_unit;
    p->act = opts->activation;
    rc = build_layout(m, p, opts, err);
    describe(m, opts);
    if (!rc)
        rc = alloc_buffers(m, p, err);
    if (rc) {
        size_t n_params = m->n_params; /* read before m is freed */
        mlp_destroy(m);
        return ddp_prefix(err, "mlp: allocating %zu parameters and activations for %lld rows", n_params,
                          (long long)max_rows);
    }
    *out = m;
    return DDP_OK;
}
