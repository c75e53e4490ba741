/* cudaemu_race_shadow.h — the shadow of shared memory the race check (cudaemu_race.cpp) keeps: what
 * each byte's accesses were. One record stands for the four bytes of a granule while every access
 * since the granule was last whole covered all four (such an access leaves four equal records
 * equal); an access covering part of a granule splits it (its record and clocks are copied to its
 * bytes), and one covering all of a split granule merges it again when it leaves the four records
 * and clocks equal. This file owns the storage, the split and the merge; it must not decide what
 * orders two accesses (cudaemu_race.cpp, cudaemu_race_order.h) or word a report
 * (cudaemu_race_report.cpp). */
#ifndef DDP_CUDAEMU_RACE_SHADOW_H
#define DDP_CUDAEMU_RACE_SHADOW_H

#include <stddef.h>
#include <stdint.h>

#include <algorithm>
#include <vector>

namespace ddp_cudaemu {

/* The accesses of one byte, or of the four bytes of a whole granule, in the barrier epoch `epoch`
 * (any other epoch: none). The clock of each reading warp's last read is in the range's clocks. */
struct shadow_cell {
    uint32_t epoch;
    uint32_t readers;      /* warps that read it since its last write (bit per warp) */
    uint32_t atomics;      /* warps that updated it atomically */
    uint32_t write_clock;  /* the value of clock slot write_slot when it was written */
    uint16_t writer;       /* 1 + the thread that last wrote it (or issued the bulk copy that did); 0: nobody */
    uint16_t reader;       /* 1 + the thread that last read or updated it atomically */
    uint16_t in_flight;    /* 1 + the thread whose cp.async to it has not landed, in any epoch; 0: none */
    uint8_t write_slot;    /* the writer's warp, or the slot of the mbarrier its bulk copy completed on */
    uint32_t write_gen;    /* the writer's warp's lane syncs before the write (cudaemu_race.cpp) */
    uint32_t read_gen;     /* the same for the last read */
    uint32_t reader_lanes; /* the lanes of the last reader's warp that read it in that read's interval
                            * (cudaemu_race.cpp): 0 after a write or atomic update */
    uint32_t read_interval; /* the interval of the reads in reader_lanes */
    /* Proxies, kept across epochs (a barrier orders threads, not proxies): the last write through the
     * generic proxy in block `generic_block` not yet followed by an async-proxy write, by thread
     * generic_writer - 1 (0: none) after generic_fences of its fence.proxy.async. */
    uint32_t generic_block;
    uint32_t generic_fences;
    uint16_t generic_writer;
};

enum { GRANULE = 4 }; /* bytes: a float, the unit most shared-memory accesses are made of */

/* One shadow cell and the clocks of its reading warps' last reads (clock[w * stride] for warp w). */
struct cell_ref {
    shadow_cell *cell;
    uint32_t *clock;
    size_t stride;
};

/* A shared-memory object (a static __shared__ array, or the block's dynamic shared memory) and its
 * shadow: granule g holds bytes GRANULE * g .. + GRANULE - 1 of it; the bytes past the last whole
 * granule have byte cells only. */
struct shadow_range {
    const char *lo;
    size_t bytes;
    bool dynamic;
    shadow_cell *granule_cells = nullptr; /* [g]: granule g's record while it is whole */
    uint32_t *granule_clocks = nullptr;   /* [warp * granule_stride + g] */
    size_t granule_stride = 0;
    uint8_t *split = nullptr;             /* [g]: 1 while granule g's bytes keep records of their own */
    shadow_cell *byte_cells = nullptr;    /* [byte]: while its granule is split, or past the last whole one */
    uint32_t *byte_clocks = nullptr;      /* [warp * byte_stride + byte] */
    size_t byte_stride = 0;
};

/* The storage behind the shadow_ranges of one kind (the static objects together, or the dynamic
 * shared memory). */
struct shadow_store {
    std::vector<shadow_cell> granule_cells, byte_cells;
    std::vector<uint32_t> granule_clocks, byte_clocks;
    std::vector<uint8_t> split;
};

/* Shadows for objects of the given sizes (`ranges[i].lo`, `.bytes` and `.dynamic` set by the caller),
 * all whole and empty. */
void shadow_allocate(shadow_store &store, std::vector<shadow_range> &ranges);
/* The dynamic shared memory's shadow for `bytes` from lo: kept from earlier grids where it fits
 * (stale records carry old epochs: nobody's), grown where not. */
shadow_range shadow_dynamic(shadow_store &store, const char *lo, size_t bytes);
/* Every record forgotten (the epoch numbers wrapped around). */
void shadow_forget(shadow_store &store);
/* Granule g's record and clocks copied to its bytes, which keep their own from now on. */
void split_granule(const shadow_range &r, size_t g);
/* Granule g whole again if an access left its bytes' records and clocks equal. */
void merge_granule(const shadow_range &r, size_t g);

/* Calls f(offset, cell) for each cell of the n bytes from offset `off` of r, in address order: a
 * whole granule once (offset its first byte), else each byte, splitting a granule the bytes cover
 * part of and merging one they cover all of. */
template <class F>
inline void for_each_cell(const shadow_range &r, size_t off, size_t n, F &&f)
{
    const size_t end = off + n, whole_end = r.bytes / GRANULE * GRANULE;
    while (off < end) {
        if (off >= whole_end) {
            f(off, cell_ref{r.byte_cells + off, r.byte_clocks + off, r.byte_stride});
            off++;
            continue;
        }
        const size_t g = off / GRANULE, first = g * GRANULE, stop = std::min(end, first + GRANULE);
        const bool all = off == first && stop == first + GRANULE;
        if (all && !r.split[g]) { /* the usual case */
            f(off, cell_ref{r.granule_cells + g, r.granule_clocks + g, r.granule_stride});
            off = stop;
            continue;
        }
        if (!r.split[g])
            split_granule(r, g);
        for (; off < stop; off++)
            f(off, cell_ref{r.byte_cells + off, r.byte_clocks + off, r.byte_stride});
        if (all)
            merge_granule(r, g);
    }
}

} /* namespace ddp_cudaemu */

#endif
