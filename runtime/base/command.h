/* command.h — running a user's shell command (checkpoint.upload_cmd, checkpoint.download_cmd):
 * placeholders filled with shell-quoted values, `/bin/sh -c` in a process group of its own, its
 * output kept, a time limit that ends the whole group.
 *
 * The caller decides when a command runs and what its failure means; this module only runs it
 * and says how it ended. It must not print. It starts the child with posix_spawn (no fork of a
 * process whose MPI transports or CUDA context a forked copy could disturb), with default signal
 * dispositions and an empty signal mask, whatever the calling thread blocks. */
#ifndef DDP_COMMAND_H
#define DDP_COMMAND_H

#include <stddef.h>

#include "err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define COMMAND_MAX 4096
#define COMMAND_TAIL 512

/* Copies tmpl into out, replacing each {name} whose name is in names[0..n) by values[i] in single
 * quotes (so a path with spaces or quotes stays one word). Any other {...} is a usage error naming
 * it, as is an out too small. */
int command_expand(const char *tmpl, const char *const names[], const char *const values[], int n, char *out,
                   size_t cap, ddp_err *err);

typedef struct command_result {
    double seconds;               /* from start to exit (or to the kill on a timeout) */
    char tail[COMMAND_TAIL];      /* the last line of its output with text, "" if none */
} command_result;

/* Runs `/bin/sh -c cmd` with stdin from /dev/null and stdout+stderr appended to log_fd (when >= 0)
 * and scanned for the last line. Returns DDP_OK on exit status 0; otherwise DDP_ERUNTIME with err
 * saying how it ended: "exited with status N", "was killed by SIGx", or "did not finish within S
 * s" (then the group got SIGTERM and, 5 s later, SIGKILL). */
int command_run(const char *cmd, double timeout_s, int log_fd, command_result *res, ddp_err *err);

#ifdef __cplusplus
}
#endif

#endif
