/* train_observe.c — everything that watches a training step without being part of its work. The
 * step (train.c) only says where it is, entering and leaving named phases (train_job.h's
 * step_phase); the observers subscribed here react: the profiler (its step window, host ranges and
 * device-stamped phases, train_profile.c), this rank's timers for the per-rank figures
 * (train_ranks.c), the count of host waits for the device, the communication-exposed timer, the
 * activity and collective labels a deadline names, and the test-only sample trace and fault switch
 * (train_fault.c). Must not change what a step computes, nor read or write its data. */
#include <stdio.h>
#include <string.h>

#include "runtime/base/activity.h"
#include "runtime/base/clock.h"
#include "train_job.h"

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
    step_watch *w = &t->watch;
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
        return train_phase_end(t, t->watch.prof[p], err);
    device_prof_host_end(t->dev->prof, t->watch.prof[p]);
    return DDP_OK;
}

/* A step's compute must not make the host wait for the device (on a GPU that stalls the queue
 * of launches): the waits between a mark and the next add are counted for the log line. */
static int mark_host_waits(train_job *t, ddp_err *err)
{
    return t->dev->ops->host_waits(t->dev, &t->waits_mark, err);
}

static int add_host_waits(train_job *t, ddp_err *err)
{
    uint64_t now = 0;
    int rc = t->dev->ops->host_waits(t->dev, &now, err);
    t->step_host_waits += now - t->waits_mark;
    t->waits_mark = now;
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

static void trace_samples(const train_job *t)
{
    for (int64_t i = 0; t->trace && i < t->staged_rows; i++)
        fprintf(t->trace, "%lld %lld\n", (long long)t->epoch, (long long)t->idx[i]);
}

int train_enter(train_job *t, step_phase p, ddp_err *err)
{
    step_watch *w = &t->watch;
    int rc = DDP_OK;
    switch (p) {
    case PHASE_STEP:
        name_step(t);
        return train_profile_step_begin(t, err);
    case PHASE_WORK:
        w->work_t0 = monotonic_s();
        return DDP_OK;
    case PHASE_DATA:
        trace_samples(t);
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
        rc = t->dev->ops->timer_start(t->dev, t->comm_exposed, err);
    if (p == PHASE_AGREE)
        w->wait_t0 = monotonic_s(); /* the agreement itself is time waited for the others */
    return rc;
}

/* The step's own work as the per-rank figures count it: from its start to the end of its update,
 * and its stop agreement; evaluation, log line and sample left out. */
static void count_work(train_job *t, double since)
{
    double s = monotonic_s() - since;
    t->mine.step_s += s;
    t->run_step_s += s;
}

int train_leave(train_job *t, step_phase p, ddp_err *err)
{
    step_watch *w = &t->watch;
    int rc = DDP_OK;
    if (p == PHASE_GRADIENT_WAIT)
        rc = t->dev->ops->timer_stop(t->dev, t->comm_exposed, err);
    if (p == PHASE_AGREE)
        t->mine.wait_s += monotonic_s() - w->wait_t0;
    if (p == PHASE_DATA)
        t->mine.data_s += monotonic_s() - w->data_t0;
    if (rc == DDP_OK)
        rc = prof_leave(t, p, err);
    switch (p) {
    case PHASE_STEP:
        return rc == DDP_OK ? train_profile_step_end(t, err) : rc;
    case PHASE_WORK:
        count_work(t, w->work_t0);
        t->mine.steps++;
        break;
    case PHASE_COMPUTE:
    case PHASE_OPTIMIZER:
        return rc == DDP_OK ? add_host_waits(t, err) : rc;
    case PHASE_AGREE:
        t->ctl->label[0] = '\0';
        count_work(t, w->agree_t0);
        break;
    default:
        break;
    }
    return rc;
}
