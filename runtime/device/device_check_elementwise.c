/* device_check_elementwise.c — the argument contracts of the element-wise family's ops (device.h's
 * DEVICE_ELEMENTWISE_OPS), for device.c's checking table: each checked_NAME rejects bad arguments
 * with one message for both backends, returns when there is nothing to do, and forwards the rest
 * to d->backend with its cost. It must not compute anything an op produces nor read device
 * memory. */
#include "runtime/device/device_check.h"

int checked_fill(device *d, tensor_dtype t, void *x, size_t n, float value, ddp_err *err)
{
    int rc = check_dtype(d, "fill", t, err);
    if (rc || n == 0)
        return rc;
    NEED_POINTER("fill", x);
    DEVICE_FORWARD(fill, elementwise_cost(t, n, 1, 0),
                   d, t, x, n, value, err);
}

int checked_scale(device *d, float *x, size_t n, float s, ddp_err *err)
{
    if (n == 0)
        return DDP_OK;
    NEED_POINTER("scale", x);
    DEVICE_FORWARD(scale, flat_cost(n, 8, 1, ""),
                   d, x, n, s, err);
}

int checked_u8_to_f32(device *d, const uint8_t *src, float *dst, size_t n, float mean, float inv_std,
                      ddp_err *err)
{
    if (n == 0)
        return DDP_OK;
    NEED_POINTER("u8_to_f32", src);
    NEED_POINTER("u8_to_f32", dst);
    DEVICE_FORWARD(u8_to_f32, flat_cost(n, 5, 3, ""),
                   d, src, dst, n, mean, inv_std, err);
}

int checked_bias_add(device *d, tensor_dtype t, void *y, const void *b, int64_t rows, int64_t cols,
                     ddp_err *err)
{
    int rc = check_dtype(d, "bias_add", t, err);
    if (!rc)
        rc = check_shape("bias_add", rows, cols, err);
    if (rc || rows == 0 || cols == 0)
        return rc;
    NEED_POINTER("bias_add", y);
    NEED_POINTER("bias_add", b);
    DEVICE_FORWARD(bias_add,
                   matrix_cost(t, rows, cols, (2.0 * rows * cols + cols) * tensor_dtype_size(t), (double)rows * cols,
                               ""),
                   d, t, y, b, rows, cols, err);
}

int checked_act_forward(device *d, tensor_dtype t, act_kind a, const void *x, void *y, size_t n,
                        ddp_err *err)
{
    int rc = check_dtype(d, "act_forward", t, err);
    if (!rc)
        rc = check_act("act_forward", a, err);
    if (rc || n == 0)
        return rc;
    NEED_POINTER("act_forward", x);
    NEED_POINTER("act_forward", y);
    DEVICE_FORWARD(act_forward, act_cost(t, a, n, 2, a == ACT_RELU ? 1 : FLOPS_GELU),
                   d, t, a, x, y, n, err);
}

int checked_act_backward(device *d, tensor_dtype t, act_kind a, const void *x, const void *dy, void *dx,
                         size_t n, ddp_err *err)
{
    int rc = check_dtype(d, "act_backward", t, err);
    if (!rc)
        rc = check_act("act_backward", a, err);
    if (rc || n == 0)
        return rc;
    NEED_POINTER("act_backward", x);
    NEED_POINTER("act_backward", dy);
    NEED_POINTER("act_backward", dx);
    DEVICE_FORWARD(act_backward, act_cost(t, a, n, 3, a == ACT_RELU ? 1 : FLOPS_GELU_GRAD),
                   d, t, a, x, dy, dx, n, err);
}

int checked_add(device *d, tensor_dtype t, void *out, const void *a, const void *b, size_t n, ddp_err *err)
{
    int rc = check_dtype(d, "add", t, err);
    if (rc || n == 0)
        return rc;
    NEED_POINTER("add", out);
    NEED_POINTER("add", a);
    NEED_POINTER("add", b);
    DEVICE_FORWARD(add, elementwise_cost(t, n, 3, 1),
                   d, t, out, a, b, n, err);
}
