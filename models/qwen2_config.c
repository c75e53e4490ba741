/* qwen2_config.c — Qwen2's config section (model.qwen2): its keys and defaults, the Llama family's
 * rules over its shape (model_config.h), AdamW's betas default, and the checks of a shape
 * checkpoint.init_from brings. Qwen2 has no FFN width rule: model.qwen2.ffn_hidden is a number.
 *
 * Its rows locate their fields in model_kind_opts (model_config.h); config/ composes them into its
 * table and runs the rules. Must not read YAML or the config struct. */
#include <stddef.h>

#include "model_config.h"

#define CFG_OFF(field) offsetof(model_kind_opts, field)
#define FROM_FOLDER " Left out with `checkpoint.init_from`: the folder's."

/* A small Qwen2 (about GPT-2 small's size) with Qwen2.5's rope_theta, ε and tied embeddings;
 * the shape keys come in llama_shape's field order. */
static const cfg_key qwen2_keys[] = {
    SECTION("model.qwen2"),
    INT("model.qwen2.n_layer", qwen2.n_layer, 1, LLAMA_MAX_LAYERS, "12", HASH_YES, "Transformer blocks." FROM_FOLDER),
    INT("model.qwen2.n_head", qwen2.n_head, 1, 1024, "12", HASH_YES,
        "Query heads; must divide `model.qwen2.n_embd`, leaving an even head size (RoPE rotates its two halves)."
        FROM_FOLDER),
    INT("model.qwen2.n_kv_head", qwen2.n_kv_head, 1, 1024, "2", HASH_YES,
        "Key/value heads (grouped-query attention); must divide `model.qwen2.n_head`." FROM_FOLDER),
    INT("model.qwen2.n_embd", qwen2.n_embd, 2, 1 << 16, "768", HASH_YES, "Channels." FROM_FOLDER),
    INT("model.qwen2.ffn_hidden", qwen2.ffn_hidden, 1, 1 << 20, "2048", HASH_YES,
        "Width of the SwiGLU MLP (Qwen2's intermediate_size)." FROM_FOLDER),
    INT("model.qwen2.block_size", qwen2.block_size, 1, 1 << 20, "1024", HASH_YES,
        "Longest sequence the model was made for (config.json's max_position_embeddings); at least "
        "`data.seq_len`." FROM_FOLDER),
    INT("model.qwen2.vocab_size", qwen2.vocab_size, 2, 1 << 24, "32000", HASH_YES,
        "Vocabulary, at least the data's; padded to a multiple of 128 inside. With qwen2, `optimizer.betas` "
        "defaults to `[0.9, 0.95]` and weight decay applies to 2-D tensors only (not the q/k/v biases)."
        FROM_FOLDER),
    NUM("model.qwen2.rope_theta", qwen2.rope_theta, NR_POSITIVE, "1000000", HASH_YES,
        "RoPE base (Qwen2.5: 1000000)." FROM_FOLDER),
    NUM("model.qwen2.norm_eps", qwen2.norm_eps, NR_POSITIVE, "1e-6", HASH_YES, "RMSNorm's ε." FROM_FOLDER),
    BOOL("model.qwen2.tie_embeddings", qwen2.tie_embeddings, "true", HASH_YES,
         "The output projection is the token embedding (no `lm_head`), as in Qwen2.5 up to 3B." FROM_FOLDER),
};

static const model_key_rule qwen2_rules[] = {
    {"model.qwen2.n_head", "model.qwen2.n_embd", llama_rule_heads_uneven,
     "model.qwen2.n_embd divisible by model.qwen2.n_head"},
    {"model.qwen2.n_head", "model.qwen2.n_embd", llama_rule_head_odd,
     "an even head size model.qwen2.n_embd / model.qwen2.n_head (RoPE rotates its two halves)"},
    {"model.qwen2.n_kv_head", "model.qwen2.n_head", llama_rule_kv_uneven,
     "model.qwen2.n_head divisible by model.qwen2.n_kv_head"},
    {"model.qwen2.block_size", "data.seq_len", llama_rule_seq_over_block, "data.seq_len <= model.qwen2.block_size"},
};

static int qwen2_shape_check(const model_kind_opts *o, const model_general *g, const char *file,
                             const char *const names[], ddp_err *err)
{
    (void)o;
    return llama_config_check_shape(g, "model.qwen2.block_size", file, names, err);
}

/* Qwen2 starts from a Hugging Face folder only. */
const model_config_kind qwen2_config_kind = {
    .kind = MODEL_QWEN2,
    .path = "model.qwen2",
    .keys = MODEL_CONFIG_KEYS(qwen2_keys),
    .language_model = true,
    .title = "Qwen2",
    .hf_folder = true,
    .beta2 = 0.95,
    .rules = MODEL_CONFIG_KEYS(qwen2_rules),
    .shape_off = offsetof(model_kind_opts, qwen2),
    .shape_size = sizeof(llama_shape),
    .shape_check = qwen2_shape_check,
};
