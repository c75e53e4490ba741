/* train_stop.h — the stop flags the worker's signal thread and preemption notice watch share with
 * the training job (train_stop.c defines them). They are plain flags, safe to set from a signal
 * handler or another thread; what a stop does is the step loop's (train.c's stop agreement). Must
 * not grow anything that is not shared with the worker: the job's own state is in train_job.h. */
#ifndef DDP_TRAIN_STOP_H
#define DDP_TRAIN_STOP_H

#include <signal.h>

/* Set asynchronously by the worker's signal thread or preemption notice watch: a stop
 * (checkpoint-and-exit) was requested, and by what. The ranks agree on the largest value. */
enum { TRAIN_STOP_NONE, TRAIN_STOP_SIGNAL, TRAIN_STOP_NOTICE };
extern volatile sig_atomic_t train_stop_requested;
/* Set by the training loop once the ranks agreed on a stop request (the stop is then theirs:
 * checkpointing and exiting), or once train_run returned: the worker's deadline on an unanswered
 * stop request no longer applies. */
extern volatile sig_atomic_t train_stop_answered;
/* Set once a complete checkpoint of this job exists to resume from (one was resumed, or a save
 * of this run is known to be complete on disk), so a job ended by the stop deadline may say it is
 * resumable (exit 75). Rank 0 learns of its own saves' completion; the others of a resume, or from
 * rank 0 at the next step's stop agreement. */
extern volatile sig_atomic_t train_checkpoint_safe;
/* While the job resumes, the seconds a stop request may wait for it (twice the resume's
 * collective deadline: a resume may read, download and read again), else 0. A stop request cannot
 * be answered before the resume ends, so the worker's deadline on it is this one during the resume
 * (a resume held where no collective waits, every rank in a stalled read, is ended by it), and
 * ddp.timeout_s from the resume's end. */
extern volatile sig_atomic_t train_resume_limit_s;

#endif
