/* train_job.h — the core of one rank's training job: what every part of it works on (the config,
 * the communicators, the device, the data, the model, the optimizer, the reducer, the batch split
 * and the schedule counters). train.c builds and owns it and runs the step loop on it; the other
 * trainer files read it and keep their own state behind the opaque pointers at its end, each
 * declared and described in its file's header. Must not hold what only one concern uses: that is
 * the concern's own struct. Internal to launcher/trainer/: train.h is the public entry point, and
 * nothing outside this folder includes this header. */
#ifndef DDP_TRAIN_JOB_H
#define DDP_TRAIN_JOB_H

#include "collectives/comm.h"
#include "collectives/reducer.h"
#include "models/model.h"
#include "config/config.h"
#include "runtime/data/dataset.h"
#include "runtime/device/device.h"
#include "runtime/optim/optim.h"
#include "runtime/data/sampler.h"

typedef struct train_job {
    const config *cfg;
    comm *ctl;              /* MPI, host buffers: control traffic, evaluation sums, stop agreement */
    comm *grad_comm;        /* gradient all-reduce: MPI (CPU) or NCCL (CUDA); may equal ctl */
    device *dev;
    dataset train, test;
    sampler smp;
    model *m;
    optimizer *opt;         /* under ZeRO: this rank's shard of the parameters only */
    reducer *red;

    /* this run's split of a step's samples (config_batch_split): data.batch_size and
     * train.grad_accum as set, or train.global_batch's split at this world size */
    int64_t batch;            /* samples per rank per micro-step */
    int64_t accum;            /* micro-steps per optimizer step */

    /* schedule */
    int64_t steps_per_epoch;  /* optimizer steps in a whole epoch at this world size */
    int64_t total_steps;      /* optimizer steps planned for the job (LR schedule horizon) */
    int64_t step;             /* optimizer steps done */
    int64_t epoch;            /* current epoch, 0-based */
    double t_start;           /* monotonic time this run's loop began */
    int64_t start_step;       /* t->step when this run's loop began (after a resume) */

    /* each concern's own state, owned and described by its file */
    struct train_staging *staging; /* train_replica.c: the batch staging buffers */
    struct train_watch *watch;     /* train_observe.c: the step's phase timers and host-wait count */
    struct train_finite *finite;   /* train_finite.c: per-step loss sums and gradient norms, findings */
    struct train_log *log;         /* train_log.c: metrics.jsonl, the progress line's accounting, evaluations */
    struct dir_lock *run_lock;     /* train_lock.c: rank 0's lock of run.dir */
    struct train_ranks *ranks;     /* train_ranks.c: every rank's figures, the straggler rule */
    struct train_tb *tb;           /* train_tb.c: NULL without run.tensorboard (and off rank 0) */
    struct train_ckpt *ckpt;       /* train_ckpt.c: the writer, saved buffers, the save clock */
    struct train_budget *budget;   /* train_budget.c: the preemption notice watch, this run's step time */
    struct train_prof *prof;       /* train_profile.c: NULL when train.profile_steps records nothing */
    struct train_fault *fault;     /* train_fault.c: test-only hooks; NULL when none is asked for */
    struct train_zero *zero;       /* train_zero.c: ZeRO-3's parameter shard and windows; NULL otherwise */
} train_job;

#endif
