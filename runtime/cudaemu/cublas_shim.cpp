/* cublas_shim.cpp — the cuBLAS entry points ddprun calls, computed by the CPU GEMM library.
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
 * cublasGemmEx/cublasGemmStridedBatchedEx also take bf16 A and B (C bf16 or fp32), the rows of
 * cuBLAS's documented type table that the bf16 mixed-precision path uses; every other row, and
 * every combination the table lacks, is CUBLAS_STATUS_NOT_SUPPORTED. bf16 operands are widened
 * to float exactly, the float GEMM accumulates, and a bf16 C is rounded once, to nearest even, at
 * the end; extents are checked in bytes of each operand's own element type.
 * Must not implement GEMMs itself: the CPU library (oneDNN or OpenBLAS) does. */
#include "cudaemu_internal.h"

#include <cublas_v2.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <vector>

#if defined(DDP_GEMM_ONEDNN)
#include <oneapi/dnnl/dnnl.h>
#elif defined(DDP_GEMM_OPENBLAS)
#include <cblas.h>
#else
#error "define DDP_GEMM_ONEDNN or DDP_GEMM_OPENBLAS (meson option cpu_gemm)"
#endif

struct cublasContext {
    int device;                   /* current when the handle was created */
    cudaStream_t stream;
    cublasMath_t math_mode;
    cublasPointerMode_t pointer_mode;
};

namespace ddp_cudaemu {

static cublasStatus_t reject(cublasStatus_t status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static cublasStatus_t reject(cublasStatus_t status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("cudaemu: ", stderr);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (%s)\n", cublasGetStatusName(status));
    va_end(ap);
    return status;
}

struct gemm_call {
    const char *fn;
    cublasHandle_t handle;
    cublasOperation_t transa, transb;
    int m, n, k;
    const float *alpha, *beta;    /* float for every type combination emulated (the table's scale type) */
    const void *A, *B;            /* elements of atype, btype and ctype: CUDA_R_32F or CUDA_R_16BF */
    void *C;
    int lda, ldb, ldc;
    long long stride_a, stride_b, stride_c; /* in elements, as cuBLAS counts them */
    int batch;
    bool tf32;
    cudaDataType atype, btype, ctype;
    float alpha_value, beta_value; /* host pointer mode: read at the call, as cuBLAS does */
    bool handle_pointer_host() const { return handle->pointer_mode == CUBLAS_POINTER_MODE_HOST; }
};

static char op_char(cublasOperation_t op) { return op == CUBLAS_OP_N ? 'N' : 'T'; }

static int max1(int v) { return v > 1 ? v : 1; }

/* Only the types check_ex_types lets through reach the extent checks and the runner. */
static size_t elem_bytes(cudaDataType t) { return t == CUDA_R_16BF ? 2 : sizeof(float); }

static const char *type_name(cudaDataType t)
{
    switch (t) {
    case CUDA_R_32F: return "CUDA_R_32F";
    case CUDA_R_16BF: return "CUDA_R_16BF";
    case CUDA_R_16F: return "CUDA_R_16F";
    case CUDA_R_64F: return "CUDA_R_64F";
    case CUDA_R_8I: return "CUDA_R_8I";
    case CUDA_R_32I: return "CUDA_R_32I";
    default: return "another cudaDataType";
    }
}

static cublasStatus_t check_arguments(const gemm_call &g)
{
    if (!g.handle)
        return reject(CUBLAS_STATUS_NOT_INITIALIZED, "%s: handle is NULL", g.fn);
    const cublasOperation_t ops[2] = {g.transa, g.transb};
    for (int i = 0; i < 2; i++)
        if (ops[i] != CUBLAS_OP_N && ops[i] != CUBLAS_OP_T && ops[i] != CUBLAS_OP_C)
            return reject(CUBLAS_STATUS_INVALID_VALUE, "%s: trans%c=%d is not CUBLAS_OP_N/T/C", g.fn, "ab"[i], (int)ops[i]);
    if (g.m < 0 || g.n < 0 || g.k < 0)
        return reject(CUBLAS_STATUS_INVALID_VALUE, "%s: negative size m=%d n=%d k=%d", g.fn, g.m, g.n, g.k);
    int rows_a = g.transa == CUBLAS_OP_N ? g.m : g.k, rows_b = g.transb == CUBLAS_OP_N ? g.k : g.n;
    if (g.lda < max1(rows_a))
        return reject(CUBLAS_STATUS_INVALID_VALUE, "%s: lda=%d < max(1, %s=%d) with transa=%c", g.fn, g.lda,
                      g.transa == CUBLAS_OP_N ? "m" : "k", rows_a, op_char(g.transa));
    if (g.ldb < max1(rows_b))
        return reject(CUBLAS_STATUS_INVALID_VALUE, "%s: ldb=%d < max(1, %s=%d) with transb=%c", g.fn, g.ldb,
                      g.transb == CUBLAS_OP_N ? "k" : "n", rows_b, op_char(g.transb));
    if (g.ldc < max1(g.m))
        return reject(CUBLAS_STATUS_INVALID_VALUE, "%s: ldc=%d < max(1, m=%d)", g.fn, g.ldc, g.m);
    if (g.batch < 0)
        return reject(CUBLAS_STATUS_INVALID_VALUE, "%s: batchCount=%d is negative", g.fn, g.batch);
    if (!g.alpha || !g.beta)
        return reject(CUBLAS_STATUS_INVALID_VALUE, "%s: alpha or beta is NULL", g.fn);
    return CUBLAS_STATUS_SUCCESS;
}

/* The scalars must live where the pointer mode says: dereferencing a device pointer on the host
 * (or the reverse) crashes on a real GPU. */
static cublasStatus_t check_scalar(const gemm_call &g, const float *p, const char *name)
{
    alloc_kind kind;
    size_t overrun;
    bool on_device = alloc_lookup(p, sizeof(float), &kind, &overrun) && kind == ALLOC_DEVICE;
    bool want_device = g.handle->pointer_mode == CUBLAS_POINTER_MODE_DEVICE;
    if (on_device != want_device)
        return reject(CUBLAS_STATUS_INVALID_VALUE, "%s: %s=%p is %s memory but the pointer mode is %s", g.fn,
                      name, static_cast<const void *>(p), on_device ? "device" : "host",
                      want_device ? "CUBLAS_POINTER_MODE_DEVICE" : "CUBLAS_POINTER_MODE_HOST");
    return CUBLAS_STATUS_SUCCESS;
}

/* A rows x cols column-major matrix of type (ld and stride in elements), repeated batch times at
 * stride: its bytes are the element count times the type's size, so a bf16 operand is neither
 * flagged for the 4 bytes an fp32 one would need nor let off when its 2-byte elements overrun. */
static cublasStatus_t check_extent(const gemm_call &g, const void *p, const char *name, cudaDataType type,
                                   int rows, int cols, int ld, long long stride)
{
    if (rows == 0 || cols == 0 || g.batch == 0)
        return CUBLAS_STATUS_SUCCESS;
    if (!p)
        return reject(CUBLAS_STATUS_INVALID_VALUE, "%s: %s is NULL", g.fn, name);
    if (stride < 0)
        return reject(CUBLAS_STATUS_INVALID_VALUE, "%s: stride of %s is negative (%lld)", g.fn, name, stride);
    size_t elems = (size_t)stride * (size_t)(g.batch - 1) + (size_t)ld * (size_t)(cols - 1) + (size_t)rows;
    alloc_kind kind;
    size_t overrun;
    if (alloc_lookup(p, elems * elem_bytes(type), &kind, &overrun))
        return CUBLAS_STATUS_SUCCESS;
    if (overrun)
        return reject(CUBLAS_STATUS_EXECUTION_FAILED, "%s: %s (%dx%d, ld=%d, batch=%d, stride=%lld) runs %zu bytes "
                      "past the end of its cudaMalloc allocation (%zu-byte %s elements)", g.fn, name, rows, cols, ld,
                      g.batch, stride, overrun, elem_bytes(type), type_name(type));
    return reject(CUBLAS_STATUS_EXECUTION_FAILED, "%s: %s=%p is not device memory from cudaMalloc", g.fn, name, p);
}

static float round_to_tf32(float x)
{
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    if ((bits & 0x7f800000u) != 0x7f800000u) /* finite: round to nearest even at 10 mantissa bits */
        bits = (bits + 0xfffu + ((bits >> 13) & 1u)) & ~0x1fffu;
    memcpy(&x, &bits, sizeof x);
    return x;
}

/* bf16 is the upper half of a float, so widening is exact. */
static float bf16_to_float(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float x;
    memcpy(&x, &bits, sizeof x);
    return x;
}

/* Round to nearest even at bf16's 7 stored mantissa bits, as __float2bfloat16_rn does (a finite
 * value past bf16's largest rounds to infinity there too). A NaN is handled first: the carry of
 * the rounding could run a NaN whose payload lies in the dropped half into an infinity, so it
 * keeps its sign and top payload bits and gets the quiet bit. */
static uint16_t float_to_bf16(float x)
{
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    if ((bits & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((bits >> 16) | 0x40u);
    return (uint16_t)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

/* Packs op-free column-major rows x cols (ld) of type into a dense float copy with ld = rows, for
 * what the float GEMM library cannot take as it is: bf16 (widened) or TF32 (rounded). */
static float *float_copy(std::vector<float> &buf, const void *p, cudaDataType type, bool tf32, int rows, int cols,
                         int ld)
{
    buf.resize((size_t)rows * (size_t)cols);
    for (int c = 0; c < cols; c++)
        for (int r = 0; r < rows; r++) {
            size_t at = (size_t)c * (size_t)ld + (size_t)r;
            float x = type == CUDA_R_16BF ? bf16_to_float(static_cast<const uint16_t *>(p)[at])
                                          : static_cast<const float *>(p)[at];
            buf[(size_t)c * (size_t)rows + (size_t)r] = tf32 ? round_to_tf32(x) : x;
        }
    return buf.data();
}

/* Stores the dense float result (ld = rows) into bf16 C: the only rounding a bf16 C sees, as a
 * GPU epilogue rounds the fp32 accumulator once. */
static void store_bf16(void *c, int ldc, const float *f, int rows, int cols)
{
    uint16_t *out = static_cast<uint16_t *>(c);
    for (int j = 0; j < cols; j++)
        for (int i = 0; i < rows; i++)
            out[(size_t)j * (size_t)ldc + (size_t)i] = float_to_bf16(f[(size_t)j * (size_t)rows + (size_t)i]);
}

/* Where batch entry i starts: cuBLAS strides count elements of the operand's own type. */
static size_t batch_offset(cudaDataType type, long long stride, int i)
{
    return (size_t)i * (size_t)stride * elem_bytes(type);
}

static void scale_c(float *c, int m, int n, int ldc, float beta)
{
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            float *x = &c[(size_t)j * (size_t)ldc + (size_t)i];
            *x = beta == 0.0f ? 0.0f : *x * beta; /* beta == 0: C is output only, even if NaN */
        }
}

/* C = alpha op(A) op(B) + beta C, column-major float, one matrix of the batch. */
static cublasStatus_t gemm_one(const gemm_call &g, const float *a, int lda, const float *b, int ldb, float *c,
                               int ldc)
{
    float alpha = *g.alpha, beta = *g.beta;
    if (g.m == 0 || g.n == 0)
        return CUBLAS_STATUS_SUCCESS;
    if (g.k == 0 || alpha == 0.0f) {
        scale_c(c, g.m, g.n, ldc, beta);
        return CUBLAS_STATUS_SUCCESS;
    }
#if defined(DDP_GEMM_ONEDNN)
    /* oneDNN is row-major: column-major C (m x n) is row-major C^T = op(B)^T op(A)^T */
    dnnl_status_t st = dnnl_sgemm(op_char(g.transb), op_char(g.transa), g.n, g.m, g.k, alpha, b, ldb, a, lda,
                                  beta, c, ldc);
    if (st != dnnl_success)
        return reject(CUBLAS_STATUS_EXECUTION_FAILED, "%s: dnnl_sgemm failed with status %d", g.fn, (int)st);
#else
    cblas_sgemm(CblasColMajor, g.transa == CUBLAS_OP_N ? CblasNoTrans : CblasTrans,
                g.transb == CUBLAS_OP_N ? CblasNoTrans : CblasTrans, g.m, g.n, g.k, alpha, a, lda, b, ldb, beta, c,
                ldc);
#endif
    return CUBLAS_STATUS_SUCCESS;
}

/* Runs on the handle's stream, when that stream is drained. Every type goes through the one float
 * GEMM: operands it cannot read in place become dense float copies, and a bf16 C is computed in a
 * float buffer (ldc = m) that is rounded into C at the end. */
static void execute_gemm(gemm_call g)
{
    if (g.handle_pointer_host()) {
        g.alpha = &g.alpha_value;
        g.beta = &g.beta_value;
    }
    if (g.m == 0 || g.n == 0)
        return; /* C may be NULL then: run_gemm checked nothing */
    int rows_a = g.transa == CUBLAS_OP_N ? g.m : g.k, cols_a = g.transa == CUBLAS_OP_N ? g.k : g.m;
    int rows_b = g.transb == CUBLAS_OP_N ? g.k : g.n, cols_b = g.transb == CUBLAS_OP_N ? g.n : g.k;
    bool uses_ab = g.k > 0 && *g.alpha != 0.0f; /* otherwise A and B are never read, as in BLAS */
    bool copy_a = g.tf32 || g.atype != CUDA_R_32F, copy_b = g.tf32 || g.btype != CUDA_R_32F;
    bool bf16_c = g.ctype == CUDA_R_16BF;
    std::vector<float> a_buf, b_buf, c_buf;
    for (int i = 0; i < g.batch; i++) {
        const float *a = nullptr, *b = nullptr;
        int lda = g.lda, ldb = g.ldb, ldc = g.ldc;
        if (uses_ab) {
            const void *pa = static_cast<const char *>(g.A) + batch_offset(g.atype, g.stride_a, i);
            const void *pb = static_cast<const char *>(g.B) + batch_offset(g.btype, g.stride_b, i);
            a = copy_a ? float_copy(a_buf, pa, g.atype, g.tf32, rows_a, cols_a, g.lda) : static_cast<const float *>(pa);
            b = copy_b ? float_copy(b_buf, pb, g.btype, g.tf32, rows_b, cols_b, g.ldb) : static_cast<const float *>(pb);
            lda = copy_a ? max1(rows_a) : lda;
            ldb = copy_b ? max1(rows_b) : ldb;
        }
        void *pc = static_cast<char *>(g.C) + batch_offset(g.ctype, g.stride_c, i);
        float *c = static_cast<float *>(pc);
        if (bf16_c) {
            if (*g.beta != 0.0f) {
                c = float_copy(c_buf, pc, CUDA_R_16BF, false, g.m, g.n, g.ldc);
            } else { /* C is output only and never read, as in BLAS (it may hold NaN) */
                c_buf.assign((size_t)g.m * (size_t)g.n, 0.0f);
                c = c_buf.data();
            }
            ldc = g.m;
        }
        if (gemm_one(g, a, lda, b, ldb, c, ldc) != CUBLAS_STATUS_SUCCESS)
            abort(); /* reported; a GPU would have faulted the context */
        if (bf16_c)
            store_bf16(pc, g.ldc, c, g.m, g.n);
    }
}

/* Validates as cuBLAS does (and the extents beyond), then queues the GEMM on the handle's stream. */
static cublasStatus_t run_gemm(gemm_call g)
{
    cublasStatus_t st = check_arguments(g);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = check_scalar(g, g.alpha, "alpha");
    if (st == CUBLAS_STATUS_SUCCESS)
        st = check_scalar(g, g.beta, "beta");
    if (st != CUBLAS_STATUS_SUCCESS)
        return st;
    if (calling_device(g.fn) != g.handle->device)
        return reject(CUBLAS_STATUS_EXECUTION_FAILED, "%s: the handle belongs to device %d, not the calling thread's "
                      "current device", g.fn, g.handle->device);
    bool host_scalars = g.handle_pointer_host();
    if (host_scalars) {
        g.alpha_value = *g.alpha;
        g.beta_value = *g.beta;
    }
    int rows_a = g.transa == CUBLAS_OP_N ? g.m : g.k, cols_a = g.transa == CUBLAS_OP_N ? g.k : g.m;
    int rows_b = g.transb == CUBLAS_OP_N ? g.k : g.n, cols_b = g.transb == CUBLAS_OP_N ? g.n : g.k;
    bool uses_ab = g.k > 0 && (!host_scalars || g.alpha_value != 0.0f);
    if (uses_ab &&
        (st = check_extent(g, g.A, "A", g.atype, rows_a, cols_a, g.lda, g.stride_a)) != CUBLAS_STATUS_SUCCESS)
        return st;
    if (uses_ab &&
        (st = check_extent(g, g.B, "B", g.btype, rows_b, cols_b, g.ldb, g.stride_b)) != CUBLAS_STATUS_SUCCESS)
        return st;
    if ((st = check_extent(g, g.C, "C", g.ctype, g.m, g.n, g.ldc, g.stride_c)) != CUBLAS_STATUS_SUCCESS)
        return st;
    if (enqueue(g.handle->stream, g.fn, [g] { execute_gemm(g); }, 0, g.fn, nullptr) != cudaSuccess)
        return reject(CUBLAS_STATUS_EXECUTION_FAILED, "%s: the handle's stream %p cannot take work", g.fn,
                      static_cast<void *>(g.handle->stream));
    return CUBLAS_STATUS_SUCCESS;
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

/* cuBLAS documents the type combinations cublasGemmEx and cublasGemmStridedBatchedEx accept, one
 * table for both: Atype always equals Btype; CUBLAS_COMPUTE_32F and _32F_PEDANTIC (float
 * scalars) take A/B 16BF with C 16BF or 32F, 16F with C 16F or 32F, 8I with C 32F and 32F with C
 * 32F; CUBLAS_COMPUTE_32F_FAST_16F, _FAST_16BF and _FAST_TF32 take 32F A/B/C only (so bf16 A/B
 * with FAST_TF32 is refused, as cuBLAS refuses it). Emulated are the 32F row (with 32F, PEDANTIC
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
    gemm_call g = {"cublasSgemm", handle, transa, transb, m, n, k, alpha, beta, A, B, C, lda, ldb, ldc,
                   0, 0, 0, 1, tf32_by_math_mode(handle), CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, 0.0f, 0.0f};
    return run_gemm(g);
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k, const float *alpha,
                                         const float *A, int lda, long long int strideA, const float *B, int ldb,
                                         long long int strideB, const float *beta, float *C, int ldc,
                                         long long int strideC, int batchCount)
{
    gemm_call g = {"cublasSgemmStridedBatched", handle, transa, transb, m, n, k, alpha, beta, A, B, C, lda,
                   ldb, ldc, strideA, strideB, strideC, batchCount, tf32_by_math_mode(handle),
                   CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, 0.0f, 0.0f};
    return run_gemm(g);
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                            int n, int k, const void *alpha, const void *A, cudaDataType Atype, int lda,
                            const void *B, cudaDataType Btype, int ldb, const void *beta, void *C,
                            cudaDataType Ctype, int ldc, cublasComputeType_t computeType, cublasGemmAlgo_t algo)
{
    bool tf32 = false;
    cublasStatus_t st = check_ex_types("cublasGemmEx", Atype, Btype, Ctype, computeType, algo, &tf32);
    if (st != CUBLAS_STATUS_SUCCESS)
        return st;
    gemm_call g = {"cublasGemmEx", handle, transa, transb, m, n, k, static_cast<const float *>(alpha),
                   static_cast<const float *>(beta), A, B, C, lda, ldb, ldc, 0, 0, 0, 1, tf32, Atype, Btype, Ctype,
                   0.0f, 0.0f};
    return run_gemm(g);
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                                          cublasOperation_t transb, int m, int n, int k, const void *alpha,
                                          const void *A, cudaDataType Atype, int lda, long long int strideA,
                                          const void *B, cudaDataType Btype, int ldb, long long int strideB,
                                          const void *beta, void *C, cudaDataType Ctype, int ldc,
                                          long long int strideC, int batchCount, cublasComputeType_t computeType,
                                          cublasGemmAlgo_t algo)
{
    bool tf32 = false;
    cublasStatus_t st = check_ex_types("cublasGemmStridedBatchedEx", Atype, Btype, Ctype, computeType, algo, &tf32);
    if (st != CUBLAS_STATUS_SUCCESS)
        return st;
    gemm_call g = {"cublasGemmStridedBatchedEx", handle, transa, transb, m, n, k, static_cast<const float *>(alpha),
                   static_cast<const float *>(beta), A, B, C, lda, ldb, ldc, strideA, strideB, strideC, batchCount,
                   tf32, Atype, Btype, Ctype, 0.0f, 0.0f};
    return run_gemm(g);
}

} /* extern "C" */
