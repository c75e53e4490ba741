/* test_llama_cpu.c — the CPU backend's Llama ops (kernels/rotary_cpu.c: RMSNorm, RoPE, SwiGLU)
 * against double-precision references written here, on random inputs with awkward shapes (sizes
 * 1, odd sizes, C not a power of two, rows wider than the heads RoPE rotates, B > 1, T > 1). The
 * backward ops are checked against the reference gradients, with their "+=" outputs starting from
 * random values, and against central finite differences of the forward references; rope_backward
 * also as rope_forward's transpose (<rope(x), y> = <x, rope_backward(y)>) and inverse, all of it
 * also in packed rows (doc_start: positions restart at each document, so a row of two documents
 * gives the bits of each document rotated alone). Every op
 * gives identical bits at 1 and 2 OpenMP threads; the fused residual RMSNorm gives add +
 * rmsnorm_forward's bits, in place or not; swiglu_backward in place over gate_up gives the bits of
 * a separate output. Tolerances come from float32 rounding (cpu_ref.h), error bounds beside each
 * check. Every op is called through the CPU device's checked ops table, as the model calls it. */
#include "tests/runtime/device/cpu_ref.h"

/* ---- RMSNorm ------------------------------------------------------------------------------ */

typedef struct { int64_t N, C; float eps, *x, *w, *out, *rstd, *dout, *dx, *dw; } rms_case;
typedef struct { int64_t N, C; double eps, *x, *w, *dout; } rms_fd;

static rms_case rms_make(int64_t N, int64_t C, double offset, float eps)
{
    size_t n = (size_t)(N * C), c = (size_t)C;
    return (rms_case){N, C, eps, frand(n, offset - 1, offset + 1), frand(c, 0.5, 1.5), fnan(n), fnan((size_t)N),
                      frand(n, -1, 1), frand(n, -1, 1), frand(c, -1, 1)};
}
static void rms_run(void *p)
{
    rms_case *l = p;
    DEV(rmsnorm_forward, TENSOR_F32, l->out, l->rstd, l->x, l->w, l->N, l->C, l->eps);
    DEV(rmsnorm_backward, TENSOR_F32, l->dx, l->dw, l->dout, l->x, l->w, l->rstd, l->N, l->C);
}
static double rms_rstd(const double *x, int64_t C, double eps)
{
    double ss = 0;
    for (int64_t c = 0; c < C; c++)
        ss += x[c] * x[c];
    return 1.0 / sqrt(ss / (double)C + eps);
}
static double rms_loss(const void *p)
{
    const rms_fd *f = p;
    double L = 0;
    for (int64_t r = 0; r < f->N; r++) {
        double s = rms_rstd(f->x + r * f->C, f->C, f->eps);
        for (int64_t c = 0; c < f->C; c++)
            L += f->dout[r * f->C + c] * f->x[r * f->C + c] * s * f->w[c];
    }
    return L;
}

/* Bounds (u = EPS/2): rstd and out are double computations rounded to float once: u·|ref| (out
 * 2u: its double product adds ~2^-52). The backward rebuilds x̂ = x·r from the float rstd, off by
 * δ <= u relative; g = r·dn - r³·x·mean(dn·x) moves by δ·(s|dn| + 3s|x̂·M|), M = mean(dn·x̂),
 * doubled, plus u·|dinp| for the "+=" rounding. dw = Σ dout·x·r: δ·Σ|dout·x̂| doubled plus one
 * rounding. The double sums' own error (~C·2^-53 relative) is far below these. */
static void test_rmsnorm(int64_t N, int64_t C, double offset, float eps, bool zero_init)
{
    rms_case l = rms_make(N, C, offset, eps);
    size_t n = (size_t)(N * C);
    if (zero_init)
        memset(l.dx, 0, n * 4), memset(l.dw, 0, (size_t)C * 4);
    double *rout = dzero(n), *bout = dzero(n), *rdx = todbl(l.dx, n), *bdx = dzero(n), *rdw = todbl(l.dw, (size_t)C);
    double *bdw = dzero((size_t)C), *x = todbl(l.x, n), *rs = dzero((size_t)N), *bs = dzero((size_t)N);
    rms_run(&l);
    for (int64_t r = 0; r < N; r++) {
        double s = rms_rstd(x + r * C, C, (double)eps), sum_dnx = 0;
        for (int64_t c = 0; c < C; c++) {
            double d = l.dout[r * C + c], xh = x[r * C + c] * s;
            sum_dnx += d * l.w[c] * xh;
            rout[r * C + c] = xh * l.w[c];
            bout[r * C + c] = EPS * fabs(rout[r * C + c]);
            rdw[c] += d * xh, bdw[c] += 2 * EPS / 2 * fabs(d * xh);
        }
        rs[r] = s, bs[r] = EPS / 2 * s;
        double M = sum_dnx / (double)C;
        for (int64_t c = 0; c < C; c++) {
            double dn = (double)l.dout[r * C + c] * l.w[c], xh = x[r * C + c] * s;
            rdx[r * C + c] += s * (dn - xh * M);
            bdx[r * C + c] = EPS * (s * fabs(dn) + 3 * s * fabs(xh * M)) + EPS / 2 * fabs(rdx[r * C + c]);
        }
    }
    for (int64_t c = 0; c < C; c++)
        bdw[c] += EPS / 2 * fabs(rdw[c]);
    check_close("rmsnorm_forward", "out", l.out, rout, bout, n);
    check_close("rmsnorm_forward", "rstd", l.rstd, rs, bs, (size_t)N);
    check_close("rmsnorm_backward", "dinp", l.dx, rdx, bdx, n);
    check_close("rmsnorm_backward", "dw", l.dw, rdw, bdw, (size_t)C);
    if (zero_init) {
        rms_fd f = {N, C, (double)eps, x, todbl(l.w, (size_t)C), todbl(l.dout, n)};
        fd_check("rmsnorm_backward", "dinp", rms_loss, &f, f.x, n, l.dx, bdx);
        fd_check("rmsnorm_backward", "dw", rms_loss, &f, f.w, (size_t)C, l.dw, bdw);
    }
    arena_free();
}

/* residual_rmsnorm_forward is add followed by rmsnorm_forward (whose numerics test_rmsnorm
 * checks): the same bits for res_out, norm_out and rstd, with res_out a separate buffer, a itself
 * or b itself; and the same at 1 and 2 threads. */
typedef struct { int64_t N, C; float *a, *b, *w, *res, *out, *rstd; } res_case;
static void res_run(void *p)
{
    res_case *r = p;
    DEV(residual_rmsnorm_forward, TENSOR_F32, r->res, r->out, r->rstd, r->a, r->b, r->w, r->N, r->C, 1e-6f);
}
static void test_residual_rmsnorm(int64_t N, int64_t C)
{
    size_t n = (size_t)(N * C), rows = (size_t)N;
    float *a = frand(n, -2, 2), *b = frand(n, -1, 3), *w = frand((size_t)C, 0.5, 1.5);
    float *sum = fnan(n), *out = fnan(n), *rstd = fnan(rows);
    DEV(add, TENSOR_F32, sum, a, b, n);
    DEV(rmsnorm_forward, TENSOR_F32, out, rstd, sum, w, N, C, 1e-6f);
    for (int where = 0; where < 3; where++) {
        res_case r = {N, C, fdup(a, n), fdup(b, n), w, fnan(n), fnan(n), fnan(rows)};
        if (where)
            r.res = where == 1 ? r.a : r.b;
        res_run(&r);
        const char *what = where == 0 ? "separate res_out" : where == 1 ? "res_out over a" : "res_out over b";
        check_bits("residual_rmsnorm_forward", what, r.res, sum, n);
        check_bits("residual_rmsnorm_forward", what, r.out, out, n);
        check_bits("residual_rmsnorm_forward", what, r.rstd, rstd, rows);
        if (where == 0)
            check_threads("residual_rmsnorm_forward", res_run, &r, (span[]){{r.res, n}, {r.out, n}, {r.rstd, rows}}, 3);
    }
    arena_free();
}

/* ---- RoPE --------------------------------------------------------------------------------- */

typedef struct { int64_t ld, B, T, H, hs; float *x, *cos, *sin; int32_t *docs; } rope_case;
typedef struct { const rope_case *r; double *x, *y; } rope_fd;

/* Llama's tables: angle t·10000^(-2j/hs), rounded to float as the model uploads them. */
static rope_case rope_make(int64_t B, int64_t T, int64_t H, int64_t hs, int64_t pad)
{
    size_t table = (size_t)(T * hs / 2) * sizeof(float);
    rope_case r = {H * hs + pad, B, T, H, hs, NULL, xmalloc(table), xmalloc(table), NULL};
    r.x = frand((size_t)(B * T * r.ld), -2, 2);
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < hs / 2; j++) {
            double angle = (double)t * pow(10000.0, -2.0 * (double)j / (double)hs);
            r.cos[t * hs / 2 + j] = (float)cos(angle), r.sin[t * hs / 2 + j] = (float)sin(angle);
        }
    return r;
}
static void rope_fwd_run(void *p)
{
    rope_case *r = p;
    DEV(rope_forward, TENSOR_F32, r->x, r->ld, r->B, r->T, r->H, r->hs, r->cos, r->sin, r->docs);
}
/* Packed rows' doc_start [B·T]: documents of the lengths in lens (ended by a 0) one after another
 * along the rows, the list read on where the previous row left it and started again when it runs
 * out; a document that would cross a row's end is cut there. */
static int32_t *rope_docs(int64_t B, int64_t T, const int32_t *lens)
{
    int32_t *docs = xmalloc((size_t)(B * T) * sizeof *docs);
    size_t k = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T;) {
            if (!lens[k])
                k = 0;
            const int64_t len = lens[k] < T - t ? lens[k] : T - t;
            for (int64_t i = t; i < t + len; i++)
                docs[b * T + i] = (int32_t)t;
            t += len, k++;
        }
    return docs;
}
static void rope_bwd_run(void *p)
{
    rope_case *r = p;
    DEV(rope_backward, TENSOR_F32, r->x, r->ld, r->B, r->T, r->H, r->hs, r->cos, r->sin, r->docs);
}
/* The rotation of x (sign 1) or its inverse (-1) in double, into out, by each row's position (t,
 * or t minus its document's start); padding columns copied. */
static void rope_ref(const rope_case *r, const double *x, double *out, double sign)
{
    int64_t half = r->hs / 2;
    memcpy(out, x, (size_t)(r->B * r->T * r->ld) * sizeof *out);
    for (int64_t row = 0; row < r->B * r->T; row++)
        for (int64_t h = 0; h < r->H; h++)
            for (int64_t j = 0; j < half; j++) {
                int64_t i = row * r->ld + h * r->hs + j, k = (row % r->T - (r->docs ? r->docs[row] : 0)) * half + j;
                double c = r->cos[k], s = sign * r->sin[k];
                out[i] = x[i] * c - x[i + half] * s, out[i + half] = x[i + half] * c + x[i] * s;
            }
}
static double rope_loss(const void *p) /* <y, rope(x)> */
{
    const rope_fd *f = p;
    size_t n = (size_t)(f->r->B * f->r->T * f->r->ld);
    double *rx = xmalloc(n * sizeof *rx), L = 0;
    rope_ref(f->r, f->x, rx, 1.0);
    for (size_t i = 0; i < n; i++)
        L += f->y[i] * rx[i];
    return L;
}

/* Both directions against the double rotation: each element's two products are exact in double,
 * so the op's result is the exact value rounded once (to double, then float): u·|ref|, and the
 * padding columns (ld > H·hs) keep their bits. rope_backward is rope_forward's transpose:
 * <rope(x), y> = <x, rope_backward(y)> up to each side's roundings (u·Σ|terms| each, the float
 * outputs' and the double sums'), the gradient of <y, rope(x)> by central differences, and
 * rope_backward(rope_forward(x)) = x within the two roundings (2u·|x| per element, times the
 * rotation's norm 1 of each pair: 4u·max of the pair). */
static void test_rope(int64_t B, int64_t T, int64_t H, int64_t hs, int64_t pad, const int32_t *lens)
{
    rope_case r = rope_make(B, T, H, hs, pad);
    r.docs = lens ? rope_docs(B, T, lens) : NULL;
    size_t n = (size_t)(B * T * r.ld);
    float *x0 = fdup(r.x, n), *y = frand(n, -1, 1);
    double *xd = todbl(x0, n), *ref = dzero(n), *bound = dzero(n), *yd = todbl(y, n);
    for (int dir = 0; dir < 2; dir++) {
        memcpy(r.x, dir ? y : x0, n * 4);
        rope_ref(&r, dir ? yd : xd, ref, dir ? -1.0 : 1.0);
        (dir ? rope_bwd_run : rope_fwd_run)(&r);
        for (size_t i = 0; i < n; i++)
            bound[i] = EPS / 2 * fabs(ref[i]);
        check_close(dir ? "rope_backward" : "rope_forward", "x", r.x, ref, bound, n);
    }
    /* r.x holds rope_backward(y) */
    float *ry = fdup(r.x, n);
    memcpy(r.x, x0, n * 4);
    rope_fwd_run(&r);
    double lhs = 0, rhs = 0, mag = 0;
    for (size_t i = 0; i < n; i++) {
        lhs += (double)r.x[i] * y[i], rhs += (double)x0[i] * ry[i];
        mag += fabs((double)r.x[i] * y[i]) + fabs((double)x0[i] * ry[i]);
    }
    n_checks++;
    if (!(fabs(lhs - rhs) <= EPS * mag))
        fail("rope_backward", "not rope_forward's transpose: <rope(x), y> = %.12g, <x, rope_backward(y)> = %.12g, "
             "|diff| %.3g > %.3g", lhs, rhs, fabs(lhs - rhs), EPS * mag);
    rope_bwd_run(&r); /* r.x: rope_backward(rope_forward(x0)) */
    for (size_t i = 0; i < n; i++)
        bound[i] = 2 * EPS * fmax(fabs(xd[i]), 2.0);
    check_close("rope_backward", "rope_backward(rope_forward(x))", r.x, xd, bound, n);
    rope_fd f = {&r, xd, yd};
    for (size_t i = 0; i < n; i++)
        bound[i] = EPS / 2 * fabs(ry[i]);
    fd_check("rope_backward", "<y, rope(x)>", rope_loss, &f, xd, n, ry, bound);
    memcpy(r.x, x0, n * 4);
    check_threads("rope_forward", rope_fwd_run, &r, (span[]){{r.x, n}}, 1);
    check_threads("rope_backward", rope_bwd_run, &r, (span[]){{r.x, n}}, 1);
    arena_free();
}

/* Positions restart at each document: one row holding documents of lengths a and T - a rotates, in
 * both directions, to the bits of each document rotated alone as a row of its own. */
static void test_rope_restarts(int64_t T, int64_t a, int64_t H, int64_t hs, int64_t pad)
{
    rope_case r = rope_make(1, T, H, hs, pad);
    const int32_t lens[] = {(int32_t)a, (int32_t)(T - a), 0};
    r.docs = rope_docs(1, T, lens);
    const size_t n = (size_t)(T * r.ld), na = (size_t)(a * r.ld);
    float *x0 = fdup(r.x, n);
    for (int dir = 0; dir < 2; dir++) {
        memcpy(r.x, x0, n * sizeof *x0);
        (dir ? rope_bwd_run : rope_fwd_run)(&r);
        float *alone = fdup(x0, n);
        rope_case first = r, second = r;
        first.x = alone, first.T = a, first.docs = NULL;
        second.x = alone + na, second.T = T - a, second.docs = NULL;
        (dir ? rope_bwd_run : rope_fwd_run)(&first);
        (dir ? rope_bwd_run : rope_fwd_run)(&second);
        check_bits(dir ? "rope_backward" : "rope_forward", "two documents in a row vs each alone", r.x, alone, n);
    }
    arena_free();
}

/* ---- SwiGLU ------------------------------------------------------------------------------- */

typedef struct { int64_t N, F; float *gu, *h, *dh, *dgu; } swiglu_case;
typedef struct { int64_t N, F; double *gu, *dh; } swiglu_fd;

static double sigmoid(double z) { return 1.0 / (1.0 + exp(-z)); }
static void swiglu_run(void *p)
{
    swiglu_case *s = p;
    DEV(swiglu_forward, TENSOR_F32, s->h, s->gu, s->N, s->F);
    DEV(swiglu_backward, TENSOR_F32, s->dgu, s->dh, s->gu, s->N, s->F);
}
static double swiglu_loss(const void *p) /* <dh, h(gate_up)> */
{
    const swiglu_fd *f = p;
    double L = 0;
    for (int64_t r = 0; r < f->N; r++)
        for (int64_t j = 0; j < f->F; j++) {
            double g = f->gu[r * 2 * f->F + j], u = f->gu[r * 2 * f->F + f->F + j];
            L += f->dh[r * f->F + j] * g * sigmoid(g) * u;
        }
    return L;
}

/* Bounds (u = EPS/2), first order, per side of the float arithmetic: e = expf(-|g|) within 1 ulp
 * (2u), 1 + e and 1/(1 + e) one rounding each on top, σ = e/(1 + e) or 1/(1 + e): <= 6u; h = g·σ·up
 * two more roundings: 8u·|h| (bound 5·EPS = 10u). dup = dh·g·σ likewise 8u. dgate = dh·up·σ·(1 +
 * g·(1 - σ)): σ and 1 - σ 6u each, g·(1 - σ) 7u, the sum's rounding u, three products 3u, against
 * A = |dh·up|·σ·(1 + |g|·(1 - σ)) since 1 + g·(1 - σ) cancels near g = -1.28: 17u·A (9·EPS·A). */
static void test_swiglu(int64_t N, int64_t F)
{
    size_t n = (size_t)(N * F), n2 = 2 * n;
    swiglu_case s = {N, F, frand(n2, -6, 6), fnan(n), frand(n, -1, 1), fnan(n2)};
    double *rh = dzero(n), *bh = dzero(n), *rdgu = dzero(n2), *bdgu = dzero(n2);
    swiglu_run(&s);
    for (int64_t r = 0; r < N; r++)
        for (int64_t j = 0; j < F; j++) {
            int64_t ig = r * 2 * F + j, iu = ig + F, ih = r * F + j;
            double g = s.gu[ig], u = s.gu[iu], dy = s.dh[ih], sg = sigmoid(g), sc = sigmoid(-g);
            rh[ih] = g * sg * u, bh[ih] = 5 * EPS * fabs(rh[ih]);
            rdgu[ig] = dy * u * sg * (1 + g * sc), bdgu[ig] = 9 * EPS * fabs(dy * u) * sg * (1 + fabs(g) * sc);
            rdgu[iu] = dy * g * sg, bdgu[iu] = 5 * EPS * fabs(rdgu[iu]);
        }
    check_close("swiglu_forward", "h", s.h, rh, bh, n);
    check_close("swiglu_backward", "dgate_up", s.dgu, rdgu, bdgu, n2);
    swiglu_fd f = {N, F, todbl(s.gu, n2), todbl(s.dh, n)};
    fd_check("swiglu_backward", "dgate_up", swiglu_loss, &f, f.gu, n2, s.dgu, bdgu);
    float *in_place = fdup(s.gu, n2);
    DEV(swiglu_backward, TENSOR_F32, in_place, s.dh, in_place, N, F);
    check_bits("swiglu_backward", "dgate_up over gate_up", in_place, s.dgu, n2);
    check_threads("swiglu", swiglu_run, &s, (span[]){{s.h, n}, {s.dgu, n2}}, 2);
    arena_free();
}

/* The CPU backend computes in float: bf16 is refused, as by its other ops. */
static void test_bf16_refused(void)
{
    float *buf = frand(64, -1, 1);
    ddp_err err = {0};
    n_checks++;
    if (dev->ops->swiglu_forward(dev, TENSOR_BF16, buf, buf + 16, 2, 4, &err) == DDP_OK ||
        !strstr(err.msg, "bf16 tensors need the CUDA backend"))
        fail("swiglu_forward", "bf16 on the CPU backend was not refused (\"%s\")", err.msg);
    arena_free();
}

int main(void)
{
    double t0 = now_s();
    ddp_err err = {0};
    if (device_cpu_create(&dev, &err)) {
        fprintf(stderr, "test_llama_cpu: %s\n", err.msg);
        return 2;
    }
    omp_set_num_threads(2);
    test_rmsnorm(1, 1, 3.0, 1e-6f, true), test_rmsnorm(1, 37, 0.0, 1e-5f, true), test_rmsnorm(7, 37, 3.0, 1e-6f, false);
    test_rmsnorm(7, 37, 0.5, 1e-6f, true), test_rmsnorm(33, 129, -2.0, 1e-5f, true), test_rmsnorm(5, 3, 0.0, 0.0f, true);
    test_residual_rmsnorm(1, 1), test_residual_rmsnorm(7, 37), test_residual_rmsnorm(300, 333);
    test_rope(1, 1, 1, 2, 0, NULL), test_rope(2, 3, 3, 8, 5, NULL), test_rope(3, 17, 5, 6, 7, NULL);
    test_rope(2, 5, 2, 10, 0, NULL), test_rope(4, 64, 6, 64, 128, NULL); /* large enough that the loop forks */
    /* packed rows: documents of length 1, rows of a batch packed differently, a row of one document */
    const int32_t lens[] = {3, 1, 9, 20, 0}, whole[] = {INT32_MAX, 0};
    test_rope(3, 17, 5, 6, 7, lens), test_rope(4, 64, 6, 64, 128, lens), test_rope(2, 5, 2, 10, 0, whole);
    test_rope_restarts(17, 5, 3, 8, 5), test_rope_restarts(64, 1, 6, 64, 0);
    test_swiglu(1, 1), test_swiglu(3, 7), test_swiglu(13, 37), test_swiglu(300, 129);
    test_bf16_refused();
    /* determinism of RMSNorm at a size where every loop forks */
    rms_case l = rms_make(300, 333, 1.0, 1e-5f);
    check_threads("rmsnorm", rms_run, &l,
                  (span[]){{l.out, 300 * 333}, {l.rstd, 300}, {l.dx, 300 * 333}, {l.dw, 333}}, 4);
    arena_free();
    fprintf(stderr, "test_llama_cpu: %d checks, %d failed (%.2f s)\n", n_checks, n_failed, now_s() - t0);
    free(arena);
    dev->ops->destroy(dev);
    return n_failed ? 1 : 0;
}
