/* test_cudaemu_cublas.c — the cuBLAS shim computes column-major GEMMs like cuBLAS and rejects
 * what cuBLAS rejects.
 *
 * Plain C against the real cublas_v2.h. Proves: cublasSgemm and cublasGemmEx match a naive
 * double-precision reference for all four transpose combinations with leading dimensions larger
 * than the rows; beta = 0 ignores NaN in C; invalid lda/ldb/ldc, negative sizes and bad transposes
 * give CUBLAS_STATUS_INVALID_VALUE with a stderr line naming the argument; a matrix running past
 * its allocation, or a host matrix, is refused; TF32 mode rounds the inputs (results differ from
 * fp32 but stay within TF32 error).
 * bf16 (the GPT-2 mixed-precision path): cublasGemmEx with bf16 A/B and C bf16 or fp32 matches a
 * double reference over the widened inputs within the derived bound, for all four transposes,
 * beta 0 (NaN C never read) and 1, every operand in an allocation of exactly its size; a bf16 C is
 * rounded to nearest even (ties, NaN, inf) and its padding untouched; type combinations cuBLAS's
 * table lacks are CUBLAS_STATUS_NOT_SUPPORTED; a bf16 operand past its allocation is reported in
 * 2-byte elements. */
#include "emu_test_util.h"
#include "runtime/base/half.h"
#include "tests/check.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>

enum { M = 5, N = 4, K = 3, PAD = 2 };

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

/* Checks C (ldc = M + PAD) against alpha op(A) op(B) + beta C0. */
static int count_wrong(const float *c, const float *c0, const float *a, int lda, int ta, const float *b, int ldb,
                       int tb, float alpha, float beta, double tol)
{
    int wrong = 0, ldc = M + PAD;
    for (int j = 0; j < N; j++)
        for (int i = 0; i < M; i++) {
            double ref = beta == 0.0f ? 0.0 : beta * (double)c0[(size_t)j * ldc + i]; /* BLAS: beta 0 never reads C */
            for (int p = 0; p < K; p++)
                ref += alpha * op_at(a, lda, ta, i, p) * op_at(b, ldb, tb, p, j);
            double got = c[(size_t)j * ldc + i];
            wrong += !(fabs(got - ref) <= tol * (1.0 + fabs(ref)));
        }
    return wrong;
}

static void test_transposes(cublasHandle_t h)
{
    unsigned state = 7;
    float a[64], b[64], c0[64], c[64];
    for (int i = 0; i < 64; i++) {
        a[i] = rnd(&state);
        b[i] = rnd(&state);
        c0[i] = rnd(&state);
    }
    float *da = to_device(a, 64), *db = to_device(b, 64), *dc = NULL;
    const float alpha = 1.5f, beta = -0.5f;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
            int lda = (ta ? K : M) + PAD, ldb = (tb ? N : K) + PAD, ldc = M + PAD;
            for (int entry = 0; entry < 2; entry++) {
                dc = to_device(c0, 64);
                cublasStatus_t st;
                if (entry == 0)
                    st = cublasSgemm(h, opa, opb, M, N, K, &alpha, da, lda, db, ldb, &beta, dc, ldc);
                else
                    st = cublasGemmEx(h, opa, opb, M, N, K, &alpha, da, CUDA_R_32F, lda, db, CUDA_R_32F, ldb, &beta,
                                      dc, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
                CHECK_EQ_INT(st, CUBLAS_STATUS_SUCCESS);
                cudaMemcpy(c, dc, sizeof c, cudaMemcpyDeviceToHost);
                int wrong = count_wrong(c, c0, a, lda, ta, b, ldb, tb, alpha, beta, 1e-5);
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
    CHECK_EQ_INT(count_wrong(c32, nan_c, a, lda, 0, b, ldb, 0, 1.0f, 0.0f, 1e-5), 0);
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
    CHECK_EQ_INT(count_wrong(c, nan_c, a, lda, 0, b, ldb, 0, 1.0f, 0.0f, 3e-3), 0);
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

/* --- bf16: the test keeps bf16 as raw uint16_t bits and widens them itself (exact). --- */
enum { BM = 9, BN = 7, BK = 40 }; /* K large enough that fp32 accumulation order matters */

/* Inputs only need to be some bf16 values: truncation keeps this independent of the shim's rounding. */
static uint16_t bf16_trunc(float x)
{
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    return (uint16_t)(bits >> 16);
}

static void *to_device_bytes(const void *h, size_t bytes)
{
    void *d = NULL;
    cudaMalloc(&d, bytes);
    cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice);
    return d;
}

/* Elements a rows x cols (ld) matrix spans: allocating exactly this many proves a correct operand is
 * not flagged (an fp32-sized extent would run past it). */
static size_t span(int rows, int cols, int ld)
{
    return (size_t)ld * (size_t)(cols - 1) + (size_t)rows;
}

/* Tolerance. bf16 x bf16 products are exact in fp32 (8 + 8 significant bits <= 24) and the double
 * reference over the widened inputs is exact to ~2^-53, so the fp32 path's error is roundings
 * only: alpha (up to 2 per product where the library folds alpha into a or b), BK - 1 additions on
 * any product's path through whatever summation order, and beta*c plus its addition. Each term
 * thus carries at most BK + 2 factors (1 + d), |d| <= u = 2^-24, and
 *     |C_fp32 - ref| <= (BK + 3) * 2^-24 * (|alpha| sum_p |a_ip b_pj| + |beta c0_ij|)
 * (+1 covers gamma_n = n u / (1 - n u) and the reference's own rounding). A bf16 C is that float
 * x rounded once to nearest even: bf16 keeps 8 significant bits, so for |x| in [2^e, 2^(e+1)) an
 * ulp is 2^(e-7) and the rounding moves x by at most half of it, 2^(e-8) <= 2^-8 |x| (2^-9 would
 * be a quarter ulp: correct results fail it),
 *     |C_bf16 - ref| <= bound_fp32 + 2^-8 * (|ref| + bound_fp32). */
static int count_wrong_bf16(const uint16_t *a16, int lda, int ta, const uint16_t *b16, int ldb, int tb, const void *c0,
                            const void *c, int c_bf16, int ldc, float alpha, float beta)
{
    int wrong = 0;
    for (int j = 0; j < BN; j++)
        for (int i = 0; i < BM; i++) {
            size_t at = (size_t)j * ldc + i;
            double c_in = c_bf16 ? bf16_to_float(((const uint16_t *)c0)[at]) : ((const float *)c0)[at];
            double dot = 0.0, mag = 0.0;
            for (int p = 0; p < BK; p++) {
                size_t ia = ta ? (size_t)i * lda + p : (size_t)p * lda + i;
                size_t ib = tb ? (size_t)p * ldb + j : (size_t)j * ldb + p;
                double prod = (double)bf16_to_float(a16[ia]) * bf16_to_float(b16[ib]);
                dot += prod;
                mag += fabs(prod);
            }
            double ref = alpha * dot + (beta == 0.0f ? 0.0 : beta * c_in); /* beta 0: C never read */
            double bound = (BK + 3) * 0x1p-24 * (fabs(alpha) * mag + (beta == 0.0f ? 0.0 : fabs(beta * c_in)));
            if (c_bf16)
                bound += 0x1p-8 * (fabs(ref) + bound);
            double got = c_bf16 ? bf16_to_float(((const uint16_t *)c)[at]) : ((const float *)c)[at];
            wrong += !(fabs(got - ref) <= bound);
        }
    return wrong;
}

/* C's padding rows (ldc > BM) must keep their bytes: a bf16 C written as fp32 would spill into them.
 * The last column's padding lies past C's allocation. */
static int count_padding_changed(const void *c0, const void *c, size_t esize, int ldc)
{
    int changed = 0;
    for (int j = 0; j < BN - 1; j++)
        for (int i = BM; i < ldc; i++) {
            size_t at = ((size_t)j * ldc + i) * esize;
            changed += memcmp((const char *)c0 + at, (const char *)c + at, esize) != 0;
        }
    return changed;
}

static void test_bf16_transposes(cublasHandle_t h)
{
    enum { MAXE = (BK + PAD) * (BM + PAD) }; /* room for any operand */
    unsigned state = 11;
    static uint16_t a16[MAXE], b16[MAXE], c16_0[MAXE], c16[MAXE], nan16[MAXE];
    static float c32_0[MAXE], c32[MAXE], nan32[MAXE];
    for (int i = 0; i < MAXE; i++) {
        a16[i] = bf16_trunc(rnd(&state));
        b16[i] = bf16_trunc(rnd(&state) * 4.0f);
        c16_0[i] = bf16_trunc(rnd(&state) * 8.0f);
        c32_0[i] = rnd(&state) * 8.0f;
        nan16[i] = 0x7fc0;
        nan32[i] = NAN;
    }
    const float alpha = 1.5f;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int cbf = 0; cbf < 2; cbf++)
                for (int bi = 0; bi < 2; bi++) {
                    const float beta = bi ? 1.0f : 0.0f;
                    cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
                    int ra = ta ? BK : BM, ca = ta ? BM : BK, rb = tb ? BN : BK, cb = tb ? BK : BN;
                    int lda = ra + PAD, ldb = rb + PAD, ldc = BM + PAD;
                    size_t na = span(ra, ca, lda), nb = span(rb, cb, ldb), nc = span(BM, BN, ldc);
                    size_t esize = cbf ? 2 : 4;
                    const void *c_init = bi ? (cbf ? (const void *)c16_0 : (const void *)c32_0)
                                            : (cbf ? (const void *)nan16 : (const void *)nan32);
                    void *c_host = cbf ? (void *)c16 : (void *)c32;
                    void *da = to_device_bytes(a16, na * 2), *db = to_device_bytes(b16, nb * 2);
                    void *dc = to_device_bytes(c_init, nc * esize);
                    cudaDataType ct = cbf ? CUDA_R_16BF : CUDA_R_32F;
                    CHECK_EQ_INT(cublasGemmEx(h, opa, opb, BM, BN, BK, &alpha, da, CUDA_R_16BF, lda, db, CUDA_R_16BF,
                                              ldb, &beta, dc, ct, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                                 CUBLAS_STATUS_SUCCESS);
                    cudaMemcpy(c_host, dc, nc * esize, cudaMemcpyDeviceToHost);
                    int wrong = count_wrong_bf16(a16, lda, ta, b16, ldb, tb, c_init, c_host, cbf, ldc, alpha, beta);
                    CHECK(wrong == 0, "bf16 transa=%c transb=%c C=%s beta=%g: %d wrong elements", "NT"[ta], "NT"[tb],
                          cbf ? "bf16" : "fp32", beta, wrong);
                    int padding = count_padding_changed(c_init, c_host, esize, ldc);
                    CHECK(padding == 0, "bf16 transa=%c transb=%c C=%s: %d padding elements of C written", "NT"[ta],
                          "NT"[tb], cbf ? "bf16" : "fp32", padding);
                    cudaFree(da);
                    cudaFree(db);
                    cudaFree(dc);
                }
}

/* One bf16 C element per row of A, each a dot of 3 exact terms whose fp32 sum is exact, so the only
 * rounding is the final one to bf16 (7 stored bits: ulp at 1 is 2^-7). */
static void test_bf16_rounding(cublasHandle_t h)
{
    enum { CASES = 6, KR = 3 };
    const float a[CASES][KR] = {
        {1.0f, 0x1p-8f, 0.0f},          /* 1 + 2^-8: tie between 1 and 1 + 2^-7 -> even 1 (0x3f80) */
        {1.0f, 0x3p-8f, 0.0f},          /* 1 + 3 2^-8: tie between 1 + 2^-7 and 1 + 2^-6 -> even 0x3f82 */
        {1.0f, 0x1p-8f, 0x1p-20f},      /* just above the tie -> up to 1 + 2^-7 (0x3f81) */
        {-1.0f, -0x1p-8f, -0x1p-20f},   /* the same, negative (0xbf81) */
        {NAN, 1.0f, 0.0f},              /* NaN stays NaN */
        {INFINITY, 1.0f, 0.0f},         /* inf stays inf (0x7f80) */
    };
    const uint16_t want[CASES] = {0x3f80, 0x3f82, 0x3f81, 0xbf81, 0, 0x7f80};
    uint16_t a16[CASES * KR], b16[CASES * KR], c16[CASES];
    for (int q = 0; q < CASES; q++)
        for (int p = 0; p < KR; p++) {
            a16[p * CASES + q] = bf16_trunc(a[q][p]); /* column-major, all exact in bf16 */
            b16[q * KR + p] = 0x3f80;                 /* 1.0 */
        }
    void *da = to_device_bytes(a16, sizeof a16), *db = to_device_bytes(b16, sizeof b16), *dc = NULL;
    cudaMalloc(&dc, sizeof c16);
    const float one = 1.0f, zero = 0.0f;
    /* A is CASES x KR, B is KR x 1 (ones), C is CASES x 1; PEDANTIC is in the same row of cuBLAS's
     * table as COMPUTE_32F */
    CHECK_EQ_INT(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, CASES, 1, KR, &one, da, CUDA_R_16BF, CASES, db, CUDA_R_16BF,
                              KR, &zero, dc, CUDA_R_16BF, CASES, CUBLAS_COMPUTE_32F_PEDANTIC, CUBLAS_GEMM_DEFAULT),
                 CUBLAS_STATUS_SUCCESS);
    cudaMemcpy(c16, dc, sizeof c16, cudaMemcpyDeviceToHost);
    for (int q = 0; q < CASES; q++) {
        if (q == 4)
            CHECK(isnan(bf16_to_float(c16[q])), "case %d: NaN became 0x%04x", q, (unsigned)c16[q]);
        else
            CHECK(c16[q] == want[q], "case %d: got 0x%04x, expected 0x%04x", q, (unsigned)c16[q], (unsigned)want[q]);
    }
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
}

static void test_bf16_rejections(cublasHandle_t h)
{
    void *a = NULL, *a_short = NULL, *b = NULL, *c = NULL, *c16f = NULL;
    cudaMalloc(&a, M * K * 2);
    cudaMalloc(&a_short, (M * K - 1) * 2); /* one bf16 element short of M x K */
    cudaMalloc(&b, K * N * 2);
    cudaMalloc(&c, M * N * 2);
    cudaMalloc(&c16f, M * N * 2);
    const float one = 1.0f;
    char msg[4096];
    emu_capture_begin();
    cublasStatus_t c_fp16 = cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &one, a, CUDA_R_16BF, M, b, CUDA_R_16BF,
                                         K, &one, c16f, CUDA_R_16F, M, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    cublasStatus_t fast_tf32 = cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &one, a, CUDA_R_16BF, M, b,
                                            CUDA_R_16BF, K, &one, c, CUDA_R_16BF, M, CUBLAS_COMPUTE_32F_FAST_TF32,
                                            CUBLAS_GEMM_DEFAULT);
    cublasStatus_t mixed_ab = cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &one, a, CUDA_R_16BF, M, b, CUDA_R_32F,
                                           K, &one, c, CUDA_R_32F, M, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    cublasStatus_t short_a = cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &one, a_short, CUDA_R_16BF, M, b,
                                          CUDA_R_16BF, K, &one, c, CUDA_R_16BF, M, CUBLAS_COMPUTE_32F,
                                          CUBLAS_GEMM_DEFAULT);
    /* ldb K + 2 stretches B's K x N over (K + 2)(N - 1) + K elements: 6 more than its allocation */
    cublasStatus_t short_b = cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &one, a, CUDA_R_16BF, M, b, CUDA_R_16BF,
                                          K + 2, &one, c, CUDA_R_16BF, M, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    emu_capture_end(msg, sizeof msg);
    CHECK_EQ_INT(c_fp16, CUBLAS_STATUS_NOT_SUPPORTED);
    CHECK_EQ_INT(fast_tf32, CUBLAS_STATUS_NOT_SUPPORTED);
    CHECK_EQ_INT(mixed_ab, CUBLAS_STATUS_NOT_SUPPORTED);
    CHECK_EQ_INT(short_a, CUBLAS_STATUS_EXECUTION_FAILED);
    CHECK_EQ_INT(short_b, CUBLAS_STATUS_EXECUTION_FAILED);
    CHECK_STR_CONTAINS(msg, "cublasGemmEx: A/B CUDA_R_16BF with Ctype CUDA_R_16F (2)");
    CHECK_STR_CONTAINS(msg, "A/B CUDA_R_16BF with compute type CUBLAS_COMPUTE_32F_FAST_TF32 (77)");
    CHECK_STR_CONTAINS(msg, "cublasGemmEx: Atype CUDA_R_16BF (14) differs from Btype CUDA_R_32F (0)");
    CHECK_STR_CONTAINS(msg, "cublasGemmEx: A (5x3, ld=5, batch=1, stride=0) runs 2 bytes past the end of its "
                            "cudaMalloc allocation (2-byte CUDA_R_16BF elements) (CUBLAS_STATUS_EXECUTION_FAILED)");
    CHECK_STR_CONTAINS(msg, "B (3x4, ld=5, batch=1, stride=0) runs 12 bytes past the end");
    cudaFree(a);
    cudaFree(a_short);
    cudaFree(b);
    cudaFree(c);
    cudaFree(c16f);
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
    test_bf16_transposes(h);
    test_bf16_rounding(h);
    test_bf16_rejections(h);
    CHECK(strcmp(cublasGetStatusName(CUBLAS_STATUS_INVALID_VALUE), "CUBLAS_STATUS_INVALID_VALUE") == 0, "status name");
    CHECK_EQ_INT(cublasDestroy(h), CUBLAS_STATUS_SUCCESS);
    cudaStreamDestroy(s);
    return check_done("test_cudaemu_cublas");
}
