/* train_agree.h — every rank's verdict on something each rank did alone (train_agree.c), for the
 * steps of a start where each rank reads its own part (ZeRO-3's pieces of a Hugging Face folder or
 * a checkpoint set), and how far such a step raised host memory on the rank that rose most. Must
 * not know what the ranks did. */
#ifndef DDP_TRAIN_AGREE_H
#define DDP_TRAIN_AGREE_H

#include "train_job.h"

/* Every rank's verdict on a step each rank took alone (mine: this rank's status, its err set when
 * not DDP_OK): DDP_OK when every rank succeeded, else mine where this rank failed, or (after
 * train_agree_bystander_pause) an error of the first failed rank's status saying that rank `rank`
 * could not `what`. Collective. */
int train_agree(train_job *t, int32_t mine, const char *what, ddp_err *err);
/* train_agree, calling agreed(ctx) (when not NULL) once every rank's verdict is in, however the
 * agreement went, before a bystander's pause: what must happen before the job may end (a file
 * the others had to see, removed). */
int train_agree_then(train_job *t, int32_t mine, const char *what, void (*agreed)(void *), void *ctx, ddp_err *err);
/* A rank that ends because another failed waits TRAIN_AGREE_BYSTANDER_S first: the failed rank's
 * exit then reaches mpirun first, mpirun ends the others, and ddprun's report names the failed
 * rank, not a bystander that exited with its status a moment sooner. */
#define TRAIN_AGREE_BYSTANDER_S 1
void train_agree_bystander_pause(void);

/* Before a step of the start: this rank's resident host memory (KiB), its peak reset; -1 where
 * /proc cannot tell. */
int64_t train_start_memory_mark(void);
/* How far the start's step `what` raised resident host memory above `before` (the mark's) on the
 * rank that rose most, and on more than one rank the most among those other than rank 0 (which
 * reads files whole), logged beside the model (and under ZeRO-3 a rank's shard): the claim that a
 * start holds no more than it says, as measured. Collective; nothing logged where /proc cannot
 * tell. */
int train_start_memory_log(train_job *t, const char *what, int64_t before, ddp_err *err);

#endif
