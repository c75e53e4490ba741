/* cpu_kernel.h — what every op family's CPU code (FAMILY_cpu.c) includes, first: the backend
 * function declarations (backend.h) and the one way a CPU op loops over elements in parallel.
 *
 * Element-wise loops run on OpenMP threads when large enough to pay for the fork: the GEMM
 * library's worker threads would otherwise spin idle (on this project's 2-vCPU machines, on the
 * hyperthread sibling of the one doing the work). A loop marked DDP_PARALLEL_FOR must compute
 * every element independently, so results do not depend on the thread count; reductions stay
 * serial, in a fixed order. Besides the loop it holds what several families' files share (the
 * column-block width), the GEMM entry for ops that run their own and the packed rows' check; it
 * must not grow op code. */
#ifndef DDP_CPU_KERNEL_H
#define DDP_CPU_KERNEL_H

#include "runtime/device/backend.h"

#define DDP_OMP_MIN_ELEMENTS 32768

/* Width of the column blocks that column-sum loops give each thread (the embedding's and
 * LayerNorm's parameter gradients): 64 double accumulators (512 bytes) stay in L1, and 64 floats
 * are whole cache lines of every row they read. */
#define DDP_COL_BLOCK 64

static inline int64_t ddp_min_i64(int64_t a, int64_t b) { return a < b ? a : b; }
#define DDP_PRAGMA(x) _Pragma(#x)
#define DDP_PARALLEL_FOR(n) DDP_PRAGMA(omp parallel for schedule(static) if ((size_t)(n) >= DDP_OMP_MIN_ELEMENTS))

/* C = alpha·op(A)·op(B) + beta·C in float, row-major (ld = row strides): the backend's GEMM
 * library (device_cpu.c), for an op that runs GEMMs of its own (attention's tiles). With oneDNN a
 * call made inside an OpenMP parallel region runs on the calling thread alone, so a loop of them
 * over independent outputs is deterministic; OpenBLAS threads each call itself, over m and n. */
int device_cpu_sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                     const float *b, int64_t ldb, float beta, float *c, int64_t ldc, ddp_err *err);

/* Packed rows' document bounds (attn_shape's doc_start and doc_end; doc_end NULL: the starts
 * alone, as RoPE takes them) are data, so the CPU backend checks them before an op reads through
 * them: every position t of each row lies in its document [start, end) within [0, T), and a
 * document is a contiguous run (a position's bounds equal its predecessor's, or it starts one).
 * What is wrong is named, with the op, row and position. */
int device_cpu_check_docs(const char *op, const int32_t *doc_start, const int32_t *doc_end, int64_t B, int64_t T,
                          ddp_err *err);

#endif
