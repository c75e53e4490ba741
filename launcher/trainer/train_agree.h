/* train_agree.h — every rank's verdict on something each rank did alone (train_agree.c), for the
 * steps of a start where each rank reads its own part (ZeRO-3's pieces of a Hugging Face folder or
 * a checkpoint set). Must not know what the ranks did. */
#ifndef DDP_TRAIN_AGREE_H
#define DDP_TRAIN_AGREE_H

#include "train_job.h"

/* Every rank's verdict on a step each rank took alone (mine: this rank's status, its err set when
 * not DDP_OK): DDP_OK when every rank succeeded, else mine where this rank failed, or (after
 * train_agree_bystander_pause) an error of the first failed rank's status saying that rank `rank`
 * could not `what`. Collective. */
int train_agree(train_job *t, int32_t mine, const char *what, ddp_err *err);
/* A rank that ends because another failed waits TRAIN_AGREE_BYSTANDER_S first: the failed rank's
 * exit then reaches mpirun first, mpirun ends the others, and ddprun's report names the failed
 * rank, not a bystander that exited with its status a moment sooner. */
#define TRAIN_AGREE_BYSTANDER_S 1
void train_agree_bystander_pause(void);

#endif
