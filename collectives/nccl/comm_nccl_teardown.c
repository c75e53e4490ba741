/* comm_nccl_teardown.c — the end of an NCCL communicator, which never waits without limit.
 *
 * ops->abort, or destroy after any failure, calls ncclCommAbort at once; destroy otherwise gives
 * the collectives in flight ddp.timeout_s, then destroys (or aborts, if they did not finish). The
 * watchdog lives until the end and takes the process down if the teardown itself hangs (a wedged
 * GPU). Then the CUDA resources, the control communicator and the memory go. Must not issue
 * collectives. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "runtime/base/clock.h"
#include "runtime/base/log.h"
#include "comm_nccl_internal.h"

/* Waits, for at most timeout_s, until the newest collective launched has completed (they run in
 * order on one stream, so then all have). NULL when it has; otherwise why not, in why. */
static const char *drain(ncclcomm_impl *im, char *why, size_t len)
{
    const ncclcomm_slot *s = NULL;
    for (int i = 0; i < NCCLCOMM_SLOTS; i++)
        if (atomic_load(&im->slots[i].state) == SLOT_LAUNCHED && (!s || im->slots[i].fp.seq > s->fp.seq))
            s = &im->slots[i];
    if (!s)
        return NULL; /* nothing in flight, or the watchdog saw it all complete */
    double deadline = monotonic_s() + im->timeout_s;
    for (useconds_t nap = 100;; nap = nap < 10000 ? 2 * nap : nap) {
        cudaError_t e = cuda_event_query(s->done);
        if (e == cudaSuccess)
            return NULL;
        if (e != cudaErrorNotReady) {
            snprintf(why, len, "a CUDA error (of collective #%llu or of any kernel before it on this GPU): %s",
                     (unsigned long long)s->fp.seq, cudaGetErrorString(e));
            return why;
        }
        ncclResult_t async = ncclSuccess, q = ncclCommGetAsyncError(im->nccl, &async);
        if (q != ncclSuccess || (async != ncclSuccess && async != ncclInProgress)) {
            snprintf(why, len, "%s: %s", q != ncclSuccess ? "ncclCommGetAsyncError" : "asynchronous NCCL error",
                     ncclGetErrorString(q != ncclSuccess ? q : async));
            return why;
        }
        if (monotonic_s() > deadline) {
            snprintf(why, len, "collective #%llu did not complete within %g s", (unsigned long long)s->fp.seq,
                     im->timeout_s);
            return why;
        }
        usleep(nap);
    }
}

/* Teardown calls cannot fail the caller: the first failure is reported, the rest are expected. */
static void teardown_check(bool *reported, const char *call, cudaError_t e)
{
    if (e != cudaSuccess && !*reported) {
        *reported = true;
        log_warn("NCCL teardown: %s: %s", call, cudaGetErrorString(e));
    }
}

/* The communicator's end. Normal: its collectives may finish for up to ddp.timeout_s, then
 * ncclCommDestroy; if they do not (or something failed), ncclCommAbort, which waits for nothing.
 * The watchdog outlives all of it and ends the process if the teardown overruns. */
static void release(comm *c, bool abort)
{
    ncclcomm_impl *im = c->impl;
    abort = abort || im->failed;
    if (im->nccl) {
        char why[256];
        const char *stuck = NULL;
        if (!abort) {
            ncclcomm_watchdog_teardown(c, im->timeout_s + im->abort_limit_s, "destroying the NCCL communicator");
            stuck = drain(im, why, sizeof why);
            if (stuck)
                log_warn("NCCL teardown: %s; aborting the communicator", stuck);
        } else {
            ncclcomm_watchdog_teardown(c, im->abort_limit_s, "aborting the NCCL communicator");
        }
        const char *call = abort || stuck ? "ncclCommAbort" : "ncclCommDestroy";
        ncclResult_t rc = abort || stuck ? ncclCommAbort(im->nccl) : ncclCommDestroy(im->nccl);
        if (rc != ncclSuccess)
            log_warn("NCCL teardown: %s: %s", call, ncclGetErrorString(rc));
        im->nccl = NULL;
    } else {
        ncclcomm_watchdog_teardown(c, im->abort_limit_s, "freeing the NCCL communicator's resources");
    }
    bool reported = false;
    for (int i = 0; i < NCCLCOMM_SLOTS; i++)
        if (im->slots[i].done)
            teardown_check(&reported, "cudaEventDestroy", cudaEventDestroy(im->slots[i].done));
    if (im->compute_ready)
        teardown_check(&reported, "cudaEventDestroy", cudaEventDestroy(im->compute_ready));
    if (im->stage)
        teardown_check(&reported, "cudaFreeAsync", cudaFreeAsync(im->stage, im->stream));
    if (im->barrier_buf)
        teardown_check(&reported, "cudaFree", cudaFree(im->barrier_buf));
    if (im->stream && im->own_stream)
        teardown_check(&reported, "cudaStreamDestroy", cudaStreamDestroy(im->stream));
    ncclcomm_watchdog_stop(c);
}

void ncclcomm_free(comm *c, bool abort)
{
    if (!c)
        return;
    ncclcomm_impl *im = c->impl;
    if (im) {
        release(c, abort);
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (!finalized && im->ctl != MPI_COMM_NULL)
            MPI_Comm_free(&im->ctl);
        worker_destroy(&im->watchdog);
        free(im);
    }
    free(c);
}
