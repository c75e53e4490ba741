/* train_sample.c — the text sample a language-model job prints every train.sample_every steps:
 * rank 0 draws train.sample_tokens tokens from the model being trained, seeded by run.seed and
 * the step (so a resumed job prints the same samples), and decodes them with data.path's
 * tokenizer.bin. The context is the end-of-text token, or a newline for tokenizers without one.
 * Must not change training state: generation only runs forward passes. */
#include <stdlib.h>
#include <string.h>

#include "models/lm_generate.h"
#include "runtime/base/log.h"
#include "runtime/data/tokenizer.h"
#include "train_job.h"

int train_sample_text(train_job *t, ddp_err *err)
{
    const config *c = t->cfg;
    if (t->ctl->rank != 0 || !t->m->io.language_model || c->data.kind != DATA_TOKENS)
        return DDP_OK;
    char path[CFG_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/tokenizer.bin", c->data.path);
    tokenizer tok;
    int rc = tokenizer_load(path, &tok, err);
    if (rc)
        return rc;
    int64_t n = c->train.sample_tokens;
    int32_t *ids = malloc((size_t)(n + 1) * sizeof *ids);
    char *text = malloc((size_t)n * TOKENIZER_MAX_TOKEN_BYTES + 1);
    if (!ids || !text)
        rc = ddp_fail(err, DDP_ERUNTIME, "text sample: out of memory");
    if (!rc) {
        ids[0] = tok.eot >= 0 ? tok.eot : '\n';
        lm_sampling s = {.temperature = 1.0, .top_k = 40, .seed = c->run.seed ^ (uint64_t)t->step * 0x9E3779B97F4A7C15ull};
        rc = lm_generate(t->m, ids, 1, n, &s, err);
    }
    if (!rc) {
        tokenizer_decode(&tok, ids + 1, n, text, (size_t)n * TOKENIZER_MAX_TOKEN_BYTES + 1, NULL);
        log_info("sample at step %lld: %s", (long long)t->step, text);
    }
    free(ids);
    free(text);
    tokenizer_free(&tok);
    return rc;
}
