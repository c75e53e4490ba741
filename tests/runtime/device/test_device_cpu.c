/* test_device_cpu.c — the CPU device ops against naive double-precision references: GEMM in all
 * four transpose combinations with odd shapes, padded leading dimensions and alpha/beta; argument
 * validation; bias ops (a layer-sized bias gradient bit for bit against the row-order sum);
 * activations; softmax cross-entropy (stability, ties, accumulation); sumsq; memory ops. Inputs
 * are random and non-zero so a swapped index shows. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/device/device.h"
#include "runtime/base/rng.h"
#include "tests/check.h"

static rng R;

static float *random_floats(size_t n, float lo, float hi)
{
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = rng_uniform(&R, lo, hi);
    return x;
}

/* C = alpha·op(A)·op(B) + beta·C with padded rows; the padding of C must stay untouched. */
static void gemm_case(device *d, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, float beta)
{
    int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 2, ldc = n + 5;
    int64_t a_rows = ta ? k : m, b_rows = tb ? n : k;
    float *a = random_floats((size_t)(a_rows * lda), -1, 1), *b = random_floats((size_t)(b_rows * ldb), -1, 1);
    float *c = random_floats((size_t)(m * ldc), -1, 1), *c0 = malloc((size_t)(m * ldc) * sizeof *c0);
    memcpy(c0, c, (size_t)(m * ldc) * sizeof *c0);
    ddp_err err = {0};
    int rc = d->ops->gemm(d, TENSOR_F32, TENSOR_F32, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, &err);
    CHECK(rc == 0, "gemm: %s", err.msg);
    int bad = 0;
    for (int64_t i = 0; i < m; i++) {
        for (int64_t j = 0; j < ldc; j++) {
            double want = c0[i * ldc + j];
            if (j < n) {
                double acc = 0;
                for (int64_t p = 0; p < k; p++)
                    acc += (double)(ta ? a[p * lda + i] : a[i * lda + p]) * (double)(tb ? b[j * ldb + p] : b[p * ldb + j]);
                want = alpha * acc + (beta == 0.0f ? 0.0 : beta * want);
            }
            if (fabs(c[i * ldc + j] - want) > 1e-5 * (double)(k + 1))
                bad++;
        }
    }
    CHECK(bad == 0, "gemm ta=%d tb=%d m=%lld n=%lld k=%lld alpha=%g beta=%g: %d wrong elements", ta, tb,
          (long long)m, (long long)n, (long long)k, alpha, beta, bad);
    free(a);
    free(b);
    free(c);
    free(c0);
}

static void test_gemm(device *d)
{
    for (int t = 0; t < 4; t++) {
        bool ta = t & 1, tb = t & 2;
        gemm_case(d, ta, tb, 7, 5, 3, 1.0f, 0.0f);
        gemm_case(d, ta, tb, 33, 17, 29, 0.5f, 1.0f);
        gemm_case(d, ta, tb, 1, 19, 64, -1.5f, 0.25f);
        gemm_case(d, ta, tb, 65, 1, 9, 1.0f, 1.0f);
    }
    gemm_case(d, false, false, 4, 3, 0, 1.0f, 0.5f); /* k = 0: C = beta·C */
    float c[4] = {NAN, NAN, NAN, NAN}, a[4] = {1, 2, 3, 4};
    ddp_err err = {0};
    CHECK(d->ops->gemm(d, TENSOR_F32, TENSOR_F32, false, false, 2, 2, 2, 1.0f, a, 2, a, 2, 0.0f, c, 2,
                       &err) == 0, "gemm");
    CHECK(c[0] == 7.0f && c[3] == 22.0f, "beta 0 must ignore NaN already in C: %g %g", c[0], c[3]);

    CHECK(d->ops->gemm(d, TENSOR_F32, TENSOR_F32, false, false, -1, 2, 2, 1.0f, a, 2, a, 2, 0.0f, c, 2,
                       &err) != 0, "negative m accepted");
    CHECK_STR_CONTAINS(err.msg, "negative");
    CHECK(d->ops->gemm(d, TENSOR_F32, TENSOR_F32, false, false, 2, 2, 3, 1.0f, a, 2, a, 2, 0.0f, c, 2,
                       &err) != 0, "lda < k accepted");
    CHECK_STR_CONTAINS(err.msg, "lda=2");
    CHECK(d->ops->gemm(d, TENSOR_F32, TENSOR_F32, true, false, 3, 2, 2, 1.0f, a, 2, a, 2, 0.0f, c, 2,
                       &err) != 0, "lda < m accepted (trans)");
    CHECK(d->ops->gemm(d, TENSOR_F32, TENSOR_F32, false, true, 2, 3, 2, 1.0f, a, 2, a, 2, 0.0f, c, 2,
                       &err) != 0, "ldc < n accepted");
    CHECK(d->ops->gemm(d, TENSOR_F32, TENSOR_F32, false, false, 0, 2, 2, 1.0f, a, 2, a, 2, 0.0f, c, 2,
                       &err) == 0, "m = 0 rejected");
}

static void test_bias(device *d)
{
    enum { ROWS = 5, COLS = 7 };
    float *y = random_floats(ROWS * COLS, -1, 1), *b = random_floats(COLS, -1, 1), y0[ROWS * COLS];
    memcpy(y0, y, sizeof y0);
    CHECK(d->ops->bias_add(d, TENSOR_F32, y, b, ROWS, COLS, NULL) == 0, "bias_add");
    int bad = 0;
    for (int i = 0; i < ROWS * COLS; i++)
        bad += y[i] != y0[i] + b[i % COLS];
    CHECK(bad == 0, "bias_add: %d wrong", bad);

    float db[COLS];
    for (int c = 0; c < COLS; c++)
        db[c] = NAN;
    CHECK(d->ops->bias_grad(d, TENSOR_F32, y0, db, ROWS, COLS, 0.0f, NULL) == 0, "bias_grad beta 0");
    float first[COLS];
    memcpy(first, db, sizeof db);
    CHECK(d->ops->bias_grad(d, TENSOR_F32, y0, db, ROWS, COLS, 1.0f, NULL) == 0, "bias_grad beta 1");
    for (int c = 0; c < COLS; c++) {
        double sum = 0;
        for (int r = 0; r < ROWS; r++)
            sum += y0[r * COLS + c];
        CHECK_CLOSE(first[c], sum, 1e-6, 1e-6);
        CHECK_CLOSE(db[c], 2 * sum, 1e-6, 1e-6);
    }
    free(y);
    free(b);
}

/* A bias gradient of a layer's size, above the element count at which the CPU ops use OpenMP
 * threads: every column must hold exactly the bits of a float sum in row order, the fixed order
 * reduce_cpu.c promises, however the work is divided. */
static void test_bias_grad_row_order(device *d)
{
    enum { ROWS = 300, COLS = 1000 };
    float *dy = random_floats((size_t)ROWS * COLS, -1, 1), *db = random_floats(COLS, -1, 1);
    float want[COLS];
    for (int c = 0; c < COLS; c++) {
        want[c] = 0.5f * db[c];
        for (int r = 0; r < ROWS; r++)
            want[c] += dy[r * COLS + c];
    }
    CHECK(d->ops->bias_grad(d, TENSOR_F32, dy, db, ROWS, COLS, 0.5f, NULL) == 0, "bias_grad %dx%d", ROWS, COLS);
    int bad = 0;
    for (int c = 0; c < COLS; c++)
        bad += memcmp(&db[c], &want[c], sizeof want[c]) != 0;
    CHECK(bad == 0, "bias_grad %dx%d: %d of %d columns differ from the row-order sum", ROWS, COLS, bad, COLS);
    free(dy);
    free(db);
}

static void test_activations(device *d)
{
    enum { N = 1001 };
    float *x = random_floats(N, -6, 6), *dy = random_floats(N, -1, 1), y[N], dx[N];
    x[0] = 0.0f; /* ReLU'(0) = 0, as PyTorch */
    CHECK(d->ops->act_forward(d, TENSOR_F32, ACT_RELU, x, y, N, NULL) == 0 && d->ops->act_backward(d, TENSOR_F32, ACT_RELU, x, dy, dx, N, NULL) == 0,
          "relu");
    int bad = 0;
    for (int i = 0; i < N; i++)
        bad += y[i] != (x[i] > 0 ? x[i] : 0) || dx[i] != (x[i] > 0 ? dy[i] : 0);
    CHECK(bad == 0, "relu: %d wrong", bad);
    float inplace[N]; /* dx == dy, as the contract allows */
    memcpy(inplace, dy, sizeof inplace);
    CHECK(d->ops->act_backward(d, TENSOR_F32, ACT_RELU, x, inplace, inplace, N, NULL) == 0, "relu in place");
    CHECK(memcmp(inplace, dx, sizeof dx) == 0, "relu backward in place differs from out of place");

    CHECK(d->ops->act_forward(d, TENSOR_F32, ACT_GELU, x, y, N, NULL) == 0 && d->ops->act_backward(d, TENSOR_F32, ACT_GELU, x, dy, dx, N, NULL) == 0,
          "gelu");
    bad = 0;
    for (int i = 0; i < N; i++) {
        double xi = x[i], gelu = 0.5 * xi * (1 + erf(xi / sqrt(2.0)));
        /* derivative by central difference of the exact formula, independent of the closed form */
        double h = 1e-5, up = (xi + h) * 0.5 * (1 + erf((xi + h) / sqrt(2.0)));
        double down = (xi - h) * 0.5 * (1 + erf((xi - h) / sqrt(2.0)));
        double dgelu = (up - down) / (2 * h);
        bad += fabs(y[i] - gelu) > 1e-6 * (1 + fabs(gelu)) || fabs(dx[i] - dy[i] * dgelu) > 1e-5;
    }
    CHECK(bad == 0, "gelu: %d wrong", bad);
    CHECK(d->ops->act_forward(d, TENSOR_F32, (act_kind)99, x, y, N, NULL) != 0, "unknown activation accepted");
    free(x);
    free(dy);
}

static void test_softmax_xent(device *d)
{
    enum { ROWS = 6, COLS = 5 };
    float *l = random_floats(ROWS * COLS, -4, 4), dl[ROWS * COLS];
    int32_t y[ROWS] = {0, 4, 2, 1, 3, 0};
    /* row 3: huge equal logits at 0 and 1 (stability, and a tie: argmax is 0, label 1 wrong);
     * row 5: all equal (tie resolved to index 0 = label, so correct) */
    for (int c = 0; c < COLS; c++) {
        l[3 * COLS + c] = c < 2 ? 1000.0f : -1000.0f;
        l[5 * COLS + c] = 0.5f;
    }
    float stats[2] = {10.0f, 3.0f};
    ddp_err err = {0};
    CHECK(d->ops->softmax_xent(d, TENSOR_F32, l, COLS, y, ROWS, COLS, 0.5f, dl, stats, &err) == 0, "%s", err.msg);
    double loss = 0;
    int correct = 0;
    for (int r = 0; r < ROWS; r++) {
        const float *row = l + r * COLS;
        double mx = row[0], s = 0;
        int am = 0;
        for (int c = 1; c < COLS; c++)
            if (row[c] > row[am])
                am = c;
        mx = row[am];
        for (int c = 0; c < COLS; c++)
            s += exp(row[c] - mx);
        loss += mx + log(s) - row[y[r]];
        correct += am == y[r];
        for (int c = 0; c < COLS; c++) {
            double want = (exp(row[c] - mx) / s - (c == y[r])) * 0.5;
            CHECK(fabs(dl[r * COLS + c] - want) < 1e-6, "dlogits[%d,%d] = %g, expected %g", r, c, dl[r * COLS + c],
                  want);
        }
    }
    /* the two tie rows alone: row 3 (label 1) is wrong, row 5 (label 0) right */
    int32_t tie_labels[2] = {1, 0};
    float tie_rows[2 * COLS], tie_stats[2] = {0, 0};
    memcpy(tie_rows, l + 3 * COLS, sizeof(float) * COLS);
    memcpy(tie_rows + COLS, l + 5 * COLS, sizeof(float) * COLS);
    CHECK(d->ops->softmax_xent(d, TENSOR_F32, tie_rows, COLS, tie_labels, 2, COLS, 1.0f, NULL, tie_stats,
                               NULL) == 0, "ties");
    CHECK_EQ_INT(tie_stats[1], 1);
    CHECK_CLOSE(tie_stats[0], log(2.0) + log(5.0), 1e-6, 0);
    CHECK_CLOSE(stats[0], 10.0 + loss, 1e-6, 0);
    CHECK_CLOSE(stats[1], 3.0 + correct, 0, 0);
    CHECK(isfinite(stats[0]), "loss with logits of 1000 is not finite");
    /* evaluation form: no dlogits */
    float s2[2] = {0, 0};
    CHECK(d->ops->softmax_xent(d, TENSOR_F32, l, COLS, y, ROWS, COLS, 1.0f, NULL, s2, NULL) == 0, "dlogits NULL");
    CHECK_CLOSE(s2[1], correct, 0, 0);
    int32_t bad_label[ROWS] = {0, 5, 0, 0, 0, 0};
    CHECK(d->ops->softmax_xent(d, TENSOR_F32, l, COLS, bad_label, ROWS, COLS, 1.0f, NULL, s2,
                               &err) != 0, "label 5 of 5 classes accepted");
    CHECK_STR_CONTAINS(err.msg, "row 1");
    bad_label[1] = XENT_NO_TARGET - 1; /* only -1 means no target */
    CHECK(d->ops->softmax_xent(d, TENSOR_F32, l, COLS, bad_label, ROWS, COLS, 1.0f, NULL, s2,
                               &err) != 0, "label -2 accepted");
    CHECK_STR_CONTAINS(err.msg, "row 1");
    /* rows without a target (XENT_NO_TARGET: a prompt token, a document's end) add no loss and no
     * hit and get a zero gradient row, also in place over their logits: rows 0, 2, 4 among them
     * give the statistics and gradients of those three rows alone */
    int32_t some[ROWS] = {y[0], XENT_NO_TARGET, y[2], XENT_NO_TARGET, y[4], XENT_NO_TARGET};
    int32_t alone_y[3] = {y[0], y[2], y[4]};
    float alone[3 * COLS], dl_alone[3 * COLS], st_some[2] = {1.0f, 2.0f}, st_alone[2] = {1.0f, 2.0f};
    float *in_place = malloc(sizeof(float) * ROWS * COLS);
    memcpy(in_place, l, sizeof(float) * ROWS * COLS);
    for (int r = 0; r < 3; r++)
        memcpy(alone + r * COLS, l + 2 * r * COLS, sizeof(float) * COLS);
    CHECK(d->ops->softmax_xent(d, TENSOR_F32, in_place, COLS, some, ROWS, COLS, 0.5f, in_place, st_some, &err) == 0,
          "%s", err.msg);
    CHECK(d->ops->softmax_xent(d, TENSOR_F32, alone, COLS, alone_y, 3, COLS, 0.5f, dl_alone, st_alone, &err) == 0,
          "%s", err.msg);
    CHECK_CLOSE(st_some[0], st_alone[0], 1e-6, 0);
    CHECK_CLOSE(st_some[1], st_alone[1], 0, 0);
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < COLS; c++) {
            const float want = r % 2 ? 0.0f : dl_alone[r / 2 * COLS + c];
            CHECK(in_place[r * COLS + c] == want, "no-target rows: dlogits[%d,%d] = %g, expected %g", r, c,
                  in_place[r * COLS + c], want);
        }
    free(in_place);
    free(l);
}

static void test_sumsq_and_memory(device *d)
{
    enum { N = 12345 };
    float *x = random_floats(N, -3, 3);
    double want = 0, got1, got2;
    for (int i = 0; i < N; i++)
        want += (double)x[i] * x[i];
    CHECK(d->ops->sumsq(d, x, N, &got1, NULL) == 0 && d->ops->sumsq(d, x, N, &got2, NULL) == 0, "sumsq");
    CHECK_CLOSE(got1, want, 1e-12, 0);
    CHECK(got1 == got2, "sumsq not deterministic");

    void *p = NULL, *q = NULL;
    ddp_err err = {0};
    CHECK(d->ops->alloc(d, N * sizeof(float), &p, &err) == 0 && d->ops->alloc(d, 3, &q, &err) == 0, "%s", err.msg);
    CHECK((uintptr_t)p % 64 == 0 && (uintptr_t)q % 64 == 0, "alloc is not 64-byte aligned");
    float *back = malloc(N * sizeof(float));
    d->ops->upload(d, p, x, N * sizeof(float), NULL);
    d->ops->scale(d, p, N, 2.0f, NULL);
    d->ops->download(d, back, p, N * sizeof(float), NULL);
    CHECK(back[0] == 2 * x[0] && back[N - 1] == 2 * x[N - 1], "upload/scale/download");
    d->ops->fill(d, TENSOR_F32, p, N, -0.5f, NULL);
    d->ops->copy(d, back, p, N * sizeof(float), NULL);
    CHECK(back[0] == -0.5f && back[N - 1] == -0.5f, "fill/copy");
    uint8_t px[3] = {0, 51, 255};
    float f[3];
    d->ops->u8_to_f32(d, px, f, 3, 0.5f, 4.0f, NULL);
    CHECK_CLOSE(f[0], -2.0, 1e-6, 0);
    CHECK_CLOSE(f[1], (0.2 - 0.5) * 4, 1e-6, 0);
    CHECK_CLOSE(f[2], 2.0, 1e-6, 0);
    d->ops->free(d, p);
    d->ops->free(d, q);
    free(back);
    free(x);
}

/* device_memory_peak: the most bytes the live allocations held at once, on a fresh device (the
 * others' allocations here would count too), through frees and a NULL free. */
static void test_memory_peak(void)
{
    device *d = NULL;
    ddp_err err = {0};
    CHECK(device_cpu_create(&d, &err) == 0, "device_cpu_create: %s", err.msg);
    if (!d)
        return;
    CHECK(device_memory_peak(d) == 0, "a new device has held nothing");
    void *a = NULL, *b = NULL, *c = NULL, *e = NULL;
    CHECK(d->ops->alloc(d, 1000, &a, &err) == 0 && d->ops->alloc(d, 3000, &b, &err) == 0, "alloc: %s", err.msg);
    CHECK(device_memory_peak(d) == 4000, "peak after 1000 + 3000: %llu", (unsigned long long)device_memory_peak(d));
    d->ops->free(d, b);
    d->ops->free(d, NULL);
    CHECK(d->ops->alloc(d, 2000, &c, &err) == 0, "alloc: %s", err.msg);
    CHECK(device_memory_peak(d) == 4000, "3000 freed, 2000 taken: still 4000, got %llu",
          (unsigned long long)device_memory_peak(d));
    CHECK(d->ops->alloc(d, 1500, &e, &err) == 0, "alloc: %s", err.msg);
    CHECK(device_memory_peak(d) == 4500, "1000 + 2000 + 1500 at once: 4500, got %llu",
          (unsigned long long)device_memory_peak(d));
    d->ops->free(d, a);
    d->ops->free(d, c);
    d->ops->free(d, e);
    CHECK(device_memory_peak(d) == 4500, "a peak stays after frees");
    d->ops->destroy(d);
}

int main(void)
{
    rng_seed(&R, 2024, RNG_SYNTHETIC);
    device *d = NULL;
    ddp_err err = {0};
    int rc = device_cpu_create(&d, &err);
    CHECK(rc == 0, "device_cpu_create: %s", err.msg);
    if (rc)
        return check_done("test_device_cpu");
    CHECK_STR_CONTAINS(d->name, "cpu (");
    CHECK(d->kind == DEVICE_CPU && d->index == -1, "kind/index");
    fprintf(stderr, "device: %s\n", d->name);
    test_gemm(d);
    test_bias(d);
    test_bias_grad_row_order(d);
    test_activations(d);
    test_softmax_xent(d);
    test_sumsq_and_memory(d);
    test_memory_peak();
    d->ops->destroy(d);
    return check_done("test_device_cpu");
}
