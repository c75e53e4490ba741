/* cudaemu_race_shadow.cpp — the shared-memory shadow's storage, and the split and merge of its
 * granules (cudaemu_race_shadow.h). Must not decide what orders two accesses. */
#include "cudaemu_race_shadow.h"

#include "cudaemu_internal.h"

namespace ddp_cudaemu {

namespace {

/* Whether two records say the same of their bytes' accesses. */
bool same_cell(const shadow_cell &a, const shadow_cell &b)
{
    return a.epoch == b.epoch && a.readers == b.readers && a.atomics == b.atomics && a.write_clock == b.write_clock &&
           a.writer == b.writer && a.reader == b.reader && a.in_flight == b.in_flight &&
           a.write_slot == b.write_slot && a.write_gen == b.write_gen && a.read_gen == b.read_gen &&
           a.reader_lanes == b.reader_lanes && a.read_interval == b.read_interval &&
           a.generic_block == b.generic_block && a.generic_fences == b.generic_fences &&
           a.generic_writer == b.generic_writer;
}

/* Points r at its part of the storage: its granules from granule `granule_at`, its bytes from byte
 * `byte_at`; the strides are the whole storage's. */
void attach(shadow_range &r, shadow_store &store, size_t granule_at, size_t byte_at)
{
    r.granule_cells = store.granule_cells.data() + granule_at;
    r.granule_clocks = store.granule_clocks.data() + granule_at;
    r.granule_stride = store.granule_cells.size();
    r.split = store.split.data() + granule_at;
    r.byte_cells = store.byte_cells.data() + byte_at;
    r.byte_clocks = store.byte_clocks.data() + byte_at;
    r.byte_stride = store.byte_cells.size();
}

} // namespace

void shadow_allocate(shadow_store &store, std::vector<shadow_range> &ranges)
{
    size_t granules = 0, bytes = 0;
    for (const shadow_range &r : ranges) {
        granules += r.bytes / GRANULE;
        bytes += r.bytes;
    }
    store.granule_cells.assign(granules, shadow_cell{});
    store.granule_clocks.assign(granules * CLOCK_WARPS, 0);
    store.split.assign(granules, 0);
    store.byte_cells.assign(bytes, shadow_cell{});
    store.byte_clocks.assign(bytes * CLOCK_WARPS, 0);
    granules = bytes = 0;
    for (shadow_range &r : ranges) {
        attach(r, store, granules, bytes);
        granules += r.bytes / GRANULE;
        bytes += r.bytes;
    }
}

shadow_range shadow_dynamic(shadow_store &store, const char *lo, size_t bytes)
{
    shadow_range r{lo, bytes, true};
    if (store.byte_cells.size() < bytes) {
        std::vector<shadow_range> one{r};
        shadow_allocate(store, one); /* what the smaller one held is of older epochs: nobody's */
        return one[0];
    }
    attach(r, store, 0, 0);
    return r;
}

void shadow_forget(shadow_store &store)
{
    std::fill(store.granule_cells.begin(), store.granule_cells.end(), shadow_cell{});
    std::fill(store.byte_cells.begin(), store.byte_cells.end(), shadow_cell{});
}

/* Only the clocks of the warps among `readers` are ever read (a write empties the set), so only
 * theirs are copied and compared. */
void split_granule(const shadow_range &r, size_t g)
{
    const shadow_cell &whole = r.granule_cells[g];
    const size_t first = g * GRANULE;
    for (size_t i = 0; i < GRANULE; i++)
        r.byte_cells[first + i] = whole;
    for (uint32_t left = whole.readers; left; left &= left - 1) {
        const size_t w = (size_t)__builtin_ctz(left);
        const uint32_t clock = r.granule_clocks[w * r.granule_stride + g];
        for (size_t i = 0; i < GRANULE; i++)
            r.byte_clocks[w * r.byte_stride + first + i] = clock;
    }
    r.split[g] = 1;
}

void merge_granule(const shadow_range &r, size_t g)
{
    const size_t first = g * GRANULE;
    const shadow_cell &head = r.byte_cells[first];
    for (size_t i = 1; i < GRANULE; i++)
        if (!same_cell(head, r.byte_cells[first + i]))
            return;
    for (uint32_t left = head.readers; left; left &= left - 1) {
        const uint32_t *clocks = r.byte_clocks + (size_t)__builtin_ctz(left) * r.byte_stride + first;
        for (size_t i = 1; i < GRANULE; i++)
            if (clocks[i] != clocks[0])
                return;
    }
    r.granule_cells[g] = head;
    for (uint32_t left = head.readers; left; left &= left - 1) {
        const size_t w = (size_t)__builtin_ctz(left);
        r.granule_clocks[w * r.granule_stride + g] = r.byte_clocks[w * r.byte_stride + first];
    }
    r.split[g] = 0;
}

} /* namespace ddp_cudaemu */
