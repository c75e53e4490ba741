/* gpt2.h — the GPT-2 model's own entry points beyond model.h: its shape, building it, and what
 * the memory plan, the fixture checks and text generation read from it, and its description text
 * both ways (checkpoints record it; `ddprun generate` and `ckpt export` rebuild the shape from it).
 *
 * The model takes int32 token ids [rows, T] and predicts the next token at every position
 * (io.sample i32 x T -> i32 x T, a language model). T is the data's sequence length, at most
 * block_size. Everything else goes through model.h. This header must not grow training-loop
 * concerns. */
#ifndef DDP_GPT2_H
#define DDP_GPT2_H

#include "model.h"

#define GPT2_MAX_LAYERS 96
#define GPT2_VOCAB_ALIGN 128   /* wte rows are padded to a multiple of this for the GEMMs */

/* vocab_size rounded up to GPT2_VOCAB_ALIGN: wte's rows and the logits' row stride */
int64_t gpt2_vocab_padded(int64_t vocab_size);

/* A GPT-2 of this shape for token sequences of data->input.count positions, with activations for
 * up to max_rows sequences, run as `run` says (model_opts.h: computing in run->compute — TENSOR_BF16:
 * bf16 activations and a bf16 copy of the fp32 parameters, made by params_changed; CUDA only —,
 * keeping activations for backward as run->recompute says, the classifier's logits in chunks of
 * run->logits_bytes), params and grads as buffers says (model_buffers). A shape or data that does
 * not fit is a usage error naming both. */
int gpt2_create(const gpt2_shape *shape, const lm_run *run, device *dev, const sample_layout *data, int64_t max_rows,
                model_buffers buffers, model **out, ddp_err *err);

/* The parameter tensors a GPT-2 of this shape has, as gpt2_create lays them out (names, shapes,
 * offsets; m->n_params), into m->tensors of a zeroed model that is not built: for writers of a
 * model's files that have no model. Free with model_free_tensors. */
int gpt2_tensor_table(const gpt2_shape *shape, model *m, ddp_err *err);

/* The device memory gpt2_create allocates for activations and backward scratch
 * (model.activation_bytes) for sequences of T tokens and max_rows B, run as `run` says, into
 * *bytes: for the memory plan of a model that is not built, and checked by gpt2_create before it
 * carves them. A size that does not fit in 64 bits is a usage error naming the keys it grows with. */
int gpt2_activation_bytes(const gpt2_shape *shape, const lm_run *run, int64_t T, int64_t B, size_t *bytes,
                          ddp_err *err);

/* The shape as text: "gpt2 n_layer=12 n_head=12 n_embd=768 block_size=1024 vocab_size=50257". A
 * model's description is this followed by " seq_len=T". */
void gpt2_format_shape(const gpt2_shape *shape, char *out, size_t size);

/* The shape and sequence length back from a GPT-2 model's description (model.description, as
 * checkpoints record it), exactly as gpt2_create writes it; any other text (another model's
 * description) is a usage error quoting it. */
int gpt2_parse_description(const char *description, gpt2_shape *shape, int64_t *seq_len, ddp_err *err);

#endif
