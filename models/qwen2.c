/* qwen2.c — Qwen2 as a Llama family (qwen2.h): its name, its q/k/v biases and its Hugging Face
 * config.json both ways — the keys its import fixes (Qwen2Config's values our model computes) and
 * the text its export writes (Qwen2Config as transformers' save_pretrained writes it: json.dumps,
 * indent 2, sorted keys). The model, its passes and the folder's tensors are the Llama family's.
 * Must not know checkpoints, configs or the training loop. */
#include "qwen2.h"

#include "llama_hf.h"

static const hf_fixed_key qwen2_fixed_keys[] = {
    {"model_type", {"qwen2"}, JSON_STRING, "ddprun imports Qwen2 (model_type \"qwen2\")"},
    {"hidden_act", {"silu", "swish"}, JSON_STRING, "ddprun's Qwen2 computes SwiGLU with silu"},
    {"rope_scaling", {"null"}, JSON_NULL, "ddprun's Qwen2 applies RoPE unscaled (rope_scaling null)"},
    {"partial_rotary_factor", {"1"}, JSON_NUMBER, "ddprun's Qwen2 rotates whole heads (partial_rotary_factor 1)"},
    {"use_sliding_window", {"false"}, JSON_BOOL, "ddprun's Qwen2 attends to every earlier position"},
};

/* Qwen2Config's keys: our shape, the others at the value our Qwen2 computes or Qwen2Config's
 * default (max_window_layers 28 and sliding_window null: no sliding window is used). */
static void write_qwen2_config(FILE *f, const llama_shape *s, const hf_token_ids *ids, const char *torch_dtype)
{
    char eps[32], theta[32];
    llama_hf_py_float(s->norm_eps, eps, sizeof eps);
    llama_hf_py_float(s->rope_theta, theta, sizeof theta);
    fprintf(f, "{\n  \"architectures\": [\n    \"Qwen2ForCausalLM\"\n  ],\n  \"attention_dropout\": 0.0,\n");
    hf_bos_token_id_write(f, ids, NULL); /* Qwen2Config has none of its own: PretrainedConfig's None */
    hf_eos_token_id_write(f, ids, NULL);
    fprintf(f, "  \"hidden_act\": \"silu\",\n  \"hidden_size\": %lld,\n  \"initializer_range\": 0.02,\n"
               "  \"intermediate_size\": %lld,\n  \"max_position_embeddings\": %lld,\n  \"max_window_layers\": 28,\n"
               "  \"model_type\": \"qwen2\",\n  \"num_attention_heads\": %lld,\n  \"num_hidden_layers\": %lld,\n"
               "  \"num_key_value_heads\": %lld,\n",
            (long long)s->n_embd, (long long)s->ffn_hidden, (long long)s->block_size, (long long)s->n_head,
            (long long)s->n_layer, (long long)s->n_kv_head);
    fprintf(f, "  \"rms_norm_eps\": %s,\n  \"rope_scaling\": null,\n  \"rope_theta\": %s,\n  \"sliding_window\": null,\n"
               "  \"tie_word_embeddings\": %s,\n  \"torch_dtype\": \"%s\",\n  \"use_cache\": true,\n"
               "  \"use_sliding_window\": false,\n  \"vocab_size\": %lld\n}\n",
            eps, theta, s->tie_embeddings ? "true" : "false", torch_dtype, (long long)s->vocab_size);
}

static const llama_hf_family qwen2_hf = {"Qwen2ForCausalLM", qwen2_fixed_keys,
                                         sizeof qwen2_fixed_keys / sizeof qwen2_fixed_keys[0], write_qwen2_config, false,
                                         false, 0, 32};

const llama_family qwen2_family = {MODEL_QWEN2, "qwen2", "Qwen2", true, false, &qwen2_hf};
