/* device_check.h — what device.c and device_check_transformer.c share to state the ops' argument
 * contracts: the NULL-pointer check, shape and enum checks, and the declarations of the
 * transformer family's checked_* functions that device.c's checking table points to.
 *
 * Internal to runtime/device: callers use d->ops. Nothing here may touch device memory or compute
 * anything an op produces. */
#ifndef DDP_DEVICE_CHECK_H
#define DDP_DEVICE_CHECK_H

#include "runtime/device/device.h"

/* Returns the op's failure from the calling checked_* function when pointer p is NULL. */
#define NEED_POINTER(op, p)                                                                        \
    do {                                                                                           \
        if (!(p))                                                                                  \
            return ddp_fail(err, DDP_ERUNTIME, "%s: %s is NULL", op, #p);                          \
    } while (0)

static inline int check_shape(const char *op, int64_t rows, int64_t cols, ddp_err *err)
{
    if (rows < 0 || cols < 0)
        return ddp_fail(err, DDP_ERUNTIME, "%s: negative shape [%lld, %lld]", op, (long long)rows,
                        (long long)cols);
    return DDP_OK;
}

static inline int check_act(const char *op, act_kind a, ddp_err *err)
{
    if (a != ACT_RELU && a != ACT_GELU && a != ACT_GELU_TANH)
        return ddp_fail(err, DDP_ERUNTIME, "%s: unknown activation %d", op, (int)a);
    return DDP_OK;
}

/* A known tensor type this backend computes on: the CPU backend takes float only. */
static inline int check_dtype(const device *d, const char *op, tensor_dtype t, ddp_err *err)
{
    if (t != TENSOR_F32 && t != TENSOR_BF16)
        return ddp_fail(err, DDP_ERUNTIME, "%s: unknown tensor type %d", op, (int)t);
    if (t == TENSOR_BF16 && d->kind != DEVICE_CUDA)
        return ddp_fail(err, DDP_ERUNTIME, "%s: bf16 tensors need the CUDA backend (the CPU backend computes in "
                        "float32)", op);
    return DDP_OK;
}

#define DEVICE_CHECKED_DECL(name, params) int checked_##name(DEVICE_UNPAREN params, ddp_err *err);
DEVICE_TRANSFORMER_OPS(DEVICE_CHECKED_DECL)
DEVICE_ATTENTION_OPS(DEVICE_CHECKED_DECL)
#undef DEVICE_CHECKED_DECL

#endif
