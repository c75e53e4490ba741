/* llama_config.c — the Llama's config section (model.llama): its keys and defaults, the rules
 * across them, AdamW's betas default, Llama's ffn_hidden rule, and the checks of a shape
 * checkpoint.init_from brings.
 *
 * A Llama's ffn_hidden 0 is resolved by Llama's multiple_of rule at the load (unless left to
 * checkpoint.init_from), so the model, the resolved config and the hash see the width used. Its
 * rows locate their fields in model_kind_opts (model_config.h); config/ composes them into its
 * table and runs the rules. Must not read YAML or the config struct. */
#include <stddef.h>

#include "model_config.h"

#define CFG_OFF(field) offsetof(model_kind_opts, field)

/* A small Llama (about GPT-2 small's size) with grouped-query attention; Llama 3's rope_theta
 * 500000 is set in configs. The shape keys come in llama_shape's field order (multiple_of, outside
 * it, is none of them). */
#define FROM_FOLDER " Left out with `checkpoint.init_from`: the folder's."
#define FFN_HIDDEN_KEY 5 /* model.llama.ffn_hidden's index in llama_keys */

static const cfg_key llama_keys[] = {
    SECTION("model.llama"),
    INT("model.llama.n_layer", llama.n_layer, 1, LLAMA_MAX_LAYERS, "12", HASH_YES, "Transformer blocks." FROM_FOLDER),
    INT("model.llama.n_head", llama.n_head, 1, 1024, "12", HASH_YES,
        "Query heads; unless `model.llama.head_dim` is set, must divide `model.llama.n_embd`, leaving an even "
        "head size (RoPE rotates its two halves)." FROM_FOLDER),
    INT("model.llama.n_kv_head", llama.n_kv_head, 1, 1024, "4", HASH_YES,
        "Key/value heads (grouped-query attention: query head h reads key/value head h / (n_head / n_kv_head)); "
        "must divide `model.llama.n_head` (equal to it: multi-head attention)." FROM_FOLDER),
    INT("model.llama.n_embd", llama.n_embd, 2, 1 << 16, "768", HASH_YES, "Channels." FROM_FOLDER),
    INT("model.llama.ffn_hidden", llama.ffn_hidden, 0, 1 << 20, "0", HASH_YES,
        "Width of the SwiGLU MLP; 0: Llama's rule, 2·(4·n_embd)/3 (rounded down) rounded up to a multiple of "
        "`model.llama.multiple_of` (the resolved config holds the number). Left out with "
        "`checkpoint.init_from`: the folder's (not the rule's)."),
    INT("model.llama.multiple_of", llama_multiple_of, 1, 1 << 16, "256", HASH_NO,
        "What `model.llama.ffn_hidden: 0` rounds up to a multiple of (the width it gives is hashed)."),
    INT("model.llama.block_size", llama.block_size, 1, 1 << 20, "1024", HASH_YES,
        "Longest sequence the model was made for (config.json's max_position_embeddings); at least "
        "`data.seq_len`." FROM_FOLDER),
    INT("model.llama.vocab_size", llama.vocab_size, 2, 1 << 24, "32000", HASH_YES,
        "Vocabulary, at least the data's; padded to a multiple of 128 inside (the padding never reaches the "
        "loss or sampling). With llama, `optimizer.betas` defaults to `[0.9, 0.95]` and weight decay applies "
        "to 2-D tensors only." FROM_FOLDER),
    NUM("model.llama.rope_theta", llama.rope_theta, NR_POSITIVE, "10000", HASH_YES,
        "RoPE base: head dimension pair j turns at rope_theta^(-2j/head_size) radians per position (Llama 3: "
        "500000)." FROM_FOLDER),
    NUM("model.llama.norm_eps", llama.norm_eps, NR_POSITIVE, "1e-5", HASH_YES, "RMSNorm's ε." FROM_FOLDER),
    BOOL("model.llama.tie_embeddings", llama.tie_embeddings, "false", HASH_YES,
         "The output projection is the token embedding (no `lm_head`)." FROM_FOLDER),
    INT("model.llama.head_dim", llama.head_dim, 0, LLAMA_MAX_HEAD_DIM, "0", HASH_KIND_RULE,
        "Size of each attention head; 0: `model.llama.n_embd / model.llama.n_head` (that value is resolved to "
        "0). Set it when the heads' total width is not `n_embd` (then `n_head` need not divide `n_embd`); even "
        "(RoPE rotates its two halves)." FROM_FOLDER),
    SECTION("model.llama.rope_scaling"),
    NUM("model.llama.rope_scaling.factor", llama.rope_scaling.factor, NR_POSITIVE, "1", HASH_KIND_RULE,
        "Llama 3.1's stretch of the RoPE frequencies (Hugging Face's `rope_scaling` with `rope_type: llama3`): "
        "pairs slower than `low_freq_factor` turns per `original_max_position_embeddings` positions turn "
        "`factor` times slower, those faster than `high_freq_factor` turns keep their speed, the ones between "
        "are blended. 1: no stretch; at least 1 (Llama 3.1: 8, Llama 3.2: 32)." FROM_FOLDER),
    NUM("model.llama.rope_scaling.low_freq_factor", llama.rope_scaling.low_freq_factor, NR_POSITIVE, "1",
        HASH_KIND_RULE, "See `model.llama.rope_scaling.factor`; below `high_freq_factor`." FROM_FOLDER),
    NUM("model.llama.rope_scaling.high_freq_factor", llama.rope_scaling.high_freq_factor, NR_POSITIVE, "4",
        HASH_KIND_RULE, "See `model.llama.rope_scaling.factor`." FROM_FOLDER),
    INT("model.llama.rope_scaling.original_max_position_embeddings", llama.rope_scaling.original_max_positions, 1,
        1 << 20, "8192", HASH_KIND_RULE,
        "The context the frequencies were trained for before the stretch (Llama 3: 8192). See "
        "`model.llama.rope_scaling.factor`." FROM_FOLDER),
};
_Static_assert(sizeof llama_keys / sizeof llama_keys[0] <= 32, "model_general.pending has a bit per key");

/* Llama's FFN width rule (Meta's reference code without ffn_dim_multiplier): ffn_hidden 0 becomes
 * the rule's width, unless the width is left to checkpoint.init_from (pending, the folder's); and
 * a head_dim of n_embd / n_head becomes 0. */
static void llama_resolve(model_kind_opts *o, const model_general *g)
{
    llama_shape *s = &o->llama;
    llama_shape_normalize_head_dim(s);
    if (s->ffn_hidden != 0 || g->pending >> FFN_HIDDEN_KEY & 1)
        return;
    int64_t hidden = 2 * (4 * s->n_embd) / 3, multiple_of = o->llama_multiple_of;
    s->ffn_hidden = (hidden + multiple_of - 1) / multiple_of * multiple_of;
}

static const llama_shape *shape_of(const model_general *g) { return g->shape; }

int64_t llama_head_dim(const llama_shape *s)
{
    return s->head_dim ? s->head_dim : s->n_head ? s->n_embd / s->n_head : 0;
}

bool llama_shape_own_head_dim(const llama_shape *s)
{
    return s->head_dim && !(s->n_head && s->n_embd % s->n_head == 0 && s->head_dim == s->n_embd / s->n_head);
}

void llama_shape_normalize_head_dim(llama_shape *s)
{
    if (s->n_embd && !llama_shape_own_head_dim(s))
        s->head_dim = 0;
}

bool llama_rule_heads_uneven(const model_kind_opts *o, const model_general *g)
{
    (void)o;
    const llama_shape *s = shape_of(g);
    return s->n_head && !s->head_dim && s->n_embd % s->n_head;
}
bool llama_rule_head_odd(const model_kind_opts *o, const model_general *g)
{
    const llama_shape *s = shape_of(g);
    return s->n_head && !s->head_dim && !llama_rule_heads_uneven(o, g) && (s->n_embd / s->n_head) % 2;
}
bool llama_rule_head_dim_odd(const model_kind_opts *o, const model_general *g)
{
    (void)o;
    return shape_of(g)->head_dim % 2;
}
bool llama_rule_kv_uneven(const model_kind_opts *o, const model_general *g)
{
    (void)o;
    const llama_shape *s = shape_of(g);
    return s->n_kv_head && s->n_head % s->n_kv_head;
}
bool llama_rule_seq_over_block(const model_kind_opts *o, const model_general *g)
{
    (void)o;
    return model_config_seq_len_over(g, shape_of(g)->block_size);
}

/* The rope_scaling keys are hashed while they stretch the frequencies, head_dim while it is the
 * shape's own: a run without them keeps the hash it had before the keys were. */
static bool rope_stretched(const model_kind_opts *o) { return o->llama.rope_scaling.factor > 1; }
static bool own_head_dim(const model_kind_opts *o) { return llama_shape_own_head_dim(&o->llama); }

static const model_hash_rule llama_hash_rules[] = {
    {"model.llama.rope_scaling.", rope_stretched, "scaled", "only when `model.llama.rope_scaling.factor` is above 1"},
    {"model.llama.head_dim", own_head_dim, LLAMA_OWN_HEAD_DIM_RULE},
};

static bool rope_shrinks(const model_kind_opts *o, const model_general *g)
{
    (void)g;
    return o->llama.rope_scaling.factor > 0 && o->llama.rope_scaling.factor < 1; /* 0: left to the folder */
}
static bool rope_bands_crossed(const model_kind_opts *o, const model_general *g)
{
    (void)g;
    const llama_rope_scaling *r = &o->llama.rope_scaling;
    return r->factor > 1 && r->low_freq_factor > 0 && r->high_freq_factor > 0 && /* 0: left to the folder */
           !(r->high_freq_factor > r->low_freq_factor);
}

static const model_key_rule llama_rules[] = {
    {"model.llama.n_head", "model.llama.n_embd", llama_rule_heads_uneven,
     "model.llama.n_embd divisible by model.llama.n_head"},
    {"model.llama.n_head", "model.llama.n_embd", llama_rule_head_odd,
     "an even head size model.llama.n_embd / model.llama.n_head (RoPE rotates its two halves)"},
    {"model.llama.head_dim", "model.llama.head_dim", llama_rule_head_dim_odd,
     "an even model.llama.head_dim (RoPE rotates its two halves)"},
    {"model.llama.n_kv_head", "model.llama.n_head", llama_rule_kv_uneven,
     "model.llama.n_head divisible by model.llama.n_kv_head"},
    {"model.llama.block_size", "data.seq_len", llama_rule_seq_over_block, "data.seq_len <= model.llama.block_size"},
    {"model.llama.rope_scaling.factor", "model.llama.rope_scaling.factor", rope_shrinks,
     "model.llama.rope_scaling.factor >= 1 (1: no stretch)"},
    {"model.llama.rope_scaling.low_freq_factor", "model.llama.rope_scaling.high_freq_factor", rope_bands_crossed,
     "model.llama.rope_scaling.low_freq_factor < model.llama.rope_scaling.high_freq_factor"},
};

int llama_config_check_shape(const model_general *g, const char *block_key, const char *file,
                             const char *const names[], ddp_err *err)
{
    const llama_shape *s = shape_of(g);
    if (s->head_dim % 2)
        return ddp_fail(err, DDP_EUSAGE, "checkpoint.init_from's %s: %s %lld is an odd head size (RoPE rotates its "
                        "two halves)", file, names[10], (long long)s->head_dim);
    if (!s->head_dim && s->n_embd % s->n_head)
        return model_config_not_divisible(file, names[3], s->n_embd, names[1], s->n_head, err);
    if (!s->head_dim && s->n_embd / s->n_head % 2)
        return ddp_fail(err, DDP_EUSAGE, "checkpoint.init_from's %s: %s %lld / %s %lld is an odd head size (RoPE "
                        "rotates its two halves)", file, names[3], (long long)s->n_embd, names[1],
                        (long long)s->n_head);
    if (s->n_head % s->n_kv_head)
        return model_config_not_divisible(file, names[1], s->n_head, names[2], s->n_kv_head, err);
    return model_config_seq_len_fits(g, block_key, s->block_size, names[5], file, err);
}

static int llama_shape_check(const model_kind_opts *o, const model_general *g, const char *file,
                             const char *const names[], ddp_err *err)
{
    (void)o;
    return llama_config_check_shape(g, "model.llama.block_size", file, names, err);
}

/* Betas as GPT-2's. A Llama starts from a Hugging Face folder only. */
const model_config_kind llama_config_kind = {
    .kind = MODEL_LLAMA,
    .path = "model.llama",
    .keys = MODEL_CONFIG_KEYS(llama_keys),
    .language_model = true,
    .title = "Llama",
    .hf_folder = true,
    .beta2 = 0.95,
    .resolve = llama_resolve,
    .rules = MODEL_CONFIG_KEYS(llama_rules),
    .shape_off = offsetof(model_kind_opts, llama),
    .shape_size = sizeof(llama_shape),
    .shape_check = llama_shape_check,
    .hash_rules = MODEL_CONFIG_KEYS(llama_hash_rules),
};
