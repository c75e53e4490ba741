/* test_cuda_transformer.c — the transformer family's CUDA kernels (runtime/device/kernels/
 * embedding.cu and layernorm.cu, run by the emulator under DDP_CUDA_EMU_ORDER)
 * against the CPU backend (their _cpu.c twins, themselves tested against double references by
 * test_transformer_cpu.c), with TENSOR_F32; the TENSOR_BF16 variants are test_cuda_bf16.c's.
 * Every group runs with its buffers at aligned starts (the vector paths: LayerNorm's warp per row,
 * the embeddings' 16-byte packs) and again one element past them (the one-element fallbacks); the
 * embeddings also without a position table (wpe, dwpe NULL) and in packed rows (positions restart
 * at each document), and on CUDA with document starts outside [0, t], clamped (bad_starts_clamped),
 * and ends that would not move the position gradient's walk forward (bad_ends_walk_on).
 *
 * Every op runs on the CPU once and on the CUDA device twice, with the same fresh random inputs
 * (seed printed, DDP_TEST_SEED repeats a run) over awkward shapes: sizes 1, odd sizes, C not a
 * power of two, T = 1, rows longer than a block and more rows or elements than either grid cap
 * (emulator 64, GPU 1024 blocks). "=" outputs start as NaN, so an element a kernel must write but
 * skips fails; "+=" outputs start as random values; tokens repeat (V as small as 1). The two CUDA
 * runs (outputs reset between them) must give the same bits: the kernels are deterministic.
 *
 * Tolerances come from float32 rounding (u = FLT_EPSILON/2), not from observed errors:
 *  - exact (0) where both sides do the same float operations in the same order: embeddings
 *    (one float add; dwte's float adds in position order, which the CUDA token sort keeps;
 *    dwpe's double sum over (b, t) in order) and the residual sum;
 *  - ROUND_ONCE (FLT_EPSILON relative) where both sides compute in double, differing only in
 *    summation order (~n·2^-53 relative), and round once: the two roundings are at most one ulp
 *    apart. LayerNorm; its absolute floors bound the double-order noise where a result cancels to
 *    near zero (see each). */
#include <float.h>
#include <math.h>

#include "tests/runtime/device/attention_ref.h"
#include "tests/runtime/device/cuda_pair.h"

#define ROUND_ONCE ((double)FLT_EPSILON)

/* Random floats offset ± [lo, hi): never zero when lo > 0, mixed signs. */
static float *random_floats(size_t n, float offset, float lo, float hi)
{
    float *h = xmalloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++) {
        float mag = rng_uniform(&test_rng, lo, hi);
        h[i] = offset + (rng_below(&test_rng, 2) ? mag : -mag);
    }
    return h;
}

/* One buffer on each device: .c on the CPU, .g on the CUDA device. */
typedef struct both {
    void *c, *g;
} both;

/* Every buffer here holds 4-byte elements (float, int32). */
static both both_upload(const void *h, size_t bytes)
{
    return (both){dev_alloc_upload(cpu, h, bytes, 4), dev_alloc_upload(gpu, h, bytes, 4)};
}

static void both_free(both b)
{
    placed_free(cpu, b.c);
    placed_free(gpu, b.g);
}

/* An output of an op on both devices: both start as `init`, NaN where init is NULL. The CUDA
 * copy is reset to it before the second CUDA run, whose bits must equal the first's (kept). */
typedef struct out {
    void *c, *g;
    size_t n;
    float *init, *first;
} out;

static out out_new(const float *init, size_t n)
{
    out o = {.n = n, .init = xmalloc(n * sizeof(float)), .first = xmalloc(n * sizeof(float))};
    for (size_t i = 0; i < n; i++)
        o.init[i] = init ? init[i] : NAN;
    both b = both_upload(o.init, n * sizeof(float));
    o.c = b.c;
    o.g = b.g;
    return o;
}

static void out_rerun_prepare(out *o)
{
    ddp_err err = {0};
    download(gpu, o->first, o->g, o->n * sizeof(float));
    die_on(gpu->ops->upload(gpu, o->g, o->init, o->n * sizeof(float), &err), &err, "upload");
}

/* The CPU's result, downloaded (caller frees). */
static float *out_cpu(const out *o)
{
    float *h = xmalloc(o->n * sizeof *h);
    download(cpu, h, o->c, o->n * sizeof *h);
    return h;
}

/* Checks the two CUDA runs gave the same bits and |cuda - cpu| <= atol + rtol·|cpu| elementwise
 * (NaN never passes), then frees the output. */
static void out_check(out *o, const char *what, double rtol, double atol)
{
    float *hc = out_cpu(o), *hg = xmalloc(o->n * sizeof *hg);
    download(gpu, hg, o->g, o->n * sizeof *hg);
    CHECK(memcmp(hg, o->first, o->n * sizeof *hg) == 0, "%s: two CUDA runs differ", what);
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < o->n; i++) {
        double diff = fabs((double)hg[i] - (double)hc[i]);
        if (!(diff <= atol + rtol * fabs((double)hc[i])) && bad++ == 0)
            first = i;
    }
    CHECK(bad == 0, "%s: %zu of %zu elements differ; first [%zu]: cuda %.9g, cpu %.9g", what, bad, o->n, first,
          bad ? (double)hg[first] : 0.0, bad ? (double)hc[first] : 0.0);
    both_free((both){o->c, o->g});
    free(hc);
    free(hg);
    free(o->init);
    free(o->first);
}

/* Runs OP on the CPU, then twice on the CUDA device, resetting the outs[0..n_outs) between the
 * CUDA runs. In the argument list S(x) is buffer x's copy (x.c or x.g) on the running device. */
#define S(x) (side_ == 0 ? (x).c : (x).g)
#define RUN(outs, n_outs, op, ...)                                                                 \
    for (int side_ = 0; side_ < 3; side_++) {                                                      \
        device *dv_ = side_ == 0 ? cpu : gpu;                                                      \
        if (side_ == 2)                                                                            \
            for (int o_ = 0; o_ < (n_outs); o_++)                                                  \
                out_rerun_prepare(&(outs)[o_]);                                                    \
        ddp_err e_ = {0};                                                                          \
        double t0_ = 1e3 * monotonic_s();                                                          \
        int rc_ = dv_->ops->op(dv_, __VA_ARGS__, &e_);                                             \
        if (side_ > 0) {                                                                           \
            ddp_err se_ = {0};                                                                     \
            die_on(gpu->ops->synchronize(gpu, &se_), &se_, #op);                                   \
            op_time_add(#op, 1e3 * monotonic_s() - t0_);                                           \
        }                                                                                          \
        CHECK(rc_ == 0, "%s on %s: %s", #op, side_ ? "cuda" : "cpu", e_.msg);                      \
    }

/* ---- embeddings ------------------------------------------------------------------------- */

/* Document ends that would not move the position table's gradient walk forward (every start 0,
 * every end 0: one document whose next would begin where it is): the walk ends at its first hit,
 * which is each row's position p, so dwpe is the unpacked rows' (the walk looped for ever). */
static void bad_ends_walk_on(int64_t B, int64_t T, int64_t C, int64_t V, both tok, both dout)
{
    int32_t *hdocs = xmalloc((size_t)(2 * B * T) * sizeof *hdocs);
    memset(hdocs, 0, (size_t)(2 * B * T) * sizeof *hdocs);
    both docs = both_upload(hdocs, (size_t)(2 * B * T) * sizeof *hdocs);
    const int32_t *ends = (const int32_t *)docs.g + B * T;
    out dwte[2] = {out_new(NULL, (size_t)(V * C)), out_new(NULL, (size_t)(V * C))};
    out dwpe[2] = {out_new(NULL, (size_t)(T * C)), out_new(NULL, (size_t)(T * C))};
    ddp_err err = {0};
    for (int k = 0; k < 2; k++) {
        die_on(gpu->ops->fill(gpu, TENSOR_F32, dwte[k].g, (size_t)(V * C), 0.0f, &err), &err, "fill");
        die_on(gpu->ops->fill(gpu, TENSOR_F32, dwpe[k].g, (size_t)(T * C), 0.0f, &err), &err, "fill");
        die_on(gpu->ops->embedding_backward(gpu, TENSOR_F32, dwte[k].g, dwpe[k].g, dout.g, tok.g, k ? docs.g : NULL,
                                            k ? ends : NULL, B, T, C, V, &err), &err, "embedding_backward");
    }
    size_t bytes = (size_t)(T * C) * sizeof(float);
    float *plain = xmalloc(bytes), *walked = xmalloc(bytes);
    download(gpu, plain, dwpe[0].g, bytes);
    download(gpu, walked, dwpe[1].g, bytes);
    CHECK(memcmp(plain, walked, bytes) == 0, "embedding_backward B=%lld T=%lld C=%lld, ends that do not move the "
          "walk: dwpe is not the unpacked rows'", (long long)B, (long long)T, (long long)C);
    for (int k = 0; k < 2; k++) {
        both_free((both){dwte[k].c, dwte[k].g});
        both_free((both){dwpe[k].c, dwpe[k].g});
        free(dwte[k].init), free(dwte[k].first), free(dwpe[k].init), free(dwpe[k].first);
    }
    both_free(docs);
    free(plain);
    free(walked);
    free(hdocs);
}

/* Document starts outside [0, t] (device data the host cannot check; the CPU backend refuses
 * them) on the CUDA side alone: clamped, a start past t reading position 0 and a negative one
 * position t, never a row outside wpe. One float add each, so exact. */
static void bad_starts_clamped(int64_t B, int64_t T, int64_t C, both tok, both wte, both wpe, const int32_t *htok,
                               const float *hwte, const float *hwpe)
{
    size_t n = (size_t)(B * T * C);
    int32_t *hbad = xmalloc((size_t)(B * T) * sizeof *hbad);
    for (int64_t i = 0; i < B * T; i++)
        hbad[i] = i % 2 ? -3 - (int32_t)(i % T) : (int32_t)(i % T) + 5 + (int32_t)T;
    both bad = both_upload(hbad, (size_t)(B * T) * sizeof *hbad);
    out o = out_new(NULL, n);
    ddp_err err = {0};
    die_on(gpu->ops->embedding_forward(gpu, TENSOR_F32, o.g, tok.g, wte.g, wpe.g, bad.g, B, T, C, &err), &err,
           "embedding_forward with bad starts");
    float *got = xmalloc(n * sizeof *got);
    download(gpu, got, o.g, n * sizeof *got);
    size_t wrong = 0;
    for (int64_t bt = 0; bt < B * T; bt++) {
        int64_t p = bt % 2 ? bt % T : 0;
        for (int64_t c = 0; c < C; c++)
            wrong += got[bt * C + c] != hwte[(int64_t)htok[bt] * C + c] + hwpe[p * C + c];
    }
    CHECK(wrong == 0, "embedding_forward B=%lld T=%lld C=%lld, starts outside [0, t]: %zu elements not the clamped "
          "row's", (long long)B, (long long)T, (long long)C, wrong);
    both_free(bad);
    both_free((both){o.c, o.g});
    free(o.init);
    free(o.first);
    free(got);
    free(hbad);
}

static void test_embeddings(void)
{
    /* B, T, C, V: V = 1 makes every token the same; 2·70·300 and 6·64·769 elements pass the
     * emulator's and the GPU's grid caps; 1,200 and 2,100 positions make two and three tiles of
     * the token sort, V = 300 two passes of it, V = 70,000 three; V = 1 with 1,200 positions one
     * token's run over both tiles */
    const int64_t shapes[][4] = {{1, 1, 1, 1},      {1, 1, 7, 3},     {2, 3, 5, 1},     {3, 17, 33, 7},
                                 {4, 20, 48, 500},  {2, 70, 300, 5},  {6, 64, 769, 40}, {4, 300, 24, 300},
                                 {2, 600, 12, 1},   {3, 700, 8, 70000}};
    char what[128];
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t B = shapes[s][0], T = shapes[s][1], C = shapes[s][2], V = shapes[s][3];
        size_t n = (size_t)(B * T * C);
        int32_t *htok = xmalloc((size_t)(B * T) * sizeof *htok);
        for (int64_t i = 0; i < B * T; i++)
            htok[i] = (int32_t)rng_below(&test_rng, (uint64_t)V);
        float *hwte = random_floats((size_t)(V * C), 0, 0.05f, 1), *hwpe = random_floats((size_t)(T * C), 0, 0.05f, 1);
        float *hdout = random_floats(n, 0, 0.05f, 1);
        both tok = both_upload(htok, (size_t)(B * T) * sizeof *htok);
        both wte = both_upload(hwte, (size_t)(V * C) * sizeof(float));
        both wpe = both_upload(hwpe, (size_t)(T * C) * sizeof(float));
        both dout = both_upload(hdout, n * sizeof(float));

        out fwd[1] = {out_new(NULL, n)};
        RUN(fwd, 1, embedding_forward, TENSOR_F32, S(fwd[0]), S(tok), S(wte), S(wpe), NULL, B, T, C);
        snprintf(what, sizeof what, "embedding_forward B=%lld T=%lld C=%lld V=%lld", (long long)B, (long long)T,
                 (long long)C, (long long)V);
        out_check(&fwd[0], what, 0, 0);

        /* "+=" onto random gradients (hwte, hwpe reused as their initial values) */
        out bwd[2] = {out_new(hwte, (size_t)(V * C)), out_new(hwpe, (size_t)(T * C))};
        RUN(bwd, 2, embedding_backward, TENSOR_F32, S(bwd[0]), S(bwd[1]), S(dout), S(tok), NULL, NULL, B, T, C, V);
        snprintf(what, sizeof what, "embedding_backward dwte B=%lld T=%lld C=%lld V=%lld", (long long)B, (long long)T,
                 (long long)C, (long long)V);
        out_check(&bwd[0], what, 0, 0);
        snprintf(what, sizeof what, "embedding_backward dwpe B=%lld T=%lld C=%lld", (long long)B, (long long)T,
                 (long long)C);
        out_check(&bwd[1], what, 0, 0);

        /* no position table (wpe, dwpe NULL: the Llama's), the same bits as the CPU's */
        out fwd_np[1] = {out_new(NULL, n)};
        RUN(fwd_np, 1, embedding_forward, TENSOR_F32, S(fwd_np[0]), S(tok), S(wte), NULL, NULL, B, T, C);
        snprintf(what, sizeof what, "embedding_forward without wpe B=%lld T=%lld C=%lld V=%lld", (long long)B,
                 (long long)T, (long long)C, (long long)V);
        out_check(&fwd_np[0], what, 0, 0);
        out bwd_np[1] = {out_new(hwte, (size_t)(V * C))};
        RUN(bwd_np, 1, embedding_backward, TENSOR_F32, S(bwd_np[0]), NULL, S(dout), S(tok), NULL, NULL, B, T, C, V);
        snprintf(what, sizeof what, "embedding_backward without dwpe: dwte B=%lld T=%lld C=%lld V=%lld",
                 (long long)B, (long long)T, (long long)C, (long long)V);
        out_check(&bwd_np[0], what, 0, 0);

        /* packed rows (documents of lengths 3, 1, 9, 20, rows packed differently): the CPU's bits */
        int32_t *hdocs = xmalloc((size_t)(2 * B * T) * sizeof *hdocs);
        attn_docs_fill(&(attn_case){.B = B, .T = T, .docs = (const int32_t[]){3, 1, 9, 20, 0}}, hdocs, hdocs + B * T);
        both ds = both_upload(hdocs, (size_t)(2 * B * T) * sizeof *hdocs);
        both de = {(int32_t *)ds.c + B * T, (int32_t *)ds.g + B * T};
        out fwd_pk[1] = {out_new(NULL, n)};
        RUN(fwd_pk, 1, embedding_forward, TENSOR_F32, S(fwd_pk[0]), S(tok), S(wte), S(wpe), S(ds), B, T, C);
        snprintf(what, sizeof what, "embedding_forward packed B=%lld T=%lld C=%lld", (long long)B, (long long)T,
                 (long long)C);
        out_check(&fwd_pk[0], what, 0, 0);
        out bwd_pk[2] = {out_new(hwte, (size_t)(V * C)), out_new(hwpe, (size_t)(T * C))};
        RUN(bwd_pk, 2, embedding_backward, TENSOR_F32, S(bwd_pk[0]), S(bwd_pk[1]), S(dout), S(tok), S(ds), S(de),
            B, T, C, V);
        snprintf(what, sizeof what, "embedding_backward packed B=%lld T=%lld C=%lld", (long long)B, (long long)T,
                 (long long)C);
        out_check(&bwd_pk[0], what, 0, 0);
        out_check(&bwd_pk[1], what, 0, 0);
        both_free(ds);
        free(hdocs);
        bad_starts_clamped(B, T, C, tok, wte, wpe, htok, hwte, hwpe);
        bad_ends_walk_on(B, T, C, V, tok, dout);

        both_free(tok);
        both_free(wte);
        both_free(wpe);
        both_free(dout);
        free(htok);
        free(hwte);
        free(hwpe);
        free(hdout);
    }
}

/* Token ids outside [0, V) (data the model did not check) must not make the CUDA backward write
 * outside dwte: it skips their positions. The reference is the CPU's backward with those tokens
 * made 0 and their dout rows 0, which adds exact zeros. */
static void test_embedding_bad_tokens(void)
{
    const int64_t B = 2, T = 50, C = 8, V = 7;
    const size_t BT = (size_t)(B * T), n = BT * (size_t)C;
    int32_t *htok = xmalloc(BT * sizeof *htok), *hclean = xmalloc(BT * sizeof *hclean);
    float *hdout = random_floats(n, 0, 0.05f, 1), *hclean_dout = xmalloc(n * sizeof *hclean_dout);
    float *hwte = random_floats((size_t)(V * C), 0, 0.05f, 1), *hwpe = random_floats((size_t)(T * C), 0, 0.05f, 1);
    const int32_t bad[] = {-1, (int32_t)V, 1 << 30, INT32_MIN};
    memcpy(hclean_dout, hdout, n * sizeof *hdout);
    for (size_t i = 0; i < BT; i++) {
        htok[i] = i % 5 == 2 ? bad[i / 5 % 4] : (int32_t)rng_below(&test_rng, (uint64_t)V);
        hclean[i] = htok[i] >= 0 && htok[i] < V ? htok[i] : 0;
        if (hclean[i] != htok[i])
            for (int64_t c = 0; c < C; c++)
                hclean_dout[i * (size_t)C + (size_t)c] = 0.0f;
    }
    both tok = both_upload(htok, BT * sizeof *htok), clean = both_upload(hclean, BT * sizeof *hclean);
    both dout = both_upload(hdout, n * sizeof(float)), clean_dout = both_upload(hclean_dout, n * sizeof(float));
    out dwte = out_new(hwte, (size_t)(V * C)), dwpe = out_new(hwpe, (size_t)(T * C));
    ddp_err err = {0};
    die_on(cpu->ops->embedding_backward(cpu, TENSOR_F32, dwte.c, dwpe.c, clean_dout.c, clean.c, NULL, NULL, B, T, C, V,
                                        &err),
           &err, "cpu embedding_backward");
    for (int run = 0; run < 2; run++) {
        if (run == 1) {
            out_rerun_prepare(&dwte);
            out_rerun_prepare(&dwpe);
        }
        die_on(gpu->ops->embedding_backward(gpu, TENSOR_F32, dwte.g, dwpe.g, dout.g, tok.g, NULL, NULL, B, T, C, V,
                                            &err),
               &err, "cuda embedding_backward");
        die_on(gpu->ops->synchronize(gpu, &err), &err, "synchronize");
    }
    out_check(&dwte, "embedding_backward dwte with token ids outside [0, V)", 0, 0);
    both_free((both){dwpe.c, dwpe.g}); /* dwpe does not depend on the tokens; the clean dout changed it */
    free(dwpe.init);
    free(dwpe.first);
    both_free(tok);
    both_free(clean);
    both_free(dout);
    both_free(clean_dout);
    free(htok);
    free(hclean);
    free(hdout);
    free(hclean_dout);
    free(hwte);
    free(hwpe);
}

/* ---- LayerNorm ---------------------------------------------------------------------------- */

/* The first n floats of a CUDA buffer, downloaded (caller frees). */
static float *gpu_floats(const void *p, size_t n)
{
    float *h = xmalloc(n * sizeof *h);
    download(gpu, h, p, n * sizeof *h);
    return h;
}

/* residual_layernorm_forward against the CPU's: res_out = a + b is one float addition on both
 * sides (exact), the LayerNorm outputs get layernorm_forward's tolerances. res_out is a third
 * buffer, then (for rows of up to 20,000 elements in all: the emulator is slow) a itself, then b
 * itself. And on CUDA the op gives the bits of add followed by
 * layernorm_forward there: it is the same arithmetic in one pass. */
static void test_residual_layernorm(int64_t N, int64_t C, const float *ha, both w, both b)
{
    const size_t n = (size_t)(N * C), rows = (size_t)N;
    char what[128];
    float *hb = random_floats(n, 0, 0.05f, 1);
    both a_in = both_upload(ha, n * sizeof(float)), b_in = both_upload(hb, n * sizeof(float));
    for (int where = 0; where < (n <= 20000 ? 3 : 1); where++) {
        out o[4] = {out_new(where == 1 ? ha : where == 2 ? hb : NULL, n), out_new(NULL, n), out_new(NULL, rows),
                    out_new(NULL, rows)};
        both a = where == 1 ? (both){o[0].c, o[0].g} : a_in, bb = where == 2 ? (both){o[0].c, o[0].g} : b_in;
        RUN(o, 4, residual_layernorm_forward, TENSOR_F32, S(o[0]), S(o[1]), S(o[2]), S(o[3]), S(a), S(bb), S(w),
            S(b), N, C);
        if (where == 0) {
            ddp_err err = {0};
            float *nan = xmalloc(n * sizeof *nan);
            for (size_t i = 0; i < n; i++)
                nan[i] = NAN;
            void *sum = dev_alloc_upload(gpu, nan, n * 4, 4), *ln = dev_alloc_upload(gpu, nan, n * 4, 4);
            void *mean = dev_alloc_upload(gpu, nan, rows * 4, 4), *rstd = dev_alloc_upload(gpu, nan, rows * 4, 4);
            die_on(gpu->ops->add(gpu, TENSOR_F32, sum, a_in.g, b_in.g, n, &err), &err, "add");
            die_on(gpu->ops->layernorm_forward(gpu, TENSOR_F32, ln, mean, rstd, sum, w.g, b.g, N, C, &err), &err,
                   "layernorm_forward");
            void *fused[4] = {o[0].g, o[1].g, o[2].g, o[3].g}, *unfused[4] = {sum, ln, mean, rstd};
            for (int i = 0; i < 4; i++) {
                size_t count = i < 2 ? n : rows;
                float *f = gpu_floats(fused[i], count), *u = gpu_floats(unfused[i], count);
                CHECK(memcmp(f, u, count * sizeof *f) == 0, "residual_layernorm_forward N=%lld C=%lld: output %d "
                      "differs from add + layernorm_forward on CUDA", (long long)N, (long long)C, i);
                free(f);
                free(u);
                placed_free(gpu, unfused[i]);
            }
            free(nan);
        }
        const char *names[] = {"res_out", "ln_out", "mean", "rstd"}, *places[] = {"", " over a", " over b"};
        for (int i = 0; i < 4; i++) {
            snprintf(what, sizeof what, "residual_layernorm_forward %s%s N=%lld C=%lld", names[i], places[where],
                     (long long)N, (long long)C);
            out_check(&o[i], what, i == 0 ? 0 : ROUND_ONCE, i == 0 ? 0 : 1e-12);
        }
    }
    both_free(a_in);
    both_free(b_in);
    free(hb);
}

static void test_layernorm(void)
{
    /* N, C, offset: rows longer than a block (1025, 3000), more rows than both grid caps and
     * several 64-row chunks of the dw/db sums (1100), a mean far from 0 (offset); rows of whole
     * 16-byte packs for the warp path (4: one pack, 12, 768: 6 per lane, 520: lanes partly idle,
     * 1024: 8, the most) and an aligned one just past it (1028) */
    const struct { int64_t N, C; float offset; } shapes[] = {
        {1, 1, 0}, {1, 2, 0}, {3, 5, 2}, {7, 33, 0}, {64, 768, 0}, {130, 31, 5}, {1100, 5, 0}, {5, 1025, -3},
        {2, 3000, 0}, {33, 4, 1}, {70, 12, 0}, {40, 520, 0}, {9, 1024, 2}, {3, 1028, 0}};
    char what[128];
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t N = shapes[s].N, C = shapes[s].C;
        size_t n = (size_t)(N * C);
        float *hx = random_floats(n, shapes[s].offset, 0.05f, 2), *hw = random_floats((size_t)C, 1, 0, 0.5f);
        float *hb = random_floats((size_t)C, 0, 0.05f, 1), *hdout = random_floats(n, 0, 0.05f, 1);
        both x = both_upload(hx, n * sizeof(float)), w = both_upload(hw, (size_t)C * sizeof(float));
        both b = both_upload(hb, (size_t)C * sizeof(float)), dout = both_upload(hdout, n * sizeof(float));

        out fwd[3] = {out_new(NULL, n), out_new(NULL, (size_t)N), out_new(NULL, (size_t)N)};
        RUN(fwd, 3, layernorm_forward, TENSOR_F32, S(fwd[0]), S(fwd[1]), S(fwd[2]), S(x), S(w), S(b), N, C);
        /* the backward reads the CPU forward's statistics on both devices */
        float *hmean = out_cpu(&fwd[1]), *hrstd = out_cpu(&fwd[2]);
        both mean = both_upload(hmean, (size_t)N * sizeof(float)), rstd = both_upload(hrstd, (size_t)N * sizeof(float));
        const char *names[] = {"out", "mean", "rstd"};
        for (int i = 0; i < 3; i++) {
            snprintf(what, sizeof what, "layernorm_forward %s N=%lld C=%lld", names[i], (long long)N, (long long)C);
            /* double noise: terms of size |x - mean|·rstd·|w| + |b| <= ~10, order error ~C·2^-53 */
            out_check(&fwd[i], what, ROUND_ONCE, 1e-12);
        }
        test_residual_layernorm(N, C, hx, w, b);

        /* "+=" onto random values; the dinp floor: rstd <= 1/sqrt(1e-5) ≈ 316 times terms of
         * size <= ~10 with double order noise <= C·2^-53 ≈ 3.3e-13 → 1e-9; dw/db: sums of N terms
         * of size <= ~10 with noise <= N·2^-53·N·10 ≈ 1.3e-9 → 1e-8 */
        float *hdinp = random_floats(n, 0, 0.05f, 1), *hdw = random_floats((size_t)C, 0, 0.05f, 1);
        float *hdb = random_floats((size_t)C, 0, 0.05f, 1);
        out bwd[3] = {out_new(hdinp, n), out_new(hdw, (size_t)C), out_new(hdb, (size_t)C)};
        RUN(bwd, 3, layernorm_backward, TENSOR_F32, S(bwd[0]), S(bwd[1]), S(bwd[2]), S(dout), S(x), S(w), S(mean),
            S(rstd), N, C);
        const char *bnames[] = {"dinp", "dw", "db"};
        const double floors[] = {1e-9, 1e-8, 1e-8};
        for (int i = 0; i < 3; i++) {
            snprintf(what, sizeof what, "layernorm_backward %s N=%lld C=%lld", bnames[i], (long long)N, (long long)C);
            out_check(&bwd[i], what, ROUND_ONCE, floors[i]);
        }

        both_free(x);
        both_free(w);
        both_free(b);
        both_free(dout);
        both_free(mean);
        both_free(rstd);
        free(hx);
        free(hw);
        free(hb);
        free(hdout);
        free(hmean);
        free(hrstd);
        free(hdinp);
        free(hdw);
        free(hdb);
    }
}

int main(void)
{
    const pair_group groups[] = {{"embeddings", test_embeddings}, {"bad tokens", test_embedding_bad_tokens},
                                 {"layernorm", test_layernorm}};
    return pair_main("test_cuda_transformer", 7, groups, sizeof groups / sizeof groups[0], 2);
}
