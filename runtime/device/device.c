/* device.c — choosing the device backend for a rank (device: auto | cpu | cuda).
 *
 * Owns the policy only: auto picks CUDA when the build has it and a GPU answers, otherwise the
 * CPU with a one-line reason. It must not implement any op; the backends do. */
#include "device.h"

#include "runtime/base/log.h"

#include <stdio.h>

#ifndef DDP_HAVE_CUDA
int device_cuda_count(char *reason, size_t reason_len)
{
    snprintf(reason, reason_len, "this build of ddprun has no CUDA backend (configure with -Dgpu=enabled)");
    return 0;
}

int device_cuda_create(int local_rank, const config *cfg, device **out, ddp_err *err)
{
    (void)local_rank;
    (void)cfg;
    *out = NULL;
    return ddp_fail(err, DDP_EUSAGE, "device: cuda requested, but this build of ddprun has no CUDA backend "
                                     "(configure with -Dgpu=enabled, or -Dgpu_emulation=true for the CPU emulation)");
}
#endif

int device_open(const config *cfg, int local_rank, device **out, ddp_err *err)
{
    char reason[256] = "";
    switch (cfg->device) {
    case DEVICE_CPU:
        return device_cpu_create(out, err);
    case DEVICE_CUDA:
        return device_cuda_create(local_rank, cfg, out, err);
    case DEVICE_AUTO:
        if (device_cuda_count(reason, sizeof reason) > 0)
            return device_cuda_create(local_rank, cfg, out, err);
        log_info("device: auto -> cpu (%s)", reason);
        return device_cpu_create(out, err);
    }
    return ddp_fail(err, DDP_EUSAGE, "device: unknown kind %d", (int)cfg->device);
}
