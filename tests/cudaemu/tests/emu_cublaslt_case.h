/* emu_cublaslt_case.h — one cublasLtMatmul call as test_cudaemu_cublaslt.c states it (lt_case: types,
 * transposes, epilogue, sizes, operands, scalars, and the knobs its refusal cases turn) and how such a
 * call is made: values generated exact in their type, uploaded into allocations of exactly their size
 * and read back, the descriptors built, the heuristic asked with the alignments a careful caller
 * promises, then the matmul. It checks only that its own set-up calls succeed; what a case's statuses
 * and outputs should be is the test's to judge. Header-only, test code only; the handle and stream
 * are made in the test's main. */
#ifndef DDP_EMU_CUBLASLT_CASE_H
#define DDP_EMU_CUBLASLT_CASE_H

#include "runtime/base/align.h"
#include "runtime/base/half.h"
#include "tests/check.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* What every case runs on: made in the test's main. */
static cublasLtHandle_t lt;
static cudaStream_t stream;

/* One matmul: types, transposes, epilogue, sizes and leading dimensions, operands, scalars, and a
 * few knobs the refusal tests turn (0 leaves each alone). */
typedef struct {
    cudaDataType ab, cd;
    int ta, tb;
    cublasLtEpilogue_t epi;
    int m, n, k, lda, ldb, ldc;
    int64_t aux_ld;
    const void *A, *B, *C, *bias;
    void *D, *aux;
    float alpha, beta;
    const void *alpha_p;                 /* instead of &alpha when set */
    int extra_attr;                      /* one more int32 descriptor attribute to set (attr + 1) */
    int32_t extra_val;
    int bogus_algo;
    int b_k;                             /* B's k when it should disagree with A's */
    const cudaStream_t *on;              /* instead of the test's stream when set */
    void *ws;
    size_t ws_bytes;
    int promise_default;                 /* leave the MIN_ALIGNMENT preferences at cuBLASLt's 256 */
} lt_case;

static inline size_t esize(cudaDataType t) { return t == CUDA_R_16BF ? 2 : 4; }

static inline float rnd(unsigned *state)
{
    *state = *state * 1664525u + 1013904223u;
    return ((float)(*state >> 8) / 16777216.0f - 0.5f) * 2.0f + 0.05f;
}

/* Truncation: inputs only need to be bf16 values, independently of the shim's rounding. */
static inline uint16_t bf16_bits(float x)
{
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    return (uint16_t)(bits >> 16);
}

/* n values in [-scale, scale], made exact in type. */
static inline void gen(float *v, size_t n, cudaDataType t, float scale, unsigned *state)
{
    for (size_t i = 0; i < n; i++) {
        v[i] = rnd(state) * scale;
        if (t == CUDA_R_16BF)
            v[i] = bf16_to_float(bf16_bits(v[i]));
    }
}

/* An allocation of exactly n elements of type holding v (values exact in type). */
static inline void *upload(cudaDataType t, const float *v, size_t n)
{
    uint16_t *h = malloc(n * 2 + 2);
    void *d = NULL;
    for (size_t i = 0; i < n && t == CUDA_R_16BF; i++)
        h[i] = bf16_bits(v[i]);
    cudaMalloc(&d, n * esize(t));
    cudaMemcpy(d, t == CUDA_R_16BF ? (const void *)h : (const void *)v, n * esize(t), cudaMemcpyHostToDevice);
    free(h);
    return d;
}

static inline void download(cudaDataType t, const void *d, float *v, size_t n)
{
    uint16_t *h = malloc(n * 4 + 4);
    cudaMemcpy(t == CUDA_R_16BF ? (void *)h : (void *)v, d, n * esize(t), cudaMemcpyDeviceToHost);
    for (size_t i = 0; i < n && t == CUDA_R_16BF; i++)
        v[i] = bf16_to_float(h[i]);
    free(h);
}

static inline size_t span(int rows, int cols, int ld) { return (size_t)ld * (size_t)(cols - 1) + (size_t)rows; }

static inline void set_attr(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, const void *v, size_t size)
{
    CHECK_EQ_INT(cublasLtMatmulDescSetAttribute(d, a, v, size), CUBLAS_STATUS_SUCCESS);
}

static inline cublasLtMatmulDesc_t make_desc(const lt_case *c)
{
    cublasLtMatmulDesc_t d = NULL;
    CHECK_EQ_INT(cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
    int32_t ta = c->ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb = c->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    uint32_t epi = (uint32_t)c->epi;
    set_attr(d, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    set_attr(d, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    set_attr(d, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
    if (c->bias)
        set_attr(d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &c->bias, sizeof c->bias);
    if (c->aux)
        set_attr(d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &c->aux, sizeof c->aux);
    if (c->aux_ld)
        set_attr(d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &c->aux_ld, sizeof c->aux_ld);
    if (c->extra_attr)
        set_attr(d, (cublasLtMatmulDescAttributes_t)(c->extra_attr - 1), &c->extra_val, sizeof c->extra_val);
    return d;
}

/* A case's device operands (C only when apart from D); NULL ones are skipped by cudaFree. */
static inline void free_case(const lt_case *c)
{
    const void *p[6] = {c->A, c->B, c->C != c->D ? c->C : NULL, c->D, c->bias, c->aux};
    for (int i = 0; i < 6; i++)
        cudaFree((void *)p[i]);
}

/* What a careful caller promises the heuristic of an operand: its real alignment, at most 256. */
static inline uint32_t alignment_of(const void *p, int ld, cudaDataType t)
{
    return operand_alignment(p, (uint64_t)ld * esize(t), 256);
}

static inline void promise_alignment(const lt_case *c, cublasLtMatmulPreference_t pref)
{
    const cublasLtMatmulPreferenceAttributes_t attrs[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    const uint32_t have[4] = {alignment_of(c->A, c->lda, c->ab), alignment_of(c->B, c->ldb, c->ab),
                              alignment_of(c->C, c->ldc, c->cd), alignment_of(c->D, c->ldc, c->cd)};
    for (int i = 0; i < 4 && !c->promise_default; i++)
        CHECK_EQ_INT(cublasLtMatmulPreferenceSetAttribute(pref, attrs[i], &have[i], sizeof have[i]),
                     CUBLAS_STATUS_SUCCESS);
}

/* Heuristic, then matmul with its algo (NULL when it found none, so the matmul's own verdict shows);
 * the heuristic's status and count go where heur and found point, when they do. */
static inline cublasStatus_t run_case(const lt_case *c, cublasStatus_t *heur, int *found)
{
    cublasStatus_t heur_ignored;
    int found_ignored;
    heur = heur ? heur : &heur_ignored;
    found = found ? found : &found_ignored;
    cublasLtMatmulDesc_t desc = make_desc(c);
    cublasLtMatrixLayout_t l[4];
    cublasLtMatrixLayoutCreate(&l[0], c->ab, c->ta ? c->k : c->m, c->ta ? c->m : c->k, c->lda);
    int kb = c->b_k ? c->b_k : c->k;
    cublasLtMatrixLayoutCreate(&l[1], c->ab, c->tb ? c->n : kb, c->tb ? kb : c->n, c->ldb);
    cublasLtMatrixLayoutCreate(&l[2], c->cd, c->m, c->n, c->ldc);
    cublasLtMatrixLayoutCreate(&l[3], c->cd, c->m, c->n, c->ldc);
    cublasLtMatmulPreference_t pref = NULL;
    uint64_t ws = c->ws_bytes;
    cublasLtMatmulPreferenceCreate(&pref);
    CHECK_EQ_INT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws),
                 CUBLAS_STATUS_SUCCESS);
    promise_alignment(c, pref);
    cublasLtMatmulHeuristicResult_t r[2];
    *found = -1;
    *heur = cublasLtMatmulAlgoGetHeuristic(lt, desc, l[0], l[1], l[2], l[3], pref, 2, r, found);
    cublasLtMatmulAlgo_t bogus = {{0}};
    const cublasLtMatmulAlgo_t *algo = c->bogus_algo ? &bogus : *found > 0 ? &r[0].algo : NULL;
    const void *alpha = c->alpha_p ? c->alpha_p : &c->alpha;
    cublasStatus_t st = cublasLtMatmul(lt, desc, alpha, c->A, l[0], c->B, l[1], &c->beta, c->C, l[2], c->D, l[3],
                                       algo, c->ws, c->ws_bytes, c->on ? *c->on : stream);
    for (int i = 0; i < 4; i++)
        cublasLtMatrixLayoutDestroy(l[i]);
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatmulDescDestroy(desc);
    return st;
}

#endif
