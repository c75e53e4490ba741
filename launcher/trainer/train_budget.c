/* train_budget.c — what a durable checkpoint's times say (rank 0): they go to run.tensorboard as
 * checkpoint/..., and the first time the cloud is known, the preemption budget is checked. On a
 * preemption notice the job saves at the end of the step in flight (the stop agreement), so a save
 * on notice takes the poll interval (checkpoint.notice_poll_s: the notice is seen up to that late),
 * up to one step (this run's mean so far, evaluations, log lines and saves left out), then the
 * save's stall (the finite check,
 * ZeRO's collection, the snapshot) and the write until the file is durable, all measured on this
 * run's latest save. When that is more than the notice window of the cloud the notice watch found
 * (cloud_notice_window_s: AWS 120 s, GCP and Azure 30 s), the save would not finish before the
 * machine goes: a warning says so and what would help. No cloud known (checkpoint.preemption_notice
 * off, or no metadata service answered): nothing is said. With checkpoint.upload_cmd, whose users'
 * checkpoint.dir may go with the machine, the first upload measured adds a second check of a save
 * that fits: the save and an upload as long as that one, against the same window. It owns this
 * run's step time (train_observe.c adds each step's work), what the checks found, and keeps the
 * worker's notice watch. Must not change when or what is saved. */
#include <stdio.h>
#include <stdlib.h>

#include "runtime/base/log.h"
#include "train_budget.h"
#include "train_tb.h"

struct train_budget {
    notice_watch *notice;   /* this node's preemption notice watch (the worker's), NULL when none */
    double run_step_s;      /* this run's steps' own work, never reset */
    bool checked;           /* rank 0: the budget was checked */
    /* rank 0, for the upload's check: the cloud, and a save on its notice that fits (its time, its
     * size); fits false when none was checked or it did not fit (then nothing more is said) */
    notice_provider cloud;
    bool fits, upload_checked;
    double save_s, save_mb;
};

int train_budget_open(train_job *t, notice_watch *notice, ddp_err *err)
{
    t->budget = calloc(1, sizeof *t->budget);
    if (!t->budget)
        return ddp_fail(err, DDP_ERUNTIME, "out of memory");
    t->budget->notice = notice;
    return DDP_OK;
}

void train_budget_close(train_job *t)
{
    free(t->budget);
    t->budget = NULL;
}

void train_budget_count_work(train_job *t, double s)
{
    t->budget->run_step_s += s;
}

static void check_budget(train_job *t, const ckpt_write_stats *st, double stall_s, notice_provider cloud)
{
    double window = cloud_notice_window_s(cloud), steps = t->step > t->start_step ? (double)(t->step - t->start_step) : 1;
    /* a set's shards are written inside the stall (and before them, the previous save's prune if it
     * still runs: counted with the rest of the save), a single file's after it, in the background */
    bool sharded = t->cfg->checkpoint.sharded;
    double before_write_s = sharded ? stall_s - st->write_s : stall_s;
    double poll_s = t->cfg->checkpoint.notice_poll_s, step_s = t->budget->run_step_s / steps;
    double need = poll_s + step_s + before_write_s + st->write_s;
    double mb = (double)st->bytes / 1e6;
    const char *before = sharded ? "the rest of the save" : "the snapshot";
    struct train_budget *b = t->budget;
    b->cloud = cloud, b->fits = need <= window, b->save_s = need, b->save_mb = mb;
    if (need <= window) {
        log_info("preemption budget: a save on %s's notice takes about %.1f s (the notice seen up to %.1f s late, a "
                 "step %.2f s, %s %.2f s, the write %.2f s) of its %.0f s notice", cloud_name(cloud), need, poll_s,
                 step_s, before, before_write_s, st->write_s, window);
        return;
    }
    double write_room = window - poll_s - step_s - before_write_s;
    char storage[160] = "";
    if (write_room > 0)
        snprintf(storage, sizeof storage, "storage that writes %.3g MB in %.0f s (%.3g MB/s or faster, e.g. a local "
                 "disk, with checkpoint.upload_cmd copying it off), or ", mb, write_room, mb / write_room);
    log_warn("preemption budget: a save on %s's notice would take about %.1f s (the notice seen up to %.1f s late, "
             "a step %.2f s, %s %.2f s, the write of %.3g MB %.1f s at %.3g MB/s), more than its %.0f s notice: the "
             "machine would go before the checkpoint is durable. What fits: %sa smaller checkpoint.every_minutes (now "
             "%g), so that less is lost to the last periodic checkpoint", cloud_name(cloud), need, poll_s, step_s,
             before, before_write_s, mb, st->write_s, st->write_s > 0 ? mb / st->write_s : 0.0, window, storage,
             t->cfg->checkpoint.every_minutes);
}

void train_budget_uploaded(train_job *t, double upload_s)
{
    struct train_budget *b = t->budget;
    if (!b->fits || b->upload_checked || upload_s <= 0)
        return;
    b->upload_checked = true;
    double window = cloud_notice_window_s(b->cloud), total = b->save_s + upload_s;
    if (total <= window) {
        log_info("preemption budget: with checkpoint.upload_cmd, a checkpoint saved on %s's notice is uploaded after "
                 "about %.1f s (the save %.1f s, the upload %.1f s as the last took) of its %.0f s notice",
                 cloud_name(b->cloud), total, b->save_s, upload_s, window);
        return;
    }
    double room = window - b->save_s;
    char speed[96] = "";
    if (room > 0) /* the save alone fits: room >= 0 */
        snprintf(speed, sizeof speed, "an upload of %.3g MB in %.0f s (%.3g MB/s or faster), or ", b->save_mb, room,
                 b->save_mb / room);
    log_warn("preemption budget: with checkpoint.upload_cmd, a checkpoint saved on %s's notice would be uploaded "
             "after about %.1f s (the save %.1f s, the upload %.1f s as the last took), more than its %.0f s notice: "
             "where checkpoint.dir goes with the machine, the next start resumes from an older upload, up to "
             "checkpoint.every_minutes (now %g) older. What fits: %scheckpoint.dir on storage that outlives the "
             "machine", cloud_name(b->cloud), total, b->save_s, upload_s, window, t->cfg->checkpoint.every_minutes,
             speed);
}

int train_budget_written(train_job *t, const ckpt_write_stats *st, double stall_s, ddp_err *err)
{
    struct train_budget *b = t->budget;
    notice_provider cloud = notice_watch_cloud(b->notice);
    if (!b->checked && cloud != NOTICE_AUTO) { /* NOTICE_AUTO: still detecting; the next save checks */
        b->checked = true;
        if (cloud != NOTICE_OFF)
            check_budget(t, st, stall_s, cloud);
    }
    int rc = train_tb_scalar(t, st->step, "checkpoint/stall_ms", 1e3 * stall_s, err);
    if (rc == DDP_OK)
        rc = train_tb_scalar(t, st->step, "checkpoint/write_s", st->write_s, err);
    if (rc == DDP_OK)
        rc = train_tb_scalar(t, st->step, "checkpoint/mb", (double)st->bytes / 1e6, err);
    return rc;
}
