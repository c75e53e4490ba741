/* cublaslt_shim.cpp — the cuBLASLt entry points ddprun's CUDA backend calls (cublasLt.h): the
 * handle, matmul descriptors, matrix layouts, preferences, the heuristic query and
 * cublasLtMatmul, whose GEMM and epilogue the emulator's one GEMM engine (cublas_gemm.cpp)
 * computes on the matmul's stream.
 *
 * Descriptors are this file's own structs behind cuBLASLt's opaque pointers, kept in a registry
 * and tagged by kind, so a destroyed, foreign or wrong-kind one is refused without being read.
 * Attributes are stored as set (a wrong size is CUBLAS_STATUS_INVALID_VALUE, an attribute not
 * listed here CUBLAS_STATUS_NOT_SUPPORTED) and judged by the heuristic query and
 * the matmul (cublaslt_check.cpp), which refuse alike except that a bad aux ld finds no algorithm
 * in the first and is an invalid value in the second. The heuristic returns one algorithm (tagged,
 * no workspace); a matmul takes NULL or an algo from it. C is D itself (in place) or a separate
 * matrix of D's layout, read only when beta != 0 and never written; A and B are read (and their
 * extents checked) only when k > 0 and alpha != 0, as in BLAS. A dead stream is refused after the
 * runtime's own "stream use" line. cudaemu_cublaslt_matmuls() counts the matmuls accepted and
 * queued. Must not compute or validate GEMMs itself. */
#include "cublaslt_shim.h"
#include "cudaemu.h"
#include "cudaemu_internal.h"

#include <atomic>
#include <mutex>
#include <new>
#include <set>
#include <string.h>

namespace ddp_cudaemu {

static std::atomic<uint64_t> matmuls_queued;

/* Never destroyed, like the engine's state: a process may exit with descriptors alive. */
static std::mutex &registry_lock = *new std::mutex;
static auto &registry = *new std::set<const void *>;

void lt_register(const void *p)
{
    std::lock_guard<std::mutex> hold(registry_lock);
    registry.insert(p);
}

void lt_unregister(const void *p)
{
    std::lock_guard<std::mutex> hold(registry_lock);
    registry.erase(p);
}

bool lt_registered(const void *p)
{
    std::lock_guard<std::mutex> hold(registry_lock);
    return registry.count(p) != 0;
}

/* A new descriptor of kind T, registered, behind *out (fn's out-argument `what`). */
template <typename T, typename H> static cublasStatus_t create(H *out, const T &init, const char *fn, const char *what)
{
    if (!out)
        return reject(CUBLAS_STATUS_INVALID_VALUE, "%s: %s is NULL", fn, what);
    T *p = new (std::nothrow) T(init);
    if (!p)
        return reject(CUBLAS_STATUS_ALLOC_FAILED, "%s: out of memory", fn);
    lt_register(p);
    *out = reinterpret_cast<H>(p);
    return CUBLAS_STATUS_SUCCESS;
}

/* Frees a live descriptor of kind T; a second destroy, or a use after it, is then refused. */
template <typename T, typename H> static cublasStatus_t destroy(H h, const char *fn, const char *type)
{
    T *p = live<T>(h);
    if (!p)
        return reject(CUBLAS_STATUS_INVALID_VALUE, "%s: %p is not a live %s", fn, static_cast<void *>(h), type);
    lt_unregister(p);
    delete p;
    return CUBLAS_STATUS_SUCCESS;
}

/* Copies an attribute of type T from buf, which must hold exactly one. */
template <typename T>
static cublasStatus_t set_field(T *field, const char *fn, const char *attr, const void *buf, size_t size)
{
    if (!buf)
        return reject(CUBLAS_STATUS_INVALID_VALUE, "%s: %s: buf is NULL", fn, attr);
    if (size != sizeof(T))
        return reject(CUBLAS_STATUS_INVALID_VALUE, "%s: %s takes %zu bytes, not sizeInBytes=%zu", fn, attr,
                      sizeof(T), size);
    memcpy(field, buf, sizeof(T));
    return CUBLAS_STATUS_SUCCESS;
}

#define DESC_FIELD(attr, field) \
    case attr: return set_field(&d->field, fn, #attr, buf, size)

static cublasStatus_t set_desc_attribute(lt_desc *d, cublasLtMatmulDescAttributes_t attr, const void *buf,
                                         size_t size)
{
    const char *fn = "cublasLtMatmulDescSetAttribute";
    switch (attr) {
    DESC_FIELD(CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, compute_type);
    DESC_FIELD(CUBLASLT_MATMUL_DESC_SCALE_TYPE, scale_type);
    DESC_FIELD(CUBLASLT_MATMUL_DESC_POINTER_MODE, pointer_mode);
    DESC_FIELD(CUBLASLT_MATMUL_DESC_TRANSA, transa);
    DESC_FIELD(CUBLASLT_MATMUL_DESC_TRANSB, transb);
    DESC_FIELD(CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue);
    DESC_FIELD(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
    DESC_FIELD(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, bias_type);
    DESC_FIELD(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux);
    DESC_FIELD(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, aux_ld);
    DESC_FIELD(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, aux_type);
    default:
        return reject(CUBLAS_STATUS_NOT_SUPPORTED, "%s: attribute %d is not emulated", fn, (int)attr);
    }
}

#undef DESC_FIELD

/* A heuristic query's or matmul's descriptors, for check_problem. */
static lt_problem problem(const char *fn, bool at_matmul, cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                          cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                          cublasLtMatrixLayout_t d)
{
    lt_problem p = {};
    p.fn = fn;
    p.at_matmul = at_matmul;
    p.handle = handle;
    p.desc_handle = desc;
    p.layouts[0] = a;
    p.layouts[1] = b;
    p.layouts[2] = c;
    p.layouts[3] = d;
    return p;
}

/* The engine's call for a checked problem: D = epilogue(alpha op(A) op(B) + beta C) on stream. */
static gemm_call lt_call(const lt_problem &p, const void *alpha, const void *A, const void *B, const void *beta,
                         const void *C, void *D, cudaStream_t stream)
{
    gemm_call g;
    g.fn = p.fn;
    g.device = p.handle->device;
    g.stream = stream;
    g.transa = (cublasOperation_t)p.desc->transa;
    g.transb = (cublasOperation_t)p.desc->transb;
    g.m = p.m;
    g.n = p.n;
    g.k = p.k;
    g.alpha = static_cast<const float *>(alpha);
    g.beta = static_cast<const float *>(beta);
    g.A = A;
    g.B = B;
    g.C = C;
    g.D = D;
    g.d_name = "D";
    g.lda = (int)p.a->ld;
    g.ldb = (int)p.b->ld;
    g.ldc = (int)p.d->ld;
    g.atype = g.btype = p.ab_type;
    g.ctype = p.cd_type;
    g.epilogue = p.epilogue;
    g.tf32 = p.desc->compute_type == CUBLAS_COMPUTE_32F_FAST_TF32;
    return g;
}

/* What a matmul checks after the problem (as the heuristic did), in order: the pointers only a
 * matmul has, the engine's checks (scalars, device, extents), the stream, overlaps. */
static cublasStatus_t check_matmul(const lt_problem &p, gemm_call *g, const cublasLtMatmulAlgo_t *algo,
                                   const void *workspace, size_t workspace_bytes)
{
    cublasStatus_t st = check_matmul_pointers(p, *g, algo, workspace, workspace_bytes);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = check_gemm(g);
    if (st != CUBLAS_STATUS_SUCCESS)
        return st;
    if (!stream_is_valid(g->stream))
        return reject(CUBLAS_STATUS_INVALID_VALUE, "%s: stream %p is not a live stream of device %d", p.fn,
                      static_cast<void *>(g->stream), g->device);
    return check_overlaps(*g, workspace, workspace_bytes);
}

} /* namespace ddp_cudaemu */

using namespace ddp_cudaemu;

extern "C" {

uint64_t cudaemu_cublaslt_matmuls(void) { return matmuls_queued.load(); }

cublasStatus_t cublasLtCreate(cublasLtHandle_t *lightHandle)
{
    if (!lightHandle)
        return reject(CUBLAS_STATUS_INVALID_VALUE, "cublasLtCreate: lightHandle is NULL");
    int device = calling_device("cublasLtCreate");
    if (device < 0)
        return reject(CUBLAS_STATUS_NOT_INITIALIZED, "cublasLtCreate: no usable device");
    *lightHandle = new cublasLtContext{device};
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle)
{
    if (!lightHandle)
        return reject(CUBLAS_STATUS_NOT_INITIALIZED, "cublasLtDestroy: lightHandle is NULL");
    delete lightHandle;
    return CUBLAS_STATUS_SUCCESS;
}

const char *cublasLtGetStatusName(cublasStatus_t status) { return cublasGetStatusName(status); }

const char *cublasLtGetStatusString(cublasStatus_t status) { return cublasGetStatusString(status); }

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *matmulDesc, cublasComputeType_t computeType,
                                        cudaDataType_t scaleType)
{
    const lt_desc init{LT_DESC_MAGIC, (int32_t)computeType, (int32_t)scaleType, CUBLASLT_POINTER_MODE_HOST,
                       CUBLAS_OP_N, CUBLAS_OP_N, CUBLASLT_EPILOGUE_DEFAULT, nullptr, -1, nullptr, 0, -1};
    return create(matmulDesc, init, "cublasLtMatmulDescCreate", "matmulDesc");
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc)
{
    return destroy<lt_desc>(matmulDesc, "cublasLtMatmulDescDestroy", "cublasLtMatmulDesc_t");
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc, cublasLtMatmulDescAttributes_t attr,
                                              const void *buf, size_t sizeInBytes)
{
    lt_desc *d = live<lt_desc>(matmulDesc);
    if (!d)
        return reject(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulDescSetAttribute: matmulDesc=%p is not a live "
                      "cublasLtMatmulDesc_t", static_cast<void *>(matmulDesc));
    return set_desc_attribute(d, attr, buf, sizeInBytes);
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *matLayout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld)
{
    return create(matLayout, lt_layout{LT_LAYOUT_MAGIC, (int32_t)type, rows, cols, ld}, "cublasLtMatrixLayoutCreate",
                  "matLayout");
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout)
{
    return destroy<lt_layout>(matLayout, "cublasLtMatrixLayoutDestroy", "cublasLtMatrixLayout_t");
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref)
{
    const uint32_t a = LT_DEFAULT_ALIGNMENT;
    return create(pref, lt_pref{LT_PREF_MAGIC, 0, {a, a, a, a}}, "cublasLtMatmulPreferenceCreate", "pref");
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref)
{
    return destroy<lt_pref>(pref, "cublasLtMatmulPreferenceDestroy", "cublasLtMatmulPreference_t");
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void *buf,
                                                    size_t sizeInBytes)
{
    const char *fn = "cublasLtMatmulPreferenceSetAttribute";
    lt_pref *p = live<lt_pref>(pref);
    if (!p)
        return reject(CUBLAS_STATUS_INVALID_VALUE, "%s: pref=%p is not a live cublasLtMatmulPreference_t", fn,
                      static_cast<void *>(pref));
    switch (attr) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
        return set_field(&p->max_workspace, fn, "CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES", buf, sizeInBytes);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
        return set_field(&p->min_alignment[0], fn, "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES", buf, sizeInBytes);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
        return set_field(&p->min_alignment[1], fn, "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES", buf, sizeInBytes);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
        return set_field(&p->min_alignment[2], fn, "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES", buf, sizeInBytes);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
        return set_field(&p->min_alignment[3], fn, "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES", buf, sizeInBytes);
    default:
        return reject(CUBLAS_STATUS_NOT_SUPPORTED, "%s: attribute %d is not emulated", fn, (int)attr);
    }
}

/* One algorithm (it needs no workspace, so every preference admits it; it carries the preference's
 * alignment promise) or, for anything a real cuBLASLt has no algorithm for,
 * CUBLAS_STATUS_NOT_SUPPORTED; *returnAlgoCount is 0 on any refusal. */
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc,
                                              cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                              cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                              cublasLtMatmulPreference_t preference, int requestedAlgoCount,
                                              cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
                                              int *returnAlgoCount)
{
    const char *fn = "cublasLtMatmulAlgoGetHeuristic";
    if (returnAlgoCount)
        *returnAlgoCount = 0;
    lt_problem p = problem(fn, false, lightHandle, operationDesc, Adesc, Bdesc, Cdesc, Ddesc);
    cublasStatus_t st = check_problem(&p);
    if (st != CUBLAS_STATUS_SUCCESS)
        return st;
    const lt_pref *pref = live<lt_pref>(preference);
    if (!pref)
        return reject(CUBLAS_STATUS_INVALID_VALUE, "%s: preference=%p is not a live cublasLtMatmulPreference_t", fn,
                      static_cast<void *>(preference));
    if (requestedAlgoCount <= 0 || !heuristicResultsArray || !returnAlgoCount)
        return reject(CUBLAS_STATUS_INVALID_VALUE, "%s: requestedAlgoCount=%d, heuristicResultsArray=%p and "
                      "returnAlgoCount=%p need room for a result", fn, requestedAlgoCount,
                      static_cast<void *>(heuristicResultsArray), static_cast<void *>(returnAlgoCount));
    cublasLtMatmulHeuristicResult_t &r = heuristicResultsArray[0];
    memset(&r, 0, sizeof r);
    r.algo.data[0] = LT_ALGO_MAGIC;
    for (int i = 0; i < 4; i++)
        r.algo.data[1 + i] = pref->min_alignment[i];
    r.workspaceSize = 0;
    r.state = CUBLAS_STATUS_SUCCESS;
    r.wavesCount = 1.0f;
    *returnAlgoCount = 1;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc, const void *alpha,
                              const void *A, cublasLtMatrixLayout_t Adesc, const void *B,
                              cublasLtMatrixLayout_t Bdesc, const void *beta, const void *C,
                              cublasLtMatrixLayout_t Cdesc, void *D, cublasLtMatrixLayout_t Ddesc,
                              const cublasLtMatmulAlgo_t *algo, void *workspace, size_t workspaceSizeInBytes,
                              cudaStream_t stream)
{
    lt_problem p = problem("cublasLtMatmul", true, lightHandle, computeDesc, Adesc, Bdesc, Cdesc, Ddesc);
    cublasStatus_t st = check_problem(&p);
    if (st != CUBLAS_STATUS_SUCCESS)
        return st;
    gemm_call g = lt_call(p, alpha, A, B, beta, C, D, stream);
    if ((st = check_matmul(p, &g, algo, workspace, workspaceSizeInBytes)) != CUBLAS_STATUS_SUCCESS)
        return st;
    if ((st = queue_gemm(g)) != CUBLAS_STATUS_SUCCESS)
        return st;
    matmuls_queued++;
    return CUBLAS_STATUS_SUCCESS;
}

} /* extern "C" */
