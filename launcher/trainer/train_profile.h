/* train_profile.h — train.profile_steps (train_profile.c): the profiler's window, the phases the
 * step loop marks, and each rank's trace. It owns the window (struct train_prof). Must not change
 * what training computes, and must not wait for the device inside a step. */
#ifndef DDP_TRAIN_PROFILE_H
#define DDP_TRAIN_PROFILE_H

#include "train_job.h"

/* The window of train.profile_steps steps, opening after train.profile_start steps of this run
 * (cut to what the run trains, and said so). */
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

#endif
