/* train_replica.h — what the step loop (train.c), checkpoints (train_ckpt.c) and evaluation
 * (train_log.c) share about this rank's replica (train_replica.c): its parameters made rank 0's and
 * the model told they changed, and the staging buffers (struct train_staging, its own) a batch's
 * rows are chosen into, gathered and uploaded from. Must not decide when any of it happens: its
 * callers do. */
#ifndef DDP_TRAIN_REPLICA_H
#define DDP_TRAIN_REPLICA_H

#include "train_job.h"

/* Makes every rank's parameters rank 0's (no communication on one rank), then tells the model its
 * parameters changed (train_params_changed). */
int train_broadcast_params(train_job *t, ddp_err *err);
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
/* Gathers the chosen rows of data into the staging buffers, uploads them and describes them as b. */
int train_stage_batch(train_job *t, const dataset *data, model_batch *b, ddp_err *err);

#endif
