/* comm_nccl_watchdog.c — the NCCL backend's watchdog: a host thread that turns a hang into a
 * prompt, named failure.
 *
 * Every ddp.timeout_s/20 (10 ms .. 1 s) it retires completed collectives (their completion event
 * fired), asks NCCL for an asynchronous error, and measures how long the oldest unfinished
 * collective has gone without progress (since it was issued, or since the last one completed,
 * whichever is later). On an error or after ddp.timeout_s without progress it prints which rank,
 * which collective (kind, sequence number, the caller's label such as the bucket, count, type),
 * calls ncclCommAbort and ends the process with DDP_ERUNTIME, so mpirun/ddprun end the job; an
 * abort that has not returned after min(ddp.timeout_s, 30 s) is given up on, and the process
 * ends all the same. While the owner is inside an NCCL call on the communicator (one NCCL may
 * hold on the host, waiting for a peer to connect) it ends the process without the abort, which
 * NCCL allows only from the thread that uses a blocking communicator. Once the communicator's
 * teardown begins it stops looking at collectives and only ends the process if the teardown
 * overruns its deadline.
 * A monitor thread watches the watchdog itself, as a CUDA or NCCL call can hang on a wedged GPU
 * (an event query included) and the watchdog then holds its mutex, which the owner's next
 * collective and teardown wait for: it makes no CUDA or NCCL call and takes none of the
 * communicator's locks, and ends the process when the watchdog has finished no pass for
 * ddp.timeout_s + the abort's limit, or when the teardown's deadline passed unseen (its message,
 * like every exit's here, goes through stdio, which a stdout nobody reads can hold).
 * Its first call selects the communicator's GPU (a thread's current device is its own; a thread
 * that never chose one works on GPU 0); starting fails with that call's error.
 * It makes no MPI calls (MPI may be initialised FUNNELED: runtime/base/mpi_thread.h) and never
 * touches collective buffers. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "runtime/base/clock.h"
#include "runtime/base/log.h"
#include "comm_nccl_internal.h"

typedef struct scan {
    int oldest;                /* slot of the oldest unfinished collective, -1 if none */
    bool progressed;           /* some collective completed */
    cudaError_t failure;       /* an event query failed: the device or stream is broken */
    int failed_slot;           /* the oldest such collective (slots are reused: not the lowest slot) */
} scan;

static scan scan_slots(ncclcomm_impl *im)
{
    scan s = {.oldest = -1, .failure = cudaSuccess, .failed_slot = -1};
    for (int i = 0; i < NCCLCOMM_SLOTS; i++) {
        ncclcomm_slot *sl = &im->slots[i];
        int st = atomic_load(&sl->state);
        if (st == SLOT_FREE)
            continue;
        if (st == SLOT_LAUNCHED) {
            cudaError_t e = cuda_event_query(sl->done);
            if (e == cudaSuccess) {
                atomic_store(&sl->state, SLOT_FREE);
                s.progressed = true;
                continue;
            }
            if (e != cudaErrorNotReady &&
                (s.failure == cudaSuccess || sl->fp.seq < im->slots[s.failed_slot].fp.seq))
                s.failure = e, s.failed_slot = i;
        }
        if (s.oldest < 0 || sl->fp.seq < im->slots[s.oldest].fp.seq)
            s.oldest = i;
    }
    return s;
}

static void describe_slot(const ncclcomm_slot *sl, char *out, size_t len)
{
    char what[160];
    ncclcomm_fingerprint_describe(&sl->fp, what, sizeof what);
    snprintf(out, len, "%s #%llu (%s%s%s)", ncclcomm_kind_name((ncclcomm_kind)sl->fp.kind), (unsigned long long)sl->fp.seq,
             sl->label, sl->label[0] ? ", " : "", what);
}

/* ncclCommAbort on a thread of its own, so the watchdog can stop waiting for it. Static: if the
 * call never returns, the process ends with the thread still holding it. */
static struct {
    ncclComm_t nccl;
    int device;
    atomic_bool done;
    ncclResult_t rc;
} abort_call;

static void *abort_main(void *arg)
{
    (void)arg;
    cudaError_t e = cudaSetDevice(abort_call.device); /* NCCL selects it too; ours is for safety */
    if (e != cudaSuccess)
        log_warn("NCCL watchdog: cudaSetDevice(%d) before ncclCommAbort: %s", abort_call.device, cudaGetErrorString(e));
    abort_call.rc = ncclCommAbort(abort_call.nccl);
    atomic_store(&abort_call.done, true);
    return NULL;
}

/* ncclCommAbort, waited for at most limit_s (on a wedged GPU it can hang like anything else). */
static bool abort_within(ncclcomm_impl *im, double limit_s, ncclResult_t *rc)
{
    abort_call.nccl = im->nccl;
    abort_call.device = im->device;
    atomic_store(&abort_call.done, false);
    pthread_t t;
    if (pthread_create(&t, NULL, abort_main, NULL) != 0) { /* called here, a hang would keep the job */
        log_warn("NCCL watchdog: no thread for ncclCommAbort, which may hang on a wedged GPU; exiting without it");
        *rc = ncclSuccess;
        return true;
    }
    pthread_detach(t);
    double deadline = monotonic_s() + limit_s;
    while (!atomic_load(&abort_call.done) && monotonic_s() < deadline)
        usleep(1000);
    *rc = abort_call.rc;
    return atomic_load(&abort_call.done);
}

/* Whether the owner is inside an NCCL call on the communicator now (a collective being issued): a
 * blocking communicator's call may wait on the host for a peer (NCCL connects lazily, at a pair's
 * first collective), and ncclCommAbort from another thread would free what that call uses. */
static bool owner_in_call(ncclcomm_impl *im)
{
    for (int i = 0; i < NCCLCOMM_SLOTS; i++)
        if (atomic_load(&im->slots[i].state) == SLOT_ISSUING)
            return true;
    return false;
}

/* Prints, aborts the communicator (for at most im->abort_limit_s; not under the owner's NCCL call)
 * and ends the process. Called with the watchdog's mutex held. */
__attribute__((noreturn)) static void abort_job(ncclcomm_impl *im, const char *why)
{
    atomic_store(&im->aborting, true);
    log_error(COMM_WATCHDOG_ABORT "%s" COMM_WATCHDOG_ABORT_END, why);
    ncclResult_t rc = ncclSuccess;
    if (owner_in_call(im))
        log_error("NCCL watchdog: this rank is inside an NCCL call on the communicator, which ncclCommAbort would "
                  "free under it; exiting without the abort");
    else if (!abort_within(im, im->abort_limit_s, &rc))
        log_error("NCCL watchdog: ncclCommAbort did not return within %g s (a wedged GPU?); exiting without it",
                  im->abort_limit_s);
    else if (rc != ncclSuccess)
        log_warn("NCCL watchdog: ncclCommAbort: %s", ncclGetErrorString(rc));
    fflush(stdout);
    fflush(stderr);
    _exit(DDP_ERUNTIME);
}

/* The teardown ran past its deadline. Called with the watchdog's mutex held, or by the monitor. */
__attribute__((noreturn)) static void teardown_overdue(ncclcomm_impl *im)
{
    atomic_store(&im->aborting, true);
    log_error("NCCL teardown: %s did not finish within %g s (a wedged GPU or a hung NCCL call?); exiting",
              im->teardown_what, im->teardown_limit_s);
    fflush(stdout);
    fflush(stderr);
    _exit(DDP_ERUNTIME);
}

static void check_once(ncclcomm_impl *im, double *last_progress)
{
    scan s = scan_slots(im);
    double now = monotonic_s();
    char what[320], why[512];
    if (s.progressed || s.oldest < 0)
        *last_progress = now;
    if (s.failure != cudaSuccess) {
        describe_slot(&im->slots[s.failed_slot], what, sizeof what);
        /* a sticky error of any kernel on this GPU shows in every event query after it */
        snprintf(why, sizeof why, "a CUDA error (of this collective or of any kernel before it on this GPU) while "
                 "collective %s was in flight: %s", what, cudaGetErrorString(s.failure));
        abort_job(im, why);
    }
    ncclResult_t async = ncclSuccess, q = ncclCommGetAsyncError(im->nccl, &async);
    if (q != ncclSuccess || (async != ncclSuccess && async != ncclInProgress)) {
        if (s.oldest >= 0)
            describe_slot(&im->slots[s.oldest], what, sizeof what);
        snprintf(why, sizeof why, "%s%s%s: %s", q != ncclSuccess ? "ncclCommGetAsyncError" : "asynchronous NCCL error",
                 s.oldest >= 0 ? " during collective " : "", s.oldest >= 0 ? what : "",
                 ncclGetErrorString(q != ncclSuccess ? q : async));
        abort_job(im, why);
    }
    if (s.oldest < 0)
        return;
    const ncclcomm_slot *old = &im->slots[s.oldest];
    double since = old->issued_s > *last_progress ? old->issued_s : *last_progress;
    if (now - since > im->timeout_s) {
        describe_slot(old, what, sizeof what);
        snprintf(why, sizeof why, "collective %s did not complete within %g s", what, im->timeout_s);
        abort_job(im, why);
    }
}

/* The watchdog thread's first step. The current device belongs to the thread: without this,
 * every CUDA call here would run on GPU 0 (each rank of an 8-GPU node creating a context there,
 * or failing outright in exclusive-process mode). The starter learns the outcome before it returns. */
static int select_gpu(void *arg, ddp_err *err)
{
    ncclcomm_impl *im = arg;
    cudaError_t selected = cudaSetDevice(im->device);
    if (selected != cudaSuccess)
        return ddp_fail(err, DDP_ERUNTIME, "%s:%d: the NCCL watchdog thread cannot select GPU %d: cudaSetDevice: %s",
                        __FILE__, __LINE__, im->device, cudaGetErrorString(selected));
    return DDP_OK;
}

static double poll_interval_s(const ncclcomm_impl *im)
{
    double poll_s = im->timeout_s / 20;
    return poll_s < 0.01 ? 0.01 : poll_s > 1.0 ? 1.0 : poll_s;
}

static void watchdog_main(worker *t, void *arg)
{
    ncclcomm_impl *im = arg;
    double poll_s = poll_interval_s(im);
    double last_progress = monotonic_s();
    worker_lock(t);
    while (worker_nap(t, poll_s)) {
        if (im->teardown_deadline > 0) {
            if (monotonic_s() > im->teardown_deadline)
                teardown_overdue(im);
        } else {
            check_once(im, &last_progress);
        }
        atomic_store(&im->watchdog_beat, monotonic_s());
    }
    worker_unlock(t);
}

/* The monitor's loop (see the file's head): its naps are short, so that stopping it is quick. A
 * nap that overran by a second means the whole process was stopped (SIGSTOP, a suspended job), the
 * watchdog with it: the watchdog's silence counts from the resume, and it has a grace to look first. */
static void *monitor_main(void *arg)
{
    ncclcomm_impl *im = arg;
    double limit_s = im->timeout_s + im->abort_limit_s + poll_interval_s(im), grace_s = 2 * poll_interval_s(im);
    double woke = monotonic_s(), resumed = woke;
    while (!atomic_load(&im->monitor_stop)) {
        usleep(10000);
        double now = monotonic_s();
        if (now - woke > 1.0)
            resumed = now;
        woke = now;
        double beat = atomic_load(&im->watchdog_beat), deadline = im->teardown_deadline;
        beat = beat > resumed ? beat : resumed;
        if (atomic_load(&im->aborting)) /* the watchdog ends the process, its abort bounded */
            continue;
        if (deadline > 0 && now > deadline + grace_s && now > resumed + grace_s)
            teardown_overdue(im);
        if (now - beat > limit_s) {
            atomic_store(&im->aborting, true);
            log_error("NCCL watchdog: its last pass ended %.0f s ago, past ddp.timeout_s %g s and the abort's %g s: "
                      "a CUDA or NCCL call hangs (a wedged GPU?); exiting", now - beat, im->timeout_s,
                      im->abort_limit_s);
            fflush(stdout);
            fflush(stderr);
            _exit(DDP_ERUNTIME);
        }
    }
    return NULL;
}

int ncclcomm_watchdog_start(comm *c, ddp_err *err)
{
    ncclcomm_impl *im = c->impl;
    atomic_store(&im->watchdog_beat, monotonic_s());
    atomic_store(&im->monitor_stop, false);
    int rc = worker_start(&im->watchdog, "NCCL watchdog", select_gpu, watchdog_main, im, err);
    if (rc == DDP_OK && pthread_create(&im->monitor, NULL, monitor_main, im) != 0)
        return ddp_fail(err, DDP_ERUNTIME, "cannot start the NCCL watchdog's monitor thread");
    im->monitor_started = rc == DDP_OK;
    return rc;
}

void ncclcomm_watchdog_teardown(comm *c, double limit_s, const char *what)
{
    ncclcomm_impl *im = c->impl;
    worker_lock(&im->watchdog);
    im->teardown_limit_s = limit_s; /* before the deadline, which the monitor reads without the lock */
    im->teardown_what = what;
    im->teardown_deadline = monotonic_s() + limit_s;
    worker_unlock(&im->watchdog);
}

void ncclcomm_watchdog_stop(comm *c)
{
    ncclcomm_impl *im = c->impl;
    worker_stop(&im->watchdog); /* watched still: a watchdog stuck in a CUDA call would hold this */
    if (im->monitor_started) {
        atomic_store(&im->monitor_stop, true);
        pthread_join(im->monitor, NULL);
        im->monitor_started = false;
    }
}

void ncclcomm_watchdog_await_exit(void)
{
    for (;;)
        pause();
}
