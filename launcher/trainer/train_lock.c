/* train_lock.c — run.dir's lock: one job per run.dir, so two jobs never write the same metrics,
 * checkpoints or traces. Rank 0 takes it (runtime/base/dir_lock.h) and holds it while the job runs;
 * the other ranks only learn rank 0's verdict. It owns the lock (t->run_lock). Must not write into
 * run.dir, and must not release the lock while a writer into run.dir may still be open: the job's
 * teardown releases it last. */
#include <sys/stat.h>

#include "runtime/base/dir_lock.h"
#include "train_lock.h"

#define RUN_DIR_LOCK "ddprun.lock"

int train_lock_run_dir(train_job *t, bool create, ddp_err *err)
{
    int32_t status = DDP_OK;
    struct stat st;
    bool lock = t->ctl->rank == 0 && !t->run_lock && (create || stat(t->cfg->run.dir, &st) == 0);
    if (lock && (status = dir_lock_take(t->cfg->run.dir, RUN_DIR_LOCK, t->ctl->host, &t->run_lock, err)))
        ddp_prefix(err, "run.dir");
    int rc = t->ctl->ops->broadcast(t->ctl, &status, 1, DT_INT32, 0, NULL, err);
    if (rc == DDP_OK && status != DDP_OK && t->ctl->rank != 0) {
        err->code = status;
        err->msg[0] = '\0'; /* rank 0 names the holder */
    }
    return rc != DDP_OK ? rc : status;
}

void train_lock_release(train_job *t)
{
    dir_lock_release(t->run_lock);
    t->run_lock = NULL;
}
