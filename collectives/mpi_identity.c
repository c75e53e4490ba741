/* mpi_identity.c — mpi_identity_of: rank and size, a shared-memory split for the local rank,
 * MPI_Get_processor_name for the host. */
#include "mpi_identity.h"

#include <stdio.h>
#include <string.h>

static int local_position(MPI_Comm comm, int rank, mpi_identity *out)
{
    MPI_Comm local;
    int rc = MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
    if (rc != MPI_SUCCESS)
        return rc;
    rc = MPI_Comm_rank(local, &out->local_rank);
    if (rc == MPI_SUCCESS)
        rc = MPI_Comm_size(local, &out->local_size);
    MPI_Comm_free(&local);
    return rc;
}

int mpi_identity_of(MPI_Comm comm, mpi_identity *out)
{
    memset(out, 0, sizeof *out);
    int rc = MPI_Comm_rank(comm, &out->rank);
    if (rc == MPI_SUCCESS)
        rc = MPI_Comm_size(comm, &out->size);
    if (rc == MPI_SUCCESS)
        rc = local_position(comm, out->rank, out);
    char name[MPI_MAX_PROCESSOR_NAME];
    int len = 0;
    if (rc == MPI_SUCCESS)
        rc = MPI_Get_processor_name(name, &len);
    if (rc == MPI_SUCCESS)
        snprintf(out->host, sizeof out->host, "%.*s", len, name);
    return rc;
}
