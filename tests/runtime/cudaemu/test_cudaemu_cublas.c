/* test_cudaemu_cublas.c — the cuBLAS shim computes column-major GEMMs like cuBLAS and rejects
 * what cuBLAS rejects.
 *
 * Plain C against the real cublas_v2.h. Proves: cublasSgemm, cublasGemmEx and
 * cublasSgemmStridedBatched match a naive double-precision reference for all four transpose
 * combinations with leading dimensions larger than the rows; beta = 0 ignores NaN in C; invalid
 * lda/ldb/ldc, negative sizes and bad transposes give CUBLAS_STATUS_INVALID_VALUE with a stderr
 * line naming the argument; a matrix running past its allocation, or a host matrix, is refused;
 * TF32 mode rounds the inputs (results differ from fp32 but stay within TF32 error). */
#include "emu_test_util.h"
#include "tests/check.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <math.h>

enum { M = 5, N = 4, K = 3, PAD = 2, BATCH = 2 };

static float rnd(unsigned *state)
{
    *state = *state * 1664525u + 1013904223u;
    return ((float)(*state >> 8) / 16777216.0f - 0.5f) * 2.0f + 0.05f;
}

/* element (r, c) of op(X), X column-major with leading dimension ld */
static double op_at(const float *x, int ld, int trans, int r, int c)
{
    return trans ? x[(size_t)r * ld + c] : x[(size_t)c * ld + r];
}

static float *to_device(const float *h, size_t n)
{
    float *d = NULL;
    cudaMalloc((void **)&d, n * sizeof(float));
    cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice);
    return d;
}

/* Checks C (ldc = M + PAD, per batch at stride sc) against alpha op(A) op(B) + beta C0. */
static int count_wrong(const float *c, const float *c0, const float *a, int lda, long long sa, int ta,
                       const float *b, int ldb, long long sb, int tb, long long sc, int batch, float alpha,
                       float beta, double tol)
{
    int wrong = 0, ldc = M + PAD;
    for (int q = 0; q < batch; q++)
        for (int j = 0; j < N; j++)
            for (int i = 0; i < M; i++) {
                double ref = beta == 0.0f ? 0.0 : beta * (double)c0[q * sc + (size_t)j * ldc + i]; /* BLAS: beta 0 never reads C */
                for (int p = 0; p < K; p++)
                    ref += alpha * op_at(a + q * sa, lda, ta, i, p) * op_at(b + q * sb, ldb, tb, p, j);
                double got = c[q * sc + (size_t)j * ldc + i];
                wrong += !(fabs(got - ref) <= tol * (1.0 + fabs(ref)));
            }
    return wrong;
}

static void test_transposes(cublasHandle_t h)
{
    unsigned state = 7;
    float a[BATCH * 64], b[BATCH * 64], c0[BATCH * 64], c[BATCH * 64];
    for (int i = 0; i < BATCH * 64; i++) {
        a[i] = rnd(&state);
        b[i] = rnd(&state);
        c0[i] = rnd(&state);
    }
    float *da = to_device(a, BATCH * 64), *db = to_device(b, BATCH * 64), *dc = NULL;
    const float alpha = 1.5f, beta = -0.5f;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
            int lda = (ta ? K : M) + PAD, ldb = (tb ? N : K) + PAD, ldc = M + PAD;
            for (int entry = 0; entry < 3; entry++) {
                dc = to_device(c0, BATCH * 64);
                cublasStatus_t st;
                int batch = 1;
                if (entry == 0) {
                    st = cublasSgemm(h, opa, opb, M, N, K, &alpha, da, lda, db, ldb, &beta, dc, ldc);
                } else if (entry == 1) {
                    st = cublasGemmEx(h, opa, opb, M, N, K, &alpha, da, CUDA_R_32F, lda, db, CUDA_R_32F, ldb, &beta,
                                      dc, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
                } else {
                    batch = BATCH;
                    st = cublasSgemmStridedBatched(h, opa, opb, M, N, K, &alpha, da, lda, 64, db, ldb, 64, &beta, dc,
                                                   ldc, 64, BATCH);
                }
                CHECK_EQ_INT(st, CUBLAS_STATUS_SUCCESS);
                cudaMemcpy(c, dc, sizeof c, cudaMemcpyDeviceToHost);
                int wrong = count_wrong(c, c0, a, lda, 64, ta, b, ldb, 64, tb, 64, batch, alpha, beta, 1e-5);
                CHECK(wrong == 0, "entry %d transa=%c transb=%c: %d wrong elements", entry, "NT"[ta], "NT"[tb], wrong);
                CHECK(c[M] == c0[M], "padding row of C was written (%g)", c[M]);
                cudaFree(dc);
            }
        }
    cudaFree(da);
    cudaFree(db);
}

static void test_beta_zero_and_tf32(cublasHandle_t h)
{
    unsigned state = 99;
    float a[64], b[64], c[64], c32[64], nan_c[64];
    for (int i = 0; i < 64; i++) {
        a[i] = rnd(&state) * 3.0f;
        b[i] = rnd(&state) * 3.0f;
        nan_c[i] = NAN;
    }
    float *da = to_device(a, 64), *db = to_device(b, 64), *dc = to_device(nan_c, 64);
    const float one = 1.0f, zero = 0.0f;
    int lda = M + PAD, ldb = K + PAD, ldc = M + PAD;
    CHECK_EQ_INT(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &one, da, lda, db, ldb, &zero, dc, ldc),
                 CUBLAS_STATUS_SUCCESS);
    cudaMemcpy(c32, dc, sizeof c32, cudaMemcpyDeviceToHost);
    CHECK_EQ_INT(count_wrong(c32, nan_c, a, lda, 0, 0, b, ldb, 0, 0, 0, 1, 1.0f, 0.0f, 1e-5), 0);
    CHECK_EQ_INT(cublasSetMathMode(h, CUBLAS_TF32_TENSOR_OP_MATH), CUBLAS_STATUS_SUCCESS);
    CHECK_EQ_INT(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &one, da, lda, db, ldb, &zero, dc, ldc),
                 CUBLAS_STATUS_SUCCESS);
    cudaMemcpy(c, dc, sizeof c, cudaMemcpyDeviceToHost);
    CHECK_EQ_INT(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH), CUBLAS_STATUS_SUCCESS);
    int differ = 0;
    for (int j = 0; j < N; j++)
        for (int i = 0; i < M; i++)
            differ += c[j * ldc + i] != c32[j * ldc + i];
    CHECK(differ > 0, "TF32 mode gave bit-identical fp32 results");
    /* TF32 keeps 10 mantissa bits: relative input error 2^-11 each, so ~1e-3 on the products */
    CHECK_EQ_INT(count_wrong(c, nan_c, a, lda, 0, 0, b, ldb, 0, 0, 0, 1, 1.0f, 0.0f, 3e-3), 0);
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
}

static void test_rejections(cublasHandle_t h)
{
    float host[64] = {0}, *d = NULL;
    cudaMalloc((void **)&d, 64 * sizeof(float));
    const float one = 1.0f;
    char msg[4096];
    emu_capture_begin();
    cublasStatus_t bad_lda = cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &one, d, M - 1, d, K, &one, d, M);
    cublasStatus_t bad_lda_t = cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, M, N, K, &one, d, K - 1, d, K, &one, d, M);
    cublasStatus_t bad_ldb = cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, M, N, K, &one, d, M, d, N - 1, &one, d, M);
    cublasStatus_t bad_ldc = cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &one, d, M, d, K, &one, d, M - 1);
    cublasStatus_t neg = cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, -1, N, K, &one, d, M, d, K, &one, d, M);
    cublasStatus_t bad_op = cublasSgemm(h, (cublasOperation_t)7, CUBLAS_OP_N, M, N, K, &one, d, M, d, K, &one, d, M);
    cublasStatus_t overrun = cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &one, d, 40, d, K, &one, d, M);
    cublasStatus_t host_b = cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &one, d, M, host, K, &one, d, M);
    cublasStatus_t bad_batch = cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &one, d, M, 0, d, K,
                                                         0, &one, d, M, 0, -1);
    cublasStatus_t no_handle = cublasSgemm(NULL, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &one, d, M, d, K, &one, d, M);
    emu_capture_end(msg, sizeof msg);
    CHECK_EQ_INT(bad_lda, CUBLAS_STATUS_INVALID_VALUE);
    CHECK_EQ_INT(bad_lda_t, CUBLAS_STATUS_INVALID_VALUE);
    CHECK_EQ_INT(bad_ldb, CUBLAS_STATUS_INVALID_VALUE);
    CHECK_EQ_INT(bad_ldc, CUBLAS_STATUS_INVALID_VALUE);
    CHECK_EQ_INT(neg, CUBLAS_STATUS_INVALID_VALUE);
    CHECK_EQ_INT(bad_op, CUBLAS_STATUS_INVALID_VALUE);
    CHECK_EQ_INT(overrun, CUBLAS_STATUS_EXECUTION_FAILED);
    CHECK_EQ_INT(host_b, CUBLAS_STATUS_EXECUTION_FAILED);
    CHECK_EQ_INT(bad_batch, CUBLAS_STATUS_INVALID_VALUE);
    CHECK_EQ_INT(no_handle, CUBLAS_STATUS_NOT_INITIALIZED);
    CHECK_STR_CONTAINS(msg, "cublasSgemm: lda=4 < max(1, m=5) with transa=N (CUBLAS_STATUS_INVALID_VALUE)");
    CHECK_STR_CONTAINS(msg, "lda=2 < max(1, k=3) with transa=T");
    CHECK_STR_CONTAINS(msg, "ldb=3 < max(1, n=4) with transb=T");
    CHECK_STR_CONTAINS(msg, "ldc=4 < max(1, m=5)");
    CHECK_STR_CONTAINS(msg, "transa=7 is not CUBLAS_OP_N/T/C");
    CHECK_STR_CONTAINS(msg, "A (5x3, ld=40, batch=1, stride=0) runs");
    CHECK_STR_CONTAINS(msg, "B=");
    CHECK(strstr(msg, "cublasGemmEx") == NULL, "unexpected GemmEx message");
    cudaFree(d);
}

int main(void)
{
    cublasHandle_t h = NULL;
    cudaStream_t s = NULL;
    CHECK_EQ_INT(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
    CHECK_EQ_INT(cudaStreamCreate(&s), cudaSuccess);
    CHECK_EQ_INT(cublasSetStream(h, s), CUBLAS_STATUS_SUCCESS);
    test_transposes(h);
    test_beta_zero_and_tf32(h);
    test_rejections(h);
    CHECK(strcmp(cublasGetStatusName(CUBLAS_STATUS_INVALID_VALUE), "CUBLAS_STATUS_INVALID_VALUE") == 0, "status name");
    CHECK_EQ_INT(cublasDestroy(h), CUBLAS_STATUS_SUCCESS);
    cudaStreamDestroy(s);
    return check_done("test_cudaemu_cublas");
}
