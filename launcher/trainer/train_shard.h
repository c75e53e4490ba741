/* train_shard.h — a training job's sharded checkpoint save (checkpoint.sharded: true; train_shard.c):
 * every rank writes the extents of the global buffers it holds into its own shard file at once, and
 * rank 0 commits the set with its manifest once every rank's shard is durable; and a rank's read of
 * what it holds on resume. It keeps no state of its own. Must not decide when to save or what a
 * buffer is (train_ckpt.c), nor the file format (runtime/ckpt/ckpt_set.h). */
#ifndef DDP_TRAIN_SHARD_H
#define DDP_TRAIN_SHARD_H

#include "runtime/ckpt/ckpt.h"
#include "runtime/ckpt/ckpt_set.h"
#include "train_job.h"

/* A saved buffer: n_params floats on the device, or (sharded) the optimizer's n_state floats of
 * this rank's parts. */
typedef struct train_shard_buffer {
    const char *prefix;        /* "param/", "optim/exp_avg/", ... */
    const float *dev;
    bool sharded;
} train_shard_buffer;

typedef struct train_shard_save {
    const char *dir;           /* checkpoint.dir: the set goes to dir/ckpt-<step>/ */
    ckpt_writer *writer;       /* this rank's: writes its shard, giving it up when the storage stalls */
    const train_shard_buffer *buffers;
    int n_buffers;
    ckpt_header hdr;
    const char *settings;      /* rank 0: the meta/config text */
    int64_t train_samples;     /* the training split's samples (meta/train_samples) */
    int keep_last;
    ckpt_uploader *uploader;   /* rank 0: checkpoint.upload_cmd's, handed each committed set before the
                                  prune (which spares what it uploads); NULL: none */
} train_shard_save;

/* Every rank, at the same step: writes this rank's shard, then (rank 0) the manifest, and starts
 * the upload (s->uploader) and the prune to keep_last on s->writer, which the next save waits for before its shard. Every
 * shard's header (and the manifest's) is s->hdr with rank 0's save_time, which the commit requires
 * of each shard. DDP_OK on every rank only when the set is committed; st (rank 0) gets the set's
 * directory, its bytes, the time until it was committed (write_s) and, apart from it, the wait for
 * the previous save's prune (prune_s). */
int train_shard_write(train_job *t, const train_shard_save *s, ckpt_write_stats *st, ddp_err *err);

/* Every rank, at the start (mine: this rank's verdict so far): every rank writes its shards into
 * dir, so every rank must see the folder rank 0 does and write there. Rank 0 makes a file of a
 * name drawn now in dir, every other rank opens it and makes (and removes) one of its own, they
 * agree, and rank 0's goes. A rank that does not find it (a node-local disk, a share not mounted
 * on its host) fails with DDP_EUSAGE naming the folder and its host, one that cannot write there
 * (mounted read-only) with DDP_ERUNTIME; the others name it; all before any training. With
 * if_there, where dir is no directory on rank 0's host the ranks agree without a check
 * (*checked false); otherwise rank 0 has made dir already. */
int train_shard_check_dir(train_job *t, const char *dir, int mine, bool if_there, bool *checked, ddp_err *err);

/* A resume from a set: what this rank holds of buffer prefix of the set r reads (whatever world
 * size and stage saved it) into dev. sharded (ZeRO's optimizer state, ZeRO-3's parameters): its
 * extents, its shard of n_state floats, through a host copy of the shard; else the whole buffer
 * of n_params floats, a chunk at a time (train_host_chunk, train_replica.h). */
int train_shard_read_own(train_job *t, ckpt_set_reader *r, const char *prefix, float *dev, bool sharded,
                         ddp_err *err);

#endif
