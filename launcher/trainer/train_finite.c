/* train_finite.c — catching non-finite training (a NaN or infinite loss, gradient norm,
 * evaluation loss, parameter or optimizer state) without making a step wait for the device.
 *
 * Each step's micro-steps add their loss and correct-count sums into a device slot of that step's
 * own, and a step that computes the gradient norm (clipping) copies its sum of squares beside it:
 * plain device writes in stream order. The slots are read (drained) only where the host waits for
 * the device anyway: progress lines (whose loss and accuracy are the drained sums), evaluations,
 * text samples, before each checkpoint, and when every slot is used (after min(train.log_every,
 * FINITE_SLOTS_MAX) steps, so at least every FINITE_SLOTS_MAX steps). A non-finite value
 * found there is noted with its step, what it was and this rank; the ranks share their notes in
 * the stop agreement every step (train.c), so all of them stop at the same step naming the
 * earliest one, with DDP_ENONFINITE. Before a checkpoint the parameters and optimizer state are
 * checked as well (their sums of squares) and the ranks agree there and then: nothing non-finite
 * is ever saved, so no finite checkpoint is pruned for it. A NaN makes a sum of squares NaN, an
 * infinity makes it infinite, and finite floats cannot overflow a double's: the sums say exactly
 * whether everything was finite. It owns the step records and the findings (struct
 * train_finite). Must not decide the loop's order (train.c) or write metrics (train_log.c), nor
 * reach into the checkpoints: the newest saved step is its callers' to tell. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/log.h"
#include "train_finite.h"
#include "train_zero.h"

/* The most steps recorded between two drains (16 bytes of device memory each). */
#define FINITE_SLOTS_MAX 4096

/* Sums of squares the check before a checkpoint takes: the parameters and up to three state buffers. */
#define FINITE_SUMS 4

/* Each step's sums since the last drain, on the device, and what was found. */
struct train_finite {
    float *stats;             /* device float[2 * cap]: per recorded step, its (loss sum, correct count) */
    double *norms;            /* device double[cap]: per recorded step, the gradient sum of squares (norms_on) */
    double *sums;             /* device double[FINITE_SUMS]: the check before a checkpoint */
    float *host_stats;        /* host copies for a drain */
    double *host_norms;
    int64_t cap, used;        /* slots, and steps recorded since the last drain (the latest is t->step) */
    bool norms_on;            /* the steps compute the gradient norm (optimizer.grad_clip > 0) */
    double loss_sum, correct_sum;  /* drained since the last progress line */
    double norm_sum;          /* the gradient norms drained since the last progress line (norms_on) */
    int64_t norm_steps;
    int64_t key;              /* this rank's earliest note (key_of's encoding), 0 when none */
};

/* A note as one integer, smaller for an earlier step, then for an earlier thing within the step,
 * then for a lower rank: the ranks agree on the smallest (train.c's stop agreement takes the
 * largest of INT64_MAX - key). Steps up to 2^39, ranks below 2^20. */
#define KEY_RANK_BITS 20
#define KEY_WHAT_BITS 4

static int64_t key_of(int64_t step, finite_what what, int rank)
{
    return (((step << KEY_WHAT_BITS | (int64_t)what) << KEY_RANK_BITS) | rank) + 1; /* 0: no note */
}

/* "the X of step %lld was": a format for the step, ending in the verb. */
static const char *what_name(finite_what w)
{
    static const char *const names[] = {
        [FINITE_LOSS] = "the training loss of step %lld was",
        [FINITE_GRAD_NORM] = "the gradient norm of step %lld was",
        [FINITE_EVAL_LOSS] = "the evaluation loss after step %lld was",
        [FINITE_LOGITS] = "the logits of the text sample after step %lld were",
        [FINITE_PARAMS] = "the parameters after step %lld were",
        [FINITE_OPT_STATE] = "the optimizer state after step %lld was",
    };
    return names[w];
}

int train_finite_open(train_job *t, ddp_err *err)
{
    struct train_finite *f = calloc(1, sizeof *f);
    t->finite = f;
    if (!f)
        return ddp_fail(err, DDP_ERUNTIME, "out of memory for the loss records");
    device *d = t->dev;
    int64_t every = t->cfg->train.log_every;
    f->cap = every < FINITE_SLOTS_MAX ? every : FINITE_SLOTS_MAX;
    f->norms_on = t->opt->grad_clip > 0;
    f->host_stats = malloc((size_t)f->cap * 2 * sizeof *f->host_stats);
    f->host_norms = malloc((size_t)f->cap * sizeof *f->host_norms);
    if (!f->host_stats || !f->host_norms)
        return ddp_fail(err, DDP_ERUNTIME, "out of memory for %lld steps' loss records", (long long)f->cap);
    int rc = d->ops->alloc(d, (size_t)f->cap * 2 * sizeof(float), (void **)&f->stats, err);
    if (rc == DDP_OK)
        rc = d->ops->fill(d, TENSOR_F32, f->stats, (size_t)f->cap * 2, 0.0f, err);
    if (rc == DDP_OK)
        rc = d->ops->alloc(d, (size_t)f->cap * sizeof(double), (void **)&f->norms, err);
    if (rc == DDP_OK)
        rc = d->ops->alloc(d, FINITE_SUMS * sizeof(double), (void **)&f->sums, err);
    return rc != DDP_OK ? ddp_prefix(err, "loss records") : DDP_OK;
}

void train_finite_close(train_job *t)
{
    struct train_finite *f = t->finite;
    if (!f)
        return;
    if (t->dev) {
        t->dev->ops->free(t->dev, f->stats);
        t->dev->ops->free(t->dev, f->norms);
        t->dev->ops->free(t->dev, f->sums);
    }
    free(f->host_stats);
    free(f->host_norms);
    free(f);
    t->finite = NULL;
}

float *train_finite_stats(train_job *t)
{
    return t->finite->stats + 2 * t->finite->used;
}

int train_finite_step_done(train_job *t, ddp_err *err)
{
    struct train_finite *f = t->finite;
    int rc = DDP_OK;
    if (f->norms_on)
        rc = t->dev->ops->copy(t->dev, f->norms + f->used, t->opt->grad_sumsq, sizeof(double), err);
    f->used++;
    if (rc == DDP_OK && f->used == f->cap)
        rc = train_finite_drain(t, err);
    return rc;
}

void train_finite_note(train_job *t, int64_t step, finite_what what, const char *detail)
{
    struct train_finite *f = t->finite;
    int64_t key = key_of(step, what, t->ctl->rank);
    if (f->key != 0 && f->key <= key)
        return;
    f->key = key;
    char where[96];
    snprintf(where, sizeof where, what_name(what), (long long)step);
    log_warn("non-finite value: %s %s", where, detail);
}

/* A note whose detail is the value. */
static void note_value(train_job *t, int64_t step, finite_what what, double value)
{
    char detail[48];
    snprintf(detail, sizeof detail, "%g", value);
    train_finite_note(t, step, what, detail);
}

int train_finite_drain(train_job *t, ddp_err *err)
{
    struct train_finite *f = t->finite;
    device *d = t->dev;
    int64_t n = f->used;
    if (n == 0)
        return DDP_OK;
    int rc = d->ops->download(d, f->host_stats, f->stats, (size_t)n * 2 * sizeof(float), err);
    if (rc == DDP_OK && f->norms_on)
        rc = d->ops->download(d, f->host_norms, f->norms, (size_t)n * sizeof(double), err);
    if (rc == DDP_OK)
        rc = d->ops->fill(d, TENSOR_F32, f->stats, (size_t)n * 2, 0.0f, err);
    if (rc != DDP_OK)
        return ddp_prefix(err, "reading the loss records");
    f->used = 0;
    for (int64_t k = 0; k < n; k++) {
        int64_t step = t->step - n + 1 + k;
        double loss = f->host_stats[2 * k], correct = f->host_stats[2 * k + 1];
        if (!isfinite(loss))
            note_value(t, step, FINITE_LOSS, loss);
        if (f->norms_on && !isfinite(f->host_norms[k]))
            note_value(t, step, FINITE_GRAD_NORM, sqrt(f->host_norms[k]));
        if (f->norms_on) {
            f->norm_sum += sqrt(f->host_norms[k]);
            f->norm_steps++;
        }
        f->loss_sum += loss;
        f->correct_sum += correct;
    }
    return DDP_OK;
}

void train_finite_take_sums(train_job *t, double *loss_sum, double *correct_sum, double *grad_norm)
{
    struct train_finite *f = t->finite;
    *loss_sum = f->loss_sum;
    *correct_sum = f->correct_sum;
    *grad_norm = f->norm_steps > 0 ? f->norm_sum / (double)f->norm_steps : NAN;
    f->loss_sum = f->correct_sum = f->norm_sum = 0;
    f->norm_steps = 0;
}

bool train_finite_found(const train_job *t)
{
    return t->finite->key != 0;
}

int64_t train_finite_vote(const train_job *t)
{
    return t->finite->key != 0 ? INT64_MAX - t->finite->key : 0;
}

int train_finite_fail(train_job *t, int64_t vote, int64_t newest_saved, int64_t writing, ddp_err *err)
{
    int64_t key = INT64_MAX - vote - 1;
    int rank = (int)(key & ((1 << KEY_RANK_BITS) - 1));
    finite_what what = (finite_what)((key >> KEY_RANK_BITS) & ((1 << KEY_WHAT_BITS) - 1));
    long long step = (long long)(key >> (KEY_RANK_BITS + KEY_WHAT_BITS));
    char where[96], on_rank[32] = "", kept[160] = "no checkpoint was saved before";
    snprintf(where, sizeof where, what_name(what), step);
    /* the others are the same on every rank, but for a ZeRO shard: the parameters' under ZeRO-3,
     * the optimizer state's under any stage */
    bool shard = what == FINITE_OPT_STATE ? train_zero_active(t) : what == FINITE_PARAMS && t->zero;
    if (what == FINITE_LOSS || what == FINITE_LOGITS)
        snprintf(on_rank, sizeof on_rank, " on rank %d", rank);
    else if (shard)
        snprintf(on_rank, sizeof on_rank, " in rank %d's shard", rank);
    if (newest_saved >= 0)
        snprintf(kept, sizeof kept, "the newest checkpoint is step %lld's", (long long)newest_saved);
    if (writing >= 0) /* its write's end is logged before the job exits */
        snprintf(kept + strlen(kept), sizeof kept - strlen(kept), "; step %lld's is still being written",
                 (long long)writing);
    return ddp_fail(err, DDP_ENONFINITE, "non-finite training: %s not finite%s; stopped at step %lld without "
                    "saving (%s; none is ever written from non-finite values); resuming with the same settings "
                    "repeats the same steps", where, on_rank, (long long)t->step, kept);
}

/* The sums of squares of the parameters and of each optimizer state buffer (this rank's shard
 * under ZeRO), read in one download. */
static int state_sums(train_job *t, double *host, int *n, ddp_err *err)
{
    device *d = t->dev;
    const optimizer *o = t->opt;
    const float *state[] = {o->momentum_buffer, o->exp_avg, o->exp_avg_sq};
    size_t n_params;
    const float *params = train_zero_params(t, &n_params);
    int rc = d->ops->sumsq(d, params, n_params, t->finite->sums, err);
    *n = 1;
    for (size_t i = 0; rc == DDP_OK && i < sizeof state / sizeof state[0]; i++)
        if (state[i])
            rc = d->ops->sumsq(d, state[i], o->n_state, t->finite->sums + (*n)++, err);
    if (rc == DDP_OK)
        rc = d->ops->download(d, host, t->finite->sums, (size_t)*n * sizeof *host, err);
    return rc;
}

int train_finite_check_state(train_job *t, int64_t newest_saved, int64_t writing, ddp_err *err)
{
    double sums[FINITE_SUMS];
    int n = 0;
    int rc = train_finite_drain(t, err);
    if (rc == DDP_OK)
        rc = state_sums(t, sums, &n, err);
    for (int i = 0; rc == DDP_OK && i < n; i++)
        if (!isfinite(sums[i]))
            note_value(t, t->step, i == 0 ? FINITE_PARAMS : FINITE_OPT_STATE, sqrt(sums[i]));
    int64_t vote = train_finite_vote(t);
    snprintf(t->ctl->label, sizeof t->ctl->label, "finite check");
    if (rc == DDP_OK)
        rc = t->ctl->ops->allreduce(t->ctl, &vote, &vote, 1, DT_INT64, OP_MAX, NULL, err);
    t->ctl->label[0] = '\0';
    if (rc != DDP_OK)
        return ddp_prefix(err, "checking the state before the checkpoint of step %lld", (long long)t->step);
    return vote != 0 ? train_finite_fail(t, vote, newest_saved, writing, err) : DDP_OK;
}
