/* comm_mpi_watch.c — the MPI communicator's deadline: waiting without taking the CPU, a
 * timed-out collective ending the job with the ranks that did not arrive named, and keepalives from
 * a rank busy outside the collectives (comm_mpi_watch.h says how). Owns the alarm communicator and
 * the table of hosts. Must not know about models or training. */
#include "comm_mpi_watch.h"

#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime/base/activity.h"
#include "runtime/base/clock.h"
#include "runtime/base/log.h"
#include "mpi_check.h"

/* KEEPALIVE: a peer busy outside the collectives whose work progresses (mpi_watch_keepalive);
 * never an answer to an alarm, so never kept in heard[]. */
enum { MSG_ALARM = 1, MSG_STATUS = 2, MSG_KEEPALIVE = 3 };
/* Waiting: the requests are polled, every POLLS_PER_LOOK-th poll also looks at the clock and the
 * alarms; for the first YIELD_FOR_S the core is offered to other threads between polls (Open MPI
 * advances a non-blocking collective only inside MPI calls, so a bucket's all-reduce must be
 * polled often), after that the wait sleeps in doubling naps of at most NAP_MAX_NS. */
#define POLLS_PER_LOOK 64
#define YIELD_FOR_S 0.1
#define NAP_MAX_NS 1000000L
#define LISTED_MAX 12

/* What a rank says of itself when it times out (ALARM, to every rank) or is asked (STATUS). */
typedef struct watch_msg {
    int32_t kind, rank;
    uint64_t seq;
    double waited_s;
    char what[24], label[64], phase[32];
} watch_msg;

struct mpi_watch {
    MPI_Comm comm;
    double timeout_s, grace_s;
    uint64_t seq;
    int rank, size;
    char (*hosts)[64];
    watch_msg *heard;          /* the last word from each rank (kind 0: none), kept from any wait */
    MPI_Request inbox_req;
    watch_msg inbox;
    double keepalive_heard_s;  /* when this wait last heard a peer's keepalive (0: not yet) */
    double keepalive_sent_s;   /* when this rank last sent its own */
    watch_msg *keepalive;      /* what mpi_watch_keepalive sends, and its sends in flight */
    MPI_Request *keepalive_reqs;
};

/* The alarm communicator, every rank's host, and the inbox's first receive. */
static int connect_watch(mpi_watch *w, const comm *c, MPI_Comm base, ddp_err *err)
{
    MPI_TRY(MPI_Comm_dup(base, &w->comm));
    MPI_TRY(MPI_Comm_set_errhandler(w->comm, MPI_ERRORS_RETURN));
    MPI_TRY(MPI_Allgather(c->host, 64, MPI_CHAR, w->hosts, 64, MPI_CHAR, w->comm));
    MPI_TRY(MPI_Irecv(&w->inbox, sizeof w->inbox, MPI_BYTE, MPI_ANY_SOURCE, 0, w->comm, &w->inbox_req));
    return DDP_OK;
}

int mpi_watch_create(comm *c, MPI_Comm base, double timeout_s, mpi_watch **out, ddp_err *err)
{
    mpi_watch *w = calloc(1, sizeof *w);
    char (*hosts)[64] = calloc((size_t)c->size, sizeof *hosts);
    watch_msg *heard = calloc((size_t)c->size, sizeof *heard);
    watch_msg *keepalive = calloc(1, sizeof *keepalive);
    MPI_Request *keepalive_reqs = malloc((size_t)c->size * sizeof *keepalive_reqs);
    *out = NULL;
    if (!w || !hosts || !heard || !keepalive || !keepalive_reqs) {
        free(w);
        free(hosts);
        free(heard);
        free(keepalive);
        free(keepalive_reqs);
        return ddp_fail(err, DDP_ERUNTIME, "comm_mpi: out of memory for the deadline of %d ranks", c->size);
    }
    mpi_watch_set_timeout(w, timeout_s);
    w->rank = c->rank, w->size = c->size, w->hosts = hosts, w->heard = heard;
    w->keepalive = keepalive, w->keepalive_reqs = keepalive_reqs, w->keepalive_sent_s = -HUGE_VAL;
    for (int r = 0; r < c->size; r++)
        keepalive_reqs[r] = MPI_REQUEST_NULL;
    w->comm = MPI_COMM_NULL;
    w->inbox_req = MPI_REQUEST_NULL;
    int rc = connect_watch(w, c, base, err);
    if (rc != DDP_OK) {
        mpi_watch_destroy(w);
        return rc;
    }
    *out = w;
    return DDP_OK;
}

void mpi_watch_set_timeout(mpi_watch *w, double timeout_s)
{
    w->timeout_s = timeout_s > 0 ? timeout_s : HUGE_VAL;
    w->grace_s = w->timeout_s < 5.0 ? w->timeout_s : 5.0;
}

void mpi_watch_destroy(mpi_watch *w)
{
    if (!w)
        return;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && w->inbox_req != MPI_REQUEST_NULL) {
        MPI_Cancel(&w->inbox_req);
        MPI_Wait(&w->inbox_req, MPI_STATUS_IGNORE);
    }
    int sent = 1; /* a keepalive still in flight keeps its buffer: freeing it could corrupt the send */
    if (!finalized && MPI_Testall(w->size, w->keepalive_reqs, &sent, MPI_STATUSES_IGNORE) != MPI_SUCCESS)
        sent = 0;
    for (int r = 0; r < w->size && !sent; r++)
        if (w->keepalive_reqs[r] != MPI_REQUEST_NULL)
            MPI_Request_free(&w->keepalive_reqs[r]);
    if (sent)
        free(w->keepalive);
    if (!finalized && w->comm != MPI_COMM_NULL)
        MPI_Comm_free(&w->comm);
    free(w->keepalive_reqs);
    free(w->hosts);
    free(w->heard);
    free(w);
}

uint64_t mpi_watch_enter(mpi_watch *w) { return ++w->seq; }

static watch_msg describe(const mpi_watch *w, const comm *c, int kind, uint64_t seq, const char *what,
                          double waited_s)
{
    watch_msg m = {.kind = kind, .rank = w->rank, .seq = seq, .waited_s = waited_s};
    snprintf(m.what, sizeof m.what, "%s", what ? what : "collective");
    snprintf(m.label, sizeof m.label, "%s", c->label);
    snprintf(m.phase, sizeof m.phase, "%s", c->phase);
    return m;
}

/* Sends m to rank `to` and forgets it: the job is ending, so the copy is never freed. */
static void send_forget(mpi_watch *w, const watch_msg *m, int to)
{
    watch_msg *copy = malloc(sizeof *copy);
    MPI_Request r;
    if (copy && (*copy = *m, MPI_Isend(copy, sizeof *copy, MPI_BYTE, to, 0, w->comm, &r)) == MPI_SUCCESS)
        MPI_Request_free(&r);
}

/* Takes every message that arrived into w->heard, whenever it comes: an alarm can reach a rank
 * still waiting within its own deadline. While waiting (answer), an alarm is answered with where
 * this rank waits; a rank that timed out has already told everyone. */
static void poll_inbox(mpi_watch *w, const watch_msg *me, bool answer)
{
    for (;;) {
        int flag = 0;
        MPI_Status st;
        if (w->inbox_req == MPI_REQUEST_NULL || MPI_Test(&w->inbox_req, &flag, &st) != MPI_SUCCESS || !flag)
            return;
        watch_msg m = w->inbox;
        int from = st.MPI_SOURCE;
        if (MPI_Irecv(&w->inbox, sizeof w->inbox, MPI_BYTE, MPI_ANY_SOURCE, 0, w->comm, &w->inbox_req) !=
            MPI_SUCCESS)
            w->inbox_req = MPI_REQUEST_NULL;
        if (from < 0 || from >= w->size)
            continue;
        if (m.kind == MSG_KEEPALIVE) {
            w->keepalive_heard_s = monotonic_s();
            continue;
        }
        if (m.kind == MSG_ALARM || w->heard[from].kind != MSG_ALARM)
            w->heard[from] = m;
        if (answer && m.kind == MSG_ALARM)
            send_forget(w, me, from);
    }
}

static void nap(long ns) { nanosleep(&(struct timespec){0, ns}, NULL); }

/* "all-reduce #41 (bucket 3 of 7, step 17)" */
static void name_collective(const watch_msg *m, char *out, size_t len)
{
    const char *sep = m->label[0] && m->phase[0] ? ", " : "";
    if (m->label[0] || m->phase[0])
        snprintf(out, len, "%s #%llu (%s%s%s)", m->what, (unsigned long long)m->seq, m->label, sep, m->phase);
    else
        snprintf(out, len, "%s #%llu", m->what, (unsigned long long)m->seq);
}

static size_t appendf(char *buf, size_t at, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (at < len)
        at += (size_t)vsnprintf(buf + at, len - at, fmt, ap);
    va_end(ap);
    return at < len ? at : len;
}

size_t mpi_watch_name_missing(char *text, size_t at, size_t len, int size, const bool *missing,
                              const char (*hosts)[64], double grace_s)
{
    int n = 0;
    for (int r = 0; r < size; r++)
        if (missing[r] && n++ < LISTED_MAX)
            at = appendf(text, at, len, "%srank %d (host %s)", n > 1 ? ", " : " " COMM_DEADLINE_NOT_ARRIVED, r,
                         hosts[r]);
    if (n > LISTED_MAX) { /* a restart leaves out the hosts named: every one, past the ranks listed */
        at = appendf(text, at, len, " and %d more ranks" COMM_DEADLINE_ON_HOSTS, n - LISTED_MAX);
        for (int r = 0, named = 0; r < size; r++) {
            bool first = missing[r];
            for (int q = 0; q < r && first; q++)
                first = !(missing[q] && !strcmp(hosts[q], hosts[r]));
            if (first)
                at = appendf(text, at, len, "%s%s", named++ ? ", " : "", hosts[r]);
        }
    }
    if (n)
        at = appendf(text, at, len, " (no answer within %g s: stopped, hung, ended, or busy outside the "
                     "collectives).", grace_s);
    return at;
}

/* The verdict: who did not answer, and where the others wait. Never returns. */
static void report_and_abort(mpi_watch *w, const watch_msg *me, const watch_msg *heard)
{
    char mine[160], text[3072], where[160];
    size_t at = 0;
    int listed = 0;
    bool *missing = calloc((size_t)w->size, sizeof *missing);
    name_collective(me, mine, sizeof mine);
    at = (size_t)snprintf(text, sizeof text, COMM_DEADLINE_VERDICT "%s did not complete within %g s on rank %d "
                          "(host %s).", mine, w->timeout_s, w->rank, w->hosts[w->rank]);
    for (int r = 0; r < w->size && missing; r++)
        missing[r] = heard[r].kind == 0;
    if (missing)
        at = mpi_watch_name_missing(text, at, sizeof text, w->size, missing, (const char (*)[64])w->hosts, w->grace_s);
    free(missing);
    for (int r = 0; r < w->size && listed < LISTED_MAX; r++) {
        if (heard[r].kind == 0 || r == w->rank)
            continue;
        const char *sep = listed++ ? ";" : " Waiting:";
        if (heard[r].seq == 0) { /* mpi_watch_keepalive's answer */
            at = appendf(text, at, sizeof text, "%s rank %d outside the collectives, busy with %s", sep, r, heard[r].what);
            continue;
        }
        name_collective(&heard[r], where, sizeof where);
        at = appendf(text, at, sizeof text, "%s rank %d in %s", sep, r, where);
    }
    if (listed)
        appendf(text, at, sizeof text, ".");
    log_error("%s", text);
    MPI_Abort(MPI_COMM_WORLD, 1);
    _exit(1);
}

/* The deadline passed: tell everyone, listen for the grace period, and let the lowest-numbered
 * rank that timed out give the verdict. A rank busy outside the collectives (its answer's seq is 0)
 * has the whole grace: its own watch, as a checkpoint writer's, may name the cause first. Never
 * returns. */
static void expire(mpi_watch *w, comm *c, uint64_t seq, const char *what, double waited_s)
{
    watch_msg me = describe(w, c, MSG_ALARM, seq, what, waited_s);
    watch_msg *heard = w->heard;
    heard[w->rank] = me;
    for (int r = 0; r < w->size; r++)
        if (r != w->rank)
            send_forget(w, &me, r);
    int answered = 1;
    for (double end = monotonic_s() + w->grace_s; answered < w->size && monotonic_s() < end; nap(1000000)) {
        poll_inbox(w, &me, false);
        answered = 0;
        for (int r = 0; r < w->size; r++)
            answered += heard[r].kind != 0 && heard[r].seq != 0;
    }
    int reporter = w->rank;
    for (int r = 0; r < w->rank; r++)
        if (heard[r].kind == MSG_ALARM) {
            reporter = r;
            break;
        }
    if (reporter != w->rank) /* its MPI_Abort ends this process too; if it does not, report here */
        for (double end = monotonic_s() + 3.0; monotonic_s() < end; nap(10000000))
            poll_inbox(w, &me, false);
    report_and_abort(w, &me, heard);
}

/* The deadline counts from the wait's start or the last keepalive heard during it, whichever is
 * later: keepalives that arrived before the wait are drained first, as they say nothing of it. */
static int wait_loop(mpi_watch *w, comm *c, int n, MPI_Request *reqs, uint64_t seq, const char *what, ddp_err *err)
{
    watch_msg before = describe(w, c, MSG_STATUS, seq, what, 0);
    poll_inbox(w, &before, true);
    w->keepalive_heard_s = 0;
    double t0 = monotonic_s();
    long sleep_ns = 0;
    for (unsigned polls = 1;; polls++) {
        int flag = 0;
        MPI_TRY(MPI_Testall(n, reqs, &flag, MPI_STATUSES_IGNORE));
        if (flag)
            return DDP_OK;
        if (polls % POLLS_PER_LOOK != 0)
            continue;
        double waited = monotonic_s() - t0;
        watch_msg me = describe(w, c, MSG_STATUS, seq, what, waited);
        poll_inbox(w, &me, true);
        double since = w->keepalive_heard_s > t0 ? w->keepalive_heard_s : t0;
        if (monotonic_s() - since > w->timeout_s)
            expire(w, c, seq, what, waited);
        if (waited < YIELD_FOR_S) { /* a collective in progress: MPI moves it on only inside MPI calls */
            sched_yield();
            continue;
        }
        sleep_ns = sleep_ns ? (sleep_ns * 2 < NAP_MAX_NS ? sleep_ns * 2 : NAP_MAX_NS) : 10000;
        nap(sleep_ns);
    }
}

/* The wait is the process's activity meanwhile: a stop request's deadline (the worker's) tells a
 * rank held here by a peer from the peer that holds it. */
int mpi_watch_wait(mpi_watch *w, comm *c, int n, MPI_Request *reqs, uint64_t seq, const char *what, ddp_err *err)
{
    activity_wait_begin(what, seq);
    int rc = wait_loop(w, c, n, reqs, seq, what, err);
    activity_wait_end();
    return rc;
}

/* Answers alarms as a rank in a wait would (seq 0: in none), then, a quarter of the timeout after
 * the last, sends the keepalive to every other rank unless that round is still in flight (a peer
 * that stopped receiving must not make this rank pile up sends: a later call tries again). */
void mpi_watch_keepalive(mpi_watch *w, comm *c, const char *what)
{
    watch_msg me = describe(w, c, MSG_STATUS, 0, what, 0);
    poll_inbox(w, &me, true);
    double now = monotonic_s();
    int sent = 0;
    if (isinf(w->timeout_s) || now - w->keepalive_sent_s < w->timeout_s / 4 ||
        MPI_Testall(w->size, w->keepalive_reqs, &sent, MPI_STATUSES_IGNORE) != MPI_SUCCESS || !sent)
        return;
    w->keepalive_sent_s = now;
    *w->keepalive = me;
    w->keepalive->kind = MSG_KEEPALIVE;
    for (int r = 0; r < w->size; r++)
        if (r != w->rank && MPI_Isend(w->keepalive, sizeof *w->keepalive, MPI_BYTE, r, 0, w->comm,
                                      &w->keepalive_reqs[r]) != MPI_SUCCESS)
            w->keepalive_reqs[r] = MPI_REQUEST_NULL;
}
