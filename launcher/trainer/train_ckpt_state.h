/* train_ckpt_state.h — struct train_ckpt, the checkpoint state of a training job, which the save
 * (train_ckpt.c) and the resume (train_resume.c, and train_replica.c's train_share_saved for it)
 * share; nothing else includes it. Declarations only. */
#ifndef DDP_TRAIN_CKPT_STATE_H
#define DDP_TRAIN_CKPT_STATE_H

#include "runtime/ckpt/ckpt.h"
#include "runtime/ckpt/ckpt_upload.h"
#include "train_job.h"

_Static_assert(MODEL_DESCRIPTION_MAX <= CKPT_MODEL_MAX, "a model description must fit the checkpoint header");

/* Per parameter tensor a checkpoint holds the parameters and each optimizer state buffer, under
 * a prefix per buffer: param/fc1.weight, optim/exp_avg/fc1.weight, ... */
#define MAX_SAVED_BUFFERS 4

typedef struct saved_buffer {
    char prefix[32];
    float *dev;                   /* n_params floats on the device, or this rank's shard */
    bool sharded;                 /* ZeRO optimizer state: dev holds the optimizer's n_state floats */
} saved_buffer;
_Static_assert(sizeof(((saved_buffer *)0)->prefix) - 1 + MODEL_TENSOR_NAME_MAX <= CKPT_NAME_MAX,
               "a buffer's prefix and a tensor's name fit a checkpoint's tensor name");

typedef struct train_ckpt {
    ckpt_writer *writer;          /* rank 0 only, without checkpoint.sharded */
    ckpt_writer *shard_writer;    /* checkpoint.sharded: every rank's, writing its shard (train_shard.c) */
    ckpt_uploader *uploader;      /* rank 0, with checkpoint.upload_cmd */
    char dir[CFG_PATH_MAX + 16];  /* checkpoint.dir, or run.dir/checkpoints */
    char command_log[CFG_PATH_MAX + 32];
    saved_buffer buffers[MAX_SAVED_BUFFERS];
    int n_buffers;
    float *host;                  /* rank 0: staging, the buffers one after another */
    char *settings;               /* rank 0: config_settings (SETTINGS_RESUME), saved as meta/config */
    ckpt_tensor *tensors;
    int64_t last_saved_step;
    double elapsed_before_s;      /* the resumed checkpoint's elapsed_s: training time of the attempts before */
    char last_written[CKPT_PATH_MAX]; /* rank 0: the newest checkpoint this job wrote whole, "" before one */
    int64_t durable_step;         /* rank 0: the newest step saved whole, by this job or the one resumed; -1 */
    double last_save_time;        /* monotonic: when the latest save began (before the first: train_ckpt_open) */
    int restart_count;            /* this attempt (DDPRUN_RESTART_COUNT), saved in the header */
    double stall_s;               /* rank 0: the latest save's stall, from its start to the snapshot's submit */
    bool pending;                 /* rank 0: a write whose times are not yet reported (train_budget.c) */
    bool last_write_failed;       /* rank 0: the background write before this one failed (write_ended) */
    bool downloaded;              /* rank 0: checkpoint.download_cmd has run (at most once a resume) */
    bool marker_forgotten;        /* rank 0: the first save removed a download's marker (ckpt_download_forget) */
    bool dir_shared_seen;         /* checkpoint.sharded: every rank saw dir before the resume (train_ckpt_check_dir) */
    ckpt_write_observer observe;  /* checkpoint.sharded: told of each save's write (train_ckpt_observe) */
    void *observe_ctx;
} train_ckpt;

/* Rank 0, on a job's first attempt that does not take checkpoint.dir's newest: a fresh start
 * (checkpoint.resume: never; path NULL) or checkpoint.resume's path at step `from`. Checkpoints
 * in checkpoint.dir that a restart would resume instead (all of them, or those beyond `from` when
 * path lies there) are another line of training's, which pruning would also keep before this
 * run's own. Refused, naming them; nothing is removed. (train_ckpt.c) */
int train_ckpt_refuse_other_line(const train_job *t, const char *path, int64_t from, ddp_err *err);

#endif
