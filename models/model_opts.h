/* model_opts.h — what a model is built from: its kind, each kind's shape and settings, and the
 * element type it computes in (model_create takes these). The config's model section holds the
 * kind and each kind's settings in these types (model_kind_opts; config/config.h includes this
 * header, and each kind's config rows, models/model_config.h, describe them);
 * the training job adds the compute type from the config's precision; the tools that rebuild a
 * GPT-2 or a Llama from a checkpoint fill its shape from the description (gpt2_parse_description,
 * llama_parse_description).
 * Declarations only: nothing here builds a model. */
#ifndef DDP_MODEL_OPTS_H
#define DDP_MODEL_OPTS_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/device/device.h"

#define MLP_MAX_HIDDEN 16

typedef enum { MODEL_MLP, MODEL_GPT2, MODEL_LLAMA, MODEL_QWEN2, MODEL_MISTRAL, MODEL_QWEN3 } model_kind;

/* train.recompute: what a language model's backward rebuilds instead of keeping from the forward.
 * SELECTIVE keeps each block's GEMM and attention outputs and recomputes its norms and element-wise
 * ops; FULL keeps only each block's input and replays the block's forward. The kernels are
 * deterministic, so the gradients are bit-identical to NONE's. */
typedef enum { RECOMPUTE_NONE, RECOMPUTE_SELECTIVE, RECOMPUTE_FULL } recompute_mode;

/* train.recompute's values in recompute_mode's order, NULL-terminated (models/model_config.c). */
extern const char *const recompute_mode_names[];

/* How a language model runs beside its shape: gpt2_create, llama_create and their activation
 * sizes take it (model_registry.c fills it from model_opts). */
typedef struct lm_run {
    tensor_dtype compute;       /* activations' and GEMM operands' type (model_opts.compute) */
    recompute_mode recompute;
    /* the most bytes of logits the classifier holds at once (train.logits_mb): it takes a
     * micro-batch's token rows in chunks of as many rows as fit, at least one; 0: all rows at
     * once, and the logits stay readable after a pass (model_ops.logits) */
    size_t logits_bytes;
} lm_run;

/* The MLP's hidden layers and activation (its input width and class count come from the data). */
typedef struct mlp_opts {
    int n_hidden;
    int64_t hidden[MLP_MAX_HIDDEN];             /* hidden layer widths, input side first */
    act_kind activation;
} mlp_opts;

/* The transformer's shape. vocab_size is the tokenizer's; the model pads it (gpt2_vocab_padded). */
typedef struct gpt2_shape {
    int64_t n_layer, n_head, n_embd, block_size, vocab_size;
} gpt2_shape;

/* The Llama's shape (models/llama.h). n_kv_head divides n_head (grouped-query attention), the head
 * size n_embd / n_head is even (RoPE pairs its halves); ffn_hidden is the MLP's width, always a
 * number here (the config resolves its multiple_of rule); vocab_size is padded inside as GPT-2's. */
#define LLAMA_MAX_HEAD_DIM 1024 /* model.llama.head_dim's and config.json's limit */
#define LLAMA_MAX_LAYERS 128 /* Llama 3.1 405B has 126 (model.llama.n_layer's and config.json's limit) */

/* Llama 3.1's stretch of the RoPE frequencies (Hugging Face's rope_scaling {"rope_type": "llama3"}):
 * pairs turning slower than low_freq_factor turns over original_max_positions go factor times
 * slower, those faster than high_freq_factor turns keep their speed, the ones between are blended
 * (llama_rope_frequency). factor 1 (or 0, a shape that has no such keys: Qwen2's): no scaling. */
typedef struct llama_rope_scaling {
    double factor, low_freq_factor, high_freq_factor;
    int64_t original_max_positions;
} llama_rope_scaling;
/* No stretch as a folder without rope_scaling and a description without it read: the values of the
 * model.llama.rope_scaling keys' defaults, so that such a folder's shape is a config's without them. */
#define LLAMA_ROPE_UNSCALED ((llama_rope_scaling){1, 1, 4, 8192})

typedef struct llama_shape {
    int64_t n_layer, n_head, n_kv_head, n_embd, ffn_hidden, block_size, vocab_size;
    double rope_theta, norm_eps;
    bool tie_embeddings;
    /* Llama and Mistral: 0 (n_embd / n_head), or the size of each head, config.json's head_dim:
     * q_proj has n_head · head_dim rows, which need not be n_embd (Mistral-Nemo: 32 · 128 of
     * 5120). A folder's or config's head_dim equal to n_embd / n_head is held as 0. */
    int64_t head_dim;
    llama_rope_scaling rope_scaling; /* Llama only: Qwen2's shape keeps it unscaled */
    /* Mistral only: 0, or config.json's sliding_window, each position seeing that many (itself
     * included). ddprun attends to every earlier position, which is the same only while the
     * sequence is no longer than the window: data.seq_len <= sliding_window is required. */
    int64_t sliding_window;
} llama_shape;

/* The head size: head_dim, or n_embd / n_head when that is 0 (0 while n_head is). Whether
 * head_dim is the shape's own, set and not n_embd / n_head: only then do the description and the
 * config hash carry it, so that every shape without one keeps its text and hash
 * (llama_config.c). */
int64_t llama_head_dim(const llama_shape *s);
bool llama_shape_own_head_dim(const llama_shape *s);
/* Writes a head_dim that is n_embd / n_head as 0, as the config's resolve step and the folder
 * readers hold it, so that one shape has one text (an n_embd still 0 leaves it as set). */
void llama_shape_normalize_head_dim(llama_shape *s);

/* Each kind's settings as the config holds them (config/config.h's model section): a kind's config
 * rows (its *_config.c) locate their fields in this struct. A new kind adds its member here. */
typedef struct model_kind_opts {
    mlp_opts mlp;
    gpt2_shape gpt2;
    llama_shape llama;          /* ffn_hidden resolved by the load (model.llama.ffn_hidden 0) */
    int64_t llama_multiple_of;  /* model.llama.multiple_of: Llama's rule for ffn_hidden 0 */
    llama_shape qwen2;          /* Qwen2: the Llama's block with q/k/v biases (models/qwen2.h) */
    llama_shape mistral;        /* Mistral: the Llama's block, Mistral's files (models/mistral.h) */
    llama_shape qwen3;          /* Qwen3: the Llama's block with q/k norms (models/qwen3.h) */
} model_kind_opts;

/* A shape read from checkpoint.init_from's file, in its kind's member. */
typedef union model_init_shape {
    gpt2_shape gpt2;
    llama_shape llama;
} model_init_shape;

typedef struct model_opts {
    model_kind kind;
    mlp_opts mlp;           /* kind MODEL_MLP's */
    gpt2_shape gpt2;        /* kind MODEL_GPT2's */
    llama_shape llama;      /* kind MODEL_LLAMA's */
    llama_shape qwen2;      /* kind MODEL_QWEN2's */
    llama_shape mistral;    /* kind MODEL_MISTRAL's */
    llama_shape qwen3;      /* kind MODEL_QWEN3's */
    /* activations' and GEMM operands' type: TENSOR_F32, or TENSOR_BF16 (a GPT-2 or Llama on
     * the CUDA backend: fp32 parameters with a bf16 copy to compute with) */
    tensor_dtype compute;
    recompute_mode recompute; /* a language model's; the MLP's is RECOMPUTE_NONE */
    size_t logits_bytes;      /* a language model's lm_run.logits_bytes (0: whole micro-batches) */
} model_opts;

#endif
