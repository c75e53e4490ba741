/* mistral.h — Mistral, the architecture of Mistral-7B (transformers' MistralForCausalLM): the
 * Llama's block exactly, a kind of the Llama family (llama.h), with Mistral's Hugging Face
 * config.json (mistral.c). Its sliding window is off (null, as from v0.2) or at least the
 * sequence (Mistral-7B-v0.1's 4096 for data.seq_len up to 4096), since ddprun's attention sees
 * every earlier position. Everything else is llama.h's and llama_hf.h's entry points with
 * mistral_family. Declarations only. */
#ifndef DDP_MISTRAL_H
#define DDP_MISTRAL_H

#include "llama.h"

extern const llama_family mistral_family;

#endif
