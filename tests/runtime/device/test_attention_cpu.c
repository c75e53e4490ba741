/* test_attention_cpu.c — the CPU backend's attention ops (kernels/attention_cpu.c) against the
 * double-precision reference of attention_ref.h, whose gradients are themselves checked against
 * central finite differences of the loss Σ dout·out.
 *
 * Shapes cover T = 1, T not a multiple of the 64-row block (17, 65, 130, 200), one and several
 * blocks, grouped key/value heads (NKV 1 and NH / 2), odd head sizes, and both layouts: q, k, v as
 * views of one fused tensor (GPT-2's) and as separate tensors with spare columns per row, whose
 * spare columns must come back untouched (they start as a sentinel), while every head column of an
 * output starts as NaN so an element the op skips fails. Results must not depend on the thread
 * count: 1 and 2 OpenMP threads give the same bits.
 *
 * Packed rows (attn_shape's doc_start, doc_end) against the reference masked per document:
 * documents of length 1, documents that start inside a 64-row block and cross into the next, rows
 * of a batch packed differently, GQA, both layouts. New values of q, k and v in one document leave
 * every other document's outputs and gradients with their bits, and rows that are one document
 * each give the bits of plain causal rows.
 *
 * Rows of large scores (400) sum to 1 within float rounding: the forward divides by the row's sum.
 *
 * Tolerance, from float32 rounding (u = 2^-24), not from observed errors: a score is a dot of hs
 * products, scaled by 1/sqrt(hs), so for inputs in [-1, 1] its error is at most hs^1.5·u; the
 * probabilities inherit it (relative, through exp, twice with the log-sum-exp) and every output
 * sums at most T or hs such terms. Each output tensor's largest error, relative to its largest
 * element, must stay under 8·(hs^1.5 + T)·u: the worst case with room, since float errors add up
 * far below it; a misplaced element or an off-by-one mask is off by O(1/T) or more. */
#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>

#include "runtime/base/rng.h"
#include "tests/check.h"
#include "tests/runtime/device/attention_ref.h"

static device *cpu;
static rng test_rng;
static const float SENTINEL = 12345.0f;

/* packed rows' document lengths (attn_docs_fill): starts inside a block, lengths 1, a document
 * across a block boundary; every row one document; every position its own document */
static const int32_t docs_mixed[] = {5, 1, 60, 17, 64, 3, 40, 0}, docs_whole[] = {INT32_MAX, 0};
static const int32_t docs_ones[] = {1, 0};

static const attn_case cases[] = {
    {1, 1, 2, 2, 8, true, 0, NULL},          {2, 17, 2, 1, 16, true, 0, NULL},
    {1, 130, 4, 2, 24, false, 3, NULL},      {2, 65, 3, 3, 32, true, 0, NULL},
    {1, 200, 2, 2, 64, false, 0, NULL},      {1, 65, 4, 1, 16, false, 5, NULL},
    {2, 130, 4, 2, 24, false, 3, docs_mixed}, {3, 65, 2, 1, 16, true, 0, docs_mixed},
    {2, 17, 3, 3, 8, false, 1, docs_mixed},  {1, 70, 2, 2, 8, true, 0, docs_ones},
    {2, 65, 2, 1, 16, false, 2, docs_whole},
};

static void die_on(int rc, const ddp_err *err, const char *what)
{
    if (rc) {
        fprintf(stderr, "FATAL: %s: %s\n", what, err->msg);
        exit(1);
    }
}

static float *random_floats(size_t n)
{
    float *h = malloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++)
        h[i] = rng_uniform(&test_rng, -1.0f, 1.0f);
    return h;
}

/* n floats on the device, from h (NULL: NaN in the heads' columns, the sentinel elsewhere). */
static float *upload(const float *h, size_t n, const attn_shape *s, int64_t ld, int64_t heads)
{
    float *tmp = malloc(n * sizeof *tmp), *p = NULL;
    for (size_t i = 0; i < n; i++)
        tmp[i] = h ? h[i] : ((int64_t)(i % (size_t)ld) < heads * s->hs ? NAN : SENTINEL);
    ddp_err err = {0};
    die_on(cpu->ops->alloc(cpu, n * sizeof(float), (void **)&p, &err), &err, "alloc");
    die_on(cpu->ops->upload(cpu, p, tmp, n * sizeof(float), &err), &err, "upload");
    free(tmp);
    return p;
}

typedef struct run_bufs {
    const attn_layout *l;
    float *qkv, *q, *k, *v, *dout;       /* inputs (q/k/v point into qkv when fused) */
    float *out, *lse, *dq, *dk, *dv;     /* outputs */
} run_bufs;

static void run_ops(const run_bufs *r)
{
    ddp_err err = {0};
    die_on(cpu->ops->attention_forward(cpu, TENSOR_F32, &r->l->s, r->out, r->lse, r->q, r->k, r->v, &err), &err,
           "attention_forward");
    die_on(cpu->ops->attention_backward(cpu, TENSOR_F32, &r->l->s, r->dq, r->dk, r->dv, r->dout, r->out, r->lse, r->q,
                                        r->k, r->v, &err), &err, "attention_backward");
}

/* Largest |x - ref| over the heads' columns, relative to the largest |ref|; and the spare columns
 * must hold the sentinel. */
static double rel_error(const float *x, const double *ref, size_t n, int64_t ld, int64_t width, int *spares_bad)
{
    double worst = 0.0, biggest = 0.0;
    for (size_t i = 0; i < n; i++) {
        if ((int64_t)(i % (size_t)ld) >= width) {
            *spares_bad += x[i] != SENTINEL;
            continue;
        }
        double e = fabs((double)x[i] - ref[i]);
        worst = isnan(x[i]) || e > worst ? (isnan(x[i]) ? INFINITY : e) : worst;
        biggest = fabs(ref[i]) > biggest ? fabs(ref[i]) : biggest;
    }
    return worst / (biggest > 0 ? biggest : 1.0);
}

static float *download(const float *p, size_t n)
{
    float *h = malloc(n * sizeof *h);
    ddp_err err = {0};
    die_on(cpu->ops->download(cpu, h, p, n * sizeof *h, &err), &err, "download");
    return h;
}

/* Loss Σ dout·out of the double reference, for the finite differences. */
static double ref_loss(const attn_shape *s, const int32_t *docs, const float *q, const float *k, const float *v,
                       const float *dout, size_t o_elems, double *out, double *lse, double *P)
{
    attn_ref_forward(s, docs, q, k, v, out, lse, P);
    double L = 0.0;
    for (int64_t b = 0; b < s->B; b++)
        for (int64_t t = 0; t < s->T; t++)
            for (int64_t h = 0; h < s->NH; h++)
                for (int64_t c = 0; c < s->hs; c++) {
                    size_t i = attn_at(s, b, t, s->ld_o, h, c);
                    L += (double)dout[i] * out[i];
                }
    (void)o_elems;
    return L;
}

/* The reference's analytic gradient of a few elements of x (q, k or v) against central differences. */
static void check_ref_gradient(const char *name, float *x, const double *grad, const attn_case *c, float *q, float *k,
                               float *v, const float *dout, const attn_layout *l, const int32_t *docs, size_t pick_n)
{
    const attn_shape *s = &l->s;
    double *out = calloc(l->o_elems, sizeof *out), *lse = calloc(l->lse_elems, sizeof *lse);
    double *P = calloc(l->lse_elems * (size_t)c->T, sizeof *P);
    for (int tries = 0; tries < 3; tries++) {
        size_t i = (size_t)rng_below(&test_rng, pick_n);
        if (isnan(grad[i]))
            continue; /* a spare column */
        const float keep = x[i];
        const float h = 1.0f / 1024; /* exact in float, so x ± h is exact for |x| <= 1 */
        x[i] = keep + h;
        double up = ref_loss(s, docs, q, k, v, dout, l->o_elems, out, lse, P);
        x[i] = keep - h;
        double down = ref_loss(s, docs, q, k, v, dout, l->o_elems, out, lse, P);
        x[i] = keep;
        double fd = (up - down) / (2.0 * h);
        /* central differences: error O(h^2 · third derivative), ~1e-6 here */
        CHECK(fabs(fd - grad[i]) <= 1e-4 * (fabs(grad[i]) + 1e-2), "reference d%s[%zu]: analytic %.9g, finite "
              "differences %.9g (B %lld T %lld)", name, i, grad[i], fd, (long long)c->B, (long long)c->T);
    }
    free(out);
    free(lse);
    free(P);
}

static int32_t *upload_ints(const int32_t *h, size_t n)
{
    int32_t *p = NULL;
    ddp_err err = {0};
    die_on(cpu->ops->alloc(cpu, n * sizeof *p, (void **)&p, &err), &err, "alloc");
    die_on(cpu->ops->upload(cpu, p, h, n * sizeof *p, &err), &err, "upload");
    return p;
}

/* New random values in every column of positions [t0, t1) of row b0 of a token-major input. */
static void scramble(float *dev, size_t n, int64_t ld, const attn_shape *s, int64_t b0, int64_t t0, int64_t t1)
{
    float *h = download(dev, n);
    for (int64_t t = t0; t < t1; t++)
        for (int64_t c = 0; c < ld; c++)
            h[(b0 * s->T + t) * ld + c] = rng_uniform(&test_rng, -1.0f, 1.0f);
    ddp_err err = {0};
    die_on(cpu->ops->upload(cpu, dev, h, n * sizeof *h, &err), &err, "upload");
    free(h);
}

/* The op's outputs as the test keeps them: out, lse, dq (dq|dk|dv fused), dk, dv. */
typedef struct outs {
    float *p[5];
    size_t n[5];
    int64_t ld[5];
    int count;
} outs;

static outs outs_of(const run_bufs *r, const attn_case *c, float *dq_buf, size_t qn, size_t kvn)
{
    const attn_shape *s = &r->l->s;
    outs o = {{r->out, r->lse, dq_buf, r->dk, r->dv}, {r->l->o_elems, r->l->lse_elems, qn, kvn, kvn},
              {s->ld_o, 1, s->ld_q, s->ld_kv, s->ld_kv}, c->fused ? 3 : 5};
    return o;
}

/* Packed rows: new q, k and v in the document of row B-1 that holds position (T-1)/2 leave every
 * other position's outputs and gradients as they were (attn_changed_outside); rows of one whole
 * document each give plain causal rows' bits. The inputs are left changed. */
static void check_packing(const run_bufs *r, const attn_case *c, float *dq_buf, size_t qn, size_t kvn,
                          const int32_t *hds, const int32_t *hde)
{
    const attn_shape *s = &r->l->s;
    const outs o = outs_of(r, c, dq_buf, qn, kvn);
    float *before[5];
    for (int i = 0; i < o.count; i++)
        before[i] = download(o.p[i], o.n[i]);
    bool whole = true;
    for (int64_t i = 0; i < c->B * c->T; i++)
        whole = whole && hds[i] == 0;
    if (whole) {
        attn_layout plain = *r->l;
        plain.s.doc_start = plain.s.doc_end = NULL;
        run_bufs rp = *r;
        rp.l = &plain;
        run_ops(&rp);
        for (int i = 0; i < o.count; i++) {
            float *got = download(o.p[i], o.n[i]);
            CHECK(memcmp(got, before[i], o.n[i] * sizeof *got) == 0, "T %lld: rows of one document each: output %d "
                  "differs from plain causal rows", (long long)c->T, i);
            free(got);
        }
    }
    const int64_t b0 = c->B - 1, mid = b0 * c->T + (c->T - 1) / 2, t0 = hds[mid], t1 = hde[mid];
    if (c->fused) {
        scramble(r->qkv, r->l->qkv_elems, s->ld_q, s, b0, t0, t1);
    } else {
        scramble(r->q, qn, s->ld_q, s, b0, t0, t1);
        scramble(r->k, kvn, s->ld_kv, s, b0, t0, t1);
        scramble(r->v, kvn, s->ld_kv, s, b0, t0, t1);
    }
    run_ops(r);
    for (int i = 0; i < o.count; i++) {
        float *got = download(o.p[i], o.n[i]);
        size_t changed = attn_changed_outside(got, before[i], o.n[i], s, o.ld[i], i == 1, b0, t0, t1);
        CHECK(changed == 0, "T %lld: new values in document [%lld, %lld) of row %lld changed %zu elements of "
              "output %d elsewhere", (long long)c->T, (long long)t0, (long long)t1, (long long)b0, changed, i);
        free(got);
        free(before[i]);
    }
}

static void test_case(const attn_case *c)
{
    attn_layout l = attn_layout_of(c);
    const attn_shape *s = &l.s;
    run_bufs r = {.l = &l};
    const size_t tokens = (size_t)(c->B * c->T);
    int32_t *hds = NULL, *hde = NULL;
    if (c->docs) {
        hds = malloc(tokens * sizeof *hds);
        hde = malloc(tokens * sizeof *hde);
        attn_docs_fill(c, hds, hde);
        l.s.doc_start = upload_ints(hds, tokens);
        l.s.doc_end = upload_ints(hde, tokens);
    }
    float *hq, *hk, *hv, *hqkv = NULL;
    size_t qn = c->fused ? l.qkv_elems : l.q_elems, kvn = c->fused ? l.qkv_elems : l.kv_elems;
    if (c->fused) {
        hqkv = random_floats(l.qkv_elems);
        hq = hqkv + l.q_off;
        hk = hqkv + l.k_off;
        hv = hqkv + l.v_off;
        r.qkv = upload(hqkv, l.qkv_elems, s, 1, 0);
        r.q = r.qkv + l.q_off;
        r.k = r.qkv + l.k_off;
        r.v = r.qkv + l.v_off;
    } else {
        hq = random_floats(qn);
        hk = random_floats(kvn);
        hv = random_floats(kvn);
        r.q = upload(hq, qn, s, 1, 0);
        r.k = upload(hk, kvn, s, 1, 0);
        r.v = upload(hv, kvn, s, 1, 0);
    }
    float *hdout = random_floats(l.o_elems);
    r.dout = upload(hdout, l.o_elems, s, 1, 0);
    r.out = upload(NULL, l.o_elems, s, s->ld_o, c->NH);
    r.lse = upload(NULL, l.lse_elems, s, 1, 1);
    float *dq_buf = upload(NULL, c->fused ? l.qkv_elems : qn, s, c->fused ? 1 : s->ld_q, c->fused ? 1 : c->NH);
    float *dkv_buf = c->fused ? NULL : upload(NULL, kvn, s, s->ld_kv, c->NKV);
    float *dv_buf = c->fused ? NULL : upload(NULL, kvn, s, s->ld_kv, c->NKV);
    r.dq = dq_buf + l.q_off;
    r.dk = c->fused ? dq_buf + l.k_off : dkv_buf;
    r.dv = c->fused ? dq_buf + l.v_off : dv_buf;
    omp_set_num_threads(2);
    run_ops(&r);

    /* reference: out, lse, P; the gradients into one array laid out as the op's outputs (NaN marks
     * columns outside the heads) */
    double *out = malloc(l.o_elems * sizeof *out), *lse = malloc(l.lse_elems * sizeof *lse);
    double *P = malloc(l.lse_elems * (size_t)c->T * sizeof *P);
    const size_t grad_n = c->fused ? l.qkv_elems : qn + 2 * kvn;
    double *grad = malloc(grad_n * sizeof *grad);
    for (size_t i = 0; i < l.o_elems; i++)
        out[i] = NAN;
    for (size_t i = 0; i < grad_n; i++)
        grad[i] = NAN;
    double *gq = grad, *gk = c->fused ? grad + l.k_off : grad + qn, *gv = c->fused ? grad + l.v_off : grad + qn + kvn;
    attn_ref_forward(s, hds, hq, hk, hv, out, lse, P);
    attn_ref_backward(s, hq, hk, hv, hdout, P, gq, gk, gv);

    const double tol = 8.0 * (pow((double)c->hs, 1.5) + (double)c->T) * (double)FLT_EPSILON / 2;
    float *got_out = download(r.out, l.o_elems), *got_lse = download(r.lse, l.lse_elems);
    int spares = 0;
    double e_out = rel_error(got_out, out, l.o_elems, s->ld_o, c->NH * c->hs, &spares);
    double e_lse = rel_error(got_lse, lse, l.lse_elems, 1, 1, &spares);
    double e_dq, e_dk, e_dv;
    if (c->fused) { /* dq, dk, dv side by side in every row: all columns are heads */
        float *g = download(dq_buf, l.qkv_elems);
        e_dq = e_dk = e_dv = rel_error(g, grad, l.qkv_elems, s->ld_q, s->ld_q, &spares);
        free(g);
    } else {
        float *g1 = download(r.dq, qn), *g2 = download(r.dk, kvn), *g3 = download(r.dv, kvn);
        e_dq = rel_error(g1, gq, qn, s->ld_q, c->NH * c->hs, &spares);
        e_dk = rel_error(g2, gk, kvn, s->ld_kv, c->NKV * c->hs, &spares);
        e_dv = rel_error(g3, gv, kvn, s->ld_kv, c->NKV * c->hs, &spares);
        free(g1);
        free(g2);
        free(g3);
    }
    fprintf(stderr, "  B %lld T %3lld NH %lld NKV %lld hs %3lld %-5s%s: errors out %.2e lse %.2e dq %.2e dk %.2e "
            "dv %.2e (bound %.2e)\n", (long long)c->B, (long long)c->T, (long long)c->NH, (long long)c->NKV,
            (long long)c->hs, c->fused ? "fused" : "split", c->docs ? " packed" : "", e_out, e_lse, e_dq, e_dk, e_dv,
            tol);
    CHECK(e_out <= tol && e_lse <= tol && e_dq <= tol && e_dk <= tol && e_dv <= tol,
          "T %lld hs %lld NKV %lld: an error is above the bound %.2e", (long long)c->T, (long long)c->hs,
          (long long)c->NKV, tol);
    CHECK(spares == 0, "T %lld hs %lld: %d spare columns changed", (long long)c->T, (long long)c->hs, spares);

    /* the reference's own gradients, by finite differences */
    if (c->T <= 70) {
        check_ref_gradient("q", hq, gq, c, hq, hk, hv, hdout, &l, hds, c->fused ? l.qkv_elems - l.q_off : qn);
        check_ref_gradient("k", hk, gk, c, hq, hk, hv, hdout, &l, hds, c->fused ? l.qkv_elems - l.k_off : kvn);
        check_ref_gradient("v", hv, gv, c, hq, hk, hv, hdout, &l, hds, c->fused ? l.qkv_elems - l.v_off : kvn);
    }

    /* 1 thread gives the bits 2 threads gave */
    float *before_dq = download(dq_buf, c->fused ? l.qkv_elems : qn);
    omp_set_num_threads(1);
    run_ops(&r);
    float *again_out = download(r.out, l.o_elems), *again_dq = download(dq_buf, c->fused ? l.qkv_elems : qn);
    CHECK(memcmp(again_out, got_out, l.o_elems * sizeof(float)) == 0 &&
          memcmp(again_dq, before_dq, (c->fused ? l.qkv_elems : qn) * sizeof(float)) == 0,
          "T %lld hs %lld: 1 and 2 threads give different bits", (long long)c->T, (long long)c->hs);
    omp_set_num_threads(2);
    if (c->docs)
        check_packing(&r, c, dq_buf, c->fused ? l.qkv_elems : qn, kvn, hds, hde);

    free(again_out);
    free(again_dq);
    free(before_dq);
    free(got_out);
    free(got_lse);
    free(out);
    free(lse);
    free(P);
    free(grad);
    free(hdout);
    if (c->fused) {
        free(hqkv);
        cpu->ops->free(cpu, r.qkv);
    } else {
        free(hq);
        free(hk);
        free(hv);
        cpu->ops->free(cpu, r.q);
        cpu->ops->free(cpu, r.k);
        cpu->ops->free(cpu, r.v);
    }
    cpu->ops->free(cpu, r.dout);
    cpu->ops->free(cpu, r.out);
    cpu->ops->free(cpu, r.lse);
    cpu->ops->free(cpu, dq_buf);
    cpu->ops->free(cpu, dkv_buf);
    cpu->ops->free(cpu, dv_buf);
    cpu->ops->free(cpu, (void *)l.s.doc_start);
    cpu->ops->free(cpu, (void *)l.s.doc_end);
    free(hds);
    free(hde);
}

/* Scores of 400 (q = k = 10, head size 16) in every row: the probabilities are uniform, and with
 * v = 1 each output is their sum, 1 within the float roundings of at most T terms (4·T·u); divided
 * by exp of a float-rounded log-sum-exp (half a float step of 400 + log n) the rows are off by up
 * to 1.5e-5. */
static void test_large_scores(void)
{
    const attn_case c = {1, 17, 1, 1, 16, false, 0, NULL};
    attn_layout l = attn_layout_of(&c);
    float *hq = malloc(l.q_elems * sizeof *hq), *hk = malloc(l.kv_elems * sizeof *hk),
          *hv = malloc(l.kv_elems * sizeof *hv);
    for (size_t i = 0; i < l.q_elems; i++)
        hq[i] = 10.0f;
    for (size_t i = 0; i < l.kv_elems; i++)
        hk[i] = 10.0f, hv[i] = 1.0f;
    float *q = upload(hq, l.q_elems, &l.s, 1, 0), *k = upload(hk, l.kv_elems, &l.s, 1, 0),
          *v = upload(hv, l.kv_elems, &l.s, 1, 0), *out = upload(NULL, l.o_elems, &l.s, l.s.ld_o, l.s.NH),
          *lse = upload(NULL, l.lse_elems, &l.s, 1, 1);
    ddp_err err = {0};
    die_on(cpu->ops->attention_forward(cpu, TENSOR_F32, &l.s, out, lse, q, k, v, &err), &err, "attention_forward");
    float *o = download(out, l.o_elems);
    double worst = 0.0;
    for (int64_t t = 0; t < c.T; t++)
        for (int64_t ch = 0; ch < c.hs; ch++)
            worst = fmax(worst, fabs((double)o[attn_at(&l.s, 0, t, l.s.ld_o, 0, ch)] - 1.0));
    CHECK(worst <= 4.0 * (double)c.T * 0x1p-24, "scores of 400: outputs off 1 by %.3g (bound %.3g)", worst,
          4.0 * (double)c.T * 0x1p-24);
    float *bufs[] = {q, k, v, out, lse};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        cpu->ops->free(cpu, bufs[i]);
    free(hq), free(hk), free(hv), free(o);
}

/* Bounds whose documents are not contiguous runs of the row are refused before anything is
 * computed: a document starting at 2 while the one before it says it ends at 4 among them. */
static void test_bad_docs(void)
{
    const attn_case c = {1, 4, 1, 1, 2, false, 0, NULL};
    const int32_t starts[][4] = {{0, 0, 2, 2}, {0, 0, 2, 2}, {0, 1, 1, 3}, {0, 0, 0, 0}};
    const int32_t ends[][4] = {{2, 2, 4, 4}, {4, 4, 4, 4}, {1, 3, 2, 4}, {4, 4, 4, 5}};
    attn_layout l = attn_layout_of(&c);
    float *hq = random_floats(l.q_elems), *hkv = random_floats(l.kv_elems);
    float *q = upload(hq, l.q_elems, &l.s, 1, 0), *k = upload(hkv, l.kv_elems, &l.s, 1, 0),
          *v = upload(hkv, l.kv_elems, &l.s, 1, 0), *out = upload(NULL, l.o_elems, &l.s, l.s.ld_o, l.s.NH),
          *lse = upload(NULL, l.lse_elems, &l.s, 1, 1);
    for (int i = 0; i < 4; i++) {
        ddp_err err = {0};
        int32_t *ds = upload_ints(starts[i], 4), *de = upload_ints(ends[i], 4);
        l.s.doc_start = ds, l.s.doc_end = de;
        int rc = cpu->ops->attention_forward(cpu, TENSOR_F32, &l.s, out, lse, q, k, v, &err);
        if (i == 0)
            CHECK(rc == DDP_OK, "two documents of 2: %s", err.msg);
        else
            CHECK(rc == DDP_ERUNTIME && strstr(err.msg, "is not a contiguous run of the row's 4 positions"),
                  "bounds %d: rc %d, %s", i, rc, err.msg);
        cpu->ops->free(cpu, ds), cpu->ops->free(cpu, de);
    }
    float *bufs[] = {q, k, v, out, lse};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        cpu->ops->free(cpu, bufs[i]);
    free(hq), free(hkv);
}

int main(void)
{
    ddp_err err = {0};
    rng_seed(&test_rng, 20261127, 77);
    die_on(device_cpu_create(&cpu, &err), &err, "device_cpu_create");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        test_case(&cases[i]);
    test_large_scores();
    test_bad_docs();
    cpu->ops->destroy(cpu);
    return check_done("test_attention_cpu");
}
