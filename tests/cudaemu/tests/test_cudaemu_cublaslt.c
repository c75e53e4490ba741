/* test_cudaemu_cublaslt.c — the cuBLASLt shim computes what a GPU's cublasLtMatmul computes, fused
 * epilogues included, and refuses what a GPU would refuse or fault on.
 *
 * Plain C against the real cublasLt.h. Proves, against a double-precision reference computed
 * here: epilogues DEFAULT, BIAS, GELU_AUX_BIAS (D and aux) and DGELU, for fp32, bf16 and bf16 A/B
 * with fp32 C/D, all four transpose combinations, leading dimensions larger than the rows (aux at
 * an ld of 16 for 13 rows), C as D or apart from it, beta 0 with NaN in C (never read) and in D,
 * every operand in an allocation of exactly its size, padding rows of D and aux untouched; bf16
 * outputs rounded once (an exact case where rounding the product before adding the bias gives
 * another bf16); cudaemu_cublaslt_matmuls() grows by one per accepted matmul and not for refused
 * ones. Refusals (status, heuristic and/or matmul, and the stderr line naming the argument): aux
 * ld not a multiple of 8 or below D's rows, missing bias or aux pointer, aux or bias one element
 * past its allocation, wrong device, host matrix, unsupported epilogues and types, a bogus algo,
 * mismatched layouts, overlapping outputs, misalignment, operands below the alignment promised to
 * the heuristic (cuBLASLt's default 256 bytes), device scalars, a dead stream, wrong attribute
 * sizes; matrices interleaved in one allocation without sharing a byte are accepted. A case, and
 * the calls that run it, are emu_cublaslt_case.h's. */
#include "emu_cublaslt_case.h"
#include "emu_test_util.h"
#include "tests/check.h"
#include "tests/cudaemu/cudaemu.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

enum { M = 13, N = 7, K = 40, PAD = 3, AUX_LD = 16 };

/* --- numerics ------------------------------------------------------------------------------ */

static double gelu_d(double x) { return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }

static double gelu_grad_d(double x)
{
    double s = sqrt(2.0 / M_PI), t = tanh(s * (x + 0.044715 * x * x * x));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * s * (1.0 + 3.0 * 0.044715 * x * x);
}

/* Host copies of one case's inputs (as the values their types hold) and of its outputs. */
typedef struct {
    float a[(K + PAD) * (K + PAD)], b[(K + PAD) * (K + PAD)], c[(M + PAD) * N], bias[M], aux_in[AUX_LD * N];
    float d[(M + PAD) * N], aux[AUX_LD * N], d0[(M + PAD) * N], aux0[AUX_LD * N];
} host_data;

static double op_at(const float *x, int ld, int trans, int r, int c)
{
    return trans ? x[(size_t)r * ld + c] : x[(size_t)c * ld + r];
}

/* Tolerance. The fp32 path's error is roundings only: one per product (exact for bf16 inputs),
 * K - 1 additions in any order, alpha, beta * c and its addition, the bias addition: each term
 * carries at most K + 4 factors (1 + d), |d| <= 2^-24, so with mag = sum of the terms' magnitudes
 *     e = (K + 5) 2^-24 mag        (+1: gamma_n's n u / (1 - n u) and the reference's rounding).
 * gelu in float: u = s (x + c x^3) has <= 5 roundings on same-sign terms, |d tanh| <= sech^2(u) |du|
 * (|u| sech^2 u <= 0.45) plus tanhf's 2 ulp, so |dt| <= 2^-21 and gelu = x (1 + t) / 2 is off by
 * <= 2^-20 (1 + |x|); its slope is at most 1.13, so gelu(pre) is within 1.13 e + 2^-20 (1 + |x|).
 * gelu' in float: (1 - t^2) is off by <= 2^-19, times 0.5 |x| s (1 + 0.134 x^2), so within
 * 2^-19 (1 + |x| (1 + 0.134 x^2)); D = acc gelu'(aux) within |gelu'| e + |acc| that + 2^-24 |D|.
 * A bf16 output is that float rounded once to nearest even: bf16 keeps 8 significant bits, so
 * the rounding moves x by at most half an ulp, 2^-8 |x| (2^-9 would fail correct results):
 *     bound_bf16 = bound + 2^-8 (|ref| + bound). */
static double bf16_widen(double bound, double ref, cudaDataType t)
{
    return t == CUDA_R_16BF ? bound + 0x1p-8 * (fabs(ref) + bound) : bound;
}

static int count_wrong(const lt_case *c, const host_data *h, int *aux_wrong)
{
    int wrong = 0;
    *aux_wrong = 0;
    for (int j = 0; j < N; j++)
        for (int i = 0; i < M; i++) {
            double acc = 0.0, mag = 0.0;
            for (int p = 0; p < K; p++) {
                double prod = c->alpha * op_at(h->a, c->lda, c->ta, i, p) * op_at(h->b, c->ldb, c->tb, p, j);
                acc += prod;
                mag += fabs(prod);
            }
            double cij = h->c[(size_t)j * c->ldc + i]; /* beta 0: never read (it is NaN then) */
            acc += c->beta == 0.0f ? 0.0 : c->beta * cij;
            mag += c->beta == 0.0f ? 0.0 : fabs(c->beta * cij);
            if (c->epi == CUBLASLT_EPILOGUE_BIAS || c->epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS) {
                acc += h->bias[i];
                mag += fabs(h->bias[i]);
            }
            double e = (K + 5) * 0x1p-24 * mag, ref = acc, bound = e;
            if (c->epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS) {
                double got_aux = h->aux[(size_t)j * AUX_LD + i];
                *aux_wrong += !(fabs(got_aux - acc) <= bf16_widen(e, acc, c->cd));
                ref = gelu_d(acc);
                bound = 1.13 * e + 0x1p-20 * (1.0 + fabs(acc));
            } else if (c->epi == CUBLASLT_EPILOGUE_DGELU) {
                double x = h->aux_in[(size_t)j * AUX_LD + i], g = gelu_grad_d(x);
                ref = acc * g;
                bound = fabs(g) * e + fabs(acc) * 0x1p-19 * (1.0 + fabs(x) * (1.0 + 0.134 * x * x)) +
                        0x1p-24 * fabs(ref);
            }
            double got = h->d[(size_t)j * c->ldc + i];
            wrong += !(fabs(got - ref) <= bf16_widen(bound, ref, c->cd));
        }
    return wrong;
}

/* Rows between M and the ld of D and aux belong to neither: their bytes must be as they were. */
static int count_padding_changed(const host_data *h, int ldc, int aux_written)
{
    int changed = 0;
    for (int j = 0; j < N - 1; j++) {
        for (int i = M; i < ldc; i++)
            changed += memcmp(&h->d[(size_t)j * ldc + i], &h->d0[(size_t)j * ldc + i], sizeof(float)) != 0;
        for (int i = M; i < AUX_LD && aux_written; i++)
            changed += h->aux[(size_t)j * AUX_LD + i] != h->aux0[(size_t)j * AUX_LD + i];
    }
    return changed;
}

static const cublasLtEpilogue_t epilogues[4] = {CUBLASLT_EPILOGUE_DEFAULT, CUBLASLT_EPILOGUE_BIAS,
                                                CUBLASLT_EPILOGUE_GELU_AUX_BIAS, CUBLASLT_EPILOGUE_DGELU};

/* cmode 0: C is D, beta 0.5; 1: C apart, beta -0.75, D NaN; 2: C is D, beta 0, C NaN; 3: C apart,
 * beta 0, both NaN. */
static void run_numeric(cudaDataType ab, cudaDataType cd, int e, int ta, int tb, int cmode, host_data *h)
{
    unsigned state = 1000u + (unsigned)(((e * 2 + ta) * 2 + tb) * 4 + cmode);
    lt_case c = {.ab = ab, .cd = cd, .ta = ta, .tb = tb, .epi = epilogues[e], .m = M, .n = N, .k = K,
                 .lda = (ta ? K : M) + PAD, .ldb = (tb ? N : K) + PAD, .ldc = M + PAD};
    size_t na = span(ta ? K : M, ta ? M : K, c.lda), nb = span(tb ? N : K, tb ? K : N, c.ldb);
    size_t nc = span(M, N, c.ldc), nx = span(M, N, AUX_LD);
    gen(h->a, na, ab, 1.0f, &state);
    gen(h->b, nb, ab, 2.0f, &state);
    gen(h->c, nc, cd, 4.0f, &state);
    gen(h->bias, M, cd, 1.5f, &state);
    gen(h->aux_in, nx, cd, 3.0f, &state);
    for (size_t i = 0; i < nx; i++)
        h->aux0[i] = 77.0f; /* sentinel in aux's padding */
    for (size_t i = 0; i < nc; i++)
        h->d0[i] = cmode == 0 ? h->c[i] : NAN;
    if (cmode >= 2)
        for (size_t i = 0; i < nc; i++)
            h->c[i] = NAN;
    c.alpha = 1.25f;
    c.beta = cmode == 0 ? 0.5f : cmode == 1 ? -0.75f : 0.0f;
    c.A = upload(ab, h->a, na);
    c.B = upload(ab, h->b, nb);
    c.D = upload(cd, h->d0, nc);
    c.C = cmode == 1 || cmode == 3 ? upload(cd, h->c, nc) : c.D;
    void *bias = upload(cd, h->bias, M), *aux = e == 3 ? upload(cd, h->aux_in, nx) : upload(cd, h->aux0, nx);
    c.bias = e == 1 || e == 2 ? bias : NULL;
    c.aux = e >= 2 ? aux : NULL;
    c.aux_ld = e >= 2 ? AUX_LD : 0;
    uint64_t before = cudaemu_cublaslt_matmuls();
    cublasStatus_t heur;
    int found;
    CHECK_EQ_INT(run_case(&c, &heur, &found), CUBLAS_STATUS_SUCCESS);
    CHECK(heur == CUBLAS_STATUS_SUCCESS && found == 1, "heuristic %d found %d", (int)heur, found);
    CHECK(cudaemu_cublaslt_matmuls() == before + 1, "counter %llu after %llu",
          (unsigned long long)cudaemu_cublaslt_matmuls(), (unsigned long long)before);
    CHECK_EQ_INT(cudaStreamSynchronize(stream), cudaSuccess);
    download(cd, c.D, h->d, nc);
    download(cd, aux, h->aux, nx);
    int aux_wrong, wrong = count_wrong(&c, h, &aux_wrong);
    int padding = count_padding_changed(h, c.ldc, e == 2);
    CHECK(wrong == 0 && aux_wrong == 0 && padding == 0, "%s/%s epilogue %d trans %c%c cmode %d: %d wrong D, %d "
          "wrong aux, %d padding changed", ab == CUDA_R_16BF ? "bf16" : "fp32", cd == CUDA_R_16BF ? "bf16" : "fp32",
          (int)epilogues[e], "NT"[ta], "NT"[tb], cmode, wrong, aux_wrong, padding);
    free_case(&c);
    if (!c.bias)
        cudaFree(bias);
    if (!c.aux)
        cudaFree(aux);
}

static void test_numerics(void)
{
    static host_data h;
    const cudaDataType types[3][2] = {{CUDA_R_32F, CUDA_R_32F}, {CUDA_R_16BF, CUDA_R_16BF}, {CUDA_R_16BF, CUDA_R_32F}};
    for (int t = 0; t < 3; t++)
        for (int e = 0; e < 4; e++)
            for (int tr = 0; tr < 4; tr++)
                for (int cmode = 0; cmode < 4; cmode++)
                    run_numeric(types[t][0], types[t][1], e, tr >> 1, tr & 1, cmode, &h);
}

/* D = 1 + 2^-8 (exact: 1 * 1 + 2^-8 * 1) plus bias 2^-9 is 1 + 3 2^-9: rounded once to bf16 it is
 * 1 + 2^-7 (0x3f81); rounding the product first gives the tie 1 + 2^-8 -> 1, then 1 + 2^-9 -> 1
 * (0x3f80). GELU_AUX_BIAS stores the same pre-activation in aux. */
static void test_single_rounding(void)
{
    const float a[2] = {1.0f, 0x1p-8f}, b[2] = {1.0f, 1.0f}, bias = 0x1p-9f, zero = 0.0f;
    for (int e = 1; e <= 2; e++) {
        lt_case c = {.ab = CUDA_R_16BF, .cd = CUDA_R_16BF, .epi = epilogues[e], .m = 1, .n = 1, .k = 2, .lda = 1,
                     .ldb = 2, .ldc = 1, .aux_ld = e == 2 ? 8 : 0, .alpha = 1.0f};
        c.A = upload(CUDA_R_16BF, a, 2);
        c.B = upload(CUDA_R_16BF, b, 2);
        c.C = c.D = upload(CUDA_R_16BF, &zero, 1);
        c.bias = upload(CUDA_R_16BF, &bias, 1);
        c.aux = e == 2 ? upload(CUDA_R_16BF, &zero, 1) : NULL;
        CHECK_EQ_INT(run_case(&c, NULL, NULL), CUBLAS_STATUS_SUCCESS);
        uint16_t d = 0, aux = 0;
        cudaMemcpy(&d, c.D, 2, cudaMemcpyDeviceToHost);
        if (c.aux)
            cudaMemcpy(&aux, c.aux, 2, cudaMemcpyDeviceToHost);
        if (e == 1)
            CHECK(d == 0x3f81, "bf16 BIAS: D = 0x%04x, expected 0x3f81 (one rounding)", (unsigned)d);
        else
            CHECK(aux == 0x3f81, "bf16 GELU_AUX_BIAS: aux = 0x%04x, expected 0x3f81 (one rounding)", (unsigned)aux);
        free_case(&c);
    }
}

/* --- refusals ------------------------------------------------------------------------------- */

/* A valid fp32 GELU_AUX_BIAS case whose operands each fill their allocation exactly. */
static lt_case valid_case(void)
{
    static void *a, *b, *d, *bias, *aux;
    if (!a) {
        cudaMalloc(&a, M * K * 4);
        cudaMalloc(&b, K * N * 4);
        cudaMalloc(&d, M * N * 4);
        cudaMalloc(&bias, M * 4);
        cudaMalloc(&aux, span(M, N, AUX_LD) * 4);
        cudaMemset(b, 0, K * N * 4); /* read by test_interleaved */
    }
    lt_case c = {.ab = CUDA_R_32F, .cd = CUDA_R_32F, .epi = CUBLASLT_EPILOGUE_GELU_AUX_BIAS, .m = M, .n = N, .k = K,
                 .lda = M, .ldb = K, .ldc = M, .aux_ld = AUX_LD, .A = a, .B = b, .C = d, .bias = bias, .D = d,
                 .aux = aux, .alpha = 1.0f, .beta = 1.0f};
    return c;
}

typedef struct {
    const char *what;
    lt_case c;
    cublasStatus_t heur, matmul; /* expected */
    const char *line;            /* expected in stderr */
} refusal;

static void expect_refusals(const refusal *r, int count)
{
    for (int i = 0; i < count; i++) {
        char msg[4096];
        uint64_t before = cudaemu_cublaslt_matmuls();
        cublasStatus_t heur;
        int found;
        emu_capture_begin();
        cublasStatus_t st = run_case(&r[i].c, &heur, &found);
        emu_capture_end(msg, sizeof msg);
        CHECK(heur == r[i].heur && found == (heur == CUBLAS_STATUS_SUCCESS), "%s: heuristic %d (found %d), "
              "expected %d", r[i].what, (int)heur, found, (int)r[i].heur);
        CHECK(st == r[i].matmul, "%s: matmul %d, expected %d", r[i].what, (int)st, (int)r[i].matmul);
        CHECK(cudaemu_cublaslt_matmuls() == before, "%s: a refused matmul was counted", r[i].what);
        CHECK(strstr(msg, r[i].line) != NULL, "%s: stderr \"%s\" lacks \"%s\"", r[i].what, msg, r[i].line);
    }
}

static void test_refusals(void)
{
    const cublasStatus_t OK = CUBLAS_STATUS_SUCCESS, INV = CUBLAS_STATUS_INVALID_VALUE;
    const cublasStatus_t NS = CUBLAS_STATUS_NOT_SUPPORTED, EXE = CUBLAS_STATUS_EXECUTION_FAILED;
    lt_case v = valid_case();
    void *short_aux = NULL, *short_bias = NULL, *dev_alpha = NULL;
    cudaMalloc(&short_aux, (span(M, N, AUX_LD) - 1) * 4);
    cudaMalloc(&short_bias, (M - 1) * 4);
    cudaMalloc(&dev_alpha, 4);
    static float host_a[M * K];
    refusal r[] = {
        {"aux ld 20", v, NS, INV, "cublasLtMatmul: CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD=20 must be a positive "
                                  "multiple of 8 and >= D's rows (13) (CUBLAS_STATUS_INVALID_VALUE)"},
        {"aux ld 8 < 13", v, NS, INV, "cublasLtMatmulAlgoGetHeuristic: CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD=8"},
        {"no bias", v, OK, INV, "CUBLASLT_MATMUL_DESC_BIAS_POINTER is NULL"},
        {"no aux", v, OK, INV, "the epilogue writes aux but CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER is NULL"},
        {"dgelu no aux", v, OK, INV, "the epilogue reads aux but"},
        {"aux overrun", v, OK, EXE, "cublasLtMatmul: aux (13x7, ld=16, batch=1, stride=0) runs 4 bytes past the end "
                                    "of its cudaMalloc allocation"},
        {"bias overrun", v, OK, EXE, "bias (13x1, ld=13, batch=1, stride=0) runs 4 bytes past the end"},
        {"host A", v, OK, EXE, "cublasLtMatmul: A="},
        {"relu", v, NS, NS, "CUBLASLT_MATMUL_DESC_EPILOGUE 2 is not emulated"},
        {"gelu_bias", v, NS, NS, "CUBLASLT_MATMUL_DESC_EPILOGUE 36 is not emulated"},
        {"fp16", v, NS, NS, "A/B CUDA_R_16F with C/D CUDA_R_16F is not emulated"},
        {"fp32 A/B, bf16 D", v, NS, NS, "A/B CUDA_R_32F with C/D CUDA_R_16BF is not emulated"},
        {"tf32 bf16", v, NS, NS, "CUBLAS_COMPUTE_32F_FAST_TF32 takes CUDA_R_32F A/B only, not CUDA_R_16BF"},
        {"bias type", v, NS, NS, "CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE CUDA_R_16BF (14) differs from D's CUDA_R_32F"},
        {"aux type", v, NS, NS, "CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE CUDA_R_16BF (14) differs"},
        {"device pointer mode", v, NS, NS, "CUBLASLT_MATMUL_DESC_POINTER_MODE 1 is not emulated"},
        {"bogus algo", v, OK, INV, "was not returned by cublasLtMatmulAlgoGetHeuristic"},
        {"lda < rows", v, INV, INV, "Adesc ld=12 < max(1, rows=13)"},
        {"k mismatch", v, INV, INV, "Bdesc is 39x7 but transb=N needs 40x7"},
        {"D overlaps A", v, OK, EXE, "D (13x7, ld=13) overlaps A (13x40, ld=13)"},
        {"aux overlaps D", v, OK, EXE, "D (13x7, ld=13) overlaps aux (13x7, ld=16)"},
        {"misaligned D", v, OK, NS, "D=0x"},
        {"device alpha", v, OK, INV, "alpha=0x"},
        {"host workspace", v, OK, EXE, "workspace="},
        {"workspace overlaps bias", v, OK, EXE, "workspace (52x1, ld=52) overlaps bias (13x1, ld=13)"},
        {"misaligned bias", v, NS, NS, "cublasLtMatmulAlgoGetHeuristic: CUBLASLT_MATMUL_DESC_BIAS_POINTER=0x"},
        {"dead stream", v, OK, INV, "is not a live stream of device 0"},
        {"alignment promise", v, OK, INV, "cublasLtMatmul: A=0x"},
    };
    r[0].c.aux_ld = 20;
    r[1].c.aux_ld = 8;
    r[2].c.bias = NULL;
    r[3].c.aux = NULL;
    r[4].c.aux = NULL;
    r[4].c.epi = CUBLASLT_EPILOGUE_DGELU;
    r[5].c.aux = short_aux;
    r[6].c.bias = short_bias;
    r[7].c.A = host_a;
    r[8].c.epi = CUBLASLT_EPILOGUE_RELU;
    r[9].c.epi = CUBLASLT_EPILOGUE_GELU_BIAS;
    r[10].c.ab = r[10].c.cd = CUDA_R_16F;
    r[11].c.cd = CUDA_R_16BF;
    r[12].c.extra_attr = CUBLASLT_MATMUL_DESC_COMPUTE_TYPE + 1;
    r[12].c.extra_val = CUBLAS_COMPUTE_32F_FAST_TF32;
    r[12].c.ab = r[12].c.cd = CUDA_R_16BF;
    r[13].c.extra_attr = CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE + 1;
    r[14].c.extra_attr = CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE + 1;
    r[13].c.extra_val = r[14].c.extra_val = CUDA_R_16BF;
    r[15].c.extra_attr = CUBLASLT_MATMUL_DESC_POINTER_MODE + 1;
    r[15].c.extra_val = CUBLASLT_POINTER_MODE_DEVICE;
    r[16].c.bogus_algo = 1;
    r[17].c.lda = M - 1;
    r[18].c.b_k = K - 1;
    r[19].c.C = r[19].c.D = (void *)v.A; /* D (13 x 7 at ld 13) inside A's allocation */
    r[20].c.C = r[20].c.D = r[20].c.aux = v.aux; /* D inside aux's allocation, on aux */
    r[21].c.D = (char *)v.D + 2;             /* C stays aligned: D is the one named */
    r[22].c.alpha_p = dev_alpha;
    r[23].c.ws = host_a;
    r[23].c.ws_bytes = 64;
    r[24].c.ws = (void *)v.bias; /* device memory of its size, but the bias lives there */
    r[24].c.ws_bytes = M * 4;
    r[25].c.bias = (const char *)v.bias + 2;
    cudaStream_t dead = NULL;
    cudaStreamCreate(&dead);
    cudaStreamDestroy(dead);
    r[26].c.on = &dead;
    r[27].c.promise_default = 1; /* A's rows are 13 floats: 4-byte aligned, not the default 256 */
    expect_refusals(r, (int)(sizeof r / sizeof r[0]));
    cudaGetLastError(); /* the dead stream's cudaErrorInvalidResourceHandle */
    cudaFree(short_aux);
    cudaFree(short_bias);
    cudaFree(dev_alpha);
}

/* The handle was made on device 0: a matmul from a thread whose current device is 1 would launch
 * on the wrong GPU. The heuristic needs no device. */
static void test_wrong_device(void)
{
    setenv("DDP_CUDA_EMU_DEVICES", "2", 1);
    CHECK_EQ_INT(cudaSetDevice(1), cudaSuccess);
    refusal r = {"device 1", valid_case(), CUBLAS_STATUS_SUCCESS, CUBLAS_STATUS_EXECUTION_FAILED,
                 "cublasLtMatmul: the handle belongs to device 0, not the calling thread's current device"};
    expect_refusals(&r, 1);
    CHECK_EQ_INT(cudaSetDevice(0), cudaSuccess);
    unsetenv("DDP_CUDA_EMU_DEVICES");
}

/* call, with stderr captured, must return want and print a line containing line. */
#define EXPECT_REFUSED(call, want, line)                                                        \
    do {                                                                                        \
        char msg_[2048];                                                                        \
        emu_capture_begin();                                                                    \
        cublasStatus_t st_ = (call);                                                            \
        emu_capture_end(msg_, sizeof msg_);                                                     \
        CHECK(st_ == (want), "%s = %d, expected %d", #call, (int)st_, (int)(want));             \
        CHECK_STR_CONTAINS(msg_, line);                                                         \
    } while (0)

/* Descriptors, attributes and the heuristic's own arguments. */
static void test_descriptor_refusals(void)
{
    const cublasStatus_t INV = CUBLAS_STATUS_INVALID_VALUE, NS = CUBLAS_STATUS_NOT_SUPPORTED;
    lt_case v = valid_case();
    cublasLtMatmulDesc_t d = make_desc(&v);
    cublasLtMatrixLayout_t a = NULL, b = NULL, c = NULL, big = NULL;
    cublasLtMatrixLayoutCreate(&a, CUDA_R_32F, M, K, M);
    cublasLtMatrixLayoutCreate(&b, CUDA_R_32F, K, N, K);
    cublasLtMatrixLayoutCreate(&c, CUDA_R_32F, M, N, M);
    cublasLtMatrixLayoutCreate(&big, CUDA_R_32F, (uint64_t)INT32_MAX + 1, N, (int64_t)INT32_MAX + 1);
    cublasLtMatmulPreference_t pref = NULL;
    cublasLtMatmulPreferenceCreate(&pref);
    int32_t op = CUBLAS_OP_T, accum = 1;
    uint64_t ws = 0;
    cublasLtMatmulHeuristicResult_t res;
    int found = -1;
    const float one = 1.0f;
#define MATMUL(alpha, la, lb, lc) cublasLtMatmul(lt, d, alpha, v.A, la, v.B, lb, &one, v.C, lc, v.D, c, NULL, NULL, 0, \
                                                 stream)
    EXPECT_REFUSED(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &op, 8), INV,
                   "cublasLtMatmulDescSetAttribute: CUBLASLT_MATMUL_DESC_TRANSA takes 4 bytes, not sizeInBytes=8 "
                   "(CUBLAS_STATUS_INVALID_VALUE)");
    EXPECT_REFUSED(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &accum, 1), NS,
                   "cublasLtMatmulDescSetAttribute: attribute 25 is not emulated");
    EXPECT_REFUSED(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_SEARCH_MODE, &ws, 4), NS,
                   "cublasLtMatmulPreferenceSetAttribute: attribute 0 is not emulated");
    EXPECT_REFUSED(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, 4), INV,
                   "CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES takes 8 bytes, not sizeInBytes=4");
    EXPECT_REFUSED(cublasLtMatmulAlgoGetHeuristic(lt, d, a, b, c, c, pref, 0, &res, &found), INV,
                   "requestedAlgoCount=0");
    CHECK_EQ_INT(found, 0);
    EXPECT_REFUSED(cublasLtMatmulDescSetAttribute((cublasLtMatmulDesc_t)(void *)a, CUBLASLT_MATMUL_DESC_TRANSA, &op,
                                                  sizeof op), INV, "matmulDesc="); /* a layout is not a desc */
    EXPECT_REFUSED(cublasLtMatmulAlgoGetHeuristic(NULL, d, a, b, c, c, pref, 1, &res, &found),
                   CUBLAS_STATUS_NOT_INITIALIZED, "cublasLtMatmulAlgoGetHeuristic: lightHandle is NULL");
    EXPECT_REFUSED(MATMUL(&one, a, NULL, c), INV, "cublasLtMatmul: Bdesc=(nil) is not a live cublasLtMatrixLayout_t");
    EXPECT_REFUSED(MATMUL(&one, big, b, c), NS, "Adesc 2147483648x7, ld=2147483648: a size above INT_MAX is not "
                   "emulated");
    EXPECT_REFUSED(MATMUL(NULL, a, b, c), INV, "cublasLtMatmul: alpha or beta is NULL");
    EXPECT_REFUSED(MATMUL(&one, a, b, big), NS, "Cdesc 2147483648x7");
#undef MATMUL
    cublasLtMatmulDescDestroy(d);
    EXPECT_REFUSED(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &op, sizeof op), INV,
                   "matmulDesc=");
    cublasLtMatrixLayoutDestroy(a);
    cublasLtMatrixLayoutDestroy(b);
    cublasLtMatrixLayoutDestroy(c);
    cublasLtMatrixLayoutDestroy(big);
    cublasLtMatmulPreferenceDestroy(pref);
}

/* Overlap is judged per element: D in the padding rows of A's columns (both at ld 26 in one
 * allocation) shares no byte with A, and is accepted. */
static void test_interleaved(void)
{
    lt_case c = valid_case();
    float *buf = NULL;
    cudaMalloc((void **)&buf, span(2 * M, K, 2 * M) * 4);
    cudaMemset(buf, 0, span(2 * M, K, 2 * M) * 4);
    c.A = buf;
    c.lda = 2 * M;
    c.C = c.D = buf + M;
    c.ldc = 2 * M;
    c.epi = CUBLASLT_EPILOGUE_BIAS;
    uint64_t before = cudaemu_cublaslt_matmuls();
    CHECK_EQ_INT(run_case(&c, NULL, NULL), CUBLAS_STATUS_SUCCESS);
    CHECK(cudaemu_cublaslt_matmuls() == before + 1, "interleaved matmul not counted");
    CHECK_EQ_INT(cudaStreamSynchronize(stream), cudaSuccess);
    cudaFree(buf);
}

int main(void)
{
    CHECK_EQ_INT(cublasLtCreate(&lt), CUBLAS_STATUS_SUCCESS);
    CHECK_EQ_INT(cudaStreamCreate(&stream), cudaSuccess);
    test_numerics();
    test_single_rounding();
    test_refusals();
    test_wrong_device();
    test_descriptor_refusals();
    test_interleaved();
    CHECK_EQ_INT(cublasLtDestroy(lt), CUBLAS_STATUS_SUCCESS);
    cudaStreamDestroy(stream);
    return check_done("test_cudaemu_cublaslt");
}
