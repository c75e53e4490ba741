/* gpt2_hf.c — a GPT-2 from a Hugging Face `save_pretrained` folder (see gpt2_hf.h for the rules).
 *
 * Owns what GPT2Config's keys must hold for our GPT-2, the mapping of HF's tensor names and
 * layouts onto the model's own tensor table (model.h's tensors[]: every HF name is one of ours,
 * optionally prefixed `transformer.`; a block's 2-D tensors are the Conv1D weights, stored
 * transposed). Loading the result into the model is lm_hf.c's, the driver both importers share;
 * the JSON, the safetensors files and the folder's weights and config key checks are runtime/hf's.
 * Must not know checkpoints, configs or the training loop. */
#include "gpt2_hf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/affix.h"
#include "lm_hf.h"

#define MAX_DIM (1 << 24)
#define HF_PREFIX "transformer."

/* ---- config.json -------------------------------------------------------------------------- */

/* Keys our GPT-2 has one value of: absent, or that value. */
static const hf_fixed_key fixed_keys[] = {
    {"model_type", {"gpt2"}, JSON_STRING, "ddprun imports GPT-2 (model_type \"gpt2\")"},
    {"activation_function", {"gelu_new", "gelu_pytorch_tanh"}, JSON_STRING,
     "ddprun's GPT-2 computes the tanh GELU (gelu_new)"},
    {"tie_word_embeddings", {"true"}, JSON_BOOL, "ddprun's GPT-2 ties lm_head to wte"},
    {"scale_attn_weights", {"true"}, JSON_BOOL, "ddprun's GPT-2 scales attention scores by 1/sqrt(head size)"},
    {"scale_attn_by_inverse_layer_idx", {"false"}, JSON_BOOL, "ddprun's GPT-2 does not scale by the layer index"},
    {"add_cross_attention", {"false"}, JSON_BOOL, "ddprun's GPT-2 has no cross-attention"},
};

/* The keys whose value depends on the shape or is a number. */
static int check_numbers(const json_doc *j, const json_node *root, const gpt2_shape *s, ddp_err *err)
{
    const json_node *v = json_object_get(j, root, "n_inner");
    uint64_t inner;
    if (v && json_kind_of(v) != JSON_NULL && (!json_uint(v, &inner) || inner != 4 * (uint64_t)s->n_embd)) {
        char why[96];
        snprintf(why, sizeof why, "ddprun's GPT-2 has an MLP of 4·n_embd = %lld (or null)", (long long)(4 * s->n_embd));
        return hf_key_fail(j, v, "n_inner", why, err);
    }
    v = json_object_get(j, root, "layer_norm_epsilon");
    double eps;
    if (v && (!json_double(v, &eps) || eps != 1e-5))
        return hf_key_fail(j, v, "layer_norm_epsilon", "ddprun's GPT-2 computes LayerNorm with eps 1e-5", err);
    return DDP_OK;
}

#define SHAPE_KEYS "GPT-2's shape needs n_layer, n_head, n_embd, n_positions and vocab_size"

/* Shape key `key` or GPT2Config's alias of it (attribute_map: num_hidden_layers for n_layer …),
 * which transformers sets after the key and so reads over it: the two must agree when both are
 * written (save_pretrained writes the key alone). */
static int size_key(const json_doc *j, const char *key, const char *alias, int64_t max, int64_t *out, ddp_err *err)
{
    const json_node *a = json_object_get(j, json_root(j), alias);
    if (!a)
        return hf_key_size(j, key, max, out, SHAPE_KEYS, err);
    int64_t by_alias, by_key;
    int rc = hf_key_size(j, alias, max, &by_alias, SHAPE_KEYS, err);
    if (!rc && json_object_get(j, json_root(j), key) && !(rc = hf_key_size(j, key, max, &by_key, SHAPE_KEYS, err)) &&
        by_key != by_alias) {
        char why[128];
        snprintf(why, sizeof why, "%s says %lld (GPT2Config reads %s over %s: write one of them)", key,
                 (long long)by_key, alias, key);
        rc = hf_key_fail(j, a, alias, why, err);
    }
    *out = by_alias;
    return rc;
}

static int shape_from(const json_doc *j, gpt2_shape *s, ddp_err *err)
{
    const json_node *root = json_root(j);
    int rc = size_key(j, "n_layer", "num_hidden_layers", GPT2_MAX_LAYERS, &s->n_layer, err);
    if (!rc)
        rc = size_key(j, "n_head", "num_attention_heads", MAX_DIM, &s->n_head, err);
    if (!rc)
        rc = size_key(j, "n_embd", "hidden_size", MAX_DIM, &s->n_embd, err);
    if (!rc)
        rc = size_key(j, "n_positions", "max_position_embeddings", MAX_DIM, &s->block_size, err);
    if (!rc)
        rc = hf_key_size(j, "vocab_size", MAX_DIM, &s->vocab_size, SHAPE_KEYS, err);
    if (!rc && s->n_embd % s->n_head)
        rc = ddp_fail(err, DDP_EUSAGE, "%s: n_embd %lld is not divisible by n_head %lld", j->name,
                      (long long)s->n_embd, (long long)s->n_head);
    if (!rc)
        rc = hf_check_fixed(j, fixed_keys, sizeof fixed_keys / sizeof fixed_keys[0], err);
    return rc ? rc : check_numbers(j, root, s, err);
}

int gpt2_hf_read_shape(const char *dir, gpt2_shape *shape, ddp_err *err)
{
    json_doc j;
    int rc = hf_config_load(dir, &j, err);
    if (!rc)
        rc = shape_from(&j, shape, err);
    json_doc_free(&j);
    return rc;
}

/* ---- tensors ------------------------------------------------------------------------------ */

/* HF's tensor for our tensor `name`: transformer.NAME or NAME, not both. */
static int find_hf(const lm_hf_import *im, const char *name, const st_tensor **out, ddp_err *err)
{
    char prefixed[128];
    snprintf(prefixed, sizeof prefixed, HF_PREFIX "%s", name);
    const st_tensor *a = hf_weights_take(im->w, prefixed), *b = hf_weights_take(im->w, name);
    if (a && b)
        return ddp_fail(err, DDP_EUSAGE, "%s holds %s and %s holds %s: one of them only", hf_weights_file_of(im->w, a),
                        prefixed, hf_weights_file_of(im->w, b), name);
    if (!a && !b)
        return ddp_fail(err, DDP_EUSAGE, "%s has no tensor %s (or %s): not GPT-2's %s tensors?", im->w->path, prefixed,
                        name, "GPT2LMHeadModel");
    *out = a ? a : b;
    return safetensors_check_readable(hf_weights_file_of(im->w, *out), *out, err);
}

bool gpt2_hf_layout(const gpt2_shape *s, const param_tensor *t, int64_t dims[2], int *ndim)
{
    *ndim = t->ndim;
    dims[0] = t->shape[0], dims[1] = t->ndim > 1 ? t->shape[1] : 0;
    if (!strcmp(t->name, "wte.weight"))
        dims[0] = s->vocab_size; /* our padding rows are not stored */
    bool conv1d = has_prefix(t->name, "h.") && t->ndim == 2;
    if (conv1d)
        dims[0] = t->shape[1], dims[1] = t->shape[0];
    return conv1d;
}

static int import_tensor(const lm_hf_import *im, const param_tensor *t, const st_tensor **from, ddp_err *err)
{
    const st_tensor *hf = NULL;
    int rc = find_hf(im, t->name, &hf, err);
    *from = hf;
    if (rc)
        return rc;
    int64_t dims[2];
    int ndim;
    bool transposed = gpt2_hf_layout(&im->shape->gpt2, t, dims, &ndim);
    if (hf->ndim != ndim || hf->shape[0] != dims[0] || (ndim > 1 && hf->shape[1] != dims[1])) {
        char have[96], want[96];
        hf_format_dims(hf->shape, hf->ndim, have, sizeof have);
        hf_format_dims(dims, ndim, want, sizeof want);
        return ddp_fail(err, DDP_EUSAGE, "%s: tensor %s is %s, expected %s%s", hf_weights_file_of(im->w, hf), hf->name,
                        have, want, transposed ? " (Conv1D: [in, out])" : "");
    }
    if (!transposed) {
        lm_hf_take_as_is(im, t, hf); /* wte: the first vocab_size rows */
        return DDP_OK;
    }
    float *tmp = malloc(hf->numel * sizeof *tmp), *dst = malloc(t->numel * sizeof *dst);
    bool ok = tmp && dst;
    if (ok) {
        safetensors_to_f32(hf, tmp);
        int64_t in = dims[0], out = dims[1];
        for (int64_t i = 0; i < in; i++)
            for (int64_t o = 0; o < out; o++)
                dst[o * in + i] = tmp[i * out + o];
        lm_hf_take_values(im, t, dst);
    }
    free(tmp);
    free(dst);
    return ok ? DDP_OK : ddp_fail(err, DDP_ERUNTIME, "%s: out of memory", im->w->path);
}

/* A tensor of the folder that is none of ours: a mask buffer (skipped), a tied lm_head (must equal
 * wte), nothing else. */
static int check_unused(void *ctx, const st_tensor *t, ddp_err *err)
{
    const lm_hf_import *im = ctx;
    if (has_suffix(t->name, ".attn.bias") || has_suffix(t->name, ".attn.masked_bias"))
        return DDP_OK;
    if (strcmp(t->name, "lm_head.weight"))
        return ddp_fail(err, DDP_EUSAGE, "%s: tensor %s is not one of GPT-2's", hf_weights_file_of(im->w, t), t->name);
    if (safetensors_check_readable(hf_weights_file_of(im->w, t), t, err))
        return err->code;
    bool tied = lm_hf_tied(im, t, "wte.weight");
    if (!tied)
        return ddp_fail(err, DDP_EUSAGE, "%s: lm_head.weight differs from wte; ddprun's GPT-2 ties them",
                        hf_weights_file_of(im->w, t));
    return DDP_OK;
}

static int folder_shape(const lm_hf_importer *imp, const char *dir, model_opts *shape, char *text, size_t size,
                        ddp_err *err)
{
    (void)imp;
    int rc = gpt2_hf_read_shape(dir, &shape->gpt2, err);
    if (!rc)
        gpt2_format_shape(&shape->gpt2, text, size);
    return rc;
}

static const lm_hf_importer importer = {MODEL_GPT2, "GPT-2", NULL, folder_shape, import_tensor, check_unused};

int gpt2_hf_load_model(model *m, const char *dir, ddp_err *err) { return lm_hf_load_model(m, dir, &importer, err); }

int gpt2_hf_load_pieces(const model *m, const char *dir, const param_piece *pieces, int n_pieces, float *host,
                        ddp_err *err)
{
    return lm_hf_load_pieces(m, dir, &importer, pieces, n_pieces, host, err);
}
