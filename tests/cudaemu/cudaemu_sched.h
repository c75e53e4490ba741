/* cudaemu_sched.h — between the scheduler (cudaemu_sched.cpp) and the warp exchanges it completes
 * (cudaemu_warp_exchange.cpp): the running block, its threads and what each one waits at. Only those
 * two files include it; the rest of the emulator reaches the running thread through
 * cudaemu_internal.h's functions. */
#ifndef DDP_CUDAEMU_SCHED_H
#define DDP_CUDAEMU_SCHED_H

#include "cudaemu_fiber.h"
#include "cudaemu_internal.h"
#include "cudaemu_kernel.h"

#include <stddef.h>
#include <stdint.h>
#include <vector>

namespace ddp_cudaemu {

enum thread_state { RUNNABLE, AT_BARRIER, AT_WARP, AT_SYNC /* a named barrier or mbarrier */, EXITED };
/* A thread gets a stack when it first runs and gives it back when it exits, so threads that never
 * block (most element-wise kernels) all reuse one hot stack. */

struct emu_thread {
    uint3 tid;
    int linear;
    thread_state state;
    const char *file; /* where it waits */
    int line;
    int predicate, result;             /* __syncthreads_count/and/or */
    warp_op_kind op;                   /* warp exchange */
    unsigned mask;
    uint64_t in, out;
    int param, width;
    int stack; /* -1 until started */
    fiber_context ctx;
    async_queue async; /* its cp.async copies not yet waited for */
    wgmma_state wgmma; /* its wgmma fence, commit groups and (lane 0) its warp's pending products */
};

struct block_run {
    const char *kernel;
    kernel_thunk thunk;
    const void *args;
    int nthreads, runnable, exited, at_barrier;
    std::vector<emu_thread> threads;
    unsigned warp_runnable[MAX_THREADS_PER_BLOCK / 32]; /* bit per runnable lane */
    int warp_waiting[MAX_THREADS_PER_BLOCK / 32]; /* lanes at a warp operation */
    unsigned warp_live[MAX_THREADS_PER_BLOCK / 32]; /* lanes that exist and have not exited */
    emu_order_kind order;
    uint64_t rng;
    int cursor, current_warp;
    emu_thread *running;
    fiber_context scheduler;
    std::vector<char> dynamic_smem;
    size_t dynamic_smem_bytes; /* as launched (dynamic_smem holds at least one byte) */
    std::vector<int> free_stacks;
};

/* t (waiting at a barrier or a warp exchange that has now completed) may be picked again
 * (cudaemu_sched.cpp). */
void make_runnable(block_run &b, emu_thread &t);

/* ---- warp exchanges (cudaemu_warp_exchange.cpp), run on the scheduler's stack ---- */
/* The intrinsic a warp operation is, for reports: "__shfl_sync", "mma.sync", ... */
const char *warp_op_name(warp_op_kind op);
/* t just arrived at a warp operation: completes it (results in every lane's `out`, or the matrix
 * instruction's operands written, the lanes runnable again) once every lane of its mask is there.
 * A mask without the caller, a partial mask on a .sync.aligned instruction, a bad shuffle width,
 * lanes at different operations, or a lane in the mask that has exited or does not exist abort
 * through die_in_kernel. */
void try_warp_exchange(block_run &b, const emu_thread &t);
/* t just exited: a lane of its warp waiting at an exchange that names t's lane can never continue,
 * which aborts as a deadlock. */
void check_warp_after_exit(block_run &b, const emu_thread &t);

} /* namespace ddp_cudaemu */

#endif
