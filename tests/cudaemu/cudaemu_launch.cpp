/* cudaemu_launch.cpp — what a launch is checked against before its grid is queued, and the fiber
 * order's setting: the dimension, thread and shared-memory limits a GPU enforces (errors go to
 * cudaGetLastError, at launch, as on a GPU), and DDP_CUDA_EMU_ORDER (forward | reverse |
 * random:SEED), which orders both a block's fibers (cudaemu_sched.cpp) and independent streams
 * (cudaemu_streams.cpp), with the generator its random orders draw from. Must not run kernels. */
#include "cudaemu_internal.h"

#include <stdlib.h>
#include <string.h>

namespace ddp_cudaemu {

uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

bool read_emu_order(emu_order *out, const char *who)
{
    const char *env = getenv("DDP_CUDA_EMU_ORDER");
    char *end = nullptr;
    *out = emu_order{ORDER_FORWARD, 0};
    if (!env || !*env || strcmp(env, "forward") == 0)
        return true;
    if (strcmp(env, "reverse") == 0) {
        out->kind = ORDER_REVERSE;
        return true;
    }
    if (strncmp(env, "random:", 7) == 0 && env[7]) {
        out->seed = strtoull(env + 7, &end, 10);
        if (*end == '\0') {
            out->kind = ORDER_RANDOM;
            return true;
        }
    }
    fail(cudaErrorInvalidValue, "%s: DDP_CUDA_EMU_ORDER=%s: expected forward, reverse or random:SEED", who, env);
    return false;
}

bool launch_config_valid(const char *name, const void *fn, dim3 grid, dim3 block, size_t smem,
                         cudaStream_t stream)
{
    unsigned long long threads = (unsigned long long)block.x * block.y * block.z;
    if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 0x7fffffffu || grid.y > 65535 || grid.z > 65535) {
        fail(cudaErrorInvalidConfiguration, "launch of %s: grid (%u,%u,%u) outside [1, 2^31-1] x [1, 65535] x [1, 65535]",
             name, grid.x, grid.y, grid.z);
        return false;
    }
    if (threads == 0 || block.x > 1024 || block.y > 1024 || block.z > 64 || threads > MAX_THREADS_PER_BLOCK) {
        fail(cudaErrorInvalidConfiguration, "launch of %s: block (%u,%u,%u) has %llu threads; limits are "
             "1024 x 1024 x 64 and %d threads in all", name, block.x, block.y, block.z, threads,
             MAX_THREADS_PER_BLOCK);
        return false;
    }
    if (smem > kernel_max_dynamic_smem(fn)) {
        fail(cudaErrorInvalidValue, "launch of %s: %zu bytes of dynamic shared memory, the limit is %zu "
             "(raise it up to %d with cudaFuncSetAttribute(cudaFuncAttributeMaxDynamicSharedMemorySize))",
             name, smem, kernel_max_dynamic_smem(fn), MAX_DYNAMIC_SMEM_OPTIN);
        return false;
    }
    if (!stream_is_valid(stream)) {
        fail(cudaErrorInvalidResourceHandle, "launch of %s: stream %p is not a live stream", name,
             static_cast<void *>(stream));
        return false;
    }
    return true;
}

} /* namespace ddp_cudaemu */
