/* config.h — the typed, validated job configuration.
 *
 * config_load reads a YAML file with libyaml, applies `key.path=value` overrides from the command
 * line, and validates everything before any rank does work. Every rejection names
 * FILE:LINE:COL and the key path (overrides are reported as `<override N>:1:COL`), and returns
 * DDP_EUSAGE (a model's shape left to checkpoint.init_from is checked once the training job
 * has read it: config_take_shape). The config keeps where each key was set, so that the checks
 * only a running job can make (the world size, the data, the device) name it too: config_where.
 * The struct below is plain data; nothing outside config parses YAML. Settings that belong to a layer are held in that layer's own types (device_opts.h's kinds, optim_opts,
 * models/model_opts.h, the notice provider), so the config sits above those layers and none of
 * them includes this header: the training job hands each its part. The key table
 * (config_internal.h) describes every key; docs/config-reference.md is generated from it.
 * This module must not touch the filesystem beyond reading the YAML file (config_write_resolved
 * is the one writer, called by the training loop once the run directory exists). */
#ifndef DDP_CONFIG_H
#define DDP_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "models/model_opts.h"
#include "runtime/base/err.h"
#include "runtime/cloud/cloud_notice.h"
#include "runtime/device/device_opts.h"
#include "runtime/optim/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CFG_PATH_MAX 1024
#define CFG_MAX_KEYS 256 /* the general keys and each model kind's section (about a dozen a kind), with room for more kinds */

/* Where a value came from: source -1 = default, 0 = the file, N = override N (1-based). */
typedef struct cfg_pos { int source, line, col; } cfg_pos;

typedef enum { DATA_FASHION_MNIST, DATA_SYNTHETIC, DATA_TOKENS } cfg_data_kind;
typedef enum { BACKEND_AUTO, BACKEND_MPI, BACKEND_NCCL } cfg_backend;
typedef enum { GRAD_FP32, GRAD_BF16 } cfg_grad_dtype;
typedef enum { PRECISION_FP32, PRECISION_BF16 } cfg_precision;
typedef enum { RESUME_AUTO, RESUME_NEVER, RESUME_PATH } cfg_resume;
typedef enum { MICRO_BATCH_FIXED, MICRO_BATCH_AUTO } cfg_micro_batch;

typedef struct config {
    char source[CFG_PATH_MAX]; /* the YAML file it came from */

    struct { char dir[CFG_PATH_MAX]; uint64_t seed; bool tensorboard; } run;
    device_kind device;
    struct { bool tf32; } cuda;                 /* cuda.tf32: allow TF32 GEMMs on the CUDA backend */
    /* bf16: activations and GEMM operands in bf16 with fp32 accumulation, fp32 master weights,
     * optimizer state and gradients (CUDA only); ddp.grad_dtype then defaults to bf16 */
    cfg_precision precision;

    /* Each model kind has a section of its own (model.<kind>); only model.kind's is read, and a
     * file that sets another kind's section is rejected. The types and the keys are the models'
     * own (models/model_opts.h's model_kind_opts, models/model_config.h's rows). With
     * checkpoint.init_from, a shape key of model.kind's section that the file and the overrides
     * leave out is pending (0, false) until config_take_shape fills it. */
    struct {
        model_kind kind;
        model_kind_opts opts;       /* each kind's settings */
        uint32_t shape_pending;     /* bit i: key i of model.kind's section table is left to init_from */
    } model;

    struct {
        cfg_data_kind kind;
        char path[CFG_PATH_MAX];                /* fashion-mnist: folder with the four .gz IDX files;
                                                 * tokens: folder of scripts/prepare-text's shards */
        int64_t seq_len;                        /* tokens: positions per training sequence */
        int64_t batch_size;                     /* per rank, per micro-step */
        bool shuffle;
        bool drop_last;
        bool packed;                            /* tokens: prepare-chat's documents packed into rows */
        /* synthetic only */
        int64_t synthetic_train, synthetic_test, synthetic_features, synthetic_classes;
    } data;

    struct {
        int64_t epochs;
        int64_t max_steps;                      /* 0 = epochs decide; >0 stops after this many optimizer steps */
        int64_t grad_accum;
        int64_t global_batch;                   /* samples per optimizer step over all ranks; 0 = off
                                                 * (config_batch_split derives the per-rank split) */
        cfg_micro_batch micro_batch;            /* with global_batch: data.batch_size as is, or the
                                                 * largest per-rank batch up to it that divides */
        int64_t log_every;
        bool eval;                              /* evaluate on the test set after each epoch */
        int64_t eval_every;                     /* also every this many steps (0 = epoch ends only) */
        int64_t sample_every;                   /* language models: print a text sample every N steps (0 = off) */
        int64_t sample_tokens;                  /* tokens per text sample */
        int64_t profile_steps;                  /* steps the profiler records (0 = off) */
        int64_t profile_start;                  /* steps this run does before the profiler's window opens */
        recompute_mode recompute;               /* what a language model's backward rebuilds */
        double logits_mb;                       /* a language model's classifier chunk, MiB (0: whole) */
    } train;

    optim_opts optimizer;                       /* the optimizer's own options (runtime/optim/optim.h) */

    struct {
        cfg_backend backend;
        double bucket_mb, first_bucket_mb;
        double timeout_s;
        bool debug;
        cfg_grad_dtype grad_dtype;
        int64_t zero;                           /* ZeRO stage: 0 replicated optimizer state, 1 sharded */
    } ddp;

    struct {
        int64_t every_steps;                    /* 0 = off */
        double every_minutes;                   /* 0 = off */
        int64_t keep_last;
        bool final;                             /* save when the training ends (the step budget or epochs done) */
        bool sharded;                           /* every rank writes its shard; rank 0 a manifest (runtime/ckpt/ckpt_set.h) */
        cfg_resume resume;
        char resume_path[CFG_PATH_MAX];
        double resume_timeout_s;                /* the collectives' deadline while the job resumes */
        char init_from[CFG_PATH_MAX];           /* llm.c model file or Hugging Face folder to start from; "" = none */
        int stop_signal;                        /* signal number that means "checkpoint and stop" */
        char dir[CFG_PATH_MAX];                 /* "" = run.dir/checkpoints */
        char upload_cmd[CFG_PATH_MAX];          /* run after each save ({path} {name} {dir} {step}); "" = none */
        char download_cmd[CFG_PATH_MAX];        /* run on resume when dir has no checkpoint ({dir}); "" = none */
        double command_timeout_s;               /* limit of each upload / download command */
        notice_provider preemption_notice;      /* the cloud's preemption notice to watch (runtime/cloud) */
        double notice_poll_s;
    } checkpoint;

    cfg_pos origin[CFG_MAX_KEYS]; /* where each key (by its index in the key table) was last set: config_where */
} config;

/* The loader's bounds: a config file is read up to CFG_MAX_FILE_BYTES (a FIFO or device that
 * never ends too), and YAML collections nest at most CFG_MAX_DEPTH deep (the top-level mapping
 * counts; a config needs 4). Beyond either, the load is refused naming where. */
#define CFG_MAX_FILE_BYTES (1 << 20)
#define CFG_MAX_DEPTH 32

/* Fills *out with defaults, then the file, then the overrides; validates. */
int config_load(const char *path, int n_overrides, char *const overrides[], config *out, ddp_err *err);
/* config_load with a file size limit of its own instead of CFG_MAX_FILE_BYTES (fuzz_config's, so
 * that its inputs reach the limit). */
int config_load_bounded(const char *path, size_t max_file_bytes, int n_overrides, char *const overrides[],
                        config *out, ddp_err *err);

/* A run's config.resolved.yaml as ddprun recorded it (`ckpt export`, `generate`): config_load
 * without overrides, and with the keys another key leaves without effect (docs/config.md) taken as
 * written, so a record from before that check existed still loads. */
int config_load_record(const char *path, config *out, ddp_err *err);

/* Where key (a dotted path) was set, for a message about its value that only a later check can
 * refuse (the world size, the data, the device): "FILE:LINE:COL" in the config file,
 * "<override N>:1:COL" on the command line, the file's name alone for a default. Returns out;
 * CFG_WHERE_MAX bytes hold any. */
#define CFG_WHERE_MAX (CFG_PATH_MAX + 64)
const char *config_where(const config *c, const char *key, char *out, size_t n);

/* checkpoint.init_from's shape, in model.kind's member: what the training job reads from the file. */
typedef model_init_shape config_shape;

/* True when a shape key of model.kind's section is left to checkpoint.init_from, whose shape (which
 * only the training job reads) it is to be. Such a config is not yet written, hashed or built. */
bool config_shape_pending(const config *c);
/* Takes checkpoint.init_from's shape `from` (model.kind's member), read from `file` (names[]: that
 * file's names of the section's shape keys, in the order of the shape's fields: for messages): the
 * keys left out get its values; one set to another value is refused naming the key, both values and
 * file, as are values outside the keys' ranges or that break the shape's rules (the kind's
 * shape_check); then data.seq_len must fit its block_size. DDP_OK, or DDP_EUSAGE with c unchanged. */
int config_take_shape(config *c, const config_shape *from, const char *file, const char *const names[],
                      ddp_err *err);

/* How one optimizer step's samples are split over the ranks of a run. */
typedef struct batch_split {
    int64_t batch;  /* samples per rank per micro-step */
    int64_t accum;  /* micro-steps per optimizer step */
} batch_split;

/* The split at `world` ranks: data.batch_size and train.grad_accum as set; with train.global_batch,
 * accum = global_batch / (world x batch), batch being data.batch_size (train.micro_batch fixed) or
 * the largest per-rank batch up to it that divides global_batch / world (auto). DDP_OK, or
 * DDP_EUSAGE naming where train.global_batch was set, the numbers and the world sizes that would divide it. */
int config_batch_split(const config *c, int world, batch_split *out, ddp_err *err);
/* The largest world size <= most that config_batch_split accepts (most itself without
 * train.global_batch); 0 when none is. */
int config_world_at_most(const config *c, int most);

/* Writes the fully resolved config (every key, defaults included) as YAML to path, replacing it
 * atomically and durably; an error names the file and the system's reason. */
int config_write_resolved(const config *c, const char *path, ddp_err *err);
/* Rewrites c's relative paths (run.dir, data.path, checkpoint.dir, checkpoint.init_from, a
 * checkpoint.resume path) as dir/path, dir being the working directory the job resolved them in:
 * the run's record then names the job's files wherever `ckpt export` or `generate` read it.
 * DDP_EUSAGE naming the key when one would not fit CFG_PATH_MAX, and when dir is not UTF-8 (the
 * record could not hold it). */
int config_anchor_paths(config *c, const char *dir, ddp_err *err);

/* The config reference (docs/config-reference.md) as Markdown, made from the key table: every
 * key's type, default, allowed values, description and whether the hash covers it. */
int config_write_reference(FILE *out, ddp_err *err);

/* A stable 64-bit hash of the settings that must match for a bit-exact resume (model shape,
 * data, optimizer); stored in checkpoints. */
uint64_t config_hash(const config *c);
/* Which settings config_settings lists: SETTINGS_RESUME, those config_hash covers; SETTINGS_RANKS,
 * those every rank of a job must share: every key's value but for the host's own files and
 * commands (of an optional one, whether it is set; of checkpoint.resume, whether it is a path). */
typedef enum settings_kind { SETTINGS_RESUME, SETTINGS_RANKS } settings_kind;
/* Those settings as "path=value\n" lines (malloc'd, NUL-terminated; NULL when out of memory).
 * Checkpoints store the SETTINGS_RESUME ones (docs/checkpoint-format.md, meta/config). */
char *config_settings(const config *c, settings_kind which);
/* Names the settings of `which` that differ between saved (text[0..saved_len) of config_settings
 * from the run that saved, or rank 0's; NULL when the checkpoint holds none) and c's, into out:
 * "path SAVED (this run: NOW)", "path SAVED (not used by this run)", "path (not used by the saved
 * run; this run: NOW)" ("this rank", "rank 0" for SETTINGS_RANKS), comma-separated. Returns how
 * many it named (0 also when saved is NULL). */
int config_settings_changes(const char *saved, size_t saved_len, const config *c, settings_kind which, char *out,
                            size_t cap);

#ifdef __cplusplus
}
#endif

#endif
