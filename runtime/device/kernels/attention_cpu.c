/* attention_cpu.c — the CPU code of the attention family (CUDA: attention.cu): causal flash
 * attention, forward and backward; the reference the CUDA kernels are tested against.
 *
 * The work is cut into units of one sequence and one key/value head (with the query heads that
 * share it); a unit's outputs depend on nothing another unit writes, and it runs its GEMMs one
 * after another in a fixed order, so results do not depend on the thread count. Within a unit,
 * queries go in blocks of ATTN_BLOCK rows. A block's scores against every key it may see (keys 0
 * up to its last row: causal) are one strip of at most ATTN_BLOCK x T floats, computed by one GEMM
 * and softmaxed exactly in place (with the whole strip at hand no online rescaling is needed),
 * then multiplied by V with a second GEMM: memory per thread is linear in T, the GEMM library does
 * the arithmetic, and the masked upper half is never computed. The backward recomputes each strip's
 * probabilities from the saved log-sum-exp and accumulates dK and dV over the blocks in order.
 * Packed rows (attn_shape's doc_start): a block sees keys from its first row's document start only,
 * and each row's columns outside its own document are zero probabilities; a row's blocks stay
 * within what its documents need, so short documents cost less than a whole causal strip.
 * Scratch is two strips per thread, allocated per call. Arguments arrive checked (device_check_*.c)
 * (device_check_attention.c). This file must not hold other families' ops. */
#include "cpu_kernel.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* Query rows per block: a 64 x 1024 strip is 256 KiB, inside a core's L2 with room for the tiles. */
#define ATTN_BLOCK 64

/* One unit's view of the tensors: sequence b, key/value head kvh. */
typedef struct attn_unit {
    const attn_shape *s;
    int64_t b, kvh;
} attn_unit;

static const float *row_of(const float *base, const attn_shape *s, int64_t b, int64_t t, int64_t ld, int64_t head)
{
    return base + (b * s->T + t) * ld + head * s->hs;
}

/* The first key query t of sequence b sees: its document's start in packed rows, else 0. */
static int64_t first_key(const attn_shape *s, int64_t b, int64_t t)
{
    return s->doc_start ? s->doc_start[b * s->T + t] : 0;
}

/* The scores of query rows [q0, q0+rows) of head h against keys [k0, q0+rows) become their
 * probabilities; with lse non-NULL each row's log-sum-exp is stored there (forward), otherwise
 * the saved one is used (backward). Columns a row may not see — past its own position, before its
 * document's start — are set to 0. */
static void softmax_strip(const attn_unit *u, float *strip, int64_t rows, int64_t k0, int64_t keys, int64_t q0,
                          const float *lse_saved, float *lse_out)
{
    for (int64_t i = 0; i < rows; i++) {
        float *row = strip + i * keys;
        const int64_t first = first_key(u->s, u->b, q0 + i) - k0, last = q0 + i - k0; /* keys first..last */
        /* the forward divides by the row's own sum: exp(s - lse) with lse rounded to float would
         * scale the whole row by e^(lse's rounding), off 1 by up to half a float step of |lse|;
         * the backward recomputes from the saved lse, as the GPU kernels do */
        float shift = lse_out ? -INFINITY : lse_saved[i];
        double scale = 1.0;
        if (lse_out) {
            for (int64_t j = first; j <= last; j++)
                shift = row[j] > shift ? row[j] : shift;
            double sum = 0.0;
            for (int64_t j = first; j <= last; j++)
                sum += (double)expf(row[j] - shift);
            lse_out[i] = (float)((double)shift + log(sum));
            scale = 1.0 / sum;
        }
        for (int64_t j = 0; j < first; j++)
            row[j] = 0.0f;
        for (int64_t j = first; j <= last; j++)
            row[j] = (float)((double)expf(row[j] - shift) * scale);
        for (int64_t j = last + 1; j < keys; j++)
            row[j] = 0.0f;
    }
}

/* A block of query rows [q0, q0 + rows) and the keys [k0, q0 + rows) it sees: from the earliest
 * document start among its rows (the first row's, as starts never decrease along a row). */
typedef struct attn_block {
    int64_t q0, rows, k0, keys;
} attn_block;

static attn_block block_at(const attn_unit *u, int64_t q0)
{
    const int64_t T = u->s->T, rows = T - q0 < ATTN_BLOCK ? T - q0 : ATTN_BLOCK, k0 = first_key(u->s, u->b, q0);
    return (attn_block){q0, rows, k0, q0 + rows - k0};
}

static int forward_unit(const attn_unit *u, float *out, float *lse, const float *q, const float *k, const float *v,
                        float *strip, ddp_err *err)
{
    const attn_shape *s = u->s;
    const int64_t group = s->NH / s->NKV, T = s->T;
    for (int64_t h = u->kvh * group; h < (u->kvh + 1) * group; h++) {
        float *L = lse + (u->b * s->NH + h) * T;
        for (int64_t q0 = 0; q0 < T; q0 += ATTN_BLOCK) {
            const attn_block bl = block_at(u, q0);
            const float *K = row_of(k, s, u->b, bl.k0, s->ld_kv, u->kvh), *V = row_of(v, s, u->b, bl.k0, s->ld_kv, u->kvh);
            int rc = device_cpu_sgemm(false, true, bl.rows, bl.keys, s->hs, s->scale,
                                      row_of(q, s, u->b, q0, s->ld_q, h), s->ld_q, K, s->ld_kv, 0.0f, strip, bl.keys, err);
            if (rc)
                return rc;
            softmax_strip(u, strip, bl.rows, bl.k0, bl.keys, q0, NULL, L + q0);
            rc = device_cpu_sgemm(false, false, bl.rows, s->hs, bl.keys, 1.0f, strip, bl.keys, V, s->ld_kv, 0.0f,
                                  (float *)row_of(out, s, u->b, q0, s->ld_o, h), s->ld_o, err);
            if (rc)
                return rc;
        }
    }
    return DDP_OK;
}

typedef struct attn_grads {
    float *dq, *dk, *dv;
    const float *dout, *out, *lse, *q, *k, *v;
} attn_grads;

/* dS = P ∘ (dP − D) in place of dP, with D_i = dout_i · out_i (in double). */
static void score_grads(float *dp, const float *p, int64_t rows, int64_t keys, const float *dout, const float *o,
                        int64_t ld_o, int64_t hs)
{
    for (int64_t i = 0; i < rows; i++) {
        double D = 0.0;
        for (int64_t c = 0; c < hs; c++)
            D += (double)dout[i * ld_o + c] * (double)o[i * ld_o + c];
        for (int64_t j = 0; j < keys; j++)
            dp[i * keys + j] = (float)((double)p[i * keys + j] * ((double)dp[i * keys + j] - D));
    }
}

static int backward_unit(const attn_unit *u, const attn_grads *g, float *strip, float *strip2, ddp_err *err)
{
    const attn_shape *s = u->s;
    const int64_t group = s->NH / s->NKV, T = s->T, hs = s->hs;
    float *dK0 = (float *)row_of(g->dk, s, u->b, 0, s->ld_kv, u->kvh);
    float *dV0 = (float *)row_of(g->dv, s, u->b, 0, s->ld_kv, u->kvh);
    for (int64_t t = 0; t < T; t++) {
        memset(dK0 + t * s->ld_kv, 0, (size_t)hs * sizeof(float));
        memset(dV0 + t * s->ld_kv, 0, (size_t)hs * sizeof(float));
    }
    for (int64_t h = u->kvh * group; h < (u->kvh + 1) * group; h++) {
        const float *L = g->lse + (u->b * s->NH + h) * T;
        for (int64_t q0 = 0; q0 < T; q0 += ATTN_BLOCK) {
            const attn_block bl = block_at(u, q0);
            const int64_t rows = bl.rows, keys = bl.keys;
            const float *K = row_of(g->k, s, u->b, bl.k0, s->ld_kv, u->kvh);
            const float *V = row_of(g->v, s, u->b, bl.k0, s->ld_kv, u->kvh);
            float *dK = dK0 + bl.k0 * s->ld_kv, *dV = dV0 + bl.k0 * s->ld_kv;
            const float *Qb = row_of(g->q, s, u->b, q0, s->ld_q, h);
            const float *dOb = row_of(g->dout, s, u->b, q0, s->ld_o, h), *Ob = row_of(g->out, s, u->b, q0, s->ld_o, h);
            /* P (strip), dP (strip2), then dS over dP */
            int rc = device_cpu_sgemm(false, true, rows, keys, hs, s->scale, Qb, s->ld_q, K, s->ld_kv, 0.0f, strip,
                                      keys, err);
            if (!rc)
                rc = device_cpu_sgemm(false, true, rows, keys, hs, 1.0f, dOb, s->ld_o, V, s->ld_kv, 0.0f, strip2, keys,
                                      err);
            if (rc)
                return rc;
            softmax_strip(u, strip, rows, bl.k0, keys, q0, L + q0, NULL);
            score_grads(strip2, strip, rows, keys, dOb, Ob, s->ld_o, hs);
            /* dQ = scale·dS·K, dK += scale·dSᵀ·Q, dV += Pᵀ·dO */
            rc = device_cpu_sgemm(false, false, rows, hs, keys, s->scale, strip2, keys, K, s->ld_kv, 0.0f,
                                  (float *)row_of(g->dq, s, u->b, q0, s->ld_q, h), s->ld_q, err);
            if (!rc)
                rc = device_cpu_sgemm(true, false, keys, hs, rows, s->scale, strip2, keys, Qb, s->ld_q, 1.0f, dK,
                                      s->ld_kv, err);
            if (!rc)
                rc = device_cpu_sgemm(true, false, keys, hs, rows, 1.0f, strip, keys, dOb, s->ld_o, 1.0f, dV, s->ld_kv,
                                      err);
            if (rc)
                return rc;
        }
    }
    return DDP_OK;
}

/* Runs every unit, forward (g == NULL) or backward, with `strips` scratch strips per thread. With
 * oneDNN the units are spread over OpenMP threads, each GEMM running on its caller's thread (the
 * region is always active: an inactive one would let oneDNN split a call's k sum among threads);
 * OpenBLAS threads each GEMM itself, so its units run one after another. */
typedef struct attn_job {
    const attn_shape *s;
    float *out, *lse;
    const float *q, *k, *v;
    const attn_grads *g;
} attn_job;

static int run_unit(const attn_job *job, int64_t i, float *scratch, ddp_err *err)
{
    const attn_shape *s = job->s;
    attn_unit u = {s, i / s->NKV, i % s->NKV};
    const size_t strip = (size_t)ATTN_BLOCK * (size_t)s->T;
    return job->g ? backward_unit(&u, job->g, scratch, scratch + strip, err)
                  : forward_unit(&u, job->out, job->lse, job->q, job->k, job->v, scratch, err);
}

static int run_units(const attn_job *job, ddp_err *err)
{
    const int64_t units = job->s->B * job->s->NKV;
    const size_t scratch_floats = 2 * (size_t)ATTN_BLOCK * (size_t)job->s->T;
    int failed = 0;
#if defined(DDP_GEMM_ONEDNN)
    ddp_err first = {0};
#pragma omp parallel
    {
        float *scratch = malloc(scratch_floats * sizeof(float));
        ddp_err mine = {0};
        int rc = scratch ? DDP_OK : ddp_fail(&mine, DDP_ERUNTIME, "attention: out of memory for %zu floats of scratch",
                                             scratch_floats);
#pragma omp for schedule(dynamic, 1)
        for (int64_t i = 0; i < units; i++)
            if (!rc)
                rc = run_unit(job, i, scratch, &mine);
        if (rc) {
#pragma omp critical(attention_cpu_error)
            if (!failed) {
                failed = rc;
                first = mine;
            }
        }
        free(scratch);
    }
    if (failed)
        *err = first;
#else
    float *scratch = malloc(scratch_floats * sizeof(float));
    if (!scratch)
        return ddp_fail(err, DDP_ERUNTIME, "attention: out of memory for %zu floats of scratch", scratch_floats);
    for (int64_t i = 0; i < units && !failed; i++)
        failed = run_unit(job, i, scratch, err);
    free(scratch);
#endif
    return failed;
}

int device_cpu_check_docs(const char *op, const int32_t *doc_start, const int32_t *doc_end, int64_t B, int64_t T,
                          ddp_err *err)
{
    for (int64_t b = 0; doc_start && b < B; b++)
        for (int64_t t = 0; t < T; t++) {
            const int64_t i = b * T + t, start = doc_start[i], end = doc_end ? doc_end[i] : t + 1;
            bool contiguous = t == 0 || (start == t && (!doc_end || doc_end[i - 1] == t)) ||
                              (start == doc_start[i - 1] && (!doc_end || end == doc_end[i - 1]));
            if (start < 0 || start > t || end <= t || end > T || !contiguous || (t == 0 && start != 0))
                return ddp_fail(err, DDP_ERUNTIME, "%s: position %lld of row %lld lies in a document [%lld, %lld) that "
                                "is not a contiguous run of the row's %lld positions", op, (long long)t, (long long)b,
                                (long long)start, (long long)end, (long long)T);
        }
    return DDP_OK;
}

int device_cpu_attention_forward(device *d, tensor_dtype t, const attn_shape *s, void *out, float *lse, const void *q,
                                 const void *k, const void *v, ddp_err *err)
{
    (void)d;
    (void)t; /* float: device.c refuses bf16 on the CPU */
    attn_job job = {s, out, lse, q, k, v, NULL};
    int rc = device_cpu_check_docs("attention_forward", s->doc_start, s->doc_end, s->B, s->T, err);
    return rc ? rc : run_units(&job, err);
}

int device_cpu_attention_backward(device *d, tensor_dtype t, const attn_shape *s, void *dq, void *dk, void *dv,
                                  const void *dout, const void *out, const float *lse, const void *q, const void *k,
                                  const void *v, ddp_err *err)
{
    (void)d;
    (void)t;
    attn_grads g = {dq, dk, dv, dout, out, lse, q, k, v};
    attn_job job = {s, NULL, NULL, NULL, NULL, NULL, &g};
    int rc = device_cpu_check_docs("attention_backward", s->doc_start, s->doc_end, s->B, s->T, err);
    return rc ? rc : run_units(&job, err);
}
