/* ckpt_writer.c — saving checkpoints from a background thread so training only pays for a host
 * memcpy: submit deep-copies the state into a reused snapshot buffer and returns; the worker
 * writes it atomically (ckpt.c) and prunes. One write in flight at a time.
 *
 * This file must not touch the trainer's buffers after submit returns, nor drop a write's
 * error: it is returned by the next submit or wait. Its thread must not call CUDA: a thread's
 * current device is its own, and one that never selects it works on GPU 0. */
#include "ckpt_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_upload.h"
#include "runtime/base/clock.h"

struct ckpt_writer {
    char dir[CKPT_PATH_MAX];
    int keep_last;
    ckpt_uploader *uploader;  /* NULL: no checkpoint.upload_cmd */
    ckpt_write_observer observe;  /* NULL: none (ckpt_writer_set_observer) */
    void *observe_ctx;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool busy;          /* a snapshot is waiting for or being written */
    bool quit;
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

/* Hands the new checkpoint to the uploader first, so that pruning spares what it still reads. */
static int prune_after(ckpt_writer *w, const char *path, int64_t step, ddp_err *e)
{
    char held[2][CKPT_PATH_MAX] = {"", ""};
    if (w->uploader) {
        ckpt_uploader_submit(w->uploader, path, step);
        ckpt_uploader_held(w->uploader, held);
    }
    const char *const held_paths[2] = {held[0], held[1]};
    return ckpt_prune_except(w->dir, w->keep_last, path, held_paths, 2, e);
}

static void *worker_main(void *arg)
{
    ckpt_writer *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->busy && !w->quit)
            pthread_cond_wait(&w->cv, &w->mu);
        if (!w->busy)
            break;
        pthread_mutex_unlock(&w->mu);

        /* the snapshot is ours alone while busy: submit waits before touching it */
        ddp_err e = {0};
        char path[CKPT_PATH_MAX] = "";
        double t0 = monotonic_s();
        int rc = ckpt_write_atomic(w->dir, &w->snap, path, &e);
        double t1 = monotonic_s();
        if (!rc)
            rc = prune_after(w, path, w->snap.hdr.step, &e);
        double t2 = monotonic_s();

        pthread_mutex_lock(&w->mu);
        ckpt_write_observer observe = w->observe;
        void *observe_ctx = w->observe_ctx;
        pthread_mutex_unlock(&w->mu);
        if (observe) {
            observe(observe_ctx, "checkpoint write", t0, t1);
            observe(observe_ctx, "checkpoint prune", t1, t2);
        }

        pthread_mutex_lock(&w->mu);
        w->status = rc;
        w->status_err = e;
        w->stats.write_s = t1 - t0;
        w->stats.prune_s = t2 - t1;
        snprintf(w->stats.path, sizeof w->stats.path, "%s", rc == DDP_OK ? path : ""); /* "": not written */
        w->busy = false;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

void ckpt_writer_set_observer(ckpt_writer *w, ckpt_write_observer observe, void *ctx)
{
    pthread_mutex_lock(&w->mu);
    w->observe = observe;
    w->observe_ctx = ctx;
    pthread_mutex_unlock(&w->mu);
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
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    int rc = pthread_create(&w->thread, NULL, worker_main, w);
    if (rc != 0) {
        pthread_mutex_destroy(&w->mu);
        pthread_cond_destroy(&w->cv);
        free(w);
        return ddp_fail(err, DDP_ERUNTIME, "checkpoint writer: pthread_create: %s", strerror(rc));
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
        w->stats.bytes = L.file_len;
    }
    ckpt_layout_free(&L);
    return rc;
}

/* Caller holds mu. Waits for the in-flight write; returns and clears its status. */
static int wait_locked(ckpt_writer *w, ddp_err *err)
{
    while (w->busy)
        pthread_cond_wait(&w->cv, &w->mu);
    int rc = w->status;
    if (rc && err)
        *err = w->status_err;
    w->status = DDP_OK;
    return rc;
}

int ckpt_writer_submit(ckpt_writer *w, const ckpt_state *s, ddp_err *err)
{
    pthread_mutex_lock(&w->mu);
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
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return rc;
}

void ckpt_writer_set_uploader(ckpt_writer *w, ckpt_uploader *u)
{
    pthread_mutex_lock(&w->mu);
    w->uploader = u;
    pthread_mutex_unlock(&w->mu);
}

int ckpt_writer_wait(ckpt_writer *w, ckpt_write_stats *stats, ddp_err *err)
{
    pthread_mutex_lock(&w->mu);
    int rc = wait_locked(w, err);
    if (stats)
        *stats = w->stats;
    pthread_mutex_unlock(&w->mu);
    return rc;
}

void ckpt_writer_destroy(ckpt_writer *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    w->quit = true;   /* the worker finishes a pending write first: it only exits when !busy */
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w->snap_tensors);
    free(w->arena);
    free(w);
}
