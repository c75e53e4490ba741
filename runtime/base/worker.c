/* worker.c — a background thread's start, waits, stop and join (worker.h). It owns the start
 * handshake (the starter learns the setup's outcome before worker_start returns) and the deadline
 * arithmetic of timed waits; it must not know what any worker's work is. */
#include "runtime/base/worker.h"

#include <string.h>
#include <time.h>

void worker_init(worker *w)
{
    memset(w, 0, sizeof *w);
    pthread_mutex_init(&w->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* naps do not stretch or shrink with the wall clock */
    pthread_cond_init(&w->cv, &ca);
    pthread_condattr_destroy(&ca);
}

void worker_destroy(worker *w)
{
    worker_stop(w);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    ddp_err e = {0};
    int rc = w->setup ? w->setup(w->arg, &e) : DDP_OK;
    pthread_mutex_lock(&w->mu);
    w->start_state = rc == DDP_OK ? 1 : -1;
    w->start_err = e;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    if (rc == DDP_OK)
        w->body(w, w->arg);
    return NULL;
}

int worker_start(worker *w, const char *name, worker_setup_fn setup, worker_body_fn body, void *arg, ddp_err *err)
{
    w->name = name;
    w->setup = setup;
    w->body = body;
    w->arg = arg;
    w->start_state = 0;
    w->stop = false;
    int rc = pthread_create(&w->thread, NULL, worker_main, w);
    if (rc != 0)
        return ddp_fail(err, DDP_ERUNTIME, "%s: pthread_create: %s", name, strerror(rc));
    w->joinable = true;
    pthread_mutex_lock(&w->mu);
    while (w->start_state == 0)
        pthread_cond_wait(&w->cv, &w->mu);
    bool started = w->start_state > 0;
    pthread_mutex_unlock(&w->mu);
    if (started)
        return DDP_OK;
    worker_stop(w);
    if (err)
        *err = w->start_err;
    return w->start_err.code ? w->start_err.code : DDP_ERUNTIME;
}

void worker_stop(worker *w)
{
    if (!w->joinable)
        return;
    pthread_mutex_lock(&w->mu);
    w->stop = true;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    w->joinable = false;
}

void worker_lock(worker *w) { pthread_mutex_lock(&w->mu); }
void worker_unlock(worker *w) { pthread_mutex_unlock(&w->mu); }
void worker_wake(worker *w) { pthread_cond_broadcast(&w->cv); }
bool worker_stopping(const worker *w) { return w->stop; }
void worker_wait(worker *w) { pthread_cond_wait(&w->cv, &w->mu); }

/* The CLOCK_MONOTONIC time seconds from now, seconds clamped to [0, WORKER_NAP_MAX_S] (past it
 * the nanoseconds would overflow; a NaN or negative wait is one already over). */
static struct timespec after_s(double seconds)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    if (!(seconds > 0))
        seconds = 0;
    if (seconds > WORKER_NAP_MAX_S)
        seconds = WORKER_NAP_MAX_S;
    long long ns = until.tv_nsec + (long long)(seconds * 1e9);
    until.tv_sec += (time_t)(ns / 1000000000LL);
    until.tv_nsec = (long)(ns % 1000000000LL);
    return until;
}

void worker_wait_for(worker *w, double seconds)
{
    struct timespec until = after_s(seconds);
    (void)pthread_cond_timedwait(&w->cv, &w->mu, &until);
}

bool worker_nap(worker *w, double seconds)
{
    struct timespec until = after_s(seconds);
    while (!w->stop && pthread_cond_timedwait(&w->cv, &w->mu, &until) == 0) {
    }
    return !w->stop;
}
