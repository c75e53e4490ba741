/* train_observe.c — everything that watches a training step without being part of its work. The
 * step (train.c) only says where it is, entering and leaving named phases (train_observe.h's
 * step_phase); the observers subscribed here react: the profiler (its step window, host ranges and
 * device-stamped phases, train_profile.c), this rank's timers, whose times go to the per-rank
 * figures (train_ranks.c) and the preemption budget's mean step (train_budget.c), the count of host
 * waits for the device, the communication-exposed timer, the activity and collective labels a
 * deadline names, and the test-only sample trace and fault switch (train_fault.c). It owns the
 * watch: what the observers remember between a phase's enter and its leave, the exposed timer and
 * the host-wait count, which the progress line (train_log.c) takes. Must not change what a step
 * computes, nor read or write its data. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/activity.h"
#include "runtime/base/clock.h"
#include "runtime/device/device_prof.h"
#include "train_budget.h"
#include "train_fault.h"
#include "train_observe.h"
#include "train_profile.h"
#include "train_ranks.h"

struct train_watch {
    double work_t0, data_t0, agree_t0, wait_t0;
    int prof[STEP_PHASES];       /* the profiler's range or phase id */
    device_timer *comm_exposed;  /* compute-stream time from end of backward to reduced gradients */
    /* times the host waited for the device inside steps since the last progress line, from each
     * batch upload to the end of the step's update (log lines, evaluation and checkpoints excluded) */
    uint64_t host_waits, waits_mark;
};

int train_observe_open(train_job *t, ddp_err *err)
{
    struct train_watch *w = calloc(1, sizeof *w);
    t->watch = w;
    if (!w)
        return ddp_fail(err, DDP_ERUNTIME, "out of memory");
    return t->dev->ops->timer_create(t->dev, &w->comm_exposed, err);
}

void train_observe_close(train_job *t)
{
    struct train_watch *w = t->watch;
    if (!w)
        return;
    if (t->dev)
        t->dev->ops->timer_destroy(t->dev, w->comm_exposed);
    free(w);
    t->watch = NULL;
}

/* The profiler's names: a device-stamped phase on the compute track, or a host range. */
static const struct {
    const char *name;
    bool device;
} prof_names[STEP_PHASES] = {
    [PHASE_DATA] = {"data", false},
    [PHASE_COMPUTE] = {"forward+backward", true},
    [PHASE_GRADIENT_WAIT] = {"gradient wait", true},
    [PHASE_OPTIMIZER] = {"optimizer", true},
    [PHASE_LOG] = {"log", false},
    [PHASE_SAMPLE] = {"text sample", false},
    [PHASE_AGREE] = {"stop agreement", false},
};

static int prof_enter(train_job *t, step_phase p, ddp_err *err)
{
    struct train_watch *w = t->watch;
    if (!prof_names[p].name)
        return DDP_OK;
    if (prof_names[p].device)
        return train_phase_begin(t, prof_names[p].name, &w->prof[p], err);
    w->prof[p] = device_prof_host_begin(t->dev->prof, prof_names[p].name, PROF_TRACK_HOST);
    return DDP_OK;
}

static int prof_leave(train_job *t, step_phase p, ddp_err *err)
{
    if (!prof_names[p].name)
        return DDP_OK;
    if (prof_names[p].device)
        return train_phase_end(t, t->watch->prof[p], err);
    device_prof_host_end(t->dev->prof, t->watch->prof[p]);
    return DDP_OK;
}

/* A step's compute must not make the host wait for the device (on a GPU that stalls the queue
 * of launches): the waits between a mark and the next add are counted for the log line. */
static int mark_host_waits(train_job *t, ddp_err *err)
{
    return t->dev->ops->host_waits(t->dev, &t->watch->waits_mark, err);
}

static int add_host_waits(train_job *t, ddp_err *err)
{
    struct train_watch *w = t->watch;
    uint64_t now = 0;
    int rc = t->dev->ops->host_waits(t->dev, &now, err);
    w->host_waits += now - w->waits_mark;
    w->waits_mark = now;
    return rc;
}

/* The deadlines name the step a collective belongs to, and the stop deadline what the rank does. */
static void name_step(train_job *t)
{
    snprintf(t->ctl->phase, sizeof t->ctl->phase, "step %lld", (long long)t->step + 1);
    activity_set("training step %lld", (long long)t->step + 1);
    if (t->grad_comm != t->ctl)
        memcpy(t->grad_comm->phase, t->ctl->phase, sizeof t->ctl->phase);
}

int train_enter(train_job *t, step_phase p, ddp_err *err)
{
    struct train_watch *w = t->watch;
    int rc = DDP_OK;
    switch (p) {
    case PHASE_STEP:
        name_step(t);
        return train_profile_step_begin(t, err);
    case PHASE_WORK:
        w->work_t0 = monotonic_s();
        return DDP_OK;
    case PHASE_DATA:
        train_fault_trace(t);
        w->data_t0 = monotonic_s();
        break;
    case PHASE_COMPUTE:
    case PHASE_GRADIENT_WAIT:
        rc = mark_host_waits(t, err);
        break;
    case PHASE_AGREE:
        w->agree_t0 = monotonic_s(); /* the fault's sleep counts as this rank's work (a straggler) */
        train_fault_after_step(t);
        snprintf(t->ctl->label, sizeof t->ctl->label, "stop agreement");
        break;
    default:
        break;
    }
    if (rc == DDP_OK)
        rc = prof_enter(t, p, err);
    if (rc == DDP_OK && p == PHASE_GRADIENT_WAIT)
        rc = t->dev->ops->timer_start(t->dev, w->comm_exposed, err);
    if (p == PHASE_AGREE)
        w->wait_t0 = monotonic_s(); /* the agreement itself is time waited for the others */
    return rc;
}

/* The step's own work as the per-rank figures and the budget's mean step count it: from its start
 * to the end of its update, and its stop agreement; evaluation, log line and sample left out. */
static void count_work(train_job *t, double since, int64_t steps)
{
    double s = monotonic_s() - since;
    train_ranks_add(t, &(rank_step_time){.step_s = s, .steps = steps});
    train_budget_count_work(t, s);
}

int train_leave(train_job *t, step_phase p, ddp_err *err)
{
    struct train_watch *w = t->watch;
    int rc = DDP_OK;
    if (p == PHASE_GRADIENT_WAIT)
        rc = t->dev->ops->timer_stop(t->dev, w->comm_exposed, err);
    if (p == PHASE_AGREE)
        train_ranks_add(t, &(rank_step_time){.wait_s = monotonic_s() - w->wait_t0});
    if (p == PHASE_DATA)
        train_ranks_add(t, &(rank_step_time){.data_s = monotonic_s() - w->data_t0});
    if (rc == DDP_OK)
        rc = prof_leave(t, p, err);
    switch (p) {
    case PHASE_STEP:
        return rc == DDP_OK ? train_profile_step_end(t, err) : rc;
    case PHASE_WORK:
        count_work(t, w->work_t0, 1);
        break;
    case PHASE_COMPUTE:
    case PHASE_OPTIMIZER:
        return rc == DDP_OK ? add_host_waits(t, err) : rc;
    case PHASE_AGREE:
        t->ctl->label[0] = '\0';
        count_work(t, w->agree_t0, 0);
        break;
    default:
        break;
    }
    return rc;
}

int train_observe_take_exposed_ms(train_job *t, double *ms, ddp_err *err)
{
    return t->dev->ops->timer_take_ms(t->dev, t->watch->comm_exposed, ms, err);
}

uint64_t train_observe_take_host_waits(train_job *t)
{
    uint64_t n = t->watch->host_waits;
    t->watch->host_waits = 0;
    return n;
}
