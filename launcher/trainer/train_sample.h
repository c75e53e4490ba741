/* train_sample.h — the text sample a language-model job prints every train.sample_every steps
 * (train_sample.c). It keeps no state: the sample is seeded by run.seed and the step. Must not
 * change training state. */
#ifndef DDP_TRAIN_SAMPLE_H
#define DDP_TRAIN_SAMPLE_H

#include "train_job.h"

/* Rank 0 logs a text sample from a language model (a no-op elsewhere); every rank drains the
 * step records first (train_finite.c). Its time is left out of the progress line's rates. */
int train_sample_text(train_job *t, ddp_err *err);

#endif
