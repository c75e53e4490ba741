/* cudaemu_internal.h — what the emulator's parts (scheduler, stream engine, runtime shim, cuBLAS
 * and cuBLASLt shims) share.
 *
 * Not for kernels or host code outside tests/cudaemu/: they see the real CUDA headers only (and
 * cudaemu.h). Holds the error state hooks, the calling thread's device, queueing work on streams
 * and waiting for it, the registry of emulated device and pinned allocations with their
 * protection and bounds checks, and the per-kernel launch attributes. */
#ifndef DDP_CUDAEMU_INTERNAL_H
#define DDP_CUDAEMU_INTERNAL_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>
#include <algorithm>
#include <functional>
#include <memory>
#include <vector>

namespace ddp_cudaemu {

/* The compute capability's major number every emulated device reports: 9, or 8 under
 * DDP_CUDA_EMU_ARCH=80 (a malformed value is reported and aborts). */
int emulated_cc_major();

/* Records err as the last error (cudaGetLastError) and prints "cudaemu: <message>" to stderr.
 * Returns err so callers can `return fail(...)`. */
cudaError_t fail(cudaError_t err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* cudaErrorNotReady, recorded as the last error without a message: a query of work not yet done
 * is no failure, but the runtime keeps its code for cudaGetLastError all the same, so the next
 * launch's check reports it unless the caller cleared it (PyTorch's event query does). */
cudaError_t not_ready();

/* The calling thread's device for a call that uses one: its cudaSetDevice choice, or device 0 when
 * it never chose and the machine has exactly one. Reports through fail() and returns -1 when the
 * thread never chose while several devices exist (on a GPU it would silently use device 0), or
 * when there is no device. */
int calling_device(const char *fn);

/* True when stream is 0, a legacy/per-thread handle, or a live stream of the calling thread's
 * device; otherwise reports through fail(). */
bool stream_is_valid(cudaStream_t stream);

/* A point in a stream's queue: reached once the stream has run the op numbered seq. */
struct queued_at {
    std::shared_ptr<CUstream_st> stream;
    uint64_t seq;
};
enum op_flags {
    OP_ISSUER_ONLY = 1, /* only the queueing thread (or the progress thread) may run it */
    OP_MARKER = 2,      /* touches no device memory: no bounds check after it (event records) */
};
/* Queues work on stream (0 = the legacy default stream of the calling thread's device) to run
 * when something waits for it; flags are op_flags. On success the point just after it goes to
 * *where when where is not NULL. Errors are reported as fn. */
cudaError_t enqueue(cudaStream_t stream, const char *what, std::function<void()> work, unsigned flags,
                    const char *fn, queued_at *where);
/* Makes stream's later work wait until the point is reached (cudaStreamWaitEvent). */
cudaError_t enqueue_wait(cudaStream_t stream, const queued_at &until, const char *fn);
/* Blocks until the point is reached, running whatever it needs on this thread. */
cudaError_t synchronize_point(const queued_at &at, const char *fn);
/* A query: runs at most one op toward the point, then says whether it is reached. */
bool query_point(const queued_at &at, const char *fn);
/* Whether the point is reached, running nothing. */
bool point_reached(const queued_at &at);
/* Blocks until every stream of device (all devices when -1) has run everything queued so far. */
cudaError_t synchronize_device(int device, const char *fn);
/* Counts a call that blocks the host until the device catches up (cudaemu_host_blocking_calls). */
void count_blocking_call(const char *fn, const void *caller);
/* The op the calling thread is running (a kernel's name), or NULL: for fault reports. */
const char *op_running_on_this_thread();

enum alloc_kind { ALLOC_DEVICE, ALLOC_PINNED_HOST };
/* Finds the allocation holding [p, p+bytes): returns true and its kind, or false with the
 * distance past the end in *overrun_bytes (0 when p is in no allocation at all). */
bool alloc_lookup(const void *p, size_t bytes, alloc_kind *kind, size_t *overrun_bytes);
/* NULL when [p, p+bytes) lies in one device allocation; else what it is instead, for a report:
 * "past the end of a device allocation" or "not in device memory". */
const char *device_range_problem(const void *p, size_t bytes);

/* Opens device memory to host code while queued work runs, and closes it again after (PROT_NONE:
 * host code dereferencing device memory faults). */
void device_memory_access(bool open);
/* After an op ran: every device allocation's guard bytes must be intact, else the op (named
 * `what`) wrote outside its allocation: reported, and the process aborts. */
void check_allocation_bounds(const char *what);
/* From the SIGSEGV handler: if addr lies in or beside a device allocation, report who touched it
 * and abort; otherwise return. */
void report_device_memory_fault(const void *addr);
/* Installs the emulator's SIGSEGV report (fiber stack overflows, device memory faults) once. */
void install_fault_report();

/* DDP_CUDA_EMU_ORDER, which orders both the fibers of a block and independent streams: forward
 * (the default), reverse, or random:SEED (cudaemu_launch.cpp). */
enum emu_order_kind { ORDER_FORWARD, ORDER_REVERSE, ORDER_RANDOM };
struct emu_order {
    emu_order_kind kind;
    uint64_t seed; /* ORDER_RANDOM */
};
/* Reads it; false, reported through fail() as "<who>: ...", when it is malformed. */
bool read_emu_order(emu_order *out, const char *who);
/* splitmix64: advances *state and returns the next draw. */
uint64_t next_random(uint64_t *state);

/* Dynamic shared memory limit of a kernel (48 KiB unless raised by cudaFuncSetAttribute). */
size_t kernel_max_dynamic_smem(const void *fn);
/* Whether a launch of kernel `name` (fn) fits a GPU's limits on grid, block and dynamic shared
 * memory, on a live stream; if not, the error goes to cudaGetLastError (cudaemu_launch.cpp). */
bool launch_config_valid(const char *name, const void *fn, dim3 grid, dim3 block, size_t smem,
                         cudaStream_t stream);

/* Every static __shared__ object in the executable: the writable static locals of each function
 * that declares a shared-memory marker (see cudaemu_kernel.h), found once in the symbol table. */
struct memory_range {
    void *addr;
    size_t bytes;
};
/* The range of `sorted` (by address, not overlapping) that holds p, or null. */
inline const memory_range *range_containing(const std::vector<memory_range> &sorted, const char *p)
{
    auto it = std::upper_bound(sorted.begin(), sorted.end(), p,
                               [](const char *q, const memory_range &r) { return q < (const char *)r.addr; });
    if (it == sorted.begin())
        return nullptr;
    --it;
    return (size_t)(p - (const char *)it->addr) < it->bytes ? &*it : nullptr;
}
const memory_range *static_shared_objects(size_t *count);
/* The guard after a static __shared__ object (cudaemu_kernel.h's marker) that [p, p + bytes)
 * touches, or null. */
const memory_range *static_shared_guard(const void *p, size_t bytes);
/* The live device allocations (cudart_memory.cpp), by address: where each one's data starts, and its
 * size. */
std::vector<memory_range> device_allocations();

/* ---- the race check between the blocks of a grid in device memory (cudaemu_global_race.cpp) ---- */
/* A grid starts on this thread: the allocations it may touch are taken now; checked: its accesses
 * are race-checked (race_grid_checked; DDP_CUDA_EMU_GLOBAL_RACES=0 turns that off for every grid). */
void global_race_grid_begin(bool checked);
/* A kernel's load or store (at pc) of the running block: a race with another block's aborts. */
void global_race_access(const void *p, size_t bytes, bool write, const void *pc);
/* What else a kernel may touch (cudaemu_kernel_memory.cpp): the grid's own ranges (its arguments,
 * the thread indices) are named when it starts; a kernel's access outside device allocations and
 * stacks that is none of those, the built-in variables, static data or pinned host memory aborts. */
void kernel_memory_grid_begin(const memory_range *ranges, size_t count);
void kernel_memory_check(const void *p, size_t bytes, bool write, const void *pc);
/* Whether [p, p + bytes) lies in one pinned host allocation (cudart_memory.cpp). */
bool kernel_reachable(const void *p, size_t bytes);
/* Whether p lies in a device allocation's mapping outside its data (its guard bytes, slack or guard
 * pages): *allocation gets the data's range (cudart_memory.cpp). */
bool device_allocation_beside(const void *p, memory_range *allocation);
/* The emulator's own read of device memory for the running block (`what` at file:line: a cp.async's
 * or a bulk or tensor copy's source), checked the same way. */
void global_race_copy_read(const void *p, size_t bytes, const char *what, const char *file, int line);

/* ---- what the tensor-core instructions (cudaemu_tensor.cpp) need from the scheduler ---- */
/* Whether [p, p+bytes) lies inside one shared-memory object of the running block: its dynamic
 * shared memory (as sized at launch) or a static __shared__ array. */
bool in_shared_memory(const void *p, size_t bytes);
/* Reports a kernel bug with the running kernel's name and block, then aborts. */
[[noreturn]] void die_in_kernel(const char *what, const char *detail);
/* One cp.async copy queued by a thread, and the thread's queue of them. */
struct async_copy {
    void *dst;
    const void *src;
    unsigned bytes, src_bytes;
    uint64_t group; /* the commit group it belongs to: the thread's commit count when it was issued */
    const char *file; /* where it was issued, for race reports */
    int line;
};
struct async_queue {
    std::vector<async_copy> copies; /* issued and not yet completed, oldest first */
    uint64_t committed = 0;         /* commit groups closed so far */
};
/* The running thread's queue (reports `intrinsic` called outside a kernel). */
async_queue &running_async_queue(const char *intrinsic);
/* A warp whose 32 lanes all reached the same mma or ldmatrix (kind WARP_MMA / WARP_LDMATRIX of
 * cudaemu_kernel.h, all with the same param): lane_ops[i] is lane i's operand record. Computes and
 * writes every lane's result; called by the scheduler on its own stack. */
void complete_tensor_exchange(int kind, int param, void *const lane_ops[32]);

/* One warp's share of an issued wgmma (cudaemu_wgmma.cpp), kept by lane 0 until a wait_group
 * covers its commit group: each lane's accumulators and A registers (NULL: A in shared memory). */
struct wgmma_pending {
    float *d[32];
    const uint32_t *a[32];
    uint64_t desc_a, desc_b;
    int n, scale_d, tnsp_a, tnsp_b, warp_rank;
    uint64_t group;
    const char *file;
    int line;
};
/* A thread's wgmma state: whether it fenced since its last wait_group, its commit groups, and (its
 * warp's lane 0) the warp's products not yet waited for. */
struct wgmma_state {
    std::vector<wgmma_pending> pending;
    uint64_t committed = 0;
    bool fenced = false;
    const char *issue_file = nullptr;
    int issue_line = 0;
};
/* The running thread's wgmma state (reports `intrinsic` called outside a kernel). */
wgmma_state &running_wgmma_state(const char *intrinsic);
/* The running block's dynamic shared memory and its launched size (NULL and 0 outside a kernel). */
char *dynamic_shared_window(size_t *bytes);
/* A warp at the same wgmma issue (WARP_WGMMA) or wait_group (WARP_WGMMA_WAIT): records the issued
 * product, or completes the covered ones; called by the scheduler on its own stack. */
void complete_wgmma_exchange(int kind, int param, void *const lane_ops[32]);

/* ---- what the race check (cudaemu_race.cpp) needs from the scheduler ---- */
/* Whether the race checks look at this grid of `kernel`: DDP_CUDA_EMU_RACE_GRIDS=N checks each
 * kernel's first N grids in the process only (unset: every grid). Counts the grid. */
bool race_grid_checked(const char *kernel);
/* A grid starts on this thread, with its dynamic shared memory; each block starts a new epoch.
 * checked: its shared-memory accesses are race-checked (else only clocks are kept). */
void race_grid_begin(void *dynamic_smem, size_t bytes, bool checked);
/* A __syncthreads was released (or a block starts): accesses before it are ordered before the
 * ones after it. */
void race_barrier();
/* A block starts: a new epoch, and no write of an earlier block awaits a proxy fence. */
void race_block_begin();
/* The running thread executed fence.proxy.async: its generic writes so far are visible to the async
 * proxy. */
void race_proxy_fence();
/* A __syncwarp (or a bar.sync) completed for the lanes `lanes` of warp `warp`: their accesses
 * before it are ordered before their accesses after it. */
void race_lane_sync(int warp, unsigned lanes);
/* Thread `thread` of the block (linear index) runs until race_leave. */
void race_enter(int thread);
void race_leave();
/* The running thread's lane, or -1 between fibers. */
int race_running_lane();
/* A cp.async of the running thread into dst: a write now, and in flight until race_async_land (its
 * wait_group) or race_async_abandon (its block ended without one): until then any access to those
 * bytes is a hazard. */
void race_async_issue(const void *dst, size_t bytes, const char *file, int line);
void race_async_land(const void *dst, size_t bytes, const char *what, const char *file, int line);
void race_async_abandon(const void *dst, size_t bytes);
/* The race check's vector clocks have a slot per warp of a block, then one per mbarrier (the bulk
 * copies completing on it). A sync_clock is what a release hands to a barrier and an acquire takes
 * from it, valid in the epoch it was made in (after a later __syncthreads it orders nothing new). */
enum { CLOCK_WARPS = 32, CLOCK_SLOTS = 64 };
struct sync_clock {
    uint32_t epoch = 0;
    uint32_t c[CLOCK_SLOTS];
};
/* The running thread releases (its clock and its warp's count joined into `into`; its warp's later
 * accesses are not part of it) or acquires (the clocks in `from` joined into its own). */
void race_release(sync_clock &into);
void race_acquire(const sync_clock &from);
/* A cp.async.bulk of the running thread writing [dst, dst+bytes) through the mbarrier with clock
 * slot `slot`: a write ordered after what the issuing thread has seen, recorded as the slot's, whose
 * clock joins `phase` (the mbarrier's current phase) so that only a wait on it orders the write. */
void race_bulk_write(const void *dst, size_t bytes, int slot, sync_clock &phase, const char *what, const char *file,
                     int line);

/* ---- what named barriers and mbarriers (cudaemu_sync.cpp) need from the scheduler, and back ---- */
/* The running thread's index in its block (reports `intrinsic` called outside a kernel), and the
 * block's thread count. */
int running_thread_index(const char *intrinsic);
int running_block_threads();
/* Blocks the running thread until wake_thread names it (a deadlock, if nothing does, is reported
 * with sync_describe_wait's words). */
void wait_for_wake(const char *file, int line);
void wake_thread(int thread);
/* A block starts with `threads` threads: no barrier state survives from the one before. At its end
 * (every thread exited) a named barrier still holding arrivals is reported: the arrivals and waits
 * at it did not balance. */
void sync_block_begin(int threads);
void sync_block_end();
/* What a thread blocked in wait_for_wake waits for, for the deadlock report. */
void sync_describe_wait(int thread, char *out, size_t cap);
/* A bulk copy (`what`, issued by the running thread) of `bytes` into dst completing on mbarrier bar:
 * checked and recorded by the race check, written by `fill` now, then counted on bar's transaction
 * count, which may complete its phase (cudaemu_sync.cpp). */
void land_bulk_copy(uint64_t *bar, void *dst, size_t bytes, const char *what, const char *file, int line,
                    const std::function<void()> &fill);

enum { MAX_THREADS_PER_BLOCK = 1024, DEFAULT_DYNAMIC_SMEM = 48 * 1024,
       MAX_DYNAMIC_SMEM_OPTIN = 227 * 1024, EMULATED_SM_COUNT = 132 };

} /* namespace ddp_cudaemu */

#endif
