/* train_ranks.c — every rank's own figures at each progress line, and the straggler rule.
 *
 * The step loop (train.c) adds up, per rank, the wall time of its steps (evaluation, log lines and
 * text samples left out), the time it waited in collectives (the gradient wait the device timer
 * measures, and the stop agreement's wait on the host) and the time it took to load and upload its
 * batches. At each progress line, where every rank has just waited for its device anyway, one
 * allgather of RANK_FIGURES doubles on the control communicator shares them with the device's peak
 * memory (device_memory_peak): nothing is added to a step's critical path.
 *
 * A rank's own work in a step is its step time less its waits: a slow rank works longer and waits
 * less, the others wait for it. The straggler rule: the check keeps the newest progress intervals
 * until they cover at least STRAGGLER_WINDOW_STEPS steps; a rank is persistently slower when, in
 * every one of them, its work per step exceeds the median of the other ranks' by more than
 * STRAGGLER_THRESHOLD of it and by more than STRAGGLER_MIN_MS (so that microseconds of jitter in a
 * tiny step are not a straggler). Rank 0 then says so once, naming the rank, its host, how much
 * slower it was over the window and how long the others waited for it per step (the median of
 * their waits less its own), and the window starts again: a straggler is named within
 * STRAGGLER_WINDOW_STEPS + 2 x train.log_every steps of its slow-down, and at most once per window.
 * Must not change training state nor write metrics.jsonl itself (train_log.c does). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/log.h"
#include "train_job.h"

#define STRAGGLER_WINDOW_STEPS 50
#define STRAGGLER_THRESHOLD 0.10
#define STRAGGLER_MIN_MS 1.0
#define WINDOW_INTERVALS_MAX (STRAGGLER_WINDOW_STEPS + 1) /* an interval holds at least one step */

#define RANK_FIGURES (sizeof(rank_figures) / sizeof(double))

/* A progress interval's steps and every rank's work and wait per step. */
typedef struct window_entry {
    int64_t steps, last_step;
    double *work_ms, *wait_ms; /* [world] */
} window_entry;

typedef struct train_ranks {
    char (*hosts)[64];          /* [world] */
    rank_figures *all;          /* [world]: the latest gather */
    window_entry window[WINDOW_INTERVALS_MAX];
    int first, count;           /* ring of the newest intervals */
    double *scratch;            /* [world] for medians */
} train_ranks;

int train_ranks_open(train_job *t, ddp_err *err)
{
    int world = t->ctl->size;
    train_ranks *r = calloc(1, sizeof *r);
    t->ranks = r;
    if (!r)
        return ddp_fail(err, DDP_ERUNTIME, "out of memory for the per-rank figures");
    r->hosts = calloc((size_t)world, sizeof *r->hosts);
    r->all = calloc((size_t)world, sizeof *r->all);
    r->scratch = calloc((size_t)world, sizeof *r->scratch);
    bool ok = r->hosts && r->all && r->scratch;
    for (int i = 0; ok && i < WINDOW_INTERVALS_MAX; i++) {
        r->window[i].work_ms = calloc((size_t)world, sizeof(double));
        r->window[i].wait_ms = calloc((size_t)world, sizeof(double));
        ok = r->window[i].work_ms && r->window[i].wait_ms;
    }
    if (!ok)
        return ddp_fail(err, DDP_ERUNTIME, "out of memory for %d ranks' figures", world);
    return t->ctl->ops->allgather(t->ctl, t->ctl->host, r->hosts, sizeof r->hosts[0], DT_UINT8, NULL, err);
}

void train_ranks_close(train_job *t)
{
    train_ranks *r = t->ranks;
    if (!r)
        return;
    for (int i = 0; i < WINDOW_INTERVALS_MAX; i++) {
        free(r->window[i].work_ms);
        free(r->window[i].wait_ms);
    }
    free(r->hosts);
    free(r->all);
    free(r->scratch);
    free(r);
    t->ranks = NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..world) without v[skip]. */
static double median_without(train_ranks *r, const double *v, int world, int skip)
{
    int n = 0;
    for (int i = 0; i < world; i++)
        if (i != skip)
            r->scratch[n++] = v[i];
    qsort(r->scratch, (size_t)n, sizeof *r->scratch, cmp_double);
    return n % 2 ? r->scratch[n / 2] : 0.5 * (r->scratch[n / 2 - 1] + r->scratch[n / 2]);
}

/* Appends the latest gather to the window, dropping the oldest interval that is not needed to keep
 * STRAGGLER_WINDOW_STEPS covered. */
static void window_add(train_ranks *r, int world, int64_t steps, int64_t last_step)
{
    if (r->count == WINDOW_INTERVALS_MAX) {
        r->first = (r->first + 1) % WINDOW_INTERVALS_MAX;
        r->count--;
    }
    window_entry *e = &r->window[(r->first + r->count++) % WINDOW_INTERVALS_MAX];
    e->steps = steps;
    e->last_step = last_step;
    for (int i = 0; i < world; i++) {
        e->wait_ms[i] = r->all[i].wait_ms;
        e->work_ms[i] = fmax(0, r->all[i].step_ms - r->all[i].wait_ms); /* device and host clocks differ */
    }
    for (;;) {
        int64_t without_oldest = 0;
        for (int k = 1; k < r->count; k++)
            without_oldest += r->window[(r->first + k) % WINDOW_INTERVALS_MAX].steps;
        if (without_oldest < STRAGGLER_WINDOW_STEPS)
            break;
        r->first = (r->first + 1) % WINDOW_INTERVALS_MAX;
        r->count--;
    }
}

/* Whether rank s was slower than the others in every interval of the window; its work, the others'
 * median work and their median wait less its own, each summed over the window's steps. */
static bool persistently_slower(train_ranks *r, int world, int s, double *work, double *median, double *waited)
{
    *work = *median = *waited = 0;
    for (int k = 0; k < r->count; k++) {
        const window_entry *e = &r->window[(r->first + k) % WINDOW_INTERVALS_MAX];
        double m = median_without(r, e->work_ms, world, s);
        double excess = e->work_ms[s] - m;
        if (!(excess > STRAGGLER_THRESHOLD * m && excess > STRAGGLER_MIN_MS))
            return false;
        double wait = median_without(r, e->wait_ms, world, s) - e->wait_ms[s];
        *work += e->steps * e->work_ms[s];
        *median += e->steps * m;
        *waited += e->steps * (wait > 0 ? wait : 0);
    }
    return true;
}

static void check_stragglers(train_job *t)
{
    train_ranks *r = t->ranks;
    int world = t->ctl->size;
    int64_t steps = 0;
    for (int k = 0; k < r->count; k++)
        steps += r->window[(r->first + k) % WINDOW_INTERVALS_MAX].steps;
    if (world < 2 || steps < STRAGGLER_WINDOW_STEPS)
        return;
    bool named = false;
    for (int s = 0; s < world; s++) {
        double work, median, waited;
        if (!persistently_slower(r, world, s, &work, &median, &waited))
            continue;
        named = true;
        int64_t last = r->window[(r->first + r->count - 1) % WINDOW_INTERVALS_MAX].last_step;
        if (t->ctl->rank == 0)
            log_warn("straggler: rank %d on host %s: %.0f %% slower than the median of the other ranks over the "
                     "last %lld steps (steps %lld-%lld); the others wait %.1f ms a step for it", s, r->hosts[s],
                     100 * (work - median) / median, (long long)steps, (long long)(last - steps + 1),
                     (long long)last, waited / (double)steps);
    }
    if (named)
        r->count = 0; /* a straggler is named once per window */
}

int train_ranks_gather(train_job *t, double exposed_ms, ddp_err *err)
{
    train_ranks *r = t->ranks;
    rank_step_time *mine = &t->mine;
    double steps = mine->steps > 0 ? (double)mine->steps : 1;
    rank_figures me = {.step_ms = 1e3 * mine->step_s / steps, .wait_ms = (exposed_ms + 1e3 * mine->wait_s) / steps,
                       .data_ms = 1e3 * mine->data_s / steps, .peak_bytes = (double)device_memory_peak(t->dev)};
    int64_t counted = mine->steps;
    *mine = (rank_step_time){0};
    int rc = t->ctl->ops->allgather(t->ctl, &me, r->all, RANK_FIGURES, DT_DOUBLE, NULL, err);
    if (rc != DDP_OK)
        return ddp_prefix(err, "gathering the per-rank figures");
    if (counted > 0) {
        window_add(r, t->ctl->size, counted, t->step);
        check_stragglers(t);
    }
    return DDP_OK;
}

double train_ranks_peak_mib(const train_job *t)
{
    double peak = 0;
    for (int i = 0; i < t->ctl->size; i++)
        peak = fmax(peak, t->ranks->all[i].peak_bytes);
    return peak / (1 << 20);
}

const rank_figures *train_ranks_all(const train_job *t) { return t->ranks->all; }

/* A host name as a JSON string's contents. */
static void json_text(FILE *f, const char *s, size_t cap)
{
    for (size_t i = 0; i < cap && s[i]; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            fputc('\\', f);
        if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
}

void train_ranks_write_json(const train_job *t, FILE *f)
{
    const train_ranks *r = t->ranks;
    fputs(",\"ranks\":[", f);
    for (int i = 0; i < t->ctl->size; i++) {
        const rank_figures *x = &r->all[i];
        fprintf(f, "%s{\"rank\":%d,\"host\":\"", i ? "," : "", i);
        json_text(f, r->hosts[i], sizeof r->hosts[i]);
        fprintf(f, "\",\"step_ms\":%.4f,\"wait_ms\":%.4f,\"data_ms\":%.4f,\"peak_mib\":%.2f}", x->step_ms,
                x->wait_ms, x->data_ms, x->peak_bytes / (1 << 20));
    }
    fputc(']', f);
}
