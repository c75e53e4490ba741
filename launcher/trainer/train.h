/* train.h — one rank's whole training job: setup, the step loop, evaluation, checkpoints.
 *
 * train_run is what ddprun-worker calls after MPI_Init and config_load; it builds nothing before the
 * model section's shape keys the config leaves to checkpoint.init_from have its shape. It returns DDP_OK when
 * training completed, DDP_EPREEMPTED when a stop request was agreed on by all ranks and a
 * checkpoint was saved, DDP_ENONFINITE when all ranks agreed to stop on a non-finite value
 * (nothing saved from it; err says what and where), or an error code with err filled. It must not call MPI_Init/Finalize or
 * exit the process: worker_main owns the process. */
#ifndef DDP_TRAIN_H
#define DDP_TRAIN_H

#include <signal.h>
#include <stdio.h>

#include "collectives/comm.h"
#include "config/config.h"
#include "runtime/base/err.h"
#include "runtime/cloud/cloud_notice.h"

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
 * resumable (exit 75). Rank 0 learns of its own saves' completion; the others of a resume, or of a
 * save that was followed by another (whose submission waited for it). */
extern volatile sig_atomic_t train_checkpoint_safe;

/* ctl is the MPI communicator over all ranks (host buffers), used for control traffic; notice is
 * this node's preemption notice watch (NULL: none), whose cloud the preemption budget is checked
 * against (train_ckpt.c). */
int train_run(const config *cfg, comm *ctl, notice_watch *notice, ddp_err *err);

/* The memory plan a job of cfg on `world` ranks would log (train_run's header line, the same
 * function), printed to out with the model's parameter count, computed from the model's tensor
 * table and activation sizes (model_size) without a device, data or MPI. Language models only (the
 * MLP's shape follows its data); a model the config leaves to checkpoint.init_from is refused. */
int train_plan(const config *cfg, int world, FILE *out, ddp_err *err);

#endif
