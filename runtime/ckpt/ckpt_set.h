/* ckpt_set.h — sharded checkpoints (docs/checkpoint-format.md, "Sharded checkpoints"): a directory
 * ckpt-<step>/ holding one shard file per rank of the saving job, each an ordinary checkpoint file
 * whose tensors are pieces ("extents") of the global flat float32 buffers, and manifest.ddp, which
 * rank 0 writes last and which alone makes the directory a checkpoint.
 *
 * This module knows the names, the manifest and how the pieces make whole buffers again; it never
 * talks MPI, never decides when to save, and never writes a shard's data itself (ckpt.h's atomic
 * writer does). A directory whose manifest is missing or whose shards do not match it is no
 * checkpoint: every read refuses it naming the file and what is wrong. */
#ifndef DDP_CKPT_SET_H
#define DDP_CKPT_SET_H

#include "ckpt.h"

#define CKPT_SET_MANIFEST "manifest.ddp"
#define CKPT_SET_MAX_BUFFERS 8
#define CKPT_SET_PREFIX_MAX 32      /* a buffer's prefix ("param/", "optim/exp_avg/"), NUL included */
#define CKPT_SET_SHARD_NAME_MAX 64

/* One named tensor of the global buffers: elements [offset, offset + numel) of each buffer. */
typedef struct ckpt_set_tensor {
    char name[CKPT_NAME_MAX];       /* without the buffer's prefix: "fc1.weight" */
    int ndim;
    int64_t shape[CKPT_MAX_NDIM];
    int64_t offset;
} ckpt_set_tensor;

/* Shard file `shard` holds elements [offset, offset + count) of buffer `buffer`. */
typedef struct ckpt_extent {
    int32_t shard, buffer;
    int64_t offset, count;
} ckpt_extent;

typedef struct ckpt_set_shard {
    char name[CKPT_SET_SHARD_NAME_MAX];  /* "shard-00001-of-00004.ddp" */
    uint64_t bytes;                 /* the file's length */
    uint32_t header_crc;            /* its header's CRC, which covers each of its tensors' CRCs */
} ckpt_set_shard;

typedef struct ckpt_manifest {
    ckpt_header hdr;
    int n_buffers;
    char buffers[CKPT_SET_MAX_BUFFERS][CKPT_SET_PREFIX_MAX];
    int64_t buffer_len;             /* float32 elements of every buffer */
    int n_tensors;
    ckpt_set_tensor *tensors;
    int n_shards;
    ckpt_set_shard *shards;
    int n_extents;
    ckpt_extent *extents;
    const char *settings;           /* the meta/config text (NULL: none); not NUL-terminated */
    uint64_t settings_len;
    int64_t train_samples;          /* meta/train_samples; 0: none recorded */
    ckpt_loaded raw_;               /* private: the manifest file read back */
} ckpt_manifest;

/* The elements of a tensor of a verified manifest (ckpt_manifest_read). */
int64_t ckpt_set_tensor_numel(const ckpt_set_tensor *t);
/* "ckpt-%08lld" (the set's directory name), "shard-%05d-of-%05d.ddp" ("shard-%05d-of-%05d-alt.ddp"
 * with `alternate`), and a piece's tensor name in a shard file: "<prefix>@<offset>+<count>". */
void ckpt_set_dir_name(int64_t step, char *out, size_t size);
void ckpt_set_shard_name(int shard, int n_shards, bool alternate, char *out, size_t size);
void ckpt_set_piece_name(const char *prefix, int64_t offset, int64_t count, char *out, size_t size);

/* Whether a save of n_shards shards into set_dir must write them under the alternate names: true
 * when set_dir's manifest (a committed set of the same step, which a resume passed over) names a
 * plain one. Its shards stay whole until the new manifest replaces it, so a save killed part-way
 * never leaves that step without a set. Rank 0, before the writers start; they all use its answer. */
bool ckpt_set_names_taken(const char *set_dir, int n_shards);
/* Rank 0, once every one of n_shards shard files in set_dir (named as `alternate` says) is durable:
 * reads their tables, lists their extents, checks that they cover each of spec's buffers exactly
 * once, writes the manifest (spec's header, buffers, tensor table and settings, with the shards and
 * extents found) atomically, replacing a committed set's, and then removes whatever else set_dir
 * holds (the replaced set's shards, an interrupted write's temporaries, an earlier attempt's shards
 * of another world size). Refused, naming the shard file, when one is missing or does not fit, or
 * is another save's: every shard's header must have spec's step, save_time, world_size and
 * config_hash (the writers share rank 0's save_time). progress (or NULL) counts each shard's table
 * read, for a stall watch. */
int ckpt_set_commit(const char *set_dir, const ckpt_manifest *spec, int n_shards, bool alternate,
                    _Atomic uint64_t *progress, ddp_err *err);

/* The manifest of set_dir, verified (its CRCs, the extents' cover of every buffer). */
int ckpt_manifest_read(const char *set_dir, ckpt_manifest *m, ddp_err *err);
void ckpt_manifest_free(ckpt_manifest *m);
/* Shard s's table, checked against the manifest (present, its length and header CRC). */
int ckpt_set_shard_table(const char *set_dir, const ckpt_manifest *m, int s, ckpt_loaded *table, ddp_err *err);

/* The whole set as one checkpoint read back (as ckpt_read gives a single file: "param/<name>",
 * "optim/<buffer>/<name>", meta/config, meta/train_samples), every shard read in full and every CRC checked; the
 * assembled tensors' crc is 0 (crc_ok true): a set stores CRCs of pieces, not of tensors. */
int ckpt_set_load(const char *set_dir, ckpt_loaded *out, ddp_err *err);
/* ckpt_set_load for a directory, ckpt_read (lenient: ckpt_read_lenient) for a file. */
int ckpt_read_any(const char *path, ckpt_loaded *out, bool lenient, ddp_err *err);
bool ckpt_is_set_dir(const char *path);
/* Removes a set whole: the manifest first, then the shards, then the directory; *progress (may be
 * NULL) counts each file removed. */
int ckpt_set_remove(const char *set_dir, _Atomic uint64_t *progress, ddp_err *err);

/* ---- reading tensor by tensor (export) ---------------------------------------------------- */

typedef struct ckpt_set_reader ckpt_set_reader;
/* Reads the manifest, checks every shard's tensor CRCs through a read-only map of its file and
 * keeps the maps. */
int ckpt_set_open(const char *set_dir, ckpt_set_reader **out, ddp_err *err);
/* The same, checking the manifest and each shard's table but no piece's data until it is read
 * (ckpt_set_read_range): for a rank that reads only its own pieces. */
int ckpt_set_open_pieces(const char *set_dir, ckpt_set_reader **out, ddp_err *err);
const ckpt_manifest *ckpt_set_reader_manifest(const ckpt_set_reader *r);
/* Each tensor's crc_ok in table (ckpt_read_table of path), the file read a few MiB at a time, so
 * none of it is held in memory; the data pointers stay NULL. A read error, or a file shorter than
 * its table says (it shrank since), is an error; a buffer this machine cannot allocate is its
 * failure (err->local). */
int ckpt_check_crcs(const char *path, ckpt_loaded *table, ddp_err *err);
/* Shard s of m checked as ckpt_set_open checks it (against the manifest, every piece's CRC, every
 * extent of it a piece), without holding it in memory (ckpt_check_crcs). */
int ckpt_set_check_shard(const char *set_dir, const ckpt_manifest *m, int s, ddp_err *err);
/* Elements [offset, offset + count) of buffer prefix ("param/", ...) into out, from the pieces
 * that hold them, each piece's CRC checked when first read; a missing or corrupt piece is an error
 * naming its shard file, a range past the buffers' length DDP_EUSAGE. */
int ckpt_set_read_range(ckpt_set_reader *r, const char *prefix, int64_t offset, int64_t count, float *out,
                        ddp_err *err);
/* Buffer prefix's tensor name of numel float32 values: a pointer into the map when it lies in one
 * shard, else into a buffer of its size the reader owns; NULL when there is none such. Valid until
 * ckpt_set_close. */
const float *ckpt_set_tensor_f32(ckpt_set_reader *r, const char *prefix, const char *name, size_t numel);
void ckpt_set_close(ckpt_set_reader *r);

#endif
