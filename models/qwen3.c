/* qwen3.c — Qwen3 as a Llama family (qwen3.h): its name, its q/k norms, and its Hugging Face
 * config.json both ways — the keys its import fixes (Qwen3Config's values our model computes), its
 * head_dim read into the shape, and the text its export writes (Qwen3Config as transformers'
 * save_pretrained writes it: json.dumps, indent 2, sorted keys). The model, its passes and the
 * folder's tensors are the Llama family's. Must not know checkpoints, configs or the training
 * loop. */
#include "qwen3.h"

#include "llama_hf.h"

static const hf_fixed_key qwen3_fixed_keys[] = {
    {"model_type", {"qwen3"}, JSON_STRING, "ddprun imports Qwen3 (model_type \"qwen3\")"},
    {"hidden_act", {"silu", "swish"}, JSON_STRING, "ddprun's Qwen3 computes SwiGLU with silu"},
    {"rope_scaling", {"null"}, JSON_NULL, "ddprun's Qwen3 applies RoPE unscaled (rope_scaling null)"},
    {"partial_rotary_factor", {"1"}, JSON_NUMBER, "ddprun's Qwen3 rotates whole heads (partial_rotary_factor 1)"},
    {"use_sliding_window", {"false"}, JSON_BOOL, "ddprun's Qwen3 attends to every earlier position"},
    {"attention_bias", {"false"}, JSON_BOOL, "ddprun's Qwen3 has no q/k/v/o biases"},
};

/* Qwen3Config's keys: our shape, the others at the value our Qwen3 computes or Qwen3Config's
 * default (max_window_layers 28; sliding_window null, as the released models', none being used). */
static void write_qwen3_config(FILE *f, const llama_shape *s, const hf_token_ids *ids, const char *torch_dtype)
{
    char eps[32], theta[32];
    llama_hf_py_float(s->norm_eps, eps, sizeof eps);
    llama_hf_py_float(s->rope_theta, theta, sizeof theta);
    fprintf(f, "{\n  \"architectures\": [\n    \"Qwen3ForCausalLM\"\n  ],\n  \"attention_bias\": false,\n"
               "  \"attention_dropout\": 0.0,\n");
    hf_bos_token_id_write(f, ids, NULL); /* Qwen3Config has none of its own: PretrainedConfig's None */
    hf_eos_token_id_write(f, ids, NULL);
    fprintf(f, "  \"head_dim\": %lld,\n  \"hidden_act\": \"silu\",\n"
               "  \"hidden_size\": %lld,\n  \"initializer_range\": 0.02,\n  \"intermediate_size\": %lld,\n"
               "  \"max_position_embeddings\": %lld,\n  \"max_window_layers\": 28,\n  \"model_type\": \"qwen3\",\n"
               "  \"num_attention_heads\": %lld,\n  \"num_hidden_layers\": %lld,\n  \"num_key_value_heads\": %lld,\n",
            (long long)llama_head_dim(s), (long long)s->n_embd, (long long)s->ffn_hidden, (long long)s->block_size,
            (long long)s->n_head, (long long)s->n_layer, (long long)s->n_kv_head);
    fprintf(f, "  \"rms_norm_eps\": %s,\n  \"rope_scaling\": null,\n  \"rope_theta\": %s,\n"
               "  \"sliding_window\": null,\n  \"tie_word_embeddings\": %s,\n  \"torch_dtype\": \"%s\",\n"
               "  \"use_cache\": true,\n  \"use_sliding_window\": false,\n  \"vocab_size\": %lld\n}\n",
            eps, theta, s->tie_embeddings ? "true" : "false", torch_dtype, (long long)s->vocab_size);
}

static const llama_hf_family qwen3_hf = {"Qwen3ForCausalLM", qwen3_fixed_keys,
                                         sizeof qwen3_fixed_keys / sizeof qwen3_fixed_keys[0], write_qwen3_config,
                                         false, true, 128, 32};

const llama_family qwen3_family = {MODEL_QWEN3, "qwen3", "Qwen3", false, true, &qwen3_hf};
