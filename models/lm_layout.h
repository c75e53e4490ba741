/* lm_layout.h — a language model's activation layout, written once as a table that both sizes it
 * (the memory plan: gpt2_activation_bytes, llama_activation_bytes) and carves it (the model's
 * create), so the two cannot drift apart. A buffer is a pointer member of the impl (shared by all
 * blocks: the embeddings' output, backward's scratch) or of a block's struct (what the block keeps
 * for its backward), its element type (the compute type, or float for statistics) and its length
 * in elements per token row (a micro-batch has B·T rows). The logits are the one buffer not sized
 * by a micro-batch's rows: the classifier's chunk of lm_logit_rows rows (lm_core.c). Shared buffers are allocated
 * one each; the blocks' buffers are carved from one slab, each 64-byte aligned, so the number of
 * allocations does not grow with depth. Each block buffer says in which recompute modes it is
 * kept per block (lm_keep); in the others all blocks share one copy of it, scratch that the forward
 * fills block after block and the recomputing backward refills for the block it is at (the same
 * pointer in every block's struct, so the passes address it as before). Must not know any one
 * model. */
#ifndef DDP_LM_LAYOUT_H
#define DDP_LM_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lm_core.h"

/* The recompute modes that keep a block buffer per block (the others share one copy). */
typedef enum lm_keep {
    LM_KEEP_NONE,       /* recompute none only: a norm's or element-wise op's output */
    LM_KEEP_SELECTIVE,  /* none and selective: a GEMM's or attention's output */
    LM_KEEP_ALWAYS,     /* every mode: the block's output, which becomes the next block's input */
} lm_keep;

typedef struct lm_buffer {
    size_t field;      /* offsetof the pointer in the impl (shared) or in the block struct */
    bool f32;          /* float, else the compute type */
    int64_t per_row;   /* elements per token row */
    lm_keep keep;      /* blocks' buffers only */
} lm_buffer;

#define LM_LAYOUT_MAX 16

typedef struct lm_layout {
    lm_buffer shared[LM_LAYOUT_MAX], block[LM_LAYOUT_MAX];
    int n_shared, n_block;
    bool full;         /* a buffer did not fit LM_LAYOUT_MAX: lm_layout_alloc refuses the layout */
    int64_t n_layer;
    recompute_mode recompute;
    size_t fixed_bytes; /* buffers not sized by rows (the Llama's RoPE tables): the model allocates them */
    int64_t vocab_padded; /* the logits' row (lm_core.Vp) */
    size_t logits_bytes;  /* lm_run.logits_bytes: the classifier's chunk */
} lm_layout;

/* The rows of logits the classifier holds at once for micro-batches of up to `rows` token rows
 * over vocab_padded columns of type t: all of them when logits_bytes is 0, else as many as fit in
 * logits_bytes (at least one), evened out over the chunks a full micro-batch takes. */
int64_t lm_logit_rows(size_t logits_bytes, int64_t vocab_padded, tensor_dtype t, int64_t rows);

/* Appends a buffer (the builders below the layout tables use these). */
void lm_layout_shared(lm_layout *L, size_t field, bool f32, int64_t per_row);
void lm_layout_block(lm_layout *L, size_t field, bool f32, int64_t per_row, lm_keep keep);

/* The memory plan's figure: the bytes the layout takes for B sequences of T tokens in compute type
 * t into *bytes; a layout past 64 bits is a usage error naming the model (name), its depth and the
 * widths it grows with (lm_activations_too_large). */
int lm_layout_plan(const lm_layout *L, tensor_dtype t, int64_t T, int64_t B, const char *name, const char *widths,
                   size_t *bytes, ddp_err *err);

/* Allocates the shared buffers and the blocks' slab of m (lm_alloc), setting each pointer in impl
 * and in the n_layer block structs at blocks, block_stride bytes apart, and the logits
 * (lm_core.logits and logit_rows). */
int lm_layout_alloc(model *m, const lm_layout *L, void *impl, void *blocks, size_t block_stride, int64_t rows,
                    ddp_err *err);

#endif
