/* gpu_share.h — the NCCL backend's one-rank-per-GPU rule: two ranks of a host on one GPU is a
 * usage error at startup, on every rank alike. Ranks pick GPU local_rank % GPUs of those they see,
 * so more ranks than GPUs share one, and NCCL refuses two ranks of a communicator on one GPU
 * ("Duplicate GPU detected"): DDPRUN_ALLOW_GPU_SHARING=1 cannot lift the rule, and when it is set
 * the message says so. A GPU is named by its PCI bus id where known, so ranks that each see
 * their own GPUs alone (srun --gpus-per-task, per-rank CUDA_VISIBLE_DEVICES) share none. Training and ddprun-bench both apply it here, so both decide and say it
 * alike. Must not count GPUs or ranks, nor gather anything itself: the caller passes every
 * rank's entry. */
#ifndef DDP_GPU_SHARE_H
#define DDP_GPU_SHARE_H

#include <stdint.h>

#include "runtime/base/err.h"
#include "runtime/base/host_name.h"

/* One rank's view of its host, gathered from every rank by the caller (as bytes). */
typedef struct gpu_share_rank {
    char host[DDP_HOST_NAME_MAX]; /* the rank's host name (mpi_identity) */
    int32_t local_rank; /* its position among its host's ranks, which picks its GPU */
    int32_t gpus;       /* GPUs visible to it; <= 0: it uses none (not checked) */
    char bus_id[16];    /* the PCI bus id of the one it uses ("": unknown, its index names it) */
} gpu_share_rank;

gpu_share_rank gpu_share_me(const char *host, int local_rank, int gpus, const char *bus_id);

/* all[r] is rank r's entry, for each of `size` ranks. DDP_OK when no two ranks of a host use one
 * GPU (the same bus id, or without one the same index); otherwise DDP_EUSAGE, naming the host of
 * the first such pair (in rank order of the second), the pair, and what to do: "N ranks on host H
 * but only G GPU(s) visible: ranks A and B would both use GPU i (bus id X), and NCCL refuses two
 * ranks on one GPU; run at most G rank(s) on H (one per GPU), or <instead>". */
int gpu_share_check(const gpu_share_rank *all, int size, const char *instead, ddp_err *err);

#endif
