/* cublas_gemm.cpp — the GEMM engine both cuBLAS shims use (see cublas_gemm.h): argument, scalar
 * and extent checks, and the GEMM with its epilogue, queued on a stream and run by the CPU GEMM
 * library.
 *
 * Column-major as cuBLAS. bf16 operands are widened to float exactly, TF32 inputs are rounded as
 * tensor cores round them, the float GEMM accumulates, the epilogue (bias, GELU with its input
 * saved to aux, or the GELU gradient) works on that float result, and each stored element is
 * rounded once, to nearest even, when D (or aux) is bf16 — as a GPU's epilogue rounds its fp32
 * accumulator once. Must not implement GEMMs itself (oneDNN or OpenBLAS does) nor know either
 * API's handles, descriptors or type tables (the shims check those). */
#include "cublas_gemm.h"
#include "cudaemu_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#if defined(DDP_GEMM_ONEDNN)
#include <oneapi/dnnl/dnnl.h>
#elif defined(DDP_GEMM_OPENBLAS)
#include <cblas.h>
#else
#error "define DDP_GEMM_ONEDNN or DDP_GEMM_OPENBLAS (meson option cpu_gemm)"
#endif

namespace ddp_cudaemu {

cublasStatus_t reject(cublasStatus_t status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("cudaemu: ", stderr);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (%s)\n", cublasGetStatusName(status));
    va_end(ap);
    return status;
}

size_t elem_bytes(cudaDataType t) { return t == CUDA_R_16BF ? 2 : sizeof(float); }

const char *type_name(cudaDataType t)
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

static char op_char(cublasOperation_t op) { return op == CUBLAS_OP_N ? 'N' : 'T'; }

static int max1(int v) { return v > 1 ? v : 1; }

static bool uses_bias(const gemm_epilogue &e) { return e.kind == EPILOGUE_BIAS || e.kind == EPILOGUE_GELU_AUX_BIAS; }
static bool uses_aux(const gemm_epilogue &e) { return e.kind == EPILOGUE_GELU_AUX_BIAS || e.kind == EPILOGUE_DGELU; }

/* Transposes, sizes, leading dimensions and batch, in the order cuBLAS documents them for gemm. */
static cublasStatus_t check_shape(const gemm_call &g)
{
    const cublasOperation_t ops[2] = {g.transa, g.transb};
    for (int i = 0; i < 2; i++)
        if (ops[i] != CUBLAS_OP_N && ops[i] != CUBLAS_OP_T && ops[i] != CUBLAS_OP_C)
            return reject(CUBLAS_STATUS_INVALID_VALUE, "%s: trans%c=%d is not CUBLAS_OP_N/T/C", g.fn, "ab"[i],
                          (int)ops[i]);
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
    /* the shims check these first; here they only keep the epilogue's indexing sound */
    if (g.epilogue.kind != EPILOGUE_NONE && g.batch != 1)
        return reject(CUBLAS_STATUS_INVALID_VALUE, "%s: an epilogue needs batch 1, not %d", g.fn, g.batch);
    if (uses_aux(g.epilogue) && g.epilogue.aux_ld < max1(g.m))
        return reject(CUBLAS_STATUS_INVALID_VALUE, "%s: aux ld=%d < max(1, m=%d)", g.fn, g.epilogue.aux_ld, g.m);
    return CUBLAS_STATUS_SUCCESS;
}

/* The scalars must live where the pointer mode says: dereferencing a device pointer on the host
 * (or the reverse) crashes on a real GPU. */
static cublasStatus_t check_scalar(const gemm_call &g, const float *p, const char *name)
{
    alloc_kind kind;
    size_t overrun;
    bool on_device = alloc_lookup(p, sizeof(float), &kind, &overrun) && kind == ALLOC_DEVICE;
    if (on_device != g.device_scalars)
        return reject(CUBLAS_STATUS_INVALID_VALUE, "%s: %s=%p is %s memory but the pointer mode is %s", g.fn,
                      name, static_cast<const void *>(p), on_device ? "device" : "host",
                      g.device_scalars ? "CUBLAS_POINTER_MODE_DEVICE" : "CUBLAS_POINTER_MODE_HOST");
    return CUBLAS_STATUS_SUCCESS;
}

/* Repeated batch times at stride, a matrix's bytes are its element count times its type's size,
 * so a bf16 operand is neither flagged for the 4 bytes an fp32 one would need nor let off when its
 * 2-byte elements overrun. */
cublasStatus_t check_extent(const gemm_call &g, const void *p, const char *name, cudaDataType type, int rows,
                            int cols, int ld, long long stride)
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

/* A and B only when read (k > 0 and alpha != 0, as in BLAS), C only when read and not D itself,
 * D always, then the epilogue's vectors. */
static cublasStatus_t check_operands(const gemm_call &g)
{
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    int rows_a = g.transa == CUBLAS_OP_N ? g.m : g.k, cols_a = g.transa == CUBLAS_OP_N ? g.k : g.m;
    int rows_b = g.transb == CUBLAS_OP_N ? g.k : g.n, cols_b = g.transb == CUBLAS_OP_N ? g.n : g.k;
    bool uses_ab = g.k > 0 && (g.device_scalars || g.alpha_value != 0.0f);
    if (uses_ab && (st = check_extent(g, g.A, "A", g.atype, rows_a, cols_a, g.lda, g.stride_a)))
        return st;
    if (uses_ab && (st = check_extent(g, g.B, "B", g.btype, rows_b, cols_b, g.ldb, g.stride_b)))
        return st;
    if (reads_c(g) && g.C != g.D && (st = check_extent(g, g.C, "C", g.ctype, g.m, g.n, g.ldc, g.stride_c)))
        return st;
    if ((st = check_extent(g, g.D, g.d_name, g.ctype, g.m, g.n, g.ldc, g.stride_c)))
        return st;
    const gemm_epilogue &e = g.epilogue;
    if (g.m == 0 || g.n == 0)
        return CUBLAS_STATUS_SUCCESS; /* nothing is computed, so the epilogue touches nothing */
    if (uses_bias(e) && (st = check_extent(g, e.bias, "bias", e.bias_type, g.m, 1, max1(g.m), 0)))
        return st;
    if (uses_aux(e) && (st = check_extent(g, e.aux, "aux", e.aux_type, g.m, g.n, e.aux_ld, 0)))
        return st;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t check_gemm(gemm_call *call)
{
    gemm_call &g = *call;
    cublasStatus_t st = check_shape(g);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = check_scalar(g, g.alpha, "alpha");
    if (st == CUBLAS_STATUS_SUCCESS)
        st = check_scalar(g, g.beta, "beta");
    if (st != CUBLAS_STATUS_SUCCESS)
        return st;
    if (calling_device(g.fn) != g.device)
        return reject(CUBLAS_STATUS_EXECUTION_FAILED, "%s: the handle belongs to device %d, not the calling thread's "
                      "current device", g.fn, g.device);
    if (!g.device_scalars) { /* host pointer mode: read at the call, as cuBLAS does */
        g.alpha_value = *g.alpha;
        g.beta_value = *g.beta;
    }
    return check_operands(g);
}

/* ---- conversions --------------------------------------------------------------------------- */

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

static float load(const void *p, cudaDataType type, size_t at)
{
    if (type == CUDA_R_16BF)
        return bf16_to_float(static_cast<const uint16_t *>(p)[at]);
    return static_cast<const float *>(p)[at];
}

/* The one rounding a stored element sees (none for fp32). */
static void store(void *p, cudaDataType type, size_t at, float x)
{
    if (type == CUDA_R_16BF)
        static_cast<uint16_t *>(p)[at] = float_to_bf16(x);
    else
        static_cast<float *>(p)[at] = x;
}

/* Packs op-free column-major rows x cols (ld) of type into a dense float copy with ld = rows, for
 * what the float GEMM library cannot take as it is: bf16 (widened) or TF32 (rounded). */
static float *float_copy(std::vector<float> &buf, const void *p, cudaDataType type, bool tf32, int rows, int cols,
                         int ld)
{
    buf.resize((size_t)rows * (size_t)cols);
    for (int c = 0; c < cols; c++)
        for (int r = 0; r < rows; r++) {
            float x = load(p, type, (size_t)c * (size_t)ld + (size_t)r);
            buf[(size_t)c * (size_t)rows + (size_t)r] = tf32 ? round_to_tf32(x) : x;
        }
    return buf.data();
}

/* ---- the epilogue ---------------------------------------------------------------------------- */

/* GPT-2's tanh approximation, in float with tanhf as a GPU computes it. */
static const float GELU_SCALE = 0.7978845608028654f; /* sqrt(2 / pi) */
static const float GELU_CUBIC = 0.044715f;

static float gelu(float x)
{
    float u = GELU_SCALE * (x + GELU_CUBIC * x * x * x);
    return 0.5f * x * (1.0f + tanhf(u));
}

/* d gelu / dx: 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) u'(x). */
static float gelu_grad(float x)
{
    float u = GELU_SCALE * (x + GELU_CUBIC * x * x * x);
    float t = tanhf(u);
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * GELU_SCALE * (1.0f + 3.0f * GELU_CUBIC * x * x);
}

/* f is the m x n float result (ld = m) of alpha op(A) op(B) + beta C, before any rounding. */
static void apply_epilogue(const gemm_epilogue &e, float *f, int m, int n)
{
    if (e.kind == EPILOGUE_NONE)
        return;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            float &x = f[(size_t)j * (size_t)m + (size_t)i];
            size_t at_aux = (size_t)j * (size_t)e.aux_ld + (size_t)i;
            switch (e.kind) {
            case EPILOGUE_NONE: break;
            case EPILOGUE_BIAS: x += load(e.bias, e.bias_type, (size_t)i); break;
            case EPILOGUE_GELU_AUX_BIAS:
                x += load(e.bias, e.bias_type, (size_t)i);
                store(e.aux, e.aux_type, at_aux, x);
                x = gelu(x);
                break;
            case EPILOGUE_DGELU: x *= gelu_grad(load(e.aux, e.aux_type, at_aux)); break;
            }
        }
}

/* ---- running it ------------------------------------------------------------------------------ */

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

/* c = alpha op(A) op(B) + beta c, column-major float, one matrix of the batch. */
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

/* The dense float buffer (ld = m) the GEMM accumulates into when it cannot work in D itself: C
 * widened when beta reads it, zeros otherwise (C is output only then, and may hold NaN). */
static float *result_buffer(std::vector<float> &buf, const gemm_call &g, const void *c)
{
    if (*g.beta != 0.0f)
        return float_copy(buf, c, g.ctype, false, g.m, g.n, g.ldc);
    buf.assign((size_t)g.m * (size_t)g.n, 0.0f);
    return buf.data();
}

static void store_result(const gemm_call &g, void *d, const float *f)
{
    for (int j = 0; j < g.n; j++)
        for (int i = 0; i < g.m; i++)
            store(d, g.ctype, (size_t)j * (size_t)g.ldc + (size_t)i, f[(size_t)j * (size_t)g.m + (size_t)i]);
}

/* Runs on the call's stream, when that stream is drained. Every type goes through the one float
 * GEMM: operands it cannot read in place become dense float copies. An fp32 D that is C itself,
 * with no epilogue, is computed in place; anything else (bf16 D, C apart from D, an epilogue) in a
 * float buffer that the epilogue transforms and D then receives, rounded once. */
static void execute_gemm(gemm_call g)
{
    if (!g.device_scalars) {
        g.alpha = &g.alpha_value;
        g.beta = &g.beta_value;
    }
    if (g.m == 0 || g.n == 0)
        return; /* D may be NULL then: check_gemm checked nothing */
    int rows_a = g.transa == CUBLAS_OP_N ? g.m : g.k, cols_a = g.transa == CUBLAS_OP_N ? g.k : g.m;
    int rows_b = g.transb == CUBLAS_OP_N ? g.k : g.n, cols_b = g.transb == CUBLAS_OP_N ? g.n : g.k;
    bool uses_ab = g.k > 0 && *g.alpha != 0.0f; /* otherwise A and B are never read, as in BLAS */
    bool copy_a = g.tf32 || g.atype != CUDA_R_32F, copy_b = g.tf32 || g.btype != CUDA_R_32F;
    bool in_place = g.ctype == CUDA_R_32F && g.C == g.D && g.epilogue.kind == EPILOGUE_NONE;
    std::vector<float> a_buf, b_buf, c_buf;
    for (int i = 0; i < g.batch; i++) {
        const float *a = nullptr, *b = nullptr;
        int lda = g.lda, ldb = g.ldb;
        if (uses_ab) {
            const void *pa = static_cast<const char *>(g.A) + batch_offset(g.atype, g.stride_a, i);
            const void *pb = static_cast<const char *>(g.B) + batch_offset(g.btype, g.stride_b, i);
            a = copy_a ? float_copy(a_buf, pa, g.atype, g.tf32, rows_a, cols_a, g.lda) : static_cast<const float *>(pa);
            b = copy_b ? float_copy(b_buf, pb, g.btype, g.tf32, rows_b, cols_b, g.ldb) : static_cast<const float *>(pb);
            lda = copy_a ? max1(rows_a) : lda;
            ldb = copy_b ? max1(rows_b) : ldb;
        }
        size_t at_c = batch_offset(g.ctype, g.stride_c, i);
        const void *pc = g.C ? static_cast<const char *>(g.C) + at_c : nullptr; /* NULL only when not read */
        void *pd = static_cast<char *>(g.D) + at_c;
        float *c = in_place ? static_cast<float *>(pd) : result_buffer(c_buf, g, pc);
        if (gemm_one(g, a, lda, b, ldb, c, in_place ? g.ldc : g.m) != CUBLAS_STATUS_SUCCESS)
            abort(); /* reported; a GPU would have faulted the context */
        if (!in_place) {
            apply_epilogue(g.epilogue, c, g.m, g.n);
            store_result(g, pd, c);
        }
    }
}

cublasStatus_t queue_gemm(const gemm_call &g)
{
    if (enqueue(g.stream, g.fn, [g] { execute_gemm(g); }, 0, g.fn, nullptr) != cudaSuccess)
        return reject(CUBLAS_STATUS_EXECUTION_FAILED, "%s: stream %p cannot take work", g.fn,
                      static_cast<void *>(g.stream));
    return CUBLAS_STATUS_SUCCESS;
}

} /* namespace ddp_cudaemu */
