/* worker.h — a background thread that waits for work or a stop request: its start, the mutex and
 * condition variable it shares with its owner, the waits, the stop request and the join.
 *
 * The owner embeds a worker, keeps the state it shares with the thread (a job waiting, a result,
 * a slot ring) under the worker's mutex, and loops over its own predicate in the thread's body:
 *     worker_lock(w);
 *     while (!job && !worker_stopping(w))
 *         worker_wait(w);
 * A start may run a first step on the new thread (a setup, e.g. selecting the thread's GPU) whose
 * failure is the start's failure: the thread has then been joined and its body never runs.
 * Stopping requests the stop, wakes every waiter and joins; what the body does with a job it holds
 * when told to stop (finish it, drop it) is the owner's choice, and the join waits for it.
 *
 * This module must not decide what the work is, and leaves signal masks alone: the thread
 * inherits its starter's mask, and so do the commands it runs. */
#ifndef DDP_WORKER_H
#define DDP_WORKER_H

#include <pthread.h>
#include <stdbool.h>

#include "runtime/base/err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct worker worker;
/* The thread's first step (may be NULL); a non-zero return, with err filled, fails the start. */
typedef int (*worker_setup_fn)(void *arg, ddp_err *err);
/* The thread's body; the thread ends when it returns (it may return before any stop request). */
typedef void (*worker_body_fn)(worker *w, void *arg);

struct worker {
    pthread_mutex_t mu;   /* guards the fields below and whatever the owner shares with its thread */
    pthread_cond_t cv;    /* on CLOCK_MONOTONIC; worker_wake, worker_stop and the start broadcast it */
    pthread_t thread;
    const char *name;     /* "checkpoint writer": names it in errors */
    worker_setup_fn setup;
    worker_body_fn body;
    void *arg;
    int start_state;      /* 0 starting, 1 set up, -1 setup failed (start_err) */
    ddp_err start_err;
    bool stop;            /* a stop was requested */
    bool joinable;        /* started and not yet joined */
};

/* The mutex and condition variable, before the thread starts (the owner may lock them at once). */
void worker_init(worker *w);
/* Stops the thread if it runs, then destroys the mutex and condition variable. */
void worker_destroy(worker *w);

/* Starts body(w, arg) on a thread of its own, after setup(arg) has succeeded there; returns once
 * setup has run. A failed pthread_create or setup returns its error (name first for the former)
 * with the thread joined. Not while the mutex is held; not on a running worker. */
int worker_start(worker *w, const char *name, worker_setup_fn setup, worker_body_fn body, void *arg, ddp_err *err);
/* Requests the stop, wakes every waiter and joins the thread. Returns at once when no thread was
 * started or it has been joined already (a second stop). Not while the mutex is held, and not from
 * the worker's own thread. */
void worker_stop(worker *w);

void worker_lock(worker *w);
void worker_unlock(worker *w);
/* The following take the mutex held. */
/* Wakes every thread in worker_wait / worker_nap (the worker, or an owner waiting for a result). */
void worker_wake(worker *w);
/* Whether a stop was requested. */
bool worker_stopping(const worker *w);
/* Sleeps until worker_wake or worker_stop (or spuriously, as a condition variable may): callers
 * loop over their own predicate. Any thread may wait, the owner's included. */
void worker_wait(worker *w);
/* As worker_wait, but for at most seconds (clamped as worker_nap's): a caller that must also act
 * when nothing wakes it (a watch over the work's progress) loops over its predicate and the clock. */
void worker_wait_for(worker *w, double seconds);
/* Sleeps for seconds (at most WORKER_NAP_MAX_S, a year) unless a stop is requested first; false
 * when one was (before or during). */
#define WORKER_NAP_MAX_S (365.0 * 86400)
bool worker_nap(worker *w, double seconds);

#ifdef __cplusplus
}
#endif

#endif
