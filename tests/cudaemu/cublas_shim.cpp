/* cublas_shim.cpp — the cuBLAS entry points ddprun calls (cublas_v2.h): handles, and the GEMMs
 * computed by the emulator's one GEMM engine (cublas_gemm.cpp).
 *
 * Column-major as cuBLAS. Arguments are validated exactly as the cuBLAS documentation lists for
 * gemm (sizes, transposes, leading dimensions, NULL scalars -> CUBLAS_STATUS_INVALID_VALUE) and,
 * beyond what cuBLAS can check, every matrix must lie inside one cudaMalloc'd allocation
 * (otherwise a GPU faults with an illegal address: here CUBLAS_STATUS_EXECUTION_FAILED). Every
 * rejection prints one "cudaemu: cublas...: <argument>" line. Arguments are checked at the call;
 * the GEMM itself is queued on the handle's stream and runs when that stream is drained. When
 * TF32 is allowed (math mode CUBLAS_TF32_TENSOR_OP_MATH or compute type
 * CUBLAS_COMPUTE_32F_FAST_TF32) the inputs are rounded to TF32 like tensor cores do, so
 * tolerances are tested against what a GPU really computes.
 * cublasGemmEx also takes bf16 A and B (C bf16 or fp32), the rows of cuBLAS's documented type
 * table that the bf16 mixed-precision path uses; every other row, and every combination the table
 * lacks, is CUBLAS_STATUS_NOT_SUPPORTED. bf16 operands are widened to float exactly, the float
 * GEMM accumulates, and a bf16 C is rounded once, to nearest even, at the end; extents are checked
 * in bytes of each operand's own element type.
 * Owns the cuBLAS handle and cuBLAS's type table; must not compute or check GEMMs itself: the
 * engine does, for this shim and the cuBLASLt one alike. */
#include "cublas_gemm.h"
#include "cudaemu_internal.h"

#include <cublas_v2.h>

struct cublasContext {
    int device;                   /* current when the handle was created */
    cudaStream_t stream;
    cublasMath_t math_mode;
    cublasPointerMode_t pointer_mode;
};

namespace ddp_cudaemu {

/* The engine's call for one cuBLAS GEMM: fp32 scalars, C both read and written (in place). */
static gemm_call cublas_call(const char *fn, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
                             const void *alpha, const void *beta)
{
    gemm_call g;
    g.fn = fn;
    g.transa = transa;
    g.transb = transb;
    g.m = m;
    g.n = n;
    g.k = k;
    g.alpha = static_cast<const float *>(alpha);
    g.beta = static_cast<const float *>(beta);
    return g;
}

static void set_operands(gemm_call *g, const void *A, int lda, const void *B, int ldb, void *C, int ldc)
{
    g->A = A;
    g->lda = lda;
    g->B = B;
    g->ldb = ldb;
    g->C = C;
    g->D = C;
    g->ldc = ldc;
}

/* Takes device, stream and pointer mode from the handle (a NULL one is refused first, as cuBLAS
 * does), then validates and queues the call on the handle's stream. */
static cublasStatus_t run_on_handle(cublasHandle_t handle, gemm_call g)
{
    if (!handle)
        return reject(CUBLAS_STATUS_NOT_INITIALIZED, "%s: handle is NULL", g.fn);
    g.device = handle->device;
    g.stream = handle->stream;
    g.device_scalars = handle->pointer_mode == CUBLAS_POINTER_MODE_DEVICE;
    return run_gemm(g);
}

static bool tf32_by_math_mode(cublasHandle_t h)
{
    return h && (h->math_mode & 0xf) == CUBLAS_TF32_TENSOR_OP_MATH;
}

static const char *compute_name(cublasComputeType_t c)
{
    switch (c) {
    case CUBLAS_COMPUTE_32F: return "CUBLAS_COMPUTE_32F";
    case CUBLAS_COMPUTE_32F_PEDANTIC: return "CUBLAS_COMPUTE_32F_PEDANTIC";
    case CUBLAS_COMPUTE_32F_FAST_TF32: return "CUBLAS_COMPUTE_32F_FAST_TF32";
    case CUBLAS_COMPUTE_32F_FAST_16F: return "CUBLAS_COMPUTE_32F_FAST_16F";
    case CUBLAS_COMPUTE_32F_FAST_16BF: return "CUBLAS_COMPUTE_32F_FAST_16BF";
    case CUBLAS_COMPUTE_16F: return "CUBLAS_COMPUTE_16F";
    case CUBLAS_COMPUTE_64F: return "CUBLAS_COMPUTE_64F";
    default: return "another cublasComputeType_t";
    }
}

/* cuBLAS documents the type combinations cublasGemmEx (and its batched forms) accepts in one
 * table: Atype always equals Btype; CUBLAS_COMPUTE_32F and _32F_PEDANTIC (float scalars) take A/B
 * 16BF with C 16BF or 32F, 16F with C 16F or 32F, 8I with C 32F and 32F with C 32F;
 * CUBLAS_COMPUTE_32F_FAST_16F, _FAST_16BF and _FAST_TF32 take 32F A/B/C only (so bf16 A/B with
 * FAST_TF32 is refused, as cuBLAS refuses it). Emulated are the 32F row (with 32F, PEDANTIC
 * and FAST_TF32) and the two 16BF rows (with 32F and PEDANTIC). Everything else is
 * CUBLAS_STATUS_NOT_SUPPORTED: for fp32 or bf16 A/B a Ctype or (bf16) compute type the table
 * lacks is named as the table's refusal, so a caller knows a GPU would refuse it too; the rest
 * (other A/B types, other compute types with fp32) says "not emulated". */
static cublasStatus_t check_ex_types(const char *fn, cudaDataType at, cudaDataType bt, cudaDataType ct,
                                     cublasComputeType_t compute, cublasGemmAlgo_t algo, bool *tf32)
{
    bool compute_32f = compute == CUBLAS_COMPUTE_32F || compute == CUBLAS_COMPUTE_32F_PEDANTIC;
    if (at != bt)
        return reject(CUBLAS_STATUS_NOT_SUPPORTED, "%s: Atype %s (%d) differs from Btype %s (%d): cuBLAS's gemmEx "
                      "type table has no such row", fn, type_name(at), (int)at, type_name(bt), (int)bt);
    if (at == CUDA_R_16BF) {
        if (ct != CUDA_R_16BF && ct != CUDA_R_32F)
            return reject(CUBLAS_STATUS_NOT_SUPPORTED, "%s: A/B CUDA_R_16BF with Ctype %s (%d): cuBLAS's gemmEx type "
                          "table takes bf16 A/B only with C CUDA_R_16BF or CUDA_R_32F", fn, type_name(ct), (int)ct);
        if (!compute_32f)
            return reject(CUBLAS_STATUS_NOT_SUPPORTED, "%s: A/B CUDA_R_16BF with compute type %s (%d): cuBLAS's gemmEx "
                          "type table takes bf16 A/B only with CUBLAS_COMPUTE_32F or CUBLAS_COMPUTE_32F_PEDANTIC", fn,
                          compute_name(compute), (int)compute);
    } else if (at == CUDA_R_32F) {
        if (ct != CUDA_R_32F)
            return reject(CUBLAS_STATUS_NOT_SUPPORTED, "%s: A/B CUDA_R_32F with Ctype %s (%d): cuBLAS's gemmEx type "
                          "table takes fp32 A/B only with C CUDA_R_32F", fn, type_name(ct), (int)ct);
        if (!compute_32f && compute != CUBLAS_COMPUTE_32F_FAST_TF32)
            return reject(CUBLAS_STATUS_NOT_SUPPORTED, "%s: compute type %s (%d) is not emulated for fp32 A/B/C "
                          "(32F, 32F_PEDANTIC and 32F_FAST_TF32 are)", fn, compute_name(compute), (int)compute);
    } else {
        return reject(CUBLAS_STATUS_NOT_SUPPORTED, "%s: A/B %s (%d) are not emulated (CUDA_R_32F and CUDA_R_16BF are)",
                      fn, type_name(at), (int)at);
    }
    if (!((algo >= CUBLAS_GEMM_DEFAULT && algo <= CUBLAS_GEMM_ALGO23) ||
          (algo >= CUBLAS_GEMM_DEFAULT_TENSOR_OP && algo <= CUBLAS_GEMM_ALGO15_TENSOR_OP)))
        return reject(CUBLAS_STATUS_INVALID_VALUE, "%s: algo %d is not a cublasGemmAlgo_t", fn, (int)algo);
    *tf32 = compute == CUBLAS_COMPUTE_32F_FAST_TF32;
    return CUBLAS_STATUS_SUCCESS;
}

} /* namespace ddp_cudaemu */

using namespace ddp_cudaemu;

extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t *handle)
{
    if (!handle)
        return reject(CUBLAS_STATUS_INVALID_VALUE, "cublasCreate: handle is NULL");
    int device = calling_device("cublasCreate");
    if (device < 0)
        return reject(CUBLAS_STATUS_NOT_INITIALIZED, "cublasCreate: no usable device");
    *handle = new cublasContext{device, nullptr, CUBLAS_DEFAULT_MATH, CUBLAS_POINTER_MODE_HOST};
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle)
{
    if (!handle)
        return reject(CUBLAS_STATUS_NOT_INITIALIZED, "cublasDestroy: handle is NULL");
    delete handle;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetVersion_v2(cublasHandle_t handle, int *version)
{
    if (!handle || !version)
        return reject(CUBLAS_STATUS_INVALID_VALUE, "cublasGetVersion: NULL argument");
    *version = CUBLAS_VERSION;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId)
{
    if (!handle)
        return reject(CUBLAS_STATUS_NOT_INITIALIZED, "cublasSetStream: handle is NULL");
    if (!stream_is_valid(streamId))
        return reject(CUBLAS_STATUS_INVALID_VALUE, "cublasSetStream: %p is not a live stream",
                      static_cast<void *>(streamId));
    handle->stream = streamId;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream_v2(cublasHandle_t handle, cudaStream_t *streamId)
{
    if (!handle || !streamId)
        return reject(CUBLAS_STATUS_NOT_INITIALIZED, "cublasGetStream: NULL argument");
    *streamId = handle->stream;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void *workspace, size_t workspaceSizeInBytes)
{
    (void)workspace;
    (void)workspaceSizeInBytes;
    return handle ? CUBLAS_STATUS_SUCCESS : reject(CUBLAS_STATUS_NOT_INITIALIZED, "cublasSetWorkspace: handle is NULL");
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode)
{
    if (!handle)
        return reject(CUBLAS_STATUS_NOT_INITIALIZED, "cublasSetMathMode: handle is NULL");
    unsigned base = (unsigned)mode & 0xfu, flags = (unsigned)mode & ~0xfu;
    if (base > CUBLAS_TF32_TENSOR_OP_MATH || (flags & ~(unsigned)CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION))
        return reject(CUBLAS_STATUS_INVALID_VALUE, "cublasSetMathMode: mode %d is not a cublasMath_t", (int)mode);
    handle->math_mode = mode;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t *mode)
{
    if (!handle || !mode)
        return reject(CUBLAS_STATUS_NOT_INITIALIZED, "cublasGetMathMode: NULL argument");
    *mode = handle->math_mode;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t mode)
{
    if (!handle)
        return reject(CUBLAS_STATUS_NOT_INITIALIZED, "cublasSetPointerMode: handle is NULL");
    if (mode != CUBLAS_POINTER_MODE_HOST && mode != CUBLAS_POINTER_MODE_DEVICE)
        return reject(CUBLAS_STATUS_INVALID_VALUE, "cublasSetPointerMode: mode %d", (int)mode);
    handle->pointer_mode = mode;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t *mode)
{
    if (!handle || !mode)
        return reject(CUBLAS_STATUS_NOT_INITIALIZED, "cublasGetPointerMode: NULL argument");
    *mode = handle->pointer_mode;
    return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusName(cublasStatus_t status)
{
    switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    }
    return "<unknown>";
}

const char *cublasGetStatusString(cublasStatus_t status)
{
    switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "an absent device architectural feature is required";
    case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    case CUBLAS_STATUS_LICENSE_ERROR: return "error detected trying to check the license";
    }
    return "unknown error";
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                              int n, int k, const float *alpha, const float *A, int lda, const float *B, int ldb,
                              const float *beta, float *C, int ldc)
{
    gemm_call g = cublas_call("cublasSgemm", transa, transb, m, n, k, alpha, beta);
    set_operands(&g, A, lda, B, ldb, C, ldc);
    g.tf32 = tf32_by_math_mode(handle);
    return run_on_handle(handle, g);
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                            int n, int k, const void *alpha, const void *A, cudaDataType Atype, int lda,
                            const void *B, cudaDataType Btype, int ldb, const void *beta, void *C,
                            cudaDataType Ctype, int ldc, cublasComputeType_t computeType, cublasGemmAlgo_t algo)
{
    gemm_call g = cublas_call("cublasGemmEx", transa, transb, m, n, k, alpha, beta);
    cublasStatus_t st = check_ex_types(g.fn, Atype, Btype, Ctype, computeType, algo, &g.tf32);
    if (st != CUBLAS_STATUS_SUCCESS)
        return st;
    set_operands(&g, A, lda, B, ldb, C, ldc);
    g.atype = Atype;
    g.btype = Btype;
    g.ctype = Ctype;
    return run_on_handle(handle, g);
}

} /* extern "C" */
