/* train_lock.h — run.dir's lock (train_lock.c): one job per run.dir (runtime/base/dir_lock.h),
 * taken by rank 0 and held while the job runs (t->run_lock). Must not write into run.dir. */
#ifndef DDP_TRAIN_LOCK_H
#define DDP_TRAIN_LOCK_H

#include "train_job.h"

/* Rank 0 takes run.dir's lock, every rank learns the verdict; DDP_EUSAGE naming the holder when
 * another job has it (rank 0 reports it). Called before the resume without create (a run.dir that
 * exists is locked before its checkpoints are read; a missing one is not created by a job that may
 * yet be refused), then with create before anything is written. */
int train_lock_run_dir(train_job *t, bool create, ddp_err *err);
/* Releases the lock: last, after every writer into run.dir is closed. */
void train_lock_release(train_job *t);

#endif
