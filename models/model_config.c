/* model_config.c — the table of the model kinds' config descriptors (model_config.h), model.kind's
 * choices, and the helpers their shape checks share.
 *
 * Adding a kind is its descriptor (its *_config.c) and a row here, besides its rows in
 * model_registry.c. Built into a library of its own (ddp_model_config) that needs only
 * runtime/base, so the config links it without the models themselves (the fuzz build has no
 * models). Must not hold any kind's keys or rules. */
#include "model_config.h"

const model_config_kind *const model_config_kinds[] = {&mlp_config_kind, &gpt2_config_kind, &llama_config_kind,
                                                       &qwen2_config_kind, &mistral_config_kind,
                                                       &qwen3_config_kind};
const int model_n_config_kinds = (int)(sizeof model_config_kinds / sizeof model_config_kinds[0]);
const char *const model_kind_names[] = {"mlp", "gpt2", "llama", "qwen2", "mistral", "qwen3", NULL};
const char *const recompute_mode_names[] = {"none", "selective", "full", NULL};
_Static_assert(sizeof model_config_kinds / sizeof model_config_kinds[0] ==
               sizeof model_kind_names / sizeof model_kind_names[0] - 1, "a name per model kind");

int model_config_not_divisible(const char *file, const char *name, int64_t v, const char *by_name, int64_t by,
                               ddp_err *err)
{
    return ddp_fail(err, DDP_EUSAGE, "checkpoint.init_from's %s: %s %lld is not divisible by %s %lld", file, name,
                    (long long)v, by_name, (long long)by);
}

bool model_config_seq_len_over(const model_general *g, int64_t limit)
{
    return g->tokens && limit > 0 && g->seq_len > limit;
}

int model_config_seq_len_fits(const model_general *g, const char *key, int64_t block_size, const char *name,
                              const char *file, ddp_err *err)
{
    if (!model_config_seq_len_over(g, block_size))
        return DDP_OK;
    return ddp_fail(err, DDP_EUSAGE, "%s: data.seq_len: expected data.seq_len <= %s, got data.seq_len %lld with %s "
                    "%lld (%s %lld of checkpoint.init_from's %s)", g->file, key, (long long)g->seq_len,
                    key, (long long)block_size, name, (long long)block_size, file);
}
