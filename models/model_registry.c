/* model_registry.c — the one file that knows every model: a table from model_kind to the
 * function that builds that kind from its part of model_opts. Adding a model is a row here and
 * its kind in model_opts.h; model.c and the training job stay as they are. Must not hold any
 * model's logic beyond unpacking its options. */
#include <stddef.h>

#include "model.h"
#include "gpt2.h"
#include "llama.h"
#include "mlp.h"

typedef int (*model_build_fn)(const model_opts *opts, device *dev, const sample_layout *data, int64_t max_rows,
                              size_t param_tail, model **out, ddp_err *err);

static int build_mlp(const model_opts *opts, device *dev, const sample_layout *data, int64_t max_rows,
                     size_t param_tail, model **out, ddp_err *err)
{
    return mlp_create(&opts->mlp, dev, data, max_rows, param_tail, out, err);
}

static int build_gpt2(const model_opts *opts, device *dev, const sample_layout *data, int64_t max_rows,
                      size_t param_tail, model **out, ddp_err *err)
{
    return gpt2_create(&opts->gpt2, opts->compute, dev, data, max_rows, param_tail, out, err);
}

static int build_llama(const model_opts *opts, device *dev, const sample_layout *data, int64_t max_rows,
                       size_t param_tail, model **out, ddp_err *err)
{
    return llama_create(&opts->llama, opts->compute, dev, data, max_rows, param_tail, out, err);
}

static const struct {
    model_kind kind;
    model_build_fn build;
} registry[] = {
    {MODEL_MLP, build_mlp},
    {MODEL_GPT2, build_gpt2},
    {MODEL_LLAMA, build_llama},
};

int model_create(const model_opts *opts, device *dev, const sample_layout *data, int64_t max_rows, size_t param_tail,
                 model **out, ddp_err *err)
{
    *out = NULL;
    for (size_t i = 0; i < sizeof registry / sizeof registry[0]; i++)
        if (registry[i].kind == opts->kind)
            return registry[i].build(opts, dev, data, max_rows, param_tail, out, err);
    return ddp_fail(err, DDP_EUSAGE, "model.kind: unknown model %d", (int)opts->kind);
}
