/* gpu_share.c — gpu_share_check: the rule, its DDPRUN_ALLOW_GPU_SHARING escape and its message. */
#include "gpu_share.h"

#include <stdlib.h>
#include <string.h>

static int sharing_allowed(void)
{
    const char *share = getenv("DDPRUN_ALLOW_GPU_SHARING");
    return share && strcmp(share, "1") == 0;
}

int gpu_share_check(int local_ranks, int gpus, const char *host, const char *reason, ddp_err *err)
{
    if (local_ranks <= gpus || sharing_allowed())
        return DDP_OK;
    int why = reason && reason[0];
    return ddp_fail(err, DDP_EUSAGE, "%d ranks on host %s but only %d GPU%s visible%s%s%s; run one rank per GPU "
                    "(-np), or set DDPRUN_ALLOW_GPU_SHARING=1 to share GPUs", local_ranks, host, gpus,
                    gpus == 1 ? "" : "s", why ? " (" : "", why ? reason : "", why ? ")" : "");
}
