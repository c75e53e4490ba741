/* mistral.c — Mistral as a Llama family (mistral.h): its name and its Hugging Face config.json
 * both ways — the keys its import fixes (MistralConfig's values our model computes), its
 * sliding_window read into the shape, and the text its export writes (MistralConfig as transformers' save_pretrained writes it: json.dumps, indent
 * 2, sorted keys). The model, its passes and the folder's tensors are the Llama family's. Must
 * not know checkpoints, configs or the training loop. */
#include "mistral.h"

#include "llama_hf.h"

static const hf_fixed_key mistral_fixed_keys[] = {
    {"model_type", {"mistral"}, JSON_STRING, "ddprun imports Mistral (model_type \"mistral\")"},
    {"hidden_act", {"silu", "swish"}, JSON_STRING, "ddprun's Mistral computes SwiGLU with silu"},
    {"partial_rotary_factor", {"1"}, JSON_NUMBER, "ddprun's Mistral rotates whole heads (partial_rotary_factor 1)"},
    {"rope_scaling", {"null"}, JSON_NULL, "ddprun's Mistral applies RoPE unscaled (rope_scaling null)"},
};

/* MistralConfig's keys: our shape, the others at the value our Mistral computes or MistralConfig's
 * default. */
static void write_mistral_config(FILE *f, const llama_shape *s, const hf_token_ids *ids, const char *torch_dtype)
{
    char eps[32], theta[32];
    llama_hf_py_float(s->norm_eps, eps, sizeof eps);
    llama_hf_py_float(s->rope_theta, theta, sizeof theta);
    fprintf(f, "{\n  \"architectures\": [\n    \"MistralForCausalLM\"\n  ],\n  \"attention_dropout\": 0.0,\n");
    hf_bos_token_id_write(f, ids, "1"); /* MistralConfig's defaults */
    hf_eos_token_id_write(f, ids, "2");
    fprintf(f, "  \"head_dim\": %lld,\n  \"hidden_act\": \"silu\",\n"
               "  \"hidden_size\": %lld,\n  \"initializer_range\": 0.02,\n  \"intermediate_size\": %lld,\n"
               "  \"max_position_embeddings\": %lld,\n  \"model_type\": \"mistral\",\n  \"num_attention_heads\": %lld,\n"
               "  \"num_hidden_layers\": %lld,\n  \"num_key_value_heads\": %lld,\n",
            (long long)llama_head_dim(s), (long long)s->n_embd, (long long)s->ffn_hidden,
            (long long)s->block_size, (long long)s->n_head, (long long)s->n_layer, (long long)s->n_kv_head);
    char window[24] = "null";
    if (s->sliding_window > 0)
        snprintf(window, sizeof window, "%lld", (long long)s->sliding_window);
    fprintf(f, "  \"rms_norm_eps\": %s,\n  \"rope_theta\": %s,\n  \"sliding_window\": %s,\n"
               "  \"tie_word_embeddings\": %s,\n  \"torch_dtype\": \"%s\",\n  \"use_cache\": true,\n"
               "  \"vocab_size\": %lld\n}\n",
            eps, theta, window, s->tie_embeddings ? "true" : "false", torch_dtype, (long long)s->vocab_size);
}

static const llama_hf_family mistral_hf = {"MistralForCausalLM", mistral_fixed_keys,
                                           sizeof mistral_fixed_keys / sizeof mistral_fixed_keys[0],
                                           write_mistral_config, true, true, 0, 8};

const llama_family mistral_family = {MODEL_MISTRAL, "mistral", "Mistral", false, false, &mistral_hf};
