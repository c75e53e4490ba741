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

gpu_share_rank gpu_share_me(const char *host, int local_rank, int gpus, const char *bus_id)
{
    gpu_share_rank me;
    memset(&me, 0, sizeof me);
    snprintf(me.host, sizeof me.host, "%s", host);
    snprintf(me.bus_id, sizeof me.bus_id, "%s", bus_id ? bus_id : "");
    me.local_rank = local_rank;
    me.gpus = gpus;
    return me;
}

static int same_host(const gpu_share_rank *a, const gpu_share_rank *b)
{
    return strncmp(a->host, b->host, sizeof a->host) == 0;
}

/* Whether ranks a and b of one host use one GPU: by bus id where both know it, else by index. */
static int same_gpu(const gpu_share_rank *a, const gpu_share_rank *b)
{
    if (a->gpus <= 0 || b->gpus <= 0 || !same_host(a, b))
        return 0;
    if (a->bus_id[0] && b->bus_id[0])
        return strcmp(a->bus_id, b->bus_id) == 0;
    return a->local_rank % a->gpus == b->local_rank % b->gpus;
}

int gpu_share_check(const gpu_share_rank *all, int size, const char *instead, ddp_err *err)
{
    /* the first rank (in rank order) whose GPU an earlier rank of its host uses */
    for (int r = 0; r < size; r++) {
        const gpu_share_rank *x = &all[r];
        int first = 0;
        while (first < r && !same_gpu(&all[first], x))
            first++;
        if (first == r)
            continue;
        int ranks = 0, g = x->gpus;
        for (int q = 0; q < size; q++)
            ranks += same_host(&all[q], x);
        char bus[32] = "";
        if (x->bus_id[0])
            snprintf(bus, sizeof bus, " (bus id %s)", x->bus_id);
        return ddp_fail(err, DDP_EUSAGE, "%d ranks on host %.64s but only %d GPU%s visible: ranks %d and %d would both "
                        "use GPU %d%s, and NCCL refuses two ranks on one GPU%s; run at most %d rank%s on %.64s (one per "
                        "GPU), or %s", ranks, x->host, g, g == 1 ? "" : "s", first, r, x->local_rank % g, bus,
                        sharing_asked() ? " (DDPRUN_ALLOW_GPU_SHARING=1 cannot change that)" : "", g, g == 1 ? "" : "s",
                        x->host, instead);
    }
    return DDP_OK;
}
