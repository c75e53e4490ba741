/* qwen2.h — Qwen2, the architecture of Qwen2 and Qwen2.5 (transformers' Qwen2ForCausalLM): the
 * Llama's block with biases on the q, k and v projections, a kind of the Llama family (llama.h).
 * Its shape is a llama_shape (rope_theta 1e6 and tied embeddings in the small sizes are the
 * config's); its Hugging Face config.json is Qwen2Config's (qwen2.c). Everything else is llama.h's
 * and llama_hf.h's entry points with qwen2_family. Declarations only. */
#ifndef DDP_QWEN2_H
#define DDP_QWEN2_H

#include "llama.h"

extern const llama_family qwen2_family;

#endif
