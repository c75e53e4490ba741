/* gpu_share.h — the one-rank-per-GPU rule: more ranks on a host than GPUs visible there is a usage
 * error at startup (ranks would silently share GPUs) unless DDPRUN_ALLOW_GPU_SHARING=1. Training
 * and ddprun-bench both apply it here, so both decide and say it alike.
 * Must not count GPUs or ranks itself: the caller passes what it found. */
#ifndef DDP_GPU_SHARE_H
#define DDP_GPU_SHARE_H

#include "err.h"

/* DDP_OK when local_ranks ranks may run on host's gpus GPUs; otherwise DDP_EUSAGE with
 * "N ranks on host H but only G GPU(s) visible (reason); run one rank per GPU (-np), or set
 * DDPRUN_ALLOW_GPU_SHARING=1 to share GPUs" (the parenthesis only when reason is not empty). */
int gpu_share_check(int local_ranks, int gpus, const char *host, const char *reason, ddp_err *err);

#endif
