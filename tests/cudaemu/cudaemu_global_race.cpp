/* cudaemu_global_race.cpp — races in device memory within one grid: between its blocks, which a GPU
 * runs in any order and at once while the emulator runs them one after another, and between the
 * threads of one block, which the emulator runs as fibers taking turns.
 *
 * Blocks: nothing orders two blocks of a grid (no kernel here uses global atomics, fences or
 * grid-wide barriers), so a byte of a device allocation written by one block and read or written by
 * another in the same grid is a race: the read may see either value, and of two writes (a `+=` from
 * two blocks among them, which the emulator's one-at-a-time order always gets right) either may
 * win. Per byte it keeps the grid's last writing block and two reading blocks (the first, and one
 * other if any: enough to find a reader other than any later writer).
 * Threads: a thread sees another's global store only through what orders the two (a __syncthreads,
 * a named barrier or mbarrier arrival it acquired, a lane sync), as in shared memory; the fiber
 * order the emulator happens to run gets it right or wrong by chance. Per byte it keeps the last
 * write's stamp and two reads' (cudaemu_race.cpp's race_now: thread, barrier epoch, clocks) and asks
 * race_ordered whether they happen before each new access.
 * Each race aborts naming both blocks or both threads, the allocation, the byte and the instruction.
 * The kernels' own loads and stores reach it through cudaemu_race.cpp's -fsanitize=thread entry
 * points (fiber stacks skipped, anything else outside device allocations handed on, below), and the
 * emulator's own reads (cp.async's, the bulk and tensor copies' sources) through
 * global_race_copy_read. The shadow is a page per 4 KiB of device memory touched: 24 bytes a record
 * (three block numbers and three stamps, each stamp a 32-bit number in a table of the distinct stamps
 * made, as a thread's stamp changes only when it syncs), one record per aligned 4-byte word while
 * every access since covered the whole word (as kernels access floats), one per byte after an
 * access to part of it; its block part forgotten at the next grid.
 * DDP_CUDA_EMU_GLOBAL_RACES=0 turns both checks off, DDP_CUDA_EMU_RACE_GRIDS=N (cudaemu_race.cpp)
 * after each kernel's first N grids; an access inside a fiber stack or device allocation then costs a
 * few compares (grid_filter). A kernel's access outside device allocations and fiber stacks goes on to
 * cudaemu_kernel_memory.cpp, whether or not they are on. Must not schedule fibers. */
#include "cudaemu_fiber.h"
#include "cudaemu_internal.h"
#include "cudaemu_kernel.h"
#include "cudaemu_race_report.h"

#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <memory>
#include <unordered_map>
#include <vector>

namespace ddp_cudaemu {

namespace {

/* Shadow pages are kept from grid to grid (each new grid reuses them), up to KEPT_PAGES: 100 MiB of
 * shadow for 16 MiB of device memory touched (five times that where parts of words were accessed);
 * past that, a grid starts with none. The stamp table starts again, at a block's first access, once
 * it holds more than KEPT_STAMPS (16 MiB). */
enum { PAGE_SHIFT = 12, PAGE = 1 << PAGE_SHIFT, WORD = 4, KEPT_PAGES = 4096, KEPT_STAMPS = 1 << 20 };
enum { MAX_THREADS = 1024 };
enum { RECENT = 64 };

/* A stamp's number in the table (stamp_table): 0 is nobody's. */
typedef uint32_t stamp_id;

/* The record of one byte of device memory, or of the four of a whole word. Between blocks, in its
 * page's grid: its last writing block, the first block that read it and another block that read it
 * (1 + the linear index; 0: none). Between one block's threads: the stamps of its last write and of
 * up to two reads since (access_in_block), numbers in its page's stamp table. A record is kept
 * together: an access reads and writes all of it, in one or two cache lines rather than one per
 * field. */
struct byte_shadow {
    uint32_t writer, reader, other_reader;
    stamp_id wrote, read[2];
};

/* One 4 KiB page of device memory: its records' block part belongs to grid `grid`; their stamps are
 * numbers in the stamp table of generation `table` (a stamp of an older epoch orders nothing more by
 * itself, so they are not cleared per grid). Word w has one record (words[w]) while every access
 * since its last merge covered all four bytes; an access to part of it splits it (its record copied
 * to its four bytes' in `bytes`, made at the page's first split), and an access to all of a split
 * word merges it again when that leaves the four records equal. A record's verdict and update depend
 * on nothing but the record and the access, so a whole word's record gives the bytes' verdicts, in
 * the same order, at a quarter of the work. */
struct shadow_page {
    uint64_t grid = 0;
    uint64_t table = 0;
    byte_shadow words[PAGE / WORD];
    uint8_t split[PAGE / WORD] = {};
    uint32_t splits = 0; /* words split */
    std::unique_ptr<byte_shadow[]> bytes;
};

/* The distinct stamps made since the table (re)started: stamps[id], stamps[0] nobody's. A thread's
 * stamp changes only at a sync, so the number of its last one is remembered (last_id[thread]), and
 * the table grows by one entry per thread and sync, not per access. Numbers grow with time and
 * epochs only follow each other, so every number below `epoch_start` (the first of the current
 * epoch's) is an older epoch's: ordered before anything now without looking it up, which keeps
 * the lookups to the current epoch's few entries. The table starts again (a new generation; the
 * pages' numbers then mean nobody) only between blocks, when every stamp made before is of an
 * older epoch and orders nothing by itself. */
struct stamp_table {
    std::vector<race_stamp> stamps{race_stamp{}};
    stamp_id last_id[MAX_THREADS + 1] = {};
    stamp_id epoch_start = 1; /* the first number of the newest stamp's epoch */
    uint64_t generation = 1;
};

/* Who made an access: the emulator's `what` at file:line, or the kernel's instruction at pc. */
struct access_site {
    const char *what, *file;
    int line;
    const void *pc;
};

/* The grids of one host thread (the one draining a stream). */
struct global_state {
    std::vector<memory_range> allocations; /* the device allocations when the grid began, by address */
    const char *lo = nullptr;              /* from the first allocation's start to the last one's end */
    size_t span = 0;
    std::unordered_map<uintptr_t, std::unique_ptr<shadow_page>> pages;
    /* The pages used last, by page number modulo RECENT: a kernel reads several arrays at once (a
     * third of its accesses change page), and each would otherwise cost a lookup in `pages`. */
    uintptr_t recent_page[RECENT] = {};
    shadow_page *recent[RECENT] = {};
    uint64_t grid = 0;
    stamp_table table;
    uint32_t block = 0;                    /* the block of the last access (1 + its linear index) */
};
thread_local global_state state;

/* What every access of the grid looks at first: whether the race check is on, the fibers' stacks
 * (most of what is not device memory) and the FOUND_SLOTS allocations found last (a kernel works on
 * a few arrays at once; one slot missed a third of the time). When the grid is not race-checked (the
 * whole jobs' usual case), an access in a stack or in one of those needs nothing more. Plain
 * thread-local data, reached without the guard that `state`'s constructor puts before each use of
 * that: most of an emulated kernel's time is its accesses. */
enum { FOUND_SLOTS = 8 };
struct grid_filter {
    bool races;
    const char *stacks;
    size_t stack_bytes;
    const char *lo[FOUND_SLOTS];
    size_t bytes[FOUND_SLOTS];
    unsigned next; /* the slot the next allocation found takes */
};
DDP_CUDAEMU_TLS grid_filter filter;

bool enabled()
{
    static const bool on = [] {
        const char *v = getenv("DDP_CUDA_EMU_GLOBAL_RACES");
        return !v || strcmp(v, "0") != 0;
    }();
    return on;
}

shadow_page &page_of(global_state &s, uintptr_t page)
{
    const size_t r = page % RECENT;
    if (page != s.recent_page[r] || !s.recent[r]) {
        std::unique_ptr<shadow_page> &slot = s.pages[page];
        if (!slot)
            slot = std::make_unique<shadow_page>();
        s.recent_page[r] = page;
        s.recent[r] = slot.get();
    }
    shadow_page &pg = *s.recent[r];
    if (pg.grid != s.grid || pg.table != s.table.generation) {
        const bool blocks = pg.grid != s.grid, stamps = pg.table != s.table.generation;
        const auto forget = [blocks, stamps](byte_shadow &b) {
            if (blocks)
                b.writer = b.reader = b.other_reader = 0;
            if (stamps)
                b.wrote = b.read[0] = b.read[1] = 0;
        };
        for (byte_shadow &b : pg.words)
            forget(b);
        for (size_t w = 0; pg.splits && w < PAGE / WORD; w++)
            if (pg.split[w])
                for (int k = 0; k < WORD; k++)
                    forget(pg.bytes[w * WORD + k]);
        pg.grid = s.grid;
        pg.table = s.table.generation;
    }
    return pg;
}

/* Word w's four byte records, split from its record first if it was whole. */
byte_shadow *split_word(shadow_page &pg, size_t w)
{
    if (!pg.bytes)
        pg.bytes = std::make_unique<byte_shadow[]>(PAGE);
    byte_shadow *b = &pg.bytes[w * WORD];
    if (!pg.split[w]) {
        for (int k = 0; k < WORD; k++)
            b[k] = pg.words[w];
        pg.split[w] = 1;
        pg.splits++;
    }
    return b;
}

inline bool same_shadow(const byte_shadow &x, const byte_shadow &y)
{
    return x.writer == y.writer && x.reader == y.reader && x.other_reader == y.other_reader && x.wrote == y.wrote &&
           x.read[0] == y.read[0] && x.read[1] == y.read[1];
}

/* Split word w whole again if its four byte records are equal. */
void merge_word(shadow_page &pg, size_t w)
{
    const byte_shadow *b = &pg.bytes[w * WORD];
    for (int k = 1; k < WORD; k++)
        if (!same_shadow(b[0], b[k]))
            return;
    pg.words[w] = b[0];
    pg.split[w] = 0;
    pg.splits--;
}

/* The number of stamp `now` (a thread's: now.thread > 0) in the table, entered if new. */
stamp_id stamp_number(stamp_table &t, race_stamp now)
{
    if (now.thread > MAX_THREADS) /* the launch checks refuse such blocks first */
        die_in_kernel("device-memory race check", "a block of more than 1024 threads");
    stamp_id &last_id = t.last_id[now.thread];
    const race_stamp &last = t.stamps[last_id];
    if (last_id && last.epoch == now.epoch && last.clock == now.clock && last.gen == now.gen)
        return last_id;
    if (t.stamps.size() > UINT32_MAX)
        die_in_kernel("device-memory race check", "more than 2^32 distinct stamps in one block");
    if (now.epoch != t.stamps.back().epoch)
        t.epoch_start = (stamp_id)t.stamps.size();
    last_id = (stamp_id)t.stamps.size();
    t.stamps.push_back(now);
    return last_id;
}

/* Between blocks: a table grown past KEPT_STAMPS starts again (every stamp in it is of an older
 * epoch than the new block's, so forgetting them changes no verdict). */
void block_changed(global_state &s, uint32_t block)
{
    s.block = block;
    stamp_table &t = s.table;
    if (t.stamps.size() <= KEPT_STAMPS)
        return;
    t.stamps.resize(1);
    memset(t.last_id, 0, sizeof t.last_id);
    t.epoch_start = 1;
    t.generation++; /* page_of clears each page's numbers at its next use */
}

} // namespace

void global_race_grid_begin(bool checked)
{
    global_state &s = state;
    grid_filter &f = filter;
    f = grid_filter{};
    f.races = checked && enabled();
    fiber_pool(&f.stacks, &f.stack_bytes);
    s.allocations = device_allocations();
    s.lo = nullptr;
    s.span = 0;
    if (!s.allocations.empty()) {
        s.lo = static_cast<const char *>(s.allocations.front().addr);
        s.span = (size_t)(static_cast<const char *>(s.allocations.back().addr) + s.allocations.back().bytes - s.lo);
    }
    if (!f.races)
        return;
    if (s.pages.size() > KEPT_PAGES) {
        s.pages.clear(); /* all stale now: a big job's shadow must not outgrow it */
        memset(s.recent, 0, sizeof s.recent);
    }
    s.grid++;
    s.block = 0; /* the first access is a block change */
}

namespace {

/* Whether the access numbered `earlier` is nobody's, another epoch's or the running thread's own (its
 * stamp `now`, numbered `id`): ordered before it without asking cudaemu_race.cpp, and a read slot
 * the running thread's read may take (its later accesses come after both). */
inline bool stale_or_own(const stamp_table &t, stamp_id earlier, race_stamp now, stamp_id id)
{
    return earlier < t.epoch_start || earlier == id || t.stamps[earlier].thread == now.thread;
}

/* Whether the access numbered `earlier` is ordered before the running thread's access now. */
inline bool ordered(const stamp_table &t, stamp_id earlier, race_stamp now, stamp_id id)
{
    return stale_or_own(t, earlier, now, id) || race_ordered(t.stamps[earlier]);
}

/* The running thread's access to the byte at p (shadow sh, in allocation a) against its block's other
 * threads: a write or read of another thread that nothing orders before it races (a GPU's threads
 * see each other's stores only through a barrier, an arrival they acquire or a lane sync). A read
 * takes a slot holding nobody's read, an older epoch's or its own thread's, else the second slot:
 * of three reads by other threads in one epoch, one is forgotten. `id` is now's number. */
void access_in_block(const stamp_table &t, byte_shadow &sh, const memory_range &a, const char *p, bool write,
                     const access_site &at, race_stamp now, stamp_id id)
{
    if (!ordered(t, sh.wrote, now, id))
        report_threads(a, p, write ? "WAW" : "RAW", t.stamps[sh.wrote].thread - 1, true, write, at.what, at.file,
                       at.line, at.pc);
    if (!write) {
        sh.read[stale_or_own(t, sh.read[0], now, id) ? 0 : 1] = id;
        return;
    }
    for (stamp_id r : sh.read)
        if (!ordered(t, r, now, id))
            report_threads(a, p, "WAR", t.stamps[r].thread - 1, false, write, at.what, at.file, at.line, at.pc);
    sh.wrote = id;
    sh.read[0] = sh.read[1] = 0;
}

/* The running block's access to the byte at p (record sh, in allocation a): against the grid's other
 * blocks (the running one is `block`), and, when a thread of it makes it (id > 0), its other threads. */
inline void access_byte(const stamp_table &t, byte_shadow &sh, const memory_range &a, const char *p, bool write,
                        const access_site &at, uint32_t block, race_stamp now, stamp_id id)
{
    if (id)
        access_in_block(t, sh, a, p, write, at, now, id);
    if (sh.writer && sh.writer != block)
        report_blocks(a, p, write ? "WAW" : "RAW", block - 1, sh.writer - 1, true, write, at.what, at.file, at.line,
                      at.pc);
    if (!write) {
        if (!sh.reader)
            sh.reader = block;
        else if (sh.reader != block && !sh.other_reader)
            sh.other_reader = block;
        return;
    }
    const uint32_t r = sh.reader, r2 = sh.other_reader;
    const uint32_t other = r && r != block ? r : r2 && r2 != block ? r2 : 0;
    if (other)
        report_blocks(a, p, "WAR", block - 1, other - 1, false, write, at.what, at.file, at.line, at.pc);
    sh.writer = block;
}

/* The running block's access to [p, p + bytes), where p lies in device allocation a: against the
 * grid's other blocks, and, when a thread of it makes it, its other threads; a word at a time where
 * it covers a whole word that is not split, else byte by byte. */
void access_bytes(global_state &s, const memory_range &a, const char *p, size_t bytes, bool write,
                  const access_site &at)
{
    const uint32_t block = 1 + (cur_block_idx.z * cur_grid_dim.y + cur_block_idx.y) * cur_grid_dim.x + cur_block_idx.x;
    if (block != s.block)
        block_changed(s, block);
    const race_stamp now = race_now();
    const stamp_id id = now.thread ? stamp_number(s.table, now) : 0;
    shadow_page *pg = nullptr;
    for (size_t i = 0; i < bytes;) {
        const uintptr_t u = (uintptr_t)(p + i);
        if (i == 0 || (u & (PAGE - 1)) == 0)
            pg = &page_of(s, u >> PAGE_SHIFT);
        const size_t w = (u & (PAGE - 1)) / WORD, first = u % WORD, n = std::min<size_t>(WORD - first, bytes - i);
        if (n == WORD && !pg->split[w]) { /* the usual case */
            access_byte(s.table, pg->words[w], a, p + i, write, at, block, now, id);
        } else {
            byte_shadow *b = split_word(*pg, w);
            for (size_t k = 0; k < n; k++)
                access_byte(s.table, b[first + k], a, p + i + k, write, at, block, now, id);
            if (n == WORD)
                merge_word(*pg, w);
        }
        i += n;
    }
}

/* Whether p lies in a fiber's stack (a thread's locals). */
inline bool in_stack(const grid_filter &f, const char *p)
{
    return (size_t)(p - f.stacks) < f.stack_bytes;
}

/* The slot of an allocation found lately that holds all of [p, p + bytes), or -1 (an access that
 * starts inside one and runs past its end takes the slow path, which reports it). */
inline int found_slot(const grid_filter &f, const char *p, size_t bytes)
{
    for (int i = 0; i < FOUND_SLOTS; i++)
        if ((size_t)(p - f.lo[i]) < f.bytes[i] && (size_t)(p - f.lo[i]) + bytes <= f.bytes[i])
            return i;
    return -1;
}

/* The slot of the device allocation holding p, entered in the next slot if found (-1: none holds it). */
int find_allocation(const global_state &s, grid_filter &f, const char *p)
{
    const memory_range *a = (size_t)(p - s.lo) < s.span ? range_containing(s.allocations, p) : nullptr;
    if (!a)
        return -1;
    const int slot = (int)f.next;
    f.lo[slot] = static_cast<const char *>(a->addr);
    f.bytes[slot] = a->bytes;
    f.next = (f.next + 1) % FOUND_SLOTS;
    return slot;
}

__attribute__((noinline)) void access(const void *addr, size_t bytes, bool write, const access_site &at)
{
    grid_filter &f = filter;
    const char *p = static_cast<const char *>(addr);
    int slot = found_slot(f, p, bytes);
    if (slot < 0) {
        if (in_stack(f, p))
            return;
        global_state &s = state;
        slot = find_allocation(s, f, p);
        if (slot < 0) {
            if (at.pc) /* a kernel's own access: may it touch that at all? */
                kernel_memory_check(p, bytes, write, at.pc);
            return;
        }
        if (at.pc && (size_t)(p - f.lo[slot]) + bytes > f.bytes[slot]) /* it runs past the end */
            report_outside_allocation(memory_range{const_cast<char *>(f.lo[slot]), f.bytes[slot]}, p, bytes, write,
                                      at.pc);
    }
    if (f.races)
        access_bytes(state, memory_range{const_cast<char *>(f.lo[slot]), f.bytes[slot]}, p, bytes, write, at);
}

} // namespace

void global_race_access(const void *p, size_t bytes, bool write, const void *pc)
{
    const grid_filter &f = filter;
    const char *c = static_cast<const char *>(p);
    if (!f.races && (in_stack(f, c) || found_slot(f, c, bytes) >= 0))
        return;
    access(p, bytes, write, access_site{nullptr, nullptr, 0, pc});
}

void global_race_copy_read(const void *p, size_t bytes, const char *what, const char *file, int line)
{
    access(p, bytes, false, access_site{what, file, line, nullptr});
}

} /* namespace ddp_cudaemu */
