/* llama.h — the Llama family's own entry points beyond model.h: building one, its tensor table
 * for writers of its files, its RoPE tables, and its description text both ways (checkpoints
 * record it; the tools that rebuild a model from a checkpoint parse it back).
 *
 * A family is a model kind with the Llama's block (llama_family): the Llama itself
 * (llama_family_llama), and kinds that differ from it only in what llama_family says — its name,
 * biases on the q, k and v projections, RMSNorms of the q and k heads, its Hugging Face files —
 * each defined in its own files. Every entry point takes the family; the shape is llama_shape for all.
 *
 * The model takes int32 token ids [rows, T] and predicts the next token at every position
 * (io.sample i32 x T -> i32 x T, a language model), as GPT-2 does; T is the data's sequence
 * length, at most block_size. Its shape is llama_shape (models/model_opts.h). Everything else goes
 * through model.h. This header must not grow training-loop concerns. */
#ifndef DDP_LLAMA_H
#define DDP_LLAMA_H

#include "model.h"

struct llama_hf_family; /* llama_hf.h: a family's Hugging Face files */

typedef struct llama_family {
    model_kind kind;
    const char *name;  /* model.kind's value: the description's first word, "model.NAME.*" in messages */
    const char *title; /* in messages: "Llama" */
    bool qkv_bias;     /* q_proj, k_proj and v_proj have biases (added before RoPE) */
    bool qk_norm;      /* each q and k head is RMS-normalised over its head_dim (q_norm, k_norm: one
                        * weight vector each, shared by the heads) before RoPE */
    const struct llama_hf_family *hf;
} llama_family;

extern const llama_family llama_family_llama; /* Meta's Llama: no biases */

/* vocab_size rounded up as GPT-2's (gpt2_vocab_padded): embed_tokens' and lm_head's rows and the
 * logits' row stride. */
int64_t llama_vocab_padded(int64_t vocab_size);

/* A Llama of this shape for token sequences of data->input.count positions, with activations for
 * up to max_rows sequences, run as `run` says (gpt2_create's), params and grads as buffers says
 * (model_buffers). A shape or data that does not fit is a usage error naming both. */
int llama_create(const llama_family *fam, const llama_shape *shape, const lm_run *run, device *dev,
                 const sample_layout *data, int64_t max_rows, model_buffers buffers, model **out, ddp_err *err);

/* The parameter tensors a model of this family and shape has, as llama_create lays them out
 * (Hugging Face's names, shapes, offsets; m->n_params), into m->tensors of a zeroed model that is not built: for
 * writers of a model's files that have no model. Free with model_free_tensors. */
int llama_tensor_table(const llama_family *fam, const llama_shape *shape, model *m, ddp_err *err);

/* The device memory llama_create allocates for activations, backward scratch and its tables
 * (model.activation_bytes) for sequences of T tokens and max_rows B, run as `run` says, into
 * *bytes: for the memory plan of a model that is not built, and checked by llama_create before it
 * carves them. A size that does not fit in 64 bits is a usage error naming the keys it grows with. */
int llama_activation_bytes(const llama_family *fam, const llama_shape *shape, const lm_run *run, int64_t T, int64_t B,
                           size_t *bytes, ddp_err *err);

/* Whether the shape stretches its RoPE frequencies (rope_scaling.factor above 1). */
bool llama_rope_scaled(const llama_shape *shape);
/* The radians per position head dimension pair j turns at: f_j = rope_theta^(-2j/head_size), then
 * with rope_scaling (Hugging Face's "llama3" rope_type), for the pair's wavelength w = 2π/f_j and
 * L = original_max_positions: f_j when w < L/high_freq_factor, f_j/factor when w > L/low_freq_factor,
 * else (1-s)·f_j/factor + s·f_j with s = (L/w - low_freq_factor)/(high_freq_factor - low_freq_factor).
 * In double. */
double llama_rope_frequency(const llama_shape *shape, int64_t j);

/* The rotary tables the model uploads: cos and sin [positions, head_size/2] of t·f_j
 * (llama_rope_frequency), computed in double and rounded to float once. */
void llama_rope_tables(const llama_shape *shape, int64_t positions, float *cos_out, float *sin_out);

/* The shape as text, the family's name first: "llama n_layer=12 n_head=12 n_kv_head=4 n_embd=768 ffn_hidden=2048
 * block_size=1024 vocab_size=32000 rope_theta=10000 norm_eps=1e-05 tie_embeddings=0" (numbers in
 * the shortest text that reads back exactly), and, with scaled RoPE frequencies, " rope_scaling=8,1,4,8192"
 * (factor, low_freq_factor, high_freq_factor, original_max_positions: short, as a checkpoint
 * header holds 256 bytes). A model's description is this and " seq_len=T". */
void llama_format_shape(const llama_family *fam, const llama_shape *shape, char *out, size_t size);

/* The shape and sequence length back from a description of the family's, exactly as llama_create
 * writes it; any other text (another model's or family's description) is a usage error quoting it. */
int llama_parse_description(const llama_family *fam, const char *description, llama_shape *shape, int64_t *seq_len, ddp_err *err);

#endif
