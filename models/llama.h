/* llama.h — the Llama model's own entry points beyond model.h: building it, its tensor table for
 * writers of its files, its RoPE tables, and its description text both ways (checkpoints record
 * it; the tools that rebuild a model from a checkpoint parse it back).
 *
 * The model takes int32 token ids [rows, T] and predicts the next token at every position
 * (io.sample i32 x T -> i32 x T, a language model), as GPT-2 does; T is the data's sequence
 * length, at most block_size. Its shape is llama_shape (models/model_opts.h). Everything else goes
 * through model.h. This header must not grow training-loop concerns. */
#ifndef DDP_LLAMA_H
#define DDP_LLAMA_H

#include "model.h"

/* vocab_size rounded up as GPT-2's (gpt2_vocab_padded): embed_tokens' and lm_head's rows and the
 * logits' row stride. */
int64_t llama_vocab_padded(int64_t vocab_size);

/* A Llama of this shape for token sequences of data->input.count positions, with activations for
 * up to max_rows sequences, computing in `compute` (TENSOR_BF16: bf16 activations and a bf16 copy
 * of the fp32 parameters, made by params_changed; CUDA only), params and grads with param_tail
 * spare floats (model.param_tail). A shape or data that does not fit is a usage error naming both. */
int llama_create(const llama_shape *shape, tensor_dtype compute, device *dev, const sample_layout *data,
                 int64_t max_rows, size_t param_tail, model **out, ddp_err *err);

/* The parameter tensors a Llama of this shape has, as llama_create lays them out (Hugging Face's
 * names, shapes, offsets; m->n_params), into m->tensors of a zeroed model that is not built: for
 * writers of a model's files that have no model. Free with model_free_tensors. */
int llama_tensor_table(const llama_shape *shape, model *m, ddp_err *err);

/* The device memory llama_create allocates for activations, backward scratch and its tables
 * (model.activation_bytes) for sequences of T tokens and max_rows B, computing in `compute`, into
 * *bytes: for the memory plan of a model that is not built, and checked by llama_create before it
 * carves them. A size that does not fit in 64 bits is a usage error naming the keys it grows with. */
int llama_activation_bytes(const llama_shape *shape, tensor_dtype compute, int64_t T, int64_t B, size_t *bytes,
                           ddp_err *err);

/* The rotary tables the model uploads: cos and sin [positions, head_size/2] of t·f_j with
 * f_j = rope_theta^(-2j/head_size), computed in double and rounded to float once. */
void llama_rope_tables(int64_t positions, int64_t head_size, double rope_theta, float *cos_out, float *sin_out);

/* The shape as text: "llama n_layer=12 n_head=12 n_kv_head=4 n_embd=768 ffn_hidden=2048
 * block_size=1024 vocab_size=32000 rope_theta=10000 norm_eps=1e-05 tie_embeddings=0" (numbers in
 * the shortest text that reads back exactly). A model's description is this and " seq_len=T". */
void llama_format_shape(const llama_shape *shape, char *out, size_t size);

/* The shape and sequence length back from a Llama's description, exactly as llama_create writes
 * it; any other text (another model's description) is a usage error quoting it. */
int llama_parse_description(const char *description, llama_shape *shape, int64_t *seq_len, ddp_err *err);

#endif
