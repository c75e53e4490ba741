/* comm_nccl_absent.c — comm_nccl_create for builds without NCCL: a clear refusal, so the
 * training loop and the benchmark need no #ifdefs. Must not be linked into NCCL builds. */
#include "collectives/comm.h"

int comm_nccl_create(const comm_nccl_opts *opts, comm **out, ddp_err *err)
{
    (void)opts;
    *out = NULL;
    return ddp_fail(err, DDP_EUSAGE, "ddp.backend: nccl is not available in this build of ddprun "
                    "(build with CUDA and NCCL, or the CUDA emulation)");
}
