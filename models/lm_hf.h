/* lm_hf.h — loading a language model's parameters from a Hugging Face `save_pretrained` folder,
 * the one driver GPT-2's and the Llama's importers (gpt2_hf.c, llama_hf.c) share: the model's
 * shape against the folder's config.json, the folder's weights opened, every tensor of the model
 * imported into a host copy (the whole model, or only a ZeRO-3 rank's pieces of it), the folder's
 * remaining tensors checked, and the upload only once all of that succeeded, so a failed load
 * leaves the parameters as they were.
 *
 * Each importer brings its kind, its config reading and its tensor mapping. Shapes are compared
 * as text: the folder's as the kind's *_format_shape writes it, the model's as its description
 * holds it (that text and " seq_len=T"); each format names every field, numbers exactly, so equal
 * texts are equal shapes. Must not know any model's config keys, tensor names or layouts. */
#ifndef DDP_LM_HF_H
#define DDP_LM_HF_H

#include "model.h"
#include "runtime/hf/hf_folder.h"

typedef struct lm_hf_importer lm_hf_importer;

/* What the importer's tensor mapping works on. */
typedef struct lm_hf_import {
    const lm_hf_importer *imp;
    hf_weights *w;           /* the folder's tensors; w->path is what messages name */
    const model *m;
    const model_opts *shape; /* the folder's shape, equal to m's: its member of the importer's kind */
    const st_tensor **from;  /* per tensor of m, the folder's tensor it was imported from */
    const param_piece *pieces; /* what of the parameters is kept, into host (model.h) */
    int n_pieces;
    float *host;
} lm_hf_import;

struct lm_hf_importer {
    model_kind kind;         /* the models it loads */
    const char *family;      /* in "DIR: a Hugging Face GPT-2 folder; this model is ..." */
    const void *ctx;         /* the importer's own (a Llama family: llama.h) */
    /* DIR/config.json's shape into its kind's member of *shape and as text (the kind's
     * *_format_shape), once every key it holds checked out */
    int (*folder_shape)(const lm_hf_importer *imp, const char *dir, model_opts *shape, char *text, size_t size,
                        ddp_err *err);
    /* Our tensor t from im->w into the pieces of im->host (lm_hf_take_as_is, or lm_hf_take_values
     * for a tensor stored in another layout), refusing a tensor missing or of another shape;
     * *from: the folder's tensor it took. */
    int (*import_tensor)(const lm_hf_import *im, const param_tensor *t, const st_tensor **from, ddp_err *err);
    /* A tensor of the folder that none of ours took (ctx: the lm_hf_import): skipped, or refused
     * naming it. */
    int (*check_unused)(void *ctx, const st_tensor *t, ddp_err *err);
};

/* DIR's parameters into m (device memory) through imp. m must be of imp's kind and DIR's shape
 * m's (both named otherwise). A failed load leaves the parameters as they were. */
int lm_hf_load_model(model *m, const char *dir, const lm_hf_importer *imp, ddp_err *err);
/* The same checks, but only the pieces of DIR's parameters into host (model.h's param_piece: a
 * ZeRO-3 rank's shard; zero where the folder has no value, as the vocabulary's padding rows), tensor by tensor, converted straight from the files' pages that hold the
 * pieces (each tensor's released once taken): besides host, only a tensor stored in another layout
 * (GPT-2's Conv1D weights) is held whole, twice, for its transposition. */
int lm_hf_load_pieces(const model *m, const char *dir, const lm_hf_importer *imp, const param_piece *pieces,
                      int n_pieces, float *host, ddp_err *err);

/* The folder's tensor hf holds our tensor t's first hf->numel values in our layout (the rest stay
 * zero): the pieces' parts of them converted straight from the file into im->host. */
void lm_hf_take_as_is(const lm_hf_import *im, const param_tensor *t, const st_tensor *hf);
/* Our tensor t's values v (t->numel floats, in our layout): the pieces' parts into im->host. */
void lm_hf_take_values(const lm_hf_import *im, const param_tensor *t, const float *v);

/* A tied head: the folder's tensor head must hold the values our tensor `embed` was imported from
 * (compared in float32, a block at a time). */
bool lm_hf_tied(const lm_hf_import *im, const st_tensor *head, const char *embed);

#endif
