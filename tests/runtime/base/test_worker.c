/* test_worker.c — runtime/base/worker.c: a worker started and stopped with no work; stopped while
 * busy (the stop reaches a body that waits inside its job, and the join waits for the job to end);
 * stopped twice, and never started; a setup that fails on the thread (the start returns its
 * error, the thread joined, the body never run); a setup that runs on the new thread before the
 * start returns; naps cut short by a stop; timed waits ended by a wake or their time; a body
 * that ends by itself. Ordering is by the worker's own condition variable, never by sleeping. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "tests/check.h"
#include "runtime/base/worker.h"

/* A one-job queue like the checkpoint writer's: the body waits for a job or a stop. */
typedef struct queue {
    worker w;
    int jobs_waiting;
    int jobs_done;
    bool in_job;            /* the body is inside a job */
    bool job_waits_for_stop; /* a job returns only once a stop was requested */
    bool saw_stop_in_job;
    int body_runs, body_ends;
} queue;

static void queue_body(worker *w, void *arg)
{
    queue *q = arg;
    worker_lock(w);
    q->body_runs++;
    for (;;) {
        while (!q->jobs_waiting && !worker_stopping(w))
            worker_wait(w);
        if (!q->jobs_waiting)
            break;
        q->jobs_waiting--;
        q->in_job = true;
        worker_wake(w);
        while (q->job_waits_for_stop && !worker_stopping(w))
            worker_wait(w);
        q->saw_stop_in_job = worker_stopping(w);
        worker_unlock(w); /* the job's work happens outside the mutex */
        worker_lock(w);
        q->in_job = false;
        q->jobs_done++;
        worker_wake(w);
    }
    q->body_ends++;
    worker_unlock(w);
}

static void submit(queue *q)
{
    worker_lock(&q->w);
    q->jobs_waiting++;
    worker_wake(&q->w);
    worker_unlock(&q->w);
}

static void test_no_work(void)
{
    queue q = {0};
    worker_init(&q.w);
    ddp_err err = {0};
    CHECK_EQ_INT(worker_start(&q.w, "test worker", NULL, queue_body, &q, &err), DDP_OK);
    worker_stop(&q.w);
    CHECK_EQ_INT(q.body_runs, 1);
    CHECK_EQ_INT(q.body_ends, 1);
    CHECK_EQ_INT(q.jobs_done, 0);
    worker_destroy(&q.w);
}

/* Jobs submitted and waited for by the owner on the same condition variable. */
static void test_jobs(void)
{
    queue q = {0};
    worker_init(&q.w);
    ddp_err err = {0};
    CHECK_EQ_INT(worker_start(&q.w, "test worker", NULL, queue_body, &q, &err), DDP_OK);
    for (int i = 0; i < 100; i++) {
        submit(&q);
        worker_lock(&q.w);
        while (q.jobs_done < i + 1)
            worker_wait(&q.w);
        worker_unlock(&q.w);
    }
    CHECK_EQ_INT(q.jobs_done, 100);
    worker_destroy(&q.w); /* stops the thread first */
    CHECK_EQ_INT(q.body_ends, 1);
}

static void test_stop_while_busy(void)
{
    queue q = {.job_waits_for_stop = true};
    worker_init(&q.w);
    ddp_err err = {0};
    CHECK_EQ_INT(worker_start(&q.w, "test worker", NULL, queue_body, &q, &err), DDP_OK);
    submit(&q);
    worker_lock(&q.w);
    while (!q.in_job && !q.jobs_done)
        worker_wait(&q.w);
    worker_unlock(&q.w);
    worker_stop(&q.w); /* the job returns once it sees the stop; the join waits for that */
    CHECK(q.saw_stop_in_job, "the stop request did not reach the job");
    CHECK_EQ_INT(q.jobs_done, 1);
    CHECK(!q.in_job, "worker_stop returned while the job was still running");
    CHECK_EQ_INT(q.body_ends, 1);
    worker_destroy(&q.w);
}

static void test_stop_twice(void)
{
    queue q = {0};
    worker_init(&q.w);
    worker_stop(&q.w); /* never started: nothing to join */
    ddp_err err = {0};
    CHECK_EQ_INT(worker_start(&q.w, "test worker", NULL, queue_body, &q, &err), DDP_OK);
    worker_stop(&q.w);
    worker_stop(&q.w); /* joined already: returns at once */
    CHECK_EQ_INT(q.body_runs, 1);
    CHECK_EQ_INT(q.body_ends, 1);
    worker_destroy(&q.w); /* a third stop, then the mutex and condition variable go */
}

typedef struct setup_probe {
    bool fail;
    pthread_t ran_on;
    int setups, bodies;
} setup_probe;

static int probe_setup(void *arg, ddp_err *err)
{
    setup_probe *p = arg;
    p->setups++;
    p->ran_on = pthread_self();
    return p->fail ? ddp_fail(err, DDP_EUSAGE, "probe setup refused on purpose") : DDP_OK;
}

static void probe_body(worker *w, void *arg)
{
    setup_probe *p = arg;
    worker_lock(w);
    p->bodies++;
    while (!worker_stopping(w))
        worker_wait(w);
    worker_unlock(w);
}

/* The setup's failure is the start's: its code and message, the thread joined, no body. */
static void test_setup_fails(void)
{
    setup_probe p = {.fail = true};
    worker w;
    worker_init(&w);
    ddp_err err = {0};
    CHECK_EQ_INT(worker_start(&w, "test worker", probe_setup, probe_body, &p, &err), DDP_EUSAGE);
    CHECK_STR_CONTAINS(err.msg, "probe setup refused on purpose");
    CHECK_EQ_INT(p.setups, 1); /* read without the mutex: the thread has been joined */
    CHECK_EQ_INT(p.bodies, 0);
    CHECK(!pthread_equal(p.ran_on, pthread_self()), "the setup ran on the starter's thread");
    CHECK(!w.joinable, "a failed start left a thread to join");
    worker_stop(&w); /* nothing to join */
    worker_destroy(&w);
}

/* A setup runs on the new thread and has run when the start returns. */
static void test_setup_runs_first(void)
{
    setup_probe p = {0};
    worker w;
    worker_init(&w);
    ddp_err err = {0};
    CHECK_EQ_INT(worker_start(&w, "test worker", probe_setup, probe_body, &p, &err), DDP_OK);
    worker_lock(&w);
    CHECK_EQ_INT(p.setups, 1);
    CHECK(!pthread_equal(p.ran_on, pthread_self()), "the setup ran on the starter's thread");
    worker_unlock(&w);
    worker_destroy(&w);
    CHECK_EQ_INT(p.bodies, 1);
}

typedef struct napper {
    int naps_completed;
    bool last_nap;
    double nap_s;
} napper;

static void nap_body(worker *w, void *arg)
{
    napper *n = arg;
    worker_lock(w);
    while ((n->last_nap = worker_nap(w, n->nap_s)))
        n->naps_completed++;
    worker_unlock(w);
}

/* A nap of an hour ends at the stop (or this test times out) and says it was stopped; so does one
 * longer than a timespec's nanoseconds hold (1e10 s), which must not return at once, again and
 * again (a poll loop spinning). */
static void test_nap_stopped(double nap_s)
{
    napper n = {.nap_s = nap_s};
    worker w;
    worker_init(&w);
    ddp_err err = {0};
    CHECK_EQ_INT(worker_start(&w, "test worker", NULL, nap_body, &n, &err), DDP_OK);
    nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    worker_stop(&w);
    CHECK(n.naps_completed == 0, "%d naps of %g s completed in 50 ms", n.naps_completed, nap_s);
    CHECK(!n.last_nap, "a nap cut short by the stop returned true");
    worker_destroy(&w);
}

/* A nap that runs its course says so, and wakes meant for others do not end it early. */
static void test_nap_elapses(void)
{
    worker w;
    worker_init(&w);
    worker_lock(&w);
    CHECK(worker_nap(&w, 0.001), "a 1 ms nap without a stop returned false");
    CHECK(worker_nap(&w, 0), "a zero nap without a stop returned false");
    CHECK(worker_nap(&w, -1), "a nap already past its deadline returned false");
    worker_unlock(&w);
    worker_destroy(&w);
}

/* A timed wait ends at a wake long before its time (an hour: else this test times out) and, with
 * nothing to wake it, when its time is up, however that time is given. The body wakes the owner
 * only once the owner, holding the mutex from its go until its wait, is waiting. */
typedef struct waker {
    bool go, woken;
} waker;

static void waking_body(worker *w, void *arg)
{
    waker *k = arg;
    worker_lock(w);
    while (!k->go)
        worker_wait(w);
    k->woken = true;
    worker_wake(w);
    worker_unlock(w);
}

static void test_wait_for(void)
{
    waker k = {0};
    worker w;
    worker_init(&w);
    ddp_err err = {0};
    CHECK_EQ_INT(worker_start(&w, "test worker", NULL, waking_body, &k, &err), DDP_OK);
    worker_lock(&w);
    k.go = true;
    worker_wake(&w);
    worker_wait_for(&w, 3600);
    while (!k.woken) /* a spurious wake-up */
        worker_wait_for(&w, 3600);
    worker_wait_for(&w, 0.001);
    worker_wait_for(&w, 0);
    worker_wait_for(&w, -1);
    worker_wait_for(&w, NAN);
    worker_unlock(&w);
    worker_stop(&w);
    worker_destroy(&w);
}

/* A body that returns on its own (the preemption watch after a notice) is joined by the stop. */
static void quick_body(worker *w, void *arg)
{
    (void)w;
    *(int *)arg += 1;
}

static void test_body_ends_itself(void)
{
    int runs = 0;
    worker w;
    worker_init(&w);
    ddp_err err = {0};
    CHECK_EQ_INT(worker_start(&w, "test worker", NULL, quick_body, &runs, &err), DDP_OK);
    worker_stop(&w);
    CHECK_EQ_INT(runs, 1);
    worker_destroy(&w);
}

int main(void)
{
    test_no_work();
    test_jobs();
    test_stop_while_busy();
    test_stop_twice();
    test_setup_fails();
    test_setup_runs_first();
    test_nap_stopped(3600);
    test_nap_stopped(1e10);
    test_nap_elapses();
    test_wait_for();
    test_body_ends_itself();
    return check_done("test_worker");
}
