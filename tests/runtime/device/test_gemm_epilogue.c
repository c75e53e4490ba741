/* test_gemm_epilogue.c — the epilogue GEMMs (gemm_bias, gemm_bias_gelu, gemm_gelu_backward) on
 * the CPU backend (fp32) and the CUDA device (fp32 and bf16) against a double-precision reference
 * computed here from the same inputs.
 *
 * Proves: each op computes what device.h says for all four transpose combinations, leading
 * dimensions wider than the rows, m = 1 and k = 1, with outputs that start as NaN (so a skipped
 * element fails); bf16 outputs are rounded from the fp32 accumulator. In the emulated build it
 * also proves which path ran: when every row stride is 16-byte aligned, every gemm_bias and every
 * GELU op whose n is a multiple of 8 (the row stride cuBLASLt requires of the GELU input) is
 * exactly one cuBLASLt GEMM (cudaemu_cublaslt_matmuls() counts them); the others run unfused and
 * are just as right (on an H100, cuBLASLt's algorithm for 4- and 8-byte aligned bf16 GELU
 * epilogues was not, which this test found).
 * Inputs are random (seed printed, DDP_TEST_SEED repeats a run) and, for bf16, bf16 values, so
 * both sides start from the same numbers.
 *
 * Tolerances, per element, from the rounding of the type's unit roundoff r (2^-24 fp32, 2^-8 bf16;
 * u = 2^-24 is the fp32 accumulator's) and |A||B| = sum_p |op(A)[i,p]·op(B)[p,j]|:
 *  - the GEMM g: any fp32 summation order is within (k+1)·u·|A||B| (the classic γ_k bound), called
 *    e_g below;
 *  - pre = g + bias: e_g + r·(|g| + |pre|): the sum's rounding, and on the unfused path the GEMM
 *    output's own rounding to the type first;
 *  - y = gelu(pre): 1.13·tol(pre) (1.13 bounds |gelu'| for GPT-2's tanh GELU), plus r·|y| for
 *    the stored result and the GELU's float evaluation: 8u·|pre| with libm's tanhf/expf (CPU,
 *    emulator); on a real GPU 2^-12·|pre|, since cuBLASLt's epilogue may evaluate tanh with the
 *    hardware approximation (relative error 2^-11, times 0.5·|pre|);
 *  - dx = g·gelu'(pre): 1.13·(e_g + r·|g|) + r·|dx| + the same evaluation term times |g|.
 * A wrong formula (erf GELU for tanh GELU, a missing bias, a transposed operand) is off by far
 * more than these at the sizes used (erf for tanh: up to 4.7e-4 at |pre| = 2.7; checked by
 * breaking the CPU op once), except under a real GPU's allowance for approximate tanh. */
#include <float.h>
#include <math.h>
#include <stdbool.h>

#include "runtime/base/half.h"
#include "tests/runtime/device/cuda_pair.h"
#ifdef DDP_CUDA_EMULATION
#include "tests/cudaemu/cudaemu.h"
#endif

#define GELU_SLOPE_MAX 1.13
#define U32 (1.0 / 16777216.0)

/* The GELU's float evaluation error per unit of |pre| on device d (see the header). */
static double gelu_eval_error(const device *d)
{
#ifdef DDP_CUDA_EMULATION
    (void)d;
    return 8.0 * U32;
#else
    return d->kind == DEVICE_CUDA ? 1.0 / 4096.0 : 8.0 * U32;
#endif
}

typedef struct problem {
    int64_t m, n, k, lda, ldb;
    bool ta, tb;
} problem;

/* The host inputs of one problem, already representable in the type under test. */
typedef struct inputs {
    float *a, *b, *bias, *pre_in;
    size_t na, nb;
} inputs;

static float draw(tensor_dtype t, float lo, float hi)
{
    float mag = rng_uniform(&test_rng, lo, hi), x = rng_below(&test_rng, 2) ? mag : -mag;
    return t == TENSOR_BF16 ? bf16_to_float(float_to_bf16(x)) : x;
}

static float *draw_n(tensor_dtype t, size_t n, float lo, float hi)
{
    float *h = xmalloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++)
        h[i] = draw(t, lo, hi);
    return h;
}

/* op(A)[i,p] with A row-major of row stride lda (stored [k, m] when transposed) */
static double op_a(const problem *p, const float *a, int64_t i, int64_t q)
{
    return p->ta ? a[q * p->lda + i] : a[i * p->lda + q];
}

static double op_b(const problem *p, const float *b, int64_t q, int64_t j)
{
    return p->tb ? b[j * p->ldb + q] : b[q * p->ldb + j];
}

static double gelu(double x)
{
    const double s = sqrt(2.0 / M_PI);
    return 0.5 * x * (1.0 + tanh(s * (x + 0.044715 * x * x * x)));
}

static double gelu_slope(double x)
{
    const double s = sqrt(2.0 / M_PI), th = tanh(s * (x + 0.044715 * x * x * x));
    return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * s * (1.0 + 3.0 * 0.044715 * x * x);
}

/* Uploads n floats to d in type t (bf16 values convert exactly). */
static void *put(device *d, tensor_dtype t, const float *h, size_t n)
{
    if (t == TENSOR_F32)
        return dev_alloc_upload(d, h, n * sizeof *h, sizeof *h);
    uint16_t *b = xmalloc(n * sizeof *b);
    for (size_t i = 0; i < n; i++)
        b[i] = float_to_bf16(h ? h[i] : NAN);
    void *p = dev_alloc_upload(d, b, n * sizeof *b, sizeof *b);
    free(b);
    return p;
}

static void *put_nan(device *d, tensor_dtype t, size_t n)
{
    float *h = xmalloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++)
        h[i] = NAN;
    void *p = put(d, t, h, n);
    free(h);
    return p;
}

/* Downloads n elements of type t as floats and frees the device copy. */
static float *take(device *d, tensor_dtype t, void *p, size_t n)
{
    float *h = xmalloc(n * sizeof *h);
    if (t == TENSOR_F32) {
        download(d, h, p, n * sizeof *h);
    } else {
        uint16_t *b = xmalloc(n * sizeof *b);
        download(d, b, p, n * sizeof *b);
        for (size_t i = 0; i < n; i++)
            h[i] = bf16_to_float(b[i]);
        free(b);
    }
    placed_free(d, p);
    return h;
}

/* Counts the elements outside their tolerance, reporting the first. */
typedef struct verdict {
    size_t bad, first;
    double got, want, tol;
} verdict;

static void judge(verdict *v, size_t i, double got, double want, double tol)
{
    if (!(fabs(got - want) <= tol) && v->bad++ == 0) {
        v->first = i;
        v->got = got;
        v->want = want;
        v->tol = tol;
    }
}

static void report(const verdict *v, const char *what, const char *where)
{
    CHECK(v->bad == 0, "%s %s: %zu elements off; first [%zu]: got %.9g, want %.9g (tolerance %.3g)", what, where,
          v->bad, v->first, v->got, v->want, v->tol);
}

/* Runs the three ops on d in type t and checks them against the double reference. */
static void run_on(device *d, tensor_dtype t, const problem *p, const inputs *in, const char *where)
{
    ddp_err err = {0};
    const struct device_ops *op = d->ops;
    size_t mn = (size_t)(p->m * p->n);
    const double r = t == TENSOR_BF16 ? 1.0 / 256.0 : U32, eval = gelu_eval_error(d);
    void *a = put(d, t, in->a, in->na), *b = put(d, t, in->b, in->nb), *bias = put(d, t, in->bias, (size_t)p->n);
    void *pre_in = put(d, t, in->pre_in, mn);
    void *y = put_nan(d, t, mn), *pre = put_nan(d, t, mn), *yg = put_nan(d, t, mn), *dx = put_nan(d, t, mn);
#ifdef DDP_CUDA_EMULATION
    uint64_t lt0 = cudaemu_cublaslt_matmuls();
#endif
    int rc = op->gemm_bias(d, t, p->ta, p->tb, p->m, p->n, p->k, a, p->lda, b, p->ldb, bias, y, &err);
    CHECK(rc == 0, "gemm_bias %s: %s", where, err.msg);
    rc = op->gemm_bias_gelu(d, t, p->ta, p->tb, p->m, p->n, p->k, a, p->lda, b, p->ldb, bias, pre, yg, &err);
    CHECK(rc == 0, "gemm_bias_gelu %s: %s", where, err.msg);
    rc = op->gemm_gelu_backward(d, t, p->ta, p->tb, p->m, p->n, p->k, a, p->lda, b, p->ldb, pre_in, dx, &err);
    CHECK(rc == 0, "gemm_gelu_backward %s: %s", where, err.msg);
    die_on(op->synchronize(d, &err), &err, "synchronize");
#ifdef DDP_CUDA_EMULATION
    if (d->kind == DEVICE_CUDA) {
        size_t esz = t == TENSOR_BF16 ? 2 : 4; /* the buffers are cudaMalloc'd: only row strides can misalign */
        bool aligned = (size_t)p->lda * esz % 16 == 0 && (size_t)p->ldb * esz % 16 == 0 && (size_t)p->n * esz % 16 == 0;
        unsigned want = aligned ? (p->n % 8 == 0 ? 3u : 1u) : 0u;
        CHECK(cudaemu_cublaslt_matmuls() - lt0 == want,
              "%s: %llu cuBLASLt GEMMs for the three ops, expected %u (none unless every row stride is 16-byte "
              "aligned; then gemm_bias, and the GELU ops when n %% 8 == 0)", where,
              (unsigned long long)(cudaemu_cublaslt_matmuls() - lt0), want);
    }
#endif
    float *hy = take(d, t, y, mn), *hpre = take(d, t, pre, mn), *hyg = take(d, t, yg, mn), *hdx = take(d, t, dx, mn);
    verdict vy = {0}, vpre = {0}, vyg = {0}, vdx = {0};
    for (int64_t i = 0; i < p->m; i++)
        for (int64_t j = 0; j < p->n; j++) {
            double g = 0, mag = 0;
            for (int64_t q = 0; q < p->k; q++) {
                double prod = op_a(p, in->a, i, q) * op_b(p, in->b, q, j);
                g += prod;
                mag += fabs(prod);
            }
            size_t at = (size_t)(i * p->n + j);
            double e_g = (double)(p->k + 1) * U32 * mag, want_pre = g + in->bias[j];
            double tol_pre = e_g + r * (fabs(g) + fabs(want_pre)), want_y = gelu(want_pre);
            double pre_x = in->pre_in[at], want_dx = g * gelu_slope(pre_x);
            judge(&vy, at, hy[at], want_pre, tol_pre);
            judge(&vpre, at, hpre[at], want_pre, tol_pre);
            judge(&vyg, at, hyg[at], want_y,
                  GELU_SLOPE_MAX * tol_pre + r * fabs(want_y) + eval * fabs(want_pre));
            judge(&vdx, at, hdx[at], want_dx,
                  GELU_SLOPE_MAX * (e_g + r * fabs(g)) + r * fabs(want_dx) + eval * fabs(g));
        }
    report(&vy, "gemm_bias y", where);
    report(&vpre, "gemm_bias_gelu pre", where);
    report(&vyg, "gemm_bias_gelu y", where);
    report(&vdx, "gemm_gelu_backward dx", where);
    void *inputs_on_d[] = {a, b, bias, pre_in};
    for (size_t i = 0; i < 4; i++)
        placed_free(d, inputs_on_d[i]);
    free(hy);
    free(hpre);
    free(hyg);
    free(hdx);
}

static void run_problem(problem p)
{
    char where[160];
    p.lda = (p.ta ? p.m : p.k) + (p.m % 3);   /* wider than the row now and then */
    p.ldb = (p.tb ? p.k : p.n) + (p.k % 2);
    const tensor_dtype types[] = {TENSOR_F32, TENSOR_BF16};
    for (int ti = 0; ti < (gpu ? 2 : 1); ti++) {
        tensor_dtype t = types[ti];
        inputs in;
        in.na = (size_t)((p.ta ? p.k : p.m) * p.lda);
        in.nb = (size_t)((p.tb ? p.n : p.k) * p.ldb);
        in.a = draw_n(t, in.na, 0.05f, 1.0f);
        in.b = draw_n(t, in.nb, 0.05f, 1.0f);
        in.bias = draw_n(t, (size_t)p.n, 0.0f, 1.0f);
        in.pre_in = draw_n(t, (size_t)(p.m * p.n), 0.0f, 4.0f); /* GELU's curved part and both tails */
        snprintf(where, sizeof where, "m=%lld n=%lld k=%lld ta=%d tb=%d %s", (long long)p.m, (long long)p.n,
                 (long long)p.k, p.ta, p.tb, t == TENSOR_BF16 ? "bf16" : "fp32");
        if (t == TENSOR_F32) {
            char on_cpu[176];
            snprintf(on_cpu, sizeof on_cpu, "%s on cpu", where);
            run_on(cpu, t, &p, &in, on_cpu);
        }
        strncat(where, " on cuda", sizeof where - strlen(where) - 1);
        if (gpu)
            run_on(gpu, t, &p, &in, where);
        free(in.a);
        free(in.b);
        free(in.bias);
        free(in.pre_in);
    }
}

static void test_shapes(void)
{
    /* m, n, k: one row and k = 1; n a multiple of 8 (fused) and not (the GELU ops unfused); a
     * GPT-2-like 4x expansion and its projection back; one whose row strides are 16-byte aligned
     * in every transpose (m % 3 == 0, k even: run_problem pads by those), fused throughout */
    const int64_t shapes[][3] = {{1, 8, 1}, {5, 16, 7}, {7, 13, 9}, {33, 24, 40}, {20, 64, 16}, {20, 16, 64},
                                 {3, 1, 5}, {48, 64, 32}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int tr = 0; tr < 4; tr++)
            run_problem((problem){shapes[s][0], shapes[s][1], shapes[s][2], 0, 0, tr & 1, (tr >> 1) & 1});
}

int main(void)
{
    const pair_group groups[] = {{"epilogue GEMMs", test_shapes}};
    return pair_main("test_gemm_epilogue", 17, groups, sizeof groups / sizeof groups[0], 1);
}
