/* test_cuda_attention.c — the attention family's CUDA kernels (kernels/attention.cu, attention_tc.cu
 * and Hopper's attention_wgmma.cu and attention_tma.cu, run by the emulator under
 * DDP_CUDA_EMU_ORDER, or by a GPU in the 'gpu' suite) against the CPU backend's ops (attention_cpu.c, itself checked against a double reference by
 * test_attention_cpu.c), in float and in bf16.
 *
 * Each shape runs on the CPU once and on the CUDA device twice with the same fresh random inputs
 * (seed printed; DDP_TEST_SEED repeats a run). Every output starts as NaN (so an element a kernel
 * skips fails) and the two CUDA runs must give the same bits (no float atomics). Shapes: T = 1, T
 * not a multiple of the 64-row tile (17, 33, 70, 100, 130, 300), one and several tiles (T 300: a
 * block walks five key tiles, so each of a three-stage pipeline's buffers is reused), head sizes 32,
 * 64 and 128 (the tensor-core kernels in bf16), 24 (the SIMT kernels), grouped K/V heads (NKV = 1 and
 * NH / 2), the fused layout GPT-2 uses and separate tensors with spare columns per row (a row
 * stride that breaks 16-byte alignment sends bf16 to the SIMT kernels too), all of it once with
 * aligned buffers and once with every buffer one element past alignment (cuda_pair.h). Under the
 * emulator the counts of mma.sync and wgmma instructions and of TMA boxes prove which kernels ran
 * (on an emulated H100 the warp-specialised kernels, or under DDP_ATTENTION_TMA=0 the cp.async
 * ones).
 *
 * Packed rows (attn_shape's doc_start, doc_end; the CPU op is checked per document against the
 * double reference): the same comparisons on the tensor-core kernels at hs 64 (a query tile of 128
 * rows), 128 and 32 and on the SIMT kernels, with GQA, documents of length 1, documents that start
 * inside a tile and cross into the next, query tiles whose first key tile is skipped, key tiles
 * whose dK/dV walk stops before T, T not a multiple of the tile, and rows of a batch packed
 * differently. New values of q, k and v in one document leave every other document's outputs and
 * gradients with their bits, and rows that are one document each give plain causal rows' bits.
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

/* packed rows' document lengths (attn_docs_fill): starts inside a tile, lengths 1, documents
 * across tile boundaries, the next row going on where the list left off; at hs 128 (T 150, three
 * key tiles) key tile 0's walk ends at query tile 1; T 260 in documents at 70, 130 and 220, where
 * Hopper's dK/dV block of keys 0-127 stops at query tile 2 of 5 and query tile 3 skips two key
 * tiles; every row one document; every position its own */
static const int32_t docs_mixed[] = {5, 1, 60, 17, 64, 3, 40, 0}, docs_long[] = {20, 50, 1, 7, 64, 0};
static const int32_t docs_blocks[] = {70, 60, 90, 0};
static const int32_t docs_whole[] = {INT32_MAX, 0}, docs_ones[] = {1, 0};

static const cuda_case cases[] = {
    {{1, 1, 2, 2, 64, true, 0, NULL}, true},     {{2, 17, 2, 1, 64, true, 0, NULL}, true},
    {{1, 130, 4, 2, 64, false, 8, NULL}, true},  {{1, 64, 2, 2, 128, true, 0, NULL}, true},
    {{1, 100, 2, 2, 128, false, 0, NULL}, true}, {{2, 70, 2, 2, 32, true, 0, NULL}, true},
    {{1, 40, 2, 2, 24, false, 3, NULL}, false},  {{1, 33, 2, 2, 64, false, 4, NULL}, false},
    {{2, 130, 4, 2, 64, false, 8, docs_mixed}, true}, {{1, 150, 2, 1, 128, true, 0, docs_long}, true},
    {{1, 70, 2, 2, 32, true, 0, docs_ones}, true},    {{2, 40, 2, 1, 24, false, 3, docs_mixed}, false},
    {{2, 65, 2, 2, 64, true, 0, docs_whole}, true},   {{1, 260, 2, 1, 128, false, 0, docs_blocks}, true},
    {{1, 300, 2, 1, 64, false, 0, NULL}, true},
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
    const int32_t *doc_start[2], *doc_end[2];      /* packed rows on the CPU, the GPU; or NULL */
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
    attn_shape s = l->s;
    s.doc_start = b->doc_start[g];
    s.doc_end = b->doc_end[g];
    ddp_err err = {0};
    double t0 = 1e3 * monotonic_s();
    die_on(d->ops->attention_forward(d, t, &s, out, lse, q, k, v, &err), &err, "attention_forward");
    die_on(d->ops->attention_backward(d, t, &s, dq, dk, dv, dout, out, lse, q, k, v, &err), &err,
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
        CHECK(nan == 0 && e <= bound, "f32 %s T %lld hs %lld NKV %lld%s: %zu NaN, largest error %.3g of the largest "
              "element (bound %.3g)", what, (long long)c->T, (long long)c->hs, (long long)c->NKV,
              c->docs ? " packed" : "", nan, e, bound);
    } else {
        double e = sqrt(diff2 / (ref2 > 0 ? ref2 : 1)), bound = 8.0 / 256;
        CHECK(nan == 0 && e <= bound, "bf16 %s T %lld hs %lld NKV %lld%s: %zu NaN, error norm %.3g of the result's "
              "(bound %.3g)", what, (long long)c->T, (long long)c->hs, (long long)c->NKV, c->docs ? " packed" : "",
              nan, e, bound);
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

/* New random values (of type t) in every column of positions [t0, t1) of row b0 of a token-major
 * input's GPU copy. */
static void scramble(pair p, tensor_dtype t, int64_t ld, int64_t T, int64_t b0, int64_t t0, int64_t t1)
{
    const size_t es = tensor_dtype_size(t), from = (size_t)((b0 * T + t0) * ld), n = (size_t)((t1 - t0) * ld);
    char *h = xmalloc(n * es);
    for (size_t i = 0; i < n; i++) {
        const float x = rng_uniform(&test_rng, -1.0f, 1.0f);
        const uint16_t x16 = float_to_bf16(x);
        memcpy(h + i * es, t == TENSOR_BF16 ? (const void *)&x16 : (const void *)&x, es);
    }
    ddp_err err = {0};
    die_on(gpu->ops->upload(gpu, (char *)p.g + from * es, h, n * es, &err), &err, "upload");
    free(h);
}

/* Packed rows on the GPU: rows of one whole document each give plain causal rows' bits; new q, k
 * and v in the document of row B-1 that holds position (T-1)/2 leave every other position's
 * outputs and gradients as they were (attn_changed_outside). Leaves the inputs changed. */
static void check_packing(const attn_case *c, tensor_dtype t, const attn_layout *l, const bufs *b,
                          const int32_t *hds, const int32_t *hde)
{
    const pair outs[] = {b->out, b->lse, b->dq, b->dk, b->dv};
    const int64_t lds[] = {l->s.ld_o, 1, l->s.ld_q, l->s.ld_kv, l->s.ld_kv};
    const int n_outs = c->fused ? 3 : 5;
    float *before[5];
    for (int i = 0; i < n_outs; i++)
        before[i] = gpu_floats(outs[i], i == 1 ? TENSOR_F32 : t);
    bool whole = true;
    for (int64_t i = 0; i < c->B * c->T; i++)
        whole = whole && hds[i] == 0;
    if (whole) {
        bufs plain = *b;
        plain.doc_start[1] = plain.doc_end[1] = NULL;
        run(gpu, t, l, c->fused, &plain);
        for (int i = 0; i < n_outs; i++) {
            float *got = gpu_floats(outs[i], i == 1 ? TENSOR_F32 : t);
            CHECK(memcmp(got, before[i], outs[i].n * sizeof *got) == 0, "%s T %lld hs %lld: rows of one document "
                  "each: output %d differs from plain causal rows", t == TENSOR_BF16 ? "bf16" : "f32", (long long)c->T,
                  (long long)c->hs, i);
            free(got);
        }
    }
    const int64_t b0 = c->B - 1, mid = b0 * c->T + (c->T - 1) / 2, t0 = hds[mid], t1 = hde[mid];
    if (c->fused) {
        scramble(b->qkv, t, l->s.ld_q, c->T, b0, t0, t1);
    } else {
        scramble(b->q, t, l->s.ld_q, c->T, b0, t0, t1);
        scramble(b->k, t, l->s.ld_kv, c->T, b0, t0, t1);
        scramble(b->v, t, l->s.ld_kv, c->T, b0, t0, t1);
    }
    run(gpu, t, l, c->fused, b);
    for (int i = 0; i < n_outs; i++) {
        float *got = gpu_floats(outs[i], i == 1 ? TENSOR_F32 : t);
        size_t changed = attn_changed_outside(got, before[i], outs[i].n, &l->s, lds[i], i == 1, b0, t0, t1);
        CHECK(changed == 0, "%s T %lld hs %lld: new values in document [%lld, %lld) of row %lld changed %zu elements "
              "of output %d elsewhere", t == TENSOR_BF16 ? "bf16" : "f32", (long long)c->T, (long long)c->hs,
              (long long)t0, (long long)t1, (long long)b0, changed, i);
        free(got);
        free(before[i]);
    }
}

#ifdef DDP_CUDA_EMULATION
/* The warp-wide mma.sync instructions the tensor-core kernels (attention_tc.cu) execute for a
 * forward and backward, or on Hopper at hs 64 and 128 the wgmma ones (attention_wgmma.cu): the tiles
 * each block walks times the instructions per tile of a warp.
 *   mma.sync (4 warps a block): the forward (query tiles of 64·M rows, M = 2 at hs <= 64) walks key
 *   tiles of 64 from its first row's document start to its last row, hs·M each; dK/dV walks, per key
 *   tile of 64 and query head, query tiles of 64 from its own to its last key's document end, 2·hs
 *   each; dQ (query tiles of 64) walks key tiles as the forward does, 3·hs/2 each.
 *   wgmma (8 warps a block of 128 rows): the forward walks as above, hs/16 for S and 4 for P·V; dQ
 *   the same tiles, hs/16 each for S and dP and 4 for dS·K; dK/dV, per 128 keys and query head,
 *   query tiles of 64 from the one holding its first key to its last key's document end, hs/16 each
 *   for Sᵀ and dPᵀ and 4 each for dV and dK.
 * Packed rows must skip exactly the tiles no row of the block sees: the time packing saves. */
static void tc_counts_expected(const attn_case *c, const int32_t *doc_start, const int32_t *doc_end, bool hopper,
                               uint64_t *mma, uint64_t *wgmma, uint64_t *tma)
{
    const bool wg = hopper && (c->hs == 64 || c->hs == 128);
    const int64_t M = c->hs <= 64 ? 2 : 1, T = c->T, tile = 64, q_tile = wg ? 128 : tile * M, k_tile = wg ? 128 : 64;
    uint64_t fwd = 0, dkdv = 0, dq = 0;
    for (int64_t b = 0; b < c->B; b++) {
        const int32_t *ds = doc_start ? doc_start + b * T : NULL, *de = doc_end ? doc_end + b * T : NULL;
        for (int64_t q0 = 0; q0 < T; q0 += q_tile) {
            const int64_t last = ((q0 + q_tile < T ? q0 + q_tile : T) - 1) / tile;
            fwd += (uint64_t)(last - (ds ? ds[q0] : 0) / tile + 1);
        }
        for (int64_t k0 = 0; k0 < T; k0 += k_tile) {
            const int64_t end = de ? de[(k0 + k_tile < T ? k0 + k_tile : T) - 1] : T;
            dkdv += (uint64_t)((end + tile - 1) / tile - k0 / tile);
        }
        for (int64_t q0 = 0; q0 < T; q0 += tile)
            dq += (uint64_t)(q0 / tile - (ds ? ds[q0] : 0) / tile + 1);
    }
    const uint64_t hs = (uint64_t)c->hs, NH = (uint64_t)c->NH;
    *mma = wg ? 0 : 4 * NH * (fwd * hs * (uint64_t)M + dq * 3 * hs / 2 + dkdv * 2 * hs);
    /* dQ walks the forward's tiles */
    *wgmma = wg ? 8 * NH * (fwd * ((hs / 16 + 4) + (2 * hs / 16 + 4)) + dkdv * (2 * hs / 16 + 8)) : 0;
    /* the warp-specialised kernels, boxes of 64 columns: the forward and dQ, whose blocks walk the same
     * key tiles, per block Q's boxes (and dO's in dQ) and per key tile K's and V's; dK/dV per block
     * K's and V's 128 rows as two boxes each, per item (query tile) Q's and dO's */
    const char *tma_env = getenv("DDP_ATTENTION_TMA");
    const uint64_t q_blocks = (uint64_t)(c->B * ((T + 127) / 128));
    *tma = wg && !(tma_env && !strcmp(tma_env, "0")) ? (hs / 64) * (NH * (3 * q_blocks + 4 * fwd + 2 * dkdv) + 4 * (uint64_t)c->NKV * q_blocks) : 0;
}
#endif

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
    const size_t tokens = (size_t)(c->B * c->T);
    int32_t *hds = NULL, *hde = NULL;
    if (c->docs) {
        hds = xmalloc(tokens * sizeof *hds);
        hde = xmalloc(tokens * sizeof *hde);
        attn_docs_fill(c, hds, hde);
        for (int g = 0; g < 2; g++) {
            b.doc_start[g] = dev_alloc_upload(g ? gpu : cpu, hds, tokens * sizeof *hds, sizeof *hds);
            b.doc_end[g] = dev_alloc_upload(g ? gpu : cpu, hde, tokens * sizeof *hde, sizeof *hde);
        }
    }
    run(cpu, TENSOR_F32, &l, c->fused, &b);
#ifdef DDP_CUDA_EMULATION
    uint64_t mma0 = cudaemu_mma_count(), wgmma0 = cudaemu_wgmma_count(), tma0 = cudaemu_tma_count();
#endif
    run(gpu, t, &l, c->fused, &b);
#ifdef DDP_CUDA_EMULATION
    /* a placement off 16-byte alignment (pair_offset) sends bf16 to the SIMT kernels too */
    const bool used_mma = cudaemu_mma_count() + cudaemu_wgmma_count() > mma0 + wgmma0;
    const bool want_mma = t == TENSOR_BF16 && cc->tensor_cores && !pair_offset;
    CHECK(used_mma == want_mma, "T %lld hs %lld %s: the tensor-core kernels %s, expected them %s", (long long)c->T,
          (long long)c->hs, t == TENSOR_BF16 ? "bf16" : "f32", used_mma ? "ran" : "did not run",
          want_mma ? "to" : "not to");
    int major = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
    uint64_t mma_want = 0, wgmma_want = 0, tma_want = 0;
    tc_counts_expected(c, hds, hde, major == 9, &mma_want, &wgmma_want, &tma_want);
    const uint64_t mma = cudaemu_mma_count() - mma0, wgmma = cudaemu_wgmma_count() - wgmma0;
    const uint64_t tma = cudaemu_tma_count() - tma0;
    CHECK(tma == (want_mma ? tma_want : 0), "T %lld hs %lld%s on sm_%d0: the kernels issued %llu TMA boxes, "
          "expected %llu (DDP_ATTENTION_TMA=0 or before Hopper: none)", (long long)c->T, (long long)c->hs,
          c->docs ? " packed" : "", major, (unsigned long long)tma, (unsigned long long)(want_mma ? tma_want : 0));
    CHECK(!want_mma || (mma == mma_want && wgmma == wgmma_want), "T %lld hs %lld%s on sm_%d0: the tensor-core "
          "kernels took %llu mma and %llu wgmma instructions, expected %llu and %llu (the tiles they walk)",
          (long long)c->T, (long long)c->hs, c->docs ? " packed" : "", major, (unsigned long long)mma,
          (unsigned long long)wgmma, (unsigned long long)mma_want, (unsigned long long)wgmma_want);
    CHECK(want_mma || wgmma == 0, "T %lld hs %lld: Hopper's kernels ran where the tensor-core kernels may not",
          (long long)c->T, (long long)c->hs);
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
    if (c->docs) {
        check_packing(c, t, &l, &b, hds, hde);
        for (int g = 0; g < 2; g++) {
            placed_free(g ? gpu : cpu, (void *)b.doc_start[g]);
            placed_free(g ? gpu : cpu, (void *)b.doc_end[g]);
        }
        free(hds);
        free(hde);
    }
    pair all[] = {b.qkv, b.q, b.k, b.v, b.dout, b.out, b.lse, b.dq, b.dk, b.dv};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i].n)
            pair_free(all[i]);
    free(h);
}

/* Every case in bf16, then every case in float: a defect of the tensor-core kernels (most of
 * scripts/mutation-check's) fails before the float cases, the slower ones on the emulator, run. */
static void run_all(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        test_case(&cases[i], TENSOR_BF16);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        test_case(&cases[i], TENSOR_F32);
}

/* DDP_TEST_ATTENTION_LONG (a real GPU: scripts/gpu-check): T 20000 against the CPU, and T 65536,
 * whose first 4096 rows of out, lse and dq depend only on the first 4096 keys (causal), so they
 * must equal, bit for bit, what the same kernels give at T 4096 on the same tensors; every output
 * of the long run must be finite. */
static void run_long(void)
{
    if (!getenv("DDP_TEST_ATTENTION_LONG") || pair_offset)
        return;
    const cuda_case c20k = {{1, 20000, 2, 1, 64, true, 0, NULL}, true};
    test_case(&c20k, TENSOR_BF16);
    const attn_case big = {1, 65536, 2, 1, 64, true, 0, NULL};
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
