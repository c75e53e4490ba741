/* mpi_check.c — mpi_fail: MPI_Error_string into a ddp_err. */
#include "mpi_check.h"

#include <mpi.h>
#include <stdio.h>
#include <string.h>

int mpi_fail(ddp_err *err, int rc, const char *call, const char *file, int line)
{
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
        snprintf(msg, sizeof msg, "MPI error code %d", rc);
    int name_len = (int)strcspn(call, "(");
    return ddp_fail(err, DDP_ERUNTIME, "%s:%d: %.*s: %s", file, line, name_len, call, msg);
}
