/* train_budget.h — what a durable checkpoint's times say (train_budget.c, rank 0): they go to
 * run.tensorboard, and once the cloud is known, the preemption budget is checked (with
 * checkpoint.upload_cmd, again with an upload's time). It owns what the checks need (struct
 * train_budget): this run's step time, what they found, and the worker's notice watch it is given.
 * Must not change when or what is saved. */
#ifndef DDP_TRAIN_BUDGET_H
#define DDP_TRAIN_BUDGET_H

#include "runtime/ckpt/ckpt.h"
#include "runtime/cloud/cloud_notice.h"
#include "train_job.h"

/* notice: this node's preemption notice watch, NULL when none. */
int train_budget_open(train_job *t, notice_watch *notice, ddp_err *err);
void train_budget_close(train_job *t);
/* A step's own work took s seconds (train_observe.c): the mean step a save on notice waits for. */
void train_budget_count_work(train_job *t, double s);
/* Rank 0, once a checkpoint is durable: its times to run.tensorboard, and after the first one whose
 * cloud is known, the preemption budget: would a save on that cloud's notice fit in its window?
 * stall_s is the save's stall before the snapshot was handed to the writer. */
int train_budget_written(train_job *t, const ckpt_write_stats *st, double stall_s, ddp_err *err);
/* Rank 0, with checkpoint.upload_cmd: upload_s is the newest successful upload's time (0: none
 * yet). The first one measured after a save on notice was found to fit checks the save and such
 * an upload against the same window, said once; nothing where the save alone did not fit. */
void train_budget_uploaded(train_job *t, double upload_s);

#endif
