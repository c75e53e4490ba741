/* train_ranks.h — what the ranks of a job learn of each other (train_ranks.c): at the start, that
 * no two of a host share a GPU; every rank's own figures at each progress line, and the straggler
 * rule. It owns the figures (struct train_ranks): the host names, this rank's times since the
 * last progress line (the step's observers add them), the latest gather and the straggler windows.
 * Must not change training state nor write metrics.jsonl itself (train_log.c does). */
#ifndef DDP_TRAIN_RANKS_H
#define DDP_TRAIN_RANKS_H

#include <stdio.h>

#include "train_job.h"

/* One rank's figures for a progress interval, per step; memory since the job began. */
typedef struct rank_figures {
    double step_ms;     /* wall time, evaluation, log lines and text samples left out */
    double wait_ms;     /* waiting in collectives: the gradient wait (device timer) and the stop agreement */
    double data_ms;     /* loading and uploading batches */
    double peak_bytes;  /* device_memory_peak */
} rank_figures;

/* Times of this rank's steps: train_observe.c adds, each progress line takes. */
typedef struct rank_step_time {
    double step_s, wait_s, data_s;
    int64_t steps;
} rank_step_time;

/* One rank per GPU (launcher/shared/gpu_share.h): device: cuda reduces gradients with NCCL, which
 * refuses two ranks on one GPU, so more ranks on a host than GPUs is a usage error at startup, the
 * same on every rank (each rank's host and GPU count are gathered: every rank calls it, CUDA or not). */
int train_ranks_check_gpus(train_job *t, ddp_err *err);

/* The host names of every rank (one allgather; every rank calls it). */
int train_ranks_open(train_job *t, ddp_err *err);
void train_ranks_close(train_job *t);
/* Adds d to this rank's times since the last progress line. */
void train_ranks_add(train_job *t, const rank_step_time *d);
/* At a progress line (every rank): shares this rank's figures (its times, the gradient wait
 * exposed_ms the device timer took, the device's peak memory) with every rank, one allgather, and
 * names a persistent straggler (rank 0 logs it). */
int train_ranks_gather(train_job *t, double exposed_ms, ddp_err *err);
/* The latest gather's figures, [world]; the largest peak memory among them, in MiB. */
const rank_figures *train_ranks_all(const train_job *t);
double train_ranks_peak_mib(const train_job *t);
/* `,"ranks":[{"rank":0,"host":..,"step_ms":..,"wait_ms":..,"data_ms":..,"peak_mib":..},...]` */
void train_ranks_write_json(const train_job *t, FILE *f);

#endif
