/* qwen3.h — Qwen3, the architecture of the dense Qwen3 models (transformers' Qwen3ForCausalLM): the
 * Llama's block with each q and k head RMS-normalised over its head size before RoPE (q_norm,
 * k_norm), no biases, and heads of their own size (head_dim: Qwen3-0.6B's 16 heads of 128 over
 * 1024 channels), a kind of the Llama family (llama.h). Its shape is a llama_shape; its Hugging
 * Face config.json is Qwen3Config's (qwen3.c). Everything else is llama.h's and llama_hf.h's entry
 * points with qwen3_family. Declarations only. */
#ifndef DDP_QWEN3_H
#define DDP_QWEN3_H

#include "llama.h"

extern const llama_family qwen3_family;

#endif
