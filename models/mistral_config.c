/* mistral_config.c — Mistral's config section (model.mistral): its keys and defaults, the Llama
 * family's rules over its shape (model_config.h), AdamW's betas default, and the checks of a shape
 * checkpoint.init_from brings (its sliding window at least data.seq_len). Mistral has no FFN width
 * rule: model.mistral.ffn_hidden is a number.
 *
 * Its rows locate their fields in model_kind_opts (model_config.h); config/ composes them into its
 * table and runs the rules. Must not read YAML or the config struct. */
#include <stddef.h>

#include "model_config.h"

#define CFG_OFF(field) offsetof(model_kind_opts, field)
#define FROM_FOLDER " Left out with `checkpoint.init_from`: the folder's."

/* A small Mistral (about GPT-2 small's size) with Mistral-7B-v0.3's rope_theta, ε and vocabulary;
 * the shape keys come in llama_shape's field order. */
static const cfg_key mistral_keys[] = {
    SECTION("model.mistral"),
    INT("model.mistral.n_layer", mistral.n_layer, 1, LLAMA_MAX_LAYERS, "12", HASH_YES, "Transformer blocks." FROM_FOLDER),
    INT("model.mistral.n_head", mistral.n_head, 1, 1024, "12", HASH_YES,
        "Query heads; unless `model.mistral.head_dim` is set, must divide `model.mistral.n_embd`, leaving an even "
        "head size (RoPE rotates its two halves)." FROM_FOLDER),
    INT("model.mistral.n_kv_head", mistral.n_kv_head, 1, 1024, "4", HASH_YES,
        "Key/value heads (grouped-query attention); must divide `model.mistral.n_head`." FROM_FOLDER),
    INT("model.mistral.n_embd", mistral.n_embd, 2, 1 << 16, "768", HASH_YES, "Channels." FROM_FOLDER),
    INT("model.mistral.ffn_hidden", mistral.ffn_hidden, 1, 1 << 20, "2048", HASH_YES,
        "Width of the SwiGLU MLP (MistralConfig's intermediate_size)." FROM_FOLDER),
    INT("model.mistral.block_size", mistral.block_size, 1, 1 << 20, "1024", HASH_YES,
        "Longest sequence the model was made for (config.json's max_position_embeddings); at least "
        "`data.seq_len`." FROM_FOLDER),
    INT("model.mistral.vocab_size", mistral.vocab_size, 2, 1 << 24, "32768", HASH_YES,
        "Vocabulary, at least the data's; padded to a multiple of 128 inside (Mistral-7B-v0.3: 32768). With "
        "mistral, `optimizer.betas` defaults to `[0.9, 0.95]` and weight decay applies to 2-D tensors only."
        FROM_FOLDER),
    NUM("model.mistral.rope_theta", mistral.rope_theta, NR_POSITIVE, "1000000", HASH_YES,
        "RoPE base (Mistral-7B-v0.2 and later: 1000000)." FROM_FOLDER),
    NUM("model.mistral.norm_eps", mistral.norm_eps, NR_POSITIVE, "1e-5", HASH_YES, "RMSNorm's ε." FROM_FOLDER),
    BOOL("model.mistral.tie_embeddings", mistral.tie_embeddings, "false", HASH_YES,
         "The output projection is the token embedding (no `lm_head`); Mistral-7B's is not." FROM_FOLDER),
    INT("model.mistral.head_dim", mistral.head_dim, 0, LLAMA_MAX_HEAD_DIM, "0", HASH_KIND_RULE,
        "Size of each attention head; 0: `model.mistral.n_embd / model.mistral.n_head` (Mistral-7B's 128; that "
        "value is resolved to 0). Mistral-Nemo's is 128 with 5120 channels over 32 heads (then `n_head` need not "
        "divide `n_embd`); even (RoPE rotates its two halves)." FROM_FOLDER),
    INT("model.mistral.sliding_window", mistral.sliding_window, 0, 1 << 24, "0", HASH_KIND_RULE,
        "MistralConfig's `sliding_window`: each position sees that many (itself included); 0 is none (null, "
        "Mistral-7B-v0.2 on). ddprun attends to every earlier position, which is the window's attention only while "
        "`data.seq_len` is at most the window (Mistral-7B-v0.1's 4096)." FROM_FOLDER),
};

static bool seq_over_window(const model_kind_opts *o, const model_general *g)
{
    return model_config_seq_len_over(g, o->mistral.sliding_window);
}

/* sliding_window is hashed while it is set, head_dim while it is the shape's own: a run without
 * them keeps the hash it had before the keys were. */
static bool windowed(const model_kind_opts *o) { return o->mistral.sliding_window > 0; }
static bool own_head_dim(const model_kind_opts *o) { return llama_shape_own_head_dim(&o->mistral); }

static const model_hash_rule mistral_hash_rules[] = {
    {"model.mistral.sliding_window", windowed, "windowed", "only when `model.mistral.sliding_window` is above 0"},
    {"model.mistral.head_dim", own_head_dim, LLAMA_OWN_HEAD_DIM_RULE},
};

static void mistral_resolve(model_kind_opts *o, const model_general *g)
{
    (void)g;
    llama_shape_normalize_head_dim(&o->mistral);
}

static const model_key_rule mistral_rules[] = {
    {"model.mistral.n_head", "model.mistral.n_embd", llama_rule_heads_uneven,
     "model.mistral.n_embd divisible by model.mistral.n_head"},
    {"model.mistral.n_head", "model.mistral.n_embd", llama_rule_head_odd,
     "an even head size model.mistral.n_embd / model.mistral.n_head (RoPE rotates its two halves)"},
    {"model.mistral.head_dim", "model.mistral.head_dim", llama_rule_head_dim_odd,
     "an even model.mistral.head_dim (RoPE rotates its two halves)"},
    {"model.mistral.n_kv_head", "model.mistral.n_head", llama_rule_kv_uneven,
     "model.mistral.n_head divisible by model.mistral.n_kv_head"},
    {"model.mistral.block_size", "data.seq_len", llama_rule_seq_over_block, "data.seq_len <= model.mistral.block_size"},
    {"model.mistral.sliding_window", "data.seq_len", seq_over_window,
     "data.seq_len <= model.mistral.sliding_window (0: no window)"},
};

static int mistral_shape_check(const model_kind_opts *o, const model_general *g, const char *file,
                             const char *const names[], ddp_err *err)
{
    int rc = llama_config_check_shape(g, "model.mistral.block_size", file, names, err);
    if (!rc)
        rc = model_config_seq_len_fits(g, "model.mistral.sliding_window", o->mistral.sliding_window, names[11], file,
                                       err);
    return rc;
}

/* Mistral starts from a Hugging Face folder only. */
const model_config_kind mistral_config_kind = {
    .kind = MODEL_MISTRAL,
    .path = "model.mistral",
    .keys = MODEL_CONFIG_KEYS(mistral_keys),
    .language_model = true,
    .title = "Mistral",
    .hf_folder = true,
    .beta2 = 0.95,
    .resolve = mistral_resolve,
    .rules = MODEL_CONFIG_KEYS(mistral_rules),
    .shape_off = offsetof(model_kind_opts, mistral),
    .shape_size = sizeof(llama_shape),
    .shape_check = mistral_shape_check,
    .hash_rules = MODEL_CONFIG_KEYS(mistral_hash_rules),
};
