/* mistral.h — Mistral, the architecture of Mistral-7B from v0.2 on (transformers'
 * MistralForCausalLM): the Llama's block exactly, a kind of the Llama family (llama.h), with
 * Mistral's Hugging Face config.json (mistral.c). Its sliding window must be off (null, as from
 * v0.2), since ddprun's attention sees every earlier position. Everything else is llama.h's and
 * llama_hf.h's entry points with mistral_family. Declarations only. */
#ifndef DDP_MISTRAL_H
#define DDP_MISTRAL_H

#include "llama.h"

extern const llama_family mistral_family;

#endif
