/* train_ranks.c — the one-rank-per-GPU check at the start; every rank's own figures at each
 * progress line, and the straggler rule.
 *
 * The step's observers (train_observe.c) add up here, per rank, the wall time of its steps
 * (evaluation, log lines and text samples left out), the time it waited in collectives (the stop
 * agreement's wait on the host, and at the gather the gradient wait the device timer measured) and
 * the time it took to load and upload its batches. At each progress line, where every rank has
 * just waited for its device anyway, one allgather of RANK_FIGURES doubles on the control
 * communicator shares them with the device's peak memory (device_memory_peak): nothing is added to
 * a step's critical path. It owns these figures (struct train_ranks).
 *
 * A rank's own work in a step is its step time less its waits: a slow rank works longer and waits
 * less, the others wait for it. The straggler rule: progress intervals are collected into windows
 * of at least STRAGGLER_WINDOW_STEPS steps, one after the other. A rank is slower in a window when
 * its work over the window exceeds the median of the other ranks' by more than STRAGGLER_THRESHOLD
 * of it and by more than STRAGGLER_MIN_MS a step (microseconds of jitter in a tiny step are not a
 * straggler), it worked longer than that median in at least two thirds of the window's intervals
 * (one spike is not a slower rank), and the others' wait for it (the median of their waits less
 * its own) costs them more than STRAGGLER_COST of their step time. A straggler is the same rank slower in
 * STRAGGLER_WINDOWS windows in a row: two healthy ranks sharing a machine's cores take turns being
 * 10-20 % slower, and one of them can stay up to ~30 % slower for hundreds of steps when the launcher's
 * own processes share its core (seen on a 2-vCPU CI machine), which is why the margins are wide; a
 * rank slowed from outside by half again or more (a throttled GPU, a noisy neighbour, a process
 * stopped and continued) stays slower. Rank 0 then says so once, naming the rank, its host, how much slower
 * it was over those windows and how long the others waited for it per step, and counting starts
 * again: a straggler is named within (STRAGGLER_WINDOWS + 1) x STRAGGLER_WINDOW_STEPS + 2 x
 * train.log_every steps of its slow-down (the window it began in counts only from the next), and
 * at most once per STRAGGLER_WINDOWS windows.
 * Must not change training state nor write metrics.jsonl itself (train_log.c does). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/json_text.h"
#include "launcher/shared/gpu_share.h"
#include "runtime/base/log.h"
#include "train_ranks.h"

#define STRAGGLER_WINDOW_STEPS 50
#define STRAGGLER_WINDOWS 3
#define STRAGGLER_THRESHOLD 0.50
#define STRAGGLER_COST 0.25
#define STRAGGLER_MIN_MS 1.0
#define WINDOW_INTERVALS_MAX (STRAGGLER_WINDOW_STEPS + 1) /* an interval holds at least one step */

#define RANK_FIGURES (sizeof(rank_figures) / sizeof(double))

/* ---- one rank per GPU ---- */

int train_ranks_check_gpus(train_job *t, ddp_err *err)
{
    comm *ctl = t->ctl;
    char reason[256] = "";
    int gpus = t->dev->kind == DEVICE_CUDA ? device_cuda_count(reason, sizeof reason) : 0;
    char bus_id[32] = "";
    if (gpus > 0)
        device_cuda_bus_id(t->dev->index, bus_id, sizeof bus_id);
    gpu_share_rank me = gpu_share_me(ctl->host, ctl->local_rank, gpus, bus_id);
    gpu_share_rank *all = calloc((size_t)ctl->size, sizeof *all);
    if (!all)
        return ddp_fail(err, DDP_ERUNTIME, "out of memory for %d ranks' GPU counts", ctl->size);
    int rc = ctl->ops->allgather(ctl, &me, all, sizeof me, DT_UINT8, NULL, err);
    if (rc == DDP_OK)
        rc = gpu_share_check(all, ctl->size, "train on device: cpu (its gradients go over MPI)", err);
    free(all);
    return rc;
}

/* ---- every rank's figures ---- */

/* A progress interval's steps and every rank's work, wait and step time per step. */
typedef struct window_entry {
    int64_t steps, last_step;
    double *work_ms, *wait_ms, *step_ms; /* [world] */
} window_entry;

/* The windows in a row in which the same rank was slower, summed over their steps. */
typedef struct slow_streak {
    int rank, windows;          /* rank -1: none */
    int64_t steps, last_step;
    double work, median, waited; /* ms, summed over the steps */
} slow_streak;

typedef struct train_ranks {
    char (*hosts)[DDP_HOST_NAME_MAX]; /* [world] */
    rank_step_time mine;        /* this rank's times since the last progress line */
    rank_figures *all;          /* [world]: the latest gather */
    window_entry window[WINDOW_INTERVALS_MAX];
    int count;                  /* intervals of the current window */
    slow_streak streak;
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
        r->window[i].step_ms = calloc((size_t)world, sizeof(double));
        ok = r->window[i].work_ms && r->window[i].wait_ms && r->window[i].step_ms;
    }
    r->streak.rank = -1;
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
        free(r->window[i].step_ms);
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

/* Appends the latest gather to the current window; the steps the window covers now. */
static int64_t window_add(train_ranks *r, int world, int64_t steps, int64_t last_step)
{
    window_entry *e = &r->window[r->count++];
    e->steps = steps;
    e->last_step = last_step;
    for (int i = 0; i < world; i++) {
        e->wait_ms[i] = r->all[i].wait_ms;
        e->step_ms[i] = r->all[i].step_ms;
        e->work_ms[i] = fmax(0, r->all[i].step_ms - r->all[i].wait_ms); /* device and host clocks differ */
    }
    int64_t covered = 0;
    for (int k = 0; k < r->count; k++)
        covered += r->window[k].steps;
    return covered;
}

/* Whether rank s was slower than the others over the window and in most of its intervals, at a
 * cost to them; adds its work, the others' median work and their median wait less its own, each
 * summed over the window's steps, to what *sum holds. */
static bool slower_in_window(train_ranks *r, int world, int s, slow_streak *sum)
{
    slow_streak w = {0};
    double others_step = 0;
    int slower = 0;
    for (int k = 0; k < r->count; k++) {
        const window_entry *e = &r->window[k];
        double m = median_without(r, e->work_ms, world, s);
        double wait = median_without(r, e->wait_ms, world, s) - e->wait_ms[s];
        slower += e->work_ms[s] > m;
        w.steps += e->steps;
        w.work += e->steps * e->work_ms[s];
        w.median += e->steps * m;
        w.waited += e->steps * (wait > 0 ? wait : 0);
        others_step += e->steps * median_without(r, e->step_ms, world, s);
    }
    double excess = w.work - w.median;
    if (!(excess > STRAGGLER_THRESHOLD * w.median && excess > STRAGGLER_MIN_MS * (double)w.steps &&
          3 * slower >= 2 * r->count && w.waited > STRAGGLER_COST * others_step))
        return false;
    sum->steps += w.steps;
    sum->work += w.work;
    sum->median += w.median;
    sum->waited += w.waited;
    return true;
}

/* The window is complete: the rank slower in it (the one the others waited for longest) extends or
 * starts the streak; STRAGGLER_WINDOWS in a row name it. */
static void judge_window(train_job *t)
{
    train_ranks *r = t->ranks;
    int world = t->ctl->size;
    slow_streak best = {.rank = -1};
    for (int s = 0; s < world; s++) {
        slow_streak w = {.rank = s};
        if (slower_in_window(r, world, s, &w) && (best.rank < 0 || w.waited > best.waited))
            best = w;
    }
    slow_streak *st = &r->streak;
    if (best.rank < 0 || best.rank != st->rank)
        *st = (slow_streak){.rank = best.rank};
    if (best.rank >= 0) {
        st->windows++;
        st->steps += best.steps;
        st->work += best.work;
        st->median += best.median;
        st->waited += best.waited;
        st->last_step = r->window[r->count - 1].last_step;
    }
    r->count = 0;
    if (st->rank < 0 || st->windows < STRAGGLER_WINDOWS)
        return;
    if (t->ctl->rank == 0)
        log_warn("straggler: rank %d on host %s: %.0f %% slower than the median of the other ranks over the "
                 "last %lld steps (steps %lld-%lld); the others wait %.1f ms a step for it", st->rank,
                 r->hosts[st->rank], 100 * (st->work - st->median) / st->median, (long long)st->steps,
                 (long long)(st->last_step - st->steps + 1), (long long)st->last_step, st->waited / (double)st->steps);
    *st = (slow_streak){.rank = -1}; /* named once per STRAGGLER_WINDOWS windows */
}

void train_ranks_add(train_job *t, const rank_step_time *d)
{
    rank_step_time *mine = &t->ranks->mine;
    mine->step_s += d->step_s;
    mine->wait_s += d->wait_s;
    mine->data_s += d->data_s;
    mine->steps += d->steps;
}

int train_ranks_gather(train_job *t, double exposed_ms, ddp_err *err)
{
    train_ranks *r = t->ranks;
    rank_step_time *mine = &r->mine;
    double steps = mine->steps > 0 ? (double)mine->steps : 1;
    rank_figures me = {.step_ms = 1e3 * mine->step_s / steps, .wait_ms = (exposed_ms + 1e3 * mine->wait_s) / steps,
                       .data_ms = 1e3 * mine->data_s / steps, .peak_bytes = (double)device_memory_peak(t->dev)};
    int64_t counted = mine->steps;
    *mine = (rank_step_time){0};
    int rc = t->ctl->ops->allgather(t->ctl, &me, r->all, RANK_FIGURES, DT_DOUBLE, NULL, err);
    if (rc != DDP_OK)
        return ddp_prefix(err, "gathering the per-rank figures");
    if (counted > 0 && t->ctl->size > 1 && window_add(r, t->ctl->size, counted, t->step) >= STRAGGLER_WINDOW_STEPS)
        judge_window(t);
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

void train_ranks_write_json(const train_job *t, FILE *f)
{
    const train_ranks *r = t->ranks;
    fputs(",\"ranks\":[", f);
    for (int i = 0; i < t->ctl->size; i++) {
        const rank_figures *x = &r->all[i];
        fprintf(f, "%s{\"rank\":%d,\"host\":\"", i ? "," : "", i);
        json_put_text(f, r->hosts[i], sizeof r->hosts[i]);
        fprintf(f, "\",\"step_ms\":%.4f,\"wait_ms\":%.4f,\"data_ms\":%.4f,\"peak_mib\":%.2f}", x->step_ms,
                x->wait_ms, x->data_ms, x->peak_bytes / (1 << 20));
    }
    fputc(']', f);
}
