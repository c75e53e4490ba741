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
 * global_race_copy_read. The shadow is a page per 4 KiB of device memory touched (60 bytes a byte),
 * its block part forgotten at the next grid. DDP_CUDA_EMU_GLOBAL_RACES=0 turns both checks off. A
 * kernel's access outside device allocations and fiber stacks goes on to cudaemu_kernel_memory.cpp,
 * whether or not they are on. Must not schedule fibers. */
#include "cudaemu_fiber.h"
#include "cudaemu_internal.h"
#include "cudaemu_kernel.h"
#include "cudaemu_race_report.h"

#include <stdlib.h>
#include <string.h>

#include <memory>
#include <unordered_map>
#include <vector>

namespace ddp_cudaemu {

namespace {

/* Shadow pages are kept from grid to grid (each new grid reuses them), up to KEPT_PAGES: 480 MiB of
 * shadow for 8 MiB of device memory touched; past that, a grid starts with none. */
enum { PAGE_SHIFT = 12, PAGE = 1 << PAGE_SHIFT, KEPT_PAGES = 2048 };

/* One 4 KiB page of device memory. Between blocks, in grid `grid`: each byte's last writing block,
 * the first block that read it and another block that read it (1 + the linear index; 0: none).
 * Between one block's threads: the stamps of each byte's last write and of up to two reads since
 * (access_in_block); a stamp of an older epoch orders nothing more by itself, so these are not
 * cleared per grid. */
struct shadow_page {
    uint64_t grid = 0;
    uint32_t writer[PAGE];
    uint32_t reader[PAGE];
    uint32_t other_reader[PAGE];
    race_stamp wrote[PAGE];
    race_stamp read[2][PAGE];
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
    const char *last_lo = nullptr;         /* the allocation found last */
    size_t last_bytes = 0;
    const char *lo = nullptr;              /* from the first allocation's start to the last one's end */
    size_t span = 0;
    const char *stacks = nullptr;          /* the fibers' stacks, most of what is not device memory */
    size_t stack_bytes = 0;
    std::unordered_map<uintptr_t, std::unique_ptr<shadow_page>> pages;
    uintptr_t cached_page = 0;
    shadow_page *cached = nullptr;
    uint64_t grid = 0;
    bool races = false;                    /* the race check is on */
};
thread_local global_state state;

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
    if (page != s.cached_page || !s.cached) {
        std::unique_ptr<shadow_page> &slot = s.pages[page];
        if (!slot)
            slot = std::make_unique<shadow_page>();
        s.cached_page = page;
        s.cached = slot.get();
    }
    if (s.cached->grid != s.grid) {
        memset(s.cached->writer, 0, sizeof s.cached->writer);
        memset(s.cached->reader, 0, sizeof s.cached->reader);
        memset(s.cached->other_reader, 0, sizeof s.cached->other_reader);
        s.cached->grid = s.grid;
    }
    return *s.cached;
}

} // namespace

void global_race_grid_begin()
{
    global_state &s = state;
    s.races = enabled();
    s.allocations = device_allocations();
    s.last_lo = nullptr;
    s.last_bytes = 0;
    s.lo = nullptr;
    s.span = 0;
    if (!s.allocations.empty()) {
        s.lo = static_cast<const char *>(s.allocations.front().addr);
        s.span = (size_t)(static_cast<const char *>(s.allocations.back().addr) + s.allocations.back().bytes - s.lo);
    }
    fiber_pool(&s.stacks, &s.stack_bytes);
    if (!s.races)
        return;
    if (s.pages.size() > KEPT_PAGES)
        s.pages.clear(); /* all stale now: a big job's shadow must not outgrow it */
    s.grid++;
    s.cached = nullptr;
}

namespace {

/* Whether the access stamped `earlier` is nobody's, another epoch's or the running thread's own (stamped
 * `now`): ordered before it without asking cudaemu_race.cpp, and a read slot the running thread's read
 * may take (its later accesses come after both). */
inline bool stale_or_own(race_stamp earlier, race_stamp now)
{
    return earlier.thread == 0 || earlier.epoch != now.epoch || earlier.thread == now.thread;
}

/* Whether the access stamped `earlier` is ordered before the running thread's access stamped `now`. */
inline bool ordered(race_stamp earlier, race_stamp now)
{
    return stale_or_own(earlier, now) || race_ordered(earlier);
}

/* The running thread's access to byte b of page pg (at p, in allocation a) against its block's other
 * threads: a write or read of another thread that nothing orders before it races (a GPU's threads
 * see each other's stores only through a barrier, an arrival they acquire or a lane sync). A read
 * takes a slot holding nobody's read, an older epoch's or its own thread's, else the second slot:
 * of three reads by other threads in one epoch, one is forgotten. */
void access_in_block(shadow_page &pg, size_t b, const memory_range &a, const char *p, bool write,
                     const access_site &at, race_stamp now)
{
    if (!ordered(pg.wrote[b], now))
        report_threads(a, p, write ? "WAW" : "RAW", pg.wrote[b].thread - 1, true, write, at.what, at.file, at.line,
                       at.pc);
    if (!write) {
        pg.read[stale_or_own(pg.read[0][b], now) ? 0 : 1][b] = now;
        return;
    }
    for (int k = 0; k < 2; k++)
        if (!ordered(pg.read[k][b], now))
            report_threads(a, p, "WAR", pg.read[k][b].thread - 1, false, write, at.what, at.file, at.line, at.pc);
    pg.wrote[b] = now;
    pg.read[0][b] = pg.read[1][b] = race_stamp{};
}

/* The running block's access to [p, p + bytes), where p lies in device allocation a: against the
 * grid's other blocks, and, when a thread of it makes it, its other threads. */
void access_bytes(global_state &s, const memory_range &a, const char *p, size_t bytes, bool write,
                  const access_site &at)
{
    const uint32_t block = 1 + (cur_block_idx.z * cur_grid_dim.y + cur_block_idx.y) * cur_grid_dim.x + cur_block_idx.x;
    const race_stamp now = race_now();
    shadow_page *pg = nullptr;
    for (size_t i = 0; i < bytes; i++) {
        const uintptr_t u = (uintptr_t)(p + i);
        if (i == 0 || (u & (PAGE - 1)) == 0)
            pg = &page_of(s, u >> PAGE_SHIFT);
        const size_t b = u & (PAGE - 1);
        if (now.thread)
            access_in_block(*pg, b, a, p + i, write, at, now);
        const uint32_t w = pg->writer[b], r = pg->reader[b], r2 = pg->other_reader[b];
        if (w && w != block)
            report_blocks(a, p + i, write ? "WAW" : "RAW", block - 1, w - 1, true, write, at.what, at.file, at.line,
                          at.pc);
        if (!write) {
            if (!r)
                pg->reader[b] = block;
            else if (r != block && !r2)
                pg->other_reader[b] = block;
            continue;
        }
        const uint32_t other = r && r != block ? r : r2 && r2 != block ? r2 : 0;
        if (other)
            report_blocks(a, p + i, "WAR", block - 1, other - 1, false, write, at.what, at.file, at.line, at.pc);
        pg->writer[b] = block;
    }
}

/* Whether p lies in a device allocation other than s.last_lo's (then it becomes s.last_lo's). */
bool in_other_allocation(global_state &s, const char *p)
{
    const memory_range *a = (size_t)(p - s.lo) < s.span ? range_containing(s.allocations, p) : nullptr;
    if (!a)
        return false;
    s.last_lo = static_cast<const char *>(a->addr);
    s.last_bytes = a->bytes;
    return true;
}

void access(const void *addr, size_t bytes, bool write, const access_site &at)
{
    global_state &s = state;
    const char *p = static_cast<const char *>(addr);
    if ((size_t)(p - s.last_lo) >= s.last_bytes) {
        if ((size_t)(p - s.stacks) < s.stack_bytes)
            return;
        if (!in_other_allocation(s, p)) {
            if (at.pc) /* a kernel's own access: may it touch that at all? */
                kernel_memory_check(p, bytes, write, at.pc);
            return;
        }
    }
    if (s.races)
        access_bytes(s, memory_range{const_cast<char *>(s.last_lo), s.last_bytes}, p, bytes, write, at);
}

} // namespace

void global_race_access(const void *p, size_t bytes, bool write, const void *pc)
{
    access(p, bytes, write, access_site{nullptr, nullptr, 0, pc});
}

void global_race_copy_read(const void *p, size_t bytes, const char *what, const char *file, int line)
{
    access(p, bytes, false, access_site{what, file, line, nullptr});
}

} /* namespace ddp_cudaemu */
