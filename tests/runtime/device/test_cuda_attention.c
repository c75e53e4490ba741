/* test_cuda_attention.c — the attention family's CUDA kernels (kernels/attention.cu and
 * attention_tc.cu, run by the emulator under DDP_CUDA_EMU_ORDER, or by a GPU in the 'gpu' suite)
 * against the CPU backend's ops (attention_cpu.c, itself checked against a double reference by
 * test_attention_cpu.c), in float and in bf16.
 *
 * Each shape runs on the CPU once and on the CUDA device twice with the same fresh random inputs
 * (seed printed; DDP_TEST_SEED repeats a run). Every output starts as NaN (so an element a kernel
 * skips fails) and the two CUDA runs must give the same bits (no float atomics). Shapes: T = 1, T
 * not a multiple of the 64-row tile (17, 33, 70, 100, 130), one and several tiles, head sizes 32,
 * 64 and 128 (the tensor-core kernels in bf16), 24 (the SIMT kernels), grouped K/V heads (NKV = 1 and
 * NH / 2), the fused layout GPT-2 uses and separate tensors with spare columns per row (a row
 * stride that breaks 16-byte alignment sends bf16 to the SIMT kernels too), all of it once with
 * aligned buffers and once with every buffer one element past alignment (cuda_pair.h). Under the emulator the
 * count of mma.sync instructions proves which kernels ran.
 *
 * Tolerances: float — both sides approximate the exact result within test_attention_cpu.c's bound
 * 8·(hs^1.5 + T)·u each (u = 2^-24), so they differ by at most twice that, relative to the
 * tensor's largest element. bf16 — inputs are the same bf16 values on both sides; the GPU rounds
 * its outputs (relative 2^-9) and, as FlashAttention does, the probabilities and score gradients
 * before their products (each term relative 2^-9), so the error stays a few bf16 units of the sums'
 * magnitude: the norm of the difference must stay under 8·2^-8 = 3.1% of the CPU result's norm,
 * while a wrong fragment layout, a missing mask or a skipped rescale is off by O(1). */
#include <float.h>

#include "runtime/base/half.h"
#include "tests/runtime/device/attention_ref.h"
#include "tests/runtime/device/cuda_pair.h"
#ifdef DDP_CUDA_EMULATION
#include "tests/cudaemu/cudaemu.h"
#endif

typedef struct cuda_case {
    attn_case c;
    bool tensor_cores; /* bf16 should take the mma kernels */
} cuda_case;

static const cuda_case cases[] = {
    {{1, 1, 2, 2, 64, true, 0}, true},     {{2, 17, 2, 1, 64, true, 0}, true},
    {{1, 130, 4, 2, 64, false, 8}, true},  {{1, 64, 2, 2, 128, true, 0}, true},
    {{1, 100, 2, 2, 128, false, 0}, true}, {{2, 70, 2, 2, 32, true, 0}, true},
    {{1, 40, 2, 2, 24, false, 3}, false},  {{1, 33, 2, 2, 64, false, 4}, false},
};

/* A tensor on both devices: floats on the CPU; floats or the same values as bf16 on the GPU. */
typedef struct pair {
    float *c;
    void *g;
    size_t n;
} pair;

static pair pair_new(const float *h, size_t n, tensor_dtype t)
{
    float *vals = xmalloc(n * sizeof *vals);
    uint16_t *b16 = xmalloc(n * sizeof *b16);
    for (size_t i = 0; i < n; i++) {
        b16[i] = float_to_bf16(h ? h[i] : NAN);
        vals[i] = t == TENSOR_BF16 ? bf16_to_float(b16[i]) : (h ? h[i] : NAN);
    }
    pair p = {dev_alloc_upload(cpu, vals, n * sizeof *vals, sizeof *vals),
              t == TENSOR_BF16 ? dev_alloc_upload(gpu, b16, n * sizeof *b16, sizeof *b16)
                               : dev_alloc_upload(gpu, vals, n * 4, 4),
              n};
    free(vals);
    free(b16);
    return p;
}

static void pair_free(pair p)
{
    placed_free(cpu, p.c);
    placed_free(gpu, p.g);
}

/* The GPU's copy as floats. */
static float *gpu_floats(pair p, tensor_dtype t)
{
    float *h = xmalloc(p.n * sizeof *h);
    if (t == TENSOR_BF16) {
        uint16_t *b = xmalloc(p.n * sizeof *b);
        download(gpu, b, p.g, p.n * sizeof *b);
        for (size_t i = 0; i < p.n; i++)
            h[i] = bf16_to_float(b[i]);
        free(b);
    } else {
        download(gpu, h, p.g, p.n * sizeof *h);
    }
    return h;
}

static void *offset(const void *base, size_t elems, tensor_dtype t)
{
    return (char *)base + elems * tensor_dtype_size(t);
}

typedef struct bufs {
    pair qkv, q, k, v, dout, out, lse, dq, dk, dv; /* fused: q/k/v/dq.. unused, views of qkv/dq */
} bufs;

/* Runs forward and backward on one device; on the GPU its tensors are of type t. */
static void run(device *d, tensor_dtype t, const attn_layout *l, bool fused, const bufs *b)
{
    const bool g = d == gpu;
    void *const P[] = {g ? b->qkv.g : b->qkv.c, g ? b->q.g : b->q.c, g ? b->k.g : b->k.c, g ? b->v.g : b->v.c,
                       g ? b->dq.g : b->dq.c, g ? b->dk.g : b->dk.c, g ? b->dv.g : b->dv.c};
    const void *q = fused ? offset(P[0], l->q_off, t) : P[1], *k = fused ? offset(P[0], l->k_off, t) : P[2];
    const void *v = fused ? offset(P[0], l->v_off, t) : P[3];
    void *dq = fused ? offset(P[4], l->q_off, t) : P[4], *dk = fused ? offset(P[4], l->k_off, t) : P[5];
    void *dv = fused ? offset(P[4], l->v_off, t) : P[6];
    void *out = g ? b->out.g : b->out.c, *dout = g ? b->dout.g : b->dout.c;
    float *lse = g ? b->lse.g : b->lse.c;
    ddp_err err = {0};
    double t0 = 1e3 * monotonic_s();
    die_on(d->ops->attention_forward(d, t, &l->s, out, lse, q, k, v, &err), &err, "attention_forward");
    die_on(d->ops->attention_backward(d, t, &l->s, dq, dk, dv, dout, out, lse, q, k, v, &err), &err,
           "attention_backward");
    die_on(d->ops->synchronize(d, &err), &err, "synchronize");
    op_time_add(g ? (t == TENSOR_BF16 ? "attention bf16 (cuda)" : "attention f32 (cuda)") : "attention (cpu)",
                1e3 * monotonic_s() - t0);
}

/* Compares the GPU's result with the CPU's over the columns of the heads. */
static void compare(const char *what, pair p, tensor_dtype t, int64_t ld, int64_t width, const attn_case *c)
{
    float *hc = xmalloc(p.n * sizeof *hc), *hg = gpu_floats(p, t);
    download(cpu, hc, p.c, p.n * sizeof *hc);
    double diff2 = 0.0, ref2 = 0.0, worst = 0.0, biggest = 0.0;
    size_t nan = 0;
    for (size_t i = 0; i < p.n; i++) {
        if ((int64_t)(i % (size_t)ld) >= width)
            continue;
        double d = (double)hg[i] - (double)hc[i];
        nan += isnan(hg[i]) || isnan(hc[i]);
        diff2 += d * d;
        ref2 += (double)hc[i] * hc[i];
        worst = fabs(d) > worst ? fabs(d) : worst;
        biggest = fabs(hc[i]) > biggest ? fabs(hc[i]) : biggest;
    }
    const double u = (double)FLT_EPSILON / 2;
    if (t == TENSOR_F32) {
        double bound = 2 * 8.0 * (pow((double)c->hs, 1.5) + (double)c->T) * u, e = worst / (biggest > 0 ? biggest : 1);
        CHECK(nan == 0 && e <= bound, "f32 %s T %lld hs %lld NKV %lld: %zu NaN, largest error %.3g of the largest "
              "element (bound %.3g)", what, (long long)c->T, (long long)c->hs, (long long)c->NKV, nan, e, bound);
    } else {
        double e = sqrt(diff2 / (ref2 > 0 ? ref2 : 1)), bound = 8.0 / 256;
        CHECK(nan == 0 && e <= bound, "bf16 %s T %lld hs %lld NKV %lld: %zu NaN, error norm %.3g of the result's "
              "(bound %.3g)", what, (long long)c->T, (long long)c->hs, (long long)c->NKV, nan, e, bound);
    }
    free(hc);
    free(hg);
}

/* The GPU's outputs after a second run must equal the first run's bits. */
static void *snapshot(pair p, tensor_dtype t)
{
    size_t bytes = p.n * tensor_dtype_size(t);
    void *h = xmalloc(bytes);
    download(gpu, h, p.g, bytes);
    return h;
}

static void test_case(const cuda_case *cc, tensor_dtype t)
{
    const attn_case *c = &cc->c;
    attn_layout l = attn_layout_of(c);
    const attn_shape *s = &l.s;
    size_t qn = c->fused ? l.qkv_elems : l.q_elems, kvn = c->fused ? l.qkv_elems : l.kv_elems;
    size_t most = qn > kvn ? qn : kvn;
    float *h = xmalloc((most > l.o_elems ? most : l.o_elems) * sizeof *h);
    bufs b;
    memset(&b, 0, sizeof b);
#define RANDOM_PAIR(field, n)                                                                      \
    do {                                                                                           \
        for (size_t i = 0; i < (n); i++)                                                           \
            h[i] = rng_uniform(&test_rng, -1.0f, 1.0f);                                            \
        b.field = pair_new(h, (n), t);                                                             \
    } while (0)
    if (c->fused) {
        RANDOM_PAIR(qkv, l.qkv_elems);
        b.dq = pair_new(NULL, l.qkv_elems, t);
    } else {
        RANDOM_PAIR(q, qn);
        RANDOM_PAIR(k, kvn);
        RANDOM_PAIR(v, kvn);
        b.dq = pair_new(NULL, qn, t);
        b.dk = pair_new(NULL, kvn, t);
        b.dv = pair_new(NULL, kvn, t);
    }
    RANDOM_PAIR(dout, l.o_elems);
#undef RANDOM_PAIR
    b.out = pair_new(NULL, l.o_elems, t);
    b.lse = pair_new(NULL, l.lse_elems, TENSOR_F32);
    run(cpu, TENSOR_F32, &l, c->fused, &b);
#ifdef DDP_CUDA_EMULATION
    uint64_t mma0 = cudaemu_mma_count();
#endif
    run(gpu, t, &l, c->fused, &b);
#ifdef DDP_CUDA_EMULATION
    /* a placement off 16-byte alignment (pair_offset) sends bf16 to the SIMT kernels too */
    const bool used_mma = cudaemu_mma_count() > mma0, want_mma = t == TENSOR_BF16 && cc->tensor_cores && !pair_offset;
    CHECK(used_mma == want_mma, "T %lld hs %lld %s: the tensor-core kernels %s, expected them %s", (long long)c->T,
          (long long)c->hs, t == TENSOR_BF16 ? "bf16" : "f32", used_mma ? "ran" : "did not run",
          want_mma ? "to" : "not to");
#endif
    pair outs[] = {b.out, b.lse, b.dq, b.dk, b.dv};
    void *first[5] = {0};
    for (int i = 0; i < (c->fused ? 3 : 5); i++)
        first[i] = snapshot(outs[i], i == 1 ? TENSOR_F32 : t);
    run(gpu, t, &l, c->fused, &b);
    for (int i = 0; i < (c->fused ? 3 : 5); i++) {
        void *again = snapshot(outs[i], i == 1 ? TENSOR_F32 : t);
        CHECK(memcmp(first[i], again, outs[i].n * tensor_dtype_size(i == 1 ? TENSOR_F32 : t)) == 0,
              "T %lld hs %lld: output %d differs between two CUDA runs", (long long)c->T, (long long)c->hs, i);
        free(first[i]);
        free(again);
    }
    compare("out", b.out, t, s->ld_o, c->NH * c->hs, c);
    compare("lse", b.lse, TENSOR_F32, 1, 1, c);
    if (c->fused) {
        compare("dq|dk|dv", b.dq, t, s->ld_q, s->ld_q, c);
    } else {
        compare("dq", b.dq, t, s->ld_q, c->NH * c->hs, c);
        compare("dk", b.dk, t, s->ld_kv, c->NKV * c->hs, c);
        compare("dv", b.dv, t, s->ld_kv, c->NKV * c->hs, c);
    }
    pair all[] = {b.qkv, b.q, b.k, b.v, b.dout, b.out, b.lse, b.dq, b.dk, b.dv};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i].n)
            pair_free(all[i]);
    free(h);
}

static void run_all(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        test_case(&cases[i], TENSOR_F32);
        test_case(&cases[i], TENSOR_BF16);
    }
}

/* DDP_TEST_ATTENTION_LONG (a real GPU: scripts/gpu-check): T 20000 against the CPU, and T 65536,
 * whose first 4096 rows of out, lse and dq depend only on the first 4096 keys (causal), so they
 * must equal, bit for bit, what the same kernels give at T 4096 on the same tensors; every output
 * of the long run must be finite. */
static void run_long(void)
{
    if (!getenv("DDP_TEST_ATTENTION_LONG") || pair_offset)
        return;
    const cuda_case c20k = {{1, 20000, 2, 1, 64, true, 0}, true};
    test_case(&c20k, TENSOR_BF16);
    const attn_case big = {1, 65536, 2, 1, 64, true, 0};
    attn_layout l = attn_layout_of(&big);
    const size_t es = sizeof(uint16_t), rows_short = 4096;
    float *h = xmalloc(l.qkv_elems * sizeof *h);
    for (size_t i = 0; i < l.qkv_elems; i++)
        h[i] = rng_uniform(&test_rng, -1.0f, 1.0f);
    bufs b;
    memset(&b, 0, sizeof b);
    b.qkv = pair_new(h, l.qkv_elems, TENSOR_BF16);
    b.dq = pair_new(NULL, l.qkv_elems, TENSOR_BF16);
    b.dout = pair_new(h, l.o_elems, TENSOR_BF16);
    b.out = pair_new(NULL, l.o_elems, TENSOR_BF16);
    b.lse = pair_new(NULL, l.lse_elems, TENSOR_F32);
    run(gpu, TENSOR_BF16, &l, true, &b);
    float *out_long = gpu_floats(b.out, TENSOR_BF16), *dq_long = gpu_floats(b.dq, TENSOR_BF16);
    float *lse_long = gpu_floats(b.lse, TENSOR_F32);
    size_t bad = 0;
    for (size_t i = 0; i < l.o_elems; i++)
        bad += !isfinite(out_long[i]);
    for (size_t i = 0; i < l.qkv_elems; i++)
        bad += !isfinite(dq_long[i]);
    CHECK(bad == 0, "T 65536: %zu outputs are not finite", bad);
    attn_layout ls = l;
    ls.s.T = (int64_t)rows_short;
    run(gpu, TENSOR_BF16, &ls, true, &b);
    float *out_short = gpu_floats(b.out, TENSOR_BF16), *dq_short = gpu_floats(b.dq, TENSOR_BF16);
    float *lse_short = gpu_floats(b.lse, TENSOR_F32);
    CHECK(memcmp(out_short, out_long, rows_short * (size_t)l.s.ld_o * sizeof(float)) == 0,
          "T 65536: the first 4096 rows of out differ from a T 4096 run");
    size_t dq_diff = 0; /* the fused gradient's rows hold dq, then dk and dv, which do depend on later rows */
    for (size_t r = 0; r < rows_short; r++)
        dq_diff += memcmp(dq_short + r * (size_t)l.s.ld_q, dq_long + r * (size_t)l.s.ld_q,
                          (size_t)(l.s.NH * l.s.hs) * sizeof(float)) != 0;
    CHECK(dq_diff == 0, "T 65536: %zu of the first 4096 rows of dq differ from a T 4096 run", dq_diff);
    for (int64_t h2 = 0; h2 < l.s.NH; h2++)
        CHECK(memcmp(lse_short + h2 * (int64_t)rows_short, lse_long + h2 * l.s.T, rows_short * sizeof(float)) == 0,
              "T 65536: head %lld's first 4096 log-sum-exps differ from a T 4096 run", (long long)h2);
    (void)es;
    free(out_long);
    free(dq_long);
    free(lse_long);
    free(out_short);
    free(dq_short);
    free(lse_short);
    free(h);
    pair all[] = {b.qkv, b.dq, b.dout, b.out, b.lse};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        pair_free(all[i]);
}

int main(void)
{
    const pair_group groups[] = {{"attention", run_all}, {"long sequences", run_long}};
    return pair_main("test_cuda_attention", 31, groups, 2, 2);
}
