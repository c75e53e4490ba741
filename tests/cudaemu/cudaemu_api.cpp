/* cudaemu_api.cpp — the emulator's own C interface (cudaemu.h): host work queued in stream order,
 * waiting for every stream, and the count of calls that blocked the host (every blocking runtime
 * call reports itself here through count_blocking_call). Must not queue or run work itself: the
 * stream engine (cudaemu_streams.cpp) does. */
#include "cudaemu.h"
#include "cudaemu_internal.h"

#include <atomic>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

namespace ddp_cudaemu {

static std::atomic<unsigned long long> blocking_calls;

void count_blocking_call(const char *fn, const void *caller)
{
    blocking_calls++;
    static const char *trace = getenv("DDP_CUDA_EMU_TRACE_BLOCKING");
    if (!trace || !*trace || strcmp(trace, "0") == 0)
        return;
    Dl_info info;
    const char *who = dladdr(caller, &info) && info.dli_sname ? info.dli_sname : "?";
    fprintf(stderr, "cudaemu: host blocks in %s called from %s\n", fn, who);
}

} /* namespace ddp_cudaemu */

using namespace ddp_cudaemu;

extern "C" unsigned long long cudaemu_host_blocking_calls(void) { return blocking_calls; }

extern "C" cudaError_t cudaemu_enqueue_host_work(cudaStream_t stream, const char *what, cudaemu_host_fn run,
                                                 void *arg, int issuer_only)
{
    return enqueue(stream, what, [run, arg] { run(arg); }, issuer_only ? OP_ISSUER_ONLY : 0, what, nullptr);
}

extern "C" cudaError_t cudaemu_synchronize_all(void)
{
    count_blocking_call("cudaemu_synchronize_all", __builtin_return_address(0));
    return synchronize_device(-1, "cudaemu_synchronize_all");
}
