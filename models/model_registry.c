/* model_registry.c — the one file that knows every model: a table from model_kind to the
 * function that builds that kind from its part of model_opts and, for the models a checkpoint's
 * description rebuilds (the language models), the function that reads that description back.
 * Adding a model is a row here and its kind in model_opts.h; model.c, the training job and the
 * tools that rebuild a model from a checkpoint stay as they are. Must not hold any model's logic
 * beyond unpacking its options. */
#include <stddef.h>
#include <string.h>

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

/* What build would make, sized without a device (model_size). */
typedef int (*model_size_fn)(const model_opts *opts, const sample_layout *data, int64_t max_rows, model *m,
                             ddp_err *err);

static int size_gpt2(const model_opts *opts, const sample_layout *data, int64_t max_rows, model *m, ddp_err *err)
{
    int rc = gpt2_tensor_table(&opts->gpt2, m, err);
    if (!rc && (rc = gpt2_activation_bytes(&opts->gpt2, opts->compute, data->input.count, max_rows,
                                           &m->activation_bytes, err)))
        model_free_tensors(m);
    return rc;
}

static int size_llama(const model_opts *opts, const sample_layout *data, int64_t max_rows, model *m, ddp_err *err)
{
    int rc = llama_tensor_table(&opts->llama, m, err);
    if (!rc && (rc = llama_activation_bytes(&opts->llama, opts->compute, data->input.count, max_rows,
                                            &m->activation_bytes, err)))
        model_free_tensors(m);
    return rc;
}

/* The shape and sequence length back from a description, into opts; an error when it is not this
 * kind's. */
typedef int (*model_parse_fn)(const char *desc, model_opts *opts, int64_t *seq_len, ddp_err *err);

static int parse_gpt2(const char *desc, model_opts *opts, int64_t *seq_len, ddp_err *err)
{
    return gpt2_parse_description(desc, &opts->gpt2, seq_len, err);
}

static int parse_llama(const char *desc, model_opts *opts, int64_t *seq_len, ddp_err *err)
{
    return llama_parse_description(desc, &opts->llama, seq_len, err);
}

static const struct {
    model_kind kind;
    model_build_fn build;
    /* NULL: the description (parse) or the options (size) do not say the whole model: the MLP's
     * input width and classes come from the data's files */
    model_parse_fn parse;
    model_size_fn size;
} registry[] = {
    {MODEL_MLP, build_mlp, NULL, NULL},
    {MODEL_GPT2, build_gpt2, parse_gpt2, size_gpt2},
    {MODEL_LLAMA, build_llama, parse_llama, size_llama},
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

int model_opts_from_description(const char *desc, model_opts *opts, int64_t *seq_len, ddp_err *err)
{
    for (size_t i = 0; i < sizeof registry / sizeof registry[0]; i++) {
        model_opts o = {.kind = registry[i].kind, .compute = TENSOR_F32};
        ddp_err ignored = {0};
        if (registry[i].parse && registry[i].parse(desc, &o, seq_len, &ignored) == DDP_OK) {
            *opts = o;
            return DDP_OK;
        }
    }
    return ddp_fail(err, DDP_EUSAGE, "a model of %.200s; only GPT-2 and Llama models can be rebuilt from their "
                    "description", desc);
}

int model_size(const model_opts *opts, const sample_layout *data, int64_t max_rows, model *m, ddp_err *err)
{
    for (size_t i = 0; i < sizeof registry / sizeof registry[0]; i++)
        if (registry[i].kind == opts->kind) {
            if (!registry[i].size)
                return ddp_fail(err, DDP_EUSAGE, "this model's size follows its data's files; only GPT-2's and "
                                "Llama's are known from the config alone");
            m->act_dtype = opts->compute;
            return registry[i].size(opts, data, max_rows, m, err);
        }
    return ddp_fail(err, DDP_EUSAGE, "model.kind: unknown model %d", (int)opts->kind);
}
