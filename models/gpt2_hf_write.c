/* gpt2_hf_write.c — a GPT-2 as a Hugging Face `save_pretrained` folder (see gpt2_hf.h for what
 * is written).
 *
 * Owns the export's side of the mapping (our tensor table, gpt2.h's, through gpt2_hf_layout) and
 * config.json's text as transformers writes GPT2Config (json.dumps, indent 2, sorted keys). The
 * files, their split and order are runtime/hf/hf_folder_write.c's. Must not know checkpoints,
 * configs or the training loop: callers say where each tensor is. */
#include "gpt2_hf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HF_PREFIX "transformer."

typedef struct hf_export {
    const char *dir;
    const gpt2_shape *s;
    const hf_token_ids *ids;
    st_dtype dtype;
    model tbl;                 /* our tensor table (names, shapes), not a built model */
    st_out_tensor *t;          /* tbl's tensors as HF stores them, in tbl's order */
    char (*names)[sizeof(HF_PREFIX) + MODEL_TENSOR_NAME_MAX];
    float **owned;             /* transposed copies (Conv1D weights), else NULL */
} hf_export;

static void free_export(hf_export *x)
{
    for (int i = 0; x->owned && i < x->tbl.n_tensors; i++)
        free(x->owned[i]);
    free(x->owned);
    free(x->t);
    free(x->names);
    model_free_tensors(&x->tbl);
}

/* Tensor i of our table, as HF stores it, from src. */
static int gather_one(hf_export *x, int i, gpt2_llmc_src src, void *ctx, ddp_err *err)
{
    const param_tensor *p = &x->tbl.tensors[i];
    const float *v = src(ctx, p->name, p->numel);
    if (!v)
        return ddp_fail(err, DDP_EUSAGE, "%s: no tensor %s of %zu float32 values to export", x->dir, p->name,
                        p->numel);
    st_out_tensor *t = &x->t[i];
    snprintf(x->names[i], sizeof x->names[i], HF_PREFIX "%s", p->name);
    t->name = x->names[i];
    bool transposed = gpt2_hf_layout(x->s, p, t->shape, &t->ndim);
    t->values = v; /* wte: its first vocab_size rows are the prefix */
    if (!transposed)
        return DDP_OK;
    int64_t in = t->shape[0], out = t->shape[1];
    if (!(x->owned[i] = malloc(p->numel * sizeof(float))))
        return ddp_fail(err, DDP_ERUNTIME, "%s: out of memory", x->dir);
    for (int64_t o = 0; o < out; o++)
        for (int64_t k = 0; k < in; k++)
            x->owned[i][k * out + o] = v[o * in + k];
    t->values = x->owned[i];
    return DDP_OK;
}

/* GPT2Config as save_pretrained writes it: our shape, and every other key at the value our GPT-2
 * computes (gpt2_hf.c's import accepts exactly these) or GPT2Config's default. */
static int write_config(FILE *f, void *ctx, ddp_err *err)
{
    (void)err;
    const hf_export *x = ctx;
    const gpt2_shape *s = x->s;
    fprintf(f, "{\n  \"activation_function\": \"gelu_new\",\n  \"architectures\": [\n    \"GPT2LMHeadModel\"\n  ],\n"
               "  \"attn_pdrop\": 0.1,\n");
    hf_bos_token_id_write(f, x->ids, "50256"); /* GPT2Config's defaults */
    fprintf(f, "  \"embd_pdrop\": 0.1,\n");
    hf_eos_token_id_write(f, x->ids, "50256");
    fprintf(f, "  \"initializer_range\": 0.02,\n  \"layer_norm_epsilon\": 1e-05,\n"
               "  \"model_type\": \"gpt2\",\n  \"n_ctx\": %lld,\n  \"n_embd\": %lld,\n  \"n_head\": %lld,\n"
               "  \"n_inner\": null,\n  \"n_layer\": %lld,\n  \"n_positions\": %lld,\n",
            (long long)s->block_size, (long long)s->n_embd, (long long)s->n_head, (long long)s->n_layer,
            (long long)s->block_size);
    fprintf(f, "  \"reorder_and_upcast_attn\": false,\n  \"resid_pdrop\": 0.1,\n"
               "  \"scale_attn_by_inverse_layer_idx\": false,\n  \"scale_attn_weights\": true,\n"
               "  \"summary_activation\": null,\n  \"summary_first_dropout\": 0.1,\n"
               "  \"summary_proj_to_labels\": true,\n  \"summary_type\": \"cls_index\",\n"
               "  \"summary_use_proj\": true,\n  \"tie_word_embeddings\": true,\n  \"torch_dtype\": \"%s\",\n"
               "  \"use_cache\": true,\n  \"vocab_size\": %lld\n}\n",
            x->dtype == ST_BF16 ? "bfloat16" : "float32", (long long)s->vocab_size);
    return DDP_OK;
}

int gpt2_hf_write(const char *dir, const gpt2_shape *shape, const char *token_ids_from, st_dtype dtype,
                  uint64_t max_shard_bytes, gpt2_llmc_src src, void *ctx, int *files, ddp_err *err)
{
    hf_token_ids ids = {0};
    if (token_ids_from && hf_token_ids_read(token_ids_from, &ids, err))
        return ddp_prefix(err, "the token ids to export");
    hf_export x = {.dir = dir, .s = shape, .ids = &ids, .dtype = dtype};
    int rc = gpt2_tensor_table(shape, &x.tbl, err);
    if (rc)
        return rc;
    size_t n = (size_t)x.tbl.n_tensors;
    x.t = calloc(n, sizeof *x.t), x.names = calloc(n, sizeof *x.names), x.owned = calloc(n, sizeof *x.owned);
    if (!x.t || !x.names || !x.owned)
        rc = ddp_fail(err, DDP_ERUNTIME, "%s: out of memory", dir);
    for (int i = 0; !rc && i < x.tbl.n_tensors; i++) /* every source first: nothing written when one is missing */
        rc = gather_one(&x, i, src, ctx, err);
    if (!rc)
        rc = hf_folder_write(dir, x.t, x.tbl.n_tensors, dtype, max_shard_bytes, write_config, &x, token_ids_from,
                             files, err);
    free_export(&x);
    return rc;
}
