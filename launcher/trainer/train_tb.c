/* train_tb.c — run.tensorboard: rank 0 writes what the progress lines, evaluations, checkpoints
 * and text samples report into one TensorBoard event file in run.dir/tensorboard/ (a new file per
 * attempt, as TensorBoard's writers make one per process), each event flushed as it is written so
 * `tensorboard --logdir run.dir/tensorboard` shows a running job. Tags: train/... for the progress
 * line's figures, rank{R}/... for each rank's own (train_ranks.c), eval/..., checkpoint/...,
 * samples/text; the step is the optimizer step (a checkpoint's figures at the step it saved). Each
 * attempt's file opens with a SessionLog START at the step after its checkpoint (1 without one). A write that
 * fails ends the job naming the file, as metrics.jsonl's does. Must not change training state nor
 * decide what is measured. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "runtime/tensorboard/event_file.h"
#include "train_ranks.h"
#include "train_tb.h"

typedef struct train_tb {
    event_file *file;
} train_tb;

static double wall_time(void)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
}

int train_tb_open(train_job *t, ddp_err *err)
{
    if (t->ctl->rank != 0 || !t->cfg->run.tensorboard)
        return DDP_OK;
    train_tb *tb = calloc(1, sizeof *tb);
    if (!tb)
        return ddp_fail(err, DDP_ERUNTIME, "out of memory for run.tensorboard");
    t->tb = tb;
    char dir[CFG_PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s/tensorboard", t->cfg->run.dir);
    int rc = event_file_open(dir, t->ctl->host, &tb->file, err);
    /* a resumed job trains again the steps after its checkpoint that an earlier attempt's file may
     * hold (a restart before any checkpoint: all of them): TensorBoard drops those from the START
     * event's step on */
    if (rc == DDP_OK)
        rc = event_file_session_start(tb->file, t->step + 1, wall_time(), err);
    return rc != DDP_OK ? ddp_prefix(err, "run.tensorboard") : DDP_OK;
}

int train_tb_finish(train_job *t, ddp_err *err)
{
    train_tb *tb = t->tb;
    if (!tb)
        return DDP_OK;
    int rc = event_file_close(tb->file, err);
    free(tb);
    t->tb = NULL;
    return rc != DDP_OK ? ddp_prefix(err, "run.tensorboard") : DDP_OK;
}

void train_tb_close(train_job *t)
{
    train_tb *tb = t->tb;
    if (!tb)
        return;
    event_file_close(tb->file, NULL);
    free(tb);
    t->tb = NULL;
}

/* A value that is not finite is written as it is: TensorBoard shows NaN and infinities. */
static void add(event_file *f, const char *tag, double v) { event_file_add_scalar(f, tag, (float)v); }

int train_tb_progress_write(train_job *t, const train_tb_progress *p, ddp_err *err)
{
    if (!t->tb)
        return DDP_OK;
    event_file *f = t->tb->file;
    const model_io *io = &t->m->io;
    event_file_begin(f, t->step, wall_time());
    add(f, "train/loss", p->loss);
    if (io->classifier)
        add(f, "train/acc", p->acc);
    add(f, "train/lr", p->lr);
    if (p->has_grad_norm)
        add(f, "train/grad_norm", p->grad_norm);
    add(f, "train/samples_per_s", p->samples_per_s);
    if (io->language_model)
        add(f, "train/tokens_per_s", p->tokens_per_s);
    if (!isnan(p->mfu))
        add(f, "train/mfu", p->mfu);
    add(f, "train/ms_per_step", p->ms_per_step);
    add(f, "train/comm_exposed_ms", p->comm_ms);
    add(f, "train/peak_mem_mib", train_ranks_peak_mib(t));
    const rank_figures *all = train_ranks_all(t);
    for (int r = 0; r < t->ctl->size; r++) {
        char tag[48];
        const struct { const char *name; double v; } figs[] = {
            {"step_ms", all[r].step_ms}, {"wait_ms", all[r].wait_ms}, {"data_ms", all[r].data_ms},
            {"peak_mem_mib", all[r].peak_bytes / (1 << 20)}};
        for (size_t i = 0; i < sizeof figs / sizeof figs[0]; i++) {
            snprintf(tag, sizeof tag, "rank%d/%s", r, figs[i].name);
            add(f, tag, figs[i].v);
        }
    }
    return event_file_commit(f, err);
}

int train_tb_scalar(train_job *t, int64_t step, const char *tag, double value, ddp_err *err)
{
    if (!t->tb)
        return DDP_OK;
    event_file_begin(t->tb->file, step, wall_time());
    add(t->tb->file, tag, value);
    return event_file_commit(t->tb->file, err);
}

int train_tb_text(train_job *t, const char *tag, const char *text, size_t len, ddp_err *err)
{
    if (!t->tb)
        return DDP_OK;
    event_file_begin(t->tb->file, t->step, wall_time());
    event_file_add_text(t->tb->file, tag, text, len);
    return event_file_commit(t->tb->file, err);
}
