/* train_data.c — loading the job's data and checking it against the model (train_data.h). Owns
 * which loader data.kind and data.packed choose, the packing report, and the check that token data
 * was made with the vocabulary of checkpoint.init_from's tokenizer; the formats themselves are
 * runtime/data's and runtime/hf's. Must not build a model or stage batches (train_replica.c does). */
#include "train_data.h"

#include <stdio.h>
#include <unistd.h>

#include <sys/stat.h>

#include "runtime/base/activity.h"
#include "runtime/base/log.h"
#include "runtime/data/tokenizer.h"
#include "runtime/hf/hf_vocab.h"
#include "train_agree.h"
#include "train_fault.h"

static int load_tokens(train_job *t, ddp_err *err)
{
    const config *c = t->cfg;
    int (*load)(const char *, const char *, int64_t, dataset *, ddp_err *) =
        c->data.packed ? dataset_load_packed : dataset_load_tokens;
    int rc = load(c->data.path, "train", c->data.seq_len, &t->train, err);
    if (rc == DDP_OK)
        rc = load(c->data.path, "val", c->data.seq_len, &t->test, err);
    if (rc == DDP_OK)
        rc = token_shards_check_same_format(t->train.tokens, t->test.tokens, err);
    if (rc != DDP_OK)
        return c->data.packed ? ddp_prefix(err, "%s: data.packed", c->source) : rc;
    for (int i = 0; c->data.packed && i < 2 && t->ctl->rank == 0; i++) {
        const doc_packing *p = (i ? &t->test : &t->train)->packed;
        char left_out[128] = "";
        if (p->untrained_pieces > 0)
            snprintf(left_out, sizeof left_out, "; %lld piece%s without a trainable target (%lld tokens) left out",
                     (long long)p->untrained_pieces, p->untrained_pieces > 1 ? "s" : "", (long long)p->untrained_tokens);
        log_info("data %s: %lld documents (%lld longer than data.seq_len %lld, cut) packed into %lld rows (%.1f%% "
                 "of their positions hold tokens), %lld trainable targets%s", i ? "val" : "train", (long long)p->docs,
                 (long long)p->split_docs, (long long)p->T, (long long)p->n_rows,
                 100.0 * (double)p->tokens / ((double)p->n_rows * (double)p->T), (long long)p->targets, left_out);
    }
    return DDP_OK;
}

int train_data_load(train_job *t, ddp_err *err)
{
    const config *c = t->cfg;
    int rc;
    activity_set("loading the data (data.path %s)", c->data.path);
    train_fault_in_setup(t);
    if (c->data.kind == DATA_TOKENS) {
        rc = load_tokens(t, err);
    } else if (c->data.kind == DATA_FASHION_MNIST) {
        rc = dataset_load_fashion_mnist(c->data.path, true, &t->train, err);
        if (rc == DDP_OK)
            rc = dataset_load_fashion_mnist(c->data.path, false, &t->test, err);
    } else {
        rc = dataset_make_synthetic(c->data.synthetic_train, c->data.synthetic_features,
                                    c->data.synthetic_classes, c->run.seed, false, &t->train, err);
        if (rc == DDP_OK)
            rc = dataset_make_synthetic(c->data.synthetic_test, c->data.synthetic_features,
                                        c->data.synthetic_classes, c->run.seed, true, &t->test, err);
    }
    return rc;
}

/* The model was built for the training data; the test data must have the same samples, and a
 * model built from its own settings (a language model's context length) must fit the data too.
 * Packed rows reach only a language model: the config takes data.packed only with token data,
 * and token data only with a language model (config_check.c). */
static int fits(const train_job *t, const dataset *data, ddp_err *err)
{
    const sample_layout *want = &t->m->io.sample, *have = &data->layout;
    if (sample_field_equal(want->input, have->input) && sample_field_equal(want->target, have->target) &&
        have->n_classes <= want->n_classes)
        return DDP_OK;
    char w[160], h[160];
    sample_layout_format(want, w, sizeof w);
    sample_layout_format(have, h, sizeof h);
    return ddp_fail(err, DDP_EUSAGE, "model %s takes samples of %s, but %s has samples of %s", t->m->description, w,
                    data->name, h);
}

/* The warning that the vocabulary was not compared, and why. */
static void unchecked(const train_job *t, const char *json, const char *why)
{
    log_warn("data.path %s: not checked against checkpoint.init_from's %s: %s", t->cfg->data.path, json, why);
}

/* Rank 0: token data beside a checkpoint.init_from folder holding a tokenizer.json must have been
 * made with its vocabulary (equal fingerprints, runtime/data/tokenizer.h), or its ids would stand
 * for other text to this model and training would go on without a word. Where a side cannot tell,
 * it says so and the job goes on. */
static int vocabulary_verdict(const train_job *t, ddp_err *err)
{
    const config *c = t->cfg;
    char json[CFG_PATH_MAX + 32], bin[CFG_PATH_MAX + 32];
    struct stat st;
    if (c->data.kind != DATA_TOKENS || !c->checkpoint.init_from[0] || stat(c->checkpoint.init_from, &st) != 0 ||
        !S_ISDIR(st.st_mode))
        return DDP_OK;
    snprintf(json, sizeof json, "%s/%s", c->checkpoint.init_from, HF_TOKENIZER_JSON);
    snprintf(bin, sizeof bin, "%s/tokenizer.bin", c->data.path);
    if (access(json, F_OK) != 0) /* a folder with the weights alone: nothing to compare with */
        return DDP_OK;
    tokenizer tok;
    ddp_err why = {0};
    uint64_t want = 0;
    if (tokenizer_load(bin, &tok, &why) != DDP_OK) {
        unchecked(t, json, why.msg);
        return DDP_OK;
    }
    bool known = tok.has_fingerprint;
    uint64_t have = tok.fingerprint;
    tokenizer_free(&tok);
    if (!known) {
        unchecked(t, json, "its tokenizer.bin records no vocabulary fingerprint (llm.c's, or an older "
                  "scripts/prepare-text's: prepare the data again to have it checked)");
        return DDP_OK;
    }
    if (hf_vocab_fingerprint(json, &want, &why) != DDP_OK) {
        unchecked(t, json, why.msg);
        return DDP_OK;
    }
    if (want == have)
        return DDP_OK;
    return ddp_fail(err, DDP_EUSAGE, "%s: data.path %s was tokenized with another vocabulary than "
                    "checkpoint.init_from's %s (vocabulary fingerprints %016llx in its tokenizer.bin, %016llx): its "
                    "token ids stand for other text to this model; prepare it with scripts/prepare-text (or "
                    "prepare-chat) --tokenizer %s", c->source, c->data.path, json, (unsigned long long)have,
                    (unsigned long long)want, json);
}

int train_data_fits(train_job *t, ddp_err *err)
{
    int rc = fits(t, &t->train, err);
    if (rc == DDP_OK)
        rc = fits(t, &t->test, err);
    if (rc != DDP_OK)
        return rc;
    /* rank 0 reads the folder, as it reads init_from's weights (it need be there alone) */
    int32_t mine = t->ctl->rank == 0 ? vocabulary_verdict(t, err) : DDP_OK;
    return train_agree(t, mine, "take data.path's token ids for checkpoint.init_from's tokenizer.json", err);
}
