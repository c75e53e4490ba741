/* llama_hf_write.c — a model of the Llama family as a Hugging Face `save_pretrained` folder (see
 * llama_hf.h for what is written), and the Llama's own config.json both ways (llama_hf_llama: the
 * keys its import fixes and the text its export writes).
 *
 * Owns the export's side of the mapping (our tensor table, llama.h's, under the same names:
 * embed_tokens' and lm_head's first vocab_size rows, no lm_head when tied) and config.json's text
 * as transformers writes LlamaConfig (json.dumps, indent 2, sorted keys, floats as Python's repr).
 * The files, their split and order are runtime/hf/hf_folder_write.c's. Must not know checkpoints,
 * configs or the training loop: callers say where each tensor is. */
#include "llama_hf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/exact_double.h"

typedef struct llama_export {
    const llama_family *fam;
    const llama_shape *s;
    const hf_token_ids *ids;
    st_dtype dtype;
} llama_export;

void llama_hf_py_float(double v, char *out, size_t n)
{
    if (v == floor(v) && fabs(v) < 1e16)
        snprintf(out, n, "%.0f.0", v);
    else
        format_double_exact(v, out, n);
}

/* rope_scaling's value as save_pretrained writes it: null, or Llama 3's stretch (sorted keys). */
static void write_rope_scaling(FILE *f, const llama_shape *s)
{
    if (!llama_rope_scaled(s)) {
        fputs("null", f);
        return;
    }
    const llama_rope_scaling *r = &s->rope_scaling;
    char factor[32], low[32], high[32];
    llama_hf_py_float(r->factor, factor, sizeof factor);
    llama_hf_py_float(r->low_freq_factor, low, sizeof low);
    llama_hf_py_float(r->high_freq_factor, high, sizeof high);
    fprintf(f, "{\n    \"factor\": %s,\n    \"high_freq_factor\": %s,\n    \"low_freq_factor\": %s,\n"
               "    \"original_max_position_embeddings\": %lld,\n    \"rope_type\": \"llama3\"\n  }",
            factor, high, low, (long long)r->original_max_positions);
}

/* LlamaConfig as save_pretrained writes it: our shape, every other key at the value our Llama
 * computes (llama_hf.c's import accepts exactly these) or LlamaConfig's default. */
static void write_llama_config(FILE *f, const llama_shape *s, const hf_token_ids *ids, const char *torch_dtype)
{
    char eps[32], theta[32];
    llama_hf_py_float(s->norm_eps, eps, sizeof eps);
    llama_hf_py_float(s->rope_theta, theta, sizeof theta);
    fprintf(f, "{\n  \"architectures\": [\n    \"LlamaForCausalLM\"\n  ],\n  \"attention_bias\": false,\n"
               "  \"attention_dropout\": 0.0,\n");
    hf_bos_token_id_write(f, ids, "1"); /* LlamaConfig's defaults */
    hf_eos_token_id_write(f, ids, "2");
    fprintf(f, "  \"head_dim\": %lld,\n  \"hidden_act\": \"silu\",\n  \"hidden_size\": %lld,\n"
               "  \"initializer_range\": 0.02,\n  \"intermediate_size\": %lld,\n  \"max_position_embeddings\": %lld,\n  \"mlp_bias\": false,\n"
               "  \"model_type\": \"llama\",\n  \"num_attention_heads\": %lld,\n  \"num_hidden_layers\": %lld,\n"
               "  \"num_key_value_heads\": %lld,\n  \"pretraining_tp\": 1,\n",
            (long long)llama_head_dim(s), (long long)s->n_embd, (long long)s->ffn_hidden,
            (long long)s->block_size, (long long)s->n_head, (long long)s->n_layer, (long long)s->n_kv_head);
    fprintf(f, "  \"rms_norm_eps\": %s,\n  \"rope_scaling\": ", eps);
    write_rope_scaling(f, s);
    fprintf(f, ",\n  \"rope_theta\": %s,\n  \"tie_word_embeddings\": %s,\n  \"torch_dtype\": \"%s\",\n"
               "  \"use_cache\": true,\n  \"vocab_size\": %lld\n}\n",
            theta, s->tie_embeddings ? "true" : "false", torch_dtype, (long long)s->vocab_size);
}

/* Keys our Llama has one value of: absent, or that value. */
static const hf_fixed_key llama_fixed_keys[] = {
    {"model_type", {"llama"}, JSON_STRING, "ddprun imports Llama (model_type \"llama\")"},
    {"hidden_act", {"silu", "swish"}, JSON_STRING, "ddprun's Llama computes SwiGLU with silu"},
    {"attention_bias", {"false"}, JSON_BOOL, "ddprun's Llama has no attention biases"},
    {"mlp_bias", {"false"}, JSON_BOOL, "ddprun's Llama has no MLP biases"},
    {"partial_rotary_factor", {"1"}, JSON_NUMBER, "ddprun's Llama rotates whole heads (partial_rotary_factor 1)"},
    {"pretraining_tp", {"1"}, JSON_NUMBER, "ddprun's Llama computes each projection whole (pretraining_tp 1)"},
};

const llama_hf_family llama_hf_llama = {"LlamaForCausalLM", llama_fixed_keys,
                                        sizeof llama_fixed_keys / sizeof llama_fixed_keys[0], write_llama_config, false,
                                        true, 0, 0};

static int write_config(FILE *f, void *ctx, ddp_err *err)
{
    (void)err;
    const llama_export *x = ctx;
    x->fam->hf->write_config(f, x->s, x->ids, x->dtype == ST_BF16 ? "bfloat16" : "float32");
    return DDP_OK;
}

int llama_hf_write(const llama_family *fam, const char *dir, const llama_shape *shape, const char *token_ids_from,
                   st_dtype dtype, uint64_t max_shard_bytes, gpt2_llmc_src src, void *ctx, int *files, ddp_err *err)
{
    model tbl = {0};
    int rc = llama_tensor_table(fam, shape, &tbl, err);
    if (rc)
        return rc;
    st_out_tensor *t = calloc((size_t)tbl.n_tensors, sizeof *t);
    if (!t)
        rc = ddp_fail(err, DDP_ERUNTIME, "%s: out of memory", dir);
    for (int i = 0; !rc && i < tbl.n_tensors; i++) { /* every source first: nothing written when one is missing */
        const param_tensor *p = &tbl.tensors[i];
        if (!(t[i].values = src(ctx, p->name, p->numel)))
            rc = ddp_fail(err, DDP_EUSAGE, "%s: no tensor %s of %zu float32 values to export", dir, p->name, p->numel);
        t[i].name = p->name, t[i].ndim = p->ndim;
        memcpy(t[i].shape, p->shape, (size_t)p->ndim * sizeof p->shape[0]);
        if (llama_hf_vocab_rows(p->name))
            t[i].shape[0] = shape->vocab_size; /* the padding rows are not stored: the prefix is */
    }
    hf_token_ids ids = {0};
    if (!rc && token_ids_from && (rc = hf_token_ids_read(token_ids_from, &ids, err)))
        ddp_prefix(err, "the token ids to export");
    llama_export x = {fam, shape, &ids, dtype};
    if (!rc)
        rc = hf_folder_write(dir, t, tbl.n_tensors, dtype, max_shard_bytes, write_config, &x, token_ids_from, files,
                             err);
    free(t);
    model_free_tensors(&tbl);
    return rc;
}
