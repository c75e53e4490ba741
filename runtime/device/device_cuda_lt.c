/* device_cuda_lt.c — the CUDA backend's epilogue GEMMs (device.h: gemm_bias, gemm_bias_gelu,
 * gemm_gelu_backward) through cuBLASLt: one GEMM whose epilogue adds the bias, applies GPT-2's
 * tanh GELU (writing its input too, for backward) or multiplies by the GELU's derivative, on the
 * fp32 accumulator before the one rounding to the tensor type. So the linear layers' outputs are
 * written once instead of written, read and written again by separate element-wise passes. Owns
 * the cuBLASLt handle and its workspace.
 *
 * Where cuBLASLt offers no kernel for a call (its heuristic returns none; the GELU input's row
 * stride must be a multiple of 8 elements, so that case is not even asked), or an operand is less
 * than 16-byte aligned (address or row stride: on an H100 with cuBLASLt 13.1 the algorithm chosen
 * for 4- and 8-byte aligned bf16 operands computed wrong GELU epilogues without an error, while
 * the 16-byte aligned ones, and the unfused path, were right), the op runs unfused
 * (gemm_epilogue.c), and the log says so once per device. Every cuBLASLt call is checked, and the
 * per-call descriptors are freed on every path. Arguments arrive checked (device_check_*.c). This file
 * must not hold kernels nor know about models. */
#include "runtime/device/device_cuda.h"

#include <cublasLt.h>

#include <stdlib.h>

#include "runtime/base/align.h"
#include "runtime/base/log.h"

/* NVIDIA's recommendation for Hopper (32 MiB; less is enough on older GPUs). */
#define LT_WORKSPACE_BYTES ((size_t)32 << 20)

struct cuda_lt {
    cublasLtHandle_t handle;
    void *workspace;
    bool tf32;                    /* cuda.tf32: fp32 GEMMs may round their inputs to TF32 */
    bool told_unfused;            /* the one log line about an unfused call was written */
};

int device_cuda_lt_create(bool tf32, cuda_lt **out, ddp_err *err)
{
    cuda_lt *lt = calloc(1, sizeof *lt);
    *out = NULL;
    if (!lt)
        return ddp_fail(err, DDP_ERUNTIME, "cuBLASLt: out of host memory");
    lt->tf32 = tf32;
    cublasStatus_t st = cublasLtCreate(&lt->handle);
    if (st != CUBLAS_STATUS_SUCCESS) {
        free(lt);
        return ddp_fail(err, DDP_ERUNTIME, "%s:%d: cublasLtCreate: %s", __FILE__, __LINE__,
                        cublasGetStatusString(st));
    }
    cudaError_t e = cudaMalloc(&lt->workspace, LT_WORKSPACE_BYTES);
    if (e != cudaSuccess) {
        device_cuda_lt_destroy(NULL, lt);
        return ddp_fail(err, DDP_ERUNTIME, "%s:%d: cudaMalloc(cuBLASLt workspace, %zu bytes): %s", __FILE__,
                        __LINE__, LT_WORKSPACE_BYTES, cudaGetErrorString(e));
    }
    *out = lt;
    return DDP_OK;
}

void device_cuda_lt_destroy(device *d, cuda_lt *lt)
{
    if (!lt)
        return;
    cudaError_t e = lt->workspace ? cudaFree(lt->workspace) : cudaSuccess; /* an earlier fault may surface */
    device_cuda_release_failed(d, "cudaFree(cuBLASLt workspace)", e == cudaSuccess ? NULL : cudaGetErrorString(e));
    cublasStatus_t st = lt->handle ? cublasLtDestroy(lt->handle) : CUBLAS_STATUS_SUCCESS;
    device_cuda_release_failed(d, "cublasLtDestroy", st == CUBLAS_STATUS_SUCCESS ? NULL : cublasGetStatusString(st));
    free(lt);
}

/* One call's descriptors, created in lt_describe and released together. */
typedef struct lt_call {
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, d;
    cublasLtMatmulPreference_t pref;
} lt_call;

/* Destroys every descriptor made, whatever fails; the first failure is returned. */
static cublasStatus_t lt_release(lt_call *c)
{
    cublasStatus_t st[5] = {
        c->pref ? cublasLtMatmulPreferenceDestroy(c->pref) : CUBLAS_STATUS_SUCCESS,
        c->d ? cublasLtMatrixLayoutDestroy(c->d) : CUBLAS_STATUS_SUCCESS,
        c->b ? cublasLtMatrixLayoutDestroy(c->b) : CUBLAS_STATUS_SUCCESS,
        c->a ? cublasLtMatrixLayoutDestroy(c->a) : CUBLAS_STATUS_SUCCESS,
        c->desc ? cublasLtMatmulDescDestroy(c->desc) : CUBLAS_STATUS_SUCCESS,
    };
    for (int i = 0; i < 5; i++)
        if (st[i] != CUBLAS_STATUS_SUCCESS)
            return st[i];
    return CUBLAS_STATUS_SUCCESS;
}

/* What one epilogue GEMM computes, in the row-major terms of device.h. */
typedef struct lt_gemm {
    const char *op;
    cublasLtEpilogue_t epilogue;
    tensor_dtype t;
    bool ta, tb;
    int64_t m, n, k, lda, ldb;
    const void *a, *b, *bias;
    const void *aux;              /* the GELU's input: written (GELU_AUX_BIAS) or read (DGELU) */
    void *y;
} lt_gemm;

static cublasStatus_t set_desc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const void *value,
                               size_t bytes)
{
    return cublasLtMatmulDescSetAttribute(desc, attr, value, bytes);
}

/* cuBLASLt's MIN_ALIGNMENT preferences assume this much when unset. */
#define LT_ASSUMED_ALIGNMENT 256u

static uint32_t lt_alignment(const lt_gemm *g, const void *p, int64_t ld)
{
    return operand_alignment(p, (uint64_t)ld * tensor_dtype_size(g->t), LT_ASSUMED_ALIGNMENT);
}

/* The heuristic assumes 256-byte aligned operands unless told otherwise and may then pick an
 * algorithm that reads them with wider vectors than they allow. So it is told what each operand
 * really has (cuBLASLt's A is our B, its B our A). */
static int lt_promise_alignment(const lt_gemm *g, cublasLtMatmulPreference_t pref, ddp_err *err)
{
    const cublasLtMatmulPreferenceAttributes_t attrs[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    const uint32_t have[4] = {lt_alignment(g, g->b, g->ldb), lt_alignment(g, g->a, g->lda), lt_alignment(g, g->y, g->n),
                              lt_alignment(g, g->y, g->n)};
    for (int i = 0; i < 4; i++)
        CUBLAS_TRY(cublasLtMatmulPreferenceSetAttribute(pref, attrs[i], &have[i], sizeof have[i]));
    return DDP_OK;
}

/* Row-major Y[m,n] = op(A)·op(B) is column-major Yᵀ[n,m] = op(B)ᵀ·op(A)ᵀ (device_cuda_gemm's
 * mapping): cuBLASLt's first operand is our B, its second our A, its D is n x m with ld n, and
 * the bias (one per row of D) has our n elements. Layouts describe matrices as stored. */
static int lt_describe(const cuda_lt *lt, const lt_gemm *g, lt_call *c, ddp_err *err)
{
    cudaDataType_t type = g->t == TENSOR_BF16 ? CUDA_R_16BF : CUDA_R_32F;
    cublasComputeType_t compute = g->t == TENSOR_F32 && lt->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    cublasOperation_t op_first = g->tb ? CUBLAS_OP_T : CUBLAS_OP_N, op_second = g->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    uint64_t n = (uint64_t)g->n, m = (uint64_t)g->m, k = (uint64_t)g->k;
    CUBLAS_TRY(cublasLtMatmulDescCreate(&c->desc, compute, CUDA_R_32F));
    CUBLAS_TRY(set_desc(c->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof op_first));
    CUBLAS_TRY(set_desc(c->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof op_second));
    CUBLAS_TRY(set_desc(c->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &g->epilogue, sizeof g->epilogue));
    if (g->bias)
        CUBLAS_TRY(set_desc(c->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g->bias, sizeof g->bias));
    if (g->aux) {
        int64_t aux_ld = g->n;
        CUBLAS_TRY(set_desc(c->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &g->aux, sizeof g->aux));
        CUBLAS_TRY(set_desc(c->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof aux_ld));
    }
    CUBLAS_TRY(cublasLtMatrixLayoutCreate(&c->a, type, g->tb ? k : n, g->tb ? n : k, g->ldb));
    CUBLAS_TRY(cublasLtMatrixLayoutCreate(&c->b, type, g->ta ? m : k, g->ta ? k : m, g->lda));
    CUBLAS_TRY(cublasLtMatrixLayoutCreate(&c->d, type, n, m, g->n));
    uint64_t workspace = LT_WORKSPACE_BYTES;
    CUBLAS_TRY(cublasLtMatmulPreferenceCreate(&c->pref));
    CUBLAS_TRY(cublasLtMatmulPreferenceSetAttribute(c->pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                                    sizeof workspace));
    return lt_promise_alignment(g, c->pref, err);
}

/* With c described: asks cuBLASLt for a kernel and queues it, or leaves *fused false. */
static int lt_execute(device *d, cuda_lt *lt, const lt_gemm *g, const lt_call *c, bool *fused, ddp_err *err)
{
    cublasLtMatmulHeuristicResult_t found;
    int count = 0;
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(lt->handle, c->desc, c->a, c->b, c->d, c->d, c->pref, 1,
                                                       &found, &count);
    if (st == CUBLAS_STATUS_NOT_SUPPORTED || (st == CUBLAS_STATUS_SUCCESS && count == 0))
        return DDP_OK;
    if (st != CUBLAS_STATUS_SUCCESS)
        return ddp_fail(err, DDP_ERUNTIME, "%s:%d: %s: cublasLtMatmulAlgoGetHeuristic: %s", __FILE__, __LINE__,
                        g->op, cublasGetStatusString(st));
    st = cublasLtMatmul(lt->handle, c->desc, &one, g->b, c->a, g->a, c->b, &zero, g->y, c->d, g->y, c->d,
                        &found.algo, lt->workspace, LT_WORKSPACE_BYTES, device_cuda_stream(d));
    if (st != CUBLAS_STATUS_SUCCESS)
        return ddp_fail(err, DDP_ERUNTIME, "%s:%d: %s: cublasLtMatmul (m=%lld n=%lld k=%lld): %s", __FILE__,
                        __LINE__, g->op, (long long)g->m, (long long)g->n, (long long)g->k,
                        cublasGetStatusString(st));
    *fused = true;
    return DDP_OK;
}

/* Queues the fused GEMM, or sets *fused false when cuBLASLt has no kernel for it. */
static int lt_run(device *d, cuda_lt *lt, const lt_gemm *g, bool *fused, ddp_err *err)
{
    lt_call c = {0};
    int rc = lt_describe(lt, g, &c, err);
    if (!rc)
        rc = lt_execute(d, lt, g, &c, fused, err);
    cublasStatus_t st = lt_release(&c);
    if (!rc && st != CUBLAS_STATUS_SUCCESS)
        rc = ddp_fail(err, DDP_ERUNTIME, "%s:%d: %s: destroying cuBLASLt's descriptors: %s", __FILE__, __LINE__,
                      g->op, cublasGetStatusString(st));
    return rc;
}

/* Runs g fused when cuBLASLt can; otherwise reports so once and leaves it to the caller. */
static int lt_try(device *d, const lt_gemm *g, bool *fused, ddp_err *err)
{
    cuda_lt *lt = device_cuda_lt(d);
    *fused = false;
    /* cuBLASLt requires the GELU input's leading dimension to be a multiple of 8; below 16-byte
     * alignment its GELU epilogues were wrong on an H100 (see the top of this file). The bias's
     * alignment cannot be promised to the heuristic, which may pick a kernel reading it in 16-byte
     * vectors (a misaligned-address fault), so a bias below that is not fused either. */
    bool aligned = lt_alignment(g, g->a, g->lda) >= 16 && lt_alignment(g, g->b, g->ldb) >= 16 &&
                   lt_alignment(g, g->y, g->n) >= 16 && (!g->aux || lt_alignment(g, g->aux, g->n) >= 16) &&
                   (!g->bias || lt_alignment(g, g->bias, 0) >= 16);
    int rc = !aligned || (g->aux && g->n % 8 != 0) ? DDP_OK : lt_run(d, lt, g, fused, err);
    if (!rc && !*fused && !lt->told_unfused) {
        lt->told_unfused = true;
        log_info("cuda device %d: %s (m=%lld n=%lld k=%lld, %s) is not fused: %s; running it as a GEMM and an "
                 "element-wise pass (said once)", d->index, g->op, (long long)g->m, (long long)g->n, (long long)g->k,
                 g->t == TENSOR_BF16 ? "bf16" : "fp32", aligned ? "cuBLASLt has no kernel for it" :
                 "an operand or row stride is not 16-byte aligned");
    }
    return rc;
}

int device_cuda_gemm_bias(device *d, tensor_dtype t, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void *a,
                          int64_t lda, const void *b, int64_t ldb, const void *bias, void *y, ddp_err *err)
{
    lt_gemm g = {"gemm_bias", CUBLASLT_EPILOGUE_BIAS, t, ta, tb, m, n, k, lda, ldb, a, b, bias, NULL, y};
    bool fused;
    int rc = lt_try(d, &g, &fused, err);
    return rc || fused ? rc : device_unfused_gemm_bias(d, t, ta, tb, m, n, k, a, lda, b, ldb, bias, y, err);
}

int device_cuda_gemm_bias_gelu(device *d, tensor_dtype t, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                               const void *a, int64_t lda, const void *b, int64_t ldb, const void *bias, void *pre,
                               void *y, ddp_err *err)
{
    lt_gemm g = {"gemm_bias_gelu", CUBLASLT_EPILOGUE_GELU_AUX_BIAS, t, ta, tb, m, n, k, lda, ldb, a, b, bias, pre, y};
    bool fused;
    int rc = lt_try(d, &g, &fused, err);
    return rc || fused ? rc : device_unfused_gemm_bias_gelu(d, t, ta, tb, m, n, k, a, lda, b, ldb, bias, pre, y, err);
}

int device_cuda_gemm_gelu_backward(device *d, tensor_dtype t, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                                   const void *a, int64_t lda, const void *b, int64_t ldb, const void *pre, void *dx,
                                   ddp_err *err)
{
    lt_gemm g = {"gemm_gelu_backward", CUBLASLT_EPILOGUE_DGELU, t, ta, tb, m, n, k, lda, ldb, a, b, NULL, pre, dx};
    bool fused;
    int rc = lt_try(d, &g, &fused, err);
    return rc || fused ? rc : device_unfused_gemm_gelu_backward(d, t, ta, tb, m, n, k, a, lda, b, ldb, pre, dx, err);
}
