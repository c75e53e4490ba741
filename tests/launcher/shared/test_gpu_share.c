/* test_gpu_share.c — gpu_share_check (launcher/shared/gpu_share.c) on hand-made jobs, several hosts
 * included, which no single-machine run can show: the verdict, the host and the two global
 * ranks it names, ranks that each see their own GPU alone (told apart by bus id), and what
 * DDPRUN_ALLOW_GPU_SHARING=1 changes (only the message). */
#include <stdlib.h>
#include <string.h>

#include "tests/check.h"
#include "launcher/shared/gpu_share.h"

/* A job from "host:gpus[@bus id of the GPU it uses]" per rank, in rank order; local ranks count
 * up per host. */
static int job(const char *const *spec, int n, gpu_share_rank *all)
{
    for (int r = 0; r < n; r++) {
        char host[64];
        int gpus = 0, local = 0;
        snprintf(host, sizeof host, "%.*s", (int)strcspn(spec[r], ":"), spec[r]);
        gpus = atoi(strchr(spec[r], ':') + 1);
        const char *bus = strchr(spec[r], '@');
        for (int q = 0; q < r; q++)
            local += strcmp(all[q].host, host) == 0;
        all[r] = gpu_share_me(host, local, gpus, bus ? bus + 1 : "");
    }
    return n;
}

static int verdict(const char *const *spec, int n, ddp_err *err)
{
    gpu_share_rank all[16];
    memset(err, 0, sizeof *err);
    return gpu_share_check(all, job(spec, n, all), "use --backend mpi", err);
}

int main(void)
{
    ddp_err err;
    unsetenv("DDPRUN_ALLOW_GPU_SHARING");
    const char *fits[] = {"a:2", "a:2", "b:4", "b:4", "b:4"};
    CHECK(verdict(fits, 5, &err) == DDP_OK, "2 ranks on 2 GPUs, 3 on 4: %s", err.msg);
    const char *cpu[] = {"a:0", "a:0", "a:0"}; /* ranks without GPUs are not checked */
    CHECK(verdict(cpu, 3, &err) == DDP_OK, "CPU ranks: %s", err.msg);

    /* host b (ranks 1, 3, 4 interleaved with a's) has 3 ranks on 2 GPUs: ranks 1 and 4 share GPU 0 */
    const char *over[] = {"a:2", "b:2", "a:2", "b:2", "b:2"};
    CHECK(verdict(over, 5, &err) == DDP_EUSAGE, "3 ranks on b's 2 GPUs accepted");
    CHECK_STR_CONTAINS(err.msg, "3 ranks on host b but only 2 GPUs visible: ranks 1 and 4 would both use GPU 0, "
                                "and NCCL refuses two ranks on one GPU; run at most 2 ranks on b (one per GPU), "
                                "or use --backend mpi");
    /* the first overloaded host in rank order, whichever rank asks */
    const char *two[] = {"a:1", "b:1", "b:1", "a:1"};
    CHECK(verdict(two, 4, &err) == DDP_EUSAGE, "2 hosts with 2 ranks on 1 GPU each accepted");
    CHECK_STR_CONTAINS(err.msg, "2 ranks on host b but only 1 GPU visible: ranks 1 and 2 would both use GPU 0");

    /* each rank sees its own GPUs alone (srun --gpus-per-task): index 0 everywhere, one GPU each */
    const char *bound[] = {"a:1@0000:01:00.0", "a:1@0000:02:00.0", "b:2@0000:01:00.0", "b:2@0000:04:00.0"};
    CHECK(verdict(bound, 4, &err) == DDP_OK, "one GPU per rank by binding: %s", err.msg);
    /* two ranks bound to the same GPU */
    const char *same[] = {"a:1@0000:01:00.0", "a:1@0000:02:00.0", "a:1@0000:01:00.0"};
    CHECK(verdict(same, 3, &err) == DDP_EUSAGE, "two ranks bound to one GPU accepted");
    CHECK_STR_CONTAINS(err.msg, "3 ranks on host a but only 1 GPU visible: ranks 0 and 2 would both use GPU 0 "
                                "(bus id 0000:01:00.0), and NCCL refuses");

    setenv("DDPRUN_ALLOW_GPU_SHARING", "1", 1);
    CHECK(verdict(over, 5, &err) == DDP_EUSAGE, "DDPRUN_ALLOW_GPU_SHARING=1 lifted the rule");
    CHECK_STR_CONTAINS(err.msg, "and NCCL refuses two ranks on one GPU (DDPRUN_ALLOW_GPU_SHARING=1 cannot change "
                                "that); run at most 2 ranks on b");
    CHECK(verdict(fits, 5, &err) == DDP_OK, "DDPRUN_ALLOW_GPU_SHARING=1 with one rank per GPU: %s", err.msg);
    return check_done("test_gpu_share");
}
