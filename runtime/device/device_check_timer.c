/* device_check_timer.c — the argument contracts of the interval timer's ops (device.h's
 * DEVICE_TIMER_OPS, and timer_destroy), for device.c's checking table: each checked_NAME rejects a
 * missing timer or output with one message for both backends and forwards the rest to d->backend.
 * Timer ops are never recorded by the profiler. It must not keep time itself nor read device
 * memory. */
#include "runtime/device/device_check.h"

int checked_timer_create(device *d, device_timer **out, ddp_err *err)
{
    NEED_POINTER("timer_create", out);
    return d->backend->timer_create(d, out, err);
}

int checked_timer_start(device *d, device_timer *t, ddp_err *err)
{
    NEED_POINTER("timer_start", t);
    return d->backend->timer_start(d, t, err);
}

int checked_timer_stop(device *d, device_timer *t, ddp_err *err)
{
    NEED_POINTER("timer_stop", t);
    return d->backend->timer_stop(d, t, err);
}

int checked_timer_take_ms(device *d, device_timer *t, double *ms, ddp_err *err)
{
    NEED_POINTER("timer_take_ms", t);
    NEED_POINTER("timer_take_ms", ms);
    return d->backend->timer_take_ms(d, t, ms, err);
}

void checked_timer_destroy(device *d, device_timer *t)
{
    if (t)
        d->backend->timer_destroy(d, t);
}
