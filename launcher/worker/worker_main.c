/* worker_main.c — ddprun-worker, one training rank. Started by ddprun (through mpirun), or
 * directly by `mpirun -np N ddprun-worker CONFIG [key=value ...]` or Slurm's srun.
 * `ddprun-worker --plan N CONFIG [key=value ...]` (what `ddprun plan` runs, without mpirun) prints
 * the memory plan of a job on N ranks and exits, before MPI or any device is touched.
 *
 * Owns the process: MPI init/finalize, the torchrun-style environment (RANK, LOCAL_RANK,
 * WORLD_SIZE, LOCAL_WORLD_SIZE), the stop requests (signals, and the cloud's preemption notice
 * watched by each node's local rank 0) and their deadline, and the exit code (README "Exit codes").
 * Everything else is train_run's. */
#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime/base/activity.h"
#include "runtime/base/affix.h"
#include "runtime/base/clock.h"
#include "runtime/base/mpi_thread.h"
#include "runtime/base/test_fault.h"
#include "collectives/comm.h"
#include "config/config.h"
#include "runtime/base/log.h"
#include "slurm_task.h"
#include "runtime/cloud/cloud_notice.h"
#include "launcher/trainer/train.h"
#include "launcher/trainer/train_agree.h"
#include "launcher/shared/rank_ends.h"
#include "launcher/shared/stop_signals.h"

/* The stop signals (stop_signals.h: "checkpoint and stop") are blocked in every thread and
 * received by one thread of their own. A signal handler would run on whichever thread the kernel
 * picks, interrupting system calls there, and Open MPI's shared-memory transport does not survive
 * that: a process_vm_readv cut short by a signal corrupted the heap about once in ten stops at
 * np=2. ddprun forwards SIGTERM/SIGINT as checkpoint.signal; under srun or a plain kill the rank
 * gets them directly. Under ddprun they arrive blocked already (the rank wrapper's mask, inherited
 * across exec), so a stop during the program's load waits for the thread; started by mpirun or srun
 * directly, one in the moments before main blocks them ends the rank by the signal's default. */
static sigset_t stop_signals;

/* The stop request's deadline: ddp.timeout_s once the config is read (before: start_timeout_s;
 * during a resume, the resume's own, then ddp.timeout_s from its end: train_resume_limit_s). A
 * request the ranks have not agreed on by then cannot be answered — a rank is held where the stop
 * agreement cannot reach it (an open() on a mount that stopped answering, a device call that never
 * returns) — and ends the job from here. A rank waiting in a collective at that moment is held by
 * a peer: it gives the holder STOP_HELD_GRACE_S to speak first and end the job, then ends it too.
 * Of the ranks held on their own, rank 0 speaks first (the others wait STOP_RANK0_FIRST_S): it
 * alone knows whether its last checkpoint save is complete, which makes the job's exit code. */
static volatile double stop_timeout_s;
static int stop_rank;
/* MPI's start (MPI_Init, the communicator and its watch, all collective) has no deadline of its
 * own: a rank whose program never got to it (its exec stalled on a mount) would hold every other
 * rank there forever. The signal thread ends the rank once it outlasts start_timeout_s. */
static double mpi_start_at;
static volatile sig_atomic_t mpi_started;
#define STOP_HELD_GRACE_S 3
#define STOP_RANK0_FIRST_S 1

static _Noreturn void end_unanswered_stop(double waited_s, const char *limit)
{
    char doing[512];
    bool held = activity_get(doing, sizeof doing);
    if (held || stop_rank != 0) {
        nanosleep(&(struct timespec){held ? STOP_HELD_GRACE_S : STOP_RANK0_FIRST_S, 0}, NULL);
        activity_get(doing, sizeof doing);
    }
    int code = train_checkpoint_safe ? DDP_EPREEMPTED : DDP_ERUNTIME;
    log_error(RANK_END_STOP_UNANSWERED "%.0f s (%s): this rank was %s" RANK_END_CODE "%d: %s)", waited_s, limit,
              doing, code, code == DDP_EPREEMPTED ? "the last checkpoint is complete, resume with the same command"
              : stop_rank == 0       ? "no checkpoint of this job to resume from"
                                     : "rank 0 knows whether a checkpoint of this job is complete");
    _exit(code);
}

static _Noreturn void end_unstarted_mpi(double waited_s)
{
    log_error(RANK_END_START_UNFINISHED "%.0f s (ddp.timeout_s): a "
              "rank of the job never reached it (its program or libraries on a stalled file system, its host "
              "unreachable); ending the job", waited_s);
    _exit(DDP_ERUNTIME);
}

static void *stop_signal_thread(void *arg)
{
    (void)arg;
    double asked_at = 0;
    bool resuming = false;
    for (;;) {
        struct timespec tick = {1, 0}; /* how often the deadlines are looked at */
        if (sigtimedwait(&stop_signals, NULL, &tick) > 0 && train_stop_requested < TRAIN_STOP_SIGNAL)
            train_stop_requested = TRAIN_STOP_SIGNAL;
        if (!mpi_started && stop_timeout_s > 0 && monotonic_s() - mpi_start_at > stop_timeout_s)
            end_unstarted_mpi(monotonic_s() - mpi_start_at);
        double now = monotonic_s(), resume_limit_s = train_resume_limit_s;
        if (resuming && resume_limit_s == 0 && asked_at > 0)
            asked_at = now; /* the resume ended: from here the stop is answerable within ddp.timeout_s */
        resuming = resume_limit_s > 0;
        if (train_stop_requested == TRAIN_STOP_NONE || train_stop_answered)
            continue; /* a notice or a test fault asks too: the same deadline */
        if (asked_at == 0)
            asked_at = now;
        if (stop_timeout_s > 0 && now - asked_at > (resuming ? resume_limit_s : stop_timeout_s))
            end_unanswered_stop(now - asked_at, resuming ? "twice the resume's collective deadline, while resuming"
                                                         : "ddp.timeout_s");
    }
    return NULL;
}

/* Must run before MPI_Init and before any other thread exists, so every thread inherits the mask. */
static int start_stop_signal_thread(void)
{
    stop_signals_fill(&stop_signals);
    pthread_t tid;
    if (pthread_sigmask(SIG_BLOCK, &stop_signals, NULL) != 0 ||
        pthread_create(&tid, NULL, stop_signal_thread, NULL) != 0)
        return -1;
    pthread_detach(tid);
    return 0;
}

/* A notice is a stop request like a signal: the stop agreement makes it every rank's, and
 * TRAIN_STOP_NOTICE, the largest value, lets rank 0 say what it was. */
static void on_preemption_notice(const char *what, void *arg)
{
    (void)arg;
    log_warn(CLOUD_NOTICE_STOP "%s; checkpointing and stopping", what);
    train_stop_requested = TRAIN_STOP_NOTICE;
}

/* One watch per node (its local rank 0): every node of a job is a machine the cloud may take, and
 * ddprun runs on one node only, so the ranks do it. */
static int start_notice_watch(const config *cfg, const comm *ctl, notice_watch **watch, ddp_err *err)
{
    *watch = NULL;
    if (ctl->local_rank != 0)
        return DDP_OK;
    return notice_watch_start(cfg->checkpoint.preemption_notice, cfg->checkpoint.notice_poll_s,
                              on_preemption_notice, NULL, watch, err);
}

static void export_torchrun_env(const comm *c)
{
    char v[32];
    snprintf(v, sizeof v, "%d", c->rank);
    setenv("RANK", v, 1);
    snprintf(v, sizeof v, "%d", c->local_rank);
    setenv("LOCAL_RANK", v, 1);
    snprintf(v, sizeof v, "%d", c->size);
    setenv("WORLD_SIZE", v, 1);
    snprintf(v, sizeof v, "%d", c->local_size);
    setenv("LOCAL_WORLD_SIZE", v, 1);
}

static int usage(void)
{
    fprintf(stderr, "usage: ddprun-worker CONFIG.yaml [key.path=value ...]\n"
                    "       ddprun-worker --plan N CONFIG.yaml [key.path=value ...]\n"
                    "One rank of a ddprun training job; normally started by `ddprun -np N CONFIG.yaml`.\n"
                    "--plan: print the memory plan of the job on N ranks (`ddprun plan`) and exit.\n");
    return DDP_EUSAGE;
}

/* --plan N CONFIG [overrides]: no MPI, no device. */
static int plan_main(int argc, char **argv)
{
    char *end = NULL;
    long world = argc >= 4 ? strtol(argv[2], &end, 10) : 0;
    if (argc < 4 || !end || *end || world < 1 || world > 1000000)
        return usage();
    static config cfg;
    ddp_err err = {0};
    int rc = config_load(argv[3], argc - 4, argv + 4, &cfg, &err);
    if (rc == DDP_OK)
        rc = train_plan(&cfg, (int)world, stdout, &err);
    if (rc != DDP_OK)
        fprintf(stderr, "ddprun plan: %s\n", err.msg);
    return rc;
}

/* The deadline of the start-up, until every rank has read the config and agreed on it:
 * ddp.timeout_s as the command line's overrides set it, else the key's default. The file is not
 * read here: its read is what may stall (a mount that stopped answering), holding every other rank
 * in the first agreement. An override the load refuses leaves the default; config_load then names
 * it on every rank. */
static double start_timeout_s(int n, char *const overrides[])
{
    static const char key[] = "ddp.timeout_s=";
    char **given = calloc((size_t)n + 1, sizeof *given);
    int n_given = 0;
    for (int i = 0; given && i < n; i++)
        if (has_prefix(overrides[i], key))
            given[n_given++] = overrides[i];
    static config only;
    ddp_err err = {0};
    if (!given || config_load(NULL, n_given, given, &only, &err) != DDP_OK)
        config_load(NULL, 0, NULL, &only, &err);
    free(given);
    return only.ddp.timeout_s;
}

/* The start-up's agreements under start_timeout_s, named in a verdict as the start-up's. */
static int start_under_deadline(comm *ctl, ddp_err *err)
{
    snprintf(ctl->label, sizeof ctl->label, "config agreement");
    snprintf(ctl->phase, sizeof ctl->phase, "start-up");
    int rc = comm_mpi_set_timeout(ctl, stop_timeout_s, err);
    mpi_started = 1; /* from here, the watch's deadline or an MPI error ends a stalled start */
    return rc;
}

/* Started by srun itself: MPI must see the same tasks Slurm started (slurm_task.h). */
static int check_srun_task(const comm *ctl, ddp_err *err)
{
    slurm_task task;
    if (!slurm_task_from_env(&task))
        return DDP_OK;
    int rc = slurm_task_check(&task, ctl->rank, ctl->size, ctl->local_rank, err);
    if (rc == DDP_OK && ctl->rank == 0)
        log_info("started by srun: %d tasks, MPI ranks and local ranks are Slurm's task and local ids", task.ntasks);
    return rc;
}

/* Every rank's verdict on the start each rank made alone (the srun check, reading the config): a
 * rank that failed where the others did not (a config file missing on its host only) must end the
 * job, not leave them waiting for it in their first collective. DDP_OK when every rank succeeded;
 * else this rank's own error, or, on a rank that succeeded, the first failed rank's status with no
 * message, after train_agree_bystander_pause (so ddprun names the failed rank). A failed rank keeps
 * its message unless the first failed rank's says the same (all ranks read one config the same
 * way), so one rank reports a shared error and each another. */
static int agree_on_start(comm *ctl, int mine, ddp_err *err)
{
    int32_t first, status;
    char said[sizeof err->msg]; /* the first failed rank's message */
    ddp_err e = {0};
    int rc = comm_first_failure(ctl, mine, &first, &status, &e);
    if (rc == DDP_OK && first >= 0) {
        memcpy(said, err->msg, sizeof said);
        rc = ctl->ops->broadcast(ctl, said, sizeof said, DT_UINT8, first, NULL, &e);
    }
    if (rc != DDP_OK)
        return mine != DDP_OK ? mine : ddp_fail(err, rc, "%s", e.msg);
    if (first < 0)
        return DDP_OK;
    if (mine == DDP_OK || (ctl->rank != first && !strncmp(said, err->msg, sizeof said)))
        err->msg[0] = '\0';
    if (mine == DDP_OK)
        train_agree_bystander_pause();
    return mine != DDP_OK ? mine : status;
}

/* Every rank loaded the same settings: each reads the YAML on its own host (and again at each
 * restart), and ranks stepping with other values would drift apart silently. Rank 0's
 * SETTINGS_RANKS text reaches every rank; one whose own differs names the settings. */
static int agree_on_config(comm *ctl, const config *cfg, ddp_err *err)
{
    static char rank0[1 << 16];
    char *mine = config_settings(cfg, SETTINGS_RANKS), differ[1024];
    int64_t len = mine ? (int64_t)strlen(mine) : -1;
    ddp_err e = {0};
    int rc = ctl->ops->broadcast(ctl, &len, 1, DT_INT64, 0, NULL, &e);
    if (rc == DDP_OK && (len < 0 || len >= (int64_t)sizeof rank0))
        rc = ddp_fail(&e, DDP_ERUNTIME, "rank 0's settings: %s", len < 0 ? "out of memory" : "too long to compare");
    if (rc == DDP_OK && ctl->rank == 0)
        memcpy(rank0, mine, (size_t)len);
    if (rc == DDP_OK)
        rc = ctl->ops->broadcast(ctl, rank0, (size_t)len, DT_UINT8, 0, NULL, &e);
    if (rc != DDP_OK) {
        free(mine);
        return ddp_fail(err, rc, "comparing the ranks' settings: %s", e.msg);
    }
    int same = DDP_OK;
    if (!mine)
        same = ddp_fail(err, DDP_ERUNTIME, "out of memory for the settings");
    else if (config_settings_changes(rank0, (size_t)len, cfg, SETTINGS_RANKS, differ, sizeof differ) > 0)
        same = ddp_fail(err, DDP_EUSAGE, "%s with its overrides gives this rank other settings than rank 0's: %s; "
                        "every host must read the same config", cfg->source[0] ? cfg->source : "the config", differ);
    free(mine);
    return agree_on_start(ctl, same, err);
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)
        return usage();
    if (strcmp(argv[1], "--plan") == 0)
        return plan_main(argc, argv);
    /* Before MPI_Init: a stop signal that arrives during start-up must not kill the rank, and
     * MPI's start has the start-up's deadline. */
    stop_timeout_s = start_timeout_s(argc - 2, argv + 2);
    mpi_start_at = monotonic_s();
    activity_set("starting MPI (MPI_Init, the first collectives)");
    if (start_stop_signal_thread() != 0) {
        fprintf(stderr, "ddprun-worker: cannot start the signal thread\n");
        return DDP_ERUNTIME;
    }
    int provided = 0;
    if (MPI_Init_thread(&argc, &argv, DDP_MPI_THREAD_LEVEL, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "ddprun-worker: MPI_Init failed\n");
        return DDP_ERUNTIME;
    }
    ddp_err err = {0};
    comm *ctl = NULL;
    static config cfg;
    int rc = comm_mpi_create(&ctl, &err);
    if (rc == DDP_OK) {
        log_init(ctl->rank, ctl->host);
        test_fault_set_rank(ctl->rank);
        stop_rank = ctl->rank;
        export_torchrun_env(ctl);
        rc = start_under_deadline(ctl, &err);
    }
    if (rc == DDP_OK)
        rc = check_srun_task(ctl, &err);
    if (rc == DDP_OK)
        rc = config_load(argv[1], argc - 2, argv + 2, &cfg, &err);
    if (ctl)
        rc = agree_on_start(ctl, rc, &err);
    if (rc == DDP_OK)
        rc = agree_on_config(ctl, &cfg, &err);
    if (rc == DDP_OK)
        rc = comm_mpi_set_timeout(ctl, cfg.ddp.timeout_s, &err);
    if (rc == DDP_OK) {
        stop_timeout_s = cfg.ddp.timeout_s;
        ctl->label[0] = ctl->phase[0] = '\0';
    }
    notice_watch *watch = NULL;
    if (rc == DDP_OK)
        rc = start_notice_watch(&cfg, ctl, &watch, &err);
    if (rc == DDP_OK) {
        rc = train_run(&cfg, ctl, watch, &err);
        train_stop_answered = 1; /* the job is over: what follows is the exit itself */
        if (rc == DDP_ENONFINITE && ctl->rank != 0)
            err.msg[0] = '\0'; /* every rank agreed on the same finding; rank 0 reports it */
    }
    notice_watch_stop(watch);
    if (rc != DDP_OK && rc != DDP_EPREEMPTED && err.msg[0])
        log_error("%s", err.msg);
    if (ctl)
        ctl->ops->destroy(ctl);
    if (rc == DDP_OK || rc == DDP_EPREEMPTED || rc == DDP_ENONFINITE) /* every rank agreed to end here */
        MPI_Finalize();
    /* A failure may be this rank's alone (a usage error too: the data missing on its host), with
     * peers blocked in a collective, where MPI_Finalize would wait for them: exiting non-zero
     * without it lets mpirun see the failure and end the whole job at once. */
    return rc;
}
