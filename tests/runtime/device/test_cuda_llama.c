/* test_cuda_llama.c — the Llama family's CUDA kernels (runtime/device/kernels/rotary.cu, run by the
 * emulator under DDP_CUDA_EMU_ORDER) against the CPU backend (rotary_cpu.c, itself tested against
 * double references by test_llama_cpu.c), in TENSOR_F32 and then TENSOR_BF16: each op runs on the
 * CPU once in float and on the CUDA device twice in the pass's type, with the same fresh random
 * inputs (bf16-representable in the bf16 pass, so both sides read the same values; seed printed,
 * DDP_TEST_SEED repeats a run). The two CUDA runs (outputs reset between them) must give the same
 * bits. "=" outputs start as NaN, so an element a kernel must write but skips fails; "+=" outputs
 * start as the same random values on both sides. Shapes are awkward: sizes 1, C not a multiple of
 * a warp or block, rows longer than a block, row counts of no particular multiple, more rows or
 * elements than the grid caps (emulator 64 blocks, GPU 1024), several 64-row chunks of dw's sums,
 * RoPE over several heads with B > 1, T > 1 and row strides wider than the heads (the padding
 * must keep its bits), each also in packed rows (doc_start: documents of length 1 and longer, rows
 * of a batch packed differently; positions restart at each document). Everything runs twice: with
 * every buffer at an aligned start, where the kernels take their 16-byte packs (RMSNorm's row path
 * with 1 to 4 packs a thread, and rows too long for it; RoPE's and SwiGLU's packs of pairs and
 * columns, with 32-bit and 64-bit item indices), and one element past it, where they fall back to
 * one element per access.
 *
 * Tolerances on the float results, from float32 rounding (u = FLT_EPSILON/2), not observed errors:
 *  - exact: the residual sum (one float add) and RoPE (products exact in double, rounded once);
 *  - ROUND_ONCE (FLT_EPSILON relative) where both sides compute in double and round once, the
 *    sums differing only in order (~n·2^-53): RMSNorm's out, rstd, dinp, dw; the absolute floors
 *    are layernorm's (test_cuda_transformer.c), for double-order noise where a result cancels;
 *  - SwiGLU, float on both sides: expf within 2 ulp on CUDA (1 on the CPU), σ and 1 - σ <= 9u
 *    each, h = g·σ·up and dup = dh·g·σ <= 11u per side: 12·FLT_EPSILON relative for the pair;
 *    dgate = dh·up·σ·(1 + g·(1 - σ)) cancels near g = -1.28, so its bound is 23u per side on
 *    A = |dh·up|·σ·(1 + |g|·(1 - σ)): 24·FLT_EPSILON·A.
 * bf16 outputs add their own rounding: bf16 has 8 significant bits, so rounding to nearest moves a
 * value by at most 2^-8 of itself. The CUDA float result f is within the float tolerance tol of the
 * CPU's c, and the stored bf16(f) within 2^-8·|f| of f: |bf16(f) - c| <= tol + 2^-8·(|c| + tol).
 * Where tol is 0 (the same float result) the bf16 output must be c rounded to nearest-even exactly.
 * Float outputs of the bf16 pass (rstd, dw) keep the float tolerances: their inputs are the same. */
#include <float.h>
#include <math.h>
#include <stdbool.h>

#include "runtime/base/half.h"
#include "tests/runtime/device/cuda_pair.h"

#define ROUND_ONCE ((double)FLT_EPSILON)
#define BF16_U 0x1p-8 /* bf16's unit roundoff: 8 significant bits, round to nearest */

static tensor_dtype dtype; /* the CUDA side's tensor type in this pass */

static float round_t(float v) { return dtype == TENSOR_BF16 ? bf16_to_float(float_to_bf16(v)) : v; }

/* Random values offset ± [lo, hi), representable in the pass's type. */
static float *host_rand(size_t n, float offset, float lo, float hi)
{
    float *h = xmalloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++) {
        float mag = rng_uniform(&test_rng, lo, hi);
        h[i] = round_t(offset + (rng_below(&test_rng, 2) ? mag : -mag));
    }
    return h;
}

/* A buffer on both devices: floats on the CPU; on CUDA the pass's type for a tensor, floats
 * otherwise (statistics, gradients, tables). */
typedef struct buf {
    void *c, *g;
    size_t n;
    bool tensor;
} buf;

static void *gpu_upload(const float *h, size_t n, bool tensor)
{
    if (!tensor || dtype == TENSOR_F32)
        return dev_alloc_upload(gpu, h, n * sizeof *h, sizeof *h);
    uint16_t *hg = xmalloc(n * sizeof *hg);
    for (size_t i = 0; i < n; i++)
        hg[i] = float_to_bf16(h[i]);
    void *p = dev_alloc_upload(gpu, hg, n * sizeof *hg, sizeof *hg);
    free(hg);
    return p;
}

static buf buf_new(const float *h, size_t n, bool tensor)
{
    return (buf){dev_alloc_upload(cpu, h, n * sizeof *h, sizeof *h), gpu_upload(h, n, tensor), n, tensor};
}

static void buf_free(buf b)
{
    placed_free(cpu, b.c);
    placed_free(gpu, b.g);
}

/* The CUDA copy as floats (caller frees). */
static float *gpu_floats(buf b)
{
    float *h = xmalloc(b.n * sizeof *h);
    if (!b.tensor || dtype == TENSOR_F32) {
        download(gpu, h, b.g, b.n * sizeof *h);
        return h;
    }
    uint16_t *hg = xmalloc(b.n * sizeof *hg);
    download(gpu, hg, b.g, b.n * sizeof *hg);
    for (size_t i = 0; i < b.n; i++)
        h[i] = bf16_to_float(hg[i]);
    free(hg);
    return h;
}

/* An output: both copies start as init (NULL: NaN); the CUDA copy is reset to it before the
 * second CUDA run, whose bits must equal the first's (kept in first). */
typedef struct out {
    buf b;
    float *init, *first;
} out;

static out out_new(const float *init, size_t n, bool tensor)
{
    out o = {.init = xmalloc(n * sizeof(float)), .first = NULL};
    for (size_t i = 0; i < n; i++)
        o.init[i] = init ? init[i] : NAN;
    o.b = buf_new(o.init, n, tensor);
    return o;
}

static void out_rerun_prepare(out *o)
{
    free(o->first);
    o->first = gpu_floats(o->b);
    placed_free(gpu, o->b.g);
    o->b.g = gpu_upload(o->init, o->b.n, o->b.tensor);
}

/* Checks the two CUDA runs gave the same bits, and the CUDA result against the CPU's within the
 * float tolerance tol_i = rtol·|cpu| + atol (+ tol[i] when tol is given), widened for a bf16
 * output as the header says; NaN never passes. Frees the output. */
static void out_check(out *o, const char *what, double rtol, double atol, const double *tol)
{
    float *hc = xmalloc(o->b.n * sizeof *hc), *hg = gpu_floats(o->b);
    download(cpu, hc, o->b.c, o->b.n * sizeof *hc);
    const bool bf16 = o->b.tensor && dtype == TENSOR_BF16;
    CHECK(!o->first || memcmp(hg, o->first, o->b.n * sizeof *hg) == 0, "%s: two CUDA runs differ", what);
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < o->b.n; i++) {
        double c = hc[i], t = rtol * fabs(c) + atol + (tol ? tol[i] : 0.0), diff = fabs((double)hg[i] - c);
        bool ok = !bf16 ? diff <= t : t == 0.0 ? hg[i] == bf16_to_float(float_to_bf16(hc[i]))
                                               : diff <= t + BF16_U * (fabs(c) + t);
        if (!ok && bad++ == 0)
            first = i;
    }
    CHECK(bad == 0, "%s %s: %zu of %zu elements differ; first [%zu]: cuda %.9g, cpu %.9g", what,
          bf16 ? "bf16" : "f32", bad, o->b.n, first, bad ? (double)hg[first] : 0.0, bad ? (double)hc[first] : 0.0);
    buf_free(o->b);
    free(hc);
    free(hg);
    free(o->init);
    free(o->first);
}

/* Runs OP on the CPU in float, then twice on the CUDA device in the pass's type, resetting
 * outs[0..n_outs) between the CUDA runs. In the argument list S(x) is buffer x's copy on the
 * running device; x is a buf, or an out's .b. */
#define S(x) (side_ == 0 ? (x).c : (x).g)
#define RUN(outs, n_outs, op, ...)                                                                 \
    for (int side_ = 0; side_ < 3; side_++) {                                                      \
        device *dv_ = side_ == 0 ? cpu : gpu;                                                      \
        if (side_ == 2)                                                                            \
            for (int o_ = 0; o_ < (n_outs); o_++)                                                  \
                out_rerun_prepare(&(outs)[o_]);                                                    \
        ddp_err e_ = {0};                                                                          \
        double t0_ = 1e3 * monotonic_s();                                                          \
        int rc_ = dv_->ops->op(dv_, side_ ? dtype : TENSOR_F32, __VA_ARGS__, &e_);                 \
        if (side_ > 0) {                                                                           \
            ddp_err se_ = {0};                                                                     \
            die_on(gpu->ops->synchronize(gpu, &se_), &se_, #op);                                   \
            op_time_add(#op, 1e3 * monotonic_s() - t0_);                                           \
        }                                                                                          \
        CHECK(rc_ == 0, "%s on %s: %s", #op, side_ ? "cuda" : "cpu", e_.msg);                      \
    }

/* ---- RMSNorm ------------------------------------------------------------------------------ */

/* residual_rmsnorm_forward: res_out = round_t(a + b) (the float add, exact on both sides), then
 * the CPU's rmsnorm_forward of that stored sum is the reference for norm_out and rstd. res_out is
 * a third buffer, then a itself, then b itself. */
static void test_residual_rmsnorm(int64_t N, int64_t C, const float *ha, buf w)
{
    const size_t n = (size_t)(N * C), rows = (size_t)N;
    char what[128];
    float *hb = host_rand(n, 0, 0.05f, 1), *sum = xmalloc(n * sizeof *sum);
    for (size_t i = 0; i < n; i++)
        sum[i] = round_t(ha[i] + hb[i]);
    buf a_in = buf_new(ha, n, true), b_in = buf_new(hb, n, true);
    for (int where = 0; where < 3; where++) {
        out o[3] = {out_new(where == 1 ? ha : where == 2 ? hb : NULL, n, true), out_new(NULL, n, true),
                    out_new(NULL, rows, false)};
        buf a = where == 1 ? o[0].b : a_in, b = where == 2 ? o[0].b : b_in;
        ddp_err err = {0};
        die_on(cpu->ops->upload(cpu, o[0].b.c, sum, n * sizeof *sum, &err), &err, "upload");
        die_on(cpu->ops->rmsnorm_forward(cpu, TENSOR_F32, o[1].b.c, o[2].b.c, o[0].b.c, w.c, N, C, 1e-5f, &err), &err,
               "cpu rmsnorm_forward");
        for (int run = 0; run < 2; run++) {
            if (run == 1)
                for (int i = 0; i < 3; i++)
                    out_rerun_prepare(&o[i]);
            if (where)
                (where == 1 ? &a : &b)->g = o[0].b.g;
            die_on(gpu->ops->residual_rmsnorm_forward(gpu, dtype, o[0].b.g, o[1].b.g, o[2].b.g, a.g, b.g, w.g, N, C,
                                                      1e-5f, &err), &err, "cuda residual_rmsnorm_forward");
            die_on(gpu->ops->synchronize(gpu, &err), &err, "synchronize");
        }
        const char *names[] = {"res_out", "norm_out", "rstd"}, *places[] = {"", " over a", " over b"};
        for (int i = 0; i < 3; i++) {
            snprintf(what, sizeof what, "residual_rmsnorm_forward %s%s N=%lld C=%lld", names[i], places[where],
                     (long long)N, (long long)C);
            out_check(&o[i], what, i == 0 ? 0 : ROUND_ONCE, i == 0 ? 0 : 1e-12, NULL);
        }
    }
    buf_free(a_in);
    buf_free(b_in);
    free(hb);
    free(sum);
}

static void test_rmsnorm(void)
{
    /* N, C, offset: C = 1, 5, 31 and 33 (not whole warps), 1025 and 3000 (longer than a block),
     * 1100 rows (past both grid caps, 18 chunks of dw's sums), a mean square far from 1. Row path
     * (aligned): C = 40, 96 (one warp), 2048 (a pack a thread), 3000 (a last warp part-filled; two
     * packs a thread in float), 8192 (2 packs a thread in bf16, 4 in float), 12288 (3 in bf16;
     * too long for it in float); 200 rows of 40 pass the grid cap with 4 chunks of dw's sums. */
    const struct { int64_t N, C; float offset; } shapes[] = {
        {1, 1, 0},      {3, 5, 2},      {7, 33, 0},    {130, 31, 5},  {1100, 5, 0},  {5, 1025, -3},
        {2, 3000, 0},   {70, 96, 0},    {200, 40, 1},  {5, 2048, 0},  {3, 8192, 0},  {2, 12288, 1}};
    char what[128];
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t N = shapes[s].N, C = shapes[s].C;
        size_t n = (size_t)(N * C), c = (size_t)C, rows = (size_t)N;
        float *hx = host_rand(n, shapes[s].offset, 0.05f, 2), *hw = host_rand(c, 1, 0, 0.5f);
        float *hdout = host_rand(n, 0, 0.05f, 1), *hdinp = host_rand(n, 0, 0.05f, 1);
        float *hdw = host_rand(c, 0, 0.05f, 1);
        buf x = buf_new(hx, n, true), w = buf_new(hw, c, true), dout = buf_new(hdout, n, true);

        out fwd[2] = {out_new(NULL, n, true), out_new(NULL, rows, false)};
        RUN(fwd, 2, rmsnorm_forward, S(fwd[0].b), S(fwd[1].b), S(x), S(w), N, C, 1e-5f);
        /* the backward reads the CPU forward's rstd on both devices */
        float *hrstd = xmalloc(rows * sizeof *hrstd);
        download(cpu, hrstd, fwd[1].b.c, rows * sizeof *hrstd);
        buf rstd = buf_new(hrstd, rows, false);
        const char *names[] = {"out", "rstd"};
        for (int i = 0; i < 2; i++) {
            snprintf(what, sizeof what, "rmsnorm_forward %s N=%lld C=%lld", names[i], (long long)N, (long long)C);
            out_check(&fwd[i], what, ROUND_ONCE, 1e-12, NULL);
        }
        test_residual_rmsnorm(N, C, hx, w);

        /* "+=" onto random values; floors as layernorm_backward's */
        out bwd[2] = {out_new(hdinp, n, true), out_new(hdw, c, false)};
        RUN(bwd, 2, rmsnorm_backward, S(bwd[0].b), S(bwd[1].b), S(dout), S(x), S(w), S(rstd), N, C);
        snprintf(what, sizeof what, "rmsnorm_backward dinp N=%lld C=%lld", (long long)N, (long long)C);
        out_check(&bwd[0], what, ROUND_ONCE, 1e-9, NULL);
        snprintf(what, sizeof what, "rmsnorm_backward dw N=%lld C=%lld", (long long)N, (long long)C);
        out_check(&bwd[1], what, ROUND_ONCE, 1e-8, NULL);

        buf_free(x);
        buf_free(w);
        buf_free(dout);
        buf_free(rstd);
        free(hx);
        free(hw);
        free(hdout);
        free(hdinp);
        free(hdw);
        free(hrstd);
    }
}

/* ---- RoPE --------------------------------------------------------------------------------- */

/* Packed rows' doc_start [B·T] (host): documents of lengths 3, 1, 9, 20, ... one after another
 * along the rows, the list going on from row to row; a document that would cross a row's end is
 * cut there. */
static int32_t *rope_docs(int64_t B, int64_t T)
{
    static const int32_t lens[] = {3, 1, 9, 20};
    int32_t *docs = xmalloc((size_t)(B * T) * sizeof *docs);
    size_t k = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; k++) {
            const int64_t len = lens[k % 4] < T - t ? lens[k % 4] : T - t;
            for (int64_t i = t; i < t + len; i++)
                docs[b * T + i] = (int32_t)t;
            t += len;
        }
    return docs;
}

static void test_rope(void)
{
    /* B, T, heads, hs, padding columns: one pair; several heads with padding; hs = 6 (3 pairs,
     * not a power of two); 4·64·6·16 = 24,576 pairs, past both grid caps; each plain, then packed.
     * Packs where aligned: hs 8 with row stride 32 (float's packs of 4 pairs, bf16's single pairs),
     * hs 16 and 32 (both types' packs) */
    const int64_t shapes[][5] = {{1, 1, 1, 2, 0},  {2, 3, 3, 8, 5},  {3, 17, 5, 6, 7},
                                 {2, 9, 3, 8, 8},  {3, 7, 4, 16, 8}, {4, 64, 6, 32, 16}};
    char what[160];
    for (size_t sp = 0; sp < 2 * sizeof shapes / sizeof shapes[0]; sp++) {
        const size_t s = sp / 2;
        const bool packed = sp % 2;
        int64_t B = shapes[s][0], T = shapes[s][1], H = shapes[s][2], hs = shapes[s][3], ld = H * hs + shapes[s][4];
        size_t n = (size_t)(B * T * ld), half = (size_t)hs / 2, table = (size_t)T * half;
        float *hx = host_rand(n, 0, 0, 2), *hcos = xmalloc(table * sizeof *hcos), *hsin = xmalloc(table * sizeof *hsin);
        for (int64_t t = 0; t < T; t++)
            for (size_t j = 0; j < half; j++) {
                double angle = (double)t * pow(10000.0, -2.0 * (double)j / (double)hs);
                hcos[(size_t)t * half + j] = (float)cos(angle), hsin[(size_t)t * half + j] = (float)sin(angle);
            }
        buf cs = buf_new(hcos, table, false), sn = buf_new(hsin, table, false), ds = {NULL, NULL, 0, false};
        if (packed) {
            int32_t *hds = rope_docs(B, T);
            const size_t bytes = (size_t)(B * T) * sizeof *hds;
            ds = (buf){dev_alloc_upload(cpu, hds, bytes, sizeof *hds), dev_alloc_upload(gpu, hds, bytes, sizeof *hds),
                       (size_t)(B * T), false};
            free(hds);
        }
        out fx[1] = {out_new(hx, n, true)};
        RUN(fx, 1, rope_forward, S(fx[0].b), ld, B, T, H, hs, S(cs), S(sn), S(ds));
        snprintf(what, sizeof what, "rope_forward B=%lld T=%lld heads=%lld hs=%lld ld=%lld%s", (long long)B,
                 (long long)T, (long long)H, (long long)hs, (long long)ld, packed ? " packed" : "");
        out_check(&fx[0], what, 0, 0, NULL);
        out bx[1] = {out_new(hx, n, true)};
        RUN(bx, 1, rope_backward, S(bx[0].b), ld, B, T, H, hs, S(cs), S(sn), S(ds));
        snprintf(what, sizeof what, "rope_backward B=%lld T=%lld heads=%lld hs=%lld ld=%lld%s", (long long)B,
                 (long long)T, (long long)H, (long long)hs, (long long)ld, packed ? " packed" : "");
        out_check(&bx[0], what, 0, 0, NULL);
        buf_free(cs);
        buf_free(sn);
        if (packed)
            buf_free(ds);
        free(hx);
        free(hcos);
        free(hsin);
    }
}

/* ---- SwiGLU ------------------------------------------------------------------------------- */

static void test_swiglu(void)
{
    /* N, F: 70·300 = 21,000 outputs pass both grid caps; packs where aligned: F 300 in float, 64,
     * 200 and 104 in both types */
    const int64_t shapes[][2] = {{1, 1}, {3, 7}, {13, 37}, {70, 300}, {9, 64}, {40, 200}, {300, 104}};
    char what[128];
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t N = shapes[s][0], F = shapes[s][1];
        size_t n = (size_t)(N * F);
        float *hgu = host_rand(2 * n, 0, 0, 6), *hdh = host_rand(n, 0, 0.05f, 1);
        double *tol = xmalloc(2 * n * sizeof *tol);
        for (int64_t r = 0; r < N; r++)
            for (int64_t j = 0; j < F; j++) {
                size_t ig = (size_t)(r * 2 * F + j), iu = ig + (size_t)F;
                double g = hgu[ig], sg = 1 / (1 + exp(-g)), sc = 1 / (1 + exp(g));
                double dy = hdh[r * F + j];
                tol[ig] = 24 * ROUND_ONCE * fabs(dy * hgu[iu]) * sg * (1 + fabs(g) * sc);
                tol[iu] = 12 * ROUND_ONCE * fabs(dy * g * sg);
            }
        buf gu = buf_new(hgu, 2 * n, true), dh = buf_new(hdh, n, true);
        out h[1] = {out_new(NULL, n, true)};
        RUN(h, 1, swiglu_forward, S(h[0].b), S(gu), N, F);
        snprintf(what, sizeof what, "swiglu_forward N=%lld F=%lld", (long long)N, (long long)F);
        out_check(&h[0], what, 12 * ROUND_ONCE, 0, NULL);
        out dgu[1] = {out_new(NULL, 2 * n, true)};
        RUN(dgu, 1, swiglu_backward, S(dgu[0].b), S(dh), S(gu), N, F);
        snprintf(what, sizeof what, "swiglu_backward N=%lld F=%lld", (long long)N, (long long)F);
        out_check(&dgu[0], what, 0, 0, tol);
        /* in place over gate_up: each element's gradient lands where it was read */
        out inplace[1] = {out_new(hgu, 2 * n, true)};
        RUN(inplace, 1, swiglu_backward, S(inplace[0].b), S(dh), S(inplace[0].b), N, F);
        snprintf(what, sizeof what, "swiglu_backward over gate_up N=%lld F=%lld", (long long)N, (long long)F);
        out_check(&inplace[0], what, 0, 0, tol);
        buf_free(gu);
        buf_free(dh);
        free(hgu);
        free(hdh);
        free(tol);
    }
}

static void run_f32(void)
{
    dtype = TENSOR_F32;
    test_rmsnorm();
    test_rope();
    test_swiglu();
}

static void run_bf16(void)
{
    dtype = TENSOR_BF16;
    test_rmsnorm();
    test_rope();
    test_swiglu();
}

int main(void)
{
    const pair_group groups[] = {{"llama f32", run_f32}, {"llama bf16", run_bf16}};
    return pair_main("test_cuda_llama", 8, groups, sizeof groups / sizeof groups[0], 2);
}
