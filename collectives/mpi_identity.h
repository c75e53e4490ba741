/* mpi_identity.h — who this process is in an MPI job: its rank and the job size, its position
 * among the ranks on the same host (which picks its GPU), and the host's name. The one lookup the
 * communicators and ddprun-bench share, so every program names ranks and hosts alike.
 * Collective over the communicator given; must not keep state or print. */
#ifndef DDP_MPI_IDENTITY_H
#define DDP_MPI_IDENTITY_H

#include <mpi.h>
#include "runtime/base/host_name.h"

typedef struct mpi_identity {
    int rank, size;             /* in the communicator */
    int local_rank, local_size; /* among its ranks that share this host's memory */
    char host[DDP_HOST_NAME_MAX]; /* MPI_Get_processor_name */
} mpi_identity;

/* Fills *out for the calling rank of comm; returns MPI_SUCCESS or the failing call's MPI code. */
int mpi_identity_of(MPI_Comm comm, mpi_identity *out);

#endif
