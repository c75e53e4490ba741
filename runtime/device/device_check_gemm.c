/* device_check_gemm.c — the argument contract of the GEMM family's op (device.h's
 * DEVICE_GEMM_OPS), for device.c's checking table: checked_gemm rejects unsupported operand types,
 * inconsistent sizes and missing operands with one message for both backends, returns on an empty
 * product, and forwards the rest to d->backend with its cost. It must not compute anything an op
 * produces nor read device memory. */
#include "runtime/device/device_check.h"

/* The operand types a backend can multiply: fp32 throughout, or (CUDA only) bf16 A and B into a
 * bf16 or fp32 C. */
static int check_gemm_types(const device *d, const char *op, tensor_dtype ab, tensor_dtype c_type, ddp_err *err)
{
    int rc = check_dtype(d, op, ab, err);
    if (!rc)
        rc = check_dtype(d, op, c_type, err);
    if (!rc && ab == TENSOR_F32 && c_type != TENSOR_F32)
        return ddp_fail(err, DDP_ERUNTIME, "%s: fp32 A and B with a bf16 C is not a supported combination", op);
    return rc;
}

int checked_gemm(device *d, tensor_dtype ab, tensor_dtype c_type, bool ta, bool tb, int64_t m, int64_t n,
                 int64_t k, float alpha, const void *a, int64_t lda, const void *b, int64_t ldb, float beta,
                 void *c, int64_t ldc, ddp_err *err)
{
    int rc = check_gemm_types(d, "gemm", ab, c_type, err);
    if (!rc)
        rc = check_gemm_sizes(ta, tb, m, n, k, lda, ldb, ldc, err);
    if (rc || m == 0 || n == 0)
        return rc;
    NEED_POINTER("gemm", c);
    if (k > 0) {
        NEED_POINTER("gemm", a);
        NEED_POINTER("gemm", b);
    }
    DEVICE_FORWARD(gemm, gemm_cost(ab, c_type, ta, tb, m, n, k, beta),
                   d, ab, c_type, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, err);
}
