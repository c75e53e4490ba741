/* lm_hf.c — the Hugging Face import driver GPT-2 and the Llama share (see lm_hf.h): checks the
 * model's kind and shape against the folder's, walks the model's tensors and the folder's others
 * through the importer, and uploads the result. Must not know any model's config keys, tensor
 * names or layouts. */
#include "lm_hf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* m of imp's kind, and DIR's shape (into *shape) m's. */
static int check_shapes(const model *m, const char *dir, const lm_hf_importer *imp, model_opts *shape, ddp_err *err)
{
    model_opts opts;
    int64_t seq_len;
    if (model_opts_from_description(m->description, &opts, &seq_len, err) || opts.kind != imp->kind)
        return ddp_fail(err, DDP_EUSAGE, "%s: a Hugging Face %s folder; this model is %s", dir, imp->family,
                        m->description);
    /* the description is the shape's text and " seq_len=T", as it parsed */
    char want_txt[MODEL_DESCRIPTION_MAX], have_txt[MODEL_DESCRIPTION_MAX];
    snprintf(want_txt, sizeof want_txt, "%.*s", (int)(strrchr(m->description, ' ') - m->description),
             m->description);
    int rc = imp->folder_shape(imp, dir, shape, have_txt, sizeof have_txt, err);
    if (!rc && strcmp(have_txt, want_txt))
        rc = ddp_fail(err, DDP_EUSAGE, "%s/%s describes %s, the model is %s", dir, HF_CONFIG, have_txt, want_txt);
    return rc;
}

int lm_hf_load_pieces(const model *m, const char *dir, const lm_hf_importer *imp, const param_piece *pieces,
                      int n_pieces, float *host, ddp_err *err)
{
    model_opts shape;
    int rc = check_shapes(m, dir, imp, &shape, err);
    hf_weights w;
    if (rc || (rc = hf_weights_open(&w, dir, err)))
        return rc;
    lm_hf_import im = {imp, &w, m, &shape, calloc((size_t)m->n_tensors, sizeof *im.from), pieces, n_pieces, host};
    if (!im.from)
        rc = ddp_fail(err, DDP_ERUNTIME, "%s: out of memory for %d tensors", w.path, m->n_tensors);
    for (int k = 0; !rc && k < n_pieces; k++) /* zero where the folder has nothing: padding rows */
        memset(host + pieces[k].at, 0, pieces[k].count * sizeof *host);
    for (int i = 0; !rc && i < m->n_tensors; i++)
        if (!(rc = imp->import_tensor(&im, &m->tensors[i], &im.from[i], err)))
            safetensors_release(im.from[i]);
    if (!rc)
        rc = hf_weights_each_unused(&w, imp->check_unused, &im, err);
    free(im.from);
    hf_weights_close(&w);
    return rc;
}

void lm_hf_take_as_is(const lm_hf_import *im, const param_tensor *t, const st_tensor *hf)
{
    size_t n = hf->numel < t->numel ? (size_t)hf->numel : t->numel;
    for (int k = 0; k < im->n_pieces; k++) {
        const param_piece *p = &im->pieces[k];
        size_t lo = t->offset > p->offset ? t->offset : p->offset;
        size_t hi = t->offset + n < p->offset + p->count ? t->offset + n : p->offset + p->count;
        if (lo < hi)
            safetensors_to_f32_range(hf, lo - t->offset, hi - lo, im->host + p->at + (lo - p->offset));
    }
}

void lm_hf_take_values(const lm_hf_import *im, const param_tensor *t, const float *v)
{
    param_pieces_take(im->pieces, im->n_pieces, im->host, t->offset, v, t->numel);
}

int lm_hf_load_model(model *m, const char *dir, const lm_hf_importer *imp, ddp_err *err)
{
    float *host = malloc(m->n_params * sizeof *host); /* lm_hf_load_pieces zeroes it first */
    if (!host)
        return ddp_fail(err, DDP_ERUNTIME, "%s: out of memory for %zu parameters", dir, m->n_params);
    const param_piece whole = {0, m->n_params, 0};
    int rc = lm_hf_load_pieces(m, dir, imp, &whole, 1, host, err);
    if (!rc)
        rc = m->dev->ops->upload(m->dev, m->params, host, m->n_params * sizeof(float), err);
    free(host);
    return rc;
}

bool lm_hf_tied(const lm_hf_import *im, const st_tensor *head, const char *embed)
{
    const param_tensor *t = model_find_tensor(im->m, embed);
    const st_tensor *e = t ? im->from[t - im->m->tensors] : NULL;
    return e && safetensors_equal_f32(head, e);
}
