/* embedding_cpu.c — the CPU code of the token and position embeddings, part of the transformer
 * family (CUDA: embedding.cu): the forward gather and the backward's scatter-add into dwte and
 * per-position sums into dwpe (none without a position table: wpe and dwpe NULL); in packed rows a
 * position is the offset in its document.
 *
 * OpenMP splits only independent outputs (rows of the forward, dwte's column blocks and dwpe's
 * positions), so no result depends on the thread count. dwte's additions run in position order, in float: the
 * order the CUDA kernels reproduce bit for bit. dwpe's sums run in double over (b, t) in order,
 * rounded once. Arguments arrive checked (device_check_*.c); token ids are trusted to lie in
 * [0, V) by the forward, as the model checks its data before training, and the backward skips any
 * outside it rather than write outside dwte, as the CUDA kernel does. This file must not allocate
 * memory or set thread counts. */
#include "cpu_kernel.h"

#include "runtime/device/kernels/doc_walk.h"

/* dwpe[p,c] += Σ dout[b,t,c] over the (b,t) at position p, b in order and t in order within a row,
 * each sum in double, rounded once. Threads own positions, so no sum depends on their count. */
static void add_position_sums(float *restrict dwpe, const float *restrict dout, const int32_t *doc_start,
                              const int32_t *doc_end, int64_t B, int64_t T, int64_t C)
{
    DDP_PARALLEL_FOR(B * T * C)
    for (int64_t p = 0; p < T; p++)
        for (int64_t c0 = 0; c0 < C; c0 += DDP_COL_BLOCK) {
            const int64_t w = ddp_min_i64(DDP_COL_BLOCK, C - c0);
            double acc[DDP_COL_BLOCK] = {0};
            for (int64_t b = 0; b < B; b++) {
                const int32_t *s = doc_start ? doc_start + b * T : NULL, *e = doc_end ? doc_end + b * T : NULL;
                for (int64_t t = ddp_doc_at_position(s, e, p, p, T); t < T; t = ddp_doc_next_position(s, e, t, p, T)) {
                    const float *restrict row = dout + (b * T + t) * C + c0;
                    for (int64_t j = 0; j < w; j++)
                        acc[j] += row[j];
                }
            }
            float *restrict dst = dwpe + p * C + c0;
            for (int64_t j = 0; j < w; j++)
                dst[j] = (float)((double)dst[j] + acc[j]);
        }
}

/* ---- embeddings ------------------------------------------------------------------------ */

static int cpu_embedding_forward_f32(device *d, float *restrict out, const int32_t *restrict tokens,
                                     const float *restrict wte, const float *restrict wpe, const int32_t *doc_start,
                                     int64_t B, int64_t T, int64_t C, ddp_err *err)
{
    (void)d;
    int rc = wpe ? device_cpu_check_docs("embedding_forward", doc_start, NULL, B, T, err) : DDP_OK;
    if (rc)
        return rc;
    DDP_PARALLEL_FOR(B * T * C)
    for (int64_t bt = 0; bt < B * T; bt++) {
        const float *restrict te = wte + (int64_t)tokens[bt] * C;
        float *restrict o = out + bt * C;
        if (!wpe) {
            for (int64_t c = 0; c < C; c++)
                o[c] = te[c];
            continue;
        }
        const float *restrict pe = wpe + (bt % T - (doc_start ? doc_start[bt] : 0)) * C;
        for (int64_t c = 0; c < C; c++)
            o[c] = te[c] + pe[c];
    }
    return DDP_OK;
}

/* A token can occur at many positions, so rows of dwte are not independent outputs; columns
 * are. Each thread owns column blocks and walks every position in order: the additions into a
 * dwte entry happen in the same order for any thread count. They stay in float because a double
 * copy of dwte would need a [V,C] scratch this layer does not own. */
static void embedding_backward_wte(float *restrict dwte, const float *restrict dout, const int32_t *restrict tokens,
                                   int64_t BT, int64_t C, int64_t V)
{
    int64_t nblocks = (C + DDP_COL_BLOCK - 1) / DDP_COL_BLOCK;
    DDP_PARALLEL_FOR(BT * C)
    for (int64_t blk = 0; blk < nblocks; blk++) {
        int64_t c0 = blk * DDP_COL_BLOCK, c1 = ddp_min_i64(c0 + DDP_COL_BLOCK, C);
        for (int64_t bt = 0; bt < BT; bt++) {
            if (tokens[bt] < 0 || tokens[bt] >= V)
                continue;
            float *restrict dst = dwte + (int64_t)tokens[bt] * C;
            const float *restrict src = dout + bt * C;
            for (int64_t c = c0; c < c1; c++)
                dst[c] += src[c];
        }
    }
}

static int cpu_embedding_backward_f32(device *d, float *restrict dwte, float *restrict dwpe, const float *restrict dout,
                                      const int32_t *restrict tokens, const int32_t *doc_start, const int32_t *doc_end,
                                      int64_t B, int64_t T, int64_t C, int64_t V, ddp_err *err)
{
    (void)d;
    int rc = dwpe ? device_cpu_check_docs("embedding_backward", doc_start, doc_end, B, T, err) : DDP_OK;
    if (rc)
        return rc;
    embedding_backward_wte(dwte, dout, tokens, B * T, C, V);
    if (dwpe)
        add_position_sums(dwpe, dout, doc_start, doc_end, B, T, C);
    return DDP_OK;
}

/* ---- entry points: device.c admits only TENSOR_F32 on the CPU, so the types are not looked at */

int device_cpu_embedding_forward(device *d, tensor_dtype t, void *out, const int32_t *tokens, const void *wte,
                                 const void *wpe, const int32_t *doc_start, int64_t B, int64_t T, int64_t C,
                                 ddp_err *err)
{
    (void)t;
    return cpu_embedding_forward_f32(d, out, tokens, wte, wpe, doc_start, B, T, C, err);
}

int device_cpu_embedding_backward(device *d, tensor_dtype t, float *dwte, float *dwpe, const void *dout,
                                  const int32_t *tokens, const int32_t *doc_start, const int32_t *doc_end, int64_t B,
                                  int64_t T, int64_t C, int64_t V, ddp_err *err)
{
    (void)t;
    return cpu_embedding_backward_f32(d, dwte, dwpe, dout, tokens, doc_start, doc_end, B, T, C, V, err);
}
