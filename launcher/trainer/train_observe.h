/* train_observe.h — the named phases of a training step, which the step (train.c) enters and
 * leaves, and the observers (train_observe.c) that react: the profiler, this rank's timers, the
 * host-wait count, the communication-exposed timer, the deadline labels, the test-only hooks. It
 * owns the step's watch (struct train_watch: the phases' start times, the profiler's ids, the
 * exposed timer and the host-wait count), which the progress line takes from. Must not change what
 * a step computes. */
#ifndef DDP_TRAIN_OBSERVE_H
#define DDP_TRAIN_OBSERVE_H

#include "train_job.h"

/* STEP is one iteration of the loop; WORK its own work as the per-rank figures count it (the
 * micro-steps and the update); AGREE the stop agreement after it. */
typedef enum step_phase {
    PHASE_STEP, PHASE_WORK, PHASE_DATA, PHASE_COMPUTE, PHASE_GRADIENT_WAIT, PHASE_OPTIMIZER, PHASE_LOG, PHASE_SAMPLE,
    PHASE_AGREE, STEP_PHASES
} step_phase;

/* The watch, with its device timer (after the device is open). */
int train_observe_open(train_job *t, ddp_err *err);
void train_observe_close(train_job *t);
/* The step enters and leaves phase p; the observers act. An error of an observer (a device timer,
 * the profiler) is the step's. */
int train_enter(train_job *t, step_phase p, ddp_err *err);
int train_leave(train_job *t, step_phase p, ddp_err *err);
/* The progress line's: the gradient wait the device timer took since the last call, in ms (the
 * communication backward did not hide; waits for the device), and the number of times the host
 * waited for the device inside steps since the last call. */
int train_observe_take_exposed_ms(train_job *t, double *ms, ddp_err *err);
uint64_t train_observe_take_host_waits(train_job *t);

#endif
