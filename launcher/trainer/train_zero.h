/* train_zero.h — ZeRO-1 (ddp.zero: 1) in the training job (train_zero.c): whether it is on, the
 * optimizer over this rank's shard and its step, and the sharded optimizer state moved to and from
 * the checkpoint's global layout. It keeps no state of its own: the shard is the reducer's and the
 * optimizer's. Must not decide when to save (train_ckpt.c) or the order of a step (train.c). */
#ifndef DDP_TRAIN_ZERO_H
#define DDP_TRAIN_ZERO_H

#include "train_job.h"

/* ZeRO-1 for a job of c on `world` ranks: ddp.zero 1 over more than one rank. */
bool train_zero_on(const config *c, int world);
/* The same for this job. */
bool train_zero_active(const train_job *t);
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

#endif
