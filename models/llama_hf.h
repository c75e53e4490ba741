/* llama_hf.h — a Llama from and to a Hugging Face `save_pretrained` folder: config.json
 * (LlamaConfig) and model.safetensors (or its shards), as `transformers` writes LlamaForCausalLM.
 *
 * config.json gives the shape: num_hidden_layers, num_attention_heads, num_key_value_heads (absent
 * or null: num_attention_heads), hidden_size, intermediate_size, max_position_embeddings,
 * vocab_size, rope_theta (default 10000), rms_norm_eps (default 1e-6, LlamaConfig's),
 * tie_word_embeddings (default false). Every other key that changes what the model computes must
 * hold what our Llama computes or the folder is refused naming FILE:LINE:COL, the key and its
 * value: model_type "llama", architectures ["LlamaForCausalLM"], head_dim absent, null or
 * hidden_size / num_attention_heads, hidden_act "silu", rope_scaling absent or null,
 * attention_bias and mlp_bias false, pretraining_tp 1.
 *
 * The tensors are ours under the same (Hugging Face's) names and [out, in] layout, q_proj and
 * k_proj rows already in the rotate-half order our RoPE applies: nothing is transposed or
 * permuted. embed_tokens' (and lm_head's) vocab_size rows fill the first rows of ours, the padding
 * rows stay zero; `rotary_emb.inv_freq` buffers (older saves) are skipped; with tied embeddings an
 * lm_head.weight, when present, must equal embed_tokens. A tensor missing, of another shape or not
 * the Llama's is refused naming it. F32, F16 and BF16 tensors are read.
 *
 * Writing is the inverse: every tensor under its name, embed_tokens' and lm_head's first
 * vocab_size rows, lm_head only when untied; F32 or BF16; the files as
 * runtime/hf/hf_folder_write.h writes them, config.json with LlamaConfig's keys (json.dumps,
 * indent 2, sorted). Must not know checkpoints, configs or the training loop. */
#ifndef DDP_LLAMA_HF_H
#define DDP_LLAMA_HF_H

#include "gpt2_llmc.h"
#include "llama.h"
#include "runtime/hf/hf_folder_write.h"

/* The shape DIR/config.json describes, once every key it holds checked out. */
int llama_hf_read_shape(const char *dir, llama_shape *shape, ddp_err *err);

/* DIR's parameters into Llama m (device memory). DIR's shape must be m's (both named otherwise).
 * A failed load leaves the parameters as they were. */
int llama_hf_load_model(model *m, const char *dir, ddp_err *err);

/* Whether our tensor `name` has the padded vocabulary's rows (embed_tokens, lm_head): HF stores
 * only the first vocab_size. */
bool llama_hf_vocab_rows(const char *name);

/* Writes a Llama of this shape, its tensors (our names, float32: gpt2_llmc_src's contract) from
 * src, as the folder dir (created, or replaced whole: runtime/hf/hf_folder_write.h) as dtype
 * (ST_F32 or ST_BF16), shards of at most max_shard_bytes of tensor data; *files gets the number
 * of safetensors files. A tensor src lacks is a usage error naming it, before anything is written
 * or removed. */
int llama_hf_write(const char *dir, const llama_shape *shape, st_dtype dtype, uint64_t max_shard_bytes,
                   gpt2_llmc_src src, void *ctx, int *files, ddp_err *err);

#endif
