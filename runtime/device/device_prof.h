/* device_prof.h — the profiler's recorder: attached to a device for a window of training steps
 * (d->prof, NULL when off), it times every device op, the phases and collectives its callers
 * mark, and host work, and hands the records back with every time on the host's monotonic clock.
 *
 * Device ranges are stamped in stream order with the device's stamp ops (device.h): a begin and
 * an end slot each, recorded without ever waiting, so a step is timed as it runs; the one wait
 * is device_prof_finish's, after the window. Host ranges (data waits, a checkpoint write on its
 * own thread) read the monotonic clock and may be recorded from any thread. When the stamp slots
 * (or the host records) run out, recording stops and the records say how many were dropped.
 * Device ranges must be begun and ended on the thread that enqueues the device's work.
 *
 * Every op of device.h reaches its backend through DEVICE_FORWARD (its contract, in
 * device_check_FAMILY.c), which records the op with the cost its contract states beside it:
 * the bytes it reads and writes (every input read once, every output written once, at its
 * element size), its FLOPs, and a short detail that tells shapes apart. This file must not know
 * about training, ranks or communication: names and tracks come from its callers. */
#ifndef DDP_DEVICE_PROF_H
#define DDP_DEVICE_PROF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/device/device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where a range is shown: the compute stream, the communication stream (or, for a host-side
 * communicator, the time from issuing a collective to its wait's return), host work on the
 * calling thread, the checkpoint writer's thread. */
typedef enum prof_track {
    PROF_TRACK_COMPUTE,
    PROF_TRACK_COMM,
    PROF_TRACK_HOST,
    PROF_TRACK_CKPT_WRITER,
    PROF_TRACKS
} prof_track;

/* Which peak bounds an op (the report's roofline): none (a host <-> device copy, PCIe-bound), the
 * fp32 rate of the ordinary cores, or a GEMM's tensor-core rate for its operand type. */
typedef enum prof_math { PROF_MATH_NONE, PROF_MATH_FP32, PROF_MATH_GEMM_FP32, PROF_MATH_GEMM_BF16 } prof_math;

#define PROF_NAME_MAX 64
#define PROF_DETAIL_MAX 64

/* What one range costs: bytes moved, floating-point operations, and a detail such as
 * "1024x2304x768 bf16->bf16 NT". */
typedef struct prof_cost {
    double bytes, flops;
    prof_math math;
    char detail[PROF_DETAIL_MAX];
} prof_cost;

/* fmt may be NULL (no detail). */
prof_cost prof_cost_of(double bytes, double flops, prof_math math, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* "f32" or "bf16", for details. */
const char *prof_dtype_name(tensor_dtype t);

/* One finished range; times in microseconds of the host's monotonic clock (1e6 * monotonic_s()). */
typedef struct prof_record {
    char name[PROF_NAME_MAX];
    const char *family;     /* a device family (device.h), or the caller's ("phase", "comm"); host
                               ranges: "comm", "checkpoint" or "host" by their track */
    char detail[PROF_DETAIL_MAX];
    prof_track track;
    int depth;              /* ranges open on the same track when it began */
    double begin_us, end_us;
    double bytes, flops;
    prof_math math;
} prof_record;

/* Opens a window on d (d->prof must be NULL): capacity stamp slots, of which `marks` are kept for
 * step marks and the rest hold slot 0 and the ranges (two each). Waits for the device once,
 * before anything is recorded, to tie the device's time to the host's. */
int device_prof_open(device *d, uint32_t capacity, uint32_t marks, ddp_err *err);

/* A range on the device in the order of stream (NULL: the compute stream); *id is -1 when it was
 * dropped for lack of slots (device_prof_end ignores -1). name is copied. */
int device_prof_begin(device *d, const char *name, const char *family, prof_track track, void *stream,
                      const prof_cost *cost, int *id, ddp_err *err);
int device_prof_end(device *d, int id, ddp_err *err);
/* A step boundary on the compute stream: the window's steps lie between consecutive marks. */
int device_prof_mark_step(device *d, ddp_err *err);

/* Host ranges, from any thread; p may be NULL (profiling off): nothing happens. host_begin
 * returns the range's id, or -1 (dropped, or p NULL). */
int device_prof_host_begin(device_prof *p, const char *name, prof_track track);
void device_prof_host_end(device_prof *p, int id);
/* A host range whose clock readings (monotonic_s()) were taken elsewhere, e.g. by another thread. */
void device_prof_host_range(device_prof *p, const char *name, prof_track track, double begin_s, double end_s);

/* Ends the window: waits for the device once, detaches the recorder from d (d->prof NULL again)
 * and turns the stamps into records; host ranges are no longer accepted. */
int device_prof_finish(device *d, device_prof *p, ddp_err *err);
/* After finish: the records (device ranges in the order they began, then host ranges), the step
 * marks' times (n_marks of them: n_marks - 1 steps), and how many ranges were dropped. */
const prof_record *device_prof_records(const device_prof *p, size_t *n);
const double *device_prof_marks(const device_prof *p, int *n_marks);
uint64_t device_prof_dropped(const device_prof *p);
/* Frees p (NULL is fine), detaching it from d first if it is still attached. No thread may be
 * inside device_prof_host_* for p. */
void device_prof_free(device *d, device_prof *p);

/* The name and family of a device op, as records show them. */
const char *device_op_name(device_op op);
const char *device_op_family(device_op op);

/* For the checked ops of device.c's table (DEVICE_FORWARD). */
int device_prof_op_begin(device *d, device_op op, const prof_cost *cost, int *id, ddp_err *err);
/* Stamps the end of op range id (-1: nothing) and returns the op's status rc, or the stamp's
 * failure when the op succeeded. */
int device_prof_op_end(device *d, int id, int rc, ddp_err *err);

/* The end of a checked op (device_check_FAMILY.c): calls the backend's op with the argument list
 * that follows (d ... err, with d and err in scope), recorded with `cost` (a prof_cost expression,
 * evaluated only while a profiler is attached) when one is. */
#define DEVICE_FORWARD(op, cost, ...)                                                              \
    do {                                                                                           \
        if (!d->prof)                                                                              \
            return d->backend->op(__VA_ARGS__);                                                    \
        const prof_cost prof_cost_ = cost;                                                         \
        int prof_id_ = -1;                                                                         \
        int prof_rc_ = device_prof_op_begin(d, DEVICE_OP_##op, &prof_cost_, &prof_id_, err);       \
        if (prof_rc_ == DDP_OK)                                                                    \
            prof_rc_ = d->backend->op(__VA_ARGS__);                                                \
        return device_prof_op_end(d, prof_id_, prof_rc_, err);                                     \
    } while (0)

#ifdef __cplusplus
}
#endif

#endif
