/* train.h — one rank's whole training job: setup, the step loop, evaluation, checkpoints.
 *
 * train_run is what ddprun-worker calls after MPI_Init and config_load; it builds nothing before the
 * model section's shape keys the config leaves to checkpoint.init_from have its shape. It returns DDP_OK when
 * training completed, DDP_EPREEMPTED when a stop request was agreed on by all ranks and a
 * checkpoint was saved, DDP_ENONFINITE when all ranks agreed to stop on a non-finite value
 * (nothing saved from it; err says what and where), or an error code with err filled. It must not call MPI_Init/Finalize or
 * exit the process: worker_main owns the process. The stop flags (train_stop.h) and `ddprun plan`'s
 * memory plan (train_plan.h) are the rest of what the worker uses, and come with this header. */
#ifndef DDP_TRAIN_H
#define DDP_TRAIN_H

#include "collectives/comm.h"
#include "config/config.h"
#include "runtime/base/err.h"
#include "runtime/cloud/cloud_notice.h"
#include "train_plan.h"
#include "train_stop.h"

/* ctl is the MPI communicator over all ranks (host buffers), used for control traffic; notice is
 * this node's preemption notice watch (NULL: none), whose cloud the preemption budget is checked
 * against (train_budget.c). */
int train_run(const config *cfg, comm *ctl, notice_watch *notice, ddp_err *err);

#endif
