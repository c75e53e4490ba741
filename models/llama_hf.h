/* llama_hf.h — a model of the Llama family (llama.h) from and to a Hugging Face `save_pretrained`
 * folder: config.json and model.safetensors (or its shards), as `transformers` writes them. What
 * follows is the Llama's (LlamaConfig, LlamaForCausalLM); a family's llama_hf_family says what
 * differs in its config.json — its architecture, the keys it fixes, the text it writes — and its
 * q/k/v biases are tensors like any other.
 *
 * config.json gives the shape: num_hidden_layers, num_attention_heads, num_key_value_heads (null:
 * num_attention_heads; absent: the config class's default, kv_heads_absent), hidden_size, intermediate_size, max_position_embeddings,
 * vocab_size, rope_theta (default 10000), rms_norm_eps (default 1e-6, LlamaConfig's),
 * tie_word_embeddings (default false), rope_scaling (absent, null or rope_type "default": none;
 * rope_type "llama3": Llama 3.1's stretch, its factor, low_freq_factor, high_freq_factor and
 * original_max_position_embeddings; a family may fix it to null, as Qwen2's does), and for a
 * family that reads it (Mistral) sliding_window (absent: MistralConfig's 4096; null: none; else the
 * window, which llama_create requires to be at least the sequence), and for a family that reads it (Llama,
 * Mistral, Qwen3) head_dim (absent or null: hidden_size / num_attention_heads, Qwen3's absent 128 and
 * null refused as its config class reads them; else an even size as written, the heads' total width
 * then free of hidden_size; another family's must be absent, null or that quotient). The fixed keys (model_type first) are checked before the shape, so another
 * family's folder is refused by its model_type. Every other key
 * that changes what the model computes must hold what our Llama computes or the folder is refused
 * naming FILE:LINE:COL, the key and its value: model_type "llama", architectures
 * ["LlamaForCausalLM"], hidden_act "silu", attention_bias and mlp_bias false, pretraining_tp 1.
 *
 * The tensors are ours under the same (Hugging Face's) names and [out, in] layout (a family with
 * q/k norms has each layer's self_attn.q_norm and k_norm weights too), q_proj and
 * k_proj rows already in the rotate-half order our RoPE applies: nothing is transposed or
 * permuted. embed_tokens' (and lm_head's) vocab_size rows fill the first rows of ours, the padding
 * rows stay zero; `rotary_emb.inv_freq` buffers (older saves) are skipped; with tied embeddings an
 * lm_head.weight, when present, must equal embed_tokens. A tensor missing, of another shape or not
 * the Llama's is refused naming it. F32, F16 and BF16 tensors are read, one of ours of another
 * dtype refused naming it.
 *
 * Writing is the inverse: every tensor under its name, embed_tokens' and lm_head's first
 * vocab_size rows, lm_head only when untied; F32 or BF16; the files as
 * runtime/hf/hf_folder_write.h writes them, config.json with LlamaConfig's keys (json.dumps,
 * indent 2, sorted). Must not know checkpoints, configs or the training loop. */
#ifndef DDP_LLAMA_HF_H
#define DDP_LLAMA_HF_H

#include <stdio.h>

#include "gpt2_llmc.h"
#include "llama.h"
#include "runtime/hf/hf_folder.h"
#include "runtime/hf/hf_folder_write.h"
#include "runtime/hf/hf_token_ids.h"

/* The window a config.json without sliding_window means: MistralConfig's default (transformers
 * masks keys more than 4096 positions back), the one family that reads the key. */
#define LLAMA_HF_SLIDING_WINDOW_ABSENT 4096

/* A family's config.json: the shape keys are the Llama's (LlamaConfig's names) for every family. */
typedef struct llama_hf_family {
    const char *architecture;          /* config.json's "architectures" entry: "LlamaForCausalLM" */
    const hf_fixed_key *fixed_keys;    /* keys with the one value the family computes (model_type first) */
    size_t n_fixed_keys;
    /* config.json's text as the family's save_pretrained writes it (json.dumps, indent 2, sorted),
     * torch_dtype "float32" or "bfloat16", the token ids ids' (runtime/hf/hf_token_ids.h) */
    void (*write_config)(FILE *f, const llama_shape *s, const hf_token_ids *ids, const char *torch_dtype);
    bool sliding_window; /* config.json's sliding_window is read as MistralConfig reads it: absent
                          * LLAMA_HF_SLIDING_WINDOW_ABSENT (its default), null none, else a size */
    bool head_dim;       /* config.json's head_dim is read: absent or null none, else an even size */
    /* with head_dim: the head size a config.json without the key means, as the family's config
     * class's default (Qwen3Config's 128), null being refused (transformers' head size None);
     * 0: absent like null, hidden_size / num_attention_heads (LlamaConfig, MistralConfig) */
    int64_t head_dim_absent;
    /* the key/value heads a config.json without num_key_value_heads means, its config class's
     * default (MistralConfig's 8, Qwen2Config's and Qwen3Config's 32); 0: num_attention_heads
     * (LlamaConfig). null is num_attention_heads for every class. */
    int64_t kv_heads_absent;
} llama_hf_family;

/* v as Python's repr writes a float (10000.0, 1e-05, 500000.0): config.json's numbers. */
void llama_hf_py_float(double v, char *out, size_t n);

/* The shape DIR/config.json describes, once every key it holds checked out. */
int llama_hf_read_shape(const llama_family *fam, const char *dir, llama_shape *shape, ddp_err *err);

/* DIR's parameters into m, a model of the family (device memory). DIR's shape must be m's (both
 * named otherwise). A failed load leaves the parameters as they were. */
int llama_hf_load_model(const llama_family *fam, model *m, const char *dir, ddp_err *err);
/* The same for only the pieces of the parameters a ZeRO-3 rank keeps, into host (lm_hf.h). */
int llama_hf_load_pieces(const llama_family *fam, const model *m, const char *dir, const param_piece *pieces,
                         int n_pieces, float *host, ddp_err *err);

/* Whether our tensor `name` has the padded vocabulary's rows (embed_tokens, lm_head): HF stores
 * only the first vocab_size. */
bool llama_hf_vocab_rows(const char *name);

/* Writes a model of the family and this shape, its tensors (our names, float32: gpt2_llmc_src's contract) from
 * src, as the folder dir (created, or replaced whole: runtime/hf/hf_folder_write.h) as dtype
 * (ST_F32 or ST_BF16), shards of at most max_shard_bytes of tensor data; *files gets the number
 * of safetensors files; config.json's bos/eos token ids are those of the folder token_ids_from
 * (runtime/hf/hf_token_ids.h; NULL: the family's config class defaults). A tensor src lacks is a usage error naming it, before anything is
 * written or removed. */
int llama_hf_write(const llama_family *fam, const char *dir, const llama_shape *shape, const char *token_ids_from,
                   st_dtype dtype, uint64_t max_shard_bytes, gpt2_llmc_src src, void *ctx, int *files, ddp_err *err);

#endif
