/* gpt2_llmc.h — llm.c's GPT-2 model file (train_gpt2.c's gpt2_124M.bin, float32, version 3): the
 * one module that knows its layout and how it maps onto our tensor names, used by `ddprun ckpt
 * export --format llmc` (writing) and checkpoint.init_from (reading).
 *
 * The file: 256 little-endian int32 (magic 20240326, version 3, block_size, vocab_size, n_layer,
 * n_head, n_embd, padded vocabulary Vp, zeros), then every parameter as little-endian float32,
 * each kind stacked over the layers: wte (Vp x C), wpe (block_size x C), ln1w, ln1b (L x C), qkvw
 * (L x 3C x C), qkvb (L x 3C), attprojw (L x C x C), attprojb (L x C), ln2w, ln2b (L x C), fcw
 * (L x 4C x C), fcb (L x 4C), fcprojw (L x C x 4C), fcprojb (L x C), lnfw, lnfb (C). Our GPT-2
 * holds the same tensors block by block (h.L.ln_1.weight, h.L.attn.c_attn.weight [3C, C], ...)
 * in the same row-major layouts (weights [out, in] like PyTorch's Linear, wte with its padding
 * rows), so each llm.c tensor is our per-layer tensors one after another. Vp must be
 * gpt2_vocab_padded(vocab_size), a multiple of 128 as llm.c pads.
 *
 * Reads validate before using anything: magic, version (llm.c's bf16 file, version 5, is refused),
 * shape sanity, the file's size exactly what its shapes need, and the shape the caller expects
 * (both named on a mismatch). Writes go to a temporary file in the target's folder, fsync'd and
 * renamed, so OUT never holds half a file. Must not know checkpoints, configs or the training
 * loop: callers say where each tensor's host memory is. */
#ifndef DDP_GPT2_LLMC_H
#define DDP_GPT2_LLMC_H

#include <stddef.h>

#include "gpt2.h"

#define GPT2_LLMC_MAGIC 20240326
#define GPT2_LLMC_VERSION 3        /* float32 parameters; llm.c's version 5 holds bf16 */
#define GPT2_LLMC_HEADER_BYTES 1024

/* Host memory of our tensor `name` ("wte.weight", "h.0.attn.c_attn.weight", ...), numel floats,
 * or NULL when the caller has no such tensor of that size (the error then names it). */
typedef const float *(*gpt2_llmc_src)(void *ctx, const char *name, size_t numel);
typedef float *(*gpt2_llmc_dst)(void *ctx, const char *name, size_t numel);

/* Writes a model of this shape, its tensors from src, to path (atomically). */
int gpt2_llmc_write(const char *path, const gpt2_shape *shape, gpt2_llmc_src src, void *ctx, ddp_err *err);

/* The shape path's header declares, once magic, version, shape and the file's size checked out. */
int gpt2_llmc_read_shape(const char *path, gpt2_shape *shape, ddp_err *err);

/* Validates path as gpt2_llmc_read_shape does and that its shape is *want, asks dst for every
 * tensor's memory, then reads the parameters into it. Validation failures touch no dst memory; a
 * read error part-way (the file changed underneath) may leave part of it written. */
int gpt2_llmc_read(const char *path, const gpt2_shape *want, gpt2_llmc_dst dst, void *ctx, ddp_err *err);

/* A GPT-2 model's parameters (device memory) to path / from path. A failed load leaves the
 * parameters as they were. Another model kind is a usage error naming it. */
int gpt2_llmc_save_model(model *m, const char *path, ddp_err *err);
int gpt2_llmc_load_model(model *m, const char *path, ddp_err *err);

#endif
