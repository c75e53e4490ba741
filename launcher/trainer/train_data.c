/* train_data.c — loading the job's data and checking it against the model and the other ranks
 * (train_data.h). Owns which loader data.kind and data.packed choose, the packing report, the
 * check that every rank loaded the same data as rank 0, and the check that token data was made
 * with the vocabulary of checkpoint.init_from's tokenizer; the formats themselves are runtime/data's
 * and runtime/hf's. Must not build a model or stage batches (train_replica.c does). */
#include "train_data.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "runtime/base/activity.h"
#include "runtime/base/dirs.h"
#include "runtime/base/fnv1a.h"
#include "runtime/base/log.h"
#include "runtime/data/token_shards.h"
#include "runtime/hf/hf_vocab.h"
#include "train_agree.h"
#include "train_fault.h"

/* Rank 0: chat data read as plain token windows trains on every token, prompts included, across
 * documents, without an error: the masks were meant to be read. */
static void warn_unread_masks(const train_job *t)
{
    const config *c = t->cfg;
    char mask[CFG_PATH_MAX + 32], where[CFG_WHERE_MAX];
    token_shard_file_name(mask, sizeof mask, c->data.path, "train", 0, "mask");
    if (!c->data.packed && t->ctl->rank == 0 && access(mask, F_OK) == 0)
        log_warn("%s: data.path %s holds loss masks and document lengths (scripts/prepare-chat's .mask and "
                 ".docs), which data.packed: false leaves unread: every token is trained on, prompts included, "
                 "and windows run across documents; data.packed: true reads them",
                 config_where(c, "data.path", where, sizeof where), c->data.path);
}

static int load_tokens(train_job *t, ddp_err *err)
{
    const config *c = t->cfg;
    warn_unread_masks(t);
    int (*load)(const char *, const char *, int64_t, dataset *, ddp_err *) =
        c->data.packed ? dataset_load_packed : dataset_load_tokens;
    int rc = load(c->data.path, "train", c->data.seq_len, &t->train, err);
    if (rc == DDP_OK)
        rc = load(c->data.path, "val", c->data.seq_len, &t->test, err);
    if (rc == DDP_OK)
        rc = token_shards_check_same_format(t->train.tokens, t->test.tokens, err);
    char where[CFG_WHERE_MAX];
    if (rc != DDP_OK)
        return c->data.packed ? ddp_prefix(err, "%s: data.packed", config_where(c, "data.packed", where, sizeof where))
                              : rc;
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
 * made with its vocabulary (equal fingerprints, runtime/data/tokenizer.h: the data's as its
 * tokenizer.bin records it, which the dataset kept), or its ids would stand for other text to this
 * model and training would go on without a word. Where a side cannot tell, it says so and the job
 * goes on. */
static int vocabulary_verdict(const train_job *t, ddp_err *err)
{
    const config *c = t->cfg;
    char json[CFG_PATH_MAX + 32], where[CFG_WHERE_MAX];
    if (!path_is_dir(c->checkpoint.init_from))
        return DDP_OK;
    snprintf(json, sizeof json, "%s/%s", c->checkpoint.init_from, HF_TOKENIZER_JSON);
    if (access(json, F_OK) != 0) /* a folder with the weights alone: nothing to compare with */
        return DDP_OK;
    ddp_err why = {0};
    uint64_t want = 0, have = t->train.vocab_fingerprint;
    if (!t->train.has_vocab_fingerprint) {
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
                    "prepare-chat) --tokenizer %s", config_where(c, "data.path", where, sizeof where), c->data.path,
                    json, (unsigned long long)have, (unsigned long long)want, json);
}

/* What two ranks' copies of the data must share: each split's samples and tokens, the classes, and
 * a digest of the vocabulary's fingerprint, of each packed row's tokens and targets, and of a
 * sample of the contents (the token stream at 64 places and its end, however it is cut into shard
 * files; an in-memory split's targets and its first and last inputs), so a copy of other contents
 * but the same size is told apart without reading it all. */
enum { SUM_TRAIN_N, SUM_TEST_N, SUM_TRAIN_TOKENS, SUM_TEST_TOKENS, SUM_CLASSES, SUM_DIGEST, SUM_N };

static uint64_t split_digest(uint64_t h, const dataset *d)
{
    if (d->tokens) {
        const token_shards *s = d->tokens;
        int32_t run[64];
        for (int64_t k = 0; k <= 64; k++) { /* 64 evenly spaced runs, then the stream's end */
            int64_t n = s->total < 64 ? s->total : 64, at = k < 64 ? (s->total - n) / 64 * k : s->total - n;
            token_shards_copy(s, at, n, run);
            h = fnv1a64(h, run, (size_t)n * sizeof *run);
        }
    } else if (d->n > 0) {
        size_t in = sample_field_bytes(d->layout.input), out = sample_field_bytes(d->layout.target);
        h = fnv1a64(h, d->targets, (size_t)d->n * out);
        h = fnv1a64(fnv1a64(h, d->inputs, in), d->inputs + (size_t)(d->n - 1) * in, in);
    }
    if (d->packed) {
        const doc_packing *p = d->packed;
        h = fnv1a64(h, p->row_targets, (size_t)p->n_rows * sizeof *p->row_targets);
        h = fnv1a64(h, p->row_tokens, (size_t)p->n_rows * sizeof *p->row_tokens);
    }
    return h;
}

static void summarize(const train_job *t, int64_t s[SUM_N])
{
    uint64_t h = fnv1a64(split_digest(split_digest(FNV1A64_BASIS, &t->train), &t->test),
                         &t->train.vocab_fingerprint, sizeof t->train.vocab_fingerprint);
    s[SUM_TRAIN_N] = t->train.n;
    s[SUM_TEST_N] = t->test.n;
    s[SUM_TRAIN_TOKENS] = t->train.tokens ? t->train.tokens->total : 0;
    s[SUM_TEST_TOKENS] = t->test.tokens ? t->test.tokens->total : 0;
    s[SUM_CLASSES] = t->train.layout.n_classes;
    s[SUM_DIGEST] = (int64_t)(h >> 1); /* non-negative, for the message */
}

/* A summary's counts for the message: tokens only for token data. */
static void format_counts(const int64_t s[SUM_N], char *out, size_t n)
{
    int k = snprintf(out, n, "%lld train and %lld val samples", (long long)s[SUM_TRAIN_N], (long long)s[SUM_TEST_N]);
    if (s[SUM_TRAIN_TOKENS] > 0 && k > 0 && (size_t)k < n)
        k += snprintf(out + k, n - (size_t)k, ", %lld and %lld tokens", (long long)s[SUM_TRAIN_TOKENS],
                      (long long)s[SUM_TEST_TOKENS]);
    if (k > 0 && (size_t)k < n)
        snprintf(out + k, n - (size_t)k, ", %lld classes", (long long)s[SUM_CLASSES]);
}

/* This rank's data against rank 0's (ranks read data.path on their own hosts): a rank with more
 * samples would take more steps per epoch than the others and wait in a collective they never
 * join; with as many but others, the sampler's shards would no longer cover the data once. */
static int same_as_rank0(const train_job *t, ddp_err *err)
{
    int64_t mine[SUM_N], theirs[SUM_N] = {0};
    summarize(t, mine);
    if (t->ctl->rank == 0)
        memcpy(theirs, mine, sizeof mine);
    int rc = t->ctl->ops->broadcast(t->ctl, theirs, SUM_N, DT_INT64, 0, NULL, err);
    if (rc != DDP_OK || memcmp(mine, theirs, sizeof mine) == 0)
        return rc;
    const char *path = t->cfg->data.path, *fix = "every rank must read the same data";
    if (memcmp(mine, theirs, SUM_DIGEST * sizeof *mine) == 0)
        return ddp_fail(err, DDP_EUSAGE, "data.path %s on this rank's host is other data than rank 0's: as many "
                        "samples and tokens, other contents (the digest of its vocabulary, packing and sampled "
                        "contents is %llx here, %llx there); %s", path, (unsigned long long)mine[SUM_DIGEST],
                        (unsigned long long)theirs[SUM_DIGEST], fix);
    char here[160], there[160];
    format_counts(mine, here, sizeof here);
    format_counts(theirs, there, sizeof there);
    return ddp_fail(err, DDP_EUSAGE, "data.path %s on this rank's host is other data than rank 0's: %s here, %s "
                    "there; %s", path, here, there, fix);
}

int train_data_fits(train_job *t, ddp_err *err)
{
    const config *c = t->cfg;
    int32_t mine = fits(t, &t->train, err);
    if (mine == DDP_OK)
        mine = fits(t, &t->test, err);
    if (t->ctl->size > 1) { /* every rank takes part, whatever its own checks found */
        ddp_err later = {0};
        int rc = same_as_rank0(t, mine == DDP_OK ? err : &later);
        if (mine == DDP_OK)
            mine = rc;
    }
    /* rank 0 reads the folder, as it reads init_from's weights (it need be there alone) */
    if (mine == DDP_OK && t->ctl->rank == 0 && c->data.kind == DATA_TOKENS && c->checkpoint.init_from[0])
        mine = vocabulary_verdict(t, err);
    if (t->ctl->size == 1)
        return mine;
    return train_agree(t, mine, "take data.path for this job (its error says why)", err);
}
