/* cudaemu_sched.cpp — runs an emulated kernel launch: blocks one after another, each block's
 * threads as fibers, __syncthreads and warp intrinsics as barriers and exchanges.
 *
 * Owns queueing a launch that passed launch_config_valid (cudaemu_launch.cpp; the grid runs when its
 * stream is drained), picking the next fiber in the order DDP_CUDA_EMU_ORDER names, shared memory
 * poisoning (0xFF = NaN before every block), releasing __syncthreads, holding the lanes that reach a
 * warp operation until it completes (the exchange itself and its checks are
 * cudaemu_warp_exchange.cpp's), blocking and waking the threads that wait at named barriers and
 * mbarriers (whose rules are cudaemu_sync.cpp's), telling the race check (cudaemu_race.cpp) which
 * thread runs and where the barriers fall, and the reports of divergent __syncthreads and of threads
 * left waiting forever, which abort the process with a message naming the kernel, block and threads:
 * on a GPU the same bug hangs or corrupts silently. Must not implement runtime API calls
 * (cudart_*.cpp). */
#include "cudaemu_sched.h"

#include "cudaemu_fiber.h"
#include "cudaemu_internal.h"
#include "cudaemu_kernel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

namespace ddp_cudaemu {

DDP_CUDAEMU_TLS const uint3 *cur_thread_idx;
DDP_CUDAEMU_TLS uint3 cur_block_idx;
DDP_CUDAEMU_TLS uint3 cur_block_dim;
DDP_CUDAEMU_TLS uint3 cur_grid_dim;

static DDP_CUDAEMU_TLS block_run *active;

[[noreturn]] static void die(const block_run &b, const char *what, const char *detail)
{
    fprintf(stderr, "cudaemu: %s in kernel %s, block (%u,%u,%u) of grid (%u,%u,%u), block (%u,%u,%u): %s\n",
            what, b.kernel, cur_block_idx.x, cur_block_idx.y, cur_block_idx.z, cur_grid_dim.x,
            cur_grid_dim.y, cur_grid_dim.z, cur_block_dim.x, cur_block_dim.y, cur_block_dim.z, detail);
    fflush(stderr);
    abort();
}

static emu_thread *running_thread(const char *intrinsic)
{
    if (!active || !active->running) {
        fprintf(stderr, "cudaemu: %s called outside a kernel\n", intrinsic);
        abort();
    }
    return active->running;
}

void die_in_kernel(const char *what, const char *detail)
{
    if (!active) {
        fprintf(stderr, "cudaemu: %s outside a kernel: %s\n", what, detail);
        abort();
    }
    die(*active, what, detail);
}

static void yield(emu_thread *t)
{
    fiber_switch(&t->ctx, &active->scheduler);
}

static void fiber_main(void *arg)
{
    emu_thread *t = static_cast<emu_thread *>(arg);
    active->thunk(active->args);
    /* a product never waited for leaves its accumulators undefined on a GPU; here they lived in the
     * kernel's frame, which is gone */
    if (!t->wgmma.pending.empty()) {
        char detail[256];
        snprintf(detail, sizeof detail, "a wgmma.mma_async issued at %s:%d (and %zu in all) was never waited for",
                 t->wgmma.pending.front().file, t->wgmma.pending.front().line, t->wgmma.pending.size());
        die_in_kernel("a thread exits with wgmma products in flight", detail);
    }
    t->state = EXITED;
    yield(t);
}

int syncthreads(block_reduce_kind kind, int predicate, const char *file, int line)
{
    emu_thread *t = running_thread("__syncthreads");
    t->state = AT_BARRIER;
    t->file = file;
    t->line = line;
    t->predicate = predicate;
    t->op = (warp_op_kind)kind; /* reused to check that all threads ask for the same reduction */
    yield(t);
    return t->result;
}

uint64_t warp_op(warp_op_kind kind, unsigned mask, uint64_t bits, int param, int width,
                 const char *file, int line)
{
    emu_thread *t = running_thread(warp_op_name(kind));
    t->state = AT_WARP;
    t->op = kind;
    t->mask = mask;
    t->in = bits;
    t->param = param;
    t->width = width;
    t->file = file;
    t->line = line;
    yield(t);
    return t->out;
}

unsigned active_mask()
{
    emu_thread *t = running_thread("__activemask");
    unsigned mask = 0;
    int base = t->linear / 32 * 32;
    for (int lane = 0; lane < 32 && base + lane < active->nthreads; lane++)
        if (active->threads[base + lane].state != EXITED)
            mask |= 1u << lane;
    return mask;
}

void *dynamic_shared()
{
    running_thread("dynamic shared memory");
    return active->dynamic_smem.data();
}

int running_thread_index(const char *intrinsic)
{
    return running_thread(intrinsic)->linear;
}

int running_block_threads()
{
    return active ? active->nthreads : 0;
}

void wait_for_wake(const char *file, int line)
{
    emu_thread *t = running_thread("a barrier wait");
    t->state = AT_SYNC;
    t->file = file;
    t->line = line;
    yield(t);
}

void wake_thread(int thread)
{
    emu_thread &t = active->threads[(size_t)thread];
    if (t.state == AT_SYNC)
        make_runnable(*active, t);
}

async_queue &running_async_queue(const char *intrinsic)
{
    return running_thread(intrinsic)->async;
}

wgmma_state &running_wgmma_state(const char *intrinsic)
{
    return running_thread(intrinsic)->wgmma;
}

char *dynamic_shared_window(size_t *bytes)
{
    *bytes = active ? active->dynamic_smem_bytes : 0;
    return active ? active->dynamic_smem.data() : nullptr;
}

bool in_shared_memory(const void *p, size_t bytes)
{
    if (!active)
        return false;
    const char *c = static_cast<const char *>(p), *dyn = active->dynamic_smem.data();
    if (c >= dyn && bytes <= active->dynamic_smem_bytes && c - dyn <= (ptrdiff_t)(active->dynamic_smem_bytes - bytes))
        return true;
    size_t count = 0;
    const memory_range *objects = static_shared_objects(&count);
    for (size_t i = 0; i < count; i++) {
        const char *base = static_cast<const char *>(objects[i].addr);
        if (c >= base && bytes <= objects[i].bytes && c - base <= (ptrdiff_t)(objects[i].bytes - bytes))
            return true;
    }
    return false;
}

/* ---- barrier and exchange release ---- */

void make_runnable(block_run &b, emu_thread &t)
{
    if (t.state == AT_WARP)
        b.warp_waiting[t.linear / 32]--;
    t.state = RUNNABLE;
    b.runnable++;
    b.warp_runnable[t.linear / 32] |= 1u << (t.linear % 32);
}

static void reset_cursor(block_run &b)
{
    b.cursor = b.order == ORDER_REVERSE ? b.nthreads - 1 : 0;
}

static void release_block_barrier(block_run &b)
{
    const emu_thread &first = b.threads[0];
    int count = 0, all = 1, any = 0;
    for (const emu_thread &t : b.threads) {
        if (t.line != first.line || strcmp(t.file, first.file) != 0 || t.op != first.op) {
            char detail[512];
            snprintf(detail, sizeof detail,
                     "thread %d waits at the __syncthreads at %s:%d but thread %d at the one at %s:%d "
                     "(every thread of a block must reach the same barrier)",
                     first.linear, first.file, first.line, t.linear, t.file, t.line);
            die(b, "divergent __syncthreads", detail);
        }
        count += t.predicate;
        all &= t.predicate;
        any |= t.predicate;
    }
    int result = first.op == (warp_op_kind)BLOCK_COUNT ? count
               : first.op == (warp_op_kind)BLOCK_AND  ? all
               : any;
    b.at_barrier = 0;
    race_barrier();
    for (emu_thread &t : b.threads) {
        t.result = result;
        make_runnable(b, t);
    }
    reset_cursor(b);
}

static void after_yield(block_run &b, emu_thread &t)
{
    b.runnable--;
    b.warp_runnable[t.linear / 32] &= ~(1u << (t.linear % 32));
    if (t.state == EXITED) {
        b.exited++;
        b.free_stacks.push_back(t.stack);
        b.warp_live[t.linear / 32] &= ~(1u << (t.linear % 32));
        check_warp_after_exit(b, t);
    } else if (t.state == AT_BARRIER) {
        if (++b.at_barrier == b.nthreads)
            release_block_barrier(b);
    } else if (t.state == AT_WARP) {
        b.warp_waiting[t.linear / 32]++;
        try_warp_exchange(b, t);
    }
}

/* ---- fiber order ---- */

static int pick_random(block_run &b)
{
    int nwarps = (b.nthreads + 31) / 32;
    if (b.current_warp < 0 || b.warp_runnable[b.current_warp] == 0) {
        int choice = (int)(next_random(&b.rng) % (uint64_t)nwarps); /* then the next warp with work */
        while (b.warp_runnable[choice] == 0)
            choice = (choice + 1) % nwarps;
        b.current_warp = choice;
    }
    unsigned lanes = b.warp_runnable[b.current_warp];
    for (int skip = (int)(next_random(&b.rng) % (uint64_t)__builtin_popcount(lanes)); skip > 0; skip--)
        lanes &= lanes - 1; /* drop the lowest runnable lanes: a uniformly chosen one remains lowest */
    return b.current_warp * 32 + __builtin_ctz(lanes);
}

static int pick_next(block_run &b)
{
    if (b.runnable == 0)
        return -1;
    if (b.order == ORDER_RANDOM)
        return pick_random(b);
    int step = b.order == ORDER_FORWARD ? 1 : -1;
    while (b.threads[b.cursor].state != RUNNABLE)
        b.cursor = (b.cursor + step + b.nthreads) % b.nthreads;
    return b.cursor;
}

static void report_stuck(block_run &b)
{
    char detail[2560];
    int n = snprintf(detail, sizeof detail, "%d of %d threads exited, the others wait forever:",
                     b.exited, b.nthreads);
    int shown = 0;
    for (const emu_thread &t : b.threads) {
        if (t.state == EXITED || n >= (int)sizeof detail - 600)
            continue;
        if (shown++ == 6) {
            n += snprintf(detail + n, sizeof detail - (size_t)n, " ...");
            break;
        }
        char what[256];
        if (t.state == AT_SYNC)
            sync_describe_wait(t.linear, what, sizeof what);
        else
            snprintf(what, sizeof what, "%s", t.state == AT_BARRIER ? "__syncthreads" : warp_op_name(t.op));
        n += snprintf(detail + n, sizeof detail - (size_t)n, " thread %d at %s (%s:%d);", t.linear, what, t.file,
                      t.line);
    }
    die(b, "deadlock", detail);
}

static void poison_shared(block_run &b, size_t smem_bytes)
{
    size_t count = 0;
    const memory_range *objects = static_shared_objects(&count);
    for (size_t i = 0; i < count; i++)
        memset(objects[i].addr, 0xff, objects[i].bytes);
    memset(b.dynamic_smem.data(), 0xff, smem_bytes);
}

static void run_block(block_run &b)
{
    b.runnable = b.nthreads;
    b.exited = b.at_barrier = 0;
    b.current_warp = -1;
    reset_cursor(b);
    for (int w = 0; w < (b.nthreads + 31) / 32; w++) {
        int lanes = b.nthreads - w * 32 < 32 ? b.nthreads - w * 32 : 32;
        b.warp_live[w] = lanes == 32 ? 0xffffffffu : (1u << lanes) - 1u;
        b.warp_runnable[w] = b.warp_live[w];
        b.warp_waiting[w] = 0;
    }
    b.free_stacks.clear();
    race_block_begin(); /* nothing of the previous block races with this one */
    sync_block_begin(b.nthreads);
    for (int i = b.nthreads - 1; i >= 0; i--) {
        b.threads[i].state = RUNNABLE;
        b.threads[i].stack = -1;
        b.threads[i].async.copies.clear(); /* copies nobody waited for die with their block */
        b.threads[i].async.committed = 0;
        b.threads[i].wgmma = wgmma_state{}; /* so do unwaited products */
        b.free_stacks.push_back(i);
    }
    for (int i; (i = pick_next(b)) >= 0;) {
        emu_thread &t = b.threads[i];
        if (t.stack < 0) {
            t.stack = b.free_stacks.back();
            b.free_stacks.pop_back();
            fiber_prepare(&t.ctx, t.stack, fiber_main, &t);
        }
        b.running = &t;
        cur_thread_idx = &t.tid;
        race_enter(i);
        fiber_switch(&b.scheduler, &t.ctx);
        race_leave();
        b.running = nullptr;
        after_yield(b, t);
    }
    if (b.exited != b.nthreads)
        report_stuck(b);
    sync_block_end();
    for (int i = 0; i < b.nthreads; i++) /* copies nobody waited for land nowhere */
        for (const async_copy &c : b.threads[i].async.copies)
            race_async_abandon(c.dst, c.bytes);
}

/* ---- launch ---- */

/* The fiber order of a grid: a different random draw per launch. */
static bool parse_order(block_run &b, const char *kernel)
{
    static thread_local uint64_t launch_count;
    emu_order o;
    if (!read_emu_order(&o, kernel))
        return false;
    b.order = o.kind;
    b.rng = o.kind == ORDER_RANDOM ? o.seed * 0x2545f4914f6cdd1dull + launch_count++ : 0;
    return true;
}

/* Runs every block of a queued grid, on the thread that drains its stream. */
static void run_grid(const char *name, dim3 grid, dim3 block, size_t smem_bytes, kernel_thunk thunk,
                     const void *args, size_t args_bytes)
{
    static thread_local block_run b;
    if (!parse_order(b, name))
        abort(); /* checked at launch: the environment changed under a running program */
    b.kernel = name;
    b.thunk = thunk;
    b.args = args;
    b.nthreads = (int)(block.x * block.y * block.z);
    b.threads.resize((size_t)b.nthreads);
    for (int i = 0; i < b.nthreads; i++) {
        emu_thread &t = b.threads[(size_t)i];
        t.linear = i;
        t.tid = make_uint3((unsigned)i % block.x, (unsigned)i / block.x % block.y,
                           (unsigned)i / (block.x * block.y));
    }
    b.dynamic_smem.resize(smem_bytes > 0 ? smem_bytes : 1);
    b.dynamic_smem_bytes = smem_bytes;
    const bool checked = race_grid_checked(name);
    race_grid_begin(b.dynamic_smem.data(), smem_bytes, checked);
    fiber_stacks_reserve(b.nthreads, name);
    cur_grid_dim = make_uint3(grid.x, grid.y, grid.z);
    cur_block_dim = make_uint3(block.x, block.y, block.z);
    active = &b;
    global_race_grid_begin(checked);
    const memory_range visible[] = {{const_cast<void *>(args), args_bytes},
                                    {b.threads.data(), b.threads.size() * sizeof b.threads[0]}};
    kernel_memory_grid_begin(visible, 2); /* its arguments, and what threadIdx reads */
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                cur_block_idx = make_uint3(x, y, z);
                poison_shared(b, smem_bytes);
                run_block(b);
            }
    active = nullptr;
}

void launch(const char *name, const void *fn, dim3 grid, dim3 block, size_t smem_bytes,
            cudaStream_t stream, kernel_thunk thunk, const void *args, size_t args_bytes, kernel_thunk release)
{
    if (active) {
        fprintf(stderr, "cudaemu: kernel %s launched from device code (not supported)\n", name);
        abort();
    }
    emu_order order; /* a malformed DDP_CUDA_EMU_ORDER fails the launch, as a bad configuration does */
    if (!launch_config_valid(name, fn, grid, block, smem_bytes, stream) || !read_emu_order(&order, name)) {
        release(args);
        return;
    }
    cudaError_t err = enqueue(stream, name, [=] {
        run_grid(name, grid, block, smem_bytes, thunk, args, args_bytes);
        release(args);
    }, 0, name, nullptr);
    if (err != cudaSuccess)
        release(args);
}

} /* namespace ddp_cudaemu */
