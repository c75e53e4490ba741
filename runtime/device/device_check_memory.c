/* device_check_memory.c — the argument contracts of the memory family's ops (device.h's
 * DEVICE_MEMORY_OPS, and free), for device.c's checking table: each checked_NAME rejects bad
 * arguments with one message for both backends, returns when there is nothing to do, and forwards
 * the rest to d->backend, the copies recorded with their bytes; alloc and free also keep the
 * device's ledger of live allocations (device_ledger.h). It must not copy or allocate device
 * memory itself nor read it. */
#include "runtime/device/device_check.h"
#include "runtime/device/device_ledger.h"

int checked_alloc(device *d, size_t bytes, void **out, ddp_err *err)
{
    NEED_POINTER("alloc", out);
    int rc = d->backend->alloc(d, bytes, out, err);
    if (rc != DDP_OK || !d->ledger || device_ledger_add(d->ledger, *out, bytes))
        return rc;
    d->backend->free(d, *out);
    *out = NULL;
    return ddp_fail(err, DDP_ERUNTIME, "alloc: out of host memory for the allocation ledger");
}

void checked_free(device *d, void *p)
{
    if (!p)
        return;
    if (d->ledger)
        device_ledger_remove(d->ledger, p);
    d->backend->free(d, p);
}

int checked_upload(device *d, void *dst, const void *src, size_t bytes, ddp_err *err)
{
    if (bytes == 0)
        return DDP_OK;
    NEED_POINTER("upload", dst);
    NEED_POINTER("upload", src);
    DEVICE_FORWARD(upload, prof_cost_of((double)bytes, 0, PROF_MATH_NONE, "%zu bytes", bytes),
                   d, dst, src, bytes, err);
}

/* Downloading nothing still waits for the stream, as every download does. */
int checked_download(device *d, void *dst, const void *src, size_t bytes, ddp_err *err)
{
    if (bytes == 0)
        return d->backend->synchronize(d, err);
    NEED_POINTER("download", dst);
    NEED_POINTER("download", src);
    DEVICE_FORWARD(download, prof_cost_of((double)bytes, 0, PROF_MATH_NONE, "%zu bytes", bytes),
                   d, dst, src, bytes, err);
}

int checked_copy(device *d, void *dst, const void *src, size_t bytes, ddp_err *err)
{
    if (bytes == 0)
        return DDP_OK;
    NEED_POINTER("copy", dst);
    NEED_POINTER("copy", src);
    DEVICE_FORWARD(copy, prof_cost_of(2.0 * (double)bytes, 0, PROF_MATH_FP32, "%zu bytes", bytes),
                   d, dst, src, bytes, err);
}

int checked_synchronize(device *d, ddp_err *err) { return d->backend->synchronize(d, err); }

int checked_host_waits(device *d, uint64_t *count, ddp_err *err)
{
    NEED_POINTER("host_waits", count);
    return d->backend->host_waits(d, count, err);
}
