/* mpi_call_limit.c — the referee of the chunk limit (runtime/base/max_chunk.h), linked into the
 * communicator tests: it wraps MPI's block-per-rank collectives through the profiling interface
 * (PMPI) and fails any call whose blocks together exceed the limit, DDP_COMM_MAX_CHUNK or INT_MAX.
 * One block within the limit is not enough: Open MPI multiplies a block's count by the ranks in int
 * inside these collectives (libnbc's reduce-scatter, the all-gathers' offsets), so past INT_MAX in
 * all a call silently reduces nothing or writes out of bounds. A failed call returns MPI_ERR_COUNT,
 * which the code under test reports as any MPI error, after a line on stderr naming the call. Must
 * not change what a call within the limit does. */
#include <mpi.h>
#include <stdio.h>

#include "runtime/base/max_chunk.h"

/* Whether count elements a rank, on every rank of comm, stay within the limit; says why not. */
static int within_limit(const char *call, int count, MPI_Comm comm)
{
    size_t limit = 0;
    ddp_err err = {0};
    int ranks = 1;
    if (max_chunk_read(&limit, &err) != DDP_OK)
        return 1; /* the code under test refuses the setting itself */
    PMPI_Comm_size(comm, &ranks);
    size_t total = (size_t)(count < 0 ? 0 : count) * (size_t)ranks;
    if (total <= limit)
        return 1;
    fprintf(stderr, "mpi_call_limit: %s of %d elements a rank on %d ranks carries %zu in all, past the limit %zu\n",
            call, count, ranks, total, limit);
    return 0;
}

int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm)
{
    if (!within_limit("MPI_Allgather", recvcount, comm))
        return MPI_ERR_COUNT;
    return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Iallgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                   MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
    if (!within_limit("MPI_Iallgather", recvcount, comm))
        return MPI_ERR_COUNT;
    return PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
}

int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                 MPI_Datatype recvtype, MPI_Comm comm)
{
    if (!within_limit("MPI_Alltoall", recvcount, comm))
        return MPI_ERR_COUNT;
    return PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Ialltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
    if (!within_limit("MPI_Ialltoall", recvcount, comm))
        return MPI_ERR_COUNT;
    return PMPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
}

int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                             MPI_Comm comm)
{
    if (!within_limit("MPI_Reduce_scatter_block", recvcount, comm))
        return MPI_ERR_COUNT;
    return PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm);
}

int MPI_Ireduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                              MPI_Comm comm, MPI_Request *request)
{
    if (!within_limit("MPI_Ireduce_scatter_block", recvcount, comm))
        return MPI_ERR_COUNT;
    return PMPI_Ireduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm, request);
}
