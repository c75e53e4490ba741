/* transformer_cpu.c — CPU implementations of the GPT-2 device ops declared in transformer_cpu.h:
 * embeddings, LayerNorm, the attention permutes and causal softmax, strided batched GEMM through
 * oneDNN, tanh-GELU, the residual add and the fused classifier over a padded vocabulary.
 *
 * Determinism is the design rule: OpenMP only splits independent outputs (rows, or column
 * blocks whose sums each walk every row in order), each reduction runs in one fixed order and
 * long sums run in double (dwte's scatter-add, in position order, is the documented exception),
 * so no result depends on the thread count and there are no float atomics. This file must not validate arguments (the dispatch layer does), allocate memory,
 * set thread counts, or know about models, ranks or the device vtable. */
#include "transformer_cpu.h"

#include "cpu_kernel.h"

#include <math.h>
#include <string.h>

#include <oneapi/dnnl/dnnl.h>

/* Width of the column blocks that column-sum loops give each thread: 64 double accumulators
 * (512 bytes) stay in L1, and 64 floats are whole cache lines of every row they read. */
#define COL_BLOCK 64

/* Rows of the classifier processed between two serial loss summations (stack arrays). */
#define XENT_ROW_BLOCK 256

static inline int64_t min_i64(int64_t a, int64_t b) { return a < b ? a : b; }

/* dst[c] += Σ_r src[r·stride + c] for c < cols, each sum in double over r in order, rounded
 * once into dst. */
static void add_column_sums(float *restrict dst, const float *restrict src, int64_t rows, int64_t stride,
                            int64_t cols)
{
    double acc[COL_BLOCK];
    for (int64_t c0 = 0; c0 < cols; c0 += COL_BLOCK) {
        int64_t w = min_i64(COL_BLOCK, cols - c0);
        for (int64_t j = 0; j < w; j++)
            acc[j] = 0.0;
        for (int64_t r = 0; r < rows; r++) {
            const float *restrict row = src + r * stride + c0;
            for (int64_t j = 0; j < w; j++)
                acc[j] += row[j];
        }
        for (int64_t j = 0; j < w; j++)
            dst[c0 + j] = (float)((double)dst[c0 + j] + acc[j]);
    }
}

/* ---- embeddings ------------------------------------------------------------------------ */

void cpu_embedding_forward(float *restrict out, const int32_t *restrict tokens, const float *restrict wte,
                           const float *restrict wpe, int64_t B, int64_t T, int64_t C)
{
    DDP_PARALLEL_FOR(B * T * C)
    for (int64_t bt = 0; bt < B * T; bt++) {
        const float *restrict te = wte + (int64_t)tokens[bt] * C;
        const float *restrict pe = wpe + (bt % T) * C;
        float *restrict o = out + bt * C;
        for (int64_t c = 0; c < C; c++)
            o[c] = te[c] + pe[c];
    }
}

/* A token can occur at many positions, so rows of dwte are not independent outputs; columns
 * are. Each thread owns column blocks and walks every position in order: the additions into a
 * dwte entry happen in the same order for any thread count. They stay in float because a double
 * copy of dwte would need a [V,C] scratch this layer does not own. */
static void embedding_backward_wte(float *restrict dwte, const float *restrict dout, const int32_t *restrict tokens,
                                   int64_t BT, int64_t C)
{
    int64_t nblocks = (C + COL_BLOCK - 1) / COL_BLOCK;
    DDP_PARALLEL_FOR(BT * C)
    for (int64_t blk = 0; blk < nblocks; blk++) {
        int64_t c0 = blk * COL_BLOCK, c1 = min_i64(c0 + COL_BLOCK, C);
        for (int64_t bt = 0; bt < BT; bt++) {
            float *restrict dst = dwte + (int64_t)tokens[bt] * C;
            const float *restrict src = dout + bt * C;
            for (int64_t c = c0; c < c1; c++)
                dst[c] += src[c];
        }
    }
}

void cpu_embedding_backward(float *restrict dwte, float *restrict dwpe, const float *restrict dout,
                            const int32_t *restrict tokens, int64_t B, int64_t T, int64_t C)
{
    embedding_backward_wte(dwte, dout, tokens, B * T, C);
    /* position t's rows are dout[b,t,:] for every b: stride T·C */
    DDP_PARALLEL_FOR(B * T * C)
    for (int64_t t = 0; t < T; t++)
        add_column_sums(dwpe + t * C, dout + t * C, B, T * C, C);
}

/* ---- LayerNorm --------------------------------------------------------------------------- */

/* Two passes in double (mean, then the centred second moment) so the variance never suffers the
 * E[x²] - E[x]² cancellation, and the output is rounded to float once. */
static void layernorm_row(float *restrict out, float *restrict mean, float *restrict rstd, const float *restrict x,
                          const float *restrict w, const float *restrict b, int64_t C)
{
    double sum = 0.0;
    for (int64_t c = 0; c < C; c++)
        sum += x[c];
    double m = sum / (double)C, var = 0.0;
    for (int64_t c = 0; c < C; c++) {
        double d = (double)x[c] - m;
        var += d * d;
    }
    double r = 1.0 / sqrt(var / (double)C + CPU_LAYERNORM_EPS);
    for (int64_t c = 0; c < C; c++)
        out[c] = (float)(((double)x[c] - m) * r * (double)w[c] + (double)b[c]);
    *mean = (float)m;
    *rstd = (float)r;
}

void cpu_layernorm_forward(float *restrict out, float *restrict mean, float *restrict rstd, const float *restrict inp,
                           const float *restrict w, const float *restrict b, int64_t N, int64_t C)
{
    DDP_PARALLEL_FOR(N * C)
    for (int64_t r = 0; r < N; r++)
        layernorm_row(out + r * C, mean + r, rstd + r, inp + r * C, w, b, C);
}

/* dinp += rstd·(dn - mean(dn) - x̂·mean(dn·x̂)) with dn = dout·w: the standard LayerNorm input
 * gradient. x̂ is rebuilt from the saved float statistics (the forward's double ones are gone);
 * their rounding moves x̂ by about an ulp, within the float noise of the inputs. */
static void layernorm_backward_row(float *restrict dinp, const float *restrict dout, const float *restrict x,
                                   const float *restrict w, double m, double r, int64_t C)
{
    double sum_dn = 0.0, sum_dn_xhat = 0.0;
    for (int64_t c = 0; c < C; c++) {
        double dn = (double)dout[c] * (double)w[c];
        sum_dn += dn;
        sum_dn_xhat += dn * (((double)x[c] - m) * r);
    }
    double mean_dn = sum_dn / (double)C, mean_dn_xhat = sum_dn_xhat / (double)C;
    for (int64_t c = 0; c < C; c++) {
        double dn = (double)dout[c] * (double)w[c], xhat = ((double)x[c] - m) * r;
        dinp[c] = (float)((double)dinp[c] + r * (dn - mean_dn - xhat * mean_dn_xhat));
    }
}

/* dw and db sum over rows, so threads own column blocks (each walks every row in order) rather
 * than rows: deterministic without atomics or a per-thread scratch. */
static void layernorm_backward_params(float *restrict dw, float *restrict db, const float *restrict dout,
                                      const float *restrict inp, const float *restrict mean,
                                      const float *restrict rstd, int64_t N, int64_t C)
{
    int64_t nblocks = (C + COL_BLOCK - 1) / COL_BLOCK;
    DDP_PARALLEL_FOR(N * C)
    for (int64_t blk = 0; blk < nblocks; blk++) {
        int64_t c0 = blk * COL_BLOCK, w = min_i64(COL_BLOCK, C - c0);
        double acc_w[COL_BLOCK] = {0}, acc_b[COL_BLOCK] = {0};
        for (int64_t r = 0; r < N; r++) {
            const float *restrict d = dout + r * C + c0, *restrict x = inp + r * C + c0;
            double m = mean[r], s = rstd[r];
            for (int64_t j = 0; j < w; j++) {
                acc_w[j] += (double)d[j] * (((double)x[j] - m) * s);
                acc_b[j] += (double)d[j];
            }
        }
        for (int64_t j = 0; j < w; j++) {
            dw[c0 + j] = (float)((double)dw[c0 + j] + acc_w[j]);
            db[c0 + j] = (float)((double)db[c0 + j] + acc_b[j]);
        }
    }
}

void cpu_layernorm_backward(float *restrict dinp, float *restrict dw, float *restrict db, const float *restrict dout,
                            const float *restrict inp, const float *restrict w, const float *restrict mean,
                            const float *restrict rstd, int64_t N, int64_t C)
{
    DDP_PARALLEL_FOR(N * C)
    for (int64_t r = 0; r < N; r++)
        layernorm_backward_row(dinp + r * C, dout + r * C, inp + r * C, w, mean[r], rstd[r], C);
    layernorm_backward_params(dw, db, dout, inp, mean, rstd, N, C);
}

/* ---- attention: head permutes ------------------------------------------------------------ */

/* heads[b,h,t,:] = tok[b,t, off + h·hs ..] for a token-major tensor with rows of ld floats.
 * One (b,h,t) row of hs floats per iteration; rows are independent. */
static void gather_heads(float *restrict heads, const float *restrict tok, int64_t ld, int64_t off, int64_t B,
                         int64_t T, int64_t NH, int64_t hs)
{
    DDP_PARALLEL_FOR(B * NH * T * hs)
    for (int64_t bht = 0; bht < B * NH * T; bht++) {
        int64_t b = bht / (NH * T), h = bht / T % NH, t = bht % T;
        memcpy(heads + bht * hs, tok + (b * T + t) * ld + off + h * hs, (size_t)hs * sizeof(float));
    }
}

/* The inverse of gather_heads: tok[b,t, off + h·hs ..] = heads[b,h,t,:]. */
static void scatter_heads(float *restrict tok, const float *restrict heads, int64_t ld, int64_t off, int64_t B,
                          int64_t T, int64_t NH, int64_t hs)
{
    DDP_PARALLEL_FOR(B * NH * T * hs)
    for (int64_t bht = 0; bht < B * NH * T; bht++) {
        int64_t b = bht / (NH * T), h = bht / T % NH, t = bht % T;
        memcpy(tok + (b * T + t) * ld + off + h * hs, heads + bht * hs, (size_t)hs * sizeof(float));
    }
}

void cpu_attention_split_heads(float *restrict q, float *restrict k, float *restrict v, const float *restrict qkv,
                               int64_t B, int64_t T, int64_t NH, int64_t hs)
{
    int64_t C = NH * hs;
    gather_heads(q, qkv, 3 * C, 0, B, T, NH, hs);
    gather_heads(k, qkv, 3 * C, C, B, T, NH, hs);
    gather_heads(v, qkv, 3 * C, 2 * C, B, T, NH, hs);
}

void cpu_attention_merge_heads_grad(float *restrict dqkv, const float *restrict dq, const float *restrict dk,
                                    const float *restrict dv, int64_t B, int64_t T, int64_t NH, int64_t hs)
{
    int64_t C = NH * hs;
    scatter_heads(dqkv, dq, 3 * C, 0, B, T, NH, hs);
    scatter_heads(dqkv, dk, 3 * C, C, B, T, NH, hs);
    scatter_heads(dqkv, dv, 3 * C, 2 * C, B, T, NH, hs);
}

void cpu_attention_merge_heads(float *restrict out, const float *restrict y, int64_t B, int64_t T, int64_t NH,
                               int64_t hs)
{
    scatter_heads(out, y, NH * hs, 0, B, T, NH, hs);
}

void cpu_attention_split_heads_grad(float *restrict dy, const float *restrict dout, int64_t B, int64_t T,
                                    int64_t NH, int64_t hs)
{
    gather_heads(dy, dout, NH * hs, 0, B, T, NH, hs);
}

/* ---- attention: causal softmax ----------------------------------------------------------- */

/* Row t of one head: only columns 0..t are read. The exponentials are float (expf is within an
 * ulp), their sum is double, and the row max keeps every exponent <= 0 so nothing overflows. */
static void causal_softmax_row(float *restrict att, const float *restrict pre, float scale, int64_t t, int64_t T)
{
    float mx = -INFINITY;
    for (int64_t j = 0; j <= t; j++)
        mx = fmaxf(mx, scale * pre[j]);
    double sum = 0.0;
    for (int64_t j = 0; j <= t; j++) {
        att[j] = expf(scale * pre[j] - mx);
        sum += att[j];
    }
    double inv = 1.0 / sum;
    for (int64_t j = 0; j <= t; j++)
        att[j] = (float)((double)att[j] * inv);
    for (int64_t j = t + 1; j < T; j++)
        att[j] = 0.0f;
}

void cpu_causal_softmax_forward(float *restrict att, const float *restrict preatt, float scale, int64_t BH,
                                int64_t T)
{
    DDP_PARALLEL_FOR(BH * T * T)
    for (int64_t row = 0; row < BH * T; row++)
        causal_softmax_row(att + row * T, preatt + row * T, scale, row % T, T);
}

/* softmax backward: dpre_j = scale·att_j·(datt_j - Σ_k att_k·datt_k), the dot in double. */
static void causal_softmax_backward_row(float *restrict dpre, const float *restrict datt, const float *restrict att,
                                        double scale, int64_t t, int64_t T)
{
    double dot = 0.0;
    for (int64_t j = 0; j <= t; j++)
        dot += (double)att[j] * (double)datt[j];
    for (int64_t j = 0; j <= t; j++)
        dpre[j] = (float)(scale * (double)att[j] * ((double)datt[j] - dot));
    for (int64_t j = t + 1; j < T; j++)
        dpre[j] = 0.0f;
}

void cpu_causal_softmax_backward(float *restrict dpreatt, const float *restrict datt, const float *restrict att,
                                 float scale, int64_t BH, int64_t T)
{
    DDP_PARALLEL_FOR(BH * T * T)
    for (int64_t row = 0; row < BH * T; row++)
        causal_softmax_backward_row(dpreatt + row * T, datt + row * T, att + row * T, scale, row % T, T);
}

/* ---- strided batched GEMM ---------------------------------------------------------------- */

/* One dnnl_sgemm per batch entry inside an OpenMP loop over the batch, chosen over a oneDNN
 * matmul primitive with a batch dimension. `test_transformer_cpu --bench` times the six
 * attention GEMMs of a layer (forward and backward) at batch 8·6 = 48 on the project's 2-vCPU
 * AMD EPYC (AVX2) VM with oneDNN 2.6.3; best of 7, ms, sgemm loop vs primitive, quietest runs
 * (the vCPUs are shared, so runs vary by ±10% and more under load):
 *   T=256 hs=64: 1 thread 37.4 vs 37.4, 2 threads 24.0 vs 23.1  (a tie within noise)
 *   T=64  hs=16: 1 thread 0.59 vs 0.66, 2 threads 0.42 vs 0.46  (loop ~10% faster)
 * The primitive picks oneDNN's own "gemm:jit" for these shapes (the same kernel, same bits)
 * and adds descriptor creation to every call, which shows at small shapes. The loop is also
 * deterministic by construction: oneDNN runs a call made inside an active parallel region on
 * one thread (dnnl_get_current_num_threads() is 1 there), and with one OpenMP thread there is
 * nothing to split, so the k sum is never divided among threads, as oneDNN may do for a lone
 * multi-threaded call. Cost: batch == 1 runs on one thread, fine for attention (batch = B·NH).
 * No `if` clause on purpose: an inactive region would let oneDNN thread the call. */
int cpu_gemm_strided_batched(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                             const float *a, int64_t lda, int64_t stride_a, const float *b, int64_t ldb,
                             int64_t stride_b, float beta, float *c, int64_t ldc, int64_t stride_c, int64_t batch)
{
    if (batch <= 0 || m == 0 || n == 0)
        return 0;
    if (k == 0 || alpha == 0.0f) {
        ddp_cpu_scale_matrices(c, m, n, ldc, stride_c, batch, beta);
        return 0;
    }
    int failed = dnnl_success;
    const char ta = trans_a ? 'T' : 'N', tb = trans_b ? 'T' : 'N';
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < batch; i++) {
        dnnl_status_t st = dnnl_sgemm(ta, tb, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b, ldb, beta,
                                      c + i * stride_c, ldc);
        if (st != dnnl_success) {
#pragma omp atomic write
            failed = (int)st;
        }
    }
    return failed;
}

/* ---- GELU (tanh approximation) ----------------------------------------------------------- */

#define GELU_K 0.7978845608028654f /* sqrt(2/π) */
#define GELU_C 0.044715f

/* 0.5·(1 + tanh(u)) = σ(2u), so the tanh formula is x·σ(z) with z = 2u: the same function, but
 * without the 1 + tanh(u) cancellation that loses all relative accuracy for x < -3 or so.
 * σ(z) and σ(z)·(1 - σ(z)) come from one exp(-|z|), which never overflows and needs no 1 - σ. */
static inline float gelu_z(float x) { return 2.0f * GELU_K * (x + GELU_C * x * x * x); }

static inline void sigmoid_and_slope(float z, float *s, float *slope)
{
    float e = expf(-fabsf(z));
    float p = 1.0f / (1.0f + e); /* σ(|z|) */
    float q = e * p;             /* σ(-|z|) = e/(1+e) */
    *s = z >= 0.0f ? p : q;
    *slope = p * q;
}

void cpu_gelu_tanh_forward(const float *restrict x, float *restrict y, size_t n)
{
    DDP_PARALLEL_FOR(n)
    for (size_t i = 0; i < n; i++) {
        float s, slope;
        sigmoid_and_slope(gelu_z(x[i]), &s, &slope);
        y[i] = x[i] * s;
    }
}

/* d/dx [x·σ(z(x))] = σ(z) + x·σ(z)(1 - σ(z))·z'(x), z'(x) = 2K(1 + 3C·x²). */
void cpu_gelu_tanh_backward(const float *restrict x, const float *restrict dy, float *restrict dx, size_t n)
{
    DDP_PARALLEL_FOR(n)
    for (size_t i = 0; i < n; i++) {
        float xi = x[i], s, slope;
        sigmoid_and_slope(gelu_z(xi), &s, &slope);
        float dz = 2.0f * GELU_K * (1.0f + 3.0f * GELU_C * xi * xi);
        /* slope is exactly 0 once |x| > ~10.5; dz overflows only at |x| > 1e19, where 0·inf = NaN */
        dx[i] = dy[i] * (s + (slope > 0.0f ? xi * slope * dz : 0.0f));
    }
}

/* ---- residual add -------------------------------------------------------------------------- */

void cpu_add(float *out, const float *a, const float *b, size_t n)
{
    /* no restrict: out may be a or b, and element i only reads a[i], b[i] before writing out[i] */
    DDP_PARALLEL_FOR(n)
    for (size_t i = 0; i < n; i++)
        out[i] = a[i] + b[i];
}

/* ---- fused classifier ---------------------------------------------------------------------- */

/* One row. Everything the loss needs (argmax, max, l[target]) is read before the gradient pass,
 * and that pass reads l[c] before writing dl[c], so dl == l works (hence no restrict). The
 * exponentials are stored in dl on the way and scaled afterwards, so expf runs once per logit. */
static double xent_row(const float *l, float *dl, int64_t ld, int32_t target, int64_t V, float grad_scale,
                       bool *hit)
{
    int64_t argmax = 0;
    for (int64_t c = 1; c < V; c++)
        if (l[c] > l[argmax]) /* strict: ties keep the lowest index, as torch.argmax */
            argmax = c;
    const float mx = l[argmax], lt = l[target], et = expf(lt - mx);
    *hit = argmax == target;
    double sum = 0.0;
    if (dl) {
        for (int64_t c = 0; c < V; c++) {
            dl[c] = expf(l[c] - mx);
            sum += dl[c];
        }
        double k = (double)grad_scale / sum;
        for (int64_t c = 0; c < V; c++)
            dl[c] = (float)((double)dl[c] * k);
        dl[target] = (float)(((double)et / sum - 1.0) * (double)grad_scale);
        for (int64_t c = V; c < ld; c++)
            dl[c] = 0.0f;
    } else {
        for (int64_t c = 0; c < V; c++)
            sum += expf(l[c] - mx);
    }
    return (double)mx + log(sum) - (double)lt;
}

int cpu_softmax_xent_padded(const float *logits, int64_t ld, const int32_t *targets, int64_t rows, int64_t V,
                            float grad_scale, float *dlogits, float *loss_sum, float *correct, int64_t *bad_row)
{
    /* all targets first, so a bad one leaves every output untouched (the logits too, in place) */
    for (int64_t r = 0; r < rows; r++)
        if (targets[r] < 0 || targets[r] >= V) {
            if (bad_row)
                *bad_row = r;
            return -1;
        }
    /* rows in parallel per block, then the block's losses summed serially in row order */
    double total = 0.0;
    int64_t hits = 0;
    for (int64_t r0 = 0; r0 < rows; r0 += XENT_ROW_BLOCK) {
        int64_t nr = min_i64(XENT_ROW_BLOCK, rows - r0);
        double loss[XENT_ROW_BLOCK];
        bool hit[XENT_ROW_BLOCK];
        DDP_PARALLEL_FOR(nr * V)
        for (int64_t i = 0; i < nr; i++) {
            int64_t r = r0 + i;
            loss[i] = xent_row(logits + r * ld, dlogits ? dlogits + r * ld : NULL, ld, targets[r], V, grad_scale,
                               &hit[i]);
        }
        for (int64_t i = 0; i < nr; i++) {
            total += loss[i];
            hits += hit[i];
        }
    }
    *loss_sum = (float)((double)*loss_sum + total);
    *correct = (float)((double)*correct + (double)hits);
    return 0;
}
