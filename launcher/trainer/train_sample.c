/* train_sample.c — the text sample a language-model job prints every train.sample_every steps:
 * rank 0 draws train.sample_tokens tokens from the model being trained, seeded by run.seed and
 * the step (so a resumed job prints the same samples), and decodes them with data.path's
 * tokenizer.bin. The context is tokenizer_context_start: the end-of-text token, else the newline token.
 * Logits that are not finite end no job here: they are noted for the stop agreement
 * (train_finite.c), and a stop request ends a sample between two tokens. Under ZeRO-3 every
 * forward pass gathers each unit's parameters from every rank, so every rank draws the same
 * sample (the same seed, the same logits) and rank 0 prints it; nothing rank-local (a stop
 * request, an earlier finding) may then end one rank's draw early. The log gets the text made
 * safe for a terminal and for ddprun's output filter (loggable); TensorBoard gets it as UTF-8.
 * Must not change training state: generation only runs forward passes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/lm_generate.h"
#include "runtime/base/clock.h"
#include "runtime/base/log.h"
#include "runtime/base/test_fault.h"
#include "runtime/base/utf8.h"
#include "runtime/data/tokenizer.h"
#include "train_finite.h"
#include "train_log.h"
#include "train_sample.h"
#include "train_stop.h"
#include "train_tb.h"

/* lm_generate's verdict: logits that are not finite are a finding for the stop agreement (every
 * rank stops at this step), and a stop request ends the sample early; neither fails the job. */
static int sample_verdict(train_job *t, int rc, ddp_err *err)
{
    if (rc == DDP_ENONFINITE) {
        log_warn("text sample at step %lld: %s", (long long)t->step, err->msg);
        train_finite_note(t, t->step, FINITE_LOGITS, "not finite");
    }
    else if (rc == DDP_EPREEMPTED)
        log_info("sample at step %lld: %s (a stop was requested)", (long long)t->step, err->msg);
    return rc == DDP_ENONFINITE || rc == DDP_EPREEMPTED ? DDP_OK : rc;
}

/* text[0..len) as one log record's text: ill-formed UTF-8 as U+FFFD, each newline followed by two
 * spaces (a sample's lines stand apart from the job's), other control characters but tab, C1's
 * too, as \xNN and \u00NN (an escape sequence would drive the terminal); malloc'd, NULL when out
 * of memory. */
static char *loggable(const char *text, size_t len)
{
    uint8_t *valid = malloc(3 * len + 1);
    char *out = valid ? malloc(12 * len + 1) : NULL;
    size_t n = out ? utf8_replace_invalid((const uint8_t *)text, len, valid) : 0, w = 0;
    for (size_t i = 0, k; i < n; i += k) {
        uint32_t cp = 0;
        k = utf8_next(valid + i, n - i, &cp); /* >= 1: the text is well-formed now */
        if (cp == '\n')
            w += (size_t)sprintf(out + w, "\n  ");
        else if ((cp < 0x20 && cp != '\t') || cp == 0x7F)
            w += (size_t)sprintf(out + w, "\\x%02X", (unsigned)cp);
        else if (cp >= 0x80 && cp <= 0x9F)
            w += (size_t)sprintf(out + w, "\\u%04X", (unsigned)cp);
        else
            memcpy(out + w, valid + i, k), w += k;
    }
    if (out)
        out[w] = '\0';
    free(valid);
    return out;
}

typedef struct sample_token_ctx {
    comm *ctl;
    long long step;
} sample_token_ctx;

/* Before each token of rank 0's own sample (not ZeRO-3's, which every rank draws together): the
 * other ranks wait for it in the stop agreement under the collective deadline, and hear that it is
 * busy, as during a checkpoint write, so a sample longer than ddp.timeout_s is no hung rank.
 * Test-only: DDP_TEST_FAULT=slow-sample:0:STEP:SECONDS makes each token of step STEP's sample
 * take SECONDS longer. */
static void answer_waiting_ranks(void *ctx)
{
    const sample_token_ctx *s = ctx;
    test_fault_sleep_at("slow-sample", s->step);
    comm_mpi_busy(s->ctl, "text sample");
}

/* The sample itself (train_sample_text times it). */
static int sample_text(train_job *t, ddp_err *err)
{
    const config *c = t->cfg;
    /* a non-finite loss or gradient norm already found makes sampling pointless */
    int rc = train_finite_drain(t, err);
    bool every_rank = t->zero != NULL, printer = t->ctl->rank == 0;
    if (rc != DDP_OK || (!printer && !every_rank) || !t->m->io.language_model || c->data.kind != DATA_TOKENS)
        return rc;
    if (!every_rank && train_finite_found(t)) {
        log_info("sample at step %lld: skipped, a non-finite value was found", (long long)t->step);
        return DDP_OK;
    }
    char path[CFG_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/tokenizer.bin", c->data.path);
    tokenizer tok;
    rc = tokenizer_load(path, &tok, err);
    if (rc)
        return rc;
    int64_t n = c->train.sample_tokens;
    int32_t *ids = malloc((size_t)(n + 1) * sizeof *ids);
    char *text = malloc((size_t)n * TOKENIZER_MAX_TOKEN_BYTES + 1);
    if (!ids || !text)
        rc = ddp_fail(err, DDP_ERUNTIME, "text sample: out of memory");
    bool drawn = false;
    if (!rc) {
        ids[0] = tokenizer_context_start(&tok);
        sample_token_ctx alive = {.ctl = t->ctl, .step = t->step};
        lm_sampling s = {.temperature = 1.0, .top_k = 40, .seed = c->run.seed ^ (uint64_t)t->step * 0x9E3779B97F4A7C15ull,
                         .stop = every_rank ? NULL : &train_stop_requested,
                         .each_token = every_rank ? NULL : answer_waiting_ranks, .token_ctx = &alive};
        int gen = lm_generate(t->m, ids, 1, n, &s, NULL, err);
        drawn = gen == DDP_OK;
        rc = sample_verdict(t, gen, err);
    }
    if (drawn && printer) {
        size_t len = 0;
        tokenizer_decode(&tok, ids + 1, n, text, (size_t)n * TOKENIZER_MAX_TOKEN_BYTES + 1, &len);
        char *shown = loggable(text, len);
        log_info("sample at step %lld: %s", (long long)t->step, shown ? shown : "(out of memory to show it)");
        free(shown);
        if (rc == DDP_OK)
            rc = train_tb_text(t, "samples/text", text, len, err);
    }
    free(ids);
    free(text);
    tokenizer_free(&tok);
    return rc;
}

int train_sample_text(train_job *t, ddp_err *err)
{
    double t0 = monotonic_s();
    int rc = sample_text(t, err);
    train_log_exclude(t, monotonic_s() - t0);
    return rc;
}
