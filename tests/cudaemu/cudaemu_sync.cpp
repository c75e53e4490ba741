/* cudaemu_sync.cpp — named barriers (bar.sync / bar.arrive with an id), mbarriers, and the bulk
 * copies that complete on an mbarrier: the synchronisation of warp-specialised kernels, where
 * producer warps feed consumer warps without stopping the whole block.
 *
 * Owns each barrier's arrival counts, phases and transaction counts, and the waits they end: a
 * thread that must wait blocks (the scheduler's wait_for_wake) until the arrival or copy that
 * completes its barrier wakes it. What each arrival releases and each wait acquires goes to the
 * race check (race_release / race_acquire), so a read not ordered after the write it needs is a
 * hazard even in a fiber order where it happens to come later. A bulk copy lands when it is
 * issued (a tensor copy's data is cudaemu_tma.cpp's); its write is ordered only for the threads
 * that wait on its mbarrier (race_bulk_write).
 * Misuse the hardware leaves undefined or hangs on aborts with the kernel, block and call site:
 * ids outside 1..15, thread counts that are not whole warps or disagree, a named barrier left
 * half arrived at the block's end, more arrivals than a phase still needs, an mbarrier used before
 * mbarrier.init or re-initialised under a waiting thread, a bulk copy completing on an mbarrier
 * whose init no fence.mbarrier_init (or fence.proxy.async) of its thread followed, bulk copies
 * outside their memory spaces or misaligned. Owns those fences (the proxy fence's effect on
 * shared-memory writes is the race check's). Also owns each warpgroup's register count and the block's register pool
 * (setmaxnreg): the instruction takes whole warpgroups whose threads agree on it, an inc waits
 * until a dec has returned enough to the pool, and an inc nothing can satisfy is a deadlock, as it
 * hangs on a GPU. Must not schedule fibers itself. */
#include "cudaemu_internal.h"
#include "cudaemu_kernel.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <algorithm>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ddp_cudaemu {

namespace {

enum { NAMED_BARRIERS = 16 };

struct named_barrier_state {
    int threads = 0; /* the count the current round's first arrival gave */
    int arrived = 0;
    std::vector<int> waiting; /* threads at bar.sync */
    sync_clock released;
    const char *file = nullptr; /* the current round's first arrival */
    int line = 0;
};

struct mbarrier_state {
    int slot;                /* its clock slot for the bulk copies completing on it */
    uint32_t count, pending; /* arrivals per phase, and those the current phase still needs */
    int64_t tx;              /* bytes expected minus bytes landed, this phase */
    uint64_t phase;          /* phases completed so far */
    sync_clock released;     /* what the current phase's arrivals and copies released */
    sync_clock completed[2]; /* what the last completed phase of each parity released */
    std::vector<std::pair<int, unsigned>> waiting; /* thread, parity */
    const char *file;        /* its mbarrier.init */
    int line;
    int init_thread;         /* the thread that executed it, and that thread's init fences before it */
    uint32_t init_fences;
};

/* A warpgroup's registers a thread, and the setmaxnreg its threads are arriving at (all 128 must,
 * with the same action and count, before it takes effect). */
struct warpgroup_registers {
    int count = 0;
    int arrived = 0;
    bool inc = false;
    int target = 0;
    bool granting = false; /* every thread arrived at an inc the pool cannot yet grant */
    std::vector<int> waiting;
    const char *file = nullptr; /* the current setmaxnreg's first arrival */
    int line = 0;
};

enum wait_kind { WAIT_NONE, WAIT_NAMED, WAIT_MBARRIER, WAIT_SETMAXNREG };
struct thread_wait {
    wait_kind kind = WAIT_NONE;
    int id = 0;                 /* WAIT_NAMED; WAIT_SETMAXNREG: the warpgroup */
    const void *bar = nullptr;  /* WAIT_MBARRIER */
    unsigned parity = 0;
    sync_clock acquired;        /* what the wait acquires, handed over by whoever wakes it */
};

/* The barriers of the block running on this host thread. */
struct block_sync {
    named_barrier_state named[NAMED_BARRIERS];
    std::unordered_map<const void *, mbarrier_state> mbarriers;
    int slots_used = 0;
    std::vector<thread_wait> waits;
    std::vector<uint32_t> init_fences;          /* per thread: its fence.mbarrier_init and fence.proxy.async */
    std::vector<warpgroup_registers> registers; /* per warpgroup */
    int64_t register_pool = 0;                  /* registers returned by dec and not yet taken */
};
thread_local block_sync state;

[[noreturn]] __attribute__((format(printf, 4, 5))) void misuse(const char *what, const char *file, int line,
                                                                const char *fmt, ...)
{
    char detail[768];
    int n = snprintf(detail, sizeof detail, "at %s:%d: ", file, line);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail + n, sizeof detail - (size_t)n, fmt, ap);
    va_end(ap);
    die_in_kernel(what, detail);
}

/* Blocks the running thread `self` until woken, then acquires what its waker handed over. */
void block_until_woken(int self, const char *file, int line)
{
    wait_for_wake(file, line);
    thread_wait &w = state.waits[(size_t)self];
    race_acquire(w.acquired);
    w.kind = WAIT_NONE;
}

void check_mbarrier_address(const uint64_t *bar, const char *op, const char *file, int line)
{
    if ((uintptr_t)bar % 8 != 0 || !in_shared_memory(bar, 8))
        misuse("invalid mbarrier", file, line, "%s on %p, which is not 8 aligned bytes of this block's shared memory",
               op, (const void *)bar);
}

mbarrier_state &find_mbarrier(const uint64_t *bar, const char *op, const char *file, int line)
{
    check_mbarrier_address(bar, op, file, line);
    auto it = state.mbarriers.find(bar);
    if (it == state.mbarriers.end())
        misuse("mbarrier used before mbarrier.init", file, line,
               "%s on %p, which no mbarrier.init of this block set up (shared memory holds garbage at a block's "
               "start on a GPU)", op, (const void *)bar);
    return it->second;
}

/* The phase completes once every arrival and every expected byte is in: the threads waiting for its
 * parity wake, acquiring what it released. */
void complete_if_done(mbarrier_state &m)
{
    if (m.pending != 0 || m.tx != 0)
        return;
    const unsigned parity = (unsigned)(m.phase & 1);
    m.completed[parity] = m.released;
    m.released.epoch = 0; /* the next phase releases nothing yet */
    m.phase++;
    m.pending = m.count;
    size_t kept = 0;
    for (const auto &waiter : m.waiting) {
        if (waiter.second != parity) {
            m.waiting[kept++] = waiter;
            continue;
        }
        state.waits[(size_t)waiter.first].acquired = m.completed[parity];
        wake_thread(waiter.first);
    }
    m.waiting.resize(kept);
}

} // namespace

void sync_block_begin(int threads)
{
    for (named_barrier_state &nb : state.named)
        nb = named_barrier_state{};
    state.mbarriers.clear();
    state.slots_used = 0;
    state.waits.assign((size_t)threads, thread_wait{});
    state.init_fences.assign((size_t)threads, 0);
    /* what __launch_bounds__(threads, 1) lets ptxas give each thread, all of it owned at launch */
    const int warps = (threads + 31) / 32, at_launch = std::min(255, 65536 / (warps * 32)) / 8 * 8;
    state.registers.assign((size_t)(threads + 127) / 128, warpgroup_registers{});
    for (warpgroup_registers &wr : state.registers)
        wr.count = at_launch;
    state.register_pool = 0;
}

void sync_block_end()
{
    for (int id = 1; id < NAMED_BARRIERS; id++) {
        const named_barrier_state &nb = state.named[id];
        if (nb.arrived == 0)
            continue;
        char detail[512];
        snprintf(detail, sizeof detail, "named barrier %d, first arrived at %s:%d, holds %d of its %d threads' "
                 "arrivals when the block ends (the arrivals and waits at it do not balance)", id, nb.file, nb.line,
                 nb.arrived, nb.threads);
        die_in_kernel("unbalanced named barrier", detail);
    }
}

void named_barrier(int id, int threads, bool wait, const char *file, int line)
{
    const char *op = wait ? "bar.sync" : "bar.arrive";
    const int self = running_thread_index(op);
    const int warps_threads = (running_block_threads() + 31) / 32 * 32;
    if (id < 1 || id >= NAMED_BARRIERS)
        misuse("invalid named barrier", file, line, "%s %d: ids are 1..15 (0 is __syncthreads's)", op, id);
    if (threads <= 0 || threads % 32 != 0 || threads > warps_threads)
        misuse("invalid named barrier", file, line, "%s %d with %d threads: a multiple of 32, at most the block's %d",
               op, id, threads, warps_threads);
    named_barrier_state &nb = state.named[id];
    if (nb.arrived == 0) {
        nb.threads = threads;
        nb.file = file;
        nb.line = line;
    } else if (nb.threads != threads) {
        misuse("mismatched named barrier", file, line, "%s %d for %d threads, where the arrival at %s:%d said %d",
               op, id, threads, nb.file, nb.line, nb.threads);
    }
    race_release(nb.released);
    if (++nb.arrived < nb.threads) {
        if (!wait)
            return;
        nb.waiting.push_back(self);
        thread_wait &w = state.waits[(size_t)self];
        w.kind = WAIT_NAMED;
        w.id = id;
        block_until_woken(self, file, line);
        return;
    }
    const sync_clock all = nb.released;
    unsigned synced[MAX_THREADS_PER_BLOCK / 32] = {}; /* the lanes a bar.sync orders among themselves */
    if (wait)
        synced[self / 32] |= 1u << (self % 32);
    for (int t : nb.waiting) {
        state.waits[(size_t)t].acquired = all;
        synced[t / 32] |= 1u << (t % 32);
        wake_thread(t);
    }
    for (int w = 0; w < MAX_THREADS_PER_BLOCK / 32; w++)
        if (synced[w])
            race_lane_sync(w, synced[w]);
    nb = named_barrier_state{};
    if (wait)
        race_acquire(all);
}

void mbarrier_init(uint64_t *bar, unsigned count, const char *file, int line)
{
    const int self = running_thread_index("mbarrier.init");
    check_mbarrier_address(bar, "mbarrier.init", file, line);
    if (count < 1 || count >= (1u << 20))
        misuse("invalid mbarrier", file, line, "mbarrier.init with count %u (1 to 2^20 - 1)", count);
    race_access(bar, 8, RACE_WRITE, "mbarrier.init", file, line);
    auto it = state.mbarriers.find(bar);
    int slot;
    if (it != state.mbarriers.end()) {
        if (!it->second.waiting.empty())
            misuse("mbarrier re-initialised", file, line, "mbarrier.init on the mbarrier set up at %s:%d while "
                   "%zu threads wait on it", it->second.file, it->second.line, it->second.waiting.size());
        slot = it->second.slot;
    } else {
        if (state.slots_used == CLOCK_SLOTS - CLOCK_WARPS)
            misuse("too many mbarriers", file, line, "the emulator tracks %d mbarriers a block",
                   CLOCK_SLOTS - CLOCK_WARPS);
        slot = CLOCK_WARPS + state.slots_used++;
    }
    mbarrier_state &m = state.mbarriers[bar];
    m = mbarrier_state{slot, count, count, 0, 0, sync_clock{}, {sync_clock{}, sync_clock{}}, {}, file, line,
                       self, state.init_fences[(size_t)self]};
}

void fence_proxy_async()
{
    state.init_fences[(size_t)running_thread_index("fence.proxy.async")]++;
    race_proxy_fence();
}

void fence_mbarrier_init()
{
    state.init_fences[(size_t)running_thread_index("fence.mbarrier_init")]++;
}

uint64_t mbarrier_arrive(uint64_t *bar, unsigned count, unsigned tx_bytes, const char *file, int line)
{
    running_thread_index("mbarrier.arrive");
    mbarrier_state &m = find_mbarrier(bar, "mbarrier.arrive", file, line);
    race_access(bar, 8, RACE_ATOMIC, "mbarrier.arrive", file, line);
    if (count == 0 || count > m.pending)
        misuse("mbarrier over-arrival", file, line, "%u arrivals at the mbarrier set up at %s:%d, whose phase %llu "
               "needs only %u more (undefined on a GPU)", count, m.file, m.line, (unsigned long long)m.phase,
               m.pending);
    m.tx += tx_bytes;
    race_release(m.released);
    m.pending -= count;
    const uint64_t arrived_in = m.phase;
    complete_if_done(m);
    return arrived_in;
}

bool mbarrier_try_wait_parity(uint64_t *bar, unsigned parity, const char *file, int line)
{
    const int self = running_thread_index("mbarrier.try_wait");
    mbarrier_state &m = find_mbarrier(bar, "mbarrier.try_wait.parity", file, line);
    race_access(bar, 8, RACE_ATOMIC, "mbarrier.try_wait", file, line);
    parity &= 1u;
    if ((m.phase & 1) != parity) { /* the phase of that parity before the current one is complete */
        race_acquire(m.completed[parity]);
        return true;
    }
    m.waiting.emplace_back(self, parity);
    thread_wait &w = state.waits[(size_t)self];
    w.kind = WAIT_MBARRIER;
    w.bar = bar;
    w.parity = parity;
    block_until_woken(self, file, line);
    return true;
}

void cp_async_bulk(void *dst, const void *src, unsigned bytes, uint64_t *bar, const char *file, int line)
{
    running_thread_index("cp.async.bulk");
    if (bytes == 0 || bytes % 16 != 0 || (uintptr_t)dst % 16 != 0 || (uintptr_t)src % 16 != 0)
        misuse("misaligned cp.async.bulk", file, line, "%u bytes from %p to %p (a non-zero multiple of 16, both ends "
               "16-byte aligned)", bytes, src, dst);
    if (const char *problem = device_range_problem(src, bytes))
        misuse("cp.async.bulk outside device memory", file, line, "source %p..+%u is %s", src, bytes, problem);
    if (!in_shared_memory(dst, bytes))
        misuse("cp.async.bulk outside shared memory", file, line, "destination %p..+%u is not inside one "
               "shared-memory array of this block", dst, bytes);
    land_bulk_copy(bar, dst, bytes, "cp.async.bulk", file, line, [&] {
        global_race_copy_read(src, bytes, "cp.async.bulk", file, line);
        memcpy(dst, src, bytes);
    });
}

void land_bulk_copy(uint64_t *bar, void *dst, size_t bytes, const char *what, const char *file, int line,
                    const std::function<void()> &fill)
{
    mbarrier_state &m = find_mbarrier(bar, what, file, line);
    if (state.init_fences[(size_t)m.init_thread] == m.init_fences)
        misuse("mbarrier init not fenced", file, line, "%s completes on the mbarrier set up at %s:%d by thread %d, "
               "which executed no fence.mbarrier_init (or fence.proxy.async) after that mbarrier.init: on a GPU "
               "the copy's completion may not see the init", what, m.file, m.line, m.init_thread);
    race_bulk_write(dst, bytes, m.slot, m.released, what, file, line);
    fill();
    m.tx -= (int64_t)bytes;
    complete_if_done(m);
}

namespace {

/* Every warpgroup whose threads all arrived at an inc takes its registers if the pool now holds
 * them, and its threads go on. */
void grant_registers()
{
    for (warpgroup_registers &wr : state.registers) {
        const int64_t need = (int64_t)(wr.target - wr.count) * 128;
        if (!wr.granting || need > state.register_pool)
            continue;
        state.register_pool -= need;
        wr.count = wr.target;
        for (int t : wr.waiting) {
            state.waits[(size_t)t].acquired = sync_clock{};
            wake_thread(t);
        }
        wr.waiting.clear();
        wr.arrived = 0;
        wr.granting = false;
    }
}

} // namespace

void setmaxnreg(bool inc, int count, const char *file, int line)
{
    const char *op = inc ? "setmaxnreg.inc" : "setmaxnreg.dec";
    const int self = running_thread_index(op);
    if (emulated_cc_major() < 9)
        misuse("setmaxnreg on a GPU before Hopper", file, line, "%s: the emulated device is sm_80", op);
    if (running_block_threads() % 128 != 0)
        misuse("invalid setmaxnreg", file, line, "%s in a block of %d threads: it takes whole warpgroups", op,
               running_block_threads());
    if (count < 24 || count > 256 || count % 8 != 0)
        misuse("invalid setmaxnreg", file, line, "%s %d: the count is 24..256, a multiple of 8", op, count);
    warpgroup_registers &wr = state.registers[(size_t)self / 128];
    if (wr.arrived == 0) {
        if ((inc && count < wr.count) || (!inc && count > wr.count))
            misuse("invalid setmaxnreg", file, line, "%s %d in warpgroup %d, whose threads hold %d registers each "
                   "(undefined on a GPU)", op, count, self / 128, wr.count);
        wr.inc = inc, wr.target = count, wr.file = file, wr.line = line;
    } else if (wr.inc != inc || wr.target != count) {
        misuse("mismatched setmaxnreg", file, line, "%s %d in warpgroup %d, whose other threads arrived at %s %d at "
               "%s:%d (all 128 must execute the same one)", op, count, self / 128,
               wr.inc ? "setmaxnreg.inc" : "setmaxnreg.dec", wr.target, wr.file, wr.line);
    }
    thread_wait &w = state.waits[(size_t)self];
    w.kind = WAIT_SETMAXNREG;
    w.id = self / 128;
    if (++wr.arrived == 128) { /* the last arrival: the instruction takes effect */
        if (!inc) {
            state.register_pool += (int64_t)(wr.count - count) * 128;
            wr.count = count;
        }
        wr.granting = true;
        grant_registers(); /* a dec's at once, and whatever incs the pool can now serve */
        if (!wr.granting) {
            w.kind = WAIT_NONE;
            return;
        }
    }
    wr.waiting.push_back(self);
    block_until_woken(self, file, line);
}

void sync_describe_wait(int thread, char *out, size_t cap)
{
    const thread_wait &w = state.waits[(size_t)thread];
    if (w.kind == WAIT_SETMAXNREG) {
        const warpgroup_registers &wr = state.registers[(size_t)w.id];
        snprintf(out, cap, "%s %d in warpgroup %d (%d of 128 threads arrived; the block's register pool holds %lld, "
                 "the inc needs %lld)", wr.inc ? "setmaxnreg.inc" : "setmaxnreg.dec", wr.target, w.id, wr.arrived,
                 (long long)state.register_pool, (long long)(wr.target - wr.count) * 128);
        return;
    }
    if (w.kind == WAIT_NAMED) {
        const named_barrier_state &nb = state.named[w.id];
        snprintf(out, cap, "bar.sync %d (%d of %d threads arrived)", w.id, nb.arrived, nb.threads);
        return;
    }
    auto it = state.mbarriers.find(w.bar);
    if (w.kind != WAIT_MBARRIER || it == state.mbarriers.end()) {
        snprintf(out, cap, "a barrier wait");
        return;
    }
    const mbarrier_state &m = it->second;
    snprintf(out, cap, "mbarrier.try_wait.parity %u on the mbarrier set up at %s:%d (phase %llu still needs %u of "
             "%u arrivals and %lld transaction bytes)", w.parity, m.file, m.line, (unsigned long long)m.phase,
             m.pending, m.count, (long long)m.tx);
}

} /* namespace ddp_cudaemu */
