/* embedding_cpu.c — the CPU code of the token and position embeddings, part of the transformer
 * family (CUDA: embedding.cu): the forward gather and the backward's scatter-add into dwte and
 * column sums into dwpe (none without a position table: wpe and dwpe NULL).
 *
 * OpenMP splits only independent outputs (rows of the forward, column blocks of the backward), so
 * no result depends on the thread count. dwte's additions run in position order, in float: the
 * order the CUDA kernels reproduce bit for bit. dwpe's sums run in double over b in order, rounded
 * once. Arguments arrive checked (device_check_*.c); token ids are trusted to lie in [0, V), as the model
 * checks its data before training. This file must not allocate memory or set thread counts. */
#include "cpu_kernel.h"

/* dst[c] += Σ_r src[r·stride + c] for c < cols, each sum in double over r in order, rounded
 * once into dst. */
static void add_column_sums(float *restrict dst, const float *restrict src, int64_t rows, int64_t stride,
                            int64_t cols)
{
    double acc[DDP_COL_BLOCK];
    for (int64_t c0 = 0; c0 < cols; c0 += DDP_COL_BLOCK) {
        int64_t w = ddp_min_i64(DDP_COL_BLOCK, cols - c0);
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

static int cpu_embedding_forward_f32(device *d, float *restrict out, const int32_t *restrict tokens,
                                     const float *restrict wte, const float *restrict wpe, int64_t B, int64_t T,
                                     int64_t C, ddp_err *err)
{
    (void)d;
    (void)err;
    DDP_PARALLEL_FOR(B * T * C)
    for (int64_t bt = 0; bt < B * T; bt++) {
        const float *restrict te = wte + (int64_t)tokens[bt] * C;
        float *restrict o = out + bt * C;
        if (!wpe) {
            for (int64_t c = 0; c < C; c++)
                o[c] = te[c];
            continue;
        }
        const float *restrict pe = wpe + (bt % T) * C;
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
                                   int64_t BT, int64_t C)
{
    int64_t nblocks = (C + DDP_COL_BLOCK - 1) / DDP_COL_BLOCK;
    DDP_PARALLEL_FOR(BT * C)
    for (int64_t blk = 0; blk < nblocks; blk++) {
        int64_t c0 = blk * DDP_COL_BLOCK, c1 = ddp_min_i64(c0 + DDP_COL_BLOCK, C);
        for (int64_t bt = 0; bt < BT; bt++) {
            float *restrict dst = dwte + (int64_t)tokens[bt] * C;
            const float *restrict src = dout + bt * C;
            for (int64_t c = c0; c < c1; c++)
                dst[c] += src[c];
        }
    }
}

static int cpu_embedding_backward_f32(device *d, float *restrict dwte, float *restrict dwpe, const float *restrict dout,
                                      const int32_t *restrict tokens, int64_t B, int64_t T, int64_t C, ddp_err *err)
{
    (void)d;
    (void)err;
    embedding_backward_wte(dwte, dout, tokens, B * T, C);
    if (!dwpe)
        return DDP_OK;
    /* position t's rows are dout[b,t,:] for every b: stride T·C */
    DDP_PARALLEL_FOR(B * T * C)
    for (int64_t t = 0; t < T; t++)
        add_column_sums(dwpe + t * C, dout + t * C, B, T * C, C);
    return DDP_OK;
}

/* ---- entry points: device.c admits only TENSOR_F32 on the CPU, so the types are not looked at */

int device_cpu_embedding_forward(device *d, tensor_dtype t, void *out, const int32_t *tokens, const void *wte,
                                 const void *wpe, int64_t B, int64_t T, int64_t C, ddp_err *err)
{
    (void)t;
    return cpu_embedding_forward_f32(d, out, tokens, wte, wpe, B, T, C, err);
}

int device_cpu_embedding_backward(device *d, tensor_dtype t, float *dwte, float *dwpe, const void *dout,
                                  const int32_t *tokens, int64_t B, int64_t T, int64_t C, int64_t V, ddp_err *err)
{
    (void)t;
    (void)V;
    return cpu_embedding_backward_f32(d, dwte, dwpe, dout, tokens, B, T, C, err);
}
