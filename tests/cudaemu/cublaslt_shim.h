/* cublaslt_shim.h — what the emulator's two cuBLASLt files share: the structs behind cuBLASLt's
 * opaque handle and descriptors, and the checks a heuristic query and a matmul both run.
 *
 * Internal to tests/cudaemu/. cublaslt_shim.cpp owns the entry points and the descriptors'
 * lifetimes; cublaslt_check.cpp owns the validation (types, epilogue, layouts, alignment,
 * overlap). Neither computes anything: the GEMM engine (cublas_gemm.h) does. */
#ifndef DDP_CUBLASLT_SHIM_H
#define DDP_CUBLASLT_SHIM_H

#include "cublas_gemm.h"

#include <cublasLt.h>
#include <stdint.h>

struct cublasLtContext {
    int device; /* current when the handle was created */
};

namespace ddp_cudaemu {

/* Tags telling the kinds of live descriptor apart, one passed in place of another. */
enum : uint64_t {
    LT_DESC_MAGIC = 0x6375656d754c7444ull,   /* "cuemuLtD" */
    LT_LAYOUT_MAGIC = 0x6375656d754c744cull, /* "cuemuLtL" */
    LT_PREF_MAGIC = 0x6375656d754c7450ull,   /* "cuemuLtP" */
    LT_ALGO_MAGIC = 0x6375656d754c7441ull,   /* "cuemuLtA": algo.data[0] of every heuristic result */
};

/* A cublasLtMatmulDesc_t: each attribute in the type cublasLt.h documents for it. */
struct lt_desc {
    static constexpr uint64_t MAGIC = LT_DESC_MAGIC;
    uint64_t magic;
    int32_t compute_type, scale_type, pointer_mode, transa, transb;
    uint32_t epilogue;
    const void *bias;
    int32_t bias_type; /* -1 (unset): D's type */
    void *aux;
    int64_t aux_ld;
    int32_t aux_type;  /* -1 (unset): D's type */
};

/* A cublasLtMatrixLayout_t: column-major, batch 1. */
struct lt_layout {
    static constexpr uint64_t MAGIC = LT_LAYOUT_MAGIC;
    uint64_t magic;
    int32_t type;
    uint64_t rows, cols;
    int64_t ld;
};

/* CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_{A,B,C,D}_BYTES: what the caller promises of each operand
 * (address and row stride); cuBLASLt's default is 256. The heuristic's algorithm carries the
 * promise in algo.data[1..4], and the matmul holds the operands to it. */
constexpr uint32_t LT_DEFAULT_ALIGNMENT = 256;

struct lt_pref {
    static constexpr uint64_t MAGIC = LT_PREF_MAGIC;
    uint64_t magic;
    uint64_t max_workspace;
    uint32_t min_alignment[4]; /* A, B, C, D */
};

/* The registry of live descriptors (cublaslt_shim.cpp), so a destroyed or foreign pointer is
 * refused without ever being dereferenced. */
void lt_register(const void *p);
void lt_unregister(const void *p);
bool lt_registered(const void *p);

/* The live descriptor of kind T (lt_desc, lt_layout, lt_pref) behind handle h, or nullptr. */
template <typename T, typename H> T *live(H h)
{
    T *p = reinterpret_cast<T *>(h);
    return p && lt_registered(p) && p->magic == T::MAGIC ? p : nullptr;
}

/* One heuristic query or matmul: its descriptors and, once check_problem passed, what they mean. */
struct lt_problem {
    const char *fn;
    bool at_matmul; /* a matmul refuses a bad aux ld as INVALID_VALUE, a heuristic finds no algo */
    cublasLtHandle_t handle;
    cublasLtMatmulDesc_t desc_handle;
    cublasLtMatrixLayout_t layouts[4]; /* A, B, C, D as passed */
    const lt_desc *desc;
    const lt_layout *a, *b, *c, *d;
    int m, n, k;
    cudaDataType ab_type, cd_type;
    gemm_epilogue epilogue; /* kind, pointers, resolved types and aux ld */
};

/* Everything a heuristic query can check: handle, descriptors, compute/scale types, pointer mode,
 * matrix types, epilogue, layouts and their dimensions, aux ld, and the bias and aux pointers'
 * alignment. Fills in p's meaning on success. */
cublasStatus_t check_problem(lt_problem *p);

/* What only a matmul can check before the engine does: algo, epilogue pointers, A/B/C/D
 * alignment, workspace. */
cublasStatus_t check_matmul_pointers(const lt_problem &p, const gemm_call &g, const cublasLtMatmulAlgo_t *algo,
                                     const void *workspace, size_t workspace_bytes);

/* After check_gemm: no output may share a byte with another operand (a race on a GPU), and the
 * workspace none with any. */
cublasStatus_t check_overlaps(const gemm_call &g, const void *workspace, size_t workspace_bytes);

} /* namespace ddp_cudaemu */

#endif
