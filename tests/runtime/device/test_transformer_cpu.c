/* test_transformer_cpu.c — the CPU backend's transformer ops (kernels/embedding_cpu.c,
 * layernorm_cpu.c), its GEMM, tanh-GELU, residual add and padded classifier against straightforward
 * double-precision references written here, on random inputs with awkward shapes (sizes 1,
 * non-multiples of 4/8/16, C not a power of two; the embeddings also in packed rows, where a
 * position is its offset in its document). Every backward op is also checked against a
 * central finite difference of its forward reference, the transformer ops and the classifier for
 * identical bits with 1 and 2 OpenMP threads, and the classifier for in-place == out-of-place and
 * zero padding gradients.
 *
 * Tolerances come from float32 rounding (u = FLT_EPSILON/2 per operation, error bounds next to
 * each check), never from observed errors. A failure names the op and its worst element and
 * the exit status is 1; TEST_VERBOSE=1 prints every check's worst error/tolerance ratio.
 * Every op is called through the CPU device's checked ops table, as the model calls it. */
#include "tests/runtime/device/attention_ref.h"
#include "tests/runtime/device/cpu_ref.h"

static int32_t *tokens_new(size_t n, int64_t V)
{
    int32_t *t = xmalloc(n * sizeof *t);
    for (size_t i = 0; i < n; i++)
        t[i] = (int32_t)irand(V);
    return t;
}

/* x[r·ld + c] must be +0.0 for c >= first (vocabulary padding). */
static void check_zero_cols(const char *op, const char *what, const float *x, int64_t rows, int64_t ld,
                            int64_t first)
{
    n_checks++;
    static const float zero = 0.0f;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = first; c < ld; c++)
            if (memcmp(&x[r * ld + c], &zero, sizeof zero) != 0) {
                fail(op, "%s: row %lld col %lld is %.9g, must be exactly 0", what, (long long)r, (long long)c,
                     (double)x[r * ld + c]);
                return;
            }
}

/* ---- embeddings ------------------------------------------------------------------------------ */

/* ds, de: packed rows' document bounds (attn_shape's doc_start, doc_end), or NULL */
typedef struct {
    int64_t B, T, C, V;
    int32_t *tok;
    float *wte, *wpe, *out, *dout, *dwte, *dwpe;
    int32_t *ds, *de;
} emb_case;
typedef struct { const emb_case *e; double *wte, *wpe, *dout; } emb_fd;

static emb_case emb_make(int64_t B, int64_t T, int64_t C, int64_t V)
{
    size_t n = (size_t)(B * T * C);
    return (emb_case){B, T, C, V, tokens_new((size_t)(B * T), V), frand((size_t)(V * C), -1, 1),
                      frand((size_t)(T * C), -1, 1), fnan(n), frand(n, -1, 1), frand((size_t)(V * C), -1, 1),
                      frand((size_t)(T * C), -1, 1), NULL, NULL};
}
/* Packs e's rows with documents of the lengths lens (ended by a 0; attn_docs_fill). */
static void emb_pack(emb_case *e, const int32_t *lens)
{
    e->ds = xmalloc((size_t)(e->B * e->T) * sizeof *e->ds), e->de = xmalloc((size_t)(e->B * e->T) * sizeof *e->de);
    attn_docs_fill(&(attn_case){.B = e->B, .T = e->T, .docs = lens}, e->ds, e->de);
}
/* Position bt's row of the position table: its offset in its row, or in its document. */
static int64_t emb_pos(const emb_case *e, int64_t bt) { return bt % e->T - (e->ds ? e->ds[bt] : 0); }
static void emb_run(void *p)
{
    emb_case *e = p;
    DEV(embedding_forward, TENSOR_F32, e->out, e->tok, e->wte, e->wpe, e->ds, e->B, e->T, e->C);
    DEV(embedding_backward, TENSOR_F32, e->dwte, e->dwpe, e->dout, e->tok, e->ds, e->de, e->B, e->T, e->C, e->V);
}
static double emb_loss(const void *p)
{
    const emb_fd *f = p;
    const emb_case *e = f->e;
    double L = 0.0;
    for (int64_t bt = 0; bt < e->B * e->T; bt++)
        for (int64_t c = 0; c < e->C; c++)
            L += f->dout[bt * e->C + c] * (f->wte[e->tok[bt] * e->C + c] + f->wpe[emb_pos(e, bt) * e->C + c]);
    return L;
}

/* lens: packed rows with documents of those lengths (emb_pack), or NULL */
static void test_embedding(int64_t B, int64_t T, int64_t C, int64_t V, bool zero_init, const int32_t *lens)
{
    emb_case e = emb_make(B, T, C, V);
    if (lens)
        emb_pack(&e, lens);
    size_t n = (size_t)(B * T * C), nte = (size_t)(V * C), npe = (size_t)(T * C);
    if (zero_init) {
        memset(e.dwte, 0, nte * sizeof(float));
        memset(e.dwpe, 0, npe * sizeof(float));
    }
    float *dwte0 = fdup(e.dwte, nte);
    double *ref = dzero(n), *bnd = dzero(n), *rte = todbl(e.dwte, nte), *ate = dzero(nte);
    double *rpe = todbl(e.dwpe, npe), *ape = dzero(npe), *bte = dzero(nte), *bpe = dzero(npe), *cnt = dzero((size_t)V);
    for (size_t i = 0; i < nte; i++)
        ate[i] = fabs(rte[i]);
    for (size_t i = 0; i < npe; i++)
        ape[i] = fabs(rpe[i]);
    emb_run(&e);
    for (int64_t bt = 0; bt < B * T; bt++) {
        int64_t t = emb_pos(&e, bt), tok = e.tok[bt];
        cnt[tok]++;
        for (int64_t c = 0; c < C; c++) {
            double d = e.dout[bt * C + c];
            ref[bt * C + c] = (double)e.wte[tok * C + c] + (double)e.wpe[t * C + c];
            bnd[bt * C + c] = EPS / 2 * fabs(ref[bt * C + c]); /* one correctly rounded addition */
            rte[tok * C + c] += d, ate[tok * C + c] += fabs(d), rpe[t * C + c] += d, ape[t * C + c] += fabs(d);
        }
    }
    /* dwte: a float sum of K terms in order errs by <= (K-1)·u·Σ|terms| (K-1 <= count);
     * dwpe: a double sum of at most B·T + 1 floats (exact but for ~B·T·DBL_EPSILON) rounded once:
     * u·|sum|. */
    for (size_t i = 0; i < nte; i++)
        bte[i] = (cnt[i / (size_t)C] + 1) * EPS / 2 * ate[i];
    for (size_t i = 0; i < npe; i++)
        bpe[i] = EPS / 2 * fabs(rpe[i]) + (double)(B * T + 1) * DBL_EPSILON * ape[i];
    check_close("embedding_forward", "out", e.out, ref, bnd, n);
    check_close("embedding_backward", "dwte", e.dwte, rte, bte, nte);
    /* the documented order (positions in (b,t) order, float adds) replayed bit for bit */
    for (int64_t bt = 0; bt < B * T; bt++)
        for (int64_t c = 0; c < C; c++)
            dwte0[e.tok[bt] * C + c] += e.dout[bt * C + c];
    check_bits("embedding_backward", "dwte vs in-order float accumulation", dwte0, e.dwte, nte);
    check_close("embedding_backward", "dwpe", e.dwpe, rpe, bpe, npe);
    if (zero_init) {
        emb_fd f = {&e, todbl(e.wte, nte), todbl(e.wpe, npe), todbl(e.dout, n)};
        fd_check("embedding_backward", "dwte", emb_loss, &f, f.wte, nte, e.dwte, bte);
        fd_check("embedding_backward", "dwpe", emb_loss, &f, f.wpe, npe, e.dwpe, bpe);
    }
    arena_free();
}

/* No position table (wpe, dwpe NULL: the Llama's): out is wte's rows exactly, and dwte gets the
 * same bits as with a position table, which nothing else is written for. */
static void test_embedding_no_positions(int64_t B, int64_t T, int64_t C, int64_t V)
{
    emb_case e = emb_make(B, T, C, V);
    size_t n = (size_t)(B * T * C), nte = (size_t)(V * C);
    float *dwte0 = fdup(e.dwte, nte), *rows = fdup(e.out, n);
    DEV(embedding_forward, TENSOR_F32, e.out, e.tok, e.wte, NULL, NULL, B, T, C);
    DEV(embedding_backward, TENSOR_F32, e.dwte, NULL, e.dout, e.tok, NULL, NULL, B, T, C, V);
    for (int64_t bt = 0; bt < B * T; bt++)
        memcpy(rows + bt * C, e.wte + e.tok[bt] * C, (size_t)C * sizeof(float));
    check_bits("embedding_forward", "out without wpe vs wte's rows", rows, e.out, n);
    DEV(embedding_backward, TENSOR_F32, dwte0, e.dwpe, e.dout, e.tok, NULL, NULL, B, T, C, V);
    check_bits("embedding_backward", "dwte without dwpe vs with it", dwte0, e.dwte, nte);
    arena_free();
}

/* ---- LayerNorm --------------------------------------------------------------------------------- */

typedef struct { int64_t N, C; float *x, *w, *b, *out, *mean, *rstd, *dout, *dx, *dw, *db; } ln_case;
typedef struct { int64_t N, C; double *x, *w, *b, *dout; } ln_fd;

static ln_case ln_make(int64_t N, int64_t C, double offset)
{
    size_t n = (size_t)(N * C), c = (size_t)C, r = (size_t)N;
    return (ln_case){N, C, frand(n, offset - 1, offset + 1), frand(c, 0.5, 1.5), frand(c, -0.5, 0.5), fnan(n),
                     fnan(r), fnan(r), frand(n, -1, 1), frand(n, -1, 1), frand(c, -1, 1), frand(c, -1, 1)};
}
static void ln_run(void *p)
{
    ln_case *l = p;
    DEV(layernorm_forward, TENSOR_F32, l->out, l->mean, l->rstd, l->x, l->w, l->b, l->N, l->C);
    DEV(layernorm_backward, TENSOR_F32, l->dx, l->dw, l->db, l->dout, l->x, l->w, l->mean, l->rstd, l->N, l->C);
}
static void ln_stats(const double *x, int64_t C, double *m, double *s)
{
    double sum = 0, var = 0;
    for (int64_t c = 0; c < C; c++)
        sum += x[c];
    *m = sum / (double)C;
    for (int64_t c = 0; c < C; c++)
        var += (x[c] - *m) * (x[c] - *m);
    *s = 1.0 / sqrt(var / (double)C + 1e-5);
}
static double ln_loss(const void *p)
{
    const ln_fd *f = p;
    double L = 0, m, s;
    for (int64_t r = 0; r < f->N; r++) {
        ln_stats(f->x + r * f->C, f->C, &m, &s);
        for (int64_t c = 0; c < f->C; c++)
            L += f->dout[r * f->C + c] * ((f->x[r * f->C + c] - m) * s * f->w[c] + f->b[c]);
    }
    return L;
}

/* Bounds (u = EPS/2): x̂ rebuilt from the float-rounded mean/rstd is off by u·(s·|m| + |x̂_c|),
 * E_c below (doubled); the kernels' sums are double (error ~C·1e-16·Σ|terms|, negligible).
 * out = x̂·w + b: E_c·|w| plus up to three float roundings (4u·(|x̂w| + |b|)). mean: one rounding
 * to float (u·|m|) plus the double sum's error (< DBL_EPSILON·Σ|x|). dinp: E pushed through
 * s·(dn - mean(dn) - x̂·mean(dn·x̂)) to first order, doubled, plus u·|g| for rstd's rounding and
 * the float accumulation. dw = Σ dout·x̂: 2·Σ|dout|·E plus one rounding. db = Σ dout, a double
 * sum of N + 1 floats (error < (N+1)·DBL_EPSILON·Σ|terms|) rounded once: u·|db|. */
static void test_layernorm(int64_t N, int64_t C, double offset, bool zero_init)
{
    ln_case l = ln_make(N, C, offset);
    size_t n = (size_t)(N * C);
    if (zero_init)
        memset(l.dx, 0, n * 4), memset(l.dw, 0, (size_t)C * 4), memset(l.db, 0, (size_t)C * 4);
    double *rout = dzero(n), *bout = dzero(n), *rdx = todbl(l.dx, n), *bdx = dzero(n), *rdw = todbl(l.dw, (size_t)C);
    double *rdb = todbl(l.db, (size_t)C), *bdw = dzero((size_t)C), *bdb = dzero((size_t)C), *x = todbl(l.x, n);
    double *rm = dzero((size_t)N), *rs = dzero((size_t)N), *bm = dzero((size_t)N), *bs = dzero((size_t)N);
    double *xh = dzero((size_t)C), *E = dzero((size_t)C);
    for (int64_t c = 0; c < C; c++)
        bdb[c] = fabs(rdb[c]); /* Σ|terms| of db, starting with its initial value */
    ln_run(&l);
    for (int64_t r = 0; r < N; r++) {
        double m, s, sum_dn = 0, sum_dnx = 0, sum_dnE = 0, ax = 0;
        ln_stats(x + r * C, C, &m, &s);
        for (int64_t c = 0; c < C; c++) {
            double d = l.dout[r * C + c], dn = d * l.w[c];
            xh[c] = (x[r * C + c] - m) * s, E[c] = EPS * (s * fabs(m) + fabs(xh[c]));
            sum_dn += dn, sum_dnx += dn * xh[c], sum_dnE += fabs(dn) * E[c], ax += fabs(x[r * C + c]);
            rout[r * C + c] = xh[c] * l.w[c] + l.b[c];
            bout[r * C + c] = 2 * EPS * (fabs(xh[c] * l.w[c]) + fabs(l.b[c])) + l.w[c] * E[c];
            rdw[c] += d * xh[c], bdw[c] += 2 * fabs(d) * E[c], rdb[c] += d, bdb[c] += fabs(d);
        }
        rm[r] = m, rs[r] = s, bm[r] = EPS / 2 * fabs(m) + DBL_EPSILON * ax;
        bs[r] = EPS / 2 * s * (1 + 1e-6); /* one rounding to float; the double variance is ~exact */
        double A = sum_dn / (double)C, Bm = sum_dnx / (double)C, BE = sum_dnE / (double)C;
        for (int64_t c = 0; c < C; c++) {
            double g = s * ((double)l.dout[r * C + c] * l.w[c] - A - xh[c] * Bm);
            rdx[r * C + c] += g;
            bdx[r * C + c] = 2 * (EPS * fabs(g) + s * (E[c] * fabs(Bm) + fabs(xh[c]) * BE)) + EPS * fabs(rdx[r * C + c]);
        }
    }
    for (int64_t c = 0; c < C; c++) {
        bdw[c] += EPS * fabs(rdw[c]);
        bdb[c] = EPS / 2 * fabs(rdb[c]) + (double)(N + 1) * DBL_EPSILON * bdb[c];
    }
    check_close("layernorm_forward", "out", l.out, rout, bout, n);
    check_close("layernorm_forward", "mean", l.mean, rm, bm, (size_t)N);
    check_close("layernorm_forward", "rstd", l.rstd, rs, bs, (size_t)N);
    check_close("layernorm_backward", "dinp", l.dx, rdx, bdx, n);
    check_close("layernorm_backward", "dw", l.dw, rdw, bdw, (size_t)C);
    check_close("layernorm_backward", "db", l.db, rdb, bdb, (size_t)C);
    if (zero_init) {
        ln_fd f = {N, C, x, todbl(l.w, (size_t)C), todbl(l.b, (size_t)C), todbl(l.dout, n)};
        fd_check("layernorm_backward", "dinp", ln_loss, &f, f.x, n, l.dx, bdx);
        fd_check("layernorm_backward", "dw", ln_loss, &f, f.w, (size_t)C, l.dw, bdw);
        fd_check("layernorm_backward", "db", ln_loss, &f, f.b, (size_t)C, l.db, bdb);
    }
    arena_free();
}

/* residual_layernorm_forward is the add op followed by layernorm_forward (whose numerics
 * test_layernorm checks): the same bits for res_out and every LayerNorm output, with res_out a
 * separate buffer, a itself or b itself; and the same at 1 and 2 threads. */
typedef struct { int64_t N, C; float *a, *b, *w, *bias, *res, *out, *mean, *rstd; } res_case;
static void res_run(void *p)
{
    res_case *r = p;
    DEV(residual_layernorm_forward, TENSOR_F32, r->res, r->out, r->mean, r->rstd, r->a, r->b, r->w, r->bias, r->N,
        r->C);
}
static void test_residual_layernorm(int64_t N, int64_t C)
{
    size_t n = (size_t)(N * C), rows = (size_t)N;
    float *a = frand(n, -2, 2), *b = frand(n, -1, 3), *w = frand((size_t)C, 0.5, 1.5), *bias = frand((size_t)C, -1, 1);
    float *sum = fnan(n), *out = fnan(n), *mean = fnan(rows), *rstd = fnan(rows);
    DEV(add, TENSOR_F32, sum, a, b, n);
    DEV(layernorm_forward, TENSOR_F32, out, mean, rstd, sum, w, bias, N, C);
    for (int where = 0; where < 3; where++) {
        res_case r = {N, C, fdup(a, n), fdup(b, n), w, bias, fnan(n), fnan(n), fnan(rows), fnan(rows)};
        if (where)
            r.res = where == 1 ? r.a : r.b;
        res_run(&r);
        const char *what = where == 0 ? "separate res_out" : where == 1 ? "res_out over a" : "res_out over b";
        check_bits("residual_layernorm_forward", what, r.res, sum, n);
        check_bits("residual_layernorm_forward", what, r.out, out, n);
        check_bits("residual_layernorm_forward", what, r.mean, mean, rows);
        check_bits("residual_layernorm_forward", what, r.rstd, rstd, rows);
        if (where == 0)
            check_threads("residual_layernorm_forward", res_run, &r,
                          (span[]){{r.res, n}, {r.out, n}, {r.mean, rows}, {r.rstd, rows}}, 4);
    }
    arena_free();
}

/* ---- GEMM ------------------------------------------------------------------------------------- */

typedef struct { bool ta, tb; int64_t m, n, k, lda, ldb, ldc; float alpha, beta, *a, *b, *c; } gemm_case;

/* Padded leading dimensions; C's padding must stay untouched. */
static gemm_case gemm_make(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, float beta, int64_t pad)
{
    gemm_case g = {ta, tb, m, n, k, (ta ? m : k) + pad, (tb ? k : n) + pad, n + pad, alpha, beta, NULL, NULL, NULL};
    g.a = frand((size_t)((ta ? k : m) * g.lda), -1, 1), g.b = frand((size_t)((tb ? n : k) * g.ldb), -1, 1);
    g.c = frand((size_t)(m * g.ldc), -1, 1);
    for (int64_t i = 0; i < m * g.ldc; i++) {
        if (i % g.ldc >= n)
            g.c[i] = 777.0f; /* padding: must stay bit-unchanged */
        else if (beta == 0.0f)
            g.c[i] = NAN; /* beta 0 must overwrite, NaN included */
    }
    return g;
}

/* A sum of k products errs by <= γ_k·Σ|a·b| ≈ k·u·Σ|a·b| in any order; alpha and beta·C add two
 * roundings: (k + 2)·EPS·(|alpha|·Σ|a·b| + |beta·c|) has a factor 2 of margin. In C's padding the
 * bound is 0: it must be bit-unchanged. */
static void test_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, float beta, int64_t pad,
                      bool nan_a)
{
    gemm_case g = gemm_make(ta, tb, m, n, k, alpha, beta, pad);
    if (nan_a) /* alpha == 0 or k == 0: A must not be read */
        for (int64_t i = 0; i < (ta ? k : m) * g.lda; i++)
            g.a[i] = NAN;
    size_t nc = (size_t)(m * g.ldc);
    double *ref = todbl(g.c, nc), *bnd = dzero(nc);
    DEV(gemm, TENSOR_F32, TENSOR_F32, ta, tb, m, n, k, alpha, g.a, g.lda, g.b, g.ldb, beta, g.c, g.ldc);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0, as = 0;
            for (int64_t p = 0; p < k && alpha != 0.0f; p++) {
                double x = (ta ? g.a[p * g.lda + i] : g.a[i * g.lda + p]) *
                           (double)(tb ? g.b[j * g.ldb + p] : g.b[p * g.ldb + j]);
                s += x, as += fabs(x);
            }
            double *r = &ref[i * g.ldc + j], c0 = beta == 0.0f ? 0.0 : beta * *r;
            bnd[r - ref] = (double)(k + 2) * EPS * (fabs(alpha) * as + fabs(c0));
            *r = alpha * s + c0;
        }
    char what[96];
    snprintf(what, sizeof what, "C (ta=%d tb=%d m=%lld n=%lld k=%lld alpha=%g beta=%g pad=%lld)", ta, tb,
             (long long)m, (long long)n, (long long)k, (double)alpha, (double)beta, (long long)pad);
    check_close("gemm", what, g.c, ref, bnd, nc);
    arena_free();
}

/* ---- GELU, add ----------------------------------------------------------------------------------- */

/* 0.5·(1 + tanh(u)) = σ(2u): the same function, and in this form double keeps its relative
 * accuracy in the tail (x < -9) where 1 + tanh(u) rounds to 0 even in double. */
static double sigmoid(double z) { return 1.0 / (1.0 + exp(-z)); }
static double gelu_u(double x) { return sqrt(2 / M_PI) * (x + 0.044715 * x * x * x); }
static double gelu_ref(double x) { return x * sigmoid(2 * gelu_u(x)); }
typedef struct { size_t n; double *x, *dy; } gelu_fd;
static double gelu_loss(const void *p)
{
    const gelu_fd *f = p;
    double L = 0;
    for (size_t i = 0; i < f->n; i++)
        L += f->dy[i] * gelu_ref(f->x[i]);
    return L;
}

/* The kernel evaluates x·σ(z), z = 2·sqrt(2/π)·(x + 0.044715x³): z carries <= 7u relative error
 * (float constants, x³, sums of same-sign terms), so σ(z) and the product with x carry
 * <= u·(14|z| + 6): bound EPS·(7|z| + 3)·|y|. dx = dy·(s + t), s = σ(z), t = x·σ'(z)·z': each
 * part <= u·(14|z| + 17) relative, plus the final sum and product: EPS·(7|z| + 9)·(|s| + |t|)·|dy|.
 * In the tail σ(z) underflows: a subnormal carries an absolute error up to FLT_TRUE_MIN, then
 * multiplied by x (and z'), hence the FLT_TRUE_MIN terms. */
static void test_gelu(size_t n)
{
    float *x = xmalloc(n * sizeof *x), *y = fnan(n), *dy = frand(n, -1, 1), *dx = fnan(n);
    static const float special[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 100.0f, -100.0f, 9.5f, -9.5f, 1e20f, -1e20f};
    for (size_t i = 0; i < n; i++)
        x[i] = i < sizeof special / sizeof *special ? special[i] : (float)(-12 + 24 * urand());
    double *ry = dzero(n), *by = dzero(n), *rdx = dzero(n), *bdx = dzero(n);
    DEV(act_forward, TENSOR_F32, ACT_GELU_TANH, x, y, n);
    DEV(act_backward, TENSOR_F32, ACT_GELU_TANH, x, dy, dx, n);
    for (size_t i = 0; i < n; i++) {
        double xi = x[i], u = gelu_u(xi), s = sigmoid(2 * u);
        double t = xi * s * sigmoid(-2 * u) * 2 * sqrt(2 / M_PI) * (1 + 3 * 0.044715 * xi * xi);
        double dz = 2 * sqrt(2 / M_PI) * (1 + 3 * 0.044715 * xi * xi);
        ry[i] = gelu_ref(xi), rdx[i] = dy[i] * (s + t);
        by[i] = EPS * (7 * fabs(2 * u) + 3) * fabs(ry[i]) + 2 * fabs(xi) * FLT_TRUE_MIN;
        bdx[i] = (EPS * (7 * fabs(2 * u) + 9) * (fabs(s) + fabs(t)) + 2 * (1 + fabs(xi * dz)) * FLT_TRUE_MIN) *
                 fabs((double)dy[i]);
    }
    check_close("gelu_tanh_forward", "y", y, ry, by, n);
    check_close("gelu_tanh_backward", "dx", dx, rdx, bdx, n);
    /* the huge specials would swamp the loss's double sum: give them no weight for this check */
    for (size_t i = 0; i < n; i++)
        dy[i] = fabsf(x[i]) > 20.0f ? 0.0f : dy[i];
    DEV(act_backward, TENSOR_F32, ACT_GELU_TANH, x, dy, dx, n);
    gelu_fd f = {n, todbl(x, n), todbl(dy, n)};
    fd_check("gelu_tanh_backward", "dx", gelu_loss, &f, f.x, n, dx, bdx);
    arena_free();
}

/* One correctly rounded float addition per element: within u·|a + b|; aliased calls bit-equal. */
static void test_add(size_t n)
{
    float *a = frand(n, -1, 1), *b = frand(n, -1e3, 1e3), *out = fnan(n), *o2 = fdup(a, n), *o3 = fdup(b, n);
    double *ref = dzero(n), *bnd = dzero(n);
    DEV(add, TENSOR_F32, out, a, b, n);
    DEV(add, TENSOR_F32, o2, o2, b, n); /* out == a */
    DEV(add, TENSOR_F32, o3, a, o3, n); /* out == b */
    for (size_t i = 0; i < n; i++)
        ref[i] = (double)a[i] + b[i], bnd[i] = EPS / 2 * fabs(ref[i]);
    check_close("add", "out", out, ref, bnd, n);
    check_bits("add", "out aliasing a vs separate out", o2, out, n);
    check_bits("add", "out aliasing b vs separate out", o3, out, n);
    memcpy(o2, a, n * 4);
    DEV(add, TENSOR_F32, o2, o2, o2, n); /* out == a == b: exact doubling */
    for (size_t i = 0; i < n; i++)
        ref[i] = 2.0 * a[i], bnd[i] = 0;
    check_close("add", "out aliasing a and b", o2, ref, bnd, n);
    arena_free();
}

/* ---- fused classifier ---------------------------------------------------------------------------- */

typedef struct { int64_t rows, V, ld; float gs, *l, *dl, *dl_inplace, stats[3][2]; int32_t *tgt; } xent_case;
typedef struct { const xent_case *x; double *l; } xent_fd;

/* Logit padding holds NaN and 1e30 (never to be read); rows 0 and 1 tie at columns 1 and 3. */
static xent_case xent_make(int64_t rows, int64_t V, int64_t ld, float gs)
{
    size_t n = (size_t)(rows * ld);
    xent_case x = {rows, V, ld, gs, frand(n, -5, 5), fnan(n), NULL, {{1.5f, 2}, {1.5f, 2}, {1.5f, 2}},
                   tokens_new((size_t)rows, V)};
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = V; c < ld; c++)
            x.l[r * ld + c] = (c % 2) ? NAN : 1e30f;
    for (int64_t r = 0; r < 2 && r < rows && V >= 4; r++) {
        x.l[r * ld + 1] = x.l[r * ld + 3] = 7.0f;
        x.tgt[r] = r == 0 ? 1 : 3; /* row 0 correct (first index wins), row 1 not */
    }
    x.dl_inplace = fdup(x.l, n);
    return x;
}
static void xent_run(void *p)
{
    xent_case *x = p;
    DEV(softmax_xent, TENSOR_F32, x->l, x->ld, x->tgt, x->rows, x->V, x->gs, x->dl, x->stats[0]);
    DEV(softmax_xent, TENSOR_F32, x->dl_inplace, x->ld, x->tgt, x->rows, x->V, x->gs, x->dl_inplace, x->stats[1]);
    DEV(softmax_xent, TENSOR_F32, x->l, x->ld, x->tgt, x->rows, x->V, x->gs, NULL, x->stats[2]);
}
static double xent_loss(const void *p)
{
    const xent_fd *f = p;
    const xent_case *x = f->x;
    double L = 0;
    for (int64_t r = 0; r < x->rows; r++) {
        const double *l = f->l + r * x->ld;
        double mx = -INFINITY, sum = 0;
        for (int64_t c = 0; c < x->V; c++)
            mx = fmax(mx, l[c]);
        for (int64_t c = 0; c < x->V; c++)
            sum += exp(l[c] - mx);
        L += x->gs * (mx + log(sum) - l[x->tgt[r]]);
    }
    return L;
}

static void xent_check_bad_target(xent_case *x)
{
    const char *op = "softmax_xent";
    int64_t r = x->rows / 2;
    int32_t saved = x->tgt[r];
    float *before = fdup(x->dl_inplace, (size_t)(x->rows * x->ld)), loss = x->stats[1][0], corr = x->stats[1][1];
    for (int k = 0; k < 2; k++) {
        x->tgt[r] = k == 0 ? (int32_t)x->V : XENT_NO_TARGET - 1; /* -1 is XENT_NO_TARGET, a valid label */
        ddp_err e = {0};
        int rc = dev->ops->softmax_xent(dev, TENSOR_F32, x->dl_inplace, x->ld, x->tgt, x->rows, x->V, x->gs, x->dl_inplace,
                                        x->stats[1], &e);
        char want[64];
        snprintf(want, sizeof want, "row %lld has label %d", (long long)r, (int)x->tgt[r]);
        n_checks++;
        if (rc == 0 || !strstr(e.msg, want) || x->stats[1][0] != loss || x->stats[1][1] != corr)
            fail(op, "target %d at row %lld: rc %d, message \"%s\" (want \"%s\"), loss %g -> %g, correct %g -> %g",
                 (int)x->tgt[r], (long long)r, rc, e.msg, want, (double)loss, (double)x->stats[1][0], (double)corr,
                 (double)x->stats[1][1]);
    }
    check_bits(op, "in-place buffer after a bad target", before, x->dl_inplace, (size_t)(x->rows * x->ld));
    x->tgt[r] = saved;
}

/* Bounds (u = EPS/2): e_j = expf(l_j - max) errs by u·(|l_j - max| + 2) relative, their double
 * sum by at most the max of that (D), so a row's logsumexp errs by <= u·Σ p_j(|l_j - max| + 2);
 * the loss total adds one rounding. p_j·gs: rel. u·(|l_j - max| + 2 + D + 2); the target's
 * p - 1 adds u·|p - 1|. Both doubled. */
static void test_xent(int64_t rows, int64_t V, int64_t ld, float gs)
{
    const char *op = "softmax_xent";
    xent_case x = xent_make(rows, V, ld, gs);
    size_t n = (size_t)(rows * ld);
    double *rdl = dzero(n), *bdl = dzero(n), total = 0, btotal = 0, *p = dzero((size_t)V);
    int64_t hits = 0;
    xent_run(&x);
    for (int64_t r = 0; r < rows; r++) {
        const float *l = x.l + r * ld;
        int64_t am = 0;
        double mx = l[0], sum = 0, D = 0, wsum = 0;
        for (int64_t c = 1; c < V; c++)
            if (l[c] > l[am])
                am = c, mx = l[c];
        for (int64_t c = 0; c < V; c++)
            sum += (p[c] = exp(l[c] - mx)), D = fmax(D, fabs(l[c] - mx) + 2);
        for (int64_t c = 0; c < V; c++) {
            p[c] /= sum, wsum += p[c] * (fabs(l[c] - mx) + 2);
            double g = p[c] - (c == x.tgt[r]);
            rdl[r * ld + c] = g * gs, bdl[r * ld + c] = EPS * fabs(gs) * (p[c] * (fabs(l[c] - mx) + D + 2) + fabs(g));
        }
        total += mx + log(sum) - l[x.tgt[r]], btotal += EPS * wsum, hits += am == x.tgt[r];
    }
    double rl = 1.5 + total, bl = btotal + EPS * fabs(rl), rc = 2.0 + (double)hits, zero = 0;
    check_close(op, "loss_sum", &x.stats[0][0], &rl, &bl, 1);
    check_close(op, "correct", &x.stats[0][1], &rc, &zero, 1);
    check_close(op, "dlogits", x.dl, rdl, bdl, n);
    check_zero_cols(op, "dlogits padding", x.dl, rows, ld, V);
    check_bits(op, "in-place vs out-of-place dlogits", x.dl, x.dl_inplace, n);
    check_bits(op, "in-place vs out-of-place loss and correct", x.stats[0], x.stats[1], 2);
    check_bits(op, "dlogits NULL vs out-of-place loss and correct", x.stats[0], x.stats[2], 2);
    xent_check_bad_target(&x);
    xent_fd f = {&x, todbl(x.l, n)};
    for (size_t i = 0; i < n; i++)
        if ((int64_t)i % ld >= V) /* the padding is no input of the loss */
            f.l[i] = 0, bdl[i] = 0;
    fd_check(op, "dlogits", xent_loss, &f, f.l, n, x.dl, bdl);
    arena_free();
}

/* ---- determinism: shapes large enough that every op forks ----------------------------------------- */

static void test_threads(void)
{
    emb_case e = emb_make(8, 64, 96, 5), ep = emb_make(8, 64, 96, 5); /* few token ids: long sums into dwte rows */
    check_threads("embedding", emb_run, &e, (span[]){{e.out, 8 * 64 * 96}, {e.dwte, 5 * 96}, {e.dwpe, 64 * 96}}, 3);
    emb_pack(&ep, (const int32_t[]){5, 1, 30, 0});
    check_threads("embedding, packed", emb_run, &ep, (span[]){{ep.out, 8 * 64 * 96}, {ep.dwte, 5 * 96},
                                                             {ep.dwpe, 64 * 96}}, 3);
    ln_case l = ln_make(300, 333, 2.0);
    size_t n = 300 * 333;
    check_threads("layernorm", ln_run, &l, (span[]){{l.out, n}, {l.mean, 300}, {l.rstd, 300}, {l.dx, n}, {l.dw, 333},
                                                   {l.db, 333}}, 6);
    xent_case x = xent_make(300, 1000, 1024, 0.01f);
    check_threads("softmax_xent", xent_run, &x, (span[]){{x.dl, 300 * 1024}, {x.dl_inplace, 300 * 1024}, {x.stats[0], 6}}, 3);
    arena_free();
}

/* Token ids outside [0, V) (a model's check passed over) add nothing to dwte's rows or to the rows
 * before and after it, as on CUDA; the ids inside add their rows as always. */
static void test_embedding_backward_bad_ids(void)
{
    enum { T = 5, C = 3, V = 2 };
    const int32_t tok[T] = {1, -1, V, INT32_MIN, 0};
    float dout[T * C], guarded[(V + 2) * C] = {0}, want[(V + 2) * C] = {0};
    for (int i = 0; i < T * C; i++)
        dout[i] = (float)(i + 1);
    memcpy(want + 2 * C, dout, C * sizeof(float));      /* token 1 at position 0 */
    memcpy(want + C, dout + 4 * C, C * sizeof(float));  /* token 0 at position 4 */
    DEV(embedding_backward, TENSOR_F32, guarded + C, NULL, dout, tok, NULL, NULL, 1, T, C, V);
    check_bits("embedding_backward", "ids outside [0, V) skipped, the rows around dwte untouched", want, guarded,
               (V + 2) * C);
}

int main(void)
{
    double t0 = now_s();
    ddp_err err = {0};
    if (device_cpu_create(&dev, &err)) {
        fprintf(stderr, "test_transformer_cpu: %s\n", err.msg);
        return 2;
    }
    omp_set_num_threads(2);
    test_embedding(2, 7, 37, 5, false, NULL), test_embedding(2, 7, 37, 5, true, NULL);
    test_embedding(1, 1, 13, 3, true, NULL), test_embedding(3, 17, 129, 50, false, NULL);
    /* packed rows: documents of length 1, rows of a batch packed differently, a row of one document */
    const int32_t lens[] = {3, 1, 9, 20, 0}, whole[] = {INT32_MAX, 0};
    test_embedding(3, 17, 37, 5, false, lens), test_embedding(4, 29, 13, 7, true, lens);
    test_embedding(2, 5, 9, 3, true, whole);
    test_embedding_no_positions(2, 7, 37, 5), test_embedding_no_positions(3, 17, 129, 50);
    test_embedding_backward_bad_ids();
    test_layernorm(1, 1, 3.0, true), test_layernorm(1, 37, 0.0, true), test_layernorm(7, 37, 3.0, false);
    test_layernorm(7, 37, 3.0, true), test_layernorm(33, 129, -2.0, true);
    test_residual_layernorm(1, 1), test_residual_layernorm(7, 37), test_residual_layernorm(300, 333);
    for (int t = 0; t < 4; t++) {
        bool ta = t & 1, tb = t & 2;
        test_gemm(ta, tb, 5, 7, 3, 1.0f, 0.0f, 1, false), test_gemm(ta, tb, 13, 1, 17, -0.7f, 0.5f, 3, false);
        test_gemm(ta, tb, 1, 9, 33, 0.125f, 1.0f, 0, false), test_gemm(ta, tb, 37, 37, 10, 0.3f, 0.0f, 0, false);
        test_gemm(ta, tb, 17, 19, 0, 1.0f, 0.5f, 2, true), test_gemm(ta, tb, 17, 19, 23, 0.0f, 0.0f, 2, true);
    }
    test_gemm(true, false, 300, 200, 517, 1.0f, 0.5f, 3, false); /* large enough for the library to thread it */
    test_gelu(1), test_gelu(4099);
    test_add(1), test_add(1001);
    test_xent(1, 1, 128, 1.0f), test_xent(5, 37, 128, 0.7f), test_xent(1, 200, 256, 1.0f);
    test_xent(300, 300, 384, 1.0f / 300);
    test_threads();
    fprintf(stderr, "test_transformer_cpu: %d checks, %d failed (%.2f s)\n", n_checks, n_failed, now_s() - t0);
    free(arena);
    dev->ops->destroy(dev);
    return n_failed ? 1 : 0;
}
