/* train_agree.h — every rank's verdict on something each rank did alone (train_agree.c), for the
 * steps of a start where each rank reads its own part (ZeRO-3's pieces of a Hugging Face folder or
 * a checkpoint set). Must not know what the ranks did. */
#ifndef DDP_TRAIN_AGREE_H
#define DDP_TRAIN_AGREE_H

#include "train_job.h"

/* Every rank's verdict on a step each rank took alone (mine: this rank's status, its err set when
 * not DDP_OK): DDP_OK when every rank succeeded, else mine where this rank failed, or an error of
 * the first failed rank's status saying that rank `rank` could not `what`. Collective. */
int train_agree(train_job *t, int32_t mine, const char *what, ddp_err *err);

#endif
