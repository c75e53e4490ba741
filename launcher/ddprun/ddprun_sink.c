/* ddprun_sink.c — ddprun's own stdout and stderr, kept from ever blocking the job.
 *
 * ddprun's poll loop drains mpirun's pipes and forwards stop requests, so during a job it must not
 * wait for whoever reads ddprun's output: a pager nobody scrolls, a terminal stopped by Ctrl-S, a
 * container log driver that blocks. If it did, mpirun and then every rank would block writing their
 * log lines and training would stall, and a stop (a spot notice's SIGTERM) would not reach the
 * ranks, so nothing would be saved. Once installed, fds 1 and 2 are pipes that a thread drains at
 * once into a queue per stream (one pipe and queue for both where they name the same file or
 * terminal, so their order stays as written), and a thread per stream writes its queue to the real
 * output, the only one that waits for its reader. A queue holds at most SINK_QUEUE_MAX bytes: past
 * that, what comes is dropped and counted; the first drop is said on the other stream, each gap is
 * marked in the stream where it is, and the total is said at exit. At exit the job is over, so
 * ddprun waits for its queues to go out, giving up only on a reader gone or one that took nothing
 * for SINK_EXIT_STALL_S. Everything ddprun prints goes this way, and so does what the commands it
 * runs with fds 1 and 2 inherited print; mpirun has pipes of its own. Must not filter, reorder or
 * reword what passes (ddprun_output.c does that). */
#include "ddprun.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SINK_QUEUE_MAX (16u << 20)
#define SINK_CHUNK 65536
#define SINK_EXIT_STALL_S 60

/* Bytes a chunk costs the queue besides its data: its header and the allocator's. */
#define CHUNK_OVERHEAD (sizeof(chunk) + 16)

typedef struct chunk {
    struct chunk *next;
    size_t len, cap;
    char data[];
} chunk;

typedef struct stream {
    const char *name;         /* "stdout", "stderr", "stdout and stderr" */
    int real_fd;              /* the output ddprun was given */
    int pipe_rd;              /* where fd 1 (or 2) now writes to; -1 at its end or when unused */
    chunk *head, *tail;
    size_t queued;            /* data and chunk overhead */
    unsigned long long gap;   /* bytes dropped since the last that were queued */
    unsigned long long dropped, written;
    bool said_drop;           /* the first drop said on the other stream */
    bool broken;              /* its reader is gone: nothing more is written */
    bool writing;             /* its writer holds a chunk it took off the queue */
    char last;                /* the last byte queued */
    pthread_t writer;
} stream;

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;        /* on CLOCK_MONOTONIC (output_sink_install) */
    stream s[2];
    bool merged;              /* fds 1 and 2 share s[0] */
    bool closing;             /* at exit, nothing more comes: a writer ends once its queue is empty */
    pthread_t reader;
} sink = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* Where stream i's notes about the other go. */
static stream *other(int i) { return &sink.s[sink.merged ? 0 : 1 - i]; }

/* Under sink.mu: n bytes at the end of s's queue (the tail chunk's room first), or dropped and
 * counted when the queue is full (unless `always`: ddprun's own short notes). */
static void enqueue(stream *s, const char *data, size_t n, bool always)
{
    chunk *t = s->tail;
    if (t && t->cap - t->len >= n) { /* room queued counted already */
        memcpy(t->data + t->len, data, n);
        t->len += n;
    } else {
        size_t cap = n > SINK_CHUNK / 16 ? n : SINK_CHUNK / 16;
        chunk *c = always || s->queued + cap + CHUNK_OVERHEAD <= SINK_QUEUE_MAX ? malloc(sizeof *c + cap) : NULL;
        if (!c) {
            s->gap += n, s->dropped += n;
            return;
        }
        memcpy(c->data, data, n);
        c->len = n, c->cap = cap, c->next = NULL;
        *(t ? &t->next : &s->head) = c;
        s->tail = c, s->queued += cap + CHUNK_OVERHEAD;
    }
    s->last = data[n - 1];
}

/* Under sink.mu: the mark of s's gap, queued. */
static void mark_gap(stream *s)
{
    char mark[160];
    int m = snprintf(mark, sizeof mark, "%sddprun: [%llu bytes of output dropped here: their reader did not keep up]\n",
                     s->last && s->last != '\n' ? "\n" : "", s->gap);
    s->gap = 0;
    enqueue(s, mark, (size_t)m, true);
}

/* Under sink.mu: what came on stream i, after the mark of a gap before it; a first drop said. */
static void take(int i, const char *data, size_t n)
{
    stream *s = &sink.s[i];
    bool room = s->queued + n + 2 * CHUNK_OVERHEAD + 160 <= SINK_QUEUE_MAX;
    if (room && s->gap)
        mark_gap(s);
    if (room)
        enqueue(s, data, n, false);
    else
        s->gap += n, s->dropped += n;
    if (s->dropped && !s->said_drop) {
        s->said_drop = true;
        char note[256];
        int len = snprintf(note, sizeof note, "ddprun: %s %s not being read (%u MiB queued): output is dropped until "
                           "it is read again; the job goes on\n", s->name, sink.merged ? "are" : "is",
                           SINK_QUEUE_MAX >> 20);
        enqueue(other(i), note, (size_t)len, true);
    }
    pthread_cond_broadcast(&sink.cv);
}

static void *read_pipes(void *arg)
{
    (void)arg;
    static char buf[SINK_CHUNK];
    for (;;) {
        struct pollfd fds[2] = {{.fd = sink.s[0].pipe_rd, .events = POLLIN}, {.fd = sink.s[1].pipe_rd, .events = POLLIN}};
        if (fds[0].fd < 0 && fds[1].fd < 0)
            return NULL;
        if (poll(fds, 2, -1) < 0 && errno != EINTR)
            return NULL;
        for (int i = 0; i < 2; i++) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            ssize_t n = read(fds[i].fd, buf, sizeof buf);
            if (n < 0 && (errno == EINTR || errno == EAGAIN))
                continue;
            pthread_mutex_lock(&sink.mu);
            if (n > 0) {
                take(i, buf, (size_t)n);
            } else {
                close(sink.s[i].pipe_rd);
                sink.s[i].pipe_rd = -1;
                pthread_cond_broadcast(&sink.cv);
            }
            pthread_mutex_unlock(&sink.mu);
        }
    }
}

/* All of n bytes to fd, waiting for room where another process made it non-blocking; false once
 * its reader is gone (or it fails otherwise). */
static bool write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EAGAIN) {
            poll(&(struct pollfd){.fd = fd, .events = POLLOUT}, 1, 1000);
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w, n -= (size_t)w;
    }
    return true;
}

static void *write_stream(void *arg)
{
    stream *s = arg;
    pthread_mutex_lock(&sink.mu);
    for (;;) {
        while (!s->head && !sink.closing)
            pthread_cond_wait(&sink.cv, &sink.mu);
        chunk *c = s->head;
        if (!c)
            break;
        s->head = c->next;
        if (!s->head)
            s->tail = NULL;
        bool skip = s->broken;
        s->writing = true;
        pthread_mutex_unlock(&sink.mu);
        bool ok = !skip && write_all(s->real_fd, c->data, c->len);
        pthread_mutex_lock(&sink.mu);
        s->writing = false;
        if (ok)
            s->written += c->len;
        else
            s->broken = true; /* its reader went (ddprun | head): what is left goes nowhere, unannounced */
        s->queued -= c->cap + CHUNK_OVERHEAD;
        free(c);
        pthread_cond_broadcast(&sink.cv);
    }
    pthread_mutex_unlock(&sink.mu);
    return NULL;
}

/* Under sink.mu: whether stream s still has something to write to a reader that is there. */
static bool pending(const stream *s) { return s->writing || (s->head && !s->broken); }

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Under sink.mu: waits while `more` holds, until the readers took nothing for SINK_EXIT_STALL_S
 * (a reader that stalls is then left behind with what it did not take); false when it gave up. */
static bool wait_while(bool (*more)(void))
{
    unsigned long long seen = sink.s[0].written + sink.s[1].written;
    double last = now_s();
    while (more()) {
        if (now_s() - last >= SINK_EXIT_STALL_S)
            return false;
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += 1;
        pthread_cond_timedwait(&sink.cv, &sink.mu, &until);
        unsigned long long now = sink.s[0].written + sink.s[1].written;
        if (now != seen)
            seen = now, last = now_s();
    }
    return true;
}

static bool pipes_open(void) { return sink.s[0].pipe_rd >= 0 || sink.s[1].pipe_rd >= 0; }
static bool writes_pending(void) { return pending(&sink.s[0]) || pending(&sink.s[1]); }

/* At exit: what ddprun's stdio holds flushed and its ends of the pipes closed; once the reader has
 * taken the pipes to their end, the gaps marked and the drops summed up; then the queues written
 * out, unless a reader takes nothing for SINK_EXIT_STALL_S. */
static void sink_finish(void)
{
    fflush(stdout);
    fflush(stderr);
    int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null_fd >= 0) { /* the pipes' last write ends (a command ddprun ran may still hold one) */
        dup2(null_fd, 1);
        dup2(null_fd, 2);
        close(null_fd);
    }
    pthread_mutex_lock(&sink.mu);
    (void)wait_while(pipes_open);
    unsigned long long dropped = 0;
    for (int i = 0; i < 2; i++) {
        if (sink.s[i].gap)
            mark_gap(&sink.s[i]);
        dropped += sink.s[i].dropped;
    }
    if (dropped) {
        char note[160];
        int len = snprintf(note, sizeof note, "ddprun: %llu bytes of output were dropped in all: their reader did not "
                           "keep up\n", dropped);
        enqueue(other(0), note, (size_t)len, true);
    }
    sink.closing = true;
    pthread_cond_broadcast(&sink.cv);
    (void)wait_while(writes_pending);
    pthread_mutex_unlock(&sink.mu);
}

/* Fd `fd` made the write end of a new pipe, its old output kept as s->real_fd. */
static int divert(int fd, stream *s)
{
    int p[2];
    s->real_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (s->real_fd < 0 || pipe2(p, O_CLOEXEC) != 0)
        return -1;
    s->pipe_rd = p[0];
    int rc = dup2(p[1], fd) < 0 ? -1 : 0; /* fd 1 or 2 stays inheritable: dup2 clears close-on-exec */
    close(p[1]);
    return rc;
}

/* Fds 1 and 2 back to the outputs they had, after a failed install. */
static void undivert(void)
{
    for (int i = 0; i < 2; i++) {
        int real = sink.s[i].real_fd >= 0 ? sink.s[i].real_fd : sink.merged ? sink.s[0].real_fd : -1;
        if (real >= 0)
            dup2(real, i + 1);
    }
}

/* Whether fds 1 and 2 name the same file or terminal (2>&1, a terminal for both). */
static bool same_output(void)
{
    struct stat a, b;
    return fstat(1, &a) == 0 && fstat(2, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

int output_sink_install(void)
{
    fflush(stdout);
    fflush(stderr);
    sink.merged = same_output();
    bool tty = isatty(1);
    sink.s[0] = (stream){.name = sink.merged ? "stdout and stderr" : "stdout", .real_fd = -1, .pipe_rd = -1};
    sink.s[1] = (stream){.name = "stderr", .real_fd = -1, .pipe_rd = -1};
    int rc = divert(1, &sink.s[0]);
    if (rc == 0 && sink.merged)
        rc = dup2(1, 2) < 0 ? -1 : 0; /* one pipe: the order of the two streams stays as written */
    else if (rc == 0)
        rc = divert(2, &sink.s[1]);
    if (rc != 0) {
        int e = errno;
        undivert();
        fprintf(stderr, "ddprun: cannot set up its output pipes: %s\n", strerror(e));
        return -1;
    }
    if (tty) /* as stdio buffers a terminal: each line out when written, in order with stderr's */
        setvbuf(stdout, NULL, _IOLBF, 0);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* the exit's waits: a clock step changes nothing */
    pthread_cond_init(&sink.cv, &ca);
    pthread_condattr_destroy(&ca);
    sigset_t all, before;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &before); /* the threads take no signal: the poll loop's handler does */
    bool ok = !pthread_create(&sink.reader, NULL, read_pipes, NULL) &&
              !pthread_create(&sink.s[0].writer, NULL, write_stream, &sink.s[0]) &&
              (sink.merged || !pthread_create(&sink.s[1].writer, NULL, write_stream, &sink.s[1]));
    pthread_sigmask(SIG_SETMASK, &before, NULL);
    if (!ok) { /* a thread that started waits on a pipe nobody writes to again: harmless */
        undivert();
        fprintf(stderr, "ddprun: cannot start its output threads\n");
        return -1;
    }
    atexit(sink_finish);
    return 0;
}
