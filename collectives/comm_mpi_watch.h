/* comm_mpi_watch.h — the MPI communicator's deadline (comm_mpi.c's internal interface).
 *
 * With a timeout set, every collective of the communicator is waited for by polling its requests,
 * yielding the core between polls for the first 0.1 s (MPI only advances a collective inside MPI
 * calls) and then sleeping in growing steps up to 1 ms (so a rank waiting for a slow peer leaves
 * its CPU to the others). A wait that outlasts the timeout asks every other rank where it is, on a
 * communicator of its own, and listens for the grace (the timeout or 5 s, the lesser) to who
 * answers: ranks waiting in a collective answer at once, a rank busy outside the collectives whose
 * work goes on answers from its next mpi_watch_busy, a stopped, hung or computing rank does not.
 * When every rank answered and one is busy, the deadline starts over: slow work that goes on is not
 * a hang, and costs messages only once a deadline has passed. Otherwise the lowest-numbered rank
 * that timed out names the ranks that did not answer with their hosts, the collective, its sequence
 * number and the caller's label and phase, lists where the others are, and calls MPI_Abort.
 * It must not know about models or training: the caller's words arrive in comm->label/phase. */
#ifndef DDP_COMM_MPI_WATCH_H
#define DDP_COMM_MPI_WATCH_H

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "comm.h"

typedef struct mpi_watch mpi_watch;

/* Collective over c: duplicates base for the alarms and gathers every rank's host. On failure
 * *out is NULL and nothing of the watch is left. */
int mpi_watch_create(comm *c, MPI_Comm base, double timeout_s, mpi_watch **out, ddp_err *err);
/* The deadline from the next wait on: timeout_s (<= 0: none). Not collective; the caller's
 * thread, between collectives. */
void mpi_watch_set_timeout(mpi_watch *w, double timeout_s);
void mpi_watch_destroy(mpi_watch *w);

/* A collective is issued: returns its sequence number (1, 2, ...). */
uint64_t mpi_watch_enter(mpi_watch *w);

/* A collective waited for: its number (mpi_watch_enter), kind ("all-reduce", ...) and the
 * caller's label when it was issued ("bucket 3 of 7"; c->label is another collective's by the
 * wait of a non-blocking one). */
typedef struct mpi_watched {
    uint64_t seq;
    const char *what, *label;
} mpi_watched;

/* Waits for the n requests of collective x within the timeout; never returns once it expired.
 * MPI errors come back as DDP_ERUNTIME. */
int mpi_watch_wait(mpi_watch *w, comm *c, int n, MPI_Request *reqs, const mpi_watched *x, ddp_err *err);

/* This rank is busy outside the collectives (`what`: up to 23 bytes, "checkpoint write"): answers
 * the ranks whose deadline passed meanwhile that it is ("busy with WHAT"), so that their deadline
 * starts over. Sends nothing unasked. Call it every second or so (and within the grace) while the
 * work is under way; work that stopped must be ended by its own watch within about half the
 * deadline, as answers hold the others for as long as they come. Not collective. */
void mpi_watch_busy(mpi_watch *w, comm *c, const char *what);

/* The verdict's list of the ranks that did not answer (missing[r]), appended to text at `at`
 * (text holds len bytes): " Not arrived: rank R (host H), ..." naming at most 12 ranks, then
 * " and N more ranks, on hosts A, B" naming every host that has one, so a restart can leave them
 * all out. Returns the new length. */
size_t mpi_watch_name_missing(char *text, size_t at, size_t len, int size, const bool *missing,
                              const char (*hosts)[DDP_HOST_NAME_MAX], double grace_s);

#endif
