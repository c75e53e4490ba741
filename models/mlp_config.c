/* mlp_config.c — the MLP's config section (model.mlp): its keys and their defaults.
 *
 * Its rows locate their fields in model_kind_opts (model_config.h); config/ composes them into its
 * table. The MLP's keys constrain nothing else, and it takes no shape from checkpoint.init_from.
 * Must not read YAML or the config struct. */
#include <stddef.h>

#include "model_config.h"

#define CFG_OFF(field) offsetof(model_kind_opts, field)

_Static_assert(MLP_MAX_HIDDEN == CFG_LIST_MAX, "model.mlp.hidden holds the entries a KT_HIDDEN list may have");

static const char *const act_names[] = {"relu", "gelu", "gelu_tanh", NULL};

static const cfg_key mlp_keys[] = {
    SECTION("model.mlp"),
    {.path = "model.mlp.hidden", .type = KT_HIDDEN, .off = CFG_OFF(mlp.n_hidden), .list_off = CFG_OFF(mlp.hidden),
     .imin = 1, .imax = 1 << 20, .def = "[1024, 1024]", .hash = HASH_YES, .doc = "Hidden layer widths (the input width and class count come from the data)."},
    ENUM("model.mlp.activation", mlp.activation, act_names, "relu", HASH_YES, "Hidden-layer activation."),
};

const model_config_kind mlp_config_kind = {
    .kind = MODEL_MLP,
    .path = "model.mlp",
    .keys = MODEL_CONFIG_KEYS(mlp_keys),
};
