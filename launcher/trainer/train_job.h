/* train_job.h — the state of one rank's training job, shared by the files that implement it
 * (train.c: setup and the step loop; train_replica.c: what the loop, checkpoints and evaluation
 * share about the replica; train_ckpt.c: saving and resuming; train_log.c: progress, metrics and
 * evaluation; train_ranks.c: the per-rank figures and stragglers; train_tb.c: TensorBoard's event
 * file; train_sample.c: text samples; train_zero.c: ZeRO-1's sharded
 * optimizer; train_profile.c and train_profile_report.c: train.profile_steps). Internal to
 * launcher/trainer/: train.h is the public entry point, and nothing outside this folder includes
 * this header. */
#ifndef DDP_TRAIN_JOB_H
#define DDP_TRAIN_JOB_H

#include <stdio.h>

#include "collectives/comm.h"
#include "collectives/reducer.h"
#include "models/model.h"
#include "config/config.h"
#include "runtime/data/dataset.h"
#include "runtime/ckpt/ckpt.h"
#include "runtime/cloud/cloud_notice.h"
#include "runtime/device/device.h"
#include "runtime/device/device_prof.h"
#include "runtime/optim/optim.h"
#include "runtime/data/sampler.h"

/* What train_finite.c found non-finite, in the order of a step (a note's rank among notes of one step). */
typedef enum {
    FINITE_LOSS, FINITE_GRAD_NORM, FINITE_EVAL_LOSS, FINITE_LOGITS, FINITE_PARAMS, FINITE_OPT_STATE
} finite_what;

/* Sums of squares the check before a checkpoint takes: the parameters and up to three state buffers. */
#define FINITE_SUMS 4

/* train_finite.c's state: each step's sums since the last drain, on the device, and what was found. */
typedef struct finite_record {
    float *stats;             /* device float[2 * cap]: per recorded step, its (loss sum, correct count) */
    double *norms;            /* device double[cap]: per recorded step, the gradient sum of squares (norms_on) */
    double *sums;             /* device double[FINITE_SUMS]: the check before a checkpoint */
    float *host_stats;        /* host copies for a drain */
    double *host_norms;
    int64_t cap, used;        /* slots, and steps recorded since the last drain (the latest is t->step) */
    bool norms_on;            /* the steps compute the gradient norm (optimizer.grad_clip > 0) */
    double loss_sum, correct_sum;  /* drained since the last progress line */
    double norm_sum;          /* the gradient norms drained since the last progress line (norms_on) */
    int64_t norm_steps;
    int64_t key;              /* this rank's earliest note (train_finite.c's encoding), 0 when none */
} finite_record;

/* One rank's figures for a progress interval, per step (train_ranks.c); memory since the job began. */
typedef struct rank_figures {
    double step_ms;     /* wall time, evaluation, log lines and text samples left out */
    double wait_ms;     /* waiting in collectives: the gradient wait (device timer) and the stop agreement */
    double data_ms;     /* loading and uploading batches */
    double peak_bytes;  /* device_memory_peak */
} rank_figures;

/* This rank's times since the last progress line: train.c adds, train_ranks.c takes. */
typedef struct rank_step_time {
    double step_s, wait_s, data_s;
    int64_t steps;
} rank_step_time;

/* The named phases of a training step, which the step enters and leaves and the observers
 * (train_observe.c: profiler, per-rank timers, host-wait count, deadline labels, trace, faults)
 * react to. STEP is one iteration of the loop; WORK its own work as the per-rank figures count it
 * (the micro-steps and the update); AGREE the stop agreement after it. */
typedef enum step_phase {
    PHASE_STEP, PHASE_WORK, PHASE_DATA, PHASE_COMPUTE, PHASE_GRADIENT_WAIT, PHASE_OPTIMIZER, PHASE_LOG, PHASE_SAMPLE,
    PHASE_AGREE, STEP_PHASES
} step_phase;

/* What the observers remember between a phase's enter and its leave. */
typedef struct step_watch {
    double work_t0, data_t0, agree_t0, wait_t0;
    int prof[STEP_PHASES];  /* the profiler's range or phase id */
} step_watch;


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
    bool zero;              /* ddp.zero 1 over more than one rank */
    bool budget_checked;    /* rank 0: the preemption budget was checked (train_budget.c) */
    bool ckpt_clock_due;    /* this step: rank 0's clock says checkpoint.every_minutes is due (all ranks agree) */
    int stop_reason;        /* TRAIN_STOP_*: what the ranks agreed to stop for */
    device_timer *comm_exposed;  /* compute-stream time from end of backward to reduced gradients */
    notice_watch *notice;   /* this node's preemption notice watch, NULL when none (train_ckpt.c's budget) */

    /* this run's split of a step's samples (config_batch_split): data.batch_size and
     * train.grad_accum as set, or train.global_batch's split at this world size */
    int64_t batch;            /* samples per rank per micro-step */
    int64_t accum;            /* micro-steps per optimizer step */

    /* batch staging: t->batch samples of inputs and of targets, as m->io.sample lays
     * them out (the bytes dataset_gather produces) */
    int64_t *idx;
    void *inputs_host, *targets_host;
    void *inputs_dev, *targets_dev;

    /* schedule */
    int64_t steps_per_epoch;  /* optimizer steps in a whole epoch at this world size */
    int64_t total_steps;      /* optimizer steps planned for the job (LR schedule horizon) */
    int64_t step;             /* optimizer steps done */
    int64_t epoch;            /* current epoch, 0-based */
    int restart_count;
    int world_at_save;        /* world size recorded in the checkpoint we resumed from, 0 if none */

    /* accounting since the last log line */
    double t_last_log, samples_acc;
    int64_t steps_acc;
    /* times the host waited for the device inside steps since the last log line, from each batch
     * upload to the end of the step's update (log lines, evaluation and checkpoints excluded) */
    uint64_t step_host_waits, waits_mark;
    rank_step_time mine;      /* this rank's step, wait and data times since the last log line */
    step_watch watch;         /* train_observe.c's */
    int64_t staged_rows;      /* rows of idx the current micro-step trains on */
    struct train_ranks *ranks; /* train_ranks.c's state */
    struct train_tb *tb;      /* train_tb.c's state; NULL without run.tensorboard (and off rank 0) */
    double t_start;
    int64_t start_step;       /* t->step when this run's loop began (after a resume) */
    double run_step_s;        /* this run's steps' time as t->mine counts it, never reset */
    double last_ckpt_time;
    bool evaluated;           /* the test set was evaluated at least once */
    int64_t eval_step;        /* the step of the latest evaluation */
    double last_test_loss, last_test_acc;  /* the latest evaluation; accuracy only for classifiers */

    float fault_value;      /* test-only DDP_TEST_FAULT nan/inf: the value the next gradient gets */
    finite_record finite;   /* train_finite.c: per-step loss sums and gradient norms, what was non-finite */
    struct dir_lock *run_lock; /* rank 0: run.dir/ddprun.lock, held while the job runs */
    FILE *metrics;          /* rank 0: run.dir/metrics.jsonl */
    char metrics_path[CFG_PATH_MAX + 32];
    long long metrics_bytes;  /* its size after the last line written whole */
    FILE *trace;            /* test-only: DDP_TEST_TRACE_DIR, every trained sample index */
    void *ckpt;             /* train_ckpt.c's state */
    struct train_prof *prof; /* train_profile.c's state; NULL when train.profile_steps records nothing */
} train_job;

/* train_replica.c: makes every rank's parameters rank 0's (no communication on one rank), then
 * tells the model its parameters changed (train_params_changed). */
int train_broadcast_params(train_job *t, ddp_err *err);
/* train_replica.c: the model's parameters were set or stepped: the model rebuilds what it derives
 * from them (precision bf16: the stochastically rounded bf16 copy, keyed by run.seed and the
 * optimizer steps done, so a resumed run computes with the copy the uninterrupted run had). */
int train_params_changed(train_job *t, ddp_err *err);
/* train_replica.c: the staging buffers (idx, inputs/targets on host and device) for
 * t->batch samples as m->io.sample lays them out; train.c frees them. */
int train_alloc_staging(train_job *t, ddp_err *err);
/* train_replica.c: gathers samples t->idx[0..rows) of data into the staging buffers, uploads them
 * and describes them as b. */
int train_stage_batch(train_job *t, const dataset *data, int64_t rows, model_batch *b, ddp_err *err);
/* train_log.c. Rank 0 takes run.dir's lock (one job per run.dir, runtime/base/dir_lock.h), every
 * rank learns the verdict; DDP_EUSAGE naming the holder when another job has it (rank 0 reports
 * it). Called before the resume without create (a run.dir that exists is locked before its
 * checkpoints are read; a missing one is not created by a job that may yet be refused), then with
 * create before anything is written. */
int train_log_lock_run_dir(train_job *t, bool create, ddp_err *err);
int train_log_open(train_job *t, ddp_err *err);
void train_log_header(train_job *t);
int train_log_progress(train_job *t, double lr, ddp_err *err);
int train_evaluate(train_job *t, ddp_err *err);
/* Rank 0: metrics.jsonl made durable (fsync) and closed; an error names it. */
int train_log_finish(train_job *t, ddp_err *err);
/* Closes what is still open, on any path (no error reported). */
void train_log_close(train_job *t);

/* train_plan.c: the header's memory plan line, from the built model and reducer. */
void train_log_memory_plan(const train_job *t);
/* train.c: what the model is made with, from the config (its model section; bf16 under precision
 * bf16). */
model_opts train_model_opts(const config *c);

/* train_ranks.c: the host names of every rank (one allgather; every rank calls it). */
int train_ranks_open(train_job *t, ddp_err *err);
void train_ranks_close(train_job *t);
/* At a progress line (every rank): shares this rank's figures (t->mine, the gradient wait
 * exposed_ms the device timer took, the device's peak memory) with every rank, one allgather, and
 * names a persistent straggler (rank 0 logs it). */
int train_ranks_gather(train_job *t, double exposed_ms, ddp_err *err);
/* The latest gather's figures, [world]; the largest peak memory among them, in MiB. */
const rank_figures *train_ranks_all(const train_job *t);
double train_ranks_peak_mib(const train_job *t);
/* `,"ranks":[{"rank":0,"host":..,"step_ms":..,"wait_ms":..,"data_ms":..,"peak_mib":..},...]` */
void train_ranks_write_json(const train_job *t, FILE *f);

/* train_tb.c: run.tensorboard's event file (rank 0; nothing elsewhere or when off). Each call
 * writes its values and flushes them, so a running job can be watched; a failure ends the job
 * naming the file. */
int train_tb_open(train_job *t, ddp_err *err);
/* The progress line's figures (tags train/..., and rank{R}/... for every rank's). */
typedef struct train_tb_progress {
    double loss, acc, lr, grad_norm, samples_per_s, tokens_per_s, mfu, ms_per_step, comm_ms;
} train_tb_progress;
int train_tb_progress_write(train_job *t, const train_tb_progress *p, ddp_err *err);
int train_tb_scalar(train_job *t, const char *tag, double value, ddp_err *err);
int train_tb_text(train_job *t, const char *tag, const char *text, ddp_err *err);
void train_tb_close(train_job *t);

/* train_sample.c: rank 0 logs a text sample from a language model (a no-op elsewhere). */
int train_sample_text(train_job *t, ddp_err *err);

/* train_finite.c */
int train_finite_open(train_job *t, ddp_err *err);   /* after the optimizer exists */
void train_finite_close(train_job *t);
/* The device float[2] the micro-steps of the next optimizer step add (loss sum, correct count) into. */
float *train_finite_stats(train_job *t);
/* After each optimizer step: records its gradient norm (when computed); drains when every slot is used. */
int train_finite_step_done(train_job *t, ddp_err *err);
/* Reads the steps recorded since the last drain (waits for the device): adds their sums to the
 * progress line's, notes any non-finite loss or gradient norm. Every rank calls it at the same steps. */
int train_finite_drain(train_job *t, ddp_err *err);
/* The loss and correct-count sums drained since the last call (the progress line's), and the
 * mean gradient norm of those steps (NAN when the steps do not compute it: optimizer.grad_clip 0). */
void train_finite_take_sums(train_job *t, double *loss_sum, double *correct_sum, double *grad_norm);
/* A non-finite value this rank found, what it was and when; detail (the value, "nan") goes into
 * the warning logged for the rank's earliest finding. */
void train_finite_note(train_job *t, int64_t step, finite_what what, const char *detail);
/* This rank found a non-finite value (not yet agreed). */
bool train_finite_found(const train_job *t);
/* This rank's vote for the stop agreement, whose maximum over the ranks names the earliest note
 * (0: nothing found); and the DDP_ENONFINITE error every rank returns for an agreed non-zero vote. */
int64_t train_finite_vote(const train_job *t);
int train_finite_fail(train_job *t, int64_t vote, ddp_err *err);
/* Before a checkpoint (every rank): drains, checks the parameters and optimizer state, and has the
 * ranks agree; DDP_ENONFINITE when anything non-finite was found anywhere. */
int train_finite_check_state(train_job *t, ddp_err *err);

/* train_observe.c: the step enters and leaves phase p; the observers act (see step_phase). An
 * error of an observer (a device timer, the profiler) is the step's. */
int train_enter(train_job *t, step_phase p, ddp_err *err);
int train_leave(train_job *t, step_phase p, ddp_err *err);

/* train_fault.c: the test-only DDP_TEST_FAULT switch. After optimizer step t->step: */
void train_fault_after_step(const train_job *t);
/* While the data loads: `setup-sleep` sleeps SECONDS (a mount that stopped answering). */
void train_fault_in_setup(const train_job *t);
/* For the last micro-step of the next optimizer step: the grad_ready callback (and its *ctx) that
 * tells the reducer of finished gradients, poisoning one first when a nan/inf fault is due. */
grad_ready_fn train_fault_grad_ready(train_job *t, void **ctx);

/* train_zero.c: ZeRO-1. */
bool train_zero_on(const config *c, int world);
/* Spare floats the model's parameter buffers need past the parameters (model.param_tail). */
size_t train_zero_param_tail(const config *c, int world);
/* The optimizer over this rank's blocks of the reducer's buckets (after reducer_use_zero). */
int train_zero_optimizer(train_job *t, ddp_err *err);
/* After reducer_finish: clip by the global norm, update this rank's blocks and all-gather each
 * bucket's parameters as its block is done; counts the optimizer step. */
int train_zero_step(train_job *t, double lr, ddp_err *err);
/* A state buffer (n_state floats on the device) into global, n_params floats in the checkpoint's
 * layout: every rank takes part; global is written on rank 0 only (may be NULL elsewhere). */
int train_zero_collect(train_job *t, const float *state, float *global, ddp_err *err);
/* This rank's part of a full state buffer global (n_params floats) into state on the device. */
int train_zero_distribute(train_job *t, const float *global, float *state, ddp_err *err);

/* train_ckpt.c */
/* Before anything is built: the model section's shape keys cfg leaves to
 * checkpoint.init_from, read by rank 0 and broadcast, into cfg on every rank (config_take_shape);
 * nothing when none is. */
int train_ckpt_take_shape(config *cfg, comm *ctl, ddp_err *err);
int train_ckpt_open(train_job *t, ddp_err *err);
/* Loads a checkpoint per checkpoint.resume; sets step/epoch/sampler position/optimizer state. When
 * none is loaded and checkpoint.init_from is set, loads the parameters from that llm.c file. */
int train_ckpt_resume(train_job *t, int64_t *consumed, ddp_err *err);
/* Rank 0's clock: checkpoint.every_minutes has passed since the last save (other ranks: false). */
bool train_ckpt_clock_due(const train_job *t);
/* Saves when a trigger fires (every_steps, or every_minutes by rank 0's clock as the ranks agreed
 * in t->ckpt_clock_due) or when force is set. Every rank calls it at the same steps. */
int train_ckpt_maybe_save(train_job *t, int force, ddp_err *err);
/* Rank 0, after the resume: the checkpoint directory exists and takes files, so that a bad
 * checkpoint.dir ends the job before its first step, not at its first save. */
int train_ckpt_check_dir(train_job *t, ddp_err *err);
/* The step of the newest checkpoint saved or resumed, -1 when none. */
int64_t train_ckpt_last_saved(const train_job *t);
/* Rank 0, after each step: when the latest save's write has finished, its times go to
 * train_budget_written (never waits). */
int train_ckpt_poll(train_job *t, ddp_err *err);
/* train_budget.c: rank 0, once a checkpoint is durable: its times to run.tensorboard, and after the
 * first one whose cloud is known, the preemption budget: would a save on that cloud's notice fit
 * in its window? stall_s is the save's stall before the snapshot was handed to the writer. */
int train_budget_written(train_job *t, const ckpt_write_stats *st, double stall_s, ddp_err *err);
/* Waits for a background save in flight. */
int train_ckpt_finish(train_job *t, ddp_err *err);
void train_ckpt_close(train_job *t);
/* Hands every checkpoint write's timing to observe (ckpt_writer_set_observer; rank 0 only writes). */
void train_ckpt_observe(train_job *t, ckpt_write_observer observe, void *ctx);

/* train_profile.c: the profiler's window of train.profile_steps steps, opening after
 * train.profile_start steps of this run (cut to what the run trains, and said so). */
int train_profile_open(train_job *t, ddp_err *err);
/* At the start of each step: opens the window at its first step (a device wait, an MPI barrier:
 * ts 0 of every rank's trace), then marks the step boundary. */
int train_profile_step_begin(train_job *t, ddp_err *err);
/* At the end of each step: marks it; after the window's last step, reads the records (one device
 * wait), writes run.dir/trace-rank{R}.json and, on rank 0, builds the table and profile.json. */
int train_profile_step_end(train_job *t, ddp_err *err);
/* At the end of training: a window the run stopped inside is ended with the steps it has; rank 0
 * prints the table. */
int train_profile_finish(train_job *t, ddp_err *err);
void train_profile_close(train_job *t);
/* A device-stamped phase ("forward+backward", "optimizer", ...) on the compute track, nesting the
 * ops it runs; *id -1 and nothing recorded while no window is open. */
int train_phase_begin(train_job *t, const char *name, int *id, ddp_err *err);
int train_phase_end(train_job *t, int id, ddp_err *err);

/* train_profile_report.c: a GPU's dense peak FLOP/s for a training job's GEMMs (bf16 under
 * precision bf16, tf32 with cuda.tf32, else fp32) from NVIDIA's datasheets; 0 when unknown (the CPU,
 * the emulator, a GPU the table lacks). */
double train_device_peak_flops(const train_job *t);

/* train_profile_report.c: rank 0's table of a finished window (malloc'd text, printed at the end of
 * training) and run.dir/profile.json; first_step and planned say which steps the window meant. */
int train_profile_report(const train_job *t, const device_prof *rec, int64_t first_step, int64_t planned,
                         char **table, ddp_err *err);

#endif
