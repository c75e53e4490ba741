/* commands.h — the commands ddprun runs in-process, without mpirun: `ckpt info|diff`
 * (ckpt_tool.c), `ckpt export` (ddprun_export.c) and `generate` (ddprun_generate.c; the chat.json
 * of its --chat: generate_chat.h), and the reading of a language model's checkpoint the last two
 * share. Each takes its command's arguments and returns the
 * exit status; none starts a rank or touches MPI. Used by ddprun.c's dispatch (and the tests). */
#ifndef DDPRUN_COMMANDS_H
#define DDPRUN_COMMANDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "models/model_opts.h"
#include "runtime/base/err.h"
#include "runtime/ckpt/ckpt.h"

/* `ckpt info PATH` / `ckpt diff A B` (argv[0] is "ckpt" or the program name, argv[1] the verb).
 * Exit status: 0 valid / identical, 1 bad CRC / different / unreadable, 2 usage error. */
int ckpt_tool_main(int argc, char **argv);

/* `ddprun ckpt export --format llmc CHECKPOINT OUT.bin` and `--format hf CHECKPOINT DIR` (argv[0]
 * "ckpt", argv[1] "export"); returns the exit status (0, 1 runtime failure, 2 usage or a checkpoint
 * that cannot be exported). */
int ckpt_export_main(int argc, char **argv);

/* The parameter tensor `name` ("wte.weight") of ck when it holds numel float32 values, else NULL. */
const float *ckpt_param_f32(const ckpt_loaded *ck, const char *name, size_t numel);

/* The config.resolved.yaml of the run the checkpoint at ckpt_path belongs to (RUN/checkpoints/
 * ckpt-N.ddp, or a set's directory with or without a trailing slash), its path into yaml, loaded
 * into *cfg when there; *found false (and DDP_OK, errno saying why) when the file is not. */
int ckpt_run_config(const char *ckpt_path, char *yaml, size_t size, bool *found, config *cfg, ddp_err *err);

/* `ddprun generate CHECKPOINT [options]` (argv[0] "generate"): a language model's checkpoint;
 * returns the exit status. */
int generate_main(int argc, char **argv);

#endif
