/* ckpt_upload.c — checkpoint.upload_cmd on a thread of its own, and checkpoint.download_cmd
 * (ckpt_upload.h). The upload thread only runs commands and reports them; what is waiting and
 * running is shared with the checkpoint writer's thread under one mutex, so that pruning never
 * deletes a file an upload reads. Must not touch a checkpoint's contents. */
#include "ckpt_upload.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime/base/clock.h"
#include "runtime/base/command.h"
#include "runtime/base/dirs.h"
#include "runtime/base/log.h"
#include "runtime/base/worker.h"

const char *const ckpt_upload_placeholders[] = {"path", "name", "dir", "step", NULL};
const char *const ckpt_download_placeholders[] = {"dir", NULL};

typedef struct upload_job {
    char path[CKPT_PATH_MAX];   /* absolute; "" = none */
    int64_t step;
} upload_job;

struct ckpt_uploader {
    char cmd[COMMAND_MAX];
    double timeout_s;
    char log_path[CKPT_PATH_MAX];
    worker thread;   /* its mutex guards the fields below; the checkpoint writer's thread reads them too */
    upload_job waiting, running;
    int failed;
    double last_s;   /* the newest successful upload's time; 0 before the first */
};

/* Set by ckpt_uploader_abandon: the job failed, and the running upload is ended (one uploader per
 * process, and command_stop_fn takes no context). */
static atomic_int abandoned;

static int upload_abandoned(void)
{
    return atomic_load(&abandoned);
}

/* Opens the log for appending and writes a header line naming what runs and with which values. */
static int open_log(const char *log_path, const char *what, const char *tmpl, const char *const names[],
                    const char *const values[], int n)
{
    int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    char stamp[32];
    time_t now = time(NULL);
    struct tm tm;
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
    dprintf(fd, "=== %s %s: %s\n", stamp, what, tmpl);
    for (int i = 0; i < n; i++) {
        char var[96];
        command_var_name(names[i], var, sizeof var);
        dprintf(fd, "    {%s} = %s = %s\n", names[i], var, values[i]);
    }
    return fd;
}

/* Runs the template tmpl with its placeholders' values; on failure err holds "`TMPL` HOW ENDED:
 * LAST LINE (output in LOG)". */
static int run_logged(const char *what, const char *tmpl, const char *const names[], const char *const values[],
                      int n, double timeout_s, command_stop_fn stop, const char *log_path, command_result *res,
                      ddp_err *err)
{
    char cmd[COMMAND_MAX];
    int rc = command_expand(tmpl, names, n, cmd, sizeof cmd, err);
    if (rc != DDP_OK)
        return rc;
    int fd = open_log(log_path, what, tmpl, names, values, n);
    rc = command_run_stoppable(cmd, names, values, n, timeout_s, stop, fd, res, err);
    if (fd >= 0)
        close(fd);
    if (rc != DDP_OK) {
        ddp_err why = *err;
        ddp_fail(err, rc, "`%s` %s%s%s (output in %s)", tmpl, why.msg, res->tail[0] ? ": " : "", res->tail,
                 fd >= 0 ? log_path : "nowhere: the log could not be opened");
    }
    return rc;
}

static void upload_one(ckpt_uploader *u, const upload_job *job)
{
    char dir[CKPT_PATH_MAX], step[24];
    snprintf(dir, sizeof dir, "%s", job->path);
    char *slash = strrchr(dir, '/');
    const char *name = slash ? slash + 1 : job->path;
    if (slash)
        *slash = '\0';
    snprintf(step, sizeof step, "%lld", (long long)job->step);
    const char *values[] = {job->path, name, dir, step};
    ddp_err e = {0};
    command_result res;
    int rc = run_logged("upload", u->cmd, ckpt_upload_placeholders, values, 4, u->timeout_s, upload_abandoned,
                        u->log_path, &res, &e);
    if (rc == DDP_OK) {
        log_info("checkpoint: %s uploaded in %.1f s (checkpoint.upload_cmd)", name, res.seconds);
        worker_lock(&u->thread);
        u->last_s = res.seconds > 0 ? res.seconds : 1e-9; /* one that took no time still took place */
        worker_unlock(&u->thread);
        return;
    }
    worker_lock(&u->thread);
    u->failed++;
    worker_unlock(&u->thread);
    if (upload_abandoned())
        log_warn("checkpoint: upload of %s ended, as the job failed; the checkpoint stays in %s", name, dir);
    else
        log_warn("checkpoint: upload of %s failed: %s; training goes on and the checkpoint stays in %s", name, e.msg,
                 dir);
}

static void upload_main(worker *t, void *arg)
{
    ckpt_uploader *u = arg;
    worker_lock(t);
    for (;;) {
        while (!u->waiting.path[0] && !worker_stopping(t))
            worker_wait(t);
        if (!u->waiting.path[0])
            break;
        u->running = u->waiting;
        u->waiting.path[0] = '\0';
        upload_job job = u->running;
        worker_unlock(t);
        upload_one(u, &job);
        worker_lock(t);
        u->running.path[0] = '\0';
        worker_wake(t);
    }
    worker_unlock(t);
}

int ckpt_uploader_create(const char *cmd, double timeout_s, const char *log_path, ckpt_uploader **out,
                         ddp_err *err)
{
    *out = NULL;
    ckpt_uploader *u = calloc(1, sizeof *u);
    if (!u)
        return ddp_fail(err, DDP_ERUNTIME, "checkpoint uploader: out of memory");
    snprintf(u->cmd, sizeof u->cmd, "%s", cmd);
    snprintf(u->log_path, sizeof u->log_path, "%s", log_path);
    u->timeout_s = timeout_s;
    worker_init(&u->thread);
    int rc = worker_start(&u->thread, "checkpoint uploader", NULL, upload_main, u, err);
    if (rc != DDP_OK) {
        worker_destroy(&u->thread);
        free(u);
        return rc;
    }
    *out = u;
    return DDP_OK;
}

void ckpt_uploader_submit(ckpt_uploader *u, const char *path, int64_t step)
{
    char abs[PATH_MAX];
    if (!realpath(path, abs))
        snprintf(abs, sizeof abs, "%s", path);
    worker_lock(&u->thread);
    if (u->waiting.path[0])
        log_warn("checkpoint: upload of %s skipped: the upload before it is still running and %s is newer",
                 strrchr(u->waiting.path, '/') ? strrchr(u->waiting.path, '/') + 1 : u->waiting.path, path);
    snprintf(u->waiting.path, sizeof u->waiting.path, "%s", abs);
    u->waiting.step = step;
    worker_wake(&u->thread);
    worker_unlock(&u->thread);
}

void ckpt_uploader_held(ckpt_uploader *u, char held[2][CKPT_PATH_MAX])
{
    worker_lock(&u->thread);
    memcpy(held[0], u->running.path, CKPT_PATH_MAX);
    memcpy(held[1], u->waiting.path, CKPT_PATH_MAX);
    worker_unlock(&u->thread);
}

double ckpt_uploader_last_seconds(ckpt_uploader *u)
{
    worker_lock(&u->thread);
    double s = u->last_s;
    worker_unlock(&u->thread);
    return s;
}

int ckpt_uploader_drain(ckpt_uploader *u)
{
    worker_lock(&u->thread);
    if (u->running.path[0] || u->waiting.path[0])
        log_info("checkpoint: waiting for the upload of %s (checkpoint.upload_cmd, at most %g s)",
                 u->waiting.path[0] ? u->waiting.path : u->running.path, u->timeout_s);
    while (u->running.path[0] || u->waiting.path[0])
        worker_wait(&u->thread);
    int failed = u->failed;
    worker_unlock(&u->thread);
    return failed;
}

bool ckpt_uploader_drain_for(ckpt_uploader *u, double max_s)
{
    double until = monotonic_s() + max_s;
    worker_lock(&u->thread);
    while ((u->running.path[0] || u->waiting.path[0]) && monotonic_s() < until)
        worker_wait_for(&u->thread, until - monotonic_s());
    bool idle = !u->running.path[0] && !u->waiting.path[0];
    worker_unlock(&u->thread);
    return idle;
}

void ckpt_uploader_abandon(ckpt_uploader *u)
{
    worker_lock(&u->thread);
    atomic_store(&abandoned, 1);
    if (u->waiting.path[0])
        log_warn("checkpoint: upload of %s not started: the job failed", u->waiting.path);
    u->waiting.path[0] = '\0';
    worker_unlock(&u->thread);
}

void ckpt_uploader_destroy(ckpt_uploader *u)
{
    if (!u)
        return;
    ckpt_uploader_drain(u);
    worker_destroy(&u->thread);
    free(u);
}

static void marker_path(const char *dir, char path[PATH_MAX])
{
    snprintf(path, PATH_MAX, "%s/%s", dir, CKPT_DOWNLOAD_MARKER);
}

bool ckpt_download_unfinished(const char *dir)
{
    char path[PATH_MAX];
    marker_path(dir, path);
    return access(path, F_OK) == 0;
}

/* The marker made durable before the command runs (its files may reach the disk first), or
 * removed durably after it finished; where there is none to remove, nothing is written. */
static int set_marker(const char *dir, bool on, ddp_err *err)
{
    char path[PATH_MAX];
    marker_path(dir, path);
    if (!on && unlink(path) != 0)
        return errno == ENOENT ? DDP_OK : ddp_fail(err, DDP_ERUNTIME, "checkpoint.dir: cannot remove %s: %s", path,
                                                   strerror(errno));
    int fd = on ? open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644) : -1;
    if (on && fd < 0)
        return ddp_fail(err, DDP_ERUNTIME, "checkpoint.dir: cannot create %s: %s", path, strerror(errno));
    if (fd >= 0)
        close(fd);
    return dir_fsync(dir, err);
}

void ckpt_download_forget(const char *dir)
{
    ddp_err e = {0};
    if (set_marker(dir, false, &e) != DDP_OK)
        log_warn("checkpoint: %s", e.msg);
}

int ckpt_download(const char *cmd, const char *dir, double timeout_s, command_stop_fn stop, const char *log_path,
                  ddp_err *err)
{
    char abs[PATH_MAX];
    int rc = make_dirs(dir, err);
    if (rc != DDP_OK)
        return ddp_prefix(err, "checkpoint.dir");
    if (!realpath(dir, abs))
        snprintf(abs, sizeof abs, "%s", dir);
    const char *values[] = {abs};
    if (ckpt_download_unfinished(dir))
        log_info("checkpoint: an earlier checkpoint.download_cmd into %s did not finish (%s); fetching again", dir,
                 CKPT_DOWNLOAD_MARKER);
    else
        log_info("checkpoint: none in %s; fetching with checkpoint.download_cmd", dir);
    if ((rc = set_marker(dir, true, err)) != DDP_OK)
        return rc;
    command_result res;
    rc = run_logged("download", cmd, ckpt_download_placeholders, values, 1, timeout_s, stop, log_path, &res, err);
    if (rc == DDP_EPREEMPTED)
        log_warn("checkpoint: checkpoint.download_cmd was stopped by the stop request; %s/%s stays, so the next "
                 "start fetches again", dir, CKPT_DOWNLOAD_MARKER);
    if (rc != DDP_OK) {
        ckpt_beyond held;
        ddp_err unlisted = {0};
        if (ckpt_count_beyond(dir, -1, &held, &unlisted) == DDP_OK && held.count > 0)
            log_warn("checkpoint: %s/%s stays: what the folder holds (the newest %s) is not resumed until a "
                     "download finishes (remove the file to resume from it)", dir, CKPT_DOWNLOAD_MARKER, held.newest);
        return ddp_prefix(err, "checkpoint.download_cmd");
    }
    log_info("checkpoint: checkpoint.download_cmd finished in %.1f s", res.seconds);
    return set_marker(dir, false, err);
}
