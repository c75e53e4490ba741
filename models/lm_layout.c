/* lm_layout.c — sizing and carving a language model's activation layout (lm_layout.h). Must not
 * know any one model's buffers: their table is the model's. */
#include "lm_layout.h"

#include <string.h>

void lm_layout_shared(lm_layout *L, size_t field, bool f32, int64_t per_row)
{
    if (L->n_shared < LM_LAYOUT_MAX)
        L->shared[L->n_shared++] = (lm_buffer){field, f32, per_row};
    else
        L->full = true;
}

void lm_layout_block(lm_layout *L, size_t field, bool f32, int64_t per_row)
{
    if (L->n_block < LM_LAYOUT_MAX)
        L->block[L->n_block++] = (lm_buffer){field, f32, per_row};
    else
        L->full = true;
}

static size_t elem_bytes(const lm_buffer *b, tensor_dtype t) { return b->f32 ? sizeof(float) : tensor_dtype_size(t); }

static size_t block_bytes(const lm_layout *L, tensor_dtype t, int64_t rows, size_check *k)
{
    size_t per_block = 0;
    for (int i = 0; i < L->n_block; i++)
        per_block = size_add(k, per_block,
                             lm_aligned_bytes(k, size_mul(k, (size_t)rows, (size_t)L->block[i].per_row),
                                              elem_bytes(&L->block[i], t)));
    return per_block;
}

static size_t layout_bytes(const lm_layout *L, tensor_dtype t, int64_t rows, size_check *k)
{
    size_t total = L->fixed_bytes;
    for (int i = 0; i < L->n_shared; i++)
        total = size_add(k, total, size_mul(k, size_mul(k, (size_t)rows, (size_t)L->shared[i].per_row),
                                            elem_bytes(&L->shared[i], t)));
    return size_add(k, total, size_mul(k, block_bytes(L, t, rows, k), (size_t)L->n_layer));
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
    for (int i = 0; i < L->n_shared; i++) {
        void *p;
        size_t bytes = size_mul(&k, size_mul(&k, (size_t)rows, (size_t)L->shared[i].per_row),
                                elem_bytes(&L->shared[i], t));
        int rc = lm_alloc(m, &p, bytes, err); /* an overflow asks for SIZE_MAX, which no device gives */
        if (rc)
            return rc;
        set_pointer(impl, L->shared[i].field, p);
    }
    void *base;
    int rc = lm_alloc(m, &base, size_mul(&k, block_bytes(L, t, rows, &k), (size_t)L->n_layer), err);
    char *slab = base;
    for (int64_t l = 0; !rc && l < L->n_layer; l++)
        for (int i = 0; i < L->n_block; i++) {
            set_pointer((char *)blocks + (size_t)l * block_stride, L->block[i].field, slab);
            slab += lm_aligned_bytes(&k, size_mul(&k, (size_t)rows, (size_t)L->block[i].per_row),
                                     elem_bytes(&L->block[i], t));
        }
    return rc;
}
