/* ddprun_rankwrap.c — the per-rank wrapper: `ddprun --rank-wrapper PROGRAM ARGS...` under mpirun.
 *
 * It exists for two reasons. (1) mpirun cannot give each rank its own environment values, so the
 * wrapper sets the torchrun names RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE from Open MPI's
 * OMPI_COMM_WORLD_* before starting the worker. (2) mpirun's failure report lacks the host for a
 * non-zero exit, so when the worker fails the wrapper writes one DDPRUN_STATUS_MARK line to
 * stderr (rank, host, exit code or signal), which the launcher consumes, then exits the same way
 * the worker did. mpirun signals the whole process group of each rank (odls default), so every
 * signal reaches the worker directly; the wrapper only has to outlive the worker (it survives
 * catchable signals, so a worker saving a checkpoint on SIGTERM is not reported dead early) and
 * never leave it orphaned (the worker gets SIGKILL if the wrapper dies: PR_SET_PDEATHSIG).
 * It must stay transparent: no other output, same exit status as the worker. */
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

static void copy_env(const char *to, const char *from)
{
    const char *v = getenv(from);
    if (v) setenv(to, v, 1);
}

static void ignore_signal(int sig) { (void)sig; }

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

int rank_wrapper_main(int argc, char **argv)
{
    if (argc < 1) {
        fprintf(stderr, "ddprun: %s needs a program to run\n", DDPRUN_RANK_WRAPPER_FLAG);
        return 2;
    }
    copy_env("RANK", "OMPI_COMM_WORLD_RANK");
    copy_env("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK");
    copy_env("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE");
    copy_env("LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE");

    /* Handlers (not SIG_IGN, which exec would pass on) so the worker gets default dispositions. */
    struct sigaction sa = {.sa_handler = ignore_signal};
    sigemptyset(&sa.sa_mask);
    const int survived[] = {SIGUSR1, SIGUSR2, SIGTERM, SIGINT, SIGHUP};
    for (size_t i = 0; i < sizeof survived / sizeof survived[0]; i++) sigaction(survived[i], &sa, NULL);
    pid_t wrapper = getpid();

    pid_t pid = fork();
    if (pid < 0) {
        perror("ddprun: fork");
        return 1;
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != wrapper) _exit(127); /* the wrapper died before prctl took effect */
        execv(argv[0], argv);
        fprintf(stderr, "ddprun: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            perror("ddprun: waitpid");
            return 1;
        }
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;

    char host[256] = "unknown";
    gethostname(host, sizeof host - 1);
    const char *rank = getenv("OMPI_COMM_WORLD_RANK");
    if (WIFSIGNALED(status)) {
        fprintf(stderr, DDPRUN_STATUS_MARK " rank=%s host=%s signal=%d\n", rank ? rank : "-1", host, WTERMSIG(status));
        fflush(stderr);
        die_like(WTERMSIG(status));
    }
    fprintf(stderr, DDPRUN_STATUS_MARK " rank=%s host=%s exit=%d\n", rank ? rank : "-1", host, WEXITSTATUS(status));
    return WEXITSTATUS(status);
}
