/* worker_main.c — ddprun-worker, one training rank. Started by ddprun (through mpirun), or
 * directly by `mpirun -np N ddprun-worker CONFIG [key=value ...]` or Slurm's srun.
 *
 * Owns the process: MPI init/finalize, the torchrun-style environment (RANK, LOCAL_RANK,
 * WORLD_SIZE, LOCAL_WORLD_SIZE), the stop signals, and the exit code (README "Exit codes").
 * Everything else is train_run's. */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collectives/comm.h"
#include "runtime/config.h"
#include "runtime/log.h"
#include "runtime/train.h"

static void on_stop_signal(int sig)
{
    (void)sig;
    train_stop_requested = 1;
}

/* SIGTERM/SIGINT reach a rank directly under srun or a plain kill; ddprun turns them into the
 * configured checkpoint.signal (SIGUSR1 by default), which mpirun forwards. All mean: save, stop. */
static void install_stop_handlers(int configured)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    int sigs[] = {SIGTERM, SIGINT, SIGUSR1, configured};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        sigaction(sigs[i], &sa, NULL);
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
                    "One rank of a ddprun training job; normally started by `ddprun -np N CONFIG.yaml`.\n");
    return DDP_EUSAGE;
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)
        return usage();
    /* Before MPI_Init: a stop signal that arrives during start-up must not kill the rank. */
    install_stop_handlers(SIGUSR1);
    int provided = 0;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "ddprun-worker: MPI_Init failed\n");
        return DDP_ERUNTIME;
    }
    ddp_err err = {0};
    comm *ctl = NULL;
    static config cfg;
    int rc = comm_mpi_create(&ctl, &err);
    if (rc == DDP_OK) {
        log_init(ctl->rank, ctl->size, ctl->host);
        export_torchrun_env(ctl);
        rc = config_load(argv[1], argc - 2, argv + 2, &cfg, &err);
        if (rc != DDP_OK && ctl->rank != 0)
            err.msg[0] = '\0'; /* every rank found the same config error; rank 0 reports it */
    }
    if (rc == DDP_OK) {
        install_stop_handlers(cfg.checkpoint.stop_signal);
        rc = train_run(&cfg, ctl, &err);
    }
    if (rc != DDP_OK && rc != DDP_EPREEMPTED && err.msg[0])
        log_error("%s", err.msg);
    if (ctl)
        ctl->ops->destroy(ctl);
    if (rc == DDP_OK || rc == DDP_EPREEMPTED || rc == DDP_EUSAGE)
        MPI_Finalize();
    /* A runtime failure may leave peers blocked in a collective: exiting non-zero without
     * MPI_Finalize lets mpirun see the failure and end the whole job at once. */
    return rc;
}
