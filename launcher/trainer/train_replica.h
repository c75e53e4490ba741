/* train_replica.h — what the step loop (train.c), checkpoints (train_ckpt.c, train_resume.c) and
 * evaluation (train_log.c) share about this rank's replica (train_replica.c): its parameters, or a
 * checkpoint's saved buffers, made rank 0's a chunk at a time and the model told they changed, and
 * the staging buffers (struct train_staging, its own) a batch's rows are chosen into, gathered and
 * uploaded from. Must not decide when any of it happens: its callers do. */
#ifndef DDP_TRAIN_REPLICA_H
#define DDP_TRAIN_REPLICA_H

#include "train_job.h"

/* The most floats a rank stages on the host at once where parameters or state pass through it whole
 * (256 MiB): no rank stages the whole model, which for Llama 3 8B in float32 would be 32 GB on
 * every rank of a node, and on rank 0 twice. */
enum { TRAIN_HOST_CHUNK = 1 << 26 };
/* *chunk: how many of n floats pass whole through the host at a time: TRAIN_HOST_CHUNK, or one MPI
 * call's limit where that is lower (runtime/base/max_chunk.h: tests lower it to take many chunks),
 * or n. DDP_EUSAGE for a malformed DDP_COMM_MAX_CHUNK. */
int train_host_chunk(size_t n, size_t *chunk, ddp_err *err);

/* Rank 0's train_share_saved source: floats [off, off + n) of saved buffer b into out. */
typedef void (*train_chunk_fill)(const train_job *t, const void *ctx, int b, size_t off, size_t n, float *out);
/* Every rank takes the saved buffers (t->ckpt's: parameters, optimizer state) from rank 0, which
 * fills them a chunk at a time (train_host_chunk) and broadcasts each: a buffer a rank holds whole
 * goes to its device chunk by chunk, a sharded one (ZeRO) into a host copy of its shard, then to
 * the device. No rank stages the whole state (rank 0 holds what it fills from: the file it read). A
 * rank whose device fails takes the remaining chunks
 * all the same, so that no other waits in a broadcast for it, and the ranks agree at the end. */
int train_share_saved(train_job *t, train_chunk_fill fill, const void *ctx, ddp_err *err);
/* Makes every rank's parameters rank 0's (no communication on one rank), in chunks through a host
 * buffer (train_host_chunk), then tells the model its parameters changed (train_params_changed). */
int train_broadcast_params(train_job *t, ddp_err *err);
/* A fresh start's parameters from run.seed (once the resume found nothing: a resumed run never pays
 * for the draw). Replicas start identical: rank 0 draws the model a chunk at a time and broadcasts
 * each chunk, the others draw nothing; ZeRO-3, holding no whole model, has each rank draw only its
 * pieces and the ranks compare digests of a probe of the draw instead. Logs the draw's memory rise
 * on the rank that rose most (train_start_memory_log). */
int train_draw_params(train_job *t, ddp_err *err);
/* The model's parameters were set or stepped: the model rebuilds what it derives from them
 * (precision bf16: the stochastically rounded bf16 copy, keyed by run.seed and the optimizer steps
 * done, so a resumed run computes with the copy the uninterrupted run had). */
int train_params_changed(train_job *t, ddp_err *err);

/* The staging buffers for t->batch rows, as m->io.sample lays them out: the rows' sample indices,
 * inputs and targets on the host and on the device. */
int train_staging_open(train_job *t, ddp_err *err);
void train_staging_close(train_job *t);
/* Chooses the next micro-batch's rows: the sampler's next batch for this rank. */
void train_stage_next(train_job *t);
/* Chooses samples begin .. begin + rows - 1 in order (evaluation). */
void train_stage_range(train_job *t, int64_t begin, int64_t rows);
/* The chosen rows' sample indices, *rows of them. */
const int64_t *train_staged(const train_job *t, int64_t *rows);
/* Gathers the chosen rows of data into the staging buffers, uploads them and describes them as b
 * (packed rows with their document bounds). */
int train_stage_batch(train_job *t, const dataset *data, model_batch *b, ddp_err *err);

/* Optimizer steps in micro_batches of the sampler's batches: whole steps of train.grad_accum, and
 * with data.drop_last false one more, shorter, over what is left (as Hugging Face's Trainer steps
 * on an epoch's last accumulation); with drop_last true a tail short of a step is dropped. */
int64_t train_steps_in(const train_job *t, int64_t micro_batches);

/* The loss is the mean over the targets the loss counts in the whole global batch: every target
 * element, or with packed rows the trainable tokens of every rank's micro-steps of the step, so the
 * update does not depend on how the global batch is split into ranks and accumulation, nor on a
 * last micro-batch shorter than the others. Before a step's first micro-step every rank counts its
 * own rows of the step (a look ahead on a copy of the sampler; the same count on every rank, as the
 * sampler pads); with packed rows their targets and tokens, which one SUM all-reduce makes the
 * step's totals.
 * *micro_batches gets the step's micro-steps: train.grad_accum, or fewer in an epoch's last, short
 * step. */
int train_stage_count_step(train_job *t, int64_t *micro_batches, ddp_err *err);
/* The gradient scale of a micro-step: the reciprocal of the step's loss terms, times the world size
 * that the reducer's average divides by (0 when the step has no target). */
float train_stage_grad_scale(const train_job *t);
/* This rank's share of the step's loss terms, for the loss average: its targets, or with packed
 * rows the step's total over the world size (summed over ranks, the total). */
double train_stage_step_terms(const train_job *t, int64_t rows);
/* This rank's share of the step's tokens, for tokens/s: its input positions, or with packed rows
 * the step's positions that are not padding over the world size. */
double train_stage_step_tokens(const train_job *t, int64_t rows);

#endif
