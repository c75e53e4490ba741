/* cudaemu_global_race.cpp — races between the blocks of one grid in device memory, which a GPU
 * runs in any order and at once while the emulator runs them one after another.
 *
 * Nothing orders two blocks of a grid (no kernel here uses global atomics, fences or grid-wide
 * barriers), so a byte of a device allocation written by one block and read or written by another
 * in the same grid is a race: the read may see either value, and of two writes (a `+=` from two
 * blocks among them, which the emulator's one-at-a-time order always gets right) either may win.
 * Each such access aborts naming both blocks, the allocation, the byte and the instruction. The
 * kernels' own loads and stores reach it through cudaemu_race.cpp's -fsanitize=thread entry points
 * (anything outside a device allocation is ignored: stacks, kernel arguments, host memory); the
 * emulator's own copies (cp.async's and the tensor copies' global reads) are not seen. Per byte it
 * keeps the grid's last writing and last reading block, in a shadow page per 4 KiB of device
 * memory touched (8 bytes a byte), forgotten at the next grid. Lenient: of several blocks reading
 * a byte only the last is asked about a later write. DDP_CUDA_EMU_GLOBAL_RACES=0 turns it off.
 * Must not schedule fibers. */
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

/* Shadow pages are kept from grid to grid (each new grid reuses them), up to KEPT_PAGES: 256 MiB of
 * shadow for 32 MiB of device memory touched; past that, a grid starts with none. */
enum { PAGE_SHIFT = 12, PAGE = 1 << PAGE_SHIFT, KEPT_PAGES = 8192 };

/* One 4 KiB page of device memory in grid `grid`: each byte's last writing and reading block (1 +
 * its linear index; 0: none). */
struct shadow_page {
    uint64_t grid = 0;
    uint32_t writer[PAGE];
    uint32_t reader[PAGE];
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

const memory_range *allocation_of(const global_state &s, const char *p)
{
    auto it = std::upper_bound(s.allocations.begin(), s.allocations.end(), p,
                               [](const char *q, const memory_range &r) { return q < (const char *)r.addr; });
    if (it == s.allocations.begin())
        return nullptr;
    --it;
    return (size_t)(p - (const char *)it->addr) < it->bytes ? &*it : nullptr;
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
        s.cached->grid = s.grid;
    }
    return *s.cached;
}

} // namespace

void global_race_grid_begin()
{
    global_state &s = state;
    if (!enabled())
        return;
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
    if (s.pages.size() > KEPT_PAGES)
        s.pages.clear(); /* all stale now: a big job's shadow must not outgrow it */
    s.grid++;
    s.cached = nullptr;
}

void global_race_access(const void *addr, size_t bytes, bool write, const void *pc)
{
    global_state &s = state;
    const char *p = static_cast<const char *>(addr);
    if ((size_t)(p - s.last_lo) >= s.last_bytes) {
        if ((size_t)(p - s.lo) >= s.span || (size_t)(p - s.stacks) < s.stack_bytes)
            return;
        const memory_range *a = allocation_of(s, p);
        if (!a)
            return;
        s.last_lo = static_cast<const char *>(a->addr);
        s.last_bytes = a->bytes;
    }
    const uint32_t block = 1 + (cur_block_idx.z * cur_grid_dim.y + cur_block_idx.y) * cur_grid_dim.x + cur_block_idx.x;
    shadow_page *pg = nullptr;
    for (size_t i = 0; i < bytes; i++) {
        const uintptr_t a = (uintptr_t)(p + i);
        if (i == 0 || (a & (PAGE - 1)) == 0)
            pg = &page_of(s, a >> PAGE_SHIFT);
        const size_t b = a & (PAGE - 1);
        const uint32_t w = pg->writer[b], r = pg->reader[b];
        if (w && w != block)
            report_blocks(*allocation_of(s, p), p + i, write ? "WAW" : "RAW", block - 1, w - 1, true, write, pc);
        if (!write) {
            pg->reader[b] = block;
            continue;
        }
        if (r && r != block)
            report_blocks(*allocation_of(s, p), p + i, "WAR", block - 1, r - 1, false, write, pc);
        pg->writer[b] = block;
    }
}

} /* namespace ddp_cudaemu */
