/* gpu_share.c — gpu_share_check: the rule, what DDPRUN_ALLOW_GPU_SHARING=1 no longer does, and
 * the message. */
#include "gpu_share.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int sharing_asked(void)
{
    const char *share = getenv("DDPRUN_ALLOW_GPU_SHARING");
    return share && strcmp(share, "1") == 0;
}

gpu_share_rank gpu_share_me(const char *host, int local_rank, int gpus)
{
    gpu_share_rank me;
    memset(&me, 0, sizeof me);
    snprintf(me.host, sizeof me.host, "%s", host);
    me.local_rank = local_rank;
    me.gpus = gpus;
    return me;
}

static int same_host(const gpu_share_rank *a, const gpu_share_rank *b)
{
    return strncmp(a->host, b->host, sizeof a->host) == 0;
}

int gpu_share_check(const gpu_share_rank *all, int size, const char *instead, ddp_err *err)
{
    /* the first rank (in rank order) whose local rank wraps around onto GPU 0 */
    for (int r = 0; r < size; r++) {
        const gpu_share_rank *x = &all[r];
        if (x->gpus <= 0 || x->local_rank != x->gpus)
            continue;
        int first = -1, ranks = 0;
        for (int q = 0; q < size; q++)
            if (same_host(&all[q], x)) {
                ranks++;
                if (all[q].local_rank == 0)
                    first = q;
            }
        int g = x->gpus;
        return ddp_fail(err, DDP_EUSAGE, "%d ranks on host %.64s but only %d GPU%s visible: ranks %d and %d would both "
                        "use GPU 0, and NCCL refuses two ranks on one GPU%s; run at most %d rank%s on %.64s (one per "
                        "GPU), or %s", ranks, x->host, g, g == 1 ? "" : "s", first, r,
                        sharing_asked() ? " (DDPRUN_ALLOW_GPU_SHARING=1 cannot change that)" : "", g, g == 1 ? "" : "s",
                        x->host, instead);
    }
    return DDP_OK;
}
