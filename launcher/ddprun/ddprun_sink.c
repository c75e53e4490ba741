/* ddprun_sink.c — ddprun's own stdout and stderr, kept from ever blocking it.
 *
 * ddprun's poll loop drains mpirun's pipes and forwards stop requests, so it must not wait for
 * whoever reads ddprun's output: a pager nobody scrolls, a terminal stopped by Ctrl-S, a container
 * log driver that blocks. If it did, mpirun and then every rank would block writing their log lines
 * and training would stall, and a stop (a spot notice's SIGTERM) would not reach the ranks, so
 * nothing would be saved. Once installed, fds 1 and 2 are pipes that a thread drains at once into
 * a queue per stream, and a thread per stream writes its queue to the real output, the only one
 * that waits for its reader. A queue holds at most SINK_QUEUE_MAX bytes: past that, what comes is
 * dropped and counted; the first drop is said on the other stream, the gap is marked in the stream
 * where it is, and the total is said at exit. At exit what is still queued gets SINK_DRAIN_S to go
 * out. Everything ddprun prints goes this way, and so does what the commands it runs with fds 1
 * and 2 inherited print (host discovery); mpirun has pipes of its own. Must not filter, reorder
 * or reword what passes (ddprun_output.c does that). */
#include "ddprun.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SINK_QUEUE_MAX (16u << 20)
#define SINK_DRAIN_S 5.0

typedef struct chunk {
    struct chunk *next;
    size_t len;
    char data[];
} chunk;

typedef struct stream {
    int real_fd;              /* the output ddprun was given */
    int pipe_rd;              /* where fd 1 or 2 now writes to; -1 at its end */
    chunk *head, *tail;
    size_t queued;
    unsigned long long gap;   /* bytes dropped since the last that were queued */
    unsigned long long dropped;
    bool said_drop;           /* the first drop said on the other stream */
    bool broken;              /* its reader is gone (EPIPE): nothing more is written */
    char last;                /* the last byte queued */
    pthread_t writer;
} stream;

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    stream s[2];
    pthread_t reader;
} sink = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static const char *const stream_name[2] = {"stdout", "stderr"};

/* Under sink.mu: n bytes at the end of stream s's queue, or dropped and counted past the cap. */
static void enqueue(stream *s, const char *data, size_t n)
{
    chunk *c = s->queued + n <= SINK_QUEUE_MAX ? malloc(sizeof *c + n) : NULL;
    if (!c) {
        s->gap += n, s->dropped += n;
        return;
    }
    memcpy(c->data, data, n);
    c->len = n, c->next = NULL;
    *(s->tail ? &s->tail->next : &s->head) = c;
    s->tail = c, s->queued += n, s->last = data[n - 1];
}

/* Under sink.mu: what came on stream i, with the gap before it marked and a first drop said. */
static void take(int i, const char *data, size_t n)
{
    stream *s = &sink.s[i];
    char mark[160];
    int m = s->gap ? snprintf(mark, sizeof mark, "%sddprun: [%llu bytes of output dropped here: its reader did not "
                              "keep up]\n", s->last && s->last != '\n' ? "\n" : "", s->gap) : 0;
    if (s->queued + (size_t)m + n > SINK_QUEUE_MAX) {
        s->gap += n, s->dropped += n;
    } else {
        if (m > 0)
            enqueue(s, mark, (size_t)m), s->gap = 0;
        enqueue(s, data, n);
    }
    if (s->dropped && !s->said_drop) {
        s->said_drop = true;
        char note[256];
        int len = snprintf(note, sizeof note, "ddprun: %s is not being read (%u MiB queued): its output is dropped until "
                           "it is read again; the job goes on\n", stream_name[i], SINK_QUEUE_MAX >> 20);
        enqueue(&sink.s[1 - i], note, (size_t)len);
    }
    pthread_cond_broadcast(&sink.cv);
}

static void *read_pipes(void *arg)
{
    (void)arg;
    static char buf[65536];
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
            if (n < 0 && errno == EINTR)
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

/* All of n bytes to fd; false when its reader is gone or it failed otherwise. */
static bool write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
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
        while (!s->head && s->pipe_rd >= 0)
            pthread_cond_wait(&sink.cv, &sink.mu);
        chunk *c = s->head;
        if (!c)
            break;
        s->head = c->next;
        if (!s->head)
            s->tail = NULL;
        pthread_mutex_unlock(&sink.mu);
        bool ok = s->broken || write_all(s->real_fd, c->data, c->len);
        pthread_mutex_lock(&sink.mu);
        s->broken = !ok;
        s->queued -= c->len;
        free(c);
        pthread_cond_broadcast(&sink.cv);
    }
    pthread_mutex_unlock(&sink.mu);
    return NULL;
}

/* At exit: what ddprun's stdio holds flushed, its ends of the pipes closed, and what is queued
 * given SINK_DRAIN_S to go out (a reader that still does not read is then left behind). */
static void sink_finish(void)
{
    fflush(stdout);
    fflush(stderr);
    int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    pthread_mutex_lock(&sink.mu);
    unsigned long long dropped = sink.s[0].dropped + sink.s[1].dropped;
    if (dropped) {
        char note[192];
        int len = snprintf(note, sizeof note, "ddprun: %llu bytes of output were dropped in all: their reader did not "
                           "keep up\n", dropped);
        enqueue(&sink.s[1], note, (size_t)len);
    }
    pthread_mutex_unlock(&sink.mu);
    if (null_fd >= 0) { /* the pipes' last write ends (a command ddprun ran may still hold one) */
        dup2(null_fd, 1);
        dup2(null_fd, 2);
        close(null_fd);
    }
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)SINK_DRAIN_S;
    pthread_mutex_lock(&sink.mu);
    while (sink.s[0].pipe_rd >= 0 || sink.s[1].pipe_rd >= 0 || (sink.s[0].queued && !sink.s[0].broken) ||
           (sink.s[1].queued && !sink.s[1].broken))
        if (pthread_cond_timedwait(&sink.cv, &sink.mu, &until) == ETIMEDOUT)
            break;
    pthread_mutex_unlock(&sink.mu);
}

/* Fd `fd` made the write end of a new pipe, its old output kept as s->real_fd. */
static int divert(int fd, stream *s)
{
    int p[2];
    s->pipe_rd = -1;
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
    for (int i = 0; i < 2; i++)
        if (sink.s[i].real_fd >= 0)
            dup2(sink.s[i].real_fd, i + 1);
}

int output_sink_install(void)
{
    fflush(stdout);
    fflush(stderr);
    for (int fd = 1; fd <= 2; fd++) /* a closed output (ddprun >&-) becomes /dev/null, as writes to it went nowhere */
        if (fcntl(fd, F_GETFD) < 0) {
            int null_fd = open("/dev/null", O_WRONLY);
            if (null_fd >= 0 && null_fd != fd)
                dup2(null_fd, fd), close(null_fd);
        }
    sink.s[0].real_fd = sink.s[1].real_fd = -1;
    if (divert(1, &sink.s[0]) || divert(2, &sink.s[1])) {
        int e = errno;
        undivert();
        fprintf(stderr, "ddprun: cannot set up its output pipes: %s\n", strerror(e));
        return -1;
    }
    sigset_t all, before;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &before); /* the threads take no signal: the poll loop's handler does */
    bool ok = !pthread_create(&sink.reader, NULL, read_pipes, NULL) &&
              !pthread_create(&sink.s[0].writer, NULL, write_stream, &sink.s[0]) &&
              !pthread_create(&sink.s[1].writer, NULL, write_stream, &sink.s[1]);
    pthread_sigmask(SIG_SETMASK, &before, NULL);
    if (!ok) { /* a thread that started waits on a pipe nobody writes to again: harmless */
        undivert();
        fprintf(stderr, "ddprun: cannot start its output threads\n");
        return -1;
    }
    atexit(sink_finish);
    return 0;
}
