/* train_zero.h — ZeRO-1, 2 and 3 (ddp.zero) in the training job (train_zero.c): whether it is on, the
 * optimizer over this rank's shard and its step, and the sharded optimizer state moved to and from
 * the checkpoint's global layout; under ZeRO-3 the parameter shard and its windows (struct
 * train_zero, the only state it keeps: the other shards are the reducer's and the optimizer's). Must not decide when to save (train_ckpt.c) or the order of a step (train.c). */
#ifndef DDP_TRAIN_ZERO_H
#define DDP_TRAIN_ZERO_H

#include "train_job.h"

/* ZeRO for a job of c on `world` ranks: ddp.zero 1 or 2 over more than one rank. */
bool train_zero_on(const config *c, int world);
/* ZeRO-2 or 3 (gradients sharded by the model's units) for such a job. */
bool train_zero_units(const config *c, int world);
/* ZeRO-3 (parameters sharded by the model's units too) for such a job. */
bool train_zero_sharded_params(const config *c, int world);
/* The same for this job. */
bool train_zero_active(const train_job *t);
/* How the model's flat buffers are laid out for ZeRO (model_buffers): ZeRO-1's spare floats past
 * the parameters, ZeRO-2's gradients by unit. */
model_buffers train_zero_buffers(const config *c, int world);
/* ZeRO-2: the reducer's buckets are the model's units and the model writes its gradients into the
 * reducer's windows (after reducer_create with no gradient buffer). */
int train_zero_use_units(train_job *t, ddp_err *err);
/* The gradients the optimizer reads: the model's, or under ZeRO-2 this rank's shard. */
const float *train_zero_grads(const train_job *t);
/* ZeRO-3's fresh start (the model has no whole parameter buffer): the shard takes the model's
 * initial parameters, each rank drawing the whole model tensor by tensor and keeping its pieces
 * (the ranks' digests of the draw compared). */
int train_zero_draw_params(train_job *t, ddp_err *err);
/* This rank's shard as parameter pieces (model.h), in the optimizer's state layout: *n may be 0. */
int train_zero_pieces(const train_job *t, param_piece **pieces, int *n, ddp_err *err);
/* ZeRO-3 with checkpoint.init_from a Hugging Face folder: every rank reads only its pieces of the
 * folder's tensors into its shard (model_files.h's hf_load_pieces), and every rank learns each
 * rank's verdict (a failed rank named). */
int train_zero_init_from_folder(train_job *t, const char *dir, ddp_err *err);
/* ZeRO-3, once the optimizer's parts exist: each rank keeps its shard of the fp32 parameters (zero
 * until a resume, the fresh start's draw or checkpoint.init_from fills it) and its bf16 copy
 * under precision bf16, and the model's passes read gathered windows. No-op for other stages. */
int train_zero_shard_params(train_job *t, ddp_err *err);
/* ZeRO-3 with checkpoint.init_from an llm.c file, whose reader fills a whole model: a whole
 * parameter buffer on the device for it (m->params), then its parts into the shard and the buffer
 * freed. */
int train_zero_unshard_params(train_job *t, ddp_err *err);
int train_zero_reshard_params(train_job *t, ddp_err *err);
/* The parameters the optimizer updates and checkpoints save: the model's, or ZeRO-3's shard
 * (n floats: n_params, or the optimizer's n_state). */
float *train_zero_params(const train_job *t, size_t *n);
/* The parameters changed: ZeRO-3 rebuilds its shard's bf16 copy and forgets the gathered windows;
 * otherwise the model rebuilds what it derives (model_params_changed). */
int train_zero_params_changed(train_job *t, ddp_err *err);
/* ZeRO-3: the first error a parameter window met during the last passes (DDP_OK otherwise). */
int train_zero_check_windows(train_job *t, ddp_err *err);
/* Before the gradient communicator is aborted: ZeRO-3's gathers in flight are forgotten, not waited for. */
void train_zero_abandon(train_job *t);
void train_zero_close(train_job *t);
/* The optimizer over this rank's blocks of the reducer's buckets (after reducer_use_zero). */
int train_zero_optimizer(train_job *t, ddp_err *err);
/* After reducer_finish: clip by the global norm, update this rank's blocks and all-gather each
 * bucket's parameters as its block is done; counts the optimizer step. */
int train_zero_step(train_job *t, double lr, ddp_err *err);
/* A state buffer (n_state floats on the device) into global, n_params floats in the checkpoint's
 * layout: every rank takes part; global is written on rank 0 only (may be NULL elsewhere). */
int train_zero_collect(train_job *t, const float *state, float *global, ddp_err *err);
/* What this rank's parts hold of floats [off, off + n) of a buffer in the checkpoint's layout
 * (chunk), each copied to its place in shard (the optimizer's n_state floats, on the host). */
void train_zero_take_range(const train_job *t, const float *chunk, size_t off, size_t n, float *shard);

#endif
