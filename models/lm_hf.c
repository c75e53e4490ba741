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

int lm_hf_load_model(model *m, const char *dir, const lm_hf_importer *imp, ddp_err *err)
{
    model_opts shape;
    int rc = check_shapes(m, dir, imp, &shape, err);
    hf_weights w;
    if (rc || (rc = hf_weights_open(&w, dir, err)))
        return rc;
    lm_hf_import im = {imp, &w, m, &shape, calloc(m->n_params, sizeof(float))};
    if (!im.host)
        rc = ddp_fail(err, DDP_ERUNTIME, "%s: out of memory for %zu parameters", w.path, m->n_params);
    for (int i = 0; !rc && i < m->n_tensors; i++)
        rc = imp->import_tensor(&im, &m->tensors[i], err);
    if (!rc)
        rc = hf_weights_each_unused(&w, imp->check_unused, &im, err);
    if (!rc)
        rc = m->dev->ops->upload(m->dev, m->params, im.host, m->n_params * sizeof(float), err);
    free(im.host);
    hf_weights_close(&w);
    return rc;
}
