/* device_check.h — what the ops' argument contracts share, one file per op family
 * (device_check_FAMILY.c, FAMILY as in device.h's DEVICE_FAMILIES): the NULL-pointer check, shape,
 * enum and GEMM-size checks, the cost rules and helpers each op's cost line (beside its contract)
 * uses, and the declarations of the checked_* functions that device.c's checking table points to.
 *
 * Internal to runtime/device: callers use d->ops. Nothing here may touch device memory or compute
 * anything an op produces. */
#ifndef DDP_DEVICE_CHECK_H
#define DDP_DEVICE_CHECK_H

#include <stdio.h>

#include "runtime/device/device.h"
#include "runtime/device/device_prof.h"

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

/* A GEMM's sizes: none negative, each leading dimension at least its operand's row (and 1): the
 * plain GEMM's and the epilogue GEMMs' shared rule. */
static inline int check_gemm_sizes(bool ta, bool tb, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb,
                                   int64_t ldc, ddp_err *err)
{
    if (m < 0 || n < 0 || k < 0)
        return ddp_fail(err, DDP_ERUNTIME, "gemm: negative size m=%lld n=%lld k=%lld", (long long)m,
                        (long long)n, (long long)k);
    int64_t a_row = ta ? m : k, b_row = tb ? k : n;
    if (lda < 1 || lda < a_row || ldb < 1 || ldb < b_row || ldc < 1 || ldc < n)
        return ddp_fail(err, DDP_ERUNTIME,
                        "gemm: leading dimension shorter than its row (lda=%lld needs >= %lld, ldb=%lld "
                        "needs >= %lld, ldc=%lld needs >= %lld)",
                        (long long)lda, (long long)(a_row > 1 ? a_row : 1), (long long)ldb,
                        (long long)(b_row > 1 ? b_row : 1), (long long)ldc, (long long)(n > 1 ? n : 1));
    return DDP_OK;
}

/* ---- what the ops cost, for the profiler ------------------------------------------------------
 * Every recorded op states beside its contract the bytes it moves (each input read once, each
 * output written once, at its element size; "+=" outputs read and written) and its FLOPs: 2mnk
 * per GEMM, and for element-wise work these estimates per element (a tanh or exp counted as one
 * operation, as roofline tables do): */
#define FLOPS_GELU 8        /* GPT-2's tanh GELU, and erf GELU alike: x^3, scale, tanh, 1+, x/2 */
#define FLOPS_GELU_GRAD 12  /* its derivative, times the incoming gradient */
#define FLOPS_ADAMW 16      /* clip scale, weight decay, two moments, two bias corrections, sqrt, update */

/* A GEMM: A and B read, C written and read again when beta is not 0. */
static inline prof_cost gemm_cost(tensor_dtype ab, tensor_dtype c, bool ta, bool tb, int64_t m, int64_t n,
                                  int64_t k, float beta)
{
    double mn = (double)m * (double)n, io = (double)m * (double)k + (double)k * (double)n;
    double bytes = io * (double)tensor_dtype_size(ab) + mn * (double)tensor_dtype_size(c) * (beta != 0.0f ? 2 : 1);
    prof_math math = ab == TENSOR_BF16 ? PROF_MATH_GEMM_BF16 : PROF_MATH_GEMM_FP32;
    return prof_cost_of(bytes, 2.0 * mn * (double)k, math, "%lldx%lldx%lld %s->%s %c%c", (long long)m, (long long)n,
                        (long long)k, prof_dtype_name(ab), prof_dtype_name(c), ta ? 'T' : 'N', tb ? 'T' : 'N');
}

/* A linear layer's GEMM with its epilogue: A, B and the bias (or GELU input) read, `outputs` m x n
 * tensors written, flops_mn per output element on top of the 2mnk. */
static inline prof_cost epilogue_cost(tensor_dtype t, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                                      int outputs, double flops_mn)
{
    prof_cost c = gemm_cost(t, t, ta, tb, m, n, k, 0.0f);
    double mn = (double)m * (double)n, sz = (double)tensor_dtype_size(t);
    c.bytes += ((double)n + (outputs - 1) * mn) * sz;
    c.flops += flops_mn * mn;
    return c;
}

/* n elements: `tensors` tensors of type t read or written once each, flops_per per element. */
static inline prof_cost elementwise_cost(tensor_dtype t, size_t n, int tensors, double flops_per)
{
    return prof_cost_of((double)tensors * (double)n * (double)tensor_dtype_size(t), flops_per * (double)n,
                        PROF_MATH_FP32, "n=%zu %s", n, prof_dtype_name(t));
}

/* n floats (or doubles) of flat state: bytes_per bytes and flops_per FLOPs each. */
static inline prof_cost flat_cost(size_t n, double bytes_per, double flops_per, const char *what)
{
    return prof_cost_of(bytes_per * (double)n, flops_per * (double)n, PROF_MATH_FP32, "n=%zu%s", n, what);
}

/* rows x cols of type t. */
static inline prof_cost matrix_cost(tensor_dtype t, int64_t rows, int64_t cols, double bytes, double flops,
                                    const char *what)
{
    return prof_cost_of(bytes, flops, PROF_MATH_FP32, "%lldx%lld %s%s", (long long)rows, (long long)cols,
                        prof_dtype_name(t), what);
}

static inline prof_cost act_cost(tensor_dtype t, act_kind a, size_t n, int tensors, double flops_per)
{
    prof_cost c = elementwise_cost(t, n, tensors, flops_per);
    snprintf(c.detail, sizeof c.detail, "%s n=%zu %s", act_kind_name(a), n, prof_dtype_name(t));
    return c;
}

/* Every op's contract, each defined in its family's device_check_FAMILY.c, and those of the ops
 * that cannot fail. */
#define DEVICE_CHECKED_DECL(name, params) int checked_##name(DEVICE_UNPAREN params, ddp_err *err);
DEVICE_OPS(DEVICE_CHECKED_DECL)
#undef DEVICE_CHECKED_DECL
void checked_free(device *d, void *p);
void checked_timer_destroy(device *d, device_timer *t);
void checked_stamps_destroy(device *d, device_stamps *s);

#endif
