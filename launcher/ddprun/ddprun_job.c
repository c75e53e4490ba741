/* ddprun_job.c — runs one mpirun to completion: output piping, signals, exit status.
 *
 * mpirun runs in its own process group with stdin from /dev/null, so a terminal's Ctrl-C reaches
 * only ddprun: Open MPI 4.1 answers SIGINT/SIGTERM by killing every rank at once, which would
 * lose the checkpoint. ddprun instead turns the first SIGINT/SIGTERM (or SIGHUP: a closed terminal
 * or ssh session; left ignored under nohup) into the configured stop
 * signal (SIGUSR1/SIGUSR2, which mpirun forwards to every rank and then waits for them), a
 * second into SIGTERM (hard stop), and a third, or mpirun still there END_AFTER_TERM_S after the
 * SIGTERM (Open MPI's orderly abort waits for the daemons of a host it cannot reach), into
 * SIGKILL to mpirun's process group (the ranks, in groups of their own, die with their parent:
 * ddprun_rankwrap.c). The stop signal waits until every rank's wrapper has said its
 * worker started (ddprun_rankwrap.c): before that mpirun would drop it (no rank yet) or a rank
 * still loading would die of it; a stop that came before mpirun did waits the same way.
 * mpirun gets SIGTERM when ddprun dies (PR_SET_PDEATHSIG), so a killed ddprun leaves no job
 * behind. Output keeps flowing through ddprun_output.c meanwhile.
 * Signal handlers only write to a self-pipe; all work happens in the poll loop. The stop signals
 * are blocked across fork until the child has its default handlers, so one meant for mpirun (a
 * second stop, ddprun's death) is not swallowed by ddprun's handler in the child. Once a rank has
 * given a collective deadline's verdict, or ended on an error that may leave it held (ddprun_output.c),
 * mpirun gets END_AFTER_VERDICT_S to end the job before ddprun ends it (mpirun waits forever for
 * the daemons of a host it can no longer reach, or for a process held in the kernel); the exit
 * code such a rank said it ends with (75 when its checkpoint is complete) is then the job's.
 * This file does not build command lines or map a status to ddprun's exit code. Test-only (runtime/base/
 * test_fault.h): `fork-pause:0:0:SECONDS` holds the child SECONDS in that window. */
#include "ddprun.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runtime/base/clock.h"
#include "runtime/base/test_fault.h"

/* After mpirun exits, how long to wait for stray holders of its pipes before giving up. */
#define DRAIN_AFTER_EXIT_MS 2000
/* After a rank gave a collective deadline's verdict the job is over; mpirun that still has not
 * ended it this long after (it waits for daemons on a host it can no longer reach) is ended by us:
 * SIGTERM, then SIGKILL as long again after. */
#define END_AFTER_VERDICT_S 3.0
/* After the second stop request's SIGTERM, how long mpirun has to end the job before its process
 * group is killed (Open MPI kills its ranks at once; this is for daemons that do not answer). */
#define END_AFTER_TERM_S 10.0

/* The first stop request's signal sent again by the same process within this long is that request
 * again, not a second one. */
#define STOP_REPEAT_S 0.5

static int wake_pipe[2] = {-1, -1};
static volatile sig_atomic_t stop_requests, first_stop;
static pid_t first_sender; /* the process that sent the first stop request (0: the kernel, a terminal) */
static struct timespec first_at;

/* Whether sig repeats the first stop request: GNU timeout, like other supervisors, sends its signal
 * to ddprun and then to ddprun's process group, which ddprun may take as two signals; a second
 * request would end the job before it saved. A terminal's Ctrl-C twice still counts twice. */
static bool repeats_first(int sig, const siginfo_t *si)
{
    if (stop_requests != 1 || sig != first_stop || si->si_code != SI_USER || si->si_pid != first_sender)
        return false;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - first_at.tv_sec) + 1e-9 * (double)(now.tv_nsec - first_at.tv_nsec) < STOP_REPEAT_S;
}

/* A SIGHUP counts as a first stop request only: a closed terminal often sends two (bash's to its
 * jobs, then the kernel's to the foreground group), which must not become the second request
 * that ends the job before it saved. */
static void on_signal(int sig, siginfo_t *si, void *context)
{
    (void)context;
    int saved = errno;
    if (sig != SIGCHLD && !(sig == SIGHUP && stop_requests > 0) && !repeats_first(sig, si) && stop_requests++ == 0) {
        first_stop = sig;
        first_sender = si->si_code == SI_USER ? si->si_pid : 0;
        clock_gettime(CLOCK_MONOTONIC, &first_at);
    }
    char c = (char)sig;
    if (write(wake_pipe[1], &c, 1) < 0) { /* pipe full: a wake-up is pending anyway */ }
    errno = saved;
}

const char *signal_abbrev(int sig)
{
    const char *name = sigabbrev_np(sig);
    static char buf[32];
    if (name) {
        snprintf(buf, sizeof buf, "SIG%s", name);
        return buf;
    }
    snprintf(buf, sizeof buf, "signal %d", sig);
    return buf;
}

int job_signals_seen(void) { return stop_requests; }

int job_first_stop_signal(void) { return first_stop; }

/* The signals ddprun's handler takes. */
static void job_stop_signals(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGHUP);
    sigaddset(set, SIGCHLD);
}

int job_signals_install(void)
{
    /* A closed fd 0, 1 or 2 (ddprun >&-) becomes /dev/null first: else the wake pipe would take it,
     * and the output's redirection (output_sink_install) would then close the wake pipe's end. */
    for (int fd = 0; fd <= 2; fd++)
        if (fcntl(fd, F_GETFD) < 0) {
            int null_fd = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
            if (null_fd >= 0 && null_fd != fd)
                dup2(null_fd, fd), close(null_fd);
        }
    if (pipe2(wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        perror("ddprun: pipe");
        return -1;
    }
    struct sigaction sa = {.sa_sigaction = on_signal};
    job_stop_signals(&sa.sa_mask); /* one handler at a time: stop_requests++ is not atomic */
    sa.sa_flags = SA_RESTART | SA_SIGINFO;
    struct sigaction hup;
    bool nohup = sigaction(SIGHUP, NULL, &hup) == 0 && hup.sa_handler == SIG_IGN; /* nohup ddprun ...: left so */
    if (sigaction(SIGINT, &sa, NULL) || sigaction(SIGTERM, &sa, NULL) || sigaction(SIGCHLD, &sa, NULL) ||
        (!nohup && sigaction(SIGHUP, &sa, NULL))) {
        perror("ddprun: sigaction");
        return -1;
    }
    /* A closed stdout (ddprun ... | head) must not kill the launcher while ranks still run. */
    signal(SIGPIPE, SIG_IGN);
    sigset_t ours; /* a mask inherited from ddprun's parent would hold every stop back, and SIGCHLD */
    job_stop_signals(&ours);
    sigprocmask(SIG_UNBLOCK, &ours, NULL);
    return 0;
}

/* In the child between fork and exec, the stop signals blocked: own process group, pipes, default
 * signal state, and an end when ddprun ends (SIGTERM: mpirun ends the job, as on a second stop
 * request). A signal that came meanwhile is pending, and takes its default action at the unblock. */
static void exec_mpirun(char *const argv[], int out_fd, int err_fd, pid_t launcher, double pause_s)
{
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != launcher) _exit(127); /* ddprun died before prctl took effect */
    if (pause_s > 0) nanosleep(&(struct timespec){(time_t)pause_s, 0}, NULL);
    setpgid(0, 0);
    /* A terminal's Ctrl-C or hang-up that reached ddprun's process group before either setpgid
     * moved this child out of it: ddprun has its own copy and forwards the stop (a SIGHUP that
     * ddprun ignores, under nohup, is ignored here too). A SIGTERM stays pending: only ddprun
     * sends one here (a second stop, its death). */
    struct sigaction hup;
    bool hup_handled = sigaction(SIGHUP, NULL, &hup) == 0 && (hup.sa_flags & SA_SIGINFO) && hup.sa_sigaction == on_signal;
    sigset_t intr;
    sigemptyset(&intr);
    sigaddset(&intr, SIGINT);
    if (hup_handled)
        sigaddset(&intr, SIGHUP);
    while (sigtimedwait(&intr, NULL, &(struct timespec){0, 0}) > 0) {}
    int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null_fd >= 0) dup2(null_fd, 0); /* dup2's copy is inherited, the original closes at exec */
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGCHLD, SIG_DFL);
    if (hup_handled) /* an ignored one stays so */
        signal(SIGHUP, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execvp(argv[0], argv);
    dprintf(2, "ddprun: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

/* What one run has done about stop requests so far. */
typedef struct stop_state {
    bool signalled;   /* stop_signal sent */
    bool terminated;  /* SIGTERM sent (second request) ... */
    double terminated_s; /* ... at this monotonic time */
    bool killed;      /* SIGKILL sent to mpirun's process group */
    bool told_wait;   /* said that the stop signal waits for the ranks to start */
} stop_state;

/* Acts on the stop requests so far (they all belong to this run: launch starts none after one).
 * The first becomes stop_signal once all `ranks` have started, the second ends the job at once,
 * and a third, or the second's END_AFTER_TERM_S passing with mpirun still there, kills mpirun's
 * process group. */
static void act_on_stops(pid_t pid, int ranks, int stop_signal, const output_filter *f, stop_state *s)
{
    int started = output_ranks_started(f);
    if (stop_requests >= 2 && !s->terminated) {
        fprintf(stderr, "ddprun: second stop request: terminating the job now (signal again to kill it)\n");
        kill(pid, SIGTERM);
        s->terminated = true;
        s->terminated_s = monotonic_s();
    }
    if (s->terminated && !s->killed && (stop_requests >= 3 || monotonic_s() >= s->terminated_s + END_AFTER_TERM_S)) {
        if (stop_requests >= 3)
            fprintf(stderr, "ddprun: third stop request: killing mpirun (its ranks die with it)\n");
        else
            fprintf(stderr, "ddprun: mpirun has not ended the job %.0f s after the second stop request (a host may "
                            "be unreachable): killing it (its ranks die with it)\n", END_AFTER_TERM_S);
        kill(-pid, SIGKILL); /* the ranks' wrappers have SIGKILL as their parent's death signal */
        s->killed = true;
    } else if (stop_requests == 1 && !s->signalled && started >= ranks) {
        fprintf(stderr, "ddprun: stop requested: sending %s to all ranks so they checkpoint and exit "
                        "(signal again to stop immediately)\n", signal_abbrev(stop_signal));
        kill(pid, stop_signal);
        s->signalled = true;
    } else if (stop_requests == 1 && !s->signalled && !s->told_wait) {
        fprintf(stderr, "ddprun: stop requested while the ranks start (%d of %d started): they get %s once all "
                        "have (signal again to stop immediately)\n", started, ranks, signal_abbrev(stop_signal));
        s->told_wait = true;
    }
    fflush(stderr);
}

/* mpirun outlived a deadline's verdict (what: which one): ends its process group (the first time
 * politely). */
static void end_stuck_mpirun(pid_t pid, int tries, const char *what)
{
    if (tries == 0)
        fprintf(stderr, "ddprun: mpirun has not ended the job %.0f s after %s (a host may be unreachable, or a "
                        "rank held by storage that stopped answering): terminating it\n", END_AFTER_VERDICT_S,
                what ? what : "the collective deadline");
    kill(-pid, tries == 0 ? SIGTERM : SIGKILL);
    fflush(stderr);
}

/* poll's timeout: none while the job runs, a drain period after mpirun exited, and the bounds on
 * mpirun after a deadline's verdict (ending it when that passed) and after a second stop request
 * (act_on_stops acts when it passed). */
static int wait_ms(const output_filter *f, pid_t pid, bool exited, const stop_state *stops, int *ends)
{
    if (exited) return DRAIN_AFTER_EXIT_MS;
    if (stops->killed) return -1; /* SIGKILL sent: nothing is left to send */
    int ms = -1;
    if (stops->terminated) {
        double left = stops->terminated_s + END_AFTER_TERM_S - monotonic_s();
        ms = left > 0 ? (int)(left * 1000.0) + 1 : 0;
    }
    double seen = output_deadline(f)->seen_s;
    if (seen <= 0) return ms;
    double left = seen + END_AFTER_VERDICT_S * (1 + *ends) - monotonic_s();
    if (left <= 0) {
        end_stuck_mpirun(pid, (*ends)++, output_deadline(f)->what);
        left = END_AFTER_VERDICT_S;
    }
    int verdict_ms = (int)(left * 1000.0) + 1;
    return ms >= 0 && ms < verdict_ms ? ms : verdict_ms;
}

/* Reads what is available on fd into the filter; returns false at EOF or error. */
static bool pump(int fd, bool is_stderr, output_filter *f)
{
    char buf[65536];
    ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
        output_feed(f, is_stderr, buf, (size_t)n);
        return true;
    }
    return n < 0 && (errno == EINTR || errno == EAGAIN);
}

static void close_pair(int fds[2])
{
    close(fds[0]);
    close(fds[1]);
}

int job_run(char *const argv[], int ranks, int stop_signal, job_result *out)
{
    int out_pipe[2], err_pipe[2];
    *out = (job_result){0};
    if (pipe2(out_pipe, O_CLOEXEC)) {
        perror("ddprun: pipe");
        return -1;
    }
    if (pipe2(err_pipe, O_CLOEXEC)) {
        perror("ddprun: pipe");
        close_pair(out_pipe);
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    test_fault pause = {0};
    if (!test_fault_get(&pause) || strcmp(pause.kind, "fork-pause") != 0) pause.seconds = 0;
    sigset_t held, before;
    job_stop_signals(&held);
    sigprocmask(SIG_BLOCK, &held, &before);
    pid_t launcher = getpid();
    pid_t pid = fork();
    if (pid == 0) exec_mpirun(argv, out_pipe[1], err_pipe[1], launcher, pause.seconds);
    sigprocmask(SIG_SETMASK, &before, NULL);
    if (pid < 0) {
        perror("ddprun: fork");
        close_pair(out_pipe);
        close_pair(err_pipe);
        return -1;
    }
    setpgid(pid, pid); /* also in the child: whichever runs first wins the race */
    close(out_pipe[1]);
    close(err_pipe[1]);

    output_filter *f = output_filter_new();
    struct pollfd fds[3] = {{.fd = out_pipe[0], .events = POLLIN},
                            {.fd = err_pipe[0], .events = POLLIN},
                            {.fd = wake_pipe[0], .events = POLLIN}};
    bool exited = false;
    stop_state stops = {0};
    int ends = 0;
    for (;;) {
        if (!exited) act_on_stops(pid, ranks, stop_signal, f, &stops);
        bool pipes_open = fds[0].fd >= 0 || fds[1].fd >= 0;
        if (exited && !pipes_open) break;
        int rc = poll(fds, 3, wait_ms(f, pid, exited, &stops, &ends));
        if (rc < 0 && errno != EINTR) { perror("ddprun: poll"); break; }
        if (rc == 0 && exited) break; /* mpirun is gone and someone else still holds its pipes */
        for (int i = 0; i < 2; i++)
            if (fds[i].fd >= 0 && (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) && !pump(fds[i].fd, i == 1, f)) {
                close(fds[i].fd);
                fds[i].fd = -1;
            }
        if (fds[2].revents & POLLIN) {
            char drain[64];
            while (read(wake_pipe[0], drain, sizeof drain) > 0) {}
        }
        if (!exited && waitpid(pid, &out->wait_status, WNOHANG) == pid) exited = true;
    }
    for (int i = 0; i < 2; i++)
        if (fds[i].fd >= 0) close(fds[i].fd);
    if (!exited && waitpid(pid, &out->wait_status, 0) != pid) { /* only after a poll failure */
        perror("ddprun: waitpid");
        out->wait_status = 1 << 8;
    }
    output_finish(f);
    out->failure = *output_first_failure(f);
    out->ranks_started = output_ranks_started(f);
    out->deadline = *output_deadline(f);
    if (ends > 0 && out->deadline.code > 0) /* ended here, not by the rank that said how it ends */
        out->wait_status = out->deadline.code << 8;
    out->notice = *output_notice(f);
    snprintf(out->rank0_host, sizeof out->rank0_host, "%s", output_rank0_host(f));
    out->signals_received = stop_requests;
    output_filter_free(f);
    return 0;
}
