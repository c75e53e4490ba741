/* train_fault.c — the training loop's kinds of the test-only fault switch,
 * DDP_TEST_FAULT=KIND:RANK:STEP[:SECONDS] (parsed by runtime/base/test_fault.c), so integration
 * tests hit exact, reproducible points of a training job. Active only on the first attempt of a job
 * (DDPRUN_RESTART_COUNT unset or 0) and only on rank RANK (RANK -1: on every rank).
 *
 * After optimizer step STEP, before the next collective: `kill` SIGKILLs the rank, `stop` acts as
 * if that rank alone received the stop signal, `exit` exits with status 3, `sigstop` stops the
 * process (SIGSTOP), `sleep` sleeps SECONDS, `quit` exits with status 0 without MPI_Finalize,
 * `kill-launcher` SIGKILLs ddprun (its DDPRUN_PID).
 * After every optimizer step from STEP on: `slow` sleeps SECONDS, a rank slower than the others
 * (a straggler, train_ranks.c).
 * While the data loads: `setup-sleep` sleeps SECONDS (STEP is ignored): a job held in setup, out
 * of the stop agreement's reach.
 * During optimizer step STEP: `nan` / `inf` make one of the rank's gradients NaN / +inf as backward
 * finishes it, before its bucket is reduced, as a bad batch would (every rank then averages it in).
 * Must not change anything when DDP_TEST_FAULT is unset. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/test_fault.h"
#include "train.h"
#include "train_job.h"

/* DDP_TEST_FAULT (runtime/base/test_fault.h) when it is aimed at this rank (RANK -1: every rank);
 * a job's restarts run clean (test_fault_get). */
static bool fault_here(const train_job *t, test_fault *f)
{
    return test_fault_get(f) && (f->rank == t->ctl->rank || f->rank == -1);
}

void train_fault_after_step(const train_job *t)
{
    test_fault f;
    if (!fault_here(t, &f))
        return;
    if (strcmp(f.kind, "slow") == 0 && t->step >= f.step)
        test_fault_sleep(&f);
    if (f.step != t->step)
        return;
    const char *launcher = getenv("DDPRUN_PID");
    if (strcmp(f.kind, "kill") == 0)
        raise(SIGKILL);
    else if (strcmp(f.kind, "stop") == 0)
        train_stop_requested = TRAIN_STOP_SIGNAL;
    else if (strcmp(f.kind, "exit") == 0)
        exit(3);
    else if (strcmp(f.kind, "sigstop") == 0)
        raise(SIGSTOP);
    else if (strcmp(f.kind, "sleep") == 0)
        test_fault_sleep(&f);
    else if (strcmp(f.kind, "quit") == 0)
        _exit(0);
    else if (strcmp(f.kind, "kill-launcher") == 0 && launcher && atoi(launcher) > 1)
        kill((pid_t)atoi(launcher), SIGKILL);
}

/* The first range backward reports gets the bad value in its first element, then the reducer
 * hears of it as usual: the value is in place before the bucket's all-reduce can start. */
static void poison_then_ready(void *ctx, size_t offset, size_t count)
{
    train_job *t = ctx;
    if (t->fault_value != 0 && count > 0) {
        ddp_err ignored;
        t->dev->ops->fill(t->dev, TENSOR_F32, t->m->grads + offset, 1, t->fault_value, &ignored);
        t->fault_value = 0;
    }
    reducer_grad_ready(t->red, offset, count);
}

void train_fault_in_setup(const train_job *t)
{
    test_fault f;
    if (fault_here(t, &f) && strcmp(f.kind, "setup-sleep") == 0)
        test_fault_sleep(&f);
}

grad_ready_fn train_fault_grad_ready(train_job *t, void **ctx)
{
    test_fault f;
    *ctx = t->red;
    if (!fault_here(t, &f) || f.step != t->step + 1)
        return reducer_grad_ready;
    if (strcmp(f.kind, "nan") == 0)
        t->fault_value = NAN;
    else if (strcmp(f.kind, "inf") == 0)
        t->fault_value = INFINITY;
    else
        return reducer_grad_ready;
    *ctx = t;
    return poison_then_ready;
}
