/* train_ckpt.h — when and what a training job saves, and how it resumes (train_ckpt.c; when
 * nothing is resumed, train_init_from.h starts it). It owns the checkpoint writer, the saved buffers' staging
 * and the save clock (struct train_ckpt). Must not decide the file format (ckpt.c) or the loop
 * order (train.c). */
#ifndef DDP_TRAIN_CKPT_H
#define DDP_TRAIN_CKPT_H

#include "runtime/ckpt/ckpt.h"
#include "train_job.h"

int train_ckpt_open(train_job *t, ddp_err *err);
/* Loads a checkpoint per checkpoint.resume; sets step/epoch/sampler position/optimizer state. When
 * none is loaded, train_init_from (checkpoint.init_from, when set). Then refuses a warm-up longer
 * than the run's horizon as the resume re-planned it, unless the resumed run has finished it. */
int train_ckpt_resume(train_job *t, int64_t *consumed, ddp_err *err);
/* Whether train_ckpt_resume may run checkpoint.download_cmd: one is set, and the job resumes its
 * own newest checkpoint (checkpoint.resume auto, or a restart). */
bool train_ckpt_may_download(const train_job *t);
/* Every rank. After the resume (before_resume false): the checkpoint directory exists and takes
 * files on rank 0's host, and with checkpoint.sharded every rank sees that directory
 * (train_shard_check_dir), so that a bad checkpoint.dir ends the job before its first step, not at
 * its first save. Before the resume, with checkpoint.sharded, that last check alone where the
 * directory exists, so that a rank that does not see it ends the job before the resume would call
 * each set it holds damaged. */
int train_ckpt_check_dir(train_job *t, bool before_resume, ddp_err *err);
/* After the resume, every rank: a checkpoint.dir that is not shared (a node-local disk), whose
 * newest checkpoint on another rank's host is newer than what rank 0 took up and was saved with
 * this config (a failure restart or a new job that placed rank 0 on another host), is refused
 * there, naming the host and the checkpoint, before a step or save; otherwise the run would start
 * over from an older step, or from 0. Collective. */
int train_ckpt_check_hosts(train_job *t, ddp_err *err);
/* Rank 0's clock: checkpoint.every_minutes has passed since the last save (other ranks: false). */
bool train_ckpt_clock_due(const train_job *t);
/* Saves when due (the caller's triggers: a stop, rank 0's clock as the ranks agreed on it, the end
 * of training) or when checkpoint.every_steps says so. Every rank calls it at the same steps. */
int train_ckpt_maybe_save(train_job *t, bool due, ddp_err *err);
/* Rank 0 (which reports what is on disk): the step of the newest checkpoint saved whole, by this
 * job or the one it resumed, -1 when none (*writing: the step of a save still being written in
 * the background, -1 when none). Other ranks: -1, -1. */
int64_t train_ckpt_durable_step(const train_job *t, int64_t *writing);
/* Rank 0, after each step: when the latest save's write has finished, its times go to
 * train_budget_written (never waits). */
int train_ckpt_poll(train_job *t, ddp_err *err);
/* A wait gave a write up for the storage's stall (ckpt_writer_set_stall; rank 0's background write,
 * or this rank's shard): nothing more may be written or removed in that storage, which may answer
 * nothing more. */
bool train_ckpt_stalled(const train_job *t);
/* Waits for a background save in flight, then for the uploads (or, when the job failed or the
 * write stalled, ends them: ckpt_uploader_abandon). err NULL: a failure is not reported. */
int train_ckpt_finish(train_job *t, bool failed, ddp_err *err);
void train_ckpt_close(train_job *t);
/* Hands every checkpoint write's timing to observe (ckpt_writer_set_observer; rank 0 only writes;
 * with checkpoint.sharded every rank, its shard's write and the commit, on the training thread). */
void train_ckpt_observe(train_job *t, ckpt_write_observer observe, void *ctx);

#endif
