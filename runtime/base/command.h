/* command.h — running a user's shell command (checkpoint.upload_cmd, checkpoint.download_cmd,
 * ddprun --host-discovery): placeholders that reach the command as environment variables,
 * `/bin/sh -c` in a process group of its own, its output kept, a time limit (or the caller's stop
 * request) that ends the whole group, and the same end for the group when the calling process
 * dies, however it dies (a watch process beside the group sees its pipe close).
 *
 * A {name} placeholder is never replaced by its value's text: it becomes a reference to the
 * variable DDPRUN_<NAME> (DDPRUN_PATH for {path}), quoted for where it stands — "${DDPRUN_PATH}"
 * outside quotes, ${DDPRUN_PATH} inside double quotes, '"${DDPRUN_PATH}"' inside single quotes —
 * and command_run puts the value in that variable. The shell never parses the value, so a value
 * holding quotes, $(...) or backquotes is one word, unchanged, whatever quotes the user wrote
 * around the placeholder ({path}, "{path}" and '{path}' all work).
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

/* Copies tmpl into out, replacing each {name} whose name is in names[0..n) by the reference to
 * DDPRUN_<NAME> that suits the quotes around it (above). Any other {...} is a usage error naming
 * it, as are an out too small and quotes or substitutions nested deeper than the scanner follows
 * (COMMAND_NEST_MAX). */
#define COMMAND_NEST_MAX 32
int command_expand(const char *tmpl, const char *const names[], int n, char *out, size_t cap, ddp_err *err);

typedef struct command_result {
    double seconds;               /* from start to exit (or to the kill on a timeout) */
    char tail[COMMAND_TAIL];      /* the last line of its output with text, "" if none */
} command_result;

/* Runs `/bin/sh -c cmd` with DDPRUN_<NAME>=values[i] added to the environment for names[0..n)
 * (names may be NULL when n is 0), stdin from /dev/null and stdout+stderr appended to log_fd
 * (when >= 0) and scanned for the last line. Returns DDP_OK on exit status 0; otherwise
 * DDP_ERUNTIME with err saying how it ended: "exited with status N", "was killed by SIGx", or
 * "did not finish within S s" (then the group is ended: see command_run_stoppable). */
int command_run(const char *cmd, const char *const names[], const char *const values[], int n, double timeout_s,
                int log_fd, command_result *res, ddp_err *err);

/* Asked every few tens of milliseconds while a command runs; non-zero: end it now. Called from
 * the waiting thread, not from a signal handler, so it may read a flag a handler set. */
typedef int (*command_stop_fn)(void);

/* command_run, also ended when stop (may be NULL) answers non-zero: then DDP_EPREEMPTED with err
 * "was stopped". A stopped or timed-out command's process group gets SIGTERM and, if anything of
 * it is still alive COMMAND_KILL_GRACE_S later, SIGKILL; it returns once the shell is reaped and
 * nothing of the group is left alive (or the SIGKILL was sent), so it leaves nothing running. */
#define COMMAND_KILL_GRACE_S 5.0
int command_run_stoppable(const char *cmd, const char *const names[], const char *const values[], int n,
                          double timeout_s, command_stop_fn stop, int log_fd, command_result *res, ddp_err *err);

/* "DDPRUN_<NAME>" for a placeholder name, into out (cap bytes). */
void command_var_name(const char *name, char *out, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
