/* lm_generate.c — sampling tokens from a language model (see lm_generate.h). Owns the window of
 * the last T tokens fed to the model, the download of one logits row per token, the draw
 * (temperature, top-k, top-p) from the RNG_GENERATE stream and the end at a stop id. Must not touch the
 * model's parameters. */
#include "lm_generate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/half.h"
#include "runtime/base/rng.h"

typedef struct gen_bufs {
    int32_t *window;        /* host [T] */
    float *row;             /* host [V]: the logits of the position being predicted */
    double *p;              /* host [V] */
    lm_ranked *ranked;      /* host [V]: top-p's scratch */
    int32_t *in_dev, *tgt_dev;
    float *stats_dev;
} gen_bufs;

static void free_bufs(model *m, gen_bufs *b)
{
    free(b->window);
    free(b->row);
    free(b->p);
    free(b->ranked);
    m->dev->ops->free(m->dev, b->in_dev);
    m->dev->ops->free(m->dev, b->tgt_dev);
    m->dev->ops->free(m->dev, b->stats_dev);
}

static int alloc_bufs(model *m, int64_t T, int64_t V, gen_bufs *b, ddp_err *err)
{
    device *d = m->dev;
    memset(b, 0, sizeof *b);
    b->window = calloc((size_t)T, sizeof *b->window);
    b->row = malloc((size_t)V * sizeof *b->row);
    b->p = malloc((size_t)V * sizeof *b->p);
    b->ranked = malloc((size_t)V * sizeof *b->ranked);
    if (!b->window || !b->row || !b->p || !b->ranked)
        return ddp_fail(err, DDP_ERUNTIME, "generate: out of host memory");
    int rc = d->ops->alloc(d, (size_t)T * sizeof(int32_t), (void **)&b->in_dev, err);
    if (!rc)
        rc = d->ops->alloc(d, (size_t)T * sizeof(int32_t), (void **)&b->tgt_dev, err);
    if (!rc)
        rc = d->ops->alloc(d, 2 * sizeof(float), (void **)&b->stats_dev, err);
    if (!rc) /* targets only feed the loss, which generation ignores: any valid ids do */
        rc = d->ops->upload(d, b->tgt_dev, b->window, (size_t)T * sizeof(int32_t), err);
    return rc;
}

static int heavier_first(const void *a, const void *b)
{
    const lm_ranked *x = a, *y = b;
    return x->w != y->w ? (x->w < y->w ? 1 : -1) : (x->id > y->id) - (x->id < y->id);
}

static int larger_first(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

/* top-p over the weights p[0..V): keeps the heaviest ids whose weights first reach top_p of sum,
 * zeroes the others; returns the kept weights' sum. */
static double keep_nucleus(double *p, int64_t V, double sum, double top_p, lm_ranked *by_weight)
{
    int64_t n = 0, kept = 0;
    for (int64_t i = 0; i < V; i++)
        if (p[i] > 0)
            by_weight[n++] = (lm_ranked){p[i], i};
    qsort(by_weight, (size_t)n, sizeof *by_weight, heavier_first);
    double mass = 0;
    while (kept < n && mass < top_p * sum)
        mass += by_weight[kept++].w;
    for (int64_t j = kept; j < n; j++)
        p[by_weight[j].id] = 0.0;
    return mass;
}

double lm_draw_weights(const float *row, int64_t V, const lm_sampling *s, double *p, lm_ranked *scratch,
                       int64_t *best)
{
    *best = 0;
    for (int64_t i = 1; i < V; i++)
        if (row[i] > row[*best])
            *best = i;
    if (s->temperature <= 0) {
        for (int64_t i = 0; i < V; i++)
            p[i] = i == *best;
        return 1.0;
    }
    /* top-k: the threshold is the k-th largest logit (ties with it are kept), from the logits
     * sorted in p, which the weights overwrite next */
    double cut = -INFINITY;
    if (s->top_k > 0 && s->top_k < V) {
        for (int64_t i = 0; i < V; i++)
            p[i] = row[i];
        qsort(p, (size_t)V, sizeof *p, larger_first);
        cut = p[s->top_k - 1];
    }
    double sum = 0;
    for (int64_t i = 0; i < V; i++) {
        p[i] = row[i] >= cut ? exp(((double)row[i] - (double)row[*best]) / s->temperature) : 0.0;
        sum += p[i];
    }
    return s->top_p > 0 && s->top_p < 1 ? keep_nucleus(p, V, sum, s->top_p, scratch) : sum;
}

/* The index of the token drawn from logits row[0..V) (see lm_sampling). */
static int32_t draw(const float *row, const gen_bufs *b, int64_t V, const lm_sampling *s, rng *r)
{
    int64_t best;
    double sum = lm_draw_weights(row, V, s, b->p, b->ranked, &best);
    if (s->temperature <= 0)
        return (int32_t)best;
    double u = (double)(rng_next(r) >> 11) * 0x1.0p-53 * sum;
    for (int64_t i = 0; i < V; i++) {
        if (u < b->p[i])
            return (int32_t)i;
        u -= b->p[i];
    }
    return (int32_t)best; /* rounding left u past the end: the top token is the safe choice */
}

/* row[0..V) = the device logits row, widened to float. */
static int download_row(model *m, float *row, const void *logits, int64_t V, ddp_err *err)
{
    const size_t elem = tensor_dtype_size(m->act_dtype);
    int rc = m->dev->ops->download(m->dev, row, logits, (size_t)V * elem, err);
    if (rc || m->act_dtype == TENSOR_F32)
        return rc;
    /* bf16 i sits at bytes 2i, float i goes to 4i: widening from the end never overwrites a bf16
     * value before it is read */
    for (int64_t i = V - 1; i >= 0; i--) {
        uint16_t h;
        memcpy(&h, (const char *)row + 2 * i, sizeof h);
        row[i] = bf16_to_float(h);
    }
    return DDP_OK;
}

/* The draw compares and exponentiates logits: a NaN or infinity would make its choice meaningless
 * (and a NaN row has no k-th largest value). */
static int check_finite(const float *row, int64_t V, int64_t token, ddp_err *err)
{
    for (int64_t i = 0; i < V; i++)
        if (!isfinite(row[i]))
            return ddp_fail(err, DDP_ENONFINITE, "the logits for token %lld are not finite (id %lld: %g): the "
                            "model's parameters or activations hold NaN or infinity", (long long)token + 1,
                            (long long)i, (double)row[i]);
    return DDP_OK;
}

bool lm_is_stop(const lm_sampling *s, int32_t id)
{
    for (int64_t i = 0; i < s->n_stop_ids; i++)
        if (s->stop_ids[i] == id)
            return true;
    return false;
}

int lm_generate(model *m, int32_t *tokens, int64_t len, int64_t n, const lm_sampling *s, int64_t *drawn,
                ddp_err *err)
{
    if (drawn)
        *drawn = 0;
    if (!m->io.language_model || !m->ops->row_logits)
        return ddp_fail(err, DDP_EUSAGE, "generate: %s is not a language model", m->description);
    if (len < 1)
        return ddp_fail(err, DDP_EUSAGE, "generate: needs at least one token of context");
    device *d = m->dev;
    int64_t T = m->io.sample.input.count, V = m->io.sample.n_classes;
    gen_bufs b;
    int rc = alloc_bufs(m, T, V, &b, err);
    rng r;
    rng_seed(&r, s->seed, RNG_GENERATE);
    bool stopped = false;
    for (int64_t k = 0; !rc && !stopped && k < n; k++) {
        if (s->stop && *s->stop) {
            rc = ddp_fail(err, DDP_EPREEMPTED, "stopped after %lld of %lld tokens", (long long)k, (long long)n);
            break;
        }
        if (s->each_token)
            s->each_token(s->token_ctx);
        int64_t have = len + k, w = have < T ? have : T;
        memcpy(b.window, tokens + have - w, (size_t)w * sizeof *tokens); /* the rest stays 0: causal, unread */
        rc = d->ops->upload(d, b.in_dev, b.window, (size_t)T * sizeof(int32_t), err);
        model_batch batch = {.inputs = b.in_dev, .targets = b.tgt_dev, .rows = 1};
        if (!rc)
            rc = m->ops->evaluate(m, &batch, b.stats_dev, err);
        const void *logits = NULL;
        if (!rc)
            rc = m->ops->row_logits(m, w - 1, &logits, err);
        if (!rc)
            rc = download_row(m, b.row, logits, V, err);
        if (!rc)
            rc = check_finite(b.row, V, k, err);
        if (!rc) {
            tokens[have] = draw(b.row, &b, V, s, &r);
            stopped = lm_is_stop(s, tokens[have]);
            if (drawn)
                *drawn = k + 1;
        }
    }
    free_bufs(m, &b);
    return rc ? ddp_prefix(err, "generate") : DDP_OK;
}
