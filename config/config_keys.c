/* config_keys.c — the table of the general config keys, the walk of the whole table, and the
 * defaults it gives.
 *
 * Each row is the one place a key is described: path, type, range or choices, default, whether
 * the config hash covers it, and what it does. Adding a setting is one row here (a model kind's
 * setting: in its kind's file in models/, composed by config_model.c) and its field in struct config;
 * the loader, the defaults, the
 * writer, the hash and docs/config-reference.md (`ddprun config reference`) follow from the table.
 * This file must not parse values itself (config_value.c does, defaults included) or check one key
 * against another (config_check.c). */
#include "config_internal.h"

#include <stdio.h>
#include <string.h>

_Static_assert(sizeof(device_kind) == sizeof(int) && sizeof(act_kind) == sizeof(int) &&
               sizeof(cfg_backend) == sizeof(int) && sizeof(cfg_micro_batch) == sizeof(int),
               "enums are stored through int pointers");

static const char *const device_names[] = {"auto", "cpu", "cuda", NULL};
static const char *const data_names[] = {"fashion-mnist", "synthetic", "tokens", NULL};
static const char *const opt_names[] = {"sgd", "adamw", NULL};
static const char *const sched_names[] = {"constant", "cosine", "linear", "wsd", NULL};
static const char *const backend_names[] = {"auto", "mpi", "nccl", NULL};
static const char *const grad_dtype_names[] = {"fp32", "bf16", NULL};
static const char *const precision_names[] = {"fp32", "bf16", NULL};
static const char *const micro_batch_names[] = {"fixed", "auto", NULL};
static const char *const notice_names[] = {"off", "auto", "aws", "gcp", "azure", NULL};
/* The placeholders runtime/ckpt/ckpt_upload.c fills in (ckpt_upload_placeholders and
 * ckpt_download_placeholders): checked here so that a typo is reported at its line. */
static const char *const upload_placeholders[] = {"path", "name", "dir", "step", NULL};
static const char *const download_placeholders[] = {"dir", NULL};

/* Depth-first order: every section is followed by its own keys (the writer relies on it). The
 * model kinds' sections (models/model_config.h, composed by config_model.c) go between model.kind
 * and data. */
static const cfg_key keys_before_models[] = {
    SECTION("run"),
    STR("run.dir", run.dir, "runs/default", "Run directory: metrics.jsonl, resolved config, checkpoints."),
    {.path = "run.seed", .type = KT_UINT, .off = CFG_OFF(run.seed), .def = "0", .hash = HASH_YES,
     .doc = "Seed of every RNG stream (init, sampler, synthetic data)."},
    BOOL("run.tensorboard", run.tensorboard, "false", HASH_NO,
         "Rank 0 also writes the metrics as TensorBoard event files into `run.dir/tensorboard/` while training "
         "runs (`tensorboard --logdir`, `wandb sync --sync-tensorboard`)."),
    ENUM("device", device, device_names, "auto", HASH_NO,
         "Compute device; `auto` = CUDA when a GPU is usable, else CPU."),
    SECTION("cuda"),
    BOOL("cuda.tf32", cuda.tf32, "false", HASH_NO, "Allow TF32 tensor-core GEMMs (CUDA only; ignored on CPU)."),
    ENUM("precision", precision, precision_names, "fp32", HASH_NO,
         "`bf16`: a language model's activations and GEMM operands in bfloat16 with fp32 accumulation, fp32 master "
         "weights, AdamW state and gradients (CUDA only)."),
    SECTION("model"),
    ENUM("model.kind", model.kind, model_kind_names, "mlp", HASH_YES,
         "Model family; its settings are the section `model.<kind>`."),
};

static const cfg_key keys_after_models[] = {
    SECTION("data"),
    ENUM("data.kind", data.kind, data_names, "fashion-mnist", HASH_YES,
         "Dataset; `tokens` (language models, and their default) reads `scripts/prepare-text` shards, train "
         "split for training, val for evaluation."),
    STR("data.path", data.path, "/usr/share/datasets/fashion-mnist",
        "Folder with the four gzipped IDX files (fashion-mnist), or with `train_*.bin`, `val_*.bin` and "
        "`tokenizer.bin` (tokens)."),
    INT("data.batch_size", data.batch_size, 1, I32, "128", HASH_PER_RANK,
        "Samples per rank per micro-step (with `train.global_batch` and `train.micro_batch: auto`, the most a "
        "rank takes at once)."),
    BOOL("data.shuffle", data.shuffle, "true", HASH_YES, "Reshuffle every epoch (seeded by `run.seed` + epoch)."),
    BOOL("data.drop_last", data.drop_last, "true", HASH_YES,
         "Drop the incomplete last batch of an epoch, and the micro-batches too few for a last step of "
         "`train.grad_accum`. `false` pads the last batch to the ranks (as PyTorch's DistributedSampler) "
         "and ends the epoch with a shorter step, its loss the mean over its own samples."),
    INT("data.seq_len", data.seq_len, 1, 1 << 20, "256", HASH_TOKENS,
        "Positions per sequence; a sample is a window of seq_len + 1 tokens."),
    BOOL("data.packed", data.packed, "false", HASH_PACKED,
         "Fine-tuning data (`scripts/prepare-chat`'s shards with `.docs` and `.mask`): whole documents packed into "
         "rows of `data.seq_len`, attention and positions per document, the loss over the trainable tokens of the "
         "global batch. Needs a language model."),
    SECTION("data.synthetic"),
    INT("data.synthetic.train", data.synthetic_train, 1, I32, "60000", HASH_SYNTHETIC, "Synthetic training samples."),
    INT("data.synthetic.test", data.synthetic_test, 1, I32, "10000", HASH_SYNTHETIC, "Synthetic test samples."),
    INT("data.synthetic.features", data.synthetic_features, 1, 1 << 20, "784", HASH_SYNTHETIC,
        "Synthetic input features."),
    INT("data.synthetic.classes", data.synthetic_classes, 2, 256, "10", HASH_SYNTHETIC,
        "Synthetic classes; the test split is labelled by the training split's rule."),
    SECTION("train"),
    INT("train.epochs", train.epochs, 1, I32, "1", HASH_NO, "Epochs to train."),
    INT("train.max_steps", train.max_steps, 0, BIG, "0", HASH_NO,
        "0 = epochs decide; > 0 stops after this many optimizer steps."),
    INT("train.grad_accum", train.grad_accum, 1, 1 << 20, "1", HASH_PER_RANK,
        "Micro-steps per optimizer step (gradient accumulation); with `train.global_batch` it is derived, and "
        "left at 1 here."),
    INT("train.global_batch", train.global_batch, 0, I32, "0", HASH_GLOBAL_BATCH,
        "Samples per optimizer step over all ranks (sequences for language models, `data.seq_len` tokens each); "
        "0 = off (`data.batch_size` x ranks x `train.grad_accum`). When set, each run derives the accumulation "
        "as global_batch / (ranks x `data.batch_size`), so a job resumed on another number of ranks continues "
        "the same optimisation (the same samples per step in the same order, the same schedule); a world size "
        "that does not divide it is refused before training, naming those that would. The hash covers it "
        "instead of `data.batch_size` and `train.grad_accum`. Needs `data.drop_last: true`."),
    ENUM("train.micro_batch", train.micro_batch, micro_batch_names, "fixed", HASH_NO,
         "With `train.global_batch`: `fixed` takes `data.batch_size` per rank and micro-step; `auto` the "
         "largest per-rank batch <= `data.batch_size` that divides global_batch / ranks (logged at start), so "
         "every world size that divides `train.global_batch` works."),
    ENUM("train.recompute", train.recompute, recompute_mode_names, "none", HASH_NO,
         "What a language model's backward recomputes instead of keeping from the forward: `none`; `selective` "
         "keeps each block's GEMM and attention outputs and recomputes its norms and element-wise ops; `full` "
         "keeps only each block's input and replays the block. Gradients are bit-identical in every mode (the "
         "kernels are deterministic); `ddprun plan` shows the activation memory each takes."),
    NUM("train.logits_mb", train.logits_mb, NR_NONNEG, "1024", HASH_NO,
        "Language models: the most MiB of logits the classifier holds at once. It takes a micro-batch's token "
        "rows in chunks of as many rows as fit (rows x padded vocabulary x the compute type's bytes; at least "
        "one row), computing each chunk's logits, loss and gradient before the next, so a 128k vocabulary never "
        "holds a micro-batch's logits (Llama 3 at 8192 tokens: 2 GiB in bf16, 4 GiB in fp32). 0: all rows at "
        "once. The head's gradient adds the chunks' products in turn, so a different chunk size rounds "
        "differently (within float32's accumulation error); `ddprun plan` shows the activation memory."),
    INT("train.log_every", train.log_every, 1, BIG, "50", HASH_NO,
        "Log / metrics line every N optimizer steps; also where non-finite losses are looked for (every 4096 "
        "steps at most; `docs/running.md`, \"A loss that becomes NaN\")."),
    BOOL("train.eval", train.eval, "true", HASH_NO,
         "Evaluate on the test set (val split for tokens) after each epoch and at the run's last step (a run "
         "resumed at its last step, as a stop there saves it first, evaluates it then); `false` turns every "
         "evaluation off, `train.eval_every`'s too."),
    INT("train.eval_every", train.eval_every, 0, BIG, "0", HASH_NO,
        "With `train.eval`, also evaluate every N optimizer steps (0 = at epoch ends only)."),
    INT("train.sample_every", train.sample_every, 0, BIG, "0", HASH_NO,
        "Language models: rank 0 prints a seeded text sample every N steps (0 = off); non-finite logits stop "
        "the job (exit 65), a stop request ends a sample early (not under `ddp.zero: 3`, where every rank draws the "
        "whole sample, each token a gathered forward pass)."),
    INT("train.sample_tokens", train.sample_tokens, 1, 1 << 20, "64", HASH_NO, "Tokens per text sample."),
    INT("train.profile_steps", train.profile_steps, 0, 1024, "0", HASH_NO,
        "Steps the built-in profiler records (0 = off): rank 0 prints a per-op table at the end and writes "
        "`profile.json`, every rank writes `trace-rank{R}.json` into `run.dir` (`docs/profiling.md`). A window "
        "holds 2^18 time stamps, a step's marks and its ops' two each; what does not fit is counted as dropped."),
    INT("train.profile_start", train.profile_start, 0, I32, "5", HASH_NO,
        "Steps this run trains before the profiler's window opens (warm-up)."),
    SECTION("optimizer"),
    ENUM("optimizer.kind", optimizer.kind, opt_names, "adamw", HASH_YES, "Optimizer."),
    NUM("optimizer.lr", optimizer.lr, NR_POSITIVE, "0.001", HASH_YES, "Peak learning rate."),
    NUM("optimizer.weight_decay", optimizer.weight_decay, NR_NONNEG, "0.01", HASH_YES,
        "Decoupled (AdamW) / L2 (SGD) weight decay."),
    {.path = "optimizer.betas", .type = KT_BETAS, .range = NR_UNIT, .def = "[0.9, 0.999]", .hash = HASH_ADAMW,
     .doc = "AdamW β1, β2 (`[0.9, 0.95]` when not set, with a language model: `model.kind` other than `mlp`). "
            "Set off its default, it needs `optimizer.kind: adamw` (docs/config.md: settings without effect)."},
    NUM("optimizer.eps", optimizer.eps, NR_POSITIVE, "1e-8", HASH_ADAMW, "AdamW ε."),
    NUM("optimizer.momentum", optimizer.momentum, NR_UNIT, "0.9", HASH_SGD, "SGD momentum."),
    BOOL("optimizer.nesterov", optimizer.nesterov, "false", HASH_SGD, "SGD Nesterov momentum."),
    NUM("optimizer.grad_clip", optimizer.grad_clip, NR_NONNEG, "0", HASH_YES,
        "Clip the global gradient L2 norm to this: gradients × min(1, clip / (norm + 1e-6)), as "
        "`clip_grad_norm_`, on the device; 0 = off. With clipping on, a non-finite gradient norm is named by "
        "its step (exit 65)."),
    SECTION("optimizer.schedule"),
    ENUM("optimizer.schedule.kind", optimizer.schedule.kind, sched_names, "constant", HASH_YES,
         "LR schedule after warm-up: `constant` keeps the peak; `cosine` and `linear` go from it to "
         "`optimizer.schedule.min_lr` over the rest of the run (a cosine's half period, a straight line); `wsd` "
         "(warmup-stable-decay) keeps the peak until the last `optimizer.schedule.decay_fraction` of the steps "
         "after warm-up, then goes in a straight line to `min_lr`."),
    INT("optimizer.schedule.warmup_steps", optimizer.schedule.warmup_steps, 0, BIG, "0", HASH_YES,
        "Linear warm-up steps (step i from 0 runs at lr × (i + 1) / warmup_steps, so the last of them runs at "
        "the peak, as llm.c's and nanoGPT's do); at most the run's steps (`train.max_steps`, or with epochs "
        "their steps, checked when the data is loaded)."),
    NUM("optimizer.schedule.min_lr", optimizer.schedule.min_lr, NR_NONNEG, "0", HASH_DECAY,
        "LR the cosine, linear and wsd schedules reach as the run's last step ends: the decay's step j of D "
        "(from 0, the first after warm-up at the peak) runs at its progress j / D, so the last step runs one "
        "decay step above it (llm.c's and nanoGPT's convention)."),
    NUM("optimizer.schedule.decay_fraction", optimizer.schedule.decay_fraction, NR_FRACTION, "0.2", HASH_WSD,
        "`wsd`: the part of the steps after warm-up that decays to `min_lr` (the rest keeps the peak); a run "
        "whose decay spans more than 0 but at most 1 step (no step would decay) is refused at its start or "
        "resume."),
    SECTION("ddp"),
    ENUM("ddp.backend", ddp.backend, backend_names, "auto", HASH_NO,
         "Gradient all-reduce backend; `auto` = NCCL on CUDA, MPI on CPU."),
    NUM("ddp.bucket_mb", ddp.bucket_mb, NR_POSITIVE, "25", HASH_NO,
        "Gradient bucket size cap, MiB (with ddp.zero 2 and 3 a bucket is one of the model's units instead)."),
    NUM("ddp.first_bucket_mb", ddp.first_bucket_mb, NR_POSITIVE, "1", HASH_NO,
        "Size of the first (last-layer) bucket, MiB."),
    NUM("ddp.timeout_s", ddp.timeout_s, NR_POSITIVE, "300", HASH_NO,
        "Seconds a collective may wait before the job is aborted with an error naming the ranks that did not "
        "arrive (MPI and NCCL); also how long the end of a run waits for collectives still in flight, and how "
        "long a checkpoint write on rank 0 may go without the storage taking a byte before it is given up and "
        "the job ends naming it: at the job's end; during training half of it, so that rank 0 names the "
        "storage before the other ranks' deadline names rank 0 (a shard of `checkpoint.sharded`: half of it "
        "on every rank, at every save). A rank whose write goes on, however slowly, answers the ranks whose "
        "deadline passed meanwhile that it is busy, and their deadline starts over. Until "
        "every rank has read the config and agreed on it (MPI's own start included), the start-up's deadline "
        "is the command line's `ddp.timeout_s=`, else 300: ddprun, which read the config, passes the file's "
        "value that way; ranks started by mpirun or srun directly do not know it yet."),
    BOOL("ddp.debug", ddp.debug, "false", HASH_NO, "Cross-check collective order and sizes across ranks (slower)."),
    ENUM("ddp.grad_dtype", ddp.grad_dtype, grad_dtype_names, "fp32", HASH_NO,
         "Precision of gradients on the wire; `bf16` when not set, with `precision: bf16`, except on "
         "`ddp.backend: mpi` and with `ddp.zero` 2 or 3 (they reduce in float32)."),
    INT("ddp.zero", ddp.zero, 0, 3, "0", HASH_NO,
        "ZeRO stage. `1`: each rank keeps and updates only its shard of the optimizer state (gradient buckets "
        "are reduce-scattered, updated parameters all-gathered per bucket), dividing optimizer memory by the "
        "ranks. `2`: also only its shard of the gradients: each of the model's units (a block, the "
        "embeddings, the head) is reduce-scattered from a reused window as its backward ends, every "
        "micro-step (docs/sharding.md). `3`: also only its shard of the parameters: each unit's are "
        "all-gathered into a reused window just before the forward and again the backward read them, the next "
        "unit's gather overlapping this one's compute. Same results as `0` within float rounding."),
    SECTION("checkpoint"),
    INT("checkpoint.every_steps", checkpoint.every_steps, 0, BIG, "0", HASH_NO,
        "Checkpoint every N optimizer steps; 0 = off."),
    NUM("checkpoint.every_minutes", checkpoint.every_minutes, NR_NONNEG, "0", HASH_NO,
        "Checkpoint every N minutes of training; 0 = off."),
    INT("checkpoint.keep_last", checkpoint.keep_last, 1, I32, "3", HASH_NO,
        "Checkpoints kept in `checkpoint.dir` (one an upload still reads is kept until it ends)."),
    BOOL("checkpoint.final", checkpoint.final, "true", HASH_NO,
         "Save a checkpoint when training ends (`train.max_steps` reached or the epochs done), besides the "
         "periodic ones and the one a stop signal asks for. `false`: no end-of-run save, for benchmarks and "
         "throwaway runs (a large model's is minutes of I/O and ~12 bytes a parameter on disk); the run's last "
         "steps are then in no checkpoint to resume or export from."),
    BOOL("checkpoint.sharded", checkpoint.sharded, "false", HASH_NO,
         "Each rank writes its own shard of the parameters and optimizer state, all at once, into "
         "`checkpoint.dir/ckpt-<step>/`, and rank 0 then writes the set's manifest, which commits it "
         "(docs/checkpoint-format.md, Sharded checkpoints); needs a filesystem every rank shares, which the "
         "start checks (a rank that does not see rank 0's file there ends the job, exit 2). `false`: "
         "rank 0 gathers everything and writes one file. Either kind resumes at any world size and `ddp.zero`, "
         "and either is handed to `checkpoint.upload_cmd` once it is whole (a set: committed)."),
    {.path = "checkpoint.resume", .type = KT_RESUME, .def = "auto",
     .doc = "`auto`: newest valid checkpoint in `checkpoint.dir` (after `checkpoint.download_cmd` when there "
            "is none valid), else start fresh; `never`: start fresh; a path: that checkpoint. `never` or a path is "
            "refused on a job's first attempt while `checkpoint.dir` holds checkpoints a restart would resume "
            "instead (any; for a path in it, those beyond its step), naming them: pruning would also keep them "
            "before the run's own (docs/checkpoint-format.md). A restart (`ddprun --max-restarts`) resumes its own "
            "newest checkpoint whatever this says."},
    NUM("checkpoint.resume_timeout_s", checkpoint.resume_timeout_s, NR_POSITIVE, "1800", HASH_NO,
        "Seconds a collective may wait while the job resumes or takes its parameters from "
        "`checkpoint.init_from`, instead of `ddp.timeout_s`: rank 0 reading a checkpoint whole (or the "
        "folder, or running `checkpoint.download_cmd`) while the others wait for it to broadcast, every rank "
        "reading its pieces of a sharded set, the broadcast itself. Never less than `ddp.timeout_s`, nor, with "
        "`checkpoint.download_cmd`, than `checkpoint.command_timeout_s` + `ddp.timeout_s`. The deadline's "
        "verdict names the phase `checkpoint resume`; training's collectives have `ddp.timeout_s` again."),
    {.path = "checkpoint.signal", .type = KT_SIGNAL, .choices = cfg_signal_names, .def = "SIGUSR1",
     .doc = "Signal ddprun sends the ranks when it receives SIGTERM/SIGINT: SIGUSR1 or SIGUSR2, the two "
            "mpirun forwards. A rank treats SIGTERM, SIGINT, SIGUSR1 and SIGUSR2 alike: checkpoint and stop."},
    OPT_PATH("checkpoint.init_from", checkpoint.init_from,
             "An llm.c GPT-2 model file, or a Hugging Face `save_pretrained` folder of a language model (a directory with "
             "`config.json` and `model.safetensors` or its sharded index; F32, F16 or BF16 tensors): a fresh start (no checkpoint "
             "resumed) loads the parameters from it (`ddprun ckpt export --format llmc` writes the file, as does "
             "llm.c's `train_gpt2.py`; `--format hf` the folder) instead of initialising them. Its shape (the "
             "file's header or `config.json`) gives each shape key of the model's section the config leaves out, "
             "also on a resume, so it must be readable where rank 0 runs (under `ddp.zero: 3` a fresh start's every "
             "rank reads its own pieces of a folder, so every host needs it); a key set to another value is refused "
             "naming both. Only the models llm.c has a file for start from one; every language model from a "
             "folder. Not with `model.kind: mlp`."),
    OPT_PATH("checkpoint.dir", checkpoint.dir,
             "Where checkpoints are written and looked for (none: `run.dir/checkpoints`); may be a network mount "
             "that outlives the instance. Rank 0 alone reads and writes it, but with `checkpoint.sharded: true` "
             "every rank writes its shard there (and reads from it on a resume), so every rank must see the same "
             "directory. At every start each rank lists it on its own host: one whose newest checkpoint is of this "
             "config and newer than what rank 0's host lists and takes up (a node-local disk, and rank 0 on another "
             "host) ends the job there (exit 2). It is created, and a file made and "
             "removed in it, before the first step: a directory that cannot be created or written ends the job "
             "there (exit 1), not at the first save."),
    COMMAND("checkpoint.upload_cmd", checkpoint.upload_cmd, upload_placeholders,
            "Run by rank 0 after each successful save, in the background (training never waits for it), e.g. "
            "`aws s3 cp {path} s3://bucket/run/`; with `checkpoint.sharded: true` `{path}` is the set's folder, "
            "once rank 0 has committed it: copy its `manifest.ddp` last (docs/running.md). Copy `{path}`, not "
            "all of `{dir}`: pruning is held off `{path}` alone, and the next save's temporary file appears in "
            "`{dir}` while an upload runs. One upload at a time; when newer checkpoints are saved "
            "meanwhile, only the newest is uploaded next (the skipped ones are named). A failure is reported "
            "with the command's exit status and last line of output, and is not fatal. At the end of the job (a "
            "preemption stop included) ddprun waits for the last upload; a job that fails ends it instead (the "
            "checkpoints stay in checkpoint.dir), and so does rank 0's death, even by SIGKILL: no upload "
            "outlives its rank. Output goes to "
            "`run.dir/checkpoint-commands.log`. A placeholder's value is never pasted into the command's text: "
            "it reaches the shell as the environment variable `DDPRUN_PATH` (`DDPRUN_NAME`, `DDPRUN_DIR`, "
            "`DDPRUN_STEP`), referenced as suits the quotes around the placeholder, so `{path}`, `\"{path}\"` "
            "and `'{path}'` all give the path as one word, unchanged, whatever characters it holds (`$(...)` in "
            "a directory name is never run). Any other `{...}`, `${VAR}` included, is an error: write `$VAR`."),
    COMMAND("checkpoint.download_cmd", checkpoint.download_cmd, download_placeholders,
            "Run by rank 0 when a resume (`checkpoint.resume: auto`, or a restart) finds no valid checkpoint in "
            "`checkpoint.dir` (none, or only what an interrupted download cut short), or an earlier download did "
            "not finish (its `.download-unfinished` marker is there), to fetch checkpoints into "
            "`{dir}` (e.g. `aws s3 sync s3://bucket/run/ {dir}`; `DDPRUN_DIR` in the environment, quoted as for "
            "upload_cmd); the newest valid one is then resumed, or the run starts fresh if it brought none (where "
            "there was none before). A failure stops the job before training (starting "
            "from step 0 instead would silently lose the run). Like an upload, it ends with its rank; a stop "
            "request that reaches rank 0 (Ctrl-C or SIGTERM to ddprun, rank 0's node's preemption notice) ends "
            "it at once, and the job exits 75 with its `.download-unfinished` marker kept for the next start."),
    NUM("checkpoint.command_timeout_s", checkpoint.command_timeout_s, NR_POSITIVE, "900", HASH_NO,
        "Time limit of each upload or download command; past it the command's whole process group is ended "
        "and the command counts as failed."),
    ENUM("checkpoint.preemption_notice", checkpoint.preemption_notice, notice_names, "off", HASH_NO,
         "Watch the cloud's preemption notice (AWS spot `instance-action` through IMDSv2, GCP "
         "`instance/preempted`, Azure Scheduled Events `Preempt` naming this VM) from each node's local rank "
         "0; a notice is a stop request like SIGTERM: every rank agrees on a step, saves, and the job exits 75 "
         "naming the notice. `auto` asks all three at once (Azure's instance metadata: Scheduled Events answer "
         "their first request late) and watches whichever answers within 1 s; on other machines one line "
         "says that no notice is watched there. On Azure an event counts once this VM's name is known (asked "
         "at every poll until it is). On AWS inside a container, where the IMDSv2 token's answer does not "
         "arrive (the instance's hop limit is 1), the notice is asked without a token (IMDSv1) where the "
         "instance allows it; where it does not, a warning says how to raise the hop limit."),
    NUM("checkpoint.notice_poll_s", checkpoint.notice_poll_s, NR_POLL, "5", HASH_NO,
        "How often the notice is polled. AWS warns 2 minutes ahead, GCP and Azure about 30 s: the poll "
        "interval plus one step plus the checkpoint's snapshot must fit. Polling more often than every "
        "0.1 s would flood the metadata service, which limits each instance's requests."),
};
#define N_BEFORE ((int)(sizeof keys_before_models / sizeof keys_before_models[0]))
#define N_AFTER ((int)(sizeof keys_after_models / sizeof keys_after_models[0]))

const cfg_key *cfg_key_at(int i)
{
    if (i < 0)
        return NULL;
    if (i < N_BEFORE)
        return &keys_before_models[i];
    i -= N_BEFORE;
    const cfg_model_section *sections = cfg_model_sections();
    for (int s = 0; s < cfg_n_model_sections; s++) {
        if (i < sections[s].n_keys)
            return &sections[s].keys[i];
        i -= sections[s].n_keys;
    }
    return i < N_AFTER ? &keys_after_models[i] : NULL;
}

int cfg_key_count(void)
{
    int n = N_BEFORE + N_AFTER;
    for (int s = 0; s < cfg_n_model_sections; s++)
        n += cfg_model_sections()[s].n_keys;
    return n;
}

/* k's default text as a YAML document, read into L->c by the key's own parser (errors into L->err). */
static int apply_default(cfg_loader *L, const cfg_key *k)
{
    yaml_parser_t parser;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&parser))
        return ddp_fail(L->err, DDP_ERUNTIME, "libyaml: cannot initialize parser");
    yaml_parser_set_input_string(&parser, (const unsigned char *)k->def, strlen(k->def));
    int rc = DDP_OK;
    if (!yaml_parser_load(&parser, &doc)) {
        rc = ddp_fail(L->err, DDP_ERUNTIME, "not YAML: %s", parser.problem ? parser.problem : "unknown");
    } else {
        yaml_node_t *root = yaml_document_get_root_node(&doc);
        const cfg_src src = {-1, 0};
        rc = root ? cfg_parse_value(L, &src, &doc, root, k) : ddp_fail(L->err, DDP_ERUNTIME, "empty");
        yaml_document_delete(&doc);
    }
    yaml_parser_delete(&parser);
    return rc;
}

int cfg_defaults(cfg_loader *L)
{
    memset(L->c, 0, sizeof *L->c);
    for (int i = 0; i < CFG_MAX_KEYS; i++)
        L->c->origin[i] = (cfg_pos){-1, 0, 0};
    ddp_err *outer = L->err, why = {0};
    const cfg_key *k = NULL;
    int rc = DDP_OK;
    L->err = &why;
    for (int i = 0; rc == DDP_OK && (k = cfg_key_at(i)); i++)
        if (k->type != KT_SECTION)
            rc = k->def ? apply_default(L, k) : ddp_fail(&why, DDP_ERUNTIME, "none given");
    L->err = outer;
    if (rc)
        return ddp_fail(outer, DDP_ERUNTIME, "config: key table: the default of %s, %s, is refused (%s)",
                        k ? k->path : "?", k && k->def ? k->def : "(none)", why.msg);
    return DDP_OK;
}

int cfg_key_find(const char *path)
{
    const cfg_key *k;
    for (int i = 0; (k = cfg_key_at(i)); i++)
        if (strcmp(k->path, path) == 0)
            return i;
    return -1;
}

void cfg_key_parent(const char *path, char *out, size_t n)
{
    const char *dot = strrchr(path, '.');
    size_t len = dot ? (size_t)(dot - path) : 0;
    snprintf(out, n, "%.*s", (int)len, path);
}

const char *cfg_key_leaf(const char *path)
{
    const char *dot = strrchr(path, '.');
    return dot ? dot + 1 : path;
}
