/* gemm_epilogue.c — the epilogue GEMMs of device.h (gemm_bias, gemm_bias_gelu,
 * gemm_gelu_backward) in their unfused form: the GEMM, then the element-wise op, each through the
 * backend's own table. It is the CPU backend's implementation, where the ops are exactly the
 * separate passes a model would otherwise issue, and the CUDA backend's fallback for a shape
 * cuBLASLt has no fused kernel for.
 *
 * Arguments arrive checked (device_check_*.c). This file must not know which backend runs it, and holds
 * no arithmetic of its own: one definition of each op lives in its family. */
#include "runtime/device/backend.h"

int device_unfused_gemm_bias(device *d, tensor_dtype t, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                             const void *a, int64_t lda, const void *b, int64_t ldb, const void *bias, void *y,
                             ddp_err *err)
{
    const struct device_ops *op = d->backend;
    int rc = op->gemm(d, t, t, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, y, n, err);
    return rc ? rc : op->bias_add(d, t, y, bias, m, n, err);
}

int device_unfused_gemm_bias_gelu(device *d, tensor_dtype t, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                                  const void *a, int64_t lda, const void *b, int64_t ldb, const void *bias, void *pre,
                                  void *y, ddp_err *err)
{
    int rc = device_unfused_gemm_bias(d, t, ta, tb, m, n, k, a, lda, b, ldb, bias, pre, err);
    return rc ? rc : d->backend->act_forward(d, t, ACT_GELU_TANH, pre, y, (size_t)(m * n), err);
}

/* The GEMM lands in dx, which act_backward then scales in place (its contract allows dx == dy). */
int device_unfused_gemm_gelu_backward(device *d, tensor_dtype t, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                                      const void *a, int64_t lda, const void *b, int64_t ldb, const void *pre,
                                      void *dx, ddp_err *err)
{
    const struct device_ops *op = d->backend;
    int rc = op->gemm(d, t, t, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, dx, n, err);
    return rc ? rc : op->act_backward(d, t, ACT_GELU_TANH, pre, dx, dx, (size_t)(m * n), err);
}
