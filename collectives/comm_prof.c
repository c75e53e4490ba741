/* comm_prof.c — collectives' ranges on the profiler's communication track (see comm_prof.h). */
#include "comm_prof.h"

#include "runtime/device/device_prof.h"

int comm_prof_begin(comm *c, device *d, const char *name, size_t bytes, comm_dtype dt, int *stream_id, int *host_id,
                    ddp_err *err)
{
    *stream_id = *host_id = -1;
    device_prof *p = d ? d->prof : NULL;
    if (!p)
        return DDP_OK;
    if (!c->stream) {
        *host_id = device_prof_host_begin(p, name, PROF_TRACK_COMM);
        return DDP_OK;
    }
    prof_cost cost = prof_cost_of((double)bytes, 0, PROF_MATH_NONE, "%s", comm_dtype_name(dt));
    return device_prof_begin(d, name, "comm", PROF_TRACK_COMM, c->stream, &cost, stream_id, err);
}

int comm_prof_stream_end(device *d, int stream_id, ddp_err *err)
{
    return stream_id < 0 || !d ? DDP_OK : device_prof_end(d, stream_id, err);
}

void comm_prof_host_end(device *d, int *host_id)
{
    if (*host_id >= 0 && d && d->prof)
        device_prof_host_end(d->prof, *host_id);
    *host_id = -1;
}
