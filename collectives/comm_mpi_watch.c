/* comm_mpi_watch.c — the MPI communicator's deadline: waiting without taking the CPU, a
 * timed-out collective asking every rank where it is, and ending the job with the ranks that did
 * not answer named unless a rank answered that it is busy outside the collectives
 * (comm_mpi_watch.h says how). Owns the alarm communicator and the table of hosts. Must not know
 * about models or training. */
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

/* ALARM: a rank timed out, and asks (round: its count of alarms). STATUS: the answer to one (round:
 * the alarm's); seq 0 from a rank busy outside the collectives (mpi_watch_busy). */
enum { MSG_ALARM = 1, MSG_STATUS = 2 };
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
    uint64_t seq, round;
    double waited_s;
    char what[24], label[64], phase[32];
} watch_msg;

/* The last word from a rank. An answer counts for the round it names only; an alarm (the rank timed
 * out too) for the collective it names or a later one, and only when it came in this round. */
typedef struct peer_word {
    watch_msg alarm, answer;   /* kind 0: none yet */
    double alarm_s;            /* when the alarm came */
} peer_word;

/* A message on its way: its buffer lives until MPI says the send completed (reap_sends). */
typedef struct watch_send {
    struct watch_send *next;
    MPI_Request req;
    watch_msg msg;
} watch_send;

struct mpi_watch {
    MPI_Comm comm;
    double timeout_s, grace_s;
    uint64_t seq;
    int rank, size;
    char (*hosts)[DDP_HOST_NAME_MAX];
    peer_word *peers;          /* by rank */
    uint64_t round;            /* alarms this rank sent: the answers to the last one count */
    double wait_s, round_s;    /* when the wait began, and its deadline (the wait's start or a restart) */
    MPI_Request inbox_req;
    watch_msg inbox;
    watch_send *sends;         /* in flight */
};

/* The alarm communicator, every rank's host, and the inbox's first receive. */
static int connect_watch(mpi_watch *w, const comm *c, MPI_Comm base, ddp_err *err)
{
    MPI_TRY(MPI_Comm_dup(base, &w->comm));
    MPI_TRY(MPI_Comm_set_errhandler(w->comm, MPI_ERRORS_RETURN));
    MPI_TRY(MPI_Allgather(c->host, DDP_HOST_NAME_MAX, MPI_CHAR, w->hosts, DDP_HOST_NAME_MAX, MPI_CHAR, w->comm));
    MPI_TRY(MPI_Irecv(&w->inbox, sizeof w->inbox, MPI_BYTE, MPI_ANY_SOURCE, 0, w->comm, &w->inbox_req));
    return DDP_OK;
}

int mpi_watch_create(comm *c, MPI_Comm base, double timeout_s, mpi_watch **out, ddp_err *err)
{
    mpi_watch *w = calloc(1, sizeof *w);
    char (*hosts)[DDP_HOST_NAME_MAX] = calloc((size_t)c->size, sizeof *hosts);
    peer_word *peers = calloc((size_t)c->size, sizeof *peers);
    *out = NULL;
    if (!w || !hosts || !peers) {
        free(w);
        free(hosts);
        free(peers);
        return ddp_fail(err, DDP_ERUNTIME, "comm_mpi: out of memory for the deadline of %d ranks", c->size);
    }
    mpi_watch_set_timeout(w, timeout_s);
    w->rank = c->rank, w->size = c->size, w->hosts = hosts, w->peers = peers;
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

/* Frees the sends MPI completed. */
static void reap_sends(mpi_watch *w)
{
    for (watch_send **at = &w->sends; *at;) {
        watch_send *s = *at;
        int flag = 0;
        if (MPI_Test(&s->req, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS && flag) {
            *at = s->next;
            free(s);
        } else {
            at = &s->next;
        }
    }
}

static void send_msg(mpi_watch *w, const watch_msg *m, int to)
{
    watch_send *s = malloc(sizeof *s);
    if (!s)
        return;
    s->msg = *m;
    if (MPI_Isend(&s->msg, sizeof s->msg, MPI_BYTE, to, 0, w->comm, &s->req) != MPI_SUCCESS) {
        free(s);
        return;
    }
    s->next = w->sends;
    w->sends = s;
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
    if (!finalized)
        reap_sends(w);
    for (watch_send *s = w->sends; s && !finalized; s = s->next) /* its buffer stays: the send may go on */
        MPI_Request_free(&s->req);
    if (!finalized && w->comm != MPI_COMM_NULL)
        MPI_Comm_free(&w->comm);
    free(w->hosts);
    free(w->peers);
    free(w);
}

uint64_t mpi_watch_enter(mpi_watch *w) { return ++w->seq; }

static watch_msg describe(const mpi_watch *w, const comm *c, int kind, const mpi_watched *x, double waited_s)
{
    watch_msg m = {.kind = kind, .rank = w->rank, .seq = x->seq, .waited_s = waited_s};
    snprintf(m.what, sizeof m.what, "%s", x->what ? x->what : "collective");
    snprintf(m.label, sizeof m.label, "%s", x->label ? x->label : "");
    snprintf(m.phase, sizeof m.phase, "%s", c->phase);
    return m;
}

/* Whether rank r answered this rank's last alarm (itself: always). */
static bool answered(const mpi_watch *w, int r)
{
    const watch_msg *a = &w->peers[r].answer;
    return r == w->rank || (a->kind == MSG_STATUS && a->round == w->round);
}

/* Whether rank r timed out in collective seq, the one this rank waits for, or a later one, this
 * round. */
static bool timed_out_too(const mpi_watch *w, int r, uint64_t seq)
{
    const peer_word *p = &w->peers[r];
    return p->alarm.kind == MSG_ALARM && p->alarm.seq >= seq && p->alarm_s >= w->round_s;
}

/* Takes every message that arrived into w->peers, whenever it comes: an alarm can reach a rank
 * still waiting within its own deadline, or busy. Every alarm is answered with where this rank is
 * (me as a STATUS naming the alarm's round, so an answer is never answered), also by a rank that
 * timed out itself: the asker counts only answers to its own last alarm. */
static void poll_inbox(mpi_watch *w, const watch_msg *me)
{
    watch_msg answer = *me;
    answer.kind = MSG_STATUS;
    reap_sends(w);
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
        if (m.kind == MSG_STATUS) {
            w->peers[from].answer = m;
        } else if (m.kind == MSG_ALARM) {
            w->peers[from].alarm = m;
            w->peers[from].alarm_s = monotonic_s();
            answer.round = m.round;
            send_msg(w, &answer, from);
        }
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
                              const char (*hosts)[DDP_HOST_NAME_MAX], double grace_s)
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

/* The verdict: who did not answer this round, and where the others are. Never returns. */
_Noreturn static void report_and_abort(mpi_watch *w, const watch_msg *me)
{
    char mine[160], text[16384], where[160]; /* room for twelve ranks and every host named whole */
    size_t at = 0;
    int listed = 0;
    bool *missing = calloc((size_t)w->size, sizeof *missing);
    name_collective(me, mine, sizeof mine);
    at = (size_t)snprintf(text, sizeof text, COMM_DEADLINE_VERDICT "%s did not complete within %g s", mine,
                          w->timeout_s);
    if (w->round_s > w->wait_s) /* started over while a rank was busy */
        at = appendf(text, at, sizeof text, " of the last time every rank answered (%.0f s in all)", me->waited_s);
    at = appendf(text, at, sizeof text, " on rank %d (host %s).", w->rank, w->hosts[w->rank]);
    for (int r = 0; r < w->size && missing; r++)
        missing[r] = !answered(w, r);
    if (missing)
        at = mpi_watch_name_missing(text, at, sizeof text, w->size, missing, (const char (*)[DDP_HOST_NAME_MAX])w->hosts, w->grace_s);
    free(missing);
    for (int r = 0; r < w->size && listed < LISTED_MAX; r++) {
        const watch_msg *heard = &w->peers[r].answer;
        if (!answered(w, r) || r == w->rank)
            continue;
        const char *sep = listed++ ? ";" : " Waiting:";
        if (heard->seq == 0) { /* mpi_watch_busy's answer */
            at = appendf(text, at, sizeof text, "%s rank %d outside the collectives, busy with %s", sep, r, heard->what);
            continue;
        }
        name_collective(heard, where, sizeof where);
        at = appendf(text, at, sizeof text, "%s rank %d in %s", sep, r, where);
    }
    if (listed)
        appendf(text, at, sizeof text, ".");
    log_error("%s", text);
    MPI_Abort(MPI_COMM_WORLD, 1);
    _exit(1);
}

/* The deadline passed: ask every rank where it is and listen for the grace period, the collective
 * still polled (a rank that arrived as the deadline passed completes it: *done). When every rank
 * answered and one of them is busy outside the collectives (seq 0: slow work that goes on, as a
 * checkpoint write), the wait is not stuck: the deadline starts over. Otherwise, the grace over,
 * the lowest-numbered rank that timed out gives the verdict; never returns. A busy rank holds no
 * other rank's verdict: one that does not answer is named as at any deadline. */
static int expire(mpi_watch *w, comm *c, int n, MPI_Request *reqs, const mpi_watched *x, double waited_s, bool *done,
                  ddp_err *err)
{
    watch_msg me = describe(w, c, MSG_ALARM, x, waited_s);
    me.round = ++w->round;
    reap_sends(w);
    for (int r = 0; r < w->size; r++)
        if (r != w->rank)
            send_msg(w, &me, r);
    for (double end = monotonic_s() + w->grace_s; monotonic_s() < end; nap(1000000)) {
        int flag = 0, n_answered = 0, n_busy = 0;
        MPI_TRY(MPI_Testall(n, reqs, &flag, MPI_STATUSES_IGNORE));
        if ((*done = flag))
            return DDP_OK;
        poll_inbox(w, &me);
        for (int r = 0; r < w->size; r++) {
            n_answered += answered(w, r);
            n_busy += r != w->rank && answered(w, r) && w->peers[r].answer.seq == 0;
        }
        if (n_answered == w->size && n_busy > 0) {
            w->round_s = monotonic_s();
            return DDP_OK;
        }
    }
    int reporter = w->rank;
    for (int r = 0; r < w->rank; r++)
        if (timed_out_too(w, r, x->seq)) {
            reporter = r;
            break;
        }
    if (reporter != w->rank) /* its MPI_Abort ends this process too; if it does not, report here */
        for (double end = monotonic_s() + 3.0; monotonic_s() < end; nap(10000000))
            poll_inbox(w, &me);
    report_and_abort(w, &me);
}

/* The deadline counts from the wait's start, or from when expire last started it over. */
static int wait_loop(mpi_watch *w, comm *c, int n, MPI_Request *reqs, const mpi_watched *x, ddp_err *err)
{
    double t0 = monotonic_s();
    w->wait_s = w->round_s = t0;
    long sleep_ns = 0;
    for (unsigned polls = 1;; polls++) {
        int flag = 0;
        MPI_TRY(MPI_Testall(n, reqs, &flag, MPI_STATUSES_IGNORE));
        if (flag)
            return DDP_OK;
        if (polls % POLLS_PER_LOOK != 0)
            continue;
        double waited = monotonic_s() - t0;
        watch_msg me = describe(w, c, MSG_STATUS, x, waited);
        poll_inbox(w, &me);
        if (monotonic_s() - w->round_s > w->timeout_s) {
            bool done = false;
            int rc = expire(w, c, n, reqs, x, waited, &done, err);
            if (rc != DDP_OK || done)
                return rc;
        }
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
int mpi_watch_wait(mpi_watch *w, comm *c, int n, MPI_Request *reqs, const mpi_watched *x, ddp_err *err)
{
    activity_wait_begin(x->what, x->seq);
    int rc = wait_loop(w, c, n, reqs, x, err);
    activity_wait_end();
    return rc;
}

/* Answers the alarms that came meanwhile as a rank in a wait would, in none (seq 0). */
void mpi_watch_busy(mpi_watch *w, comm *c, const char *what)
{
    watch_msg me = describe(w, c, MSG_STATUS, &(mpi_watched){.what = what, .label = c->label}, 0);
    poll_inbox(w, &me);
}
