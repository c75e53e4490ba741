/* train_fault.c — the training job's test-only hooks: the sample trace, and the loop's kinds of the
 * fault switch DDP_TEST_FAULT=KIND:RANK:STEP[:SECONDS] (parsed by runtime/base/test_fault.c), so
 * integration tests hit exact, reproducible points of a training job. A fault is active only on
 * the first attempt of a job (DDPRUN_RESTART_COUNT unset or 0) and only on rank RANK (RANK -1: on
 * every rank).
 *
 * After optimizer step STEP, before the next collective: `kill` SIGKILLs the rank, `stop` acts as
 * if that rank alone received the stop signal, `exit` exits with status 3, `sigstop` stops the
 * process (SIGSTOP), `sleep` sleeps SECONDS, `quit` exits with status 0 without MPI_Finalize,
 * `kill-launcher` SIGKILLs ddprun (its DDPRUN_PID).
 * After every optimizer step from STEP on: `slow` sleeps SECONDS, a rank slower than the others
 * (a straggler, train_ranks.c).
 * While the data loads: `setup-sleep` sleeps SECONDS (STEP is ignored): a job held in setup, out
 * of the stop agreement's reach.
 * During optimizer step STEP, its collectives issued: `fail` makes the step fail with an error.
 * During optimizer step STEP: `nan` / `inf` make one of the rank's gradients NaN / +inf as backward
 * finishes it, before its bucket is reduced, as a bad batch would (every rank then averages it in).
 * DDP_TEST_TRACE_DIR makes each rank append "epoch index" for every sample it trains on to
 * DIR/trace-w{WORLD}-r{RANK}.txt, so tests can prove each sample of an interrupted epoch is used
 * exactly once. It owns the hooks' state (struct train_fault), made only when one is asked for.
 * Must not change anything when neither DDP_TEST_FAULT nor DDP_TEST_TRACE_DIR is set. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/test_fault.h"
#include "train_fault.h"
#include "train_replica.h"
#include "train_stop.h"

struct train_fault {
    FILE *trace;        /* DDP_TEST_TRACE_DIR's file, NULL when unset */
    float value;        /* nan/inf: the value the next finished gradient gets, 0 when none is due */
};

/* DDP_TEST_FAULT (runtime/base/test_fault.h) when it is aimed at this rank (RANK -1: every rank);
 * a job's restarts run clean (test_fault_get). */
static bool fault_here(const train_job *t, test_fault *f)
{
    return test_fault_get(f) && (f->rank == t->ctl->rank || f->rank == -1);
}

int train_fault_open(train_job *t, ddp_err *err)
{
    test_fault f;
    const char *dir = getenv("DDP_TEST_TRACE_DIR");
    if (!dir && !fault_here(t, &f))
        return DDP_OK;
    t->fault = calloc(1, sizeof *t->fault);
    if (!t->fault)
        return ddp_fail(err, DDP_ERUNTIME, "out of memory");
    if (!dir)
        return DDP_OK;
    char path[CFG_PATH_MAX];
    snprintf(path, sizeof path, "%s/trace-w%d-r%d.txt", dir, t->ctl->size, t->ctl->rank);
    t->fault->trace = fopen(path, "ae");
    return t->fault->trace ? DDP_OK : ddp_fail(err, DDP_ERUNTIME, "cannot open %s", path);
}

void train_fault_close(train_job *t)
{
    if (!t->fault)
        return;
    if (t->fault->trace)
        fclose(t->fault->trace);
    free(t->fault);
    t->fault = NULL;
}

void train_fault_trace(const train_job *t)
{
    if (!t->fault || !t->fault->trace)
        return;
    int64_t rows = 0;
    const int64_t *idx = train_staged(t, &rows);
    for (int64_t i = 0; i < rows; i++)
        fprintf(t->fault->trace, "%lld %lld\n", (long long)t->epoch, (long long)idx[i]);
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
    if (t->fault->value != 0 && count > 0) {
        ddp_err ignored;
        t->dev->ops->fill(t->dev, TENSOR_F32, model_grad(t->m, offset), 1, t->fault->value, &ignored);
        t->fault->value = 0;
    }
    reducer_grad_ready(t->red, offset, count);
}

int train_fault_fail_step(const train_job *t, ddp_err *err)
{
    test_fault f;
    if (!t->fault || !fault_here(t, &f) || strcmp(f.kind, "fail") != 0 || f.step != t->step + 1)
        return DDP_OK;
    return ddp_fail(err, DDP_ERUNTIME, "DDP_TEST_FAULT fail: step %lld failed with its gradients' collectives in "
                    "flight", (long long)f.step);
}

void train_fault_in_eval(const train_job *t)
{
    test_fault f;
    if (t->fault && fault_here(t, &f) && strcmp(f.kind, "slow-eval") == 0 && t->step >= f.step)
        test_fault_sleep(&f);
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
    if (!t->fault || !fault_here(t, &f) || f.step != t->step + 1)
        return reducer_grad_ready;
    if (strcmp(f.kind, "nan") == 0)
        t->fault->value = NAN;
    else if (strcmp(f.kind, "inf") == 0)
        t->fault->value = INFINITY;
    else
        return reducer_grad_ready;
    *ctx = t;
    return poison_then_ready;
}
