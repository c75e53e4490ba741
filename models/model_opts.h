/* model_opts.h — what a model is built from: its kind, each kind's shape and settings, and the
 * element type it computes in (model_create takes these). The config's model section holds the
 * kind and each kind's settings in these types (config/config.h includes this header);
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

typedef enum { MODEL_MLP, MODEL_GPT2, MODEL_LLAMA } model_kind;

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
#define LLAMA_MAX_LAYERS 128 /* Llama 3.1 405B has 126 (model.llama.n_layer's and config.json's limit) */

typedef struct llama_shape {
    int64_t n_layer, n_head, n_kv_head, n_embd, ffn_hidden, block_size, vocab_size;
    double rope_theta, norm_eps;
    bool tie_embeddings;
} llama_shape;

typedef struct model_opts {
    model_kind kind;
    mlp_opts mlp;           /* kind MODEL_MLP's */
    gpt2_shape gpt2;        /* kind MODEL_GPT2's */
    llama_shape llama;      /* kind MODEL_LLAMA's */
    /* activations' and GEMM operands' type: TENSOR_F32, or TENSOR_BF16 (a GPT-2 or Llama on
     * the CUDA backend: fp32 parameters with a bf16 copy to compute with) */
    tensor_dtype compute;
} model_opts;

#endif
