/* gpt2_config.c — GPT-2's config section (model.gpt2): its keys and defaults, the rules across
 * them, AdamW's betas default, and the checks of a shape checkpoint.init_from brings.
 *
 * Its rows locate their fields in model_kind_opts (model_config.h); config/ composes them into its
 * table and runs the rules. Must not read YAML or the config struct. */
#include <stddef.h>

#include "model_config.h"

#define CFG_OFF(field) offsetof(model_kind_opts, field)
#define FROM_INIT " Left out with `checkpoint.init_from`: that file's or folder's."

/* GPT-2 small (124M), as llm.c and Hugging Face define it. The shape keys come in gpt2_shape's
 * field order (config_take_shape's names[] rely on it). */
static const cfg_key gpt2_keys[] = {
    SECTION("model.gpt2"),
    INT("model.gpt2.n_layer", gpt2.n_layer, 1, 96, "12", HASH_YES, "Transformer blocks." FROM_INIT),
    INT("model.gpt2.n_head", gpt2.n_head, 1, 1024, "12", HASH_YES,
        "Attention heads; must divide `model.gpt2.n_embd`." FROM_INIT),
    INT("model.gpt2.n_embd", gpt2.n_embd, 1, 1 << 16, "768", HASH_YES, "Channels." FROM_INIT),
    INT("model.gpt2.block_size", gpt2.block_size, 1, 1 << 20, "1024", HASH_YES,
        "Position embeddings (longest sequence); at least `data.seq_len`." FROM_INIT),
    INT("model.gpt2.vocab_size", gpt2.vocab_size, 2, 1 << 24, "50257", HASH_YES,
        "Vocabulary, at least the data's; padded to a multiple of 128 inside (the padding never reaches the "
        "loss or sampling). With gpt2, `optimizer.betas` defaults to `[0.9, 0.95]` and weight decay applies "
        "to 2-D tensors only." FROM_INIT),
};
_Static_assert(sizeof gpt2_keys / sizeof gpt2_keys[0] <= 32, "model_general.pending has a bit per key");

static bool heads_uneven(const model_kind_opts *o, const model_general *g)
{
    (void)g;
    return o->gpt2.n_head && o->gpt2.n_embd % o->gpt2.n_head != 0;
}

static bool seq_over_block(const model_kind_opts *o, const model_general *g)
{
    return model_config_seq_len_over(g, o->gpt2.block_size);
}

static const model_key_rule gpt2_rules[] = {
    {"model.gpt2.n_head", "model.gpt2.n_embd", heads_uneven, "model.gpt2.n_embd divisible by model.gpt2.n_head"},
    {"model.gpt2.block_size", "data.seq_len", seq_over_block, "data.seq_len <= model.gpt2.block_size"},
};

/* names: n_layer, n_head, n_embd, block_size, vocab_size */
static int gpt2_shape_check(const model_kind_opts *o, const model_general *g, const char *file,
                            const char *const names[], ddp_err *err)
{
    const gpt2_shape *s = &o->gpt2;
    if (s->n_embd % s->n_head)
        return model_config_not_divisible(file, names[2], s->n_embd, names[1], s->n_head, err);
    return model_config_seq_len_fits(g, "model.gpt2.block_size", s->block_size, names[3], file, err);
}

/* GPT-2 trains with AdamW betas (0.9, 0.95): the model's default unless the file sets them. */
const model_config_kind gpt2_config_kind = {
    .kind = MODEL_GPT2,
    .path = "model.gpt2",
    .keys = MODEL_CONFIG_KEYS(gpt2_keys),
    .language_model = true,
    .title = "GPT-2",
    .llmc_file = true,
    .hf_folder = true,
    .beta2 = 0.95,
    .rules = MODEL_CONFIG_KEYS(gpt2_rules),
    .shape_off = offsetof(model_kind_opts, gpt2),
    .shape_size = sizeof(gpt2_shape),
    .shape_check = gpt2_shape_check,
};
