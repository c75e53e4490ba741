/* gpt2.h — the GPT-2 model's own entry points beyond model.h: its shape, building it, and what
 * the memory plan, the fixture checks and text generation read from it.
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
 * up to max_rows sequences. A shape or data that does not fit is a usage error naming both. */
int gpt2_create(const cfg_gpt2 *shape, device *dev, const sample_layout *data, int64_t max_rows, model **out,
                ddp_err *err);

#endif
