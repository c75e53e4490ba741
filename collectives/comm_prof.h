/* comm_prof.h — a collective's range on the profiler's communication track, for the code that
 * issues collectives during a step (the reducer, ZeRO-3's parameter gathers): on the
 * communicator's stream where it has one (NCCL), timed by the GPU in stream order, else on the
 * host clock from the issue to the wait's return (MPI). Nothing is recorded unless the device has
 * a profiler attached. Must not issue or wait for collectives itself. */
#ifndef DDP_COMM_PROF_H
#define DDP_COMM_PROF_H

#include "runtime/device/device.h"
#include "comm.h"

/* Begins the range `name` of a collective over bytes of dt on c: on c's stream (*host_id -1; end
 * it with comm_prof_stream_end once the collective is issued) or on the host clock (*stream_id -1;
 * *host_id is the range, ended with comm_prof_host_end when its wait returns). */
int comm_prof_begin(comm *c, device *d, const char *name, size_t bytes, comm_dtype dt, int *stream_id, int *host_id,
                    ddp_err *err);
int comm_prof_stream_end(device *d, int stream_id, ddp_err *err);
/* Ends a host-clock range (a no-op for -1) and sets *host_id to -1. */
void comm_prof_host_end(device *d, int *host_id);

#endif
