/* mpi_check.h — the one way an MPI return code becomes a ddp_err: "FILE:LINE: MPI_Call: MPI's own
 * error string", DDP_ERUNTIME. For communicators set to MPI_ERRORS_RETURN; with MPI's default
 * handler a failing call never returns. Must not print or abort: the caller reports. */
#ifndef DDP_MPI_CHECK_H
#define DDP_MPI_CHECK_H

#include "runtime/base/err.h"

/* Fills err from MPI return code rc of call (its text up to the first '(' names it); returns
 * DDP_ERUNTIME. */
int mpi_fail(ddp_err *err, int rc, const char *call, const char *file, int line);

/* Returns mpi_fail(err, ...) from the calling function (which has a ddp_err *err) when call
 * does not return MPI_SUCCESS. */
#define MPI_TRY(call)                                                         \
    do {                                                                      \
        int mpi_rc_ = (call);                                                 \
        if (mpi_rc_ != MPI_SUCCESS)                                           \
            return mpi_fail(err, mpi_rc_, #call, __FILE__, __LINE__);         \
    } while (0)

#endif
