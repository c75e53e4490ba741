/* cudart_event.cpp — the CUDA runtime shim's events: create, record, wait, query, synchronize,
 * elapsed time.
 *
 * An event names a point in a stream's queue (cudaemu_streams.cpp): cudaEventRecord queues a
 * marker that timestamps the point when it runs, cudaStreamWaitEvent makes another stream wait
 * for that point, a query runs at most one op toward it and says cudaErrorNotReady until it is
 * reached (kept as the last error, as the runtime keeps it). An event belongs to the device current when it was made; recording, querying or
 * destroying it from a thread on another device is an error (waiting for it is allowed, as in
 * CUDA). Must not run or order work itself: the stream engine does. */
#include "cudaemu_internal.h"

#include <cuda_runtime_api.h>
#include <memory>
#include <mutex>
#include <set>

#include "runtime/base/clock.h"

namespace ddp_cudaemu {
struct event_record {
    queued_at at;                 /* the marker; the event completes when it has run */
    double time_ms;               /* when it ran */
};
} /* namespace ddp_cudaemu */

struct CUevent_st {
    unsigned flags;
    int device;
    std::shared_ptr<ddp_cudaemu::event_record> last; /* the latest cudaEventRecord; waits hold their own */
};

namespace ddp_cudaemu {

/* Never destroyed, like the engine's state: a process may exit with events alive. */
static std::mutex &events_lock = *new std::mutex;
static auto &live_events = *new std::set<cudaEvent_t>;

/* The event, if live and on device; nullptr after reporting. Called with events_lock held. */
static CUevent_st *live_event(cudaEvent_t event, int device, const char *fn)
{
    if (!live_events.count(event)) {
        fail(cudaErrorInvalidResourceHandle, "%s: %p is not a live event", fn, static_cast<void *>(event));
        return nullptr;
    }
    if (event->device != device) {
        fail(cudaErrorInvalidResourceHandle, "%s: event %p belongs to device %d but the calling thread's current "
             "device is %d (call cudaSetDevice(%d) in this thread first)", fn, static_cast<void *>(event),
             event->device, device, event->device);
        return nullptr;
    }
    return event;
}

/* The latest record of an event of the calling thread's device (NULL: never recorded). */
static cudaError_t event_point(cudaEvent_t event, const char *fn, std::shared_ptr<event_record> *rec)
{
    int device = calling_device(fn);
    if (device < 0)
        return cudaErrorInvalidDevice;
    std::lock_guard<std::mutex> hold(events_lock);
    if (!live_event(event, device, fn))
        return cudaErrorInvalidResourceHandle;
    *rec = event->last;
    return cudaSuccess;
}

} /* namespace ddp_cudaemu */

using namespace ddp_cudaemu;

extern "C" {

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
    unsigned known = cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess;
    if (!event || (flags & ~known))
        return fail(cudaErrorInvalidValue, "cudaEventCreateWithFlags: NULL output or unknown flags 0x%x", flags);
    int device = calling_device("cudaEventCreateWithFlags");
    if (device < 0)
        return cudaErrorInvalidDevice;
    std::lock_guard<std::mutex> hold(events_lock);
    cudaEvent_t e = new CUevent_st{flags, device, nullptr};
    live_events.insert(e);
    *event = e;
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }

cudaError_t cudaEventDestroy(cudaEvent_t event)
{
    std::shared_ptr<event_record> rec;
    cudaError_t err = event_point(event, "cudaEventDestroy", &rec);
    if (err != cudaSuccess)
        return err;
    std::lock_guard<std::mutex> hold(events_lock);
    live_events.erase(event);
    delete event; /* pending waits hold the record itself */
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    std::shared_ptr<event_record> previous;
    cudaError_t err = event_point(event, "cudaEventRecord", &previous);
    if (err != cudaSuccess)
        return err;
    std::shared_ptr<event_record> rec(new event_record{queued_at{}, 0.0});
    err = enqueue(stream, "cudaEventRecord", [rec] { rec->time_ms = 1e3 * monotonic_s(); }, OP_MARKER,
                  "cudaEventRecord", &rec->at);
    if (err != cudaSuccess)
        return err;
    std::lock_guard<std::mutex> hold(events_lock);
    event->last = rec;
    return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
    if (flags & ~(unsigned)cudaEventWaitExternal)
        return fail(cudaErrorInvalidValue, "cudaStreamWaitEvent: unknown flags 0x%x", flags);
    std::shared_ptr<event_record> rec;
    {
        std::lock_guard<std::mutex> hold(events_lock);
        if (!live_events.count(event)) /* an event of another device may be waited for */
            return fail(cudaErrorInvalidResourceHandle, "cudaStreamWaitEvent: %p is not a live event",
                        static_cast<void *>(event));
        rec = event->last;
    }
    /* a never-recorded event is complete: only the stream is checked */
    return rec ? enqueue_wait(stream, rec->at, "cudaStreamWaitEvent")
               : (stream_is_valid(stream) ? cudaSuccess : cudaErrorInvalidResourceHandle);
}

cudaError_t cudaEventQuery(cudaEvent_t event)
{
    std::shared_ptr<event_record> rec;
    cudaError_t err = event_point(event, "cudaEventQuery", &rec);
    if (err != cudaSuccess || !rec)
        return err;
    return query_point(rec->at, "cudaEventQuery") ? cudaSuccess : not_ready();
}

cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
    count_blocking_call("cudaEventSynchronize", __builtin_return_address(0));
    std::shared_ptr<event_record> rec;
    cudaError_t err = event_point(event, "cudaEventSynchronize", &rec);
    if (err != cudaSuccess || !rec)
        return err;
    return synchronize_point(rec->at, "cudaEventSynchronize");
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    if (!ms)
        return fail(cudaErrorInvalidValue, "cudaEventElapsedTime: ms is NULL");
    std::shared_ptr<event_record> a, b;
    cudaError_t err = event_point(start, "cudaEventElapsedTime", &a);
    if (err == cudaSuccess)
        err = event_point(end, "cudaEventElapsedTime", &b);
    if (err != cudaSuccess)
        return err;
    if ((start->flags | end->flags) & cudaEventDisableTiming)
        return fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: an event was created with "
                    "cudaEventDisableTiming");
    if (!a || !b)
        return fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: an event was never recorded");
    if (!point_reached(a->at) || !point_reached(b->at))
        return not_ready(); /* as CUDA: not an error to report, the work has not run yet */
    *ms = (float)(b->time_ms - a->time_ms);
    return cudaSuccess;
}

} /* extern "C" */
