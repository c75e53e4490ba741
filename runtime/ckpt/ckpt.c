/* ckpt.c — checkpoint files in a directory: the atomic durable write (temp + fsync + rename +
 * directory fsync), pruning to keep_last, and finding the newest valid checkpoint with fallback.
 *
 * The byte layout lives in ckpt_format.c and the background thread in ckpt_writer.c. This file
 * must not decide when to save or talk to other ranks; it never leaves a partial file under a
 * final name and never deletes the checkpoint it has just written.
 *
 * Test hooks: DDP_CKPT_TEST_SLOW_WRITE_MS=N sleeps N ms after every data chunk so tests can kill
 * a process in the middle of a write (DDP_TEST_FAULT=slow-chunks:RANK:STEP:SECONDS: SECONDS after
 * each chunk of RANK's write of step STEP, storage slow but working); DDP_CKPT_TEST_WRITEBACK_FAIL
 * (set) makes the first wait for writeback fail with EIO, as storage that lost a write would;
 * DDP_TEST_FAULT=prune-fail:0:STEP makes the prune that keeps step STEP's checkpoint fail, as an
 * unreadable directory would; read-local:RANK:STEP makes ckpt_read_entry's read of step STEP's
 * checkpoint fail as out of memory (a failure of the machine, not of the checkpoint). */
#include "ckpt_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "ckpt_set.h"
#include "runtime/base/affix.h"
#include "runtime/base/dirs.h"
#include "runtime/base/log.h"
#include "runtime/base/test_fault.h"

#define WRITE_CHUNK (4u << 20)
/* How far the page cache may run ahead of the storage: past it each chunk first waits for the
 * writeback of the bytes this far behind. Unbounded, a host with much memory takes a whole
 * checkpoint into its page cache at once and the final fsync writes it all, minutes with no sign
 * of progress to the stall watch (ckpt_writer.c); bounded, the fsync has at most this much left,
 * and 16 chunks keep the storage's queue full meanwhile. */
#define WRITE_BEHIND (64u << 20)

static pthread_once_t sigxfsz_once = PTHREAD_ONCE_INIT;

/* Past RLIMIT_FSIZE the kernel sends SIGXFSZ, whose default action kills the process; ignored,
 * the write fails with EFBIG and becomes a normal error. A handler someone installed is kept. */
static void ignore_sigxfsz(void)
{
    struct sigaction old;
    if (sigaction(SIGXFSZ, NULL, &old) == 0 && old.sa_handler == SIG_DFL) {
        struct sigaction ign = {0};
        ign.sa_handler = SIG_IGN;
        sigemptyset(&ign.sa_mask);
        sigaction(SIGXFSZ, &ign, NULL);
    }
}
void ckpt_ignore_sigxfsz_once(void) { pthread_once(&sigxfsz_once, ignore_sigxfsz); }

void ckpt_file_name(int64_t step, char *out, size_t out_size)
{
    snprintf(out, out_size, "ckpt-%08lld.ddp", (long long)step);
}

/* Step of a final checkpoint name "ckpt-<digits>.ddp" (or, with set, of a sharded set's directory
 * "ckpt-<digits>"), or -1 for anything else. */
static int64_t parse_ckpt_name(const char *name, bool set)
{
    if (!has_prefix(name, "ckpt-"))
        return -1;
    const char *p = name + 5;
    int64_t step = 0;
    int digits = 0;
    for (; *p >= '0' && *p <= '9' && digits < 18; p++, digits++)
        step = step * 10 + (*p - '0');
    return digits > 0 && strcmp(p, set ? "" : ".ddp") == 0 ? step : -1;
}

/* Removes ".ckpt-*.tmp.<pid>" files of dead processes, and of this pid: this process saves one at a
 * time, so such a file is an earlier process's (a container's rank 0 has one pid every start). */
static void remove_stale_temps(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        const char *tag = strstr(de->d_name, ".tmp.");
        long pid = tag && has_prefix(de->d_name, ".ckpt-") ? strtol(tag + 5, NULL, 10) : 0;
        if (pid <= 0 || (pid != (long)getpid() && (kill((pid_t)pid, 0) == 0 || errno != ESRCH)))
            continue;
        if (unlinkat(dirfd(d), de->d_name, 0) == 0)
            log_warn("checkpoint: removed %s/%s left by an interrupted save", dir, de->d_name);
    }
    closedir(d);
}

static int slow_write_ms(int64_t step)
{
    const char *s = getenv("DDP_CKPT_TEST_SLOW_WRITE_MS");
    test_fault f;
    if (s)
        return atoi(s);
    return test_fault_at("slow-chunks", step, &f) ? (int)(f.seconds * 1000) : 0;
}

/* Where a write stands in its temporary file: the descriptor, the offset reached, how much of it
 * the storage has taken for sure (its writeback waited for), and the caller's progress counter
 * (ckpt_state.progress, or NULL). */
typedef struct write_stream {
    int fd;
    uint64_t off;
    uint64_t settled;
    bool unbounded;     /* the filesystem cannot wait for a range: the final fsync writes it all */
    bool fail_settle;   /* test hook DDP_CKPT_TEST_WRITEBACK_FAIL: the next wait fails with EIO */
    const char *tmp;
    _Atomic uint64_t *progress;
} write_stream;

/* Before a chunk of next bytes: waits for the writeback of what would lie more than WRITE_BEHIND
 * behind its end. Its I/O error is the write's: sync_file_range reports it once, and the fsync
 * after it would not again. */
static int settle_behind(write_stream *st, uint64_t next, ddp_err *err)
{
    if (st->unbounded || st->off + next <= st->settled + WRITE_BEHIND)
        return DDP_OK;
    uint64_t upto = st->off + next - WRITE_BEHIND; /* <= off: next is at most a chunk */
    unsigned flags = SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER;
    int r = st->fail_settle ? (errno = EIO, -1)
                            : sync_file_range(st->fd, (off_t)st->settled, (off_t)(upto - st->settled), flags);
    if (r == 0)
        st->settled = upto;
    else if (errno == EINVAL || errno == ENOSYS || errno == ESPIPE || errno == EOPNOTSUPP)
        st->unbounded = true;
    else if (errno != EINTR) /* EINTR: tried again after the next chunk */
        return ddp_fail(err, DDP_ERUNTIME, "checkpoint %s: writeback: %s", st->tmp, strerror(errno));
    return DDP_OK;
}

/* Writes n bytes at st->off in chunks (slow_ms: the test hook's pause after each), retrying short
 * writes and EINTR. Each chunk's writeback to the disk starts as soon as it is in the page cache
 * (sync_file_range), so the disk streams while later chunks are copied instead of all of it
 * waiting for the final fsync; no more than WRITE_BEHIND is left to it (settle_behind). */
static int stream_out(write_stream *st, const void *src, uint64_t n, int slow_ms, ddp_err *err)
{
    const uint8_t *p = src;
    while (n > 0) {
        size_t chunk = n > WRITE_CHUNK ? WRITE_CHUNK : (size_t)n;
        int rc = settle_behind(st, chunk, err);
        if (rc != DDP_OK)
            return rc;
        ssize_t w = write(st->fd, p, chunk);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return ddp_fail(err, DDP_ERUNTIME, "checkpoint %s: write: %s", st->tmp, strerror(errno));
        /* a hint: a filesystem without it still gets the fsync that makes the file durable */
        (void)sync_file_range(st->fd, (off_t)st->off, (off_t)w, SYNC_FILE_RANGE_WRITE);
        st->off += (uint64_t)w;
        p += w;
        n -= (uint64_t)w;
        if (st->progress)
            atomic_fetch_add_explicit(st->progress, (uint64_t)w, memory_order_relaxed);
        if (slow_ms > 0) {
            struct timespec ts = {slow_ms / 1000, (long)(slow_ms % 1000) * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    return DDP_OK;
}

/* The tensors' CRCs, computed on a thread of their own while the same bytes are written: the
 * header that holds them is written last anyway, and CRC and disk then take max(), not the sum,
 * of their times (500 MB: about 0.26 s of CRC at zlib's 1.9 GB/s next to 1.1 s of disk). */
typedef struct crc_pass {
    const ckpt_state *s;
    ckpt_layout *L;
} crc_pass;

static void *compute_crcs(void *arg)
{
    crc_pass *c = arg;
    for (int i = 0; i < c->L->n; i++) {
        c->L->crc[i] = (uint32_t)crc32_z(crc32_z(0L, NULL, 0), c->s->tensors[i].data, c->L->nbytes[i]);
        if (c->s->progress) /* on storage faster than zlib the header waits for this */
            atomic_fetch_add_explicit(c->s->progress, c->L->nbytes[i], memory_order_relaxed);
    }
    return NULL;
}

static int pwrite_all(int fd, const uint8_t *p, size_t n, const char *tmp, ddp_err *err)
{
    off_t off = 0;
    while (n > 0) {
        ssize_t w = pwrite(fd, p, n, off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return ddp_fail(err, DDP_ERUNTIME, "checkpoint %s: write header: %s", tmp, strerror(errno));
        p += w;
        off += w;
        n -= (size_t)w;
    }
    return DDP_OK;
}

/* Header placeholder, tensor data (CRCs computed beside it), then the real header at 0. */
static int write_contents(int fd, const ckpt_state *s, ckpt_layout *L, const char *tmp, ddp_err *err)
{
    static const uint8_t zeros[CKPT_ALIGN];
    uint8_t *header = NULL;
    if (ckpt_header_encode(s, L, &header, err))
        return err->code;
    crc_pass crcs = {s, L};
    pthread_t crc_thread;
    bool threaded = pthread_create(&crc_thread, NULL, compute_crcs, &crcs) == 0;
    if (!threaded)
        compute_crcs(&crcs);
    int slow_ms = slow_write_ms(s->hdr.step);
    write_stream st = {.fd = fd, .tmp = tmp, .progress = s->progress,
                       .fail_settle = getenv("DDP_CKPT_TEST_WRITEBACK_FAIL") != NULL};
    int rc = stream_out(&st, header, L->data_start, slow_ms, err);
    for (int i = 0; !rc && i < L->n; i++) {
        if (L->offset[i] > st.off)
            rc = stream_out(&st, zeros, L->offset[i] - st.off, 0, err);
        if (!rc)
            rc = stream_out(&st, s->tensors[i].data, L->nbytes[i], slow_ms, err);
    }
    if (threaded)
        pthread_join(crc_thread, NULL);
    free(header);
    header = NULL;
    if (!rc)
        rc = ckpt_header_encode(s, L, &header, err);
    if (!rc)
        rc = pwrite_all(fd, header, L->data_start, tmp, err);
    free(header);
    if (!rc && fsync(fd) != 0)
        rc = ddp_fail(err, DDP_ERUNTIME, "checkpoint %s: fsync: %s", tmp, strerror(errno));
    return rc;
}

int ckpt_write_atomic(const char *dir, const ckpt_state *s, char *final_path, ddp_err *err)
{
    char name[64];
    ckpt_file_name(s->hdr.step, name, sizeof name);
    return ckpt_write_atomic_as(dir, name, s, final_path, err);
}

int ckpt_write_atomic_as(const char *dir, const char *name, const ckpt_state *s, char *final_path, ddp_err *err)
{
    ckpt_ignore_sigxfsz_once();
    char tmp[CKPT_PATH_MAX], final[CKPT_PATH_MAX];
    if (snprintf(final, sizeof final, "%s/%s", dir, name) >= (int)sizeof final ||
        snprintf(tmp, sizeof tmp, "%s/.%s.tmp.%ld", dir, name, (long)getpid()) >= (int)sizeof tmp)
        return ddp_fail(err, DDP_EUSAGE, "checkpoint directory path too long: %s", dir);
    ckpt_layout L;
    if (ckpt_layout_plan(s, &L, err))
        return err->code;
    int rc = make_dirs(dir, err) ? ddp_prefix(err, "checkpoint directory %s", dir) : DDP_OK;
    if (!rc)
        remove_stale_temps(dir);
    int fd = rc ? -1 : open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (!rc && fd < 0)
        rc = ddp_fail(err, DDP_ERUNTIME, "checkpoint %s: cannot create: %s", tmp, strerror(errno));
    if (!rc)
        rc = write_contents(fd, s, &L, tmp, err);
    if (fd >= 0 && close(fd) != 0 && !rc)
        rc = ddp_fail(err, DDP_ERUNTIME, "checkpoint %s: close: %s", tmp, strerror(errno));
    if (!rc && rename(tmp, final) != 0)
        rc = ddp_fail(err, DDP_ERUNTIME, "checkpoint %s: rename to %s: %s", tmp, final, strerror(errno));
    if (rc && fd >= 0)
        unlink(tmp);   /* the previous checkpoints are untouched; only our temp goes */
    if (!rc)
        rc = dir_fsync(dir, err) ? ddp_prefix(err, "checkpoint") : DDP_OK;
    ckpt_layout_free(&L);
    if (!rc && final_path)
        snprintf(final_path, CKPT_PATH_MAX, "%s", final);
    return rc;
}

/* ---- listing, pruning, lookup ------------------------------------------------------- */

/* A single file, or a sharded set's directory (set) and whether it holds a manifest (committed). */
typedef struct ckpt_entry { int64_t step; char name[256]; bool set, committed; } ckpt_entry;

static int by_step_desc(const void *a, const void *b)
{
    const ckpt_entry *p = a, *q = b;
    return p->step < q->step ? 1 : p->step > q->step ? -1 : (int)q->set - (int)p->set;
}

/* Whether the entry is a regular file (through a symbolic link too): a directory or a device
 * named like a checkpoint is none, and counts toward no keep_last. */
static bool is_file(DIR *d, const struct dirent *de)
{
    if (de->d_type == DT_REG)
        return true;
    if (de->d_type != DT_UNKNOWN && de->d_type != DT_LNK)
        return false;
    struct stat st;
    return fstatat(dirfd(d), de->d_name, &st, 0) == 0 && S_ISREG(st.st_mode);
}

static bool is_dir_entry(DIR *d, const struct dirent *de)
{
    struct stat st;
    return fstatat(dirfd(d), de->d_name, &st, 0) == 0 && S_ISDIR(st.st_mode);
}

/* Whether a set's directory holds its manifest. */
static bool has_manifest(DIR *d, const char *name)
{
    char path[CKPT_PATH_MAX];
    struct stat st;
    snprintf(path, sizeof path, "%s/" CKPT_SET_MANIFEST, name);
    return fstatat(dirfd(d), path, &st, 0) == 0 && S_ISREG(st.st_mode);
}

/* Final checkpoint files and sets' directories in dir, newest step first (at one step the set
 * first). CKPT_NONE when dir does not exist; a listing cut short (EIO) fails, not a shorter list. */
static int list_ckpts(const char *dir, ckpt_entry **out, int *n, ddp_err *err)
{
    *out = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT)
            return CKPT_NONE;
        return ddp_fail(err, DDP_ERUNTIME, "checkpoint directory %s: %s", dir, strerror(errno));
    }
    int cap = 0;
    struct dirent *de;
    while (errno = 0, (de = readdir(d)) != NULL) {
        int64_t step = parse_ckpt_name(de->d_name, false);
        bool set = step < 0 && (step = parse_ckpt_name(de->d_name, true)) >= 0;
        if (step < 0 || !(set ? is_dir_entry(d, de) : is_file(d, de)))
            continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            ckpt_entry *grown = realloc(*out, (size_t)cap * sizeof **out);
            if (!grown)
                break; /* errno: ENOMEM */
            *out = grown;
        }
        (*out)[*n].step = step;
        (*out)[*n].set = set;
        (*out)[*n].committed = !set || has_manifest(d, de->d_name);
        snprintf((*out)[*n].name, sizeof (*out)[*n].name, "%s", de->d_name);
        (*n)++;
    }
    int failed = errno;
    closedir(d);
    if (failed) {
        free(*out);
        *out = NULL;
        *n = 0;
        return ddp_fail(err, DDP_ERUNTIME, "checkpoint directory %s: cannot list it: %s", dir, strerror(failed));
    }
    if (*n > 0)
        qsort(*out, (size_t)*n, sizeof **out, by_step_desc);
    return DDP_OK;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static bool is_held(const char *name, const char *const held[], int n_held)
{
    for (int i = 0; i < n_held; i++)
        if (held[i] && held[i][0] && strcmp(base_name(held[i]), name) == 0)
            return true;
    return false;
}

/* Removes entry e of dir: a file, or a set whole (ckpt_set_remove); *progress (may be NULL) counts
 * each file removed. */
static bool remove_entry(const char *dir, const ckpt_entry *e, _Atomic uint64_t *progress)
{
    char path[CKPT_PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, e->name);
    ddp_err why = {0};
    if (e->set ? ckpt_set_remove(path, progress, &why) == DDP_OK : unlink(path) == 0) {
        if (!e->set && progress)
            atomic_fetch_add_explicit(progress, 1, memory_order_relaxed);
        return true;
    }
    log_warn("checkpoint: cannot remove old checkpoint %s: %s", path, e->set ? why.msg : strerror(errno));
    return false;
}

/* The checkpoints this process's newest-first walk passed over (damaged, unreadable), as dir/name:
 * a prune neither counts nor deletes them, whatever their step, until a save writes the name again
 * or a later walk takes it (fetched again by checkpoint.download_cmd).
 * Counted, a damaged one would push a valid one out of keep_last once a later save's step passed
 * its own. The walk runs on the job's thread, prunes on the writer's: hence the lock. */
#define PASSED_OVER_MAX 64
static struct {
    pthread_mutex_t lock;
    int n;
    char path[PASSED_OVER_MAX][CKPT_PATH_MAX];
} passed_over = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Index of dir/name among the passed-over paths, or -1; call with the lock held. */
static int passed_over_index(const char *dir, const char *name)
{
    char path[CKPT_PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    for (int i = 0; i < passed_over.n; i++)
        if (strcmp(passed_over.path[i], path) == 0)
            return i;
    return -1;
}

/* dir/name onto the list when passed, else off it (a checkpoint like any other again). */
static void mark_passed_over(const char *dir, const char *name, bool passed)
{
    pthread_mutex_lock(&passed_over.lock);
    int i = passed_over_index(dir, name);
    if (passed && i < 0 && passed_over.n < PASSED_OVER_MAX)
        snprintf(passed_over.path[passed_over.n++], CKPT_PATH_MAX, "%s/%s", dir, name);
    else if (!passed && i >= 0)
        memcpy(passed_over.path[i], passed_over.path[--passed_over.n], CKPT_PATH_MAX);
    pthread_mutex_unlock(&passed_over.lock);
}

static bool was_passed_over(const char *dir, const char *name)
{
    pthread_mutex_lock(&passed_over.lock);
    bool found = passed_over_index(dir, name) >= 0;
    pthread_mutex_unlock(&passed_over.lock);
    return found;
}

/* Test-only: DDP_TEST_FAULT prune-fail at the step of the checkpoint this prune keeps. */
static bool test_prune_fails(int64_t kept_step)
{
    test_fault f;
    return kept_step >= 0 && test_fault_get(&f) && strcmp(f.kind, "prune-fail") == 0 && f.step == kept_step;
}

/* A set not committed at or above the newest kept (another save in progress): not this prune's to
 * remove. */
static bool spared(const ckpt_entry *e, int64_t newest_kept)
{
    return !e->committed && e->step >= newest_kept;
}

int ckpt_prune_except(const char *dir, int keep_last, const char *keep_path, const char *const held[], int n_held,
                      _Atomic uint64_t *progress, ddp_err *err)
{
    if (keep_last <= 0)
        return DDP_OK;
    ckpt_entry *e;
    int n, rc = list_ckpts(dir, &e, &n, err);
    if (rc)
        return rc == CKPT_NONE ? DDP_OK : rc;
    const char *keep = keep_path ? base_name(keep_path) : "";
    mark_passed_over(dir, keep, false); /* written again */
    int64_t newest_kept = -1, keep_step = -1;
    int kept = 0, removed = 0;
    for (int i = 0; i < n; i++)
        if (strcmp(e[i].name, keep) == 0)
            kept++, newest_kept = keep_step = e[i].step;
    if (test_prune_fails(newest_kept)) {
        free(e);
        return ddp_fail(err, DDP_ERUNTIME, "checkpoint: cannot prune %s (DDP_TEST_FAULT prune-fail)", dir);
    }
    for (int i = 0; i < n; i++) {
        /* one newer than the checkpoint just written is one this job's resume passed over (found
         * damaged or unreadable) or did not start from: counted, it would push out the older ones
         * the job's history holds; it is left alone, as one the resume passed over is at any step,
         * until a save of its step replaces it */
        if (strcmp(e[i].name, keep) == 0 || spared(&e[i], newest_kept) || (keep_step >= 0 && e[i].step > keep_step) ||
            was_passed_over(dir, e[i].name))
            continue;
        if (e[i].committed && kept < keep_last) {
            kept++;
            newest_kept = newest_kept < 0 ? e[i].step : newest_kept;
            continue;
        }
        if (!is_held(e[i].name, held, n_held))
            removed += remove_entry(dir, &e[i], progress);
    }
    free(e);
    return removed && dir_fsync(dir, err) ? ddp_prefix(err, "checkpoint") : DDP_OK;
}

int ckpt_prune(const char *dir, int keep_last, const char *keep_path, ddp_err *err)
{
    return ckpt_prune_except(dir, keep_last, keep_path, NULL, 0, NULL, err);
}

void ckpt_prune_after_save(const char *dir, int keep_last, const char *keep_path, const char *const held[],
                           int n_held, _Atomic uint64_t *progress)
{
    ddp_err e = {0};
    if (ckpt_prune_except(dir, keep_last, keep_path, held, n_held, progress, &e) != DDP_OK)
        log_warn("checkpoint: %s is written, but older ones were not pruned: %s", keep_path, e.msg);
}

int ckpt_count_beyond(const char *dir, int64_t step, ckpt_beyond *out, ddp_err *err)
{
    ckpt_entry *e;
    int n;
    *out = (ckpt_beyond){.newest_step = -1};
    int rc = list_ckpts(dir, &e, &n, err);
    if (rc)
        return rc == CKPT_NONE ? DDP_OK : rc;
    for (int i = 0; i < n; i++) {
        if (!e[i].committed || e[i].step <= step)
            continue;
        if (out->count++ == 0) { /* newest first */
            snprintf(out->newest, sizeof out->newest, "%s", e[i].name);
            out->newest_step = e[i].step;
        }
    }
    free(e);
    return DDP_OK;
}

int ckpt_read_entry(void *ctx, const char *path, bool set, ddp_err *err)
{
    int rc = set ? ckpt_set_load(path, ctx, err) : ckpt_read(path, ctx, err);
    test_fault f;
    if (rc == DDP_OK && test_fault_at("read-local", ((ckpt_loaded *)ctx)->hdr.step, &f)) {
        ckpt_loaded_free(ctx);
        return ddp_fail_local(err, "DDP_TEST_FAULT read-local: out of memory for %s", path);
    }
    return rc;
}

int ckpt_find_latest(const char *dir, ckpt_loaded *out, char *used_path, ddp_err *err)
{
    memset(out, 0, sizeof *out);
    int rc = ckpt_find_latest_with(dir, ckpt_read_entry, out, used_path, err);
    return rc == CKPT_DAMAGED ? DDP_ERUNTIME : rc;
}

int ckpt_find_latest_with(const char *dir, ckpt_try_fn try_entry, void *ctx, char *used_path, ddp_err *err)
{
    ckpt_entry *e;
    int n, rc = list_ckpts(dir, &e, &n, err);
    int committed = 0;
    for (int i = 0; rc == DDP_OK && i < n; i++)
        committed += e[i].committed;
    if (rc == CKPT_NONE || (rc == DDP_OK && committed == 0)) {
        for (int i = 0; i < n; i++)
            log_warn("checkpoint %s/%s: no %s (a save that did not finish): not a checkpoint", dir, e[i].name,
                     CKPT_SET_MANIFEST);
        free(e);
        ddp_fail(err, DDP_OK, "no checkpoint in %s", dir);
        return CKPT_NONE;
    }
    if (rc)
        return rc;
    for (int i = 0, left = committed; i < n; i++) {
        char path[CKPT_PATH_MAX];
        ddp_err why = {0};
        snprintf(path, sizeof path, "%s/%s", dir, e[i].name);
        int tried = e[i].committed ? try_entry(ctx, path, e[i].set, &why) : DDP_ERUNTIME;
        if (tried == DDP_OK || tried == CKPT_STOP || why.local) { /* local: an older one would fare no better */
            if (tried == DDP_OK)
                mark_passed_over(dir, e[i].name, false);
            if (used_path)
                snprintf(used_path, CKPT_PATH_MAX, "%s", path);
            if (why.local)
                tried = ddp_fail_local(err, "%s; %s is not passed over for it: the failure is this machine's, not "
                                       "the checkpoint's", why.msg, path);
            free(e);
            return tried;
        }
        left -= e[i].committed;
        if (e[i].committed)
            mark_passed_over(dir, e[i].name, true);
        if (!e[i].committed)
            snprintf(why.msg, sizeof why.msg, "checkpoint %s/%s: no %s (a save that did not finish): not a checkpoint",
                     dir, e[i].name, CKPT_SET_MANIFEST);
        log_warn("%s; %s", why.msg, left > 0 ? "falling back to the previous checkpoint" : "no older checkpoint left");
    }
    free(e);
    ddp_fail(err, DDP_ERUNTIME, "checkpoint directory %s: %d checkpoint(s), none valid (see warnings above)", dir,
             committed);
    return CKPT_DAMAGED;
}

int ckpt_loaded_train_samples(const ckpt_loaded *c, const char *path, int64_t *n, ddp_err *err)
{
    const ckpt_tensor *x = ckpt_loaded_tensor(c, CKPT_TRAIN_SAMPLES_TENSOR);
    *n = 0;
    if (!x)
        return DDP_OK;
    if (x->dtype != CKPT_I64 || ckpt_tensor_numel(x) != 1 || !x->data || ((const int64_t *)x->data)[0] <= 0)
        return ddp_fail(err, DDP_ERUNTIME, "checkpoint %s: %s is not one positive int64", path,
                        CKPT_TRAIN_SAMPLES_TENSOR);
    *n = ((const int64_t *)x->data)[0];
    return DDP_OK;
}
