/* train_init_from.h — a training job's start from checkpoint.init_from (train_init_from.c): the
 * model shape a config leaves to it, and the parameters when nothing was resumed. */
#ifndef DDP_TRAIN_INIT_FROM_H
#define DDP_TRAIN_INIT_FROM_H

#include "train_job.h"

/* Before anything is built: the model section's shape keys cfg leaves to
 * checkpoint.init_from, read by rank 0 and broadcast, into cfg on every rank (config_take_shape);
 * nothing when none is. */
int train_init_from_shape(config *cfg, comm *ctl, ddp_err *err);
/* When nothing was resumed: the parameters from checkpoint.init_from, else drawn from run.seed
 * (train_draw_params). */
int train_init_from(train_job *t, ddp_err *err);

#endif
