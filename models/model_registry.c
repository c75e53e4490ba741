/* model_registry.c — the one file that knows every model: a table from model_kind to the
 * function that builds that kind from its part of model_opts and, for the models a checkpoint's
 * description rebuilds (the language models), the function that reads that description back, and
 * a table of the files each kind starts from and exports to (model_files.h).
 * Adding a model is a row in each and its kind in model_opts.h; model.c, the training job and the
 * tools that rebuild a model from a checkpoint stay as they are. Must not hold any model's logic
 * beyond unpacking its options. */
#include <stddef.h>
#include <string.h>

#include "model.h"
#include "model_files.h"
#include "gpt2.h"
#include "gpt2_hf.h"
#include "gpt2_llmc.h"
#include "llama.h"
#include "llama_hf.h"
#include "mistral.h"
#include "qwen3.h"
#include "mlp.h"
#include "qwen2.h"

/* A language model's lm_run from opts. */
static lm_run lm_run_of(const model_opts *opts)
{
    return (lm_run){.compute = opts->compute, .recompute = opts->recompute, .logits_bytes = opts->logits_bytes};
}

typedef int (*model_build_fn)(const model_opts *opts, device *dev, const sample_layout *data, int64_t max_rows,
                              model_buffers buffers, model **out, ddp_err *err);

static int build_mlp(const model_opts *opts, device *dev, const sample_layout *data, int64_t max_rows,
                     model_buffers buffers, model **out, ddp_err *err)
{
    return mlp_create(&opts->mlp, dev, data, max_rows, buffers, out, err);
}

static int build_gpt2(const model_opts *opts, device *dev, const sample_layout *data, int64_t max_rows,
                      model_buffers buffers, model **out, ddp_err *err)
{
    const lm_run run = lm_run_of(opts);
    return gpt2_create(&opts->gpt2, &run, dev, data, max_rows, buffers, out, err);
}

/* What build would make, sized without a device (model_size). */
typedef int (*model_size_fn)(const model_opts *opts, const sample_layout *data, int64_t max_rows, model *m,
                             ddp_err *err);

static int size_gpt2(const model_opts *opts, const sample_layout *data, int64_t max_rows, model *m, ddp_err *err)
{
    const lm_run run = lm_run_of(opts);
    int rc = gpt2_tensor_table(&opts->gpt2, m, err);
    if (!rc && (rc = gpt2_activation_bytes(&opts->gpt2, &run, data->input.count, max_rows, &m->activation_bytes, err)))
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

/* The entry points of a kind of the Llama family (llama.h): FAM its llama_family, MEMBER its shape's
 * member of model_opts; PREFIX names them. One definition for every such kind, so a new one is a
 * line here, a row in each table below and its family's own files. */
#define LLAMA_FAMILY_ENTRIES(PREFIX, FAM, MEMBER)                                                                 \
    static int build_##PREFIX(const model_opts *opts, device *dev, const sample_layout *data, int64_t max_rows,   \
                              model_buffers buffers, model **out, ddp_err *err)                                 \
    {                                                                                                             \
        const lm_run run = lm_run_of(opts);                                                                       \
        return llama_create(&FAM, &opts->MEMBER, &run, dev, data, max_rows, buffers, out, err);                 \
    }                                                                                                             \
    static int size_##PREFIX(const model_opts *opts, const sample_layout *data, int64_t max_rows, model *m,       \
                             ddp_err *err)                                                                        \
    {                                                                                                             \
        const lm_run run = lm_run_of(opts);                                                                       \
        int rc = llama_tensor_table(&FAM, &opts->MEMBER, m, err);                                                 \
        if (!rc && (rc = llama_activation_bytes(&FAM, &opts->MEMBER, &run, data->input.count, max_rows,           \
                                                &m->activation_bytes, err)))                                      \
            model_free_tensors(m);                                                                                \
        return rc;                                                                                                \
    }                                                                                                             \
    static int parse_##PREFIX(const char *desc, model_opts *opts, int64_t *seq_len, ddp_err *err)                 \
    {                                                                                                             \
        return llama_parse_description(&FAM, desc, &opts->MEMBER, seq_len, err);                                  \
    }                                                                                                             \
    static int PREFIX##_read_shape(const char *path, bool hf, void *shape, ddp_err *err)                          \
    {                                                                                                             \
        return hf ? llama_hf_read_shape(&FAM, path, shape, err) : not_a_folder(&FAM, path, err);                  \
    }                                                                                                             \
    static void PREFIX##_format(const void *shape, char *out, size_t size)                                        \
    {                                                                                                             \
        llama_format_shape(&FAM, shape, out, size);                                                               \
    }                                                                                                             \
    static int PREFIX##_load(model *m, const char *path, bool hf, ddp_err *err)                                   \
    {                                                                                                             \
        return hf ? llama_hf_load_model(&FAM, m, path, err) : not_a_folder(&FAM, path, err);                      \
    }                                                                                                             \
    static int PREFIX##_load_pieces(const model *m, const char *dir, const param_piece *pieces, int n,            \
                                    float *host, ddp_err *err)                                                    \
    {                                                                                                             \
        return llama_hf_load_pieces(&FAM, m, dir, pieces, n, host, err);                                          \
    }                                                                                                             \
    static int PREFIX##_export(const char *dir, const model_opts *opts, const char *ids_from, st_dtype dtype,    \
                               uint64_t max_shard_bytes, gpt2_llmc_src src, void *ctx, int *files, ddp_err *err)  \
    {                                                                                                             \
        return llama_hf_write(&FAM, dir, &opts->MEMBER, ids_from, dtype, max_shard_bytes, src, ctx, files, err);  \
    }

/* checkpoint.init_from naming a file for a kind that starts from a Hugging Face folder only. */
static int not_a_folder(const llama_family *fam, const char *path, ddp_err *err)
{
    return ddp_fail(err, DDP_EUSAGE, "%s is not a directory: a %s starts from a Hugging Face folder", path, fam->title);
}

LLAMA_FAMILY_ENTRIES(llama, llama_family_llama, llama)
LLAMA_FAMILY_ENTRIES(qwen2, qwen2_family, qwen2)
LLAMA_FAMILY_ENTRIES(mistral, mistral_family, mistral)
LLAMA_FAMILY_ENTRIES(qwen3, qwen3_family, qwen3)

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
    {MODEL_QWEN2, build_qwen2, parse_qwen2, size_qwen2},
    {MODEL_MISTRAL, build_mistral, parse_mistral, size_mistral},
    {MODEL_QWEN3, build_qwen3, parse_qwen3, size_qwen3},
};

int model_create(const model_opts *opts, device *dev, const sample_layout *data, int64_t max_rows, model_buffers buffers,
                 model **out, ddp_err *err)
{
    *out = NULL;
    for (size_t i = 0; i < sizeof registry / sizeof registry[0]; i++)
        if (registry[i].kind == opts->kind)
            return registry[i].build(opts, dev, data, max_rows, buffers, out, err);
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
    return ddp_fail(err, DDP_EUSAGE, "a model of %.200s; only language models can be rebuilt from their "
                    "description", desc);
}

model_opts model_opts_make(model_kind kind, const model_kind_opts *o, tensor_dtype compute)
{
    return (model_opts){.kind = kind, .mlp = o->mlp, .gpt2 = o->gpt2, .llama = o->llama, .qwen2 = o->qwen2,
                        .mistral = o->mistral, .qwen3 = o->qwen3, .compute = compute};
}

int model_size(const model_opts *opts, const sample_layout *data, int64_t max_rows, model *m, ddp_err *err)
{
    for (size_t i = 0; i < sizeof registry / sizeof registry[0]; i++)
        if (registry[i].kind == opts->kind) {
            if (!registry[i].size)
                return ddp_fail(err, DDP_EUSAGE, "this model's size follows its data's files; only language "
                                "models' are known from the config alone");
            m->act_dtype = opts->compute;
            return registry[i].size(opts, data, max_rows, m, err);
        }
    return ddp_fail(err, DDP_EUSAGE, "model.kind: unknown model %d", (int)opts->kind);
}

/* ---- the files each kind starts from and exports to (model_files.h) ---- */

static const char *const gpt2_hf_names[] = {"n_layer", "n_head", "n_embd", "n_positions", "vocab_size"};
static const char *const gpt2_llmc_names[] = {"num_layers", "num_heads", "channels", "max_seq_len", "vocab_size"};
static const char *const llama_hf_names[] = {
    "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "hidden_size", "intermediate_size",
    "max_position_embeddings", "vocab_size", "rope_theta", "rms_norm_eps", "tie_word_embeddings", "head_dim",
    "rope_scaling.factor", "rope_scaling.low_freq_factor", "rope_scaling.high_freq_factor",
    "rope_scaling.original_max_position_embeddings"};

/* Mistral's shape keys: the Llama's but rope_scaling, and its sliding_window */
static const char *const mistral_hf_names[] = {
    "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "hidden_size", "intermediate_size",
    "max_position_embeddings", "vocab_size", "rope_theta", "rms_norm_eps", "tie_word_embeddings", "head_dim",
    "sliding_window"};

static int gpt2_read_shape(const char *path, bool hf, void *shape, ddp_err *err)
{
    return hf ? gpt2_hf_read_shape(path, shape, err) : gpt2_llmc_read_shape(path, shape, err);
}

static void gpt2_format(const void *shape, char *out, size_t size) { gpt2_format_shape(shape, out, size); }

static int gpt2_load(model *m, const char *path, bool hf, ddp_err *err)
{
    return hf ? gpt2_hf_load_model(m, path, err) : gpt2_llmc_load_model(m, path, err);
}

static int gpt2_load_pieces(const model *m, const char *dir, const param_piece *pieces, int n, float *host,
                            ddp_err *err)
{
    return gpt2_hf_load_pieces(m, dir, pieces, n, host, err);
}

static int gpt2_export(const char *dir, const model_opts *opts, const char *token_ids_from, st_dtype dtype,
                       uint64_t max_shard_bytes, gpt2_llmc_src src, void *ctx, int *files, ddp_err *err)
{
    return gpt2_hf_write(dir, &opts->gpt2, token_ids_from, dtype, max_shard_bytes, src, ctx, files, err);
}

static int gpt2_llmc_export(const char *path, const model_opts *opts, gpt2_llmc_src src, void *ctx, ddp_err *err)
{
    return gpt2_llmc_write(path, &opts->gpt2, src, ctx, err);
}

static const struct {
    model_kind kind;
    model_files files;
} file_rows[] = {
    {MODEL_GPT2, {"gpt2", true, true, "GPT2LMHeadModel", gpt2_hf_names, gpt2_llmc_names, gpt2_read_shape, gpt2_format,
                  gpt2_load, gpt2_load_pieces, gpt2_export, gpt2_llmc_export}},
    {MODEL_LLAMA, {"llama", true, false, "LlamaForCausalLM", llama_hf_names, NULL, llama_read_shape, llama_format,
                   llama_load, llama_load_pieces, llama_export, NULL}},
    {MODEL_QWEN2, {"qwen2", true, false, "Qwen2ForCausalLM", llama_hf_names, NULL, qwen2_read_shape, qwen2_format,
                   qwen2_load, qwen2_load_pieces, qwen2_export, NULL}},
    {MODEL_MISTRAL, {"mistral", true, false, "MistralForCausalLM", mistral_hf_names, NULL, mistral_read_shape,
                     mistral_format, mistral_load, mistral_load_pieces, mistral_export, NULL}},
    {MODEL_QWEN3, {"qwen3", true, false, "Qwen3ForCausalLM", llama_hf_names, NULL, qwen3_read_shape, qwen3_format,
                   qwen3_load, qwen3_load_pieces, qwen3_export, NULL}},
};

const model_files *model_files_of(model_kind kind)
{
    for (size_t i = 0; i < sizeof file_rows / sizeof file_rows[0]; i++)
        if (file_rows[i].kind == kind)
            return &file_rows[i].files;
    return NULL;
}
