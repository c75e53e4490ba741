/* lm_layout.c — sizing and carving a language model's activation layout (lm_layout.h). Must not
 * know any one model's buffers: their table is the model's. */
#include "lm_layout.h"

#include <string.h>

void lm_layout_shared(lm_layout *L, size_t field, bool f32, int64_t per_row)
{
    if (L->n_shared < LM_LAYOUT_MAX)
        L->shared[L->n_shared++] = (lm_buffer){field, f32, per_row, LM_KEEP_ALWAYS};
    else
        L->full = true;
}

void lm_layout_block(lm_layout *L, size_t field, bool f32, int64_t per_row, lm_keep keep)
{
    if (L->n_block < LM_LAYOUT_MAX)
        L->block[L->n_block++] = (lm_buffer){field, f32, per_row, keep};
    else
        L->full = true;
}

static size_t elem_bytes(const lm_buffer *b, tensor_dtype t) { return b->f32 ? sizeof(float) : tensor_dtype_size(t); }

/* Whether the layout's recompute mode keeps block buffer b per block. */
static bool kept(const lm_layout *L, const lm_buffer *b)
{
    return L->recompute == RECOMPUTE_NONE || b->keep == LM_KEEP_ALWAYS ||
           (L->recompute == RECOMPUTE_SELECTIVE && b->keep == LM_KEEP_SELECTIVE);
}

static size_t buffer_bytes(const lm_buffer *b, tensor_dtype t, int64_t rows, size_check *k)
{
    return lm_aligned_bytes(k, size_mul(k, (size_t)rows, (size_t)b->per_row), elem_bytes(b, t));
}

/* One block's bytes of the buffers kept per block (per_block) or of those all blocks share. */
static size_t block_bytes(const lm_layout *L, bool per_block, tensor_dtype t, int64_t rows, size_check *k)
{
    size_t bytes = 0;
    for (int i = 0; i < L->n_block; i++)
        if (kept(L, &L->block[i]) == per_block)
            bytes = size_add(k, bytes, buffer_bytes(&L->block[i], t, rows, k));
    return bytes;
}

int64_t lm_logit_rows(size_t logits_bytes, int64_t vocab_padded, tensor_dtype t, int64_t rows)
{
    const size_t fit_rows = logits_bytes / ((size_t)vocab_padded * tensor_dtype_size(t));
    if (logits_bytes == 0 || fit_rows >= (size_t)rows)
        return rows;
    const int64_t fit = fit_rows > 0 ? (int64_t)fit_rows : 1;
    const int64_t chunks = (rows + fit - 1) / fit;
    return (rows + chunks - 1) / chunks;
}

static size_t logits_bytes(const lm_layout *L, tensor_dtype t, int64_t rows, size_check *k)
{
    const int64_t n = lm_logit_rows(L->logits_bytes, L->vocab_padded, t, rows);
    return size_mul(k, size_mul(k, (size_t)n, (size_t)L->vocab_padded), tensor_dtype_size(t));
}

static size_t layout_bytes(const lm_layout *L, tensor_dtype t, int64_t rows, size_check *k)
{
    size_t total = size_add(k, L->fixed_bytes, logits_bytes(L, t, rows, k));
    for (int i = 0; i < L->n_shared; i++)
        total = size_add(k, total, size_mul(k, size_mul(k, (size_t)rows, (size_t)L->shared[i].per_row),
                                            elem_bytes(&L->shared[i], t)));
    total = size_add(k, total, block_bytes(L, false, t, rows, k));
    return size_add(k, total, size_mul(k, block_bytes(L, true, t, rows, k), (size_t)L->n_layer));
}

int lm_layout_plan(const lm_layout *L, tensor_dtype t, int64_t T, int64_t B, const char *name, const char *widths,
                   size_t *bytes, ddp_err *err)
{
    size_check k = {0};
    *bytes = layout_bytes(L, t, B * T, &k); /* B·T: at most 2^31 x 2^20, the keys' ranges */
    return k.overflow ? lm_activations_too_large(name, L->n_layer, widths, T, B, err) : DDP_OK;
}

/* The pointer member at byte offset field of s gets p (memcpy: the member is a void * or a float *). */
static void set_pointer(void *s, size_t field, void *p) { memcpy((char *)s + field, &p, sizeof p); }

int lm_layout_alloc(model *m, const lm_layout *L, void *impl, void *blocks, size_t block_stride, int64_t rows,
                    ddp_err *err)
{
    const tensor_dtype t = ((const lm_core *)m->impl)->t;
    if (L->full) /* a model's table outgrew the layout, as lm_alloc refuses more buffers than it holds */
        return ddp_fail(err, DDP_ERUNTIME, "%s: more than %d activation buffers in its layout",
                        ((const lm_core *)m->impl)->kind->name, LM_LAYOUT_MAX);
    size_check k = {0};
    lm_core *lm = m->impl;
    lm->logit_rows = lm_logit_rows(L->logits_bytes, L->vocab_padded, t, rows);
    int rc = lm_alloc(m, &lm->logits, logits_bytes(L, t, rows, &k), err);
    for (int i = 0; !rc && i < L->n_shared; i++) {
        void *p;
        size_t bytes = size_mul(&k, size_mul(&k, (size_t)rows, (size_t)L->shared[i].per_row),
                                elem_bytes(&L->shared[i], t));
        rc = lm_alloc(m, &p, bytes, err); /* an overflow asks for SIZE_MAX, which no device gives */
        if (!rc)
            set_pointer(impl, L->shared[i].field, p);
    }
    if (rc)
        return rc;
    /* one slab: the blocks' shared copy first, then each block's own buffers */
    void *base;
    size_t shared_bytes = block_bytes(L, false, t, rows, &k);
    rc = lm_alloc(m, &base, size_add(&k, shared_bytes, size_mul(&k, block_bytes(L, true, t, rows, &k),
                                                                 (size_t)L->n_layer)), err);
    char *scratch = base, *slab = (char *)base + shared_bytes;
    for (int i = 0; !rc && i < L->n_block; i++)
        if (!kept(L, &L->block[i])) {
            for (int64_t l = 0; l < L->n_layer; l++)
                set_pointer((char *)blocks + (size_t)l * block_stride, L->block[i].field, scratch);
            scratch += buffer_bytes(&L->block[i], t, rows, &k);
        }
    for (int64_t l = 0; !rc && l < L->n_layer; l++)
        for (int i = 0; i < L->n_block; i++)
            if (kept(L, &L->block[i])) {
                set_pointer((char *)blocks + (size_t)l * block_stride, L->block[i].field, slab);
                slab += buffer_bytes(&L->block[i], t, rows, &k);
            }
    return rc;
}
