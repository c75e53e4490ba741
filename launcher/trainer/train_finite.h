/* train_finite.h — catching non-finite training without making a step wait for the device
 * (train_finite.c). It owns the step records (struct train_finite): each step's loss sums and
 * gradient norm on the device until a drain reads them, the sums the progress line takes, and this
 * rank's earliest finding. Must not decide the loop's order (train.c) or write metrics
 * (train_log.c); what was saved is told to it (newest_saved), not looked up. */
#ifndef DDP_TRAIN_FINITE_H
#define DDP_TRAIN_FINITE_H

#include "train_job.h"

/* What was found non-finite, in the order of a step (a note's rank among notes of one step). */
typedef enum {
    FINITE_LOSS, FINITE_GRAD_NORM, FINITE_EVAL_LOSS, FINITE_LOGITS, FINITE_PARAMS, FINITE_OPT_STATE
} finite_what;

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
 * (0: nothing found); and the DDP_ENONFINITE error every rank returns for an agreed non-zero vote
 * (rank 0 reports it), naming newest_saved, the step of the newest checkpoint on disk (-1: none),
 * and writing, a save's step still being written (-1: none): train_ckpt_durable_step's. */
int64_t train_finite_vote(const train_job *t);
int train_finite_fail(train_job *t, int64_t vote, int64_t newest_saved, int64_t writing, ddp_err *err);
/* Before a checkpoint (every rank): drains, checks the parameters and optimizer state, and has the
 * ranks agree; DDP_ENONFINITE when anything non-finite was found anywhere (train_finite_fail's,
 * with newest_saved and writing). */
int train_finite_check_state(train_job *t, int64_t newest_saved, int64_t writing, ddp_err *err);

#endif
