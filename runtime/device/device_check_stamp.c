/* device_check_stamp.c — the argument contracts of the profiler's timestamps (device.h's
 * DEVICE_STAMP_OPS, and stamps_destroy), for device.c's checking table: a set with slots, a slot
 * inside it, a read of stamped slots, with one message per mistake for both backends; the rest goes
 * to d->backend. Stamps are never recorded themselves. It must not take or read a timestamp
 * itself. */
#include "runtime/device/device_check.h"

#include "runtime/device/backend.h"

int checked_stamps_create(device *d, uint32_t capacity, device_stamps **out, ddp_err *err)
{
    NEED_POINTER("stamps_create", out);
    *out = NULL;
    if (capacity == 0)
        return ddp_fail(err, DDP_ERUNTIME, "stamps_create: no slots (capacity 0)");
    return d->backend->stamps_create(d, capacity, out, err);
}

int checked_stamp(device *d, device_stamps *s, uint32_t slot, void *stream, ddp_err *err)
{
    NEED_POINTER("stamp", s);
    if (slot >= s->capacity)
        return ddp_fail(err, DDP_ERUNTIME, "stamp: slot %u of %u", slot, s->capacity);
    return d->backend->stamp(d, s, slot, stream, err);
}

int checked_stream_wait_compute(device *d, void *stream, ddp_err *err)
{
    return d->backend->stream_wait_compute(d, stream, err);
}

int checked_stamps_read(device *d, device_stamps *s, uint32_t n, double *us, ddp_err *err)
{
    NEED_POINTER("stamps_read", s);
    if (n == 0)
        return DDP_OK;
    NEED_POINTER("stamps_read", us);
    if (n > s->capacity)
        return ddp_fail(err, DDP_ERUNTIME, "stamps_read: %u slots of %u", n, s->capacity);
    if (!s->stamped[0])
        return ddp_fail(err, DDP_ERUNTIME, "stamps_read: slot 0, which the others are timed from, was never stamped");
    return d->backend->stamps_read(d, s, n, us, err);
}

void checked_stamps_destroy(device *d, device_stamps *s)
{
    if (s)
        d->backend->stamps_destroy(d, s);
}
