/* cublas_gemm.h — the one GEMM engine behind the emulator's cuBLAS and cuBLASLt shims.
 *
 * Internal to tests/cudaemu/. A shim turns its API's arguments into a gemm_call (no cuBLAS or
 * cuBLASLt handle inside: the device, stream and pointer mode it took from its handle or
 * descriptor), then check_gemm validates what both APIs share (sizes, scalars, the calling
 * thread's device, every operand inside one cudaMalloc allocation) and queue_gemm queues the
 * GEMM with its epilogue on the call's stream. Everything the engine refuses goes through
 * reject(): a status and one "cudaemu: <fn>: <argument> ..." line on stderr. Must not know
 * either API's handles or type tables: each shim checks its own before building the call. */
#ifndef DDP_CUBLAS_GEMM_H
#define DDP_CUBLAS_GEMM_H

#include <cublas_api.h>
#include <library_types.h>
#include <stddef.h>

namespace ddp_cudaemu {

/* Prints "cudaemu: <fmt...> (<status name>)" on stderr and returns status. */
cublasStatus_t reject(cublasStatus_t status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Bytes of one element: 2 for CUDA_R_16BF, 4 for CUDA_R_32F (the only types that reach the engine). */
size_t elem_bytes(cudaDataType t);
/* "CUDA_R_32F" and so on, for messages. */
const char *type_name(cudaDataType t);

/* What a GPU epilogue does to the fp32 accumulator before D is stored (cuBLASLt's). */
enum epilogue_kind {
    EPILOGUE_NONE,          /* D = alpha op(A) op(B) + beta C */
    EPILOGUE_BIAS,          /* ... + bias[row] */
    EPILOGUE_GELU_AUX_BIAS, /* pre = ... + bias[row]; aux = pre; D = gelu(pre) */
    EPILOGUE_DGELU,         /* D = (alpha op(A) op(B) + beta C) * gelu'(aux) */
};

struct gemm_epilogue {
    epilogue_kind kind = EPILOGUE_NONE;
    const void *bias = nullptr; /* m elements, broadcast over the columns */
    cudaDataType bias_type = CUDA_R_32F;
    void *aux = nullptr;        /* m x n at aux_ld: written by GELU_AUX_BIAS, read by DGELU */
    int aux_ld = 0;
    cudaDataType aux_type = CUDA_R_32F;
};

/* One GEMM, column-major: D = epilogue(alpha op(A) op(B) + beta C), repeated batch times. */
struct gemm_call {
    const char *fn = nullptr;     /* the entry point, for messages */
    int device = -1;              /* the handle's device: the calling thread's current one must match */
    cudaStream_t stream = nullptr;
    bool device_scalars = false;  /* alpha and beta are device pointers, read when the GEMM runs */
    cublasOperation_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N;
    int m = 0, n = 0, k = 0;
    const float *alpha = nullptr, *beta = nullptr; /* float: the scale type of every emulated combination */
    const void *A = nullptr, *B = nullptr;
    const void *C = nullptr;      /* read only when beta != 0 */
    void *D = nullptr;            /* written; cuBLAS passes its C as both */
    const char *d_name = "C";     /* what messages call D: "C" for cuBLAS, "D" for cuBLASLt */
    int lda = 0, ldb = 0, ldc = 0; /* ldc is C's and D's: their layouts are identical */
    long long stride_a = 0, stride_b = 0, stride_c = 0; /* in elements, as cuBLAS counts them */
    int batch = 1;                /* an epilogue needs batch 1 */
    bool tf32 = false;            /* round A and B to TF32 first, as tensor cores do */
    cudaDataType atype = CUDA_R_32F, btype = CUDA_R_32F, ctype = CUDA_R_32F; /* ctype: C's and D's */
    gemm_epilogue epilogue;
    float alpha_value = 0.0f, beta_value = 0.0f; /* host scalars, read by check_gemm as a GPU call reads them */
};

/* Whether the GEMM reads C: after check_gemm, which reads host scalars (beta 0: C is output only). */
inline bool reads_c(const gemm_call &g) { return g.device_scalars || g.beta_value != 0.0f; }

/* A rows x cols matrix of type (ld, and stride between batch entries, in elements) must lie inside
 * one cudaMalloc allocation: CUBLAS_STATUS_EXECUTION_FAILED naming it and the overrun otherwise;
 * NULL is CUBLAS_STATUS_INVALID_VALUE. Nothing to check when it is empty. */
cublasStatus_t check_extent(const gemm_call &g, const void *p, const char *name, cudaDataType type, int rows,
                            int cols, int ld, long long stride);

/* Everything the call's own arguments can tell, as cuBLAS documents for gemm: transposes, sizes,
 * leading dimensions, batch, NULL or misplaced scalars (INVALID_VALUE); the calling thread's
 * device (EXECUTION_FAILED); then the extents of A and B (when read), C (when read and not D),
 * D, bias and aux. Reads host-mode scalars into the call. */
cublasStatus_t check_gemm(gemm_call *g);

/* Queues the checked call on its stream; it runs when that stream is drained. */
cublasStatus_t queue_gemm(const gemm_call &g);

inline cublasStatus_t run_gemm(gemm_call g)
{
    cublasStatus_t st = check_gemm(&g);
    return st != CUBLAS_STATUS_SUCCESS ? st : queue_gemm(g);
}

} /* namespace ddp_cudaemu */

#endif
