/* fake_worker.c — a stand-in for ddprun-worker / ddprun-bench in the launcher tests.
 *
 * ddprun starts it under mpirun (DDPRUN_WORKER / DDPRUN_BENCH point here). It needs no MPI: it
 * reads its rank from OMPI_COMM_WORLD_RANK and behaves as the mode asks, so each launcher
 * behaviour (tagging, failures, signals, restarts, environment) can be provoked on purpose.
 * The mode is env FAKE_WORKER_MODE, else argv[1] (as in `ddprun bench MODE`).
 * Modes: hello | env | exit:R:C (rank R exits C, others wait) | all-exit:C | kill:R (rank R
 * SIGKILLs itself) | wait-signal (print "ready", exit 75 on SIGUSR1) | ignore-signal (print
 * "ready", ignore SIGUSR1, wait) | fail-first (rank 1 exits 3 when DDPRUN_RESTART_COUNT is 0) |
 * fail-first-then-wait (the same, then wait-signal on a restart) | unterminated-exit:C (stderr's
 * last output has no newline, then exit C) | chatty-wait (wait-signal, writing 1 KiB lines to stdout
 * as fast as they go out meanwhile) | wait-held (a stop answered as a worker held past its deadline
 * answers it: rank 0 says it ends the job with exit 75, then every rank stays, SIGTERM ignored,
 * as one held in the kernel would). Ranks that "wait" give up after
 * 60 s so a launcher that fails to stop them shows up as a hang-guard failure, not a stuck test. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launcher/shared/rank_ends.h"
#include "launcher/shared/stop_signals.h"

static volatile sig_atomic_t got_signal;

static void on_signal(int sig) { got_signal = sig; }

static void wait_up_to(int seconds)
{
    for (int i = 0; i < seconds * 20 && !got_signal; i++) usleep(50000);
}

/* ddprun starts a rank program with the stop signals blocked: like ddprun-worker, take them once
 * ready, here with the handler (or SIG_IGN) the mode wants, so a stop that came during the start
 * is delivered now. */
static void take_stop_signals(const char *mode)
{
    if (strstr(mode, "wait"))
        signal(SIGUSR1, on_signal);
    else if (!strcmp(mode, "ignore-signal"))
        signal(SIGUSR1, SIG_IGN);
    sigset_t stop;
    stop_signals_fill(&stop);
    sigprocmask(SIG_UNBLOCK, &stop, NULL);
}

static const char *env_or(const char *name, const char *fallback)
{
    const char *v = getenv(name);
    return v ? v : fallback;
}

int main(int argc, char **argv)
{
    const char *mode = env_or("FAKE_WORKER_MODE", argc > 1 ? argv[1] : "hello");
    take_stop_signals(mode);
    int rank = atoi(env_or("OMPI_COMM_WORLD_RANK", "-1"));
    int size = atoi(env_or("OMPI_COMM_WORLD_SIZE", "-1"));
    int r, code;
    setvbuf(stdout, NULL, _IOLBF, 0);

    if (!strcmp(mode, "hello")) {
        printf("hello from rank %d of %d\n", rank, size);
        fprintf(stderr, "note on stderr from rank %d\n", rank);
        return 0;
    }
    if (!strcmp(mode, "env")) {
        printf("env RANK=%s LOCAL_RANK=%s WORLD_SIZE=%s LOCAL_WORLD_SIZE=%s OMP_NUM_THREADS=%s\n",
               env_or("RANK", "unset"), env_or("LOCAL_RANK", "unset"), env_or("WORLD_SIZE", "unset"),
               env_or("LOCAL_WORLD_SIZE", "unset"), env_or("OMP_NUM_THREADS", "unset"));
        return 0;
    }
    if (sscanf(mode, "exit:%d:%d", &r, &code) == 2) {
        if (rank == r) {
            usleep(200000);
            return code;
        }
        wait_up_to(60);
        return 0;
    }
    if (sscanf(mode, "all-exit:%d", &code) == 1) return code;
    if (sscanf(mode, "unterminated-exit:%d", &code) == 1) {
        fputs("no newline at the end", stderr);
        return code;
    }
    if (sscanf(mode, "kill:%d", &r) == 1) {
        if (rank == r) {
            usleep(200000);
            raise(SIGKILL);
        }
        wait_up_to(60);
        return 0;
    }
    if (!strcmp(mode, "fail-first-then-wait")) {
        const char *count = env_or("DDPRUN_RESTART_COUNT", "unset");
        if (!strcmp(count, "0") && rank == 1) return 3;
        if (!strcmp(count, "0")) { wait_up_to(60); return 0; }
        mode = "wait-signal";
    }
    if (!strcmp(mode, "chatty-wait")) {
        char line[1024];
        memset(line, 'x', sizeof line - 1);
        line[sizeof line - 1] = '\0';
        printf("ready rank %d\n", rank);
        for (int i = 0; i < 60 * 1000 * 1000 && !got_signal; i++) /* up to a minute at 1 us a line */
            puts(line);
        if (got_signal != SIGUSR1) return 1;
        printf("rank %d got SIGUSR1, checkpoint saved\n", rank);
        return 75;
    }
    if (!strcmp(mode, "wait-signal")) {
        printf("ready rank %d\n", rank);
        wait_up_to(60);
        if (got_signal != SIGUSR1) return 1;
        usleep(300000); /* a short "save": ddprun must wait for it */
        printf("rank %d got SIGUSR1, checkpoint saved\n", rank);
        return 75;
    }
    if (!strcmp(mode, "wait-held")) {
        printf("ready rank %d\n", rank);
        wait_up_to(60);
        if (rank == 0 && got_signal == SIGUSR1)
            fprintf(stderr, "[rank 0 fake] error: " RANK_END_STOP_UNANSWERED "3 s (ddp.timeout_s): this rank was "
                            "held" RANK_END_CODE "75: the last checkpoint is complete)\n");
        signal(SIGTERM, SIG_IGN);
        got_signal = 0;
        wait_up_to(60);
        return 1;
    }
    if (!strcmp(mode, "ignore-signal")) {
        printf("ready rank %d\n", rank);
        wait_up_to(60);
        return 0;
    }
    if (!strcmp(mode, "fail-first")) {
        const char *count = env_or("DDPRUN_RESTART_COUNT", "unset");
        if (!strcmp(count, "0") && rank == 1) return 3;
        if (!strcmp(count, "0")) { wait_up_to(60); return 0; }
        printf("attempt with DDPRUN_RESTART_COUNT=%s MAX=%s ok\n", count, env_or("DDPRUN_MAX_RESTARTS", "unset"));
        return 0;
    }
    fprintf(stderr, "fake_worker: unknown mode %s\n", mode);
    return 2;
}
