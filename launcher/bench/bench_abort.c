/* bench_abort.c — ddprun-bench's exit for a failure on one rank alone, when the other ranks may be
 * waiting inside a collective: the rank names itself and ends the whole job with MPI_Abort.
 * Failures every rank sees together are not for this file: the harness returns those. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "bench_report.h"
#include "runtime/base/log.h"

void bench_abort(int exit_code, const char *msg)
{
    log_error("ddprun-bench: %s", msg);
    MPI_Abort(MPI_COMM_WORLD, exit_code ? exit_code : DDP_ERUNTIME);
    _exit(exit_code ? exit_code : DDP_ERUNTIME); /* MPI_Abort does not return; this says so */
}

void *bench_xalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        char msg[96];
        snprintf(msg, sizeof msg, "out of host memory (%zu bytes)", bytes);
        bench_abort(DDP_ERUNTIME, msg);
    }
    return p;
}
