/* train_data.h — the job's data (train_data.c): the configured dataset's train and test splits
 * loaded, and the check that they fit the model built for them. */
#ifndef DDP_TRAIN_DATA_H
#define DDP_TRAIN_DATA_H

#include "train_job.h"

/* data.kind's splits into t->train and t->test: token shards as windows, or with data.packed
 * their documents packed into rows (rank 0 logs the packing); Fashion-MNIST; synthetic. */
int train_data_load(train_job *t, ddp_err *err);
/* Both splits have the samples t->m was built for, every rank's data is rank 0's (the samples and
 * tokens of each split, and a digest of a sample of their contents), and token data has the
 * vocabulary of checkpoint.init_from's tokenizer.json where it has one (rank 0 compares). Every
 * rank learns each rank's verdict (collective): usage errors naming the data and the model, the
 * rank whose copy differs (both copies' counts), or the file. */
int train_data_fits(train_job *t, ddp_err *err);

#endif
