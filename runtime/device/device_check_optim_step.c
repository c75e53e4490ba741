/* device_check_optim_step.c — the argument contracts of the optimizer updates (device.h's
 * DEVICE_OPTIM_STEP_OPS), for device.c's checking table: the step's arguments and the shape of its
 * weight-decay exemptions, the buffers present, with one message per mistake for both backends; an
 * empty step returns at once, the rest goes to d->backend with its cost. It must not compute
 * anything an op produces nor read device memory (the exemption bounds and the clip scale are
 * device memory). */
#include "runtime/device/device_check.h"

/* The exemption table's shape; its contents are device memory, never read here. */
static int check_exempt(const char *op, const decay_exempt *x, size_t n, ddp_err *err)
{
    if (x->n_bounds % 2 != 0)
        return ddp_fail(err, DDP_ERUNTIME, "%s: %zu exemption bounds, not [start, end) pairs", op, x->n_bounds);
    if (x->n_bounds > 0 && !x->bounds)
        return ddp_fail(err, DDP_ERUNTIME, "%s: exempt.bounds is NULL with %zu bounds", op, x->n_bounds);
    if (x->first > SIZE_MAX - n)
        return ddp_fail(err, DDP_ERUNTIME, "%s: element offsets %zu + %zu overflow", op, x->first, n);
    return DDP_OK;
}

/* scale may be NULL (gradients used as they are) and is never read here: it is device memory. */
int checked_sgd_step(device *d, float *p, const float *g, const float *scale, float *buf, size_t n,
                     const sgd_args *args, ddp_err *err)
{
    NEED_POINTER("sgd_step", args);
    int rc = check_exempt("sgd_step", &args->exempt, n, err);
    if (rc || n == 0)
        return rc;
    NEED_POINTER("sgd_step", p);
    NEED_POINTER("sgd_step", g);
    if (args->momentum != 0.0f && !buf)
        return ddp_fail(err, DDP_ERUNTIME, "sgd_step: momentum %g needs a momentum buffer", (double)args->momentum);
    DEVICE_FORWARD(sgd_step, flat_cost(n, buf ? 20 : 12, buf ? 5 : 3, buf ? " momentum" : ""),
                   d, p, g, scale, buf, n, args, err);
}

int checked_adamw_step(device *d, float *p, const float *g, const float *scale, float *m, float *v, size_t n,
                       const adamw_args *args, ddp_err *err)
{
    NEED_POINTER("adamw_step", args);
    if (!(args->bias2_sqrt > 0.0f))
        return ddp_fail(err, DDP_ERUNTIME,
                        "adamw_step: bias2_sqrt is %g, must be > 0 (sqrt(1 - beta2^step), step >= 1)",
                        (double)args->bias2_sqrt);
    int rc = check_exempt("adamw_step", &args->exempt, n, err);
    if (rc || n == 0)
        return rc;
    NEED_POINTER("adamw_step", p);
    NEED_POINTER("adamw_step", g);
    NEED_POINTER("adamw_step", m);
    NEED_POINTER("adamw_step", v);
    DEVICE_FORWARD(adamw_step, flat_cost(n, 28, FLOPS_ADAMW, ""),
                   d, p, g, scale, m, v, n, args, err);
}
