/* ddprun_rankwrap.c — the per-rank wrapper: `ddprun --rank-wrapper PROGRAM ARGS...` under mpirun.
 *
 * It exists for three reasons. (1) mpirun cannot give each rank its own environment values, so the
 * wrapper sets the torchrun names RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE from Open MPI's
 * OMPI_COMM_WORLD_* before starting the worker. (2) A stop signal must never kill a rank that is
 * still starting: the wrapper blocks the stop signals (stop_signals.h) before anything else, the
 * worker inherits the blocked mask across fork and exec (so a signal that arrives while it loads
 * waits until its signal thread takes it), and once the worker exists the wrapper tells ddprun
 * with a DDPRUN_STATUS_MARK "started" line; ddprun holds a stop request until every rank said so.
 * (3) mpirun's failure report lacks the host for a non-zero exit, so when the worker fails the
 * wrapper writes a DDPRUN_STATUS_MARK line (rank, host, exit code or signal), then exits the same
 * way the worker did. Both status lines go to stderr and ddprun consumes them.
 * mpirun signals the whole process group of each rank (odls default), so every signal reaches the
 * worker directly; the wrapper only has to outlive the worker (the stop signals stay blocked here,
 * so a worker saving a checkpoint is not reported dead early) and never leave it orphaned (the
 * worker gets SIGKILL if the wrapper dies: PR_SET_PDEATHSIG). The wrapper gets SIGKILL the same
 * way when its parent, mpirun or its daemon, dies: each rank has a process group of its own, so
 * ddprun killing a stuck mpirun's group (ddprun_job.c) would leave it running. Linux sends that
 * signal when the thread that forked the wrapper ends, not the process: Open MPI 4 forks ranks from
 * its main event loop, which lasts as long as mpirun; one forking from a short-lived thread would
 * kill its ranks at that thread's end. The wrapper must stay transparent: no other output, same
 * exit status as the worker. */
#include "ddprun.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/base/test_fault.h"
#include "launcher/shared/stop_signals.h"

static void copy_env(const char *to, const char *from)
{
    const char *v = getenv(from);
    if (v) setenv(to, v, 1);
}

static void ignore_signal(int sig) { (void)sig; }

/* Test-only (runtime/base/test_fault.h): `stop-at-start:RANK:0:SECONDS` makes rank RANK, before it
 * can take a stop signal, ask ddprun to stop (SIGTERM to DDPRUN_PID) and then take SECONDS more to
 * start: a stop that reaches the job while one of its ranks is still loading. */
static void stop_at_start_fault(void)
{
    test_fault f;
    const char *rank = getenv("OMPI_COMM_WORLD_RANK"), *launcher = getenv("DDPRUN_PID");
    if (!test_fault_get(&f) || strcmp(f.kind, "stop-at-start") != 0 || !rank || atoi(rank) != f.rank || !launcher ||
        atoi(launcher) <= 1)
        return;
    kill((pid_t)atoi(launcher), SIGTERM);
    test_fault_sleep(&f);
}

/* Test-only: `slow-exec:RANK:0:SECONDS` holds rank RANK's worker SECONDS before its exec, after
 * the wrapper said "started": a program whose load stalls (its file system stopped answering). */
static void slow_exec_fault(void)
{
    test_fault f;
    const char *rank = getenv("OMPI_COMM_WORLD_RANK");
    if (test_fault_get(&f) && strcmp(f.kind, "slow-exec") == 0 && rank && atoi(rank) == f.rank)
        test_fault_sleep(&f);
}

/* Dies of sig like the worker did (without dumping a core of the wrapper). */
static void die_like(int sig)
{
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    signal(sig, SIG_DFL);
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, sig);
    sigprocmask(SIG_UNBLOCK, &only, NULL);
    raise(sig);
    _exit(128 + sig);
}

/* One DDPRUN_STATUS_MARK line for ddprun: "rank=R host=H " + what. */
static void report_status(const char *what)
{
    char host[256] = "unknown";
    gethostname(host, sizeof host - 1);
    const char *rank = getenv("OMPI_COMM_WORLD_RANK");
    fprintf(stderr, DDPRUN_STATUS_MARK " rank=%s host=%s %s\n", rank ? rank : "-1", host, what);
    fflush(stderr);
}

int rank_wrapper_main(int argc, char **argv)
{
    pid_t launcher = getppid();
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != launcher) /* mpirun, or its daemon, died before prctl took effect */
        return 1;
    stop_at_start_fault(); /* stands for a slow program load, so it comes before the mask */
    sigset_t stop;
    stop_signals_fill(&stop);
    sigprocmask(SIG_BLOCK, &stop, NULL);
    if (argc < 1) {
        fprintf(stderr, "ddprun: %s needs a program to run\n", DDPRUN_RANK_WRAPPER_FLAG);
        return 2;
    }
    copy_env("RANK", "OMPI_COMM_WORLD_RANK");
    copy_env("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK");
    copy_env("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE");
    copy_env("LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE");

    /* A handler (not SIG_IGN, which exec would pass on) so the worker gets the default. */
    struct sigaction sa = {.sa_handler = ignore_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGHUP, &sa, NULL);
    pid_t wrapper = getpid();

    pid_t pid = fork();
    if (pid < 0) {
        perror("ddprun: fork");
        return 1;
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != wrapper) _exit(127); /* the wrapper died before prctl took effect */
        slow_exec_fault();
        execv(argv[0], argv);
        fprintf(stderr, "ddprun: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    report_status("started");
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            perror("ddprun: waitpid");
            return 1;
        }
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;

    char what[32];
    if (WIFSIGNALED(status)) {
        snprintf(what, sizeof what, "signal=%d", WTERMSIG(status));
        report_status(what);
        die_like(WTERMSIG(status));
    }
    snprintf(what, sizeof what, "exit=%d", WEXITSTATUS(status));
    report_status(what);
    return WEXITSTATUS(status);
}
