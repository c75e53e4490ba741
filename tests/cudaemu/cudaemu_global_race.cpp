/* cudaemu_global_race.cpp — races between the blocks of one grid in device memory, which a GPU
 * runs in any order and at once while the emulator runs them one after another.
 *
 * Nothing orders two blocks of a grid (no kernel here uses global atomics, fences or grid-wide
 * barriers), so a byte of a device allocation written by one block and read or written by another
 * in the same grid is a race: the read may see either value, and of two writes (a `+=` from two
 * blocks among them, which the emulator's one-at-a-time order always gets right) either may win.
 * Each such access aborts naming both blocks, the allocation, the byte and the instruction. The
 * kernels' own loads and stores reach it through cudaemu_race.cpp's -fsanitize=thread entry points
 * (fiber stacks skipped, anything else outside device allocations handed on, below), and the
 * emulator's own reads (cp.async's, the bulk and tensor copies' sources) through
 * global_race_copy_read. Per byte it keeps the grid's last writing block and two reading blocks
 * (the first, and one other if any: enough to find a reader other than any later writer), in a
 * shadow page per 4 KiB of device memory touched (12 bytes a byte), forgotten at the next grid.
 * DDP_CUDA_EMU_GLOBAL_RACES=0 turns it off. A kernel's access outside device allocations and fiber
 * stacks goes on to cudaemu_kernel_memory.cpp, whether or not this check is on. Must not schedule
 * fibers. */
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

/* Shadow pages are kept from grid to grid (each new grid reuses them), up to KEPT_PAGES: 288 MiB of
 * shadow for 24 MiB of device memory touched; past that, a grid starts with none. */
enum { PAGE_SHIFT = 12, PAGE = 1 << PAGE_SHIFT, KEPT_PAGES = 6144 };

/* One 4 KiB page of device memory in grid `grid`: each byte's last writing block, the first block
 * that read it and another block that read it (1 + the linear index; 0: none). */
struct shadow_page {
    uint64_t grid = 0;
    uint32_t writer[PAGE];
    uint32_t reader[PAGE];
    uint32_t other_reader[PAGE];
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

/* The running block's access to [p, p + bytes), where p lies in device allocation a. */
void access_bytes(global_state &s, const memory_range &a, const char *p, size_t bytes, bool write,
                  const access_site &at)
{
    const uint32_t block = 1 + (cur_block_idx.z * cur_grid_dim.y + cur_block_idx.y) * cur_grid_dim.x + cur_block_idx.x;
    shadow_page *pg = nullptr;
    for (size_t i = 0; i < bytes; i++) {
        const uintptr_t u = (uintptr_t)(p + i);
        if (i == 0 || (u & (PAGE - 1)) == 0)
            pg = &page_of(s, u >> PAGE_SHIFT);
        const size_t b = u & (PAGE - 1);
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
