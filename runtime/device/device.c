/* device.c — the device layer's front: choosing the backend for a rank (device: auto | cpu | cuda)
 * and the checking table every caller's d->ops points to.
 *
 * The table's entries are the ops' argument contracts, one file per op family
 * (device_check_FAMILY.c, with the helpers they share in device_check.h): each op's checked_NAME
 * rejects bad arguments with one message (the same whichever backend runs), returns when the op
 * has nothing to do, and forwards everything else to d->backend through DEVICE_FORWARD with the
 * op's cost (bytes, FLOPs, detail), which the profiler records when one is attached
 * (device_prof.h). This file must not check an op's arguments itself nor compute anything an op
 * produces (that is the backends' job). */
#include "device.h"

#include "runtime/base/log.h"
#include "runtime/device/backend.h"
#include "runtime/device/device_check.h"
#include "runtime/device/device_ledger.h"

#include <stdio.h>

static void checked_destroy(device *d)
{
    device_ledger_destroy(d->ledger);
    d->backend->destroy(d);
}

uint64_t device_memory_peak(const device *d) { return device_ledger_peak(d->ledger); }

/* ---- the table and the backends behind it ------------------------------------------------ */

#define CHECKED_OP_ENTRY(name, params) .name = checked_##name,
static const struct device_ops checked_ops = {
    DEVICE_OPS(CHECKED_OP_ENTRY)
    .free = checked_free,
    .timer_destroy = checked_timer_destroy,
    .stamps_destroy = checked_stamps_destroy,
    .destroy = checked_destroy,
};

/* The checking table in front of a backend's new device, and the ledger its alloc and free keep. */
static int front_of(device *d, ddp_err *err)
{
    d->ops = &checked_ops;
    d->ledger = device_ledger_create();
    if (d->ledger)
        return DDP_OK;
    d->backend->destroy(d);
    return ddp_fail(err, DDP_ERUNTIME, "device: out of host memory for its allocation ledger");
}

int device_cpu_create(device **out, ddp_err *err)
{
    *out = NULL;
    int rc = device_cpu_backend_create(out, err);
    if (!rc && (rc = front_of(*out, err)) != DDP_OK)
        *out = NULL;
    return rc;
}

#ifdef DDP_HAVE_CUDA
int device_cuda_create(int local_rank, const device_opts *opts, device **out, ddp_err *err)
{
    *out = NULL;
    int rc = device_cuda_backend_create(local_rank, opts, out, err);
    if (!rc && (rc = front_of(*out, err)) != DDP_OK)
        *out = NULL;
    return rc;
}
#else
void device_cuda_bus_id(int index, char *out, size_t len)
{
    (void)index;
    if (len)
        out[0] = '\0';
}

int device_cuda_count(char *reason, size_t reason_len)
{
    snprintf(reason, reason_len, "this build of ddprun has no CUDA backend (configure with -Dgpu=enabled)");
    return 0;
}

int device_cuda_create(int local_rank, const device_opts *opts, device **out, ddp_err *err)
{
    (void)local_rank;
    (void)opts;
    *out = NULL;
    return ddp_fail(err, DDP_EUSAGE, "device: cuda requested, but this build of ddprun has no CUDA backend "
                                     "(configure with -Dgpu=enabled, or -Dgpu_emulation=true for the CPU emulation)");
}
#endif

int device_open(const device_opts *opts, int local_rank, device **out, ddp_err *err)
{
    char reason[256] = "";
    switch (opts->kind) {
    case DEVICE_CPU:
        return device_cpu_create(out, err);
    case DEVICE_CUDA:
        return device_cuda_create(local_rank, opts, out, err);
    case DEVICE_AUTO:
        if (device_cuda_count(reason, sizeof reason) > 0)
            return device_cuda_create(local_rank, opts, out, err);
        log_info("device: auto -> cpu (%s)", reason);
        return device_cpu_create(out, err);
    }
    return ddp_fail(err, DDP_EUSAGE, "device: unknown kind %d", (int)opts->kind);
}
