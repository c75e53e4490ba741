/* device_check_gemm_epilogue.c — the argument contracts of the epilogue GEMMs (device.h's
 * DEVICE_GEMM_EPILOGUE_OPS), for device.c's checking table: a linear layer's sizes (k >= 1, dense
 * m x n outputs), its operands present and its outputs apart from the inputs they are computed
 * from, with one message per mistake for both backends; an empty product returns at once, the rest
 * goes to d->backend with its cost. It must not compute anything an op produces nor read device
 * memory. */
#include "runtime/device/device_check.h"

/* The epilogue GEMMs' shared contract: a known type, consistent sizes with dense m x n outputs
 * (ld n), k >= 1 (a linear layer has an input), and the operands present. */
static int check_gemm_epilogue(const device *d, const char *op, tensor_dtype t, bool ta, bool tb, int64_t m,
                               int64_t n, int64_t k, const void *a, int64_t lda, const void *b, int64_t ldb,
                               ddp_err *err)
{
    int rc = check_dtype(d, op, t, err);
    if (!rc && k < 1 && m >= 0 && n >= 0)
        return ddp_fail(err, DDP_ERUNTIME, "%s: k=%lld, but a linear layer needs k >= 1", op, (long long)k);
    if (!rc && (rc = check_gemm_sizes(ta, tb, m, n, k, lda, ldb, n > 1 ? n : 1, err)) != DDP_OK)
        return ddp_prefix(err, "%s", op);
    if (rc || m == 0 || n == 0)
        return rc;
    NEED_POINTER(op, a);
    NEED_POINTER(op, b);
    return DDP_OK;
}

int checked_gemm_bias(device *d, tensor_dtype t, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                      const void *a, int64_t lda, const void *b, int64_t ldb, const void *bias, void *y,
                      ddp_err *err)
{
    int rc = check_gemm_epilogue(d, "gemm_bias", t, ta, tb, m, n, k, a, lda, b, ldb, err);
    if (rc || m == 0 || n == 0)
        return rc;
    NEED_POINTER("gemm_bias", bias);
    NEED_POINTER("gemm_bias", y);
    DEVICE_FORWARD(gemm_bias, epilogue_cost(t, ta, tb, m, n, k, 1, 1),
                   d, t, ta, tb, m, n, k, a, lda, b, ldb, bias, y, err);
}

int checked_gemm_bias_gelu(device *d, tensor_dtype t, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                           const void *a, int64_t lda, const void *b, int64_t ldb, const void *bias, void *pre,
                           void *y, ddp_err *err)
{
    int rc = check_gemm_epilogue(d, "gemm_bias_gelu", t, ta, tb, m, n, k, a, lda, b, ldb, err);
    if (rc || m == 0 || n == 0)
        return rc;
    NEED_POINTER("gemm_bias_gelu", bias);
    NEED_POINTER("gemm_bias_gelu", pre);
    NEED_POINTER("gemm_bias_gelu", y);
    if (pre == y)
        return ddp_fail(err, DDP_ERUNTIME, "gemm_bias_gelu: pre and y are the same tensor (backward needs both)");
    DEVICE_FORWARD(gemm_bias_gelu, epilogue_cost(t, ta, tb, m, n, k, 2, 1 + FLOPS_GELU),
                   d, t, ta, tb, m, n, k, a, lda, b, ldb, bias, pre, y, err);
}

int checked_gemm_gelu_backward(device *d, tensor_dtype t, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                               const void *a, int64_t lda, const void *b, int64_t ldb, const void *pre,
                               void *dx, ddp_err *err)
{
    int rc = check_gemm_epilogue(d, "gemm_gelu_backward", t, ta, tb, m, n, k, a, lda, b, ldb, err);
    if (rc || m == 0 || n == 0)
        return rc;
    NEED_POINTER("gemm_gelu_backward", pre);
    NEED_POINTER("gemm_gelu_backward", dx);
    if (pre == dx)
        return ddp_fail(err, DDP_ERUNTIME, "gemm_gelu_backward: dx overwrites pre, which it is computed from");
    DEVICE_FORWARD(gemm_gelu_backward, epilogue_cost(t, ta, tb, m, n, k, 2, FLOPS_GELU_GRAD),
                   d, t, ta, tb, m, n, k, a, lda, b, ldb, pre, dx, err);
}
