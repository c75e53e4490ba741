/* qwen3_config.c — Qwen3's config section (model.qwen3): its keys and defaults, the Llama family's
 * rules over its shape (model_config.h), AdamW's betas default, and the checks of a shape
 * checkpoint.init_from brings. Qwen3 has no FFN width rule: model.qwen3.ffn_hidden is a number.
 *
 * Its rows locate their fields in model_kind_opts (model_config.h); config/ composes them into its
 * table and runs the rules. Must not read YAML or the config struct. */
#include <stddef.h>

#include "model_config.h"

#define CFG_OFF(field) offsetof(model_kind_opts, field)
#define FROM_FOLDER " Left out with `checkpoint.init_from`: the folder's."

/* A small Qwen3 (about GPT-2 small's size) with Qwen3's rope_theta, ε, vocabulary and tied
 * embeddings (as its sizes up to 4B); the shape keys come in llama_shape's field order. */
static const cfg_key qwen3_keys[] = {
    SECTION("model.qwen3"),
    INT("model.qwen3.n_layer", qwen3.n_layer, 1, LLAMA_MAX_LAYERS, "12", HASH_YES, "Transformer blocks." FROM_FOLDER),
    INT("model.qwen3.n_head", qwen3.n_head, 1, 1024, "12", HASH_YES,
        "Query heads; unless `model.qwen3.head_dim` is set, must divide `model.qwen3.n_embd`, leaving an even head "
        "size (RoPE rotates its two halves)." FROM_FOLDER),
    INT("model.qwen3.n_kv_head", qwen3.n_kv_head, 1, 1024, "4", HASH_YES,
        "Key/value heads (grouped-query attention); must divide `model.qwen3.n_head`." FROM_FOLDER),
    INT("model.qwen3.n_embd", qwen3.n_embd, 2, 1 << 16, "768", HASH_YES, "Channels." FROM_FOLDER),
    INT("model.qwen3.ffn_hidden", qwen3.ffn_hidden, 1, 1 << 20, "2048", HASH_YES,
        "Width of the SwiGLU MLP (Qwen3Config's intermediate_size)." FROM_FOLDER),
    INT("model.qwen3.block_size", qwen3.block_size, 1, 1 << 20, "1024", HASH_YES,
        "Longest sequence the model was made for (config.json's max_position_embeddings; Qwen3's 40960); at "
        "least `data.seq_len`." FROM_FOLDER),
    INT("model.qwen3.vocab_size", qwen3.vocab_size, 2, 1 << 24, "151936", HASH_YES,
        "Vocabulary, at least the data's; padded to a multiple of 128 inside (Qwen3's: 151936). With qwen3, "
        "`optimizer.betas` defaults to `[0.9, 0.95]` and weight decay applies to 2-D tensors only (not the "
        "norms)." FROM_FOLDER),
    NUM("model.qwen3.rope_theta", qwen3.rope_theta, NR_POSITIVE, "1000000", HASH_YES, "RoPE base (Qwen3: 1000000)."
        FROM_FOLDER),
    NUM("model.qwen3.norm_eps", qwen3.norm_eps, NR_POSITIVE, "1e-6",
        HASH_YES, "RMSNorm's ε, the q and k heads' norms' too." FROM_FOLDER),
    BOOL("model.qwen3.tie_embeddings", qwen3.tie_embeddings, "true", HASH_YES,
         "The output projection is the token embedding (no `lm_head`), as in Qwen3 up to 4B." FROM_FOLDER),
    INT("model.qwen3.head_dim", qwen3.head_dim, 0, LLAMA_MAX_HEAD_DIM, "0", HASH_YES,
        "Size of each attention head, and of the q and k norms' weights; 0: `model.qwen3.n_embd / "
        "model.qwen3.n_head` (that value is resolved to 0). Every Qwen3's is 128: Qwen3-0.6B's over 1024 channels "
        "and 16 heads (then `n_head` need not divide `n_embd`); even (RoPE rotates its two halves)." FROM_FOLDER),
};

static const model_key_rule qwen3_rules[] = {
    {"model.qwen3.n_head", "model.qwen3.n_embd", llama_rule_heads_uneven,
     "model.qwen3.n_embd divisible by model.qwen3.n_head"},
    {"model.qwen3.n_head", "model.qwen3.n_embd", llama_rule_head_odd,
     "an even head size model.qwen3.n_embd / model.qwen3.n_head (RoPE rotates its two halves)"},
    {"model.qwen3.head_dim", "model.qwen3.head_dim", llama_rule_head_dim_odd,
     "an even model.qwen3.head_dim (RoPE rotates its two halves)"},
    {"model.qwen3.n_kv_head", "model.qwen3.n_head", llama_rule_kv_uneven,
     "model.qwen3.n_head divisible by model.qwen3.n_kv_head"},
    {"model.qwen3.block_size", "data.seq_len", llama_rule_seq_over_block, "data.seq_len <= model.qwen3.block_size"},
};

/* A head_dim of n_embd / n_head becomes 0, as a folder's does. */
static void qwen3_resolve(model_kind_opts *o, const model_general *g)
{
    (void)g;
    llama_shape_normalize_head_dim(&o->qwen3);
}

static int qwen3_shape_check(const model_kind_opts *o, const model_general *g, const char *file,
                             const char *const names[], ddp_err *err)
{
    (void)o;
    return llama_config_check_shape(g, "model.qwen3.block_size", file, names, err);
}

/* Qwen3 starts from a Hugging Face folder only. */
const model_config_kind qwen3_config_kind = {
    .kind = MODEL_QWEN3,
    .path = "model.qwen3",
    .keys = MODEL_CONFIG_KEYS(qwen3_keys),
    .language_model = true,
    .title = "Qwen3",
    .hf_folder = true,
    .beta2 = 0.95,
    .resolve = qwen3_resolve,
    .rules = MODEL_CONFIG_KEYS(qwen3_rules),
    .shape_off = offsetof(model_kind_opts, qwen3),
    .shape_size = sizeof(llama_shape),
    .shape_check = qwen3_shape_check,
};
