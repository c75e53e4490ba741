/* cudaemu_kernel_memory.cpp — what a kernel may touch outside device allocations and shared memory.
 *
 * On a GPU a kernel's load or store must reach device memory: a device allocation, shared memory,
 * its own stack, its arguments, a __device__ or __constant__ variable, or pinned host memory mapped
 * into the device's address space. Host memory from malloc, new, a std::vector or the host stack
 * is an illegal address there (cudaErrorIllegalAddress, which poisons the context), where the
 * emulator's kernels, being host code, read it on. So a kernel access to anything else aborts,
 * naming the address and the instruction. cudaemu_global_race.cpp hands over the accesses it finds
 * outside device allocations and fiber stacks; allowed here are the grid's own ranges the scheduler
 * names (its arguments, the thread indices behind threadIdx), the emulator's per-thread built-in
 * variables, the loaded objects' static data (where __device__ variables live in this build; so a
 * host static is not told apart from one) and pinned host allocations. An access beside a device
 * allocation's data (its guard bytes, rounding slack or guard pages) is reported as out of bounds,
 * read or write: on a GPU it reads or corrupts whatever lies there, and compute-sanitizer's memcheck
 * names it, and so is one into the guard after a static __shared__ array (cudaemu_kernel.h): past
 * its end or before the next one's start. Must not schedule fibers. */
#include "cudaemu_internal.h"
#include "cudaemu_kernel.h"
#include "cudaemu_race_report.h"

#include <link.h>

#include <algorithm>
#include <vector>

namespace ddp_cudaemu {

namespace {

/* What this host thread's grid may touch besides: the ranges the scheduler named, and the built-in
 * variables of this thread (set at each grid). */
thread_local std::vector<memory_range> grid_ranges;

inline bool inside(const memory_range &r, const char *p, size_t bytes)
{
    const char *lo = static_cast<const char *>(r.addr);
    return p >= lo && (size_t)(p - lo) + bytes <= r.bytes;
}

/* Every loaded object's segments, by address: static data, __device__ variables among it. */
const std::vector<memory_range> &static_segments()
{
    static const std::vector<memory_range> segments = [] {
        std::vector<memory_range> out;
        dl_iterate_phdr(
            [](dl_phdr_info *info, size_t, void *data) {
                auto *v = static_cast<std::vector<memory_range> *>(data);
                for (int i = 0; i < info->dlpi_phnum; i++) {
                    const ElfW(Phdr) &h = info->dlpi_phdr[i];
                    if (h.p_type == PT_LOAD)
                        v->push_back(memory_range{reinterpret_cast<void *>(info->dlpi_addr + h.p_vaddr), h.p_memsz});
                }
                return 0;
            },
            &out);
        std::sort(out.begin(), out.end(), [](const memory_range &a, const memory_range &b) { return a.addr < b.addr; });
        return out;
    }();
    return segments;
}

bool in_static_segment(const char *p, size_t bytes)
{
    const memory_range *r = range_containing(static_segments(), p);
    return r && inside(*r, p, bytes);
}

} // namespace

void kernel_memory_grid_begin(const memory_range *ranges, size_t count)
{
    grid_ranges.assign(ranges, ranges + count);
    grid_ranges.insert(grid_ranges.end(), {{(void *)&cur_thread_idx, sizeof cur_thread_idx},
                                           {(void *)&cur_block_idx, sizeof cur_block_idx},
                                           {(void *)&cur_block_dim, sizeof cur_block_dim},
                                           {(void *)&cur_grid_dim, sizeof cur_grid_dim}});
}

void kernel_memory_check(const void *addr, size_t bytes, bool write, const void *pc)
{
    const char *p = static_cast<const char *>(addr);
    for (const memory_range &r : grid_ranges)
        if (inside(r, p, bytes))
            return;
    if (const memory_range *guard = static_shared_guard(p, bytes))
        report_outside_shared(*guard, p, bytes, write, nullptr, nullptr, 0, pc);
    if (in_static_segment(p, bytes) || kernel_reachable(p, bytes))
        return;
    memory_range a;
    if (device_allocation_beside(p, &a))
        report_outside_allocation(a, p, bytes, write, pc);
    report_host_access(p, bytes, write, pc);
}

} /* namespace ddp_cudaemu */
