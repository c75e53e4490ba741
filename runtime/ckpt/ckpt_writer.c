/* ckpt_writer.c — saving checkpoints from a background thread so training only pays for a host
 * memcpy: submit deep-copies the state into a reused snapshot buffer and returns; the worker
 * writes it atomically (ckpt.c) and prunes. One write in flight at a time.
 *
 * A wait watches the write: when the storage takes no byte for stall_s (a network mount that
 * stopped answering), the write is given up and every call returns why from then on, so the job
 * ends naming it instead of hanging. The thread may be stuck in the kernel for good; it is left
 * alone, and after it the writer and its uploader, which it may still touch. Until then the wait
 * calls the caller's keepalive every so often, so that ranks waiting for this one know it is not
 * hung.
 *
 * The caller's own work (ckpt_writer_run: a sharded set's shard, written from the caller's own
 * buffers by write_as, and its commit; ckpt_writer_start: the set's prune, waited for later) goes
 * through the same thread, so that its wait is watched too.
 *
 * This file must not touch the trainer's buffers after submit returns (a run's job: after it
 * returns, unless it was given up), nor drop a write's error: it is returned by the next submit, wait
 * or poll (a failed prune after it is only a warning, ckpt_prune_after_save). Its thread must not
 * call CUDA: a thread's current device is its own, and one that never selects it works on GPU 0.
 * Test-only, on the writer's rank RANK (test_fault_sleep_at):
 * DDP_TEST_FAULT=slow-write:RANK:STEP:SECONDS (runtime/base/test_fault.h) makes the write of step
 * STEP's checkpoint take SECONDS longer, as slow storage would (slow-prune: its prune, once the file
 * is durable); fail-write:RANK:STEP[:SECONDS] makes its first write fail (after SECONDS), as storage
 * that fails once would. */
#include "ckpt_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_upload.h"
#include "runtime/base/clock.h"
#include "runtime/base/test_fault.h"
#include "runtime/base/worker.h"

struct ckpt_writer {
    char dir[CKPT_PATH_MAX];
    int keep_last;
    ckpt_uploader *uploader;  /* NULL: no checkpoint.upload_cmd */
    ckpt_write_observer observe;  /* NULL: none (ckpt_writer_set_observer) */
    void *observe_ctx;
    _Atomic uint64_t progress; /* all writes' progress together (ckpt_state.progress) */
    worker thread;      /* its mutex guards the fields below */
    double stall_s;     /* > 0: how long a wait lets the storage take no byte (ckpt_writer_set_stall) */
    char stall_limit[128]; /* what sets stall_s, for the give-up error; "" unnamed */
    ckpt_keepalive_fn keepalive; /* NULL: none (ckpt_writer_set_keepalive) */
    void *keepalive_ctx;
    double keepalive_every_s;
    bool busy;          /* a snapshot is waiting for or being written */
    ckpt_job_fn job;    /* the work in flight is ckpt_writer_run's job(job_ctx) (NULL: a submit's snapshot) */
    void *job_ctx;
    char job_what[CKPT_PATH_MAX + 128]; /* the give-up error's words before " for N s" */
    bool stalled;       /* a wait gave the write up: stall_err is every call's answer */
    char durable[CKPT_PATH_MAX]; /* the write in flight's file once durable (its prune may still run) */
    ddp_err stall_err;
    int status;         /* last write's status, reported once */
    ddp_err status_err;
    ckpt_write_stats stats;
    /* the snapshot: header, tensor descriptors, and one arena holding all tensor data */
    ckpt_state snap;
    ckpt_tensor *snap_tensors;
    int snap_cap;
    uint8_t *arena;
    uint64_t arena_cap;
};

/* path is durable: says so to a wait, then hands it to the uploader first, so that pruning spares
 * what it still reads. Not after a wait gave the write up: the job is ending without it. */
static void prune_after(ckpt_writer *w, const char *path, int64_t step)
{
    char held[2][CKPT_PATH_MAX] = {"", ""};
    worker_lock(&w->thread);
    bool given_up = w->stalled;
    snprintf(w->durable, sizeof w->durable, "%s", path);
    worker_unlock(&w->thread);
    test_fault_sleep_at("slow-prune", step);
    if (given_up)
        return;
    if (w->uploader) {
        ckpt_uploader_submit(w->uploader, path, step);
        ckpt_uploader_held(w->uploader, held);
    }
    const char *const held_paths[2] = {held[0], held[1]};
    ckpt_prune_after_save(w->dir, w->keep_last, path, held_paths, 2, &w->progress);
}

/* Test-only: DDP_TEST_FAULT fail-write at this checkpoint's step, its first write only. Called
 * from the writer's thread alone. */
static int test_fail_write(int64_t step, ddp_err *err)
{
    static bool failed_once;
    test_fault f;
    if (failed_once || !test_fault_at("fail-write", step, &f))
        return DDP_OK;
    failed_once = true;
    test_fault_sleep(&f);
    return ddp_fail(err, DDP_ERUNTIME, "DDP_TEST_FAULT fail-write: the write of step %lld failed", (long long)step);
}

static void writer_main(worker *t, void *arg)
{
    ckpt_writer *w = arg;
    worker_lock(t);
    for (;;) {
        while (!w->busy && !worker_stopping(t))
            worker_wait(t);
        if (!w->busy)
            break; /* stopping: a pending write is finished first */
        worker_unlock(t);

        ddp_err e = {0};
        if (w->job) { /* the job and its context are ours alone while busy, as is the snapshot */
            int rc = w->job(w->job_ctx, &w->progress, &e);
            worker_lock(t);
            w->status = rc;
            w->status_err = e;
            w->busy = false;
            worker_wake(t);
            continue;
        }
        /* the snapshot is ours alone while busy: submit waits before touching it */
        char path[CKPT_PATH_MAX] = "";
        double t0 = monotonic_s();
        test_fault_sleep_at("slow-write", w->snap.hdr.step);
        int rc = test_fail_write(w->snap.hdr.step, &e);
        if (rc == DDP_OK)
            rc = ckpt_write_atomic(w->dir, &w->snap, path, &e);
        double t1 = monotonic_s();
        if (!rc)
            prune_after(w, path, w->snap.hdr.step);
        double t2 = monotonic_s();

        worker_lock(t);
        if (w->observe && !w->stalled) { /* under the lock: a given-up writer's owner may free its context */
            w->observe(w->observe_ctx, "checkpoint write", t0, t1);
            w->observe(w->observe_ctx, "checkpoint prune", t1, t2);
        }
        w->status = rc;
        w->status_err = e;
        w->stats.write_s = t1 - t0;
        w->stats.prune_s = t2 - t1;
        snprintf(w->stats.path, sizeof w->stats.path, "%s", rc == DDP_OK ? path : ""); /* "": not written */
        w->stats.step = w->snap.hdr.step;
        w->busy = false;
        worker_wake(t);
    }
    worker_unlock(t);
}

void ckpt_writer_set_observer(ckpt_writer *w, ckpt_write_observer observe, void *ctx)
{
    worker_lock(&w->thread);
    w->observe = observe;
    w->observe_ctx = ctx;
    worker_unlock(&w->thread);
}

void ckpt_writer_set_stall(ckpt_writer *w, double stall_s, const char *stall_limit)
{
    worker_lock(&w->thread);
    w->stall_s = stall_s;
    snprintf(w->stall_limit, sizeof w->stall_limit, "%s", stall_limit ? stall_limit : "");
    worker_unlock(&w->thread);
}

void ckpt_writer_set_keepalive(ckpt_writer *w, double every_s, ckpt_keepalive_fn keepalive, void *ctx)
{
    worker_lock(&w->thread);
    w->keepalive = every_s > 0 ? keepalive : NULL;
    w->keepalive_ctx = ctx;
    w->keepalive_every_s = every_s;
    worker_unlock(&w->thread);
}

int ckpt_writer_create(const char *dir, int keep_last, ckpt_writer **out, ddp_err *err)
{
    ckpt_ignore_sigxfsz_once();
    ckpt_writer *w = calloc(1, sizeof *w);
    if (!w)
        return ddp_fail(err, DDP_ERUNTIME, "checkpoint writer: out of memory");
    if (snprintf(w->dir, sizeof w->dir, "%s", dir) >= (int)sizeof w->dir) {
        free(w);
        return ddp_fail(err, DDP_EUSAGE, "checkpoint directory path too long: %s", dir);
    }
    w->keep_last = keep_last;
    worker_init(&w->thread);
    int rc = worker_start(&w->thread, "checkpoint writer", NULL, writer_main, w, err);
    if (rc != DDP_OK) {
        worker_destroy(&w->thread);
        free(w);
        return rc;
    }
    *out = w;
    return DDP_OK;
}

/* Grows the descriptor array and the data arena to fit s (arena reused across saves so the
 * stall does not pay page faults again). */
static int reserve_snapshot(ckpt_writer *w, const ckpt_state *s, const ckpt_layout *L, ddp_err *err)
{
    if (s->n_tensors > w->snap_cap) {
        ckpt_tensor *t = realloc(w->snap_tensors, (size_t)s->n_tensors * sizeof *t);
        if (!t)
            return ddp_fail(err, DDP_ERUNTIME, "checkpoint snapshot: out of memory");
        w->snap_tensors = t;
        w->snap_cap = s->n_tensors;
    }
    uint64_t need = 0;
    for (int i = 0; i < L->n; i++)
        need = ckpt_align_up(need + L->nbytes[i]);
    if (need > w->arena_cap) {
        free(w->arena);
        w->arena_cap = 0;
        w->arena = aligned_alloc(CKPT_ALIGN, need);
        if (!w->arena)
            return ddp_fail(err, DDP_ERUNTIME, "checkpoint snapshot: cannot allocate %llu bytes",
                            (unsigned long long)need);
        w->arena_cap = need;
    }
    return DDP_OK;
}

static int take_snapshot(ckpt_writer *w, const ckpt_state *s, ddp_err *err)
{
    ckpt_layout L;
    if (ckpt_layout_plan(s, &L, err))   /* validates before anything is copied */
        return err->code;
    int rc = reserve_snapshot(w, s, &L, err);
    uint64_t pos = 0;
    for (int i = 0; !rc && i < s->n_tensors; i++) {
        w->snap_tensors[i] = s->tensors[i];
        if (L.nbytes[i])
            memcpy(w->arena + pos, s->tensors[i].data, L.nbytes[i]);
        w->snap_tensors[i].data = w->arena + pos;
        pos = ckpt_align_up(pos + L.nbytes[i]);
    }
    if (!rc) {
        w->snap.hdr = s->hdr;
        w->snap.n_tensors = s->n_tensors;
        w->snap.tensors = w->snap_tensors;
        w->snap.progress = &w->progress;
        w->stats.bytes = L.file_len;
    }
    ckpt_layout_free(&L);
    return rc;
}

/* Caller holds the worker's mutex. The write in flight made no progress for stall_s. */
static void give_up(ckpt_writer *w)
{
    w->stalled = true;
    char limit[sizeof w->stall_limit + 32] = "";
    if (w->stall_limit[0])
        snprintf(limit, sizeof limit, "; the limit is %s", w->stall_limit);
    if (w->durable[0])
        ddp_fail(&w->stall_err, DDP_ERUNTIME, CKPT_WRITE_GIVEN_UP "step %lld is written (%s), but removing older "
                 "ones beyond checkpoint.keep_last made no progress for %g s (the storage may have stopped answering)%s",
                 (long long)w->snap.hdr.step, w->durable, w->stall_s, limit);
    else if (w->job)
        ddp_fail(&w->stall_err, DDP_ERUNTIME, CKPT_WRITE_GIVEN_UP "%s for %g s%s", w->job_what, w->stall_s, limit);
    else
        ddp_fail(&w->stall_err, DDP_ERUNTIME, CKPT_WRITE_GIVEN_UP "step %lld in %s: the storage took no byte of it "
                 "for %g s (the checkpoints written before it are as they were)%s", (long long)w->snap.hdr.step,
                 w->dir, w->stall_s, limit);
}

/* Caller holds the worker's mutex. Work in flight, not given up: calls the keepalive. */
static void keep_alive(ckpt_writer *w)
{
    if (w->keepalive && w->busy && !w->stalled)
        w->keepalive(w->keepalive_ctx);
}

/* Caller holds the worker's mutex. Waits for the in-flight write, and gives it up when the storage
 * took no byte for stall_s (counted from this wait's start: the write may have stalled earlier);
 * at its start and every keepalive_every_s meanwhile, until then, calls the keepalive. */
static void wait_watched(ckpt_writer *w)
{
    uint64_t seen = atomic_load_explicit(&w->progress, memory_order_relaxed);
    double since = monotonic_s(), told_s = since;
    keep_alive(w);
    while (w->busy && !w->stalled) {
        double until = w->stall_s > 0 ? since + w->stall_s : HUGE_VAL;
        if (w->keepalive && told_s + w->keepalive_every_s < until)
            until = told_s + w->keepalive_every_s;
        if (isinf(until)) {
            worker_wait(&w->thread);
            continue;
        }
        worker_wait_for(&w->thread, until - monotonic_s());
        uint64_t now = atomic_load_explicit(&w->progress, memory_order_relaxed);
        double now_s = monotonic_s();
        if (now != seen)
            seen = now, since = now_s;
        else if (w->stall_s > 0 && w->busy && now_s - since >= w->stall_s)
            give_up(w);
        if (now_s - told_s >= w->keepalive_every_s) {
            keep_alive(w);
            told_s = now_s;
        }
    }
}

/* Caller holds the worker's mutex. Waits for the in-flight write; returns and clears its status. */
static int wait_locked(ckpt_writer *w, ddp_err *err)
{
    wait_watched(w);
    if (w->stalled) {
        if (err)
            *err = w->stall_err;
        return w->stall_err.code;
    }
    int rc = w->status;
    if (rc && err)
        *err = w->status_err;
    w->status = DDP_OK;
    return rc;
}

int ckpt_writer_submit(ckpt_writer *w, const ckpt_state *s, ddp_err *err)
{
    worker_lock(&w->thread);
    int rc = wait_locked(w, err);
    if (!rc) {
        double t0 = monotonic_s();
        rc = take_snapshot(w, s, err);
        w->stats.snapshot_s = monotonic_s() - t0;
        w->stats.write_s = 0;
        w->stats.prune_s = 0;
        w->stats.path[0] = '\0';
    }
    if (!rc) {
        w->busy = true;
        w->job = NULL;
        w->durable[0] = '\0';
        worker_wake(&w->thread);
    }
    worker_unlock(&w->thread);
    return rc;
}

/* Caller holds the worker's mutex. Waits for the work in flight, then hands the thread job. */
static int start_locked(ckpt_writer *w, const char *what, ckpt_job_fn job, void *ctx, ddp_err *err)
{
    int rc = wait_locked(w, err);
    if (rc == DDP_OK) {
        w->job = job;
        w->job_ctx = ctx;
        w->stats = (ckpt_write_stats){.step = -1}; /* a job is no write of the writer's own */
        snprintf(w->job_what, sizeof w->job_what, "%s", what);
        w->busy = true;
        w->durable[0] = '\0';
        worker_wake(&w->thread);
    }
    return rc;
}

int ckpt_writer_run(ckpt_writer *w, const char *what, ckpt_job_fn job, void *ctx, ddp_err *err)
{
    worker_lock(&w->thread);
    int rc = start_locked(w, what, job, ctx, err);
    if (rc == DDP_OK)
        rc = wait_locked(w, err);
    worker_unlock(&w->thread);
    return rc;
}

int ckpt_writer_start(ckpt_writer *w, const char *what, ckpt_job_fn job, void *ctx, ddp_err *err)
{
    worker_lock(&w->thread);
    int rc = start_locked(w, what, job, ctx, err);
    worker_unlock(&w->thread);
    return rc;
}

/* ckpt_writer_write_as's job: the caller's state (its buffers borrowed) written as dir/name. */
typedef struct write_as_job {
    char dir[CKPT_PATH_MAX], name[128], path[CKPT_PATH_MAX];
    ckpt_state s;
} write_as_job;

static int write_as_main(void *ctx, _Atomic uint64_t *progress, ddp_err *err)
{
    write_as_job *j = ctx;
    j->s.progress = progress;
    test_fault_sleep_at("slow-write", j->s.hdr.step);
    int rc = test_fail_write(j->s.hdr.step, err);
    return rc == DDP_OK ? ckpt_write_atomic_as(j->dir, j->name, &j->s, j->path, err) : rc;
}

int ckpt_writer_write_as(ckpt_writer *w, const char *dir, const char *name, const ckpt_state *s, char *path,
                         ddp_err *err)
{
    write_as_job *j = calloc(1, sizeof *j);
    if (!j)
        return ddp_fail(err, DDP_ERUNTIME, "checkpoint writer: out of memory");
    if (snprintf(j->dir, sizeof j->dir, "%s", dir) >= (int)sizeof j->dir ||
        snprintf(j->name, sizeof j->name, "%s", name) >= (int)sizeof j->name) {
        free(j);
        return ddp_fail(err, DDP_EUSAGE, "checkpoint path too long: %s/%s", dir, name);
    }
    j->s = *s;
    char what[CKPT_PATH_MAX + 64];
    snprintf(what, sizeof what, "%s/%s (step %lld): the storage took no byte of it", dir, name, (long long)s->hdr.step);
    int rc = ckpt_writer_run(w, what, write_as_main, j, err);
    if (rc == DDP_OK && path)
        snprintf(path, CKPT_PATH_MAX, "%s", j->path);
    if (!ckpt_writer_stalled(w)) /* else its thread may still use it */
        free(j);
    return rc;
}

void ckpt_writer_set_uploader(ckpt_writer *w, ckpt_uploader *u)
{
    worker_lock(&w->thread);
    w->uploader = u;
    worker_unlock(&w->thread);
}

int ckpt_writer_wait(ckpt_writer *w, ckpt_write_stats *stats, ddp_err *err)
{
    worker_lock(&w->thread);
    int rc = wait_locked(w, err);
    if (stats)
        *stats = w->stats;
    worker_unlock(&w->thread);
    return rc;
}

bool ckpt_writer_poll(ckpt_writer *w, ckpt_write_stats *stats, int *status, ddp_err *err)
{
    worker_lock(&w->thread);
    bool idle = !w->busy || w->stalled;
    if (idle) {
        *stats = w->stats;
        *status = wait_locked(w, err);
    }
    worker_unlock(&w->thread);
    return idle;
}

bool ckpt_writer_stalled(ckpt_writer *w)
{
    worker_lock(&w->thread);
    bool stalled = w->stalled;
    worker_unlock(&w->thread);
    return stalled;
}

bool ckpt_writer_destroy(ckpt_writer *w)
{
    if (!w)
        return false;
    worker_lock(&w->thread);
    bool left = w->stalled && w->busy;
    worker_unlock(&w->thread);
    if (left)
        return true; /* its thread may come back from the storage at any time and must find it */
    worker_destroy(&w->thread); /* the thread finishes a pending write first: it only ends when !busy */
    free(w->snap_tensors);
    free(w->arena);
    free(w);
    return false;
}
