/* train_log.h — what a training job tells its user (train_log.c): the header, a progress line every
 * train.log_every steps, test-set evaluation, and run.dir/metrics.jsonl. It owns the metrics file,
 * the progress line's accounting since the last line, and the latest evaluation (struct
 * train_log). Must not change training state: it only reads it. */
#ifndef DDP_TRAIN_LOG_H
#define DDP_TRAIN_LOG_H

#include "train_job.h"

/* The latest evaluation of the test set. */
typedef struct train_eval {
    bool done;                /* the test set was evaluated at least once */
    int64_t step;             /* the step of the latest evaluation */
    double loss, acc;         /* accuracy only for classifiers */
} train_eval;

/* Every rank: the log's state; rank 0 also creates run.dir, writes config.resolved.yaml and opens
 * metrics.jsonl (after run.dir is locked). */
int train_log_open(train_job *t, ddp_err *err);
void train_log_header(train_job *t);
/* The loop began at now (monotonic): the first progress interval starts there. */
void train_log_start(train_job *t, double now);
/* An optimizer step trained `samples` samples over all ranks; `terms`: this rank's share of its
 * loss terms (train_stage_step_terms), which the loss average divides by; `tokens`: its share of
 * the tokens (train_stage_step_tokens; padding is none). */
void train_log_count_step(train_job *t, double samples, double terms, double tokens);
/* The progress line: its rates (samples and tokens per second, MFU, ms a step) are over the wall
 * time since the last line less what train_log_exclude was told of. */
int train_log_progress(train_job *t, double lr, ddp_err *err);
/* seconds of the time since the last progress line were not training's (train_sample_text's). */
void train_log_exclude(train_job *t, double seconds);
/* Evaluates the test set; its time is left out of the progress line's rates. */
int train_evaluate(train_job *t, ddp_err *err);
train_eval train_log_last_eval(const train_job *t);
/* Rank 0: metrics.jsonl made durable (fsync) and closed; an error names it. */
int train_log_finish(train_job *t, ddp_err *err);
/* Closes what is still open, on any path (no error reported). */
void train_log_close(train_job *t);

#endif
