/* test_cuda_kernels.c — every CUDA device op against the CPU backend (the transformer family's
 * in test_cuda_transformer.c; clip_scale, against a host reference on both, in test_grad_clip.c).
 *
 * Each op runs on both devices with the same fresh random inputs (never zeros; seed printed,
 * DDP_TEST_SEED repeats a run) over several shapes, including sizes that are not multiples of the
 * block size and softmax rows longer than a block. Outputs on the CUDA side are poisoned with NaN
 * first, so an element a kernel forgets to write fails the comparison. In the emulated build the
 * kernels run under the fiber order named by DDP_CUDA_EMU_ORDER (meson registers one test per
 * order). Groups: `kernels` (default) and `gemm` (argv[1]). Prints the time each group took.
 * The kernels group runs three times: with every buffer 16-byte aligned (the kernels' vector
 * paths), with every buffer one element past that (their one-element fallbacks; the emulator ends
 * the process on a misaligned vector access, as a GPU faults), and with every other buffer offset
 * (mixed alignment within one op), so both paths meet the same CPU results and tail sizes.
 * Tolerances (relative, plus a tiny absolute floor for values near zero): 1e-6 for exact
 * element-wise ops, 1e-5 for sums, optimizers, GEMM and softmax/exp paths, 2e-5 for both GELUs
 * (erfcf/expf differ by an ulp or two between libm and CUDA). The ops' bf16 variants are tested in
 * test_cuda_bf16.c. The optimizer steps run with and without a weight-decay exemption table. */
#include "runtime/optim/optim.h"
#include "tests/runtime/device/cuda_pair.h"

/* Runs gpu->ops->OP(ARGS) timed, and checks it succeeded. */
#define GPU_CHECK(op, args, msg)                                                                  \
    do {                                                                                          \
        double t0_ = 1e3 * monotonic_s();                                                         \
        int rc_ = gpu->ops->op args;                                                              \
        op_time_add(#op, 1e3 * monotonic_s() - t0_);                                              \
        CHECK(rc_ == 0, "%s: %s", #op, msg);                                                      \
    } while (0)

/* Random floats in ±[0.05, scale): never zero, mixed signs. */
static float *random_floats(size_t n, float scale)
{
    float *h = xmalloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++) {
        float mag = rng_uniform(&test_rng, 0.05f, scale);
        h[i] = rng_below(&test_rng, 2) ? mag : -mag;
    }
    return h;
}

static void *dev_alloc(device *d, size_t bytes)
{
    ddp_err err = {0};
    void *mem = NULL;
    die_on(d->ops->alloc(d, bytes, &mem, &err), &err, "alloc");
    return mem;
}

static void dev_upload(device *d, void *dst, const void *src, size_t bytes)
{
    ddp_err err = {0};
    die_on(d->ops->upload(d, dst, src, bytes, &err), &err, "upload");
}

/* The same host data on both devices, both placed pair_next_offset() four-byte elements (floats
 * or int32) past an aligned start. */
static void upload_both(const void *h, size_t bytes, void **on_cpu, void **on_gpu)
{
    const size_t off = 4 * pair_next_offset();
    *on_cpu = placed_alloc(cpu, bytes, off);
    *on_gpu = placed_alloc(gpu, bytes, off);
    dev_upload(cpu, *on_cpu, h, bytes);
    dev_upload(gpu, *on_gpu, h, bytes);
}

/* An output buffer on both devices: the CPU copy holds `init` (or NaN), the GPU copy too, so
 * elements the GPU kernel must overwrite start as NaN when init is NULL. */
static void output_both(const float *init, size_t n, float **on_cpu, float **on_gpu)
{
    float *h = xmalloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++)
        h[i] = init ? init[i] : NAN;
    upload_both(h, n * sizeof *h, (void **)on_cpu, (void **)on_gpu);
    free(h);
}

static void free_both(void *c, void *g)
{
    placed_free(cpu, c);
    placed_free(gpu, g);
}

/* Downloads both and checks |gpu - cpu| <= atol + rtol*|cpu| elementwise (NaN never passes). */
static void compare(const char *what, const float *on_cpu, const float *on_gpu, size_t n, double rtol,
                    double atol)
{
    float *hc = xmalloc(n * sizeof *hc), *hg = xmalloc(n * sizeof *hg);
    download(cpu, hc, on_cpu, n * sizeof *hc);
    download(gpu, hg, on_gpu, n * sizeof *hg);
    size_t bad = 0, first = 0;
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double diff = fabs((double)hg[i] - (double)hc[i]);
        bool ok = diff <= atol + rtol * fabs((double)hc[i]); /* false for NaN */
        if (!ok && bad++ == 0)
            first = i;
        if (ok && diff > worst)
            worst = diff;
    }
    CHECK(bad == 0, "%s: %zu of %zu elements differ; first [%zu]: cuda %.9g, cpu %.9g", what, bad, n, first,
          bad ? (double)hg[first] : 0.0, bad ? (double)hc[first] : 0.0);
    free(hc);
    free(hg);
}

/* ---- element-wise ---------------------------------------------------------------------- */

static const size_t sizes[] = {1, 31, 255, 256, 257, 1000, 4099, 70001};
#define N_SIZES (sizeof sizes / sizeof sizes[0])

static void test_fill_scale_u8(void)
{
    ddp_err ec = {0}, eg = {0};
    char what[96];
    for (size_t s = 0; s < N_SIZES; s++) {
        size_t n = sizes[s];
        float *xc, *xg;
        output_both(NULL, n, &xc, &xg);
        float v = rng_uniform(&test_rng, 0.5f, 3.0f);
        CHECK(cpu->ops->fill(cpu, TENSOR_F32, xc, n, v, &ec) == 0, "%s", ec.msg);
        GPU_CHECK(fill, (gpu, TENSOR_F32, xg, n, v, &eg), eg.msg);
        snprintf(what, sizeof what, "fill n=%zu", n);
        compare(what, xc, xg, n, 0, 0);
        free_both(xc, xg);

        float *h = random_floats(n, 4.0f);
        output_both(h, n, &xc, &xg);
        float k = rng_uniform(&test_rng, -2.0f, -0.5f);
        CHECK(cpu->ops->scale(cpu, xc, n, k, &ec) == 0, "%s", ec.msg);
        GPU_CHECK(scale, (gpu, xg, n, k, &eg), eg.msg);
        snprintf(what, sizeof what, "scale n=%zu", n);
        compare(what, xc, xg, n, 0, 0);
        free_both(xc, xg);
        free(h);

        uint8_t *px = xmalloc(n);
        for (size_t i = 0; i < n; i++)
            px[i] = (uint8_t)(1 + rng_below(&test_rng, 255));
        void *uc, *ug;
        upload_both(px, n, &uc, &ug);
        output_both(NULL, n, &xc, &xg);
        CHECK(cpu->ops->u8_to_f32(cpu, uc, xc, n, 0.2860f, 1.0f / 0.3530f, &ec) == 0, "%s", ec.msg);
        GPU_CHECK(u8_to_f32, (gpu, ug, xg, n, 0.2860f, 1.0f / 0.3530f, &eg), eg.msg);
        snprintf(what, sizeof what, "u8_to_f32 n=%zu", n);
        compare(what, xc, xg, n, 1e-6, 1e-7);
        free_both(xc, xg);
        free_both(uc, ug);
        free(px);
    }
}

static void test_activations(void)
{
    ddp_err ec = {0}, eg = {0};
    char what[96];
    const act_kind acts[] = {ACT_RELU, ACT_GELU, ACT_GELU_TANH};
    for (int a = 0; a < 3; a++) {
        double rtol = acts[a] != ACT_RELU ? 2e-5 : 0, atol = acts[a] != ACT_RELU ? 1e-7 : 0;
        for (size_t s = 0; s < N_SIZES; s++) {
            size_t n = sizes[s];
            float *hx = random_floats(n, 4.0f), *hdy = random_floats(n, 1.0f);
            float *xc, *xg, *dyc, *dyg, *yc, *yg;
            upload_both(hx, n * sizeof *hx, (void **)&xc, (void **)&xg);
            upload_both(hdy, n * sizeof *hdy, (void **)&dyc, (void **)&dyg);
            output_both(NULL, n, &yc, &yg);
            CHECK(cpu->ops->act_forward(cpu, TENSOR_F32, acts[a], xc, yc, n, &ec) == 0, "%s", ec.msg);
            GPU_CHECK(act_forward, (gpu, TENSOR_F32, acts[a], xg, yg, n, &eg), eg.msg);
            snprintf(what, sizeof what, "act_forward %s n=%zu", act_kind_name(acts[a]), n);
            compare(what, yc, yg, n, rtol, atol);
            free_both(yc, yg);
            output_both(NULL, n, &yc, &yg);
            CHECK(cpu->ops->act_backward(cpu, TENSOR_F32, acts[a], xc, dyc, yc, n, &ec) == 0, "%s", ec.msg);
            GPU_CHECK(act_backward, (gpu, TENSOR_F32, acts[a], xg, dyg, yg, n, &eg), eg.msg);
            snprintf(what, sizeof what, "act_backward %s n=%zu", act_kind_name(acts[a]), n);
            compare(what, yc, yg, n, rtol, atol);
            free_both(yc, yg);
            free_both(xc, xg);
            free_both(dyc, dyg);
            free(hx);
            free(hdy);
        }
    }
}

/* out = a + b, then the same written over a (the residual stream adds in place) */
static void test_add(void)
{
    ddp_err ec = {0}, eg = {0};
    char what[96];
    for (size_t s = 0; s < N_SIZES; s++) {
        size_t n = sizes[s];
        float *ha = random_floats(n, 4.0f), *hb = random_floats(n, 4.0f);
        float *ac, *ag, *bc, *bg, *oc, *og;
        output_both(ha, n, &ac, &ag);
        output_both(hb, n, &bc, &bg);
        output_both(NULL, n, &oc, &og);
        CHECK(cpu->ops->add(cpu, TENSOR_F32, oc, ac, bc, n, &ec) == 0, "%s", ec.msg);
        GPU_CHECK(add, (gpu, TENSOR_F32, og, ag, bg, n, &eg), eg.msg);
        snprintf(what, sizeof what, "add n=%zu", n);
        compare(what, oc, og, n, 0, 0);
        CHECK(cpu->ops->add(cpu, TENSOR_F32, ac, ac, bc, n, &ec) == 0, "%s", ec.msg);
        GPU_CHECK(add, (gpu, TENSOR_F32, ag, ag, bg, n, &eg), eg.msg);
        snprintf(what, sizeof what, "add in place n=%zu", n);
        compare(what, ac, ag, n, 0, 0);
        free_both(ac, ag);
        free_both(bc, bg);
        free_both(oc, og);
        free(ha);
        free(hb);
    }
}

/* ---- row-wise ops ------------------------------------------------------------------------ */

/* rows x cols: ones, odd columns, rows longer than a block, several 64-row chunks of the bias
 * gradient's column sums with columns in 16-byte packs (200 x 36, 130 x 64) */
static const int64_t shapes[][2] = {{1, 1}, {3, 10}, {64, 10}, {7, 300}, {130, 33}, {1000, 5}, {2, 1025}, {9, 70},
                                    {200, 36}, {130, 64}};
#define N_SHAPES (sizeof shapes / sizeof shapes[0])

static void test_bias(void)
{
    ddp_err ec = {0}, eg = {0};
    char what[96];
    for (size_t s = 0; s < N_SHAPES; s++) {
        int64_t rows = shapes[s][0], cols = shapes[s][1];
        size_t n = (size_t)(rows * cols);
        float *hy = random_floats(n, 2.0f), *hb = random_floats((size_t)cols, 2.0f);
        float *yc, *yg, *bc, *bg;
        output_both(hy, n, &yc, &yg);
        upload_both(hb, (size_t)cols * sizeof *hb, (void **)&bc, (void **)&bg);
        CHECK(cpu->ops->bias_add(cpu, TENSOR_F32, yc, bc, rows, cols, &ec) == 0, "%s", ec.msg);
        GPU_CHECK(bias_add, (gpu, TENSOR_F32, yg, bg, rows, cols, &eg), eg.msg);
        snprintf(what, sizeof what, "bias_add %lldx%lld", (long long)rows, (long long)cols);
        compare(what, yc, yg, n, 0, 0);
        free_both(bc, bg);

        /* beta 0 must overwrite the NaN poison; beta 1 accumulates onto random values */
        output_both(NULL, (size_t)cols, &bc, &bg);
        CHECK(cpu->ops->bias_grad(cpu, TENSOR_F32, yc, bc, rows, cols, 0.0f, &ec) == 0, "%s", ec.msg);
        GPU_CHECK(bias_grad, (gpu, TENSOR_F32, yg, bg, rows, cols, 0.0f, &eg), eg.msg);
        snprintf(what, sizeof what, "bias_grad beta=0 %lldx%lld", (long long)rows, (long long)cols);
        compare(what, bc, bg, (size_t)cols, 1e-5, 1e-5);
        free_both(bc, bg);
        output_both(hb, (size_t)cols, &bc, &bg);
        CHECK(cpu->ops->bias_grad(cpu, TENSOR_F32, yc, bc, rows, cols, 1.0f, &ec) == 0, "%s", ec.msg);
        GPU_CHECK(bias_grad, (gpu, TENSOR_F32, yg, bg, rows, cols, 1.0f, &eg), eg.msg);
        snprintf(what, sizeof what, "bias_grad beta=1 %lldx%lld", (long long)rows, (long long)cols);
        compare(what, bc, bg, (size_t)cols, 1e-5, 1e-5);
        free_both(bc, bg);
        free_both(yc, yg);
        free(hy);
        free(hb);
    }
}

/* quantized: logits from a few values, so rows have tied maxima (argmax must pick the first).
 * pad: columns of padding after the cols classes (the row stride is cols + pad); their logits
 * are NaN, which must never be read, and their gradient must come out 0. in_place: dlogits is
 * the logits buffer itself. */
typedef struct xent_case {
    int64_t rows, cols, pad;
    bool quantized, with_grad, in_place, no_target; /* no_target: every third row's label is XENT_NO_TARGET */
    bool masked; /* every 7th class's logit is -inf (a masked class: column 0 first), never a label */
} xent_case;

static void softmax_case(xent_case x)
{
    ddp_err ec = {0}, eg = {0};
    char what[160];
    int64_t ld = x.cols + x.pad;
    size_t n = (size_t)(x.rows * ld);
    float *hl = random_floats(n, 6.0f);
    for (size_t i = 0; i < n; i++) {
        if (x.quantized)
            hl[i] = (float)rng_below(&test_rng, 3) * 0.5f + 0.25f;
        if (x.masked && i % (size_t)ld % 7 == 0)
            hl[i] = -INFINITY;
        if ((int64_t)(i % (size_t)ld) >= x.cols)
            hl[i] = NAN;
    }
    int32_t *hlab = xmalloc((size_t)x.rows * sizeof *hlab);
    for (int64_t r = 0; r < x.rows; r++) {
        hlab[r] = x.no_target && r % 3 == 1 ? XENT_NO_TARGET : (int32_t)rng_below(&test_rng, (uint64_t)x.cols);
        if (x.masked && hlab[r] >= 0 && hlab[r] % 7 == 0)
            hlab[r] = hlab[r] + 1 < x.cols ? hlab[r] + 1 : hlab[r] - 1;
    }
    float hstats[2] = {rng_uniform(&test_rng, 1.0f, 5.0f), 3.0f};
    float *lc, *lg, *dc = NULL, *dg = NULL, *sc, *sg;
    int32_t *labc, *labg;
    upload_both(hl, n * sizeof *hl, (void **)&lc, (void **)&lg);
    upload_both(hlab, (size_t)x.rows * sizeof *hlab, (void **)&labc, (void **)&labg);
    output_both(hstats, 2, &sc, &sg);
    if (x.with_grad && x.in_place) {
        dc = lc;
        dg = lg;
    } else if (x.with_grad) {
        output_both(NULL, n, &dc, &dg);
    }
    float gs = 1.0f / (float)x.rows;
    CHECK(cpu->ops->softmax_xent(cpu, TENSOR_F32, lc, ld, labc, x.rows, x.cols, gs, dc, sc, &ec) == 0, "%s",
          ec.msg);
    GPU_CHECK(softmax_xent, (gpu, TENSOR_F32, lg, ld, labg, x.rows, x.cols, gs, dg, sg, &eg), eg.msg);
    snprintf(what, sizeof what, "softmax_xent stats %lldx%lld+%lld%s%s%s%s%s", (long long)x.rows,
             (long long)x.cols, (long long)x.pad, x.quantized ? " ties" : "", x.with_grad ? "" : " no-grad",
             x.in_place ? " in-place" : "", x.no_target ? " no-target" : "", x.masked ? " masked" : "");
    compare(what, sc, sg, 2, 1e-5, 1e-6);
    if (x.with_grad) {
        snprintf(what, sizeof what, "softmax_xent dlogits %lldx%lld+%lld%s%s%s%s", (long long)x.rows,
                 (long long)x.cols, (long long)x.pad, x.quantized ? " ties" : "", x.in_place ? " in-place" : "",
                 x.no_target ? " no-target" : "", x.masked ? " masked" : "");
        compare(what, dc, dg, n, 1e-5, 1e-8);
        if (!x.in_place)
            free_both(dc, dg);
    }
    free_both(lc, lg);
    free_both(labc, labg);
    free_both(sc, sg);
    free(hl);
    free(hlab);
}

static void test_softmax_xent(void)
{
    for (size_t s = 0; s < N_SHAPES; s++) {
        softmax_case((xent_case){shapes[s][0], shapes[s][1], 0, false, true, false, false, false});
        softmax_case((xent_case){shapes[s][0], shapes[s][1], 0, true, true, false, false, false});
    }
    softmax_case((xent_case){64, 10, 0, false, false, false, false, false});
    softmax_case((xent_case){1100, 10, 0, false, true, false, false, false}); /* more rows than either grid cap */
    /* a vocabulary padded for the GEMMs, the gradient written over the logits, as GPT-2 uses it */
    softmax_case((xent_case){37, 300, 84, false, true, true, false, false});
    softmax_case((xent_case){5, 1000, 24, true, true, false, false, false});
    softmax_case((xent_case){9, 50, 78, false, false, false, false, false});
    /* rows without a target (prompt tokens, documents' ends): zero loss, gradient and hits */
    softmax_case((xent_case){130, 33, 0, false, true, false, true, false});
    softmax_case((xent_case){37, 300, 84, false, true, true, true, false});
    softmax_case((xent_case){1100, 10, 0, false, false, false, true, false});
    /* masked classes (-inf logits), a thread's first column among them: exp(-inf - -inf) is no term */
    softmax_case((xent_case){5, 1000, 0, false, true, false, false, true});
    softmax_case((xent_case){5, 301, 0, false, true, false, false, true});
    softmax_case((xent_case){37, 300, 84, false, true, true, false, true});
}

/* sumsq writes a device double; it is read back here, twice on the GPU to see the same bits. */
static double sumsq_on(device *d, const float *x, size_t n, double *out, ddp_err *err, const char *which)
{
    double v = -1;
    int rc = d->ops->sumsq(d, x, n, out, err);
    if (!rc)
        rc = d->ops->download(d, &v, out, sizeof v, err);
    CHECK(rc == 0, "sumsq on %s: %s", which, err->msg);
    return v;
}

static void test_sumsq(void)
{
    ddp_err ec = {0}, eg = {0};
    const size_t extra[] = {0, 300000}; /* empty, and more blocks than the partial-sum cap */
    double *oc = dev_alloc(cpu, sizeof(double)), *og = dev_alloc(gpu, sizeof(double));
    for (size_t s = 0; s < N_SIZES + 2; s++) {
        size_t n = s < N_SIZES ? sizes[s] : extra[s - N_SIZES];
        float *h = random_floats(n, 3.0f), *xc, *xg;
        upload_both(h, n * sizeof *h, (void **)&xc, (void **)&xg);
        dev_upload(gpu, og, &(double){NAN}, sizeof(double)); /* must be overwritten, n == 0 too */
        double rc = sumsq_on(cpu, xc, n, oc, &ec, "cpu");
        double t0 = 1e3 * monotonic_s();
        double rg = sumsq_on(gpu, xg, n, og, &eg, "cuda");
        op_time_add("sumsq", 1e3 * monotonic_s() - t0);
        double rg2 = sumsq_on(gpu, xg, n, og, &eg, "cuda");
        CHECK(fabs(rg - rc) <= 1e-12 * rc, "sumsq n=%zu: cuda %.17g, cpu %.17g", n, rg, rc);
        CHECK(memcmp(&rg, &rg2, sizeof rg) == 0, "sumsq n=%zu not deterministic: %.17g then %.17g", n, rg, rg2);
        free_both(xc, xg);
        free(h);
    }
    free_both(oc, og);
}

/* ---- optimizers -------------------------------------------------------------------------- */

/* A weight-decay exemption table for a step over n elements at offset `first` of a flat buffer,
 * on both devices (8-byte aligned in every placement: the kernels read size_t): a span that begins
 * before the first element, an empty span, and spans that end inside and past the elements, at
 * places that depend on n so that packs straddle them. */
typedef struct exempt_pair {
    decay_exempt c, g;
} exempt_pair;

static exempt_pair exempt_tables(size_t n, size_t first)
{
    const size_t b[] = {first - 10, first + n / 7 + 1, first + n / 3 + 1, first + n / 3 + 1, first + n / 2 + 2,
                        first + n + 5};
    size_t *bc = dev_alloc_upload(cpu, b, sizeof b, sizeof b[0]);
    size_t *bg = dev_alloc_upload(gpu, b, sizeof b, sizeof b[0]);
    const size_t nb = sizeof b / sizeof b[0];
    return (exempt_pair){{bc, nb, first}, {bg, nb, first}};
}

static void exempt_free(exempt_pair x)
{
    placed_free(cpu, (void *)x.c.bounds);
    placed_free(gpu, (void *)x.g.bounds);
}

static void test_sgd(void)
{
    ddp_err ec = {0}, eg = {0};
    char what[128];
    const struct { float momentum, wd; bool nesterov; float gs; } cases[] = {
        {0.0f, 0.0f, false, 1.0f}, {0.9f, 1e-4f, true, 1.0f}, {0.9f, 0.0f, false, 0.5f}, {0.5f, 0.01f, false, 0.75f}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (size_t s = 0; s < N_SIZES; s += 2) {
            size_t n = sizes[s];
            float *hp = random_floats(n, 1.0f), *pc, *pg, *bc = NULL, *bg = NULL;
            output_both(hp, n, &pc, &pg);
            if (cases[c].momentum != 0.0f)
                output_both(NULL, n, &bc, &bg); /* step 1 must write the buffer, not read it */
            float *sc = NULL, *sg = NULL; /* the gradient scale: a device float, or none for 1 */
            if (cases[c].gs != 1.0f)
                upload_both(&cases[c].gs, sizeof(float), (void **)&sc, (void **)&sg);
            /* the cases with weight decay exempt some elements from it */
            exempt_pair ex = cases[c].wd != 0.0f ? exempt_tables(n, 1000 + 3 * s) : (exempt_pair){0};
            for (int step = 0; step < 3; step++) {
                float *hg = random_floats(n, 1.0f), *gc, *gg;
                upload_both(hg, n * sizeof *hg, (void **)&gc, (void **)&gg);
                sgd_args a = {.lr = 0.1f, .momentum = cases[c].momentum, .weight_decay = cases[c].wd,
                              .nesterov = cases[c].nesterov, .first_step = step == 0, .exempt = ex.c};
                CHECK(cpu->ops->sgd_step(cpu, pc, gc, sc, bc, n, &a, &ec) == 0, "%s", ec.msg);
                a.exempt = ex.g;
                GPU_CHECK(sgd_step, (gpu, pg, gg, sg, bg, n, &a, &eg), eg.msg);
                free_both(gc, gg);
                free(hg);
            }
            if (sc)
                free_both(sc, sg);
            if (ex.c.bounds)
                exempt_free(ex);
            snprintf(what, sizeof what, "sgd case %zu n=%zu params", c, n);
            compare(what, pc, pg, n, 1e-5, 1e-7);
            if (bc) {
                snprintf(what, sizeof what, "sgd case %zu n=%zu momentum buffer", c, n);
                compare(what, bc, bg, n, 1e-5, 1e-7);
                free_both(bc, bg);
            }
            free_both(pc, pg);
            free(hp);
        }
}

static void test_adamw(void)
{
    ddp_err ec = {0}, eg = {0};
    char what[128];
    for (size_t s = 0; s < 2 * N_SIZES; s += 2) {
        size_t n = sizes[s % N_SIZES];
        /* the second round exempts some elements from weight decay */
        exempt_pair ex = s >= N_SIZES ? exempt_tables(n, (size_t)1 << 33) : (exempt_pair){0};
        float *hp = random_floats(n, 1.0f), *zeros = calloc(n ? n : 1, sizeof *zeros);
        float *pc, *pg, *mc, *mg, *vc, *vg;
        output_both(hp, n, &pc, &pg);
        output_both(zeros, n, &mc, &mg);
        output_both(zeros, n, &vc, &vg);
        const float gs = 0.6f;
        float *sc, *sg;
        upload_both(&gs, sizeof gs, (void **)&sc, (void **)&sg);
        for (int step = 1; step <= 3; step++) {
            float *hg = random_floats(n, 1.0f), *gc, *gg;
            upload_both(hg, n * sizeof *hg, (void **)&gc, (void **)&gg);
            adamw_args a = optim_adamw_args(1e-3, 0.9, 0.999, 1e-8, 0.01, step);
            a.exempt = ex.c;
            /* step 2 scales the gradients (clipping), the others run without a scale */
            CHECK(cpu->ops->adamw_step(cpu, pc, gc, step == 2 ? sc : NULL, mc, vc, n, &a, &ec) == 0, "%s",
                  ec.msg);
            a.exempt = ex.g;
            GPU_CHECK(adamw_step, (gpu, pg, gg, step == 2 ? sg : NULL, mg, vg, n, &a, &eg), eg.msg);
            free_both(gc, gg);
            free(hg);
        }
        free_both(sc, sg);
        if (ex.c.bounds)
            exempt_free(ex);
        const char *kind = ex.c.bounds ? " exempt" : "";
        snprintf(what, sizeof what, "adamw%s n=%zu params", kind, n);
        compare(what, pc, pg, n, 1e-5, 1e-7);
        snprintf(what, sizeof what, "adamw%s n=%zu m", kind, n);
        compare(what, mc, mg, n, 1e-5, 1e-8);
        snprintf(what, sizeof what, "adamw%s n=%zu v", kind, n);
        compare(what, vc, vg, n, 1e-5, 1e-10);
        free_both(pc, pg);
        free_both(mc, mg);
        free_both(vc, vg);
        free(hp);
        free(zeros);
    }
}

/* ---- GEMM through cuBLAS (or its emulation) ---------------------------------------------- */

static void test_gemm(void)
{
    ddp_err ec = {0}, eg = {0};
    char what[160];
    const int64_t dims[][3] = {{1, 1, 1}, {5, 7, 3}, {64, 10, 32}, {33, 17, 65}, {16, 64, 784}};
    for (int t = 0; t < 4; t++) {
        bool ta = t & 1, tb = t & 2;
        for (size_t s = 0; s < sizeof dims / sizeof dims[0]; s++) {
            int64_t m = dims[s][0], n = dims[s][1], k = dims[s][2];
            /* row strides padded past the minimum, so a wrong leading dimension shows */
            int64_t a_rows = ta ? k : m, a_cols = ta ? m : k, b_rows = tb ? n : k, b_cols = tb ? k : n;
            int64_t lda = a_cols + 3, ldb = b_cols + 1, ldc = n + 2;
            float *ha = random_floats((size_t)(a_rows * lda), 1.0f), *hb = random_floats((size_t)(b_rows * ldb), 1.0f);
            float *hc = random_floats((size_t)(m * ldc), 1.0f);
            float *ac, *ag, *bc, *bg, *cc, *cg;
            upload_both(ha, (size_t)(a_rows * lda) * sizeof(float), (void **)&ac, (void **)&ag);
            upload_both(hb, (size_t)(b_rows * ldb) * sizeof(float), (void **)&bc, (void **)&bg);
            const float betas[] = {0.0f, 1.3f};
            for (int bi = 0; bi < 2; bi++) {
                output_both(betas[bi] == 0.0f ? NULL : hc, (size_t)(m * ldc), &cc, &cg);
                if (betas[bi] == 0.0f) { /* padding between rows is never written: give it values */
                    float *init = random_floats((size_t)(m * ldc), 1.0f);
                    for (int64_t i = 0; i < m; i++)
                        for (int64_t j = 0; j < n; j++)
                            init[i * ldc + j] = NAN;
                    dev_upload(cpu, cc, init, (size_t)(m * ldc) * sizeof(float));
                    dev_upload(gpu, cg, init, (size_t)(m * ldc) * sizeof(float));
                    free(init);
                }
                CHECK(cpu->ops->gemm(cpu, TENSOR_F32, TENSOR_F32, ta, tb, m, n, k, 0.7f, ac, lda, bc, ldb,
                                        betas[bi], cc, ldc, &ec) == 0,
                      "%s", ec.msg);
                GPU_CHECK(gemm, (gpu, TENSOR_F32, TENSOR_F32, ta, tb, m, n, k, 0.7f, ag, lda, bg, ldb, betas[bi],
                                 cg, ldc, &eg), eg.msg);
                snprintf(what, sizeof what, "gemm ta=%d tb=%d m=%lld n=%lld k=%lld beta=%g", ta, tb, (long long)m,
                         (long long)n, (long long)k, (double)betas[bi]);
                compare(what, cc, cg, (size_t)(m * ldc), 1e-5, 1e-6 * (double)k);
                free_both(cc, cg);
            }
            free_both(ac, ag);
            free_both(bc, bg);
            free(ha);
            free(hb);
            free(hc);
        }
    }
    /* cuBLAS takes int: larger sizes are refused with a clear error, before anything runs (the
     * one-float buffer is never touched) */
    float *one = dev_alloc(gpu, sizeof(float));
    int rc = gpu->ops->gemm(gpu, TENSOR_F32, TENSOR_F32, false, false, (int64_t)1 << 31, 1, 1, 1.0f, one, 1, one,
                               1, 0.0f, one, 1, &eg);
    gpu->ops->free(gpu, one);
    CHECK(rc != 0, "gemm with m = 2^31 accepted");
    CHECK_STR_CONTAINS(eg.msg, "INT_MAX");
}

int main(int argc, char **argv)
{
    static const pair_group kernel_groups[] = {
        {"fill+scale+u8_to_f32", test_fill_scale_u8}, {"act_forward+backward", test_activations},
        {"add", test_add}, {"bias_add+bias_grad", test_bias}, {"softmax_xent", test_softmax_xent},
        {"sumsq", test_sumsq}, {"sgd_step", test_sgd}, {"adamw_step", test_adamw}};
    static const pair_group gemm_groups[] = {{"gemm", test_gemm}};
    if (argc > 1 && strcmp(argv[1], "gemm") == 0)
        return pair_main("test_cuda_kernels gemm", 7, gemm_groups, 1, 1);
    return pair_main("test_cuda_kernels", 7, kernel_groups, sizeof kernel_groups / sizeof kernel_groups[0], 3);
}
