/* max_chunk.h — how many elements one MPI call may move: INT_MAX (MPI counts are int), or fewer
 * when DDP_COMM_MAX_CHUNK=N is set, which lets tests exercise the path that splits a larger
 * collective into several calls without multi-GiB buffers. The MPI communicator and the emulated
 * NCCL read it here, so both accept and reject the same values; the trainer's parameter broadcast,
 * and its reads of a set's replicated buffers on resume, stage no more than one call's worth at a
 * time either. Must not split anything itself. */
#ifndef DDP_MAX_CHUNK_H
#define DDP_MAX_CHUNK_H

#include <stddef.h>

#include "err.h"

/* *elems = the limit (N capped at INT_MAX, or INT_MAX when unset or empty); DDP_EUSAGE when the
 * variable is not a positive decimal count. */
int max_chunk_read(size_t *elems, ddp_err *err);

#endif
