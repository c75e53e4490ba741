/* err.h — the one way ddprun reports a failure upward.
 *
 * A function that can fail returns an int status (0 = success) and fills a ddp_err that the
 * caller may prefix with its own context before printing. Status values double as the process
 * exit codes documented in README.md. This header must not print anything: printing belongs to
 * log.h and to the top-level programs. */
#ifndef DDP_ERR_H
#define DDP_ERR_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum ddp_status {
    DDP_OK = 0,
    DDP_ERUNTIME = 1,   /* runtime failure: I/O, library error, a peer died */
    DDP_EUSAGE = 2,     /* bad command line, config or input file; nothing was written */
    DDP_ENONFINITE = 65, /* training stopped on a non-finite loss, gradient norm or state (EX_DATAERR);
                            nothing was saved from it */
    DDP_EPREEMPTED = 75 /* stopped by a preemption signal after a checkpoint was saved (EX_TEMPFAIL) */
};

#define DDP_ERR_MSG 1024

typedef struct ddp_err {
    int code;
    bool local; /* the failure is this machine's (host memory, a device), not its input's: a
                   checkpoint that could not be held is not damaged (ddp_fail_local) */
    char msg[DDP_ERR_MSG];
} ddp_err;

/* Sets e (if not NULL) to code and the formatted message, not local; returns code so callers can
 * `return ddp_fail(e, DDP_EUSAGE, "...")`. */
int ddp_fail(ddp_err *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Marks e's failure as this machine's (e->local, when e is not NULL); returns code. */
int ddp_mark_local(ddp_err *e, int code);
/* ddp_fail(e, DDP_ERUNTIME, ...) for a failure of this machine: e->local set. */
#define ddp_fail_local(e, ...) ddp_mark_local((e), ddp_fail((e), DDP_ERUNTIME, __VA_ARGS__))

/* Prepends "context: " to e's message, keeping its code and local; returns e->code. */
int ddp_prefix(ddp_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#ifdef __cplusplus
}
#endif

#endif
