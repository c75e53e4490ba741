/* bench_gpu_absent.c — bench_gpu.c for builds without CUDA: no GPUs to describe, and the reason
 * (the device layer's), so ddprun-bench needs no #ifdefs. Must not be linked into CUDA builds. */
#include <stdio.h>

#include "bench_report.h"

int bench_gpu_describe(char *out, size_t len)
{
    char reason[256] = "";
    device_cuda_count(reason, sizeof reason);
    snprintf(out, len, "no CUDA devices (%s)", reason);
    return 0;
}

void bench_gpu_label(const device *dev, char *out, size_t len) { snprintf(out, len, "%s", dev->name); }
