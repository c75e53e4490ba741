/* test_cuda_bf16.c — every CUDA op with a bf16 variant (precision: bf16; element-wise, reduce and
 * transformer families) run with TENSOR_BF16, against the CPU backend's float op on the same
 * values widened to float (exact), its result rounded to bf16 (round to nearest-even). GEMMs are
 * not here (cuBLAS's bf16 path is the emulator shim's and cuBLAS's business).
 *
 * Inputs are fresh random values that bf16 represents exactly (seed printed, DDP_TEST_SEED repeats
 * a run); sizes are not multiples of 32 and pass the grid caps (emulator 64 blocks, GPU 1024). bf16
 * outputs on the CUDA side start as NaN, so an element a kernel skips fails; "+=" outputs start as
 * the same bf16 values on both sides. In the emulated build the kernels run under the fiber order
 * named by DDP_CUDA_EMU_ORDER (meson registers one test per order). Every group runs twice: with its
 * buffers at aligned starts (the kernels' 16-byte paths), then one element past them (their
 * one-element fallbacks).
 *
 * Tolerances, derived from bf16 rounding (8 significant bits: one ulp is 2^-7 to 2^-8 of the value,
 * so they count ulps; a relative 2^-8 would be less than one ulp just above a power of two):
 *  - bf16 outputs, 0 ulp where both sides do the same float operations (fill, bias add, add, ReLU,
 *    embedding): the CPU's float result is the kernel's, rounded the same way.
 *  - bf16 outputs, 1 ulp elsewhere. The kernel's float result b differs from the CPU's a only as
 *    in the float tests (test_cuda_kernels.c, test_cuda_transformer.c: at most 8 FLT_EPSILON or
 *    2e-5 relative, far below a bf16 ulp), and the only other difference is the one rounding of
 *    each to bf16; the bf16 input of a "+=" output is the same value on both sides, so it adds
 *    nothing. Rounding is monotone, so two floats closer than a bf16 ulp round to the same or to
 *    adjacent bf16 values: 1 ulp, when a and b straddle a rounding boundary. That takes a boundary
 *    within |a - b| of a; boundaries are an ulp (>= 2^-8·|a|) apart, so it happens to a fraction
 *    of about |a - b|/ulp <= 2^8·2e-5 = 0.5% of the elements at most. So no more than 4 + n/64 of
 *    n elements may be 1 ulp off: a kernel that truncates, or rounds an intermediate to bf16,
 *    moves far more, yet each by 1 ulp only.
 *  - near zero, where the float tests need an absolute floor F (cancellation noise of double
 *    sums), a and b may be further apart than an ulp; that needs |a - b| >= 2^-8·min(|a|,|b|), so
 *    both are below ~2^8·F, and then the two roundings (2^-8 relative each) add at most ~2.2·F to
 *    |a - b| <= F: a bf16 difference up to 4·F also passes.
 *  - float outputs of these ops (parameter gradients, LayerNorm's mean/rstd, the loss statistics)
 *    are computed from identical widened inputs: the float tests' tolerances. */
#include <float.h>
#include <math.h>
#include <stdbool.h>

#include "runtime/base/half.h"
#include "tests/runtime/device/cuda_pair.h"

#define ROUND_ONCE ((double)FLT_EPSILON)

/* Random floats offset ± [lo, hi), rounded to bf16: never zero when lo > 0, mixed signs. */
static float *random_bf16s(size_t n, float offset, float lo, float hi)
{
    float *h = xmalloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++) {
        float mag = rng_uniform(&test_rng, lo, hi);
        h[i] = bf16_to_float(float_to_bf16(offset + (rng_below(&test_rng, 2) ? mag : -mag)));
    }
    return h;
}

/* A buffer on both devices: .c on the CPU, .g on the CUDA device. A bf16 tensor holds floats on
 * the CPU and the same values as bf16 on the CUDA device; a float buffer holds floats on both. */
typedef struct both {
    void *c, *g;
    size_t n;
    bool bf16;
} both;

/* init (NULL: NaN) rounded to bf16, the same values on both devices. */
static both bf16_new(const float *init, size_t n)
{
    float *hc = xmalloc(n * sizeof *hc);
    uint16_t *hg = xmalloc(n * sizeof *hg);
    for (size_t i = 0; i < n; i++) {
        hg[i] = float_to_bf16(init ? init[i] : NAN);
        hc[i] = bf16_to_float(hg[i]);
    }
    both b = {dev_alloc_upload(cpu, hc, n * sizeof *hc, sizeof *hc),
              dev_alloc_upload(gpu, hg, n * sizeof *hg, sizeof *hg), n, true};
    free(hc);
    free(hg);
    return b;
}

static both bf16_random(size_t n, float offset, float lo, float hi)
{
    float *h = random_bf16s(n, offset, lo, hi);
    both b = bf16_new(h, n);
    free(h);
    return b;
}

/* Float (or int32: same size) data, the same bytes on both devices; NULL init: NaN floats. */
static both f32_new(const void *init, size_t n)
{
    float *h = xmalloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++)
        h[i] = NAN;
    const void *src = init ? init : h;
    both b = {dev_alloc_upload(cpu, src, n * 4, 4), dev_alloc_upload(gpu, src, n * 4, 4), n, false};
    free(h);
    return b;
}

static void both_free(both b)
{
    placed_free(cpu, b.c);
    placed_free(gpu, b.g);
}

/* The CPU copy of a float or bf16 tensor, as floats (caller frees). */
static float *cpu_floats(both b)
{
    float *h = xmalloc(b.n * sizeof *h);
    download(cpu, h, b.c, b.n * sizeof *h);
    return h;
}

/* bf16 values in an order where adjacent bf16 numbers differ by 1 (+0 and -0 are both 0). */
static int32_t bf16_rank(uint16_t h) { return (h & 0x8000u) ? -(int32_t)(h & 0x7fffu) : (int32_t)h; }

/* Checks the CUDA device's bf16 output against the CPU's float output rounded to bf16: at most
 * max_ulps apart, or within 4·floor (see the header; NaN never passes), and no more than 4 + n/64
 * elements off at all outside the floor (see the header). Frees the output. */
static void check_bf16(both o, const char *what, int max_ulps, double floor)
{
    float *hc = cpu_floats(o);
    uint16_t *hg = xmalloc(o.n * sizeof *hg);
    download(gpu, hg, o.g, o.n * sizeof *hg);
    size_t bad = 0, first = 0, off = 0;
    for (size_t i = 0; i < o.n; i++) {
        uint16_t want = float_to_bf16(hc[i]);
        double diff = fabs((double)bf16_to_float(hg[i]) - (double)bf16_to_float(want));
        bool nan = isnan(hc[i]) || isnan(bf16_to_float(hg[i])), floored = diff <= 4.0 * floor;
        int ulps = abs(bf16_rank(hg[i]) - bf16_rank(want));
        if ((nan || (ulps > max_ulps && !floored)) && bad++ == 0)
            first = i;
        off += ulps != 0 && !floored;
    }
    CHECK(bad == 0, "%s: %zu of %zu bf16 elements differ; first [%zu]: cuda %.9g (0x%04x), cpu %.9g -> 0x%04x", what,
          bad, o.n, first, bad ? (double)bf16_to_float(hg[first]) : 0.0, bad ? hg[first] : 0,
          bad ? (double)hc[first] : 0.0, bad ? float_to_bf16(hc[first]) : 0);
    CHECK(off <= 4 + o.n / 64, "%s: %zu of %zu bf16 elements are 1 ulp off, more than float noise explains (a "
          "rounding other than to nearest-even?)", what, off, o.n);
    both_free(o);
    free(hc);
    free(hg);
}

/* A float output: |cuda - cpu| <= atol + rtol·|cpu| elementwise (NaN never passes). Frees it. */
static void check_f32(both o, const char *what, double rtol, double atol)
{
    float *hc = cpu_floats(o), *hg = xmalloc(o.n * sizeof *hg);
    download(gpu, hg, o.g, o.n * sizeof *hg);
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < o.n; i++)
        if (!(fabs((double)hg[i] - (double)hc[i]) <= atol + rtol * fabs((double)hc[i])) && bad++ == 0)
            first = i;
    CHECK(bad == 0, "%s: %zu of %zu elements differ; first [%zu]: cuda %.9g, cpu %.9g", what, bad, o.n, first,
          bad ? (double)hg[first] : 0.0, bad ? (double)hc[first] : 0.0);
    both_free(o);
    free(hc);
    free(hg);
}

/* Runs OP with TENSOR_F32 on the CPU, then with TENSOR_BF16 on the CUDA device (timed). In the
 * argument list S(x) is buffer x's copy on the running device. */
#define S(x) (side_ == 0 ? (x).c : (x).g)
#define RUN(op, ...)                                                                               \
    for (int side_ = 0; side_ < 2; side_++) {                                                      \
        device *dv_ = side_ == 0 ? cpu : gpu;                                                      \
        ddp_err e_ = {0};                                                                          \
        double t0_ = 1e3 * monotonic_s();                                                          \
        int rc_ = dv_->ops->op(dv_, side_ == 0 ? TENSOR_F32 : TENSOR_BF16, __VA_ARGS__, &e_);      \
        if (side_ == 1) {                                                                          \
            ddp_err se_ = {0};                                                                     \
            die_on(gpu->ops->synchronize(gpu, &se_), &se_, #op);                                   \
            op_time_add(#op, 1e3 * monotonic_s() - t0_);                                           \
        }                                                                                          \
        CHECK(rc_ == 0, "%s on %s: %s", #op, side_ ? "cuda" : "cpu", e_.msg);                      \
    }

/* ---- element-wise ---------------------------------------------------------------------- */

/* 1, odd sizes, a block's worth ±1, more than the emulator's 64 x 256 and the GPU's 1024 x 256 */
static const size_t sizes[] = {1, 31, 255, 257, 1000, 20001, 270001};
#define N_SIZES (sizeof sizes / sizeof sizes[0])

static void test_elementwise(void)
{
    char what[96];
    for (size_t s = 0; s < N_SIZES; s++) {
        size_t n = sizes[s];
        both x = bf16_new(NULL, n);
        float v = rng_uniform(&test_rng, 0.5f, 3.0f); /* not a bf16 value: fill rounds it */
        RUN(fill, S(x), n, v);
        snprintf(what, sizeof what, "fill n=%zu", n);
        check_bf16(x, what, 0, 0);

        /* out = a + b, then out = out + b in place */
        both a = bf16_random(n, 0, 0.05f, 4), b = bf16_random(n, 0, 0.05f, 4), out = bf16_new(NULL, n);
        RUN(add, S(out), S(a), S(b), n);
        snprintf(what, sizeof what, "add n=%zu", n);
        check_bf16(out, what, 0, 0);
        RUN(add, S(a), S(a), S(b), n);
        snprintf(what, sizeof what, "add in place n=%zu", n);
        check_bf16(a, what, 0, 0);
        both_free(b);

        const act_kind acts[] = {ACT_RELU, ACT_GELU, ACT_GELU_TANH};
        for (int k = 0; k < 3; k++) {
            /* ReLU is exact on both sides; the GELUs' float results differ by <= 2e-5 relative
             * with a 1e-7 floor (test_cuda_kernels.c): 1 ulp */
            int ulps = acts[k] == ACT_RELU ? 0 : 1;
            double floor = acts[k] == ACT_RELU ? 0 : 1e-7;
            both in = bf16_random(n, 0, 0.05f, 4), dy = bf16_random(n, 0, 0.05f, 1);
            both y = bf16_new(NULL, n), dx = bf16_new(NULL, n);
            RUN(act_forward, acts[k], S(in), S(y), n);
            snprintf(what, sizeof what, "act_forward %s n=%zu", act_kind_name(acts[k]), n);
            check_bf16(y, what, ulps, floor);
            RUN(act_backward, acts[k], S(in), S(dy), S(dx), n);
            snprintf(what, sizeof what, "act_backward %s n=%zu", act_kind_name(acts[k]), n);
            check_bf16(dx, what, ulps, floor);
            both_free(in);
            both_free(dy);
        }
    }
}

/* ---- bias add and bias gradient -------------------------------------------------------- */

/* as test_cuda_kernels.c's, with rows of whole 16-byte packs of bf16 over several 64-row chunks */
static const int64_t shapes[][2] = {{1, 1}, {3, 10}, {130, 33}, {1000, 5}, {2, 1025}, {9, 70}, {200, 40}, {70, 64}};
#define N_SHAPES (sizeof shapes / sizeof shapes[0])

static void test_bias(void)
{
    char what[96];
    for (size_t s = 0; s < N_SHAPES; s++) {
        int64_t rows = shapes[s][0], cols = shapes[s][1];
        size_t n = (size_t)(rows * cols);
        float *hb = random_bf16s((size_t)cols, 0, 0.05f, 2);
        both y = bf16_random(n, 0, 0.05f, 2), b = bf16_new(hb, (size_t)cols);
        RUN(bias_add, S(y), S(b), rows, cols);
        snprintf(what, sizeof what, "bias_add %lldx%lld", (long long)rows, (long long)cols);
        float *hy = cpu_floats(y); /* the result, as the next op's input on both devices */
        check_bf16(y, what, 0, 0);
        both dy = bf16_new(hy, n);

        /* db is float: beta 0 overwrites NaN, beta 1 adds to random values; the float tolerances */
        for (int beta = 0; beta < 2; beta++) {
            both db = f32_new(beta ? hb : NULL, (size_t)cols);
            RUN(bias_grad, S(dy), S(db), rows, cols, (float)beta);
            snprintf(what, sizeof what, "bias_grad beta=%d %lldx%lld", beta, (long long)rows, (long long)cols);
            check_f32(db, what, 1e-5, 1e-5);
        }
        both_free(b);
        both_free(dy);
        free(hb);
        free(hy);
    }
}

/* ---- softmax cross-entropy ------------------------------------------------------------- */

/* As test_cuda_kernels.c: ties from quantized logits, NaN padding that must never be read (its
 * gradient must be 0), the gradient written over the logits in place. */
typedef struct xent_case {
    int64_t rows, cols, pad;
    bool quantized, with_grad, in_place, no_target; /* no_target: every third row's label is XENT_NO_TARGET */
} xent_case;

static void softmax_case(xent_case x)
{
    char what[160];
    int64_t ld = x.cols + x.pad;
    size_t n = (size_t)(x.rows * ld);
    float *hl = random_bf16s(n, 0, 0.05f, 6);
    for (size_t i = 0; i < n; i++) {
        if (x.quantized)
            hl[i] = (float)rng_below(&test_rng, 3) * 0.5f + 0.25f; /* bf16 values */
        if ((int64_t)(i % (size_t)ld) >= x.cols)
            hl[i] = NAN;
    }
    int32_t *hlab = xmalloc((size_t)x.rows * sizeof *hlab);
    for (int64_t r = 0; r < x.rows; r++)
        hlab[r] = x.no_target && r % 3 == 1 ? XENT_NO_TARGET : (int32_t)rng_below(&test_rng, (uint64_t)x.cols);
    float hstats[2] = {rng_uniform(&test_rng, 1.0f, 5.0f), 3.0f};
    both logits = bf16_new(hl, n), labels = f32_new(hlab, (size_t)x.rows), stats = f32_new(hstats, 2);
    both dl = {0};
    if (x.with_grad)
        dl = x.in_place ? logits : bf16_new(NULL, n);
    float gs = 1.0f / (float)x.rows;
    RUN(softmax_xent, S(logits), ld, S(labels), x.rows, x.cols, gs, x.with_grad ? S(dl) : NULL, S(stats));
    snprintf(what, sizeof what, "softmax_xent %lldx%lld+%lld%s%s%s%s", (long long)x.rows, (long long)x.cols,
             (long long)x.pad, x.quantized ? " ties" : "", x.with_grad ? "" : " no-grad",
             x.in_place ? " in-place" : "", x.no_target ? " no-target" : "");
    check_f32(stats, what, 1e-5, 1e-6); /* the loss and hit sums are float, as in the float test */
    if (x.with_grad) /* the float test's 1e-5 relative, floor 1e-8 */
        check_bf16(dl, what, 1, 1e-8);
    if (!x.with_grad || !x.in_place)
        both_free(logits);
    both_free(labels);
    free(hl);
    free(hlab);
}

static void test_softmax_xent(void)
{
    for (size_t s = 0; s < N_SHAPES; s++) {
        softmax_case((xent_case){shapes[s][0], shapes[s][1], 0, false, true, false, false});
        softmax_case((xent_case){shapes[s][0], shapes[s][1], 0, true, true, false, false});
    }
    softmax_case((xent_case){64, 10, 0, false, false, false, false});
    softmax_case((xent_case){1100, 10, 0, false, true, true, false}); /* more rows than either grid cap */
    softmax_case((xent_case){37, 300, 84, false, true, true, false}); /* GPT-2's padded vocabulary, in place */
    softmax_case((xent_case){5, 1000, 24, true, true, false, false});
    softmax_case((xent_case){9, 50, 78, false, false, false, false});
    /* rows without a target (prompt tokens, documents' ends): zero loss, gradient and hits */
    softmax_case((xent_case){130, 33, 0, false, true, false, true});
    softmax_case((xent_case){37, 300, 84, false, true, true, true});
    softmax_case((xent_case){1100, 10, 0, false, false, false, true});
}

/* ---- transformer: embeddings, LayerNorm ------------------------------------------------- */

/* "op shape" in `what`, for a check's message (expects char what[], shape[] in scope) */
#define NAME(op) (snprintf(what, sizeof what, "%s %s", op, shape), what)

static void test_embeddings(void)
{
    /* B, T, C, V: V = 1 makes every token the same; 2·70·300 and 6·64·769 elements pass the
     * emulator's and the GPU's grid caps; 1,200 positions make two tiles of the token sort, V = 300
     * two passes, and V = 1 with 1,200 positions one token's run over both tiles */
    const int64_t shp[][4] = {{1, 1, 1, 1}, {2, 3, 5, 1}, {3, 17, 33, 7}, {2, 70, 300, 5}, {6, 64, 769, 40},
                              {4, 300, 24, 300}, {2, 600, 16, 1}};
    char what[160], shape[96];
    for (size_t s = 0; s < sizeof shp / sizeof shp[0]; s++) {
        int64_t B = shp[s][0], T = shp[s][1], C = shp[s][2], V = shp[s][3];
        size_t n = (size_t)(B * T * C);
        int32_t *htok = xmalloc((size_t)(B * T) * sizeof *htok);
        for (int64_t i = 0; i < B * T; i++)
            htok[i] = (int32_t)rng_below(&test_rng, (uint64_t)V);
        float *hwte = random_bf16s((size_t)(V * C), 0, 0.05f, 1), *hwpe = random_bf16s((size_t)(T * C), 0, 0.05f, 1);
        both tok = f32_new(htok, (size_t)(B * T)), wte = bf16_new(hwte, (size_t)(V * C));
        both wpe = bf16_new(hwpe, (size_t)(T * C)), dout = bf16_random(n, 0, 0.05f, 1), out = bf16_new(NULL, n);
        snprintf(shape, sizeof shape, "B=%lld T=%lld C=%lld V=%lld", (long long)B, (long long)T, (long long)C,
                 (long long)V);
        RUN(embedding_forward, S(out), S(tok), S(wte), S(wpe), NULL, B, T, C);
        check_bf16(out, NAME("embedding_forward"), 0, 0);
        /* float gradients of bf16 dout: the same float additions on both sides, exact */
        both dwte = f32_new(hwte, (size_t)(V * C)), dwpe = f32_new(hwpe, (size_t)(T * C));
        RUN(embedding_backward, S(dwte), S(dwpe), S(dout), S(tok), NULL, NULL, B, T, C, V);
        check_f32(dwte, NAME("embedding_backward dwte"), 0, 0);
        check_f32(dwpe, NAME("embedding_backward dwpe"), 0, 0);
        both_free(tok);
        both_free(wte);
        both_free(wpe);
        both_free(dout);
        free(htok);
        free(hwte);
        free(hwpe);
    }
}

/* residual_layernorm_forward with bf16: the sum a + b is rounded to bf16 before it is normalised,
 * so the CPU reference is the float add, rounded to bf16 here, then the CPU's layernorm_forward of
 * that: the stored sum must be its rounding exactly (0 ulp), the LayerNorm outputs get
 * layernorm_forward's tolerances. x is a, w and b the LayerNorm's parameters. */
static void residual_layernorm_case(int64_t N, int64_t C, both x, both w, both b)
{
    const size_t n = (size_t)(N * C), rows = (size_t)N;
    char what[128];
    ddp_err err = {0};
    both y = bf16_random(n, 0, 0.05f, 2), res = bf16_new(NULL, n), ln = bf16_new(NULL, n);
    both mean = f32_new(NULL, rows), rstd = f32_new(NULL, rows);
    die_on(gpu->ops->residual_layernorm_forward(gpu, TENSOR_BF16, res.g, ln.g, mean.g, rstd.g, x.g, y.g, w.g, b.g, N,
                                                C, &err), &err, "cuda residual_layernorm_forward");
    float *ha = cpu_floats(x), *hy = cpu_floats(y), *hsum = xmalloc(n * sizeof *hsum);
    for (size_t i = 0; i < n; i++)
        hsum[i] = ha[i] + hy[i];
    die_on(cpu->ops->upload(cpu, res.c, hsum, n * sizeof *hsum, &err), &err, "upload");
    for (size_t i = 0; i < n; i++)
        hsum[i] = bf16_to_float(float_to_bf16(hsum[i]));
    both rounded = f32_new(hsum, n);
    die_on(cpu->ops->layernorm_forward(cpu, TENSOR_F32, ln.c, mean.c, rstd.c, rounded.c, w.c, b.c, N, C, &err), &err,
           "cpu layernorm_forward");
    snprintf(what, sizeof what, "residual_layernorm_forward res_out N=%lld C=%lld", (long long)N, (long long)C);
    check_bf16(res, what, 0, 0);
    snprintf(what, sizeof what, "residual_layernorm_forward ln_out N=%lld C=%lld", (long long)N, (long long)C);
    check_bf16(ln, what, 1, 1e-12);
    check_f32(mean, what, ROUND_ONCE, 1e-12);
    check_f32(rstd, what, ROUND_ONCE, 1e-12);
    both_free(y);
    both_free(rounded);
    free(ha);
    free(hy);
    free(hsum);
}

static void test_layernorm(void)
{
    /* N, C, offset: rows longer than a block (1025), more rows than the grid caps and several
     * 64-row chunks of the dw/db sums (1100), a mean far from 0; rows of whole 16-byte packs for
     * the warp path (8: one pack, 768: 3 per lane, 1024: 4, the most; 520: lanes partly idle) and
     * one just past it (1032) */
    const struct { int64_t N, C; float offset; } shp[] = {{1, 1, 0}, {3, 5, 2}, {7, 33, 0}, {130, 31, 5},
                                                          {1100, 5, 0}, {5, 1025, -3}, {33, 8, 1}, {70, 768, 0},
                                                          {9, 1024, 2}, {40, 520, 0}, {3, 1032, 0}};
    char what[128];
    for (size_t s = 0; s < sizeof shp / sizeof shp[0]; s++) {
        int64_t N = shp[s].N, C = shp[s].C;
        size_t n = (size_t)(N * C);
        both x = bf16_random(n, shp[s].offset, 0.05f, 2), w = bf16_random((size_t)C, 1, 0, 0.5f);
        both b = bf16_random((size_t)C, 0, 0.05f, 1), dout = bf16_random(n, 0, 0.05f, 1);
        both out = bf16_new(NULL, n), mean = f32_new(NULL, (size_t)N), rstd = f32_new(NULL, (size_t)N);
        RUN(layernorm_forward, S(out), S(mean), S(rstd), S(x), S(w), S(b), N, C);
        /* the backward reads the CPU forward's statistics on both devices */
        float *hmean = cpu_floats(mean), *hrstd = cpu_floats(rstd);
        both mean_in = f32_new(hmean, (size_t)N), rstd_in = f32_new(hrstd, (size_t)N);
        /* floors and float tolerances: test_cuda_transformer.c's */
        snprintf(what, sizeof what, "layernorm_forward out N=%lld C=%lld", (long long)N, (long long)C);
        check_bf16(out, what, 1, 1e-12);
        snprintf(what, sizeof what, "layernorm_forward mean/rstd N=%lld C=%lld", (long long)N, (long long)C);
        check_f32(mean, what, ROUND_ONCE, 1e-12);
        check_f32(rstd, what, ROUND_ONCE, 1e-12);
        residual_layernorm_case(N, C, x, w, b);

        /* "+=": dinp starts as the same bf16 values on both sides, dw and db as random floats */
        float *hdw = random_bf16s((size_t)C, 0, 0.05f, 1), *hdb = random_bf16s((size_t)C, 0, 0.05f, 1);
        both dinp = bf16_random(n, 0, 0.05f, 1), dw = f32_new(hdw, (size_t)C), db = f32_new(hdb, (size_t)C);
        RUN(layernorm_backward, S(dinp), S(dw), S(db), S(dout), S(x), S(w), S(mean_in), S(rstd_in), N, C);
        snprintf(what, sizeof what, "layernorm_backward dinp N=%lld C=%lld", (long long)N, (long long)C);
        check_bf16(dinp, what, 1, 1e-9);
        snprintf(what, sizeof what, "layernorm_backward dw/db N=%lld C=%lld", (long long)N, (long long)C);
        check_f32(dw, what, ROUND_ONCE, 1e-8);
        check_f32(db, what, ROUND_ONCE, 1e-8);

        both_free(x);
        both_free(w);
        both_free(b);
        both_free(dout);
        both_free(mean_in);
        both_free(rstd_in);
        free(hmean);
        free(hrstd);
        free(hdw);
        free(hdb);
    }
}

int main(void)
{
    const pair_group groups[] = {
        {"element-wise", test_elementwise}, {"bias", test_bias}, {"softmax_xent", test_softmax_xent},
        {"embeddings", test_embeddings},    {"layernorm", test_layernorm}};
    return pair_main("test_cuda_bf16", 13, groups, sizeof groups / sizeof groups[0], 2);
}
