/* ckpt.h — checkpoints: the on-disk format (docs/checkpoint-format.md), atomic durable writes,
 * fully verified reads, newest-valid lookup with fallback, pruning and a background writer
 * (`ddprun ckpt info|diff`, which reads them, is launcher/commands/ckpt_tool.c).
 *
 * The trainer describes what to save as a ckpt_state (header fields + named host tensors); this
 * module never decides *when* to save, never talks MPI and never touches device memory: callers
 * stage device buffers to host first. A file is visible under its final name only once complete
 * and durable; a read returns nothing unless every CRC and size checked out.
 *
 * Signals: the first write (or ckpt_writer_create) sets SIGXFSZ to SIG_IGN process-wide when it
 * is at its default, so exceeding RLIMIT_FSIZE gives EFBIG (a clear error) instead of killing
 * the process. */
#ifndef DDP_CKPT_H
#define DDP_CKPT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/base/err.h"
#include "runtime/base/rng.h"

#define CKPT_FORMAT_VERSION 2
#define CKPT_MAX_NDIM 8
#define CKPT_NAME_MAX 128  /* tensor / RNG names, NUL included */
#define CKPT_MODEL_MAX 256 /* the model description, NUL included */
#define CKPT_MAX_RNG 64
#define CKPT_PATH_MAX 4096
#define CKPT_ALIGN 64      /* tensor data offsets are multiples of this */
/* The training job's record of its settings: config_settings' SETTINGS_RESUME text as u8
 * (docs/checkpoint-format.md). */
#define CKPT_SETTINGS_TENSOR "meta/config"
/* The training split's sample count that the header's `consumed` is a position in: i64 [1]. */
#define CKPT_TRAIN_SAMPLES_TENSOR "meta/train_samples"

/* Returned by ckpt_find_latest when the directory holds no checkpoint file at all (or does not
 * exist): not an error, "start fresh". Negative so it never collides with an exit status. */
#define CKPT_NONE (-1)

typedef enum ckpt_dtype {
    CKPT_F32 = 0, CKPT_F64 = 1, CKPT_I32 = 2, CKPT_I64 = 3, CKPT_U8 = 4, CKPT_BF16 = 5
} ckpt_dtype;

/* A named host tensor. Writers fill name/dtype/ndim/shape/data; reads also fill nbytes, crc
 * and crc_ok (data then points into the ckpt_loaded's own buffer). */
typedef struct ckpt_tensor {
    char name[CKPT_NAME_MAX];   /* e.g. "param/fc1.weight", "optim/m/fc1.weight" */
    ckpt_dtype dtype;
    int ndim;                   /* 0 = scalar */
    int64_t shape[CKPT_MAX_NDIM];
    const void *data;
    uint64_t nbytes;            /* read side only (writers: computed from dtype and shape) */
    uint32_t crc;               /* read side only: CRC32 stored in the table */
    bool crc_ok;                /* read side only: data matches crc */
    uint64_t file_offset;       /* read side only: where the data starts in the file */
} ckpt_tensor;

typedef struct ckpt_rng_state {
    char name[CKPT_NAME_MAX];   /* e.g. "sampler", "dropout/rank3" */
    rng state;
} ckpt_rng_state;

typedef struct ckpt_header {
    int64_t step;               /* optimizer steps done (global training step) */
    int64_t epoch;
    int64_t consumed;           /* global sampler position within the epoch */
    int64_t total_steps;        /* planned length of the run (LR schedule needs it) */
    int64_t optim_step;         /* optimizer's own step count (bias correction) */
    int32_t world_size;         /* ranks at save time */
    int32_t restart_count;
    uint64_t config_hash;       /* config_hash() of the run that saved */
    double save_time;           /* Unix time of the save, seconds */
    double elapsed_s;           /* training wall time so far, seconds */
    char model[CKPT_MODEL_MAX]; /* the model's kind and shape settings, e.g. "mlp hidden=[1024] ..." */
    int n_rng;
    ckpt_rng_state rng[CKPT_MAX_RNG];
} ckpt_header;

/* What the trainer hands in: the header plus tensors it owns (only read during the call). */
typedef struct ckpt_state {
    ckpt_header hdr;
    int n_tensors;
    const ckpt_tensor *tensors;
    /* NULL, or a counter a write advances as it goes, by the bytes of each chunk write(2) takes
     * and of each tensor checksummed beside them: another thread watching it sees whether the
     * write still moves (ckpt_writer's stall watch) */
    _Atomic uint64_t *progress;
} ckpt_state;

/* A checkpoint read back; owns its memory (free with ckpt_loaded_free). */
typedef struct ckpt_loaded {
    ckpt_header hdr;
    int n_tensors;
    ckpt_tensor *tensors;
    uint64_t file_bytes;
    void *blob_;                /* private: the file contents */
} ckpt_loaded;

size_t ckpt_dtype_size(ckpt_dtype d);
const char *ckpt_dtype_name(ckpt_dtype d);
/* Number of elements (product of shape; 1 for a scalar). */
uint64_t ckpt_tensor_numel(const ckpt_tensor *t);

/* Final file name for a step: "ckpt-%08lld.ddp" (more digits past 1e8 steps). */
void ckpt_file_name(int64_t step, char *out, size_t out_size);

/* Writes dir/ckpt-<step>.ddp atomically: a temporary ".ckpt-*.tmp.<pid>" in dir, written and
 * fsync'd, renamed into place, directory fsync'd. On any failure the temporary file is removed,
 * nothing else in dir changes, and err names the path and strerror. Leftover temporaries from
 * dead processes are removed. final_path (CKPT_PATH_MAX bytes, may be NULL) gets the path. */
int ckpt_write_atomic(const char *dir, const ckpt_state *s, char *final_path, ddp_err *err);
/* The same under the file name `name` in dir (a shard or manifest of a sharded set, ckpt_set.h). */
int ckpt_write_atomic_as(const char *dir, const char *name, const ckpt_state *s, char *final_path, ddp_err *err);

/* Deletes all checkpoints in dir except keep_path and the keep_last-1 others with the highest
 * steps below it; those above it (ones the job's resume passed over as damaged, or did not start
 * from), and any this process's ckpt_find_latest passed over, are neither counted nor deleted
 * until a save writes their name again. keep_last <= 0 keeps everything. Call only after
 * keep_path is durable. A sharded set (ckpt_set.h) counts as one checkpoint and goes whole; a
 * set's directory without a manifest counts for nothing and goes when it is older than the newest
 * kept checkpoint. */
int ckpt_prune(const char *dir, int keep_last, const char *keep_path, ddp_err *err);
/* Like ckpt_prune, but never deletes the n_held paths of held (NULL or "" entries are skipped):
 * checkpoints an upload still reads. One among the keep_last newest counts as kept; an older one
 * stays and goes at a later prune. *progress (may be NULL) counts each file removed, so that a
 * watched wait sees a long prune go on (ckpt_writer_set_stall). */
int ckpt_prune_except(const char *dir, int keep_last, const char *keep_path, const char *const held[], int n_held,
                      _Atomic uint64_t *progress, ddp_err *err);
/* ckpt_prune_except once keep_path is durable: a failure is only a warning naming keep_path, never
 * the save's error, since the save succeeded and the next one prunes again. */
void ckpt_prune_after_save(const char *dir, int keep_last, const char *keep_path, const char *const held[],
                           int n_held, _Atomic uint64_t *progress);

/* What ckpt_count_beyond finds: how many, and the newest's name and step ("" and -1 for none). */
typedef struct ckpt_beyond { int count; int64_t newest_step; char newest[256]; } ckpt_beyond;
/* The checkpoints in dir (files, and committed sets: what a resume or a prune takes) at steps above
 * `step`, into *out; a count of 0 when dir does not exist, or (with the error) cannot be listed. */
int ckpt_count_beyond(const char *dir, int64_t step, ckpt_beyond *out, ddp_err *err);

/* Reads and verifies the whole file (magic, version, header CRC, table sanity, sizes against the
 * file length, every tensor CRC) before returning DDP_OK; on failure *out is left empty and err
 * names the file and what was wrong (the tensor, for a CRC mismatch). */
int ckpt_read(const char *path, ckpt_loaded *out, ddp_err *err);

/* Like ckpt_read, but a tensor whose CRC does not match is kept with crc_ok = false instead of
 * failing the read (for `ckpt info`). The header and table must still be valid. */
int ckpt_read_lenient(const char *path, ckpt_loaded *out, ddp_err *err);

/* Loads the newest valid checkpoint in dir (by step), a file or a committed sharded set
 * (ckpt_set.h, assembled as one): a corrupt or truncated one (for a set: any of its shards) is
 * reported with log_warn (file and reason) and the previous one is tried; a set's directory
 * without a manifest is named and skipped. Returns DDP_OK (used_path, of CKPT_PATH_MAX bytes,
 * gets its path), CKPT_NONE when dir holds no checkpoint file or committed set, or DDP_ERUNTIME
 * when checkpoints exist but none is valid. */
int ckpt_find_latest(const char *dir, ckpt_loaded *out, char *used_path, ddp_err *err);

/* ckpt_find_latest's walk with another reader: try_entry(ctx, path, set, why) is called on each
 * committed checkpoint, newest first, until it returns DDP_OK (taken) or CKPT_STOP (the walk ends
 * there, e.g. at a kind of checkpoint the caller reads otherwise); any other status is reported
 * with why's message and the previous one is tried, unless why is local (ddp_fail_local: host
 * memory, the device), which ends the walk with that error: a checkpoint this machine could not
 * hold is not damaged, and passing it over would resume an older one. Returns what
 * ckpt_find_latest returns, but CKPT_DAMAGED where it returns DDP_ERUNTIME for checkpoints none
 * of which is valid (err says so as ckpt_find_latest's does), or CKPT_STOP; used_path gets the
 * path of the checkpoint the walk ended at. */
#define CKPT_STOP (-2)
#define CKPT_DAMAGED (-3)
typedef int (*ckpt_try_fn)(void *ctx, const char *path, bool set, ddp_err *why);
int ckpt_find_latest_with(const char *dir, ckpt_try_fn try_entry, void *ctx, char *used_path, ddp_err *err);
/* ckpt_find_latest's reader, a ckpt_try_fn: the checkpoint at path read and verified into ctx (a
 * ckpt_loaded, zeroed by the caller), a file, or a set assembled whole. */
int ckpt_read_entry(void *ctx, const char *path, bool set, ddp_err *err);

/* Only the header and tensor table of the file at path (preamble, header CRC, table sanity, the
 * file's length against its header), without reading or checking any tensor's data: tensors have
 * data NULL and crc_ok false, and file_offset says where each lies. *header_crc (may be NULL) gets
 * the header's stored CRC, which covers every tensor's CRC. */
int ckpt_read_table(const char *path, ckpt_loaded *out, uint32_t *header_crc, ddp_err *err);

/* Tensor by name, or NULL. */
const ckpt_tensor *ckpt_loaded_tensor(const ckpt_loaded *c, const char *name);
/* The training split's sample count c (read whole) records (CKPT_TRAIN_SAMPLES_TENSOR) in *n, 0 when
 * it records none (it was saved before checkpoints held it); one that is not a single positive i64
 * is refused naming path. */
int ckpt_loaded_train_samples(const ckpt_loaded *c, const char *path, int64_t *n, ddp_err *err);
/* RNG state by name, or NULL. */
const rng *ckpt_loaded_rng(const ckpt_loaded *c, const char *name);
void ckpt_loaded_free(ckpt_loaded *c);

/* ---- background writer ---------------------------------------------------------------- */

typedef struct ckpt_writer ckpt_writer;

typedef struct ckpt_write_stats {
    double snapshot_s;          /* time submit spent copying the state (the training stall) */
    double write_s;             /* background, until the file is durable: write + fsync + rename + dir fsync */
    double prune_s;             /* background, after that: removing checkpoints beyond keep_last */
    uint64_t bytes;             /* file size */
    char path[CKPT_PATH_MAX];   /* final path; "" when the last write failed or none finished */
    int64_t step;               /* the last write's step, written or not */
} ckpt_write_stats;

/* A writer for dir (created, with parents, at the first write) keeping keep_last checkpoints
 * (<= 0: all). The caller times ckpt_writer_submit for the stall, or reads stats.snapshot_s.
 * Its waits have no limit until ckpt_writer_set_stall gives them one. */
int ckpt_writer_create(const char *dir, int keep_last, ckpt_writer **out, ddp_err *err);
/* Waits for the previous write (returning its error, without starting a new one, if it failed),
 * deep-copies s into the writer's host snapshot and returns; the worker thread then writes it
 * atomically and prunes. s's buffers may change as soon as this returns. */
int ckpt_writer_submit(ckpt_writer *w, const ckpt_state *s, ddp_err *err);
/* Work on the storage that the caller waits for, run on the writer's thread so that the wait is
 * watched as every wait is (ckpt_writer_set_stall): job(ctx, progress, err) returns a status and
 * may count the bytes the storage takes in *progress (a job that counts none is given up stall_s
 * after the wait began). ckpt_writer_run waits for any write in flight (returning its error, without
 * running job, if it failed), then runs job and waits for it: its status, or the give-up error,
 * CKPT_WRITE_GIVEN_UP what " for N s" (what: "the commit of PATH made no progress"). Stats read
 * after it are zero, step -1: a job is no write of the writer's own. A job given up may still use ctx at any time from its thread:
 * the caller must never free ctx, nor what it points to, once ckpt_writer_stalled says so (the
 * process is ending). No prune, no upload. */
typedef int (*ckpt_job_fn)(void *ctx, _Atomic uint64_t *progress, ddp_err *err);
int ckpt_writer_run(ckpt_writer *w, const char *what, ckpt_job_fn job, void *ctx, ddp_err *err);
/* ckpt_writer_run without its last wait: job runs while the caller goes on, and the next call that
 * waits (run, start, submit, write_as, wait) waits for it, watched, and returns its status or the
 * give-up error naming what (poll reports it once it ended). ctx is the job's from the start on: the
 * job frees it, if it must. */
int ckpt_writer_start(ckpt_writer *w, const char *what, ckpt_job_fn job, void *ctx, ddp_err *err);
/* A ckpt_writer_run of s written as dir/name (ckpt_write_atomic_as): a sharded set's shard, written
 * while the other ranks write theirs (rank 0 prunes older sets by a job of its own). s is not copied: once
 * ckpt_writer_stalled says so, its buffers are the job's ctx. path (CKPT_PATH_MAX bytes, may be
 * NULL) gets the file's path. */
int ckpt_writer_write_as(ckpt_writer *w, const char *dir, const char *name, const ckpt_state *s, char *path,
                         ddp_err *err);
/* Waits until no write is in flight; returns the last write's status (once) and its stats
 * (stats may be NULL). */
int ckpt_writer_wait(ckpt_writer *w, ckpt_write_stats *stats, ddp_err *err);
/* Without waiting: true when no write is in flight, with the last one's stats and its status in
 * *status and err (once, as wait returns it). */
bool ckpt_writer_poll(ckpt_writer *w, ckpt_write_stats *stats, int *status, ddp_err *err);
/* After each successful write, before pruning, hands the new checkpoint to u (ckpt_upload.h) and
 * holds the checkpoints u still uploads from pruning. Set before the first submit. */
typedef struct ckpt_uploader ckpt_uploader;
void ckpt_writer_set_uploader(ckpt_writer *w, ckpt_uploader *u);
/* After each submitted write, the writer's thread calls observe(ctx, what, begin_s, end_s) for
 * "checkpoint write" (until the file is durable) and "checkpoint prune" (never for a job), with monotonic_s() readings (a
 * profiler's hook; it must be thread-safe and outlive the writer). NULL stops the calls. */
typedef void (*ckpt_write_observer)(void *ctx, const char *what, double begin_s, double end_s);
void ckpt_writer_set_observer(ckpt_writer *w, ckpt_write_observer observe, void *ctx);
/* How the error of a write given up for the storage's stall begins. ddprun, which reads the ranks'
 * output, bounds mpirun from a line holding it on: the rank may be unable to end, its process held
 * by the writer's thread stuck in the kernel. */
#define CKPT_WRITE_GIVEN_UP "checkpoint write given up: "
/* From now on, stall_s > 0: a call that waits for a write gives it up when the storage takes no
 * byte for that long (the prune after it included), and from then on every call fails with that
 * error (ckpt_writer_stalled), which ends "; the limit is " stall_limit when stall_limit is not
 * NULL (the setting the user would change); 0: waits as long as the write takes. A caller whose
 * reason for the limit changes, as at a job's end, sets it again. */
void ckpt_writer_set_stall(ckpt_writer *w, double stall_s, const char *stall_limit);
/* While a wait waits for work in flight, it calls keepalive(ctx) on the waiting thread at its start
 * and every every_s (> 0), until the work ends or the stall watch gives it up (a write that stopped
 * is given up within stall_s, and no call follows), so that the ranks waiting for this one hear it
 * is not hung (comm_mpi_busy). Called with the writer's lock held: it must be quick and must not
 * call the writer. NULL stops the calls. */
typedef void (*ckpt_keepalive_fn)(void *ctx);
void ckpt_writer_set_keepalive(ckpt_writer *w, double every_s, ckpt_keepalive_fn keepalive, void *ctx);
/* Whether a wait gave a write up for the storage's stall (ckpt_writer_set_stall). */
bool ckpt_writer_stalled(ckpt_writer *w);
/* Waits for an in-flight write, then stops the thread and frees everything; false. True: a write
 * given up is still in its thread, which may come back from the storage at any time: the writer
 * is left to it, never freed, and so must its uploader be, which it may still hand a checkpoint
 * (the process is ending). */
bool ckpt_writer_destroy(ckpt_writer *w);

#endif
