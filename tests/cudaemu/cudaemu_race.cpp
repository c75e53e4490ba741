/* cudaemu_race.cpp — the shared-memory race check: what compute-sanitizer's racecheck finds on a
 * GPU, found on every emulated launch.
 *
 * A hazard is two accesses to the same shared-memory byte by different threads, at least one a
 * write, that nothing orders: RAW (a read of another thread's write), WAR (a write over another
 * thread's read), WAW. Between warps, what orders them is happens-before, tracked with vector
 * clocks, one per thread with a slot per warp (each warp's own slot counts its releases): a
 * __syncthreads orders everything before it (each barrier starts a new epoch, in which every byte
 * is fresh and every clock restarts); a release (an arrival at a named barrier or an mbarrier,
 * cudaemu_sync.cpp) hands the arriving thread's clock and its warp's count to the barrier, and an
 * acquire (the bar.sync that completes, an mbarrier wait that sees its phase complete) joins them
 * into the waiting thread's alone (a lane sync, below, passes them on to the other lanes). Every
 * byte remembers its last write (the writer's clock slot and value) and, per warp, the clock of
 * that warp's last read, so two accesses are compared whichever runs first (cudaemu_race_shadow.h
 * stores those records: one for the four bytes of a granule while they agree, as they do where every
 * access covers whole floats).
 * A cp.async.bulk's write belongs to the mbarrier it completes on: each mbarrier has its own clock
 * slot for the copies landing through it, so only a wait on that mbarrier orders them (a wait on
 * another stage's mbarrier does not). Atomics are not hazards with each other; with plain accesses
 * only a __syncthreads orders them (no kernel here mixes them with finer synchronisation).
 * The lanes of one warp (racecheck compares them since Volta's independent thread scheduling): each
 * warp counts its lane syncs (a __syncwarp, or a bar.sync, completed; race_lane_sync) and keeps the
 * lanes of each, each thread remembers the last it took part in, and each access the count before
 * it. Two lanes' accesses are ordered when a chain of later syncs leads from the earlier access's
 * lane to the later one's (each sync holding a lane of the one before: a partial mask orders only
 * its own lanes), or when the later access's thread acquired a release that spoke for the earlier
 * one's lane: a release (an arrival) records its lane and that lane's last sync, and orders its
 * own lane's earlier accesses and those of the lanes a chain had led to it by that sync only.
 * That applies to accesses of another warp too (the clocks say a release came after the access;
 * one must speak for its lane), so a lane's arrival that publishes its warp's stores, or frees a
 * buffer its warp read, with no __syncwarp before it is a race whatever order the lanes ran in.
 * A write asks each lane of the byte's last reading warp that read it in the last read's interval
 * (a number each warp takes anew at each of its releases and lane syncs, so the group's reads share
 * a clock and lane syncs: all of a warp's lanes reading a value they share, before any of them syncs
 * or releases), whichever lane of them read last. Lenient, on purpose: earlier reads are asked by
 * their warps' clocks only.
 * Proxies: a wgmma's operand reads and a bulk copy's writes go through the async proxy, which sees
 * a byte's last generic write (a store, a cp.async) only after its writer's fence.proxy.async
 * (race_proxy_fence) and only where that fence happens before the async access (a fence takes
 * effect in its own thread: a barrier must pass it on); without such a fence the async access is a
 * proxy hazard, whatever barrier orders the two accesses themselves. The first fence after the
 * write is the one asked (a later one of the same thread happens before the access only if it
 * does), and is ordered like an access of its thread at its clock. This state outlives the epochs
 * (a barrier orders threads, not proxies) and ends with its block.
 *
 * Where the accesses come from: the kernels' own loads and stores are compiled with
 * -fsanitize=thread (the emulated build's kernel libraries only, never linked with the TSan
 * runtime), which calls the __tsan_* entry points defined here before each access; atomics
 * (cudaemu_kernel.h), ldmatrix's row reads and cp.async's writes (cudaemu_tensor.cpp: once when
 * issued, as the copy may land at any moment from then on, and again when the wait_group lands it)
 * report themselves through race_access. Between the two a cp.async is in flight, whatever barriers
 * pass: its destination bytes remember its thread, and any access to them by anyone (the issuing
 * thread included) before the landing is a hazard too, as the copy may land before, during or after
 * it (a buffer refilled while a wgmma issued earlier still reads it, a tile read before its wait).
 * The same entry points check, in a kernel, that an access the compiler made at its type's alignment
 * is so aligned (a GPU faults on a misaligned address; x86 does not).
 * A hazard aborts the process (cudaemu_race_report.cpp words the report: the kernel, block, kind,
 * shared-memory offset and both threads). DDP_CUDA_EMU_RACE_GRIDS=N limits both race checks to each
 * kernel's first N grids (a long job's later steps repeat those launches; the clocks are kept
 * either way, the shadow only while checking). The same ordering serves device memory between one
 * block's threads (cudaemu_global_race.cpp keeps its own shadow): race_now stamps an access, race_ordered
 * says whether a stamped one happens before the running thread's. The state, and whether two lanes'
 * accesses are ordered, are cudaemu_race_order.h's; the shadow's storage is cudaemu_race_shadow.h's.
 * Must not schedule fibers. */
#include "cudaemu_internal.h"
#include "cudaemu_kernel.h"
#include "cudaemu_race_order.h"
#include "cudaemu_race_report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace ddp_cudaemu {

namespace {

thread_local race_state state;
DDP_CUDAEMU_TLS race_state *running; /* &state, set only while a fiber of a block runs */

void setup_statics(race_state &s)
{
    size_t count = 0;
    const memory_range *objects = static_shared_objects(&count);
    for (size_t i = 0; i < count; i++)
        s.statics.push_back(shadow_range{static_cast<const char *>(objects[i].addr), objects[i].bytes, false});
    shadow_allocate(s.static_store, s.statics);
    std::sort(s.statics.begin(), s.statics.end(),
              [](const shadow_range &a, const shadow_range &b) { return a.lo < b.lo; });
    if (!s.statics.empty()) {
        s.static_lo = s.statics.front().lo;
        s.static_hi = s.statics.back().lo + s.statics.back().bytes;
    }
    s.ready = true;
}

/* The next epoch: every clock restarts (a warp's own at 1, so nobody has seen its accesses; the
 * threads' on first use); on wrap-around every shadow byte and thread clock is forgotten (epoch 0
 * is nobody's). */
void next_epoch(race_state &s)
{
    memset(s.copy_clock, 0, sizeof s.copy_clock);
    memset(s.last_partial, 0, sizeof s.last_partial);
    memset(s.joined, 0, sizeof s.joined);
    memset(s.own_seen, 0, sizeof s.own_seen);
    memset(s.diverged, 0, sizeof s.diverged);
    memset(s.last_release, 0, sizeof s.last_release);
    for (auto &r : s.releases)
        r.clear();
    for (auto &l : s.sync_lanes)
        l.clear();
    for (int w = 0; w < CLOCK_WARPS; w++) {
        s.own_clock[w] = 1;
        s.interval[w] = (uint32_t)w + 1; /* a byte's 0: none */
    }
    s.intervals = CLOCK_WARPS;
    if (++s.epoch != 0)
        return;
    shadow_forget(s.static_store);
    shadow_forget(s.dynamic_store);
    for (sync_clock &c : s.seen)
        c.epoch = 0;
    s.epoch = 1;
}

inline const shadow_range *range_of(race_state &s, const char *p)
{
    if ((size_t)(p - s.dynamic.lo) < s.dynamic.bytes)
        return &s.dynamic;
    if (p < s.static_lo || p >= s.static_hi)
        return nullptr;
    if (s.last_static && (size_t)(p - s.last_static->lo) < s.last_static->bytes)
        return s.last_static; /* a kernel's accesses mostly stay in one array */
    auto it = std::upper_bound(s.statics.begin(), s.statics.end(), p,
                               [](const char *q, const shadow_range &r) { return q < r.lo; });
    if (it == s.statics.begin() || (size_t)(p - (it - 1)->lo) >= (it - 1)->bytes)
        return nullptr;
    return s.last_static = &*(it - 1);
}

/* The warps among `readers` whose last read of cell c the clocks `seen` do not cover. */
inline uint32_t unordered_readers(const cell_ref &c, uint32_t readers, const uint32_t *seen)
{
    uint32_t late = 0;
    for (uint32_t left = readers; left; left &= left - 1) {
        const int w = __builtin_ctz(left);
        if (c.clock[(size_t)w * c.stride] > seen[w])
            late |= 1u << w;
    }
    return late;
}

/* An async-proxy access of the running thread to byte p of r, whose last generic write thread
 * `writer` made after `fences` of its fence.proxy.async: the next one must happen before it. */
void check_proxy_fence(const shadow_range &r, const char *p, int writer, uint32_t fences, race_access_kind how,
                       const char *what, const char *file, int line)
{
    const race_state &s = *running;
    if (s.proxy_fences[writer] == fences)
        report_proxies(r, p, writer, false, how, what, file, line);
    const fence_record &f = s.fence_log[writer][fences];
    if (writer != s.thread && f.epoch == s.epoch && !lane_ordered(s, writer, f.clock, f.gen))
        report_proxies(r, p, writer, true, how, what, file, line);
}

/* The accesses of the running thread to n bytes of one object (a cell at a time: a whole granule or
 * a byte, cudaemu_race_shadow.h), ordered after what its clock has seen (and, against other lanes'
 * accesses, lane_ordered); a write is recorded under clock slot `slot` (its warp, or an mbarrier's
 * for a bulk copy). A bulk copy's write, and a read ASYNC_READ (a wgmma's), go through the async
 * proxy: the byte's last generic write must be fenced by its writer. A hazard aborts, else each cell
 * remembers them. A cell last touched in an older epoch starts afresh, but for its last generic
 * write. */
template <race_access_kind HOW, bool ASYNC_READ>
void access_bytes(const shadow_range &r, const char *p, size_t n, int slot, const char *what, const char *file,
                  int line, const void *pc)
{
    race_state &s = *running;
    const int self = s.thread, warp = self / 32;
    const bool async = ASYNC_READ || slot >= CLOCK_WARPS;
    const uint32_t *seen = seen_by(s, self);
    const uint32_t bit = 1u << warp, now = slot == warp ? s.own_clock[warp] : s.copy_clock[slot];
    const uint32_t gen = lane_syncs(s, warp);
    const uint16_t me = (uint16_t)(self + 1);
    const uint32_t lane_bit = 1u << (self % 32), interval = s.interval[warp];
    lanes_seen ordered{-1, 0, 0, 0};
    for_each_cell(r, (size_t)(p - r.lo), n, [&](size_t off, const cell_ref &c) {
        shadow_cell *b = c.cell;
        const char *at = r.lo + off;
        if (b->in_flight)
            report_in_flight(r, at, b->in_flight - 1, HOW, what, file, line, pc);
        if (b->epoch != s.epoch) {
            const shadow_cell proxies = *b;
            *b = shadow_cell{};
            b->epoch = s.epoch;
            b->generic_block = proxies.generic_block;
            b->generic_fences = proxies.generic_fences;
            b->generic_writer = proxies.generic_writer;
        }
        if (async && b->generic_writer && b->generic_block == s.block)
            check_proxy_fence(r, at, b->generic_writer - 1, b->generic_fences, HOW, what, file, line);
        if (b->writer != 0 && b->write_slot != warp && seen[b->write_slot] < b->write_clock)
            report(r, at, HOW == RACE_READ ? "RAW" : "WAW", b->writer - 1, (b->writer - 1) / 32,
                   b->write_slot >= CLOCK_WARPS ? "wrote it through a cp.async.bulk it issued" : "wrote it", HOW,
                   what, file, line, pc);
        if (b->writer != 0 && b->writer != me && b->write_slot < CLOCK_WARPS &&
            !lane_ordered(s, b->writer - 1, b->write_clock, b->write_gen))
            report_lanes(r, at, HOW == RACE_READ ? "RAW" : "WAW", b->writer - 1, true, HOW, what, file, line, pc);
        if (HOW == RACE_READ) {
            if (b->atomics & ~bit)
                report(r, at, "RAW", b->reader - 1, __builtin_ctz(b->atomics & ~bit), "updated it atomically", HOW,
                       what, file, line, pc);
            b->reader_lanes = (b->read_interval == interval ? b->reader_lanes : 0u) | lane_bit;
            b->read_interval = interval;
            b->readers |= bit;
            b->reader = me;
            b->read_gen = gen;
            c.clock[(size_t)warp * c.stride] = now;
            return;
        }
        if (const uint32_t late = unordered_readers(c, b->readers & ~bit, seen))
            report(r, at, "WAR", b->reader - 1, __builtin_ctz(late), "read it", HOW, what, file, line, pc);
        if (HOW == RACE_WRITE && b->reader_lanes) {
            const int rw = (b->reader - 1) / 32;
            const uint32_t others = b->reader_lanes & ~(rw == warp ? lane_bit : 0u); /* mostly none */
            const int lane_late = others ? unordered_lane(s, rw, others, c.clock[(size_t)rw * c.stride],
                                                          b->read_gen, ordered)
                                         : -1;
            if (lane_late >= 0)
                report_lanes(r, at, "WAR", lane_late, false, HOW, what, file, line, pc);
        }
        if (HOW == RACE_WRITE && (b->atomics & ~bit))
            report(r, at, "WAW", b->reader - 1, __builtin_ctz(b->atomics & ~bit), "updated it atomically", HOW, what,
                   file, line, pc);
        if (HOW == RACE_WRITE) { /* every read is ordered before it: the next access need only follow it */
            b->generic_writer = async ? 0 : me;
            b->generic_block = s.block;
            b->generic_fences = s.proxy_fences[self];
            b->writer = me;
            b->write_slot = (uint8_t)slot;
            b->write_clock = now;
            b->write_gen = slot == warp ? gen : 0;
            b->readers = 0;
            b->reader_lanes = 0;
        } else {
            b->atomics |= bit;
            b->reader = me;
            b->reader_lanes = 0;
        }
    });
}

void access_range(const shadow_range &r, const char *p, size_t n, race_access_kind how, int slot, const char *what,
                  const char *file, int line, const void *pc)
{
    if (how == RACE_READ)
        access_bytes<RACE_READ, false>(r, p, n, slot, what, file, line, pc);
    else if (how == RACE_ASYNC_READ)
        access_bytes<RACE_READ, true>(r, p, n, slot, what, file, line, pc);
    else if (how == RACE_WRITE)
        access_bytes<RACE_WRITE, false>(r, p, n, slot, what, file, line, pc);
    else
        access_bytes<RACE_ATOMIC, false>(r, p, n, slot, what, file, line, pc);
}

/* An access of the running thread; slot -1: its warp's. */
__attribute__((noinline)) void check(const char *p, size_t bytes, race_access_kind how, int slot, const char *what,
                                     const char *file, int line, const void *pc)
{
    if (!running->checking)
        return;
    if (slot < 0)
        slot = running->thread / 32;
    const shadow_range *r = range_of(*running, p);
    if (r && (size_t)(p - r->lo) + bytes <= r->bytes) { /* the usual case: inside one object */
        access_range(*r, p, bytes, how, slot, what, file, line, pc);
        return;
    }
    if (const memory_range *guard = static_shared_guard(p, bytes)) /* past a static array's end */
        report_outside_shared(*guard, p, bytes, how == RACE_WRITE || how == RACE_ATOMIC, what, file, line, pc);
    if (!r && (bytes == 1 || !range_of(*running, p + bytes - 1)))
        return; /* not shared memory: global memory, a fiber's stack */
    for (size_t i = 0; i < bytes; i++) /* straddling an object's edge */
        if ((r = range_of(*running, p + i)) != nullptr)
            access_range(*r, p + i, 1, how, slot, what, file, line, pc);
}

/* Marks n bytes from p as the destination of the running thread's cp.async in flight (mark) or as
 * none's (0). */
void mark_in_flight(race_state &s, const char *p, size_t n, uint16_t mark)
{
    const auto set = [mark](size_t, const cell_ref &c) { c.cell->in_flight = mark; };
    const shadow_range *r = range_of(s, p);
    if (r && (size_t)(p - r->lo) + n <= r->bytes) { /* the usual case: inside one object */
        for_each_cell(*r, (size_t)(p - r->lo), n, set);
        return;
    }
    for (size_t i = 0; i < n; i++)
        if ((r = range_of(s, p + i)) != nullptr)
            for_each_cell(*r, (size_t)(p + i - r->lo), 1, set);
}

/* The hooks' fast path, inlined into each: most accesses are to global memory or a stack. */
inline bool maybe_shared(const void *addr, size_t bytes)
{
    const race_state *s = running;
    const char *p = static_cast<const char *>(addr);
    return s && ((size_t)(p - s->dynamic.lo) < s->dynamic.bytes ||
                 (p + bytes > s->static_lo && p < s->static_hi));
}

} // namespace

/* DDP_CUDA_EMU_RACE_GRIDS: the grids of each kernel checked, from its first; -1 (unset): all. */
static long race_grid_limit()
{
    static const long limit = [] {
        const char *v = getenv("DDP_CUDA_EMU_RACE_GRIDS");
        if (!v)
            return -1L;
        char *end = nullptr;
        const long n = strtol(v, &end, 10);
        if (end == v || *end != '\0' || n < 0) {
            fprintf(stderr, "cudaemu: DDP_CUDA_EMU_RACE_GRIDS=%s: expected a number of grids (0 or more)\n", v);
            abort();
        }
        return n;
    }();
    return limit;
}

bool race_grid_checked(const char *kernel)
{
    const long limit = race_grid_limit();
    if (limit < 0)
        return true;
    static std::mutex lock; /* several host threads drain streams */
    static std::unordered_map<std::string, long> grids;
    const std::lock_guard<std::mutex> hold(lock);
    return grids[kernel]++ < limit;
}

void race_grid_begin(void *dynamic_smem, size_t bytes, bool checked)
{
    race_state &s = state;
    if (!s.ready)
        setup_statics(s);
    s.checking = checked;
    s.dynamic = shadow_dynamic(s.dynamic_store, static_cast<const char *>(dynamic_smem), bytes);
}

void race_barrier() { next_epoch(state); }

void race_block_begin()
{
    race_state &s = state;
    next_epoch(s);
    s.block++;
    memset(s.proxy_fences, 0, sizeof s.proxy_fences);
}

void race_proxy_fence()
{
    if (!running)
        return;
    race_state &s = *running;
    const int self = s.thread, warp = self / 32;
    std::vector<fence_record> &log = s.fence_log[self];
    const uint32_t n = s.proxy_fences[self]++;
    if (log.size() <= n)
        log.resize(n + 1);
    log[n] = fence_record{s.epoch, s.own_clock[warp], lane_syncs(s, warp)};
}

void race_lane_sync(int warp, unsigned lanes)
{
    race_state &s = state;
    s.sync_lanes[warp].push_back(lanes);
    const uint32_t sync = lane_syncs(s, warp);
    s.interval[warp] = ++s.intervals;
    if (lanes != 0xffffffffu)
        s.last_partial[warp] = sync;
    for (unsigned left = lanes; left; left &= left - 1)
        s.joined[warp * 32 + __builtin_ctz(left)] = sync;
    if (!(s.diverged[warp] & lanes))
        return; /* the lanes already agree on what they acquired */
    s.diverged[warp] = lanes == 0xffffffffu ? 0u : s.diverged[warp] | lanes; /* a partial sync sets its lanes apart */
    sync_clock all{}; /* empty */
    uint32_t own = 0;
    all.epoch = s.epoch;
    for (unsigned left = lanes; left; left &= left - 1) { /* what any of them acquired, all now have */
        const int t = warp * 32 + __builtin_ctz(left);
        const uint32_t *c = seen_by(s, t);
        for (int i = 0; i < CLOCK_SLOTS; i++)
            all.c[i] = std::max(all.c[i], c[i]);
        own = std::max(own, s.own_seen[t]);
    }
    for (unsigned left = lanes; left; left &= left - 1) {
        const int t = warp * 32 + __builtin_ctz(left);
        s.seen[(size_t)t] = all;
        s.own_seen[t] = own;
    }
}

void race_enter(int thread)
{
    state.thread = thread;
    running = &state;
}

void race_leave() { running = nullptr; }

int race_running_lane() { return running ? running->thread % 32 : -1; }

int race_running_thread() { return running ? running->thread : -1; }

race_stamp race_now()
{
    if (!running)
        return race_stamp{};
    const race_state &s = *running;
    const int warp = s.thread / 32;
    return race_stamp{s.epoch, s.own_clock[warp], lane_syncs(s, warp), (uint32_t)s.thread + 1};
}

bool race_ordered(race_stamp earlier)
{
    race_state *s = running;
    if (!s || earlier.thread == 0 || earlier.epoch != s->epoch || earlier.thread == (uint32_t)s->thread + 1)
        return true;
    seen_by(*s, s->thread); /* its clock, valid in this epoch */
    return lane_ordered(*s, (int)earlier.thread - 1, earlier.clock, earlier.gen);
}

void race_async_issue(const void *dst, size_t bytes, const char *file, int line)
{
    race_access(dst, bytes, RACE_WRITE, "cp.async", file, line);
    if (running && running->checking)
        mark_in_flight(*running, static_cast<const char *>(dst), bytes, (uint16_t)(running->thread + 1));
}

void race_async_land(const void *dst, size_t bytes, const char *what, const char *file, int line)
{
    if (running && running->checking)
        mark_in_flight(*running, static_cast<const char *>(dst), bytes, 0);
    race_access(dst, bytes, RACE_WRITE, what, file, line);
}

void race_async_abandon(const void *dst, size_t bytes)
{
    if (state.ready)
        mark_in_flight(state, static_cast<const char *>(dst), bytes, 0);
}

void race_release(sync_clock &into)
{
    if (!running)
        return;
    race_state &s = *running;
    const int warp = s.thread / 32;
    const uint32_t *mine = seen_by(s, s.thread);
    fresh_in_epoch(into, s.epoch);
    for (int i = 0; i < CLOCK_SLOTS; i++)
        into.c[i] = std::max(into.c[i], mine[i]);
    into.c[warp] = std::max(into.c[warp], s.own_clock[warp]);
    s.releases[warp].push_back(release_record{(uint8_t)(s.thread % 32), s.joined[s.thread]}); /* this one */
    s.last_release[s.thread] = s.own_clock[warp];
    s.own_clock[warp]++; /* the warp's later accesses are not part of this release */
    s.interval[warp] = ++s.intervals;
}

void race_acquire(const sync_clock &from)
{
    if (!running || from.epoch != running->epoch)
        return; /* a release before the last __syncthreads: that barrier ordered it already */
    race_state &s = *running;
    const int warp = s.thread / 32;
    uint32_t *mine = seen_by(s, s.thread);
    for (int i = 0; i < CLOCK_SLOTS; i++)
        mine[i] = std::max(mine[i], from.c[i]);
    s.own_seen[s.thread] = std::max(s.own_seen[s.thread], from.c[warp]);
    s.diverged[warp] |= 1u << (s.thread % 32);
}

void race_bulk_write(const void *dst, size_t bytes, int slot, sync_clock &phase, const char *what, const char *file,
                     int line)
{
    if (!running)
        return;
    race_state &s = *running;
    s.copy_clock[slot]++;
    if (maybe_shared(dst, bytes))
        check(static_cast<const char *>(dst), bytes, RACE_WRITE, slot, what, file, line, nullptr);
    fresh_in_epoch(phase, s.epoch);
    phase.c[slot] = std::max(phase.c[slot], s.copy_clock[slot]);
}

void race_access(const void *p, size_t bytes, race_access_kind how, const char *what, const char *file, int line)
{
    if (maybe_shared(p, bytes))
        check(static_cast<const char *>(p), bytes, how, -1, what, file, line, nullptr);
}

} /* namespace ddp_cudaemu */

/* ---- the entry points -fsanitize=thread calls (the kernels' plain loads and stores) ---- */
/* The aligned ones are called where the access's type promises alignment to its size; in a kernel
 * (a block's fiber running) that is checked, as a GPU requires it. The compiler may split an
 * aggregate access into smaller ones first, so this sees only what survives (load_pack checks its
 * packs itself). */
using ddp_cudaemu::RACE_READ;
using ddp_cudaemu::RACE_WRITE;
#define DDP_RACE_HOOK(name, bytes, how, aligned)                                                  \
    extern "C" void name(void *p)                                                                 \
    {                                                                                             \
        if (aligned && ((uintptr_t)p & (bytes - 1)) != 0 && ddp_cudaemu::running)                 \
            ddp_cudaemu::report_misaligned(p, bytes, how, __builtin_return_address(0));           \
        if (ddp_cudaemu::maybe_shared(p, bytes)) {                                                \
            if (ddp_cudaemu::running->checking)                                                   \
                ddp_cudaemu::check(static_cast<const char *>(p), bytes, how, -1, nullptr, nullptr, \
                                   0, __builtin_return_address(0));                               \
        } else if (ddp_cudaemu::running)                                                            \
            ddp_cudaemu::global_race_access(p, bytes, how == RACE_WRITE, __builtin_return_address(0)); \
    }
DDP_RACE_HOOK(__tsan_read1, 1, RACE_READ, false)
DDP_RACE_HOOK(__tsan_read2, 2, RACE_READ, true)
DDP_RACE_HOOK(__tsan_read4, 4, RACE_READ, true)
DDP_RACE_HOOK(__tsan_read8, 8, RACE_READ, true)
DDP_RACE_HOOK(__tsan_read16, 16, RACE_READ, true)
DDP_RACE_HOOK(__tsan_write1, 1, RACE_WRITE, false)
DDP_RACE_HOOK(__tsan_write2, 2, RACE_WRITE, true)
DDP_RACE_HOOK(__tsan_write4, 4, RACE_WRITE, true)
DDP_RACE_HOOK(__tsan_write8, 8, RACE_WRITE, true)
DDP_RACE_HOOK(__tsan_write16, 16, RACE_WRITE, true)
DDP_RACE_HOOK(__tsan_unaligned_read2, 2, RACE_READ, false)
DDP_RACE_HOOK(__tsan_unaligned_read4, 4, RACE_READ, false)
DDP_RACE_HOOK(__tsan_unaligned_read8, 8, RACE_READ, false)
DDP_RACE_HOOK(__tsan_unaligned_read16, 16, RACE_READ, false)
DDP_RACE_HOOK(__tsan_unaligned_write2, 2, RACE_WRITE, false)
DDP_RACE_HOOK(__tsan_unaligned_write4, 4, RACE_WRITE, false)
DDP_RACE_HOOK(__tsan_unaligned_write8, 8, RACE_WRITE, false)
DDP_RACE_HOOK(__tsan_unaligned_write16, 16, RACE_WRITE, false)
#undef DDP_RACE_HOOK

extern "C" void __tsan_read_range(void *p, unsigned long bytes)
{
    if (ddp_cudaemu::maybe_shared(p, bytes))
        ddp_cudaemu::check(static_cast<const char *>(p), bytes, RACE_READ, -1, nullptr, nullptr, 0,
                           __builtin_return_address(0));
    else if (ddp_cudaemu::running)
        ddp_cudaemu::global_race_access(p, bytes, false, __builtin_return_address(0));
}
extern "C" void __tsan_write_range(void *p, unsigned long bytes)
{
    if (ddp_cudaemu::maybe_shared(p, bytes))
        ddp_cudaemu::check(static_cast<const char *>(p), bytes, RACE_WRITE, -1, nullptr, nullptr, 0,
                           __builtin_return_address(0));
    else if (ddp_cudaemu::running)
        ddp_cudaemu::global_race_access(p, bytes, true, __builtin_return_address(0));
}
extern "C" void __tsan_init(void) {}
extern "C" void __tsan_func_entry(void *) {}
extern "C" void __tsan_func_exit(void) {}
extern "C" void __tsan_vptr_update(void **, void *) {}
extern "C" void __tsan_vptr_read(void **) {}
