/* train_tb.h — run.tensorboard's event file (train_tb.c; rank 0, nothing elsewhere or when off),
 * its own state (struct train_tb). Each call writes its values and flushes them, so a running job
 * can be watched; a failure ends the job naming the file. Must not change training state nor
 * decide what is measured. */
#ifndef DDP_TRAIN_TB_H
#define DDP_TRAIN_TB_H

#include "train_job.h"

int train_tb_open(train_job *t, ddp_err *err);
/* A job that ends as it should: the file flushed, synced and closed, a failure the job's. */
int train_tb_finish(train_job *t, ddp_err *err);
/* Any job's end (after train_tb_finish, nothing left): the file closed, a failure not reported. */
void train_tb_close(train_job *t);
/* The progress line's figures (tags train/..., and rank{R}/... for every rank's). */
typedef struct train_tb_progress {
    double loss, acc, lr, grad_norm, samples_per_s, tokens_per_s, mfu, ms_per_step, comm_ms;
    double targets;   /* the loss terms (targets counted) the loss averages over */
    bool has_grad_norm; /* clipping measured it (optimizer.grad_clip > 0): NaN there is a non-finite norm */
} train_tb_progress;
int train_tb_progress_write(train_job *t, const train_tb_progress *p, ddp_err *err);
/* One value at step: the optimizer step it belongs to (a checkpoint's, whose write ends later). */
int train_tb_scalar(train_job *t, int64_t step, const char *tag, double value, ddp_err *err);
/* text[0..len): the bytes a tokenizer decoded (a multi-byte character cut, a NUL): TensorBoard gets
 * them as UTF-8 (event_file_add_text). */
int train_tb_text(train_job *t, const char *tag, const char *text, size_t len, ddp_err *err);

#endif
