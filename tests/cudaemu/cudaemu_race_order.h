/* cudaemu_race_order.h — the shared-memory race check's state (cudaemu_race.cpp's, which alone
 * includes this): each thread's vector clock, each warp's releases and lane syncs, the shadow's
 * objects; and the question asked of it at every access, whether another thread's access is ordered
 * before the running thread's beyond what the warp clocks say (lane_ordered: a chain of lane syncs,
 * or a release that spoke for its lane; cudaemu_race.cpp's header gives the rules). Must not record
 * accesses or report races. */
#ifndef DDP_CUDAEMU_RACE_ORDER_H
#define DDP_CUDAEMU_RACE_ORDER_H

#include "cudaemu_internal.h"
#include "cudaemu_race_shadow.h"

#include <string.h>

#include <algorithm>
#include <vector>

namespace ddp_cudaemu {

namespace { /* cudaemu_race.cpp's alone */

/* Reading lanes found ordered before the access being checked (unordered_lane): lanes of warp `warp`
 * that read at its clock `clock` after `gen` lane syncs. */
struct lanes_seen {
    int warp;
    uint32_t clock, gen, lanes;
};

/* One release of a warp (the warp's clock value R it handed over): the lane that made it, and the
 * last lane sync that lane had taken part in. It orders the releasing lane's own accesses, and the
 * other lanes' only up to that sync. */
struct release_record {
    uint8_t lane;
    uint32_t joined;
};

/* A thread's fence.proxy.async: the epoch it was in, its warp's clock and lane syncs then (as for an
 * access: what a release or lane sync after it must pass on). */
struct fence_record {
    uint32_t epoch;
    uint32_t clock;
    uint32_t gen;
};

/* The race check's state on one host thread, whose grids' blocks run on it one after another. */
struct race_state {
    shadow_store static_store, dynamic_store;
    std::vector<sync_clock> seen = std::vector<sync_clock>(MAX_THREADS_PER_BLOCK); /* each thread's vector
                                                * clock: what it has acquired (valid in its epoch) */
    uint32_t own_clock[CLOCK_WARPS];  /* each warp's own slot: 1 + its releases in the current epoch */
    uint32_t copy_clock[CLOCK_SLOTS]; /* each mbarrier slot's bulk copies landed so far */
    /* Lanes: what orders the accesses of two lanes of one warp (a __syncwarp both took part in, or a
     * bar.sync), and which lane each release of a warp spoke for. */
    uint32_t joined[MAX_THREADS_PER_BLOCK];        /* the last of its warp's lane syncs a thread took part in */
    uint32_t own_seen[MAX_THREADS_PER_BLOCK];      /* its own warp's latest release a thread acquired */
    uint32_t diverged[CLOCK_WARPS]; /* lanes of each warp whose clock and own_seen may differ from its other
                                     * lanes' (which all agree): a lane sync of none of them changes nothing */
    uint32_t last_release[MAX_THREADS_PER_BLOCK];  /* the latest release a thread made (its warp's count) */
    std::vector<release_record> releases[CLOCK_WARPS]; /* [R - 1]: release R of each warp */
    std::vector<shadow_range> statics; /* sorted by address */
    const char *static_lo = nullptr, *static_hi = nullptr;
    shadow_range dynamic{};
    const shadow_range *last_static = nullptr; /* the static object found last */
    uint32_t proxy_fences[MAX_THREADS_PER_BLOCK]; /* each thread's fence.proxy.async in this block */
    std::vector<fence_record> fence_log[MAX_THREADS_PER_BLOCK]; /* [i]: its fence i + 1 (up to proxy_fences) */
    uint32_t block = 0; /* blocks begun on this host thread */
    uint32_t epoch = 0;
    int thread = -1; /* running thread's index in its block; -1 between fibers */
    bool ready = false;
    bool checking = true; /* this grid is race-checked (race_grid_checked) */
    /* Lanes again: which lanes each lane sync held (their count is the warp's lane syncs in the
     * current epoch; a chain of partial-mask ones is the rarer question). */
    std::vector<uint32_t> sync_lanes[CLOCK_WARPS]; /* [k - 1]: the lanes of each warp's lane sync k */
    uint32_t last_partial[CLOCK_WARPS];            /* each warp's latest lane sync of fewer than 32 lanes */
    /* Each warp's current interval: a number, unique in the epoch, that changes whenever the warp's
     * own clock or lane syncs do (a release or a lane sync: accesses in one interval share both). */
    uint32_t interval[CLOCK_WARPS];
    uint32_t intervals; /* the intervals numbered in the current epoch */
};

/* Warp w's lane syncs in the current epoch. */
inline uint32_t lane_syncs(const race_state &s, int w)
{
    return (uint32_t)s.sync_lanes[w].size();
}

/* A clock made in an older epoch orders nothing: it restarts empty in `epoch`. */
void fresh_in_epoch(sync_clock &clock, uint32_t epoch)
{
    if (clock.epoch == epoch)
        return;
    memset(clock.c, 0, sizeof clock.c);
    clock.epoch = epoch;
}

/* Thread t's vector clock in the current epoch (emptied on its first use in it). */
inline uint32_t *seen_by(race_state &s, int t)
{
    fresh_in_epoch(s.seen[(size_t)t], s.epoch);
    return s.seen[(size_t)t].c;
}
/* Whether lane `to` of warp w is ordered after lane `from`'s point past the warp's lane sync `gen`
 * by the warp's lane syncs gen + 1 .. upto: a chain of them, each with a lane of the one before
 * (a sync with a partial mask orders only its own lanes; the ones from and to took part in need
 * not be one). A sync of all 32 lanes holds both: with no other kind since gen, any sync answers
 * (lanes_chained, inline), else the syncs since are walked (chain_through_partial). */
[[gnu::noinline]] bool chain_through_partial(const race_state &s, int w, int from, int to, uint32_t gen,
                                             uint32_t upto)
{
    const std::vector<uint32_t> &lanes = s.sync_lanes[w];
    uint32_t reached = 1u << from;
    for (uint32_t k = gen + 1; k <= upto; k++)
        if (lanes[k - 1] & reached) {
            reached |= lanes[k - 1];
            if (reached >> to & 1u)
                return true;
        }
    return false;
}

inline bool lanes_chained(const race_state &s, int w, int from, int to, uint32_t gen, uint32_t upto)
{
    return upto > gen && (s.last_partial[w] <= gen || chain_through_partial(s, w, from, to, gen, upto));
}

/* Whether release r of warp w speaks for lane `lane`'s access made after the warp's lane sync gen:
 * r is that lane's, or a chain of syncs led from it to r's lane before r. */
inline bool speaks_for(const race_state &s, int w, int lane, const release_record &r, uint32_t gen)
{
    return r.lane == lane || lanes_chained(s, w, lane, r.lane, gen, r.joined);
}

/* Whether thread `other`'s access, made at its warp's clock `clock` after `gen` of the warp's lane
 * syncs, is ordered before the running thread's beyond what the warp clocks say: in one warp, a
 * chain of lane syncs since leads from other's lane to the running one's; or a release of other's
 * warp up to the latest the running thread acquired spoke for other's lane: made by that lane, or
 * by a lane such a chain had reached (any release in that range counts as acquired, a leniency
 * docs/gpu.md names). */
inline bool lane_ordered(const race_state &s, int other, uint32_t clock, uint32_t gen)
{
    const int self = s.thread, w = other / 32, lane = other % 32;
    if (w == self / 32 && lanes_chained(s, w, lane, self % 32, gen, s.joined[self]))
        return true;
    const std::vector<release_record> &log = s.releases[w];
    const uint32_t seen = std::min<uint32_t>(w == self / 32 ? s.own_seen[self] : s.seen[(size_t)self].c[w],
                                             (uint32_t)log.size());
    if (seen < clock)
        return false;
    if ((s.last_release[other] >= clock && s.last_release[other] <= seen) ||
        speaks_for(s, w, lane, log[seen - 1], gen))
        return true; /* the usual cases: other's own latest release, or the latest one seen */
    for (uint32_t r = clock; r <= seen; r++)
        if (speaks_for(s, w, lane, log[r - 1], gen))
            return true;
    return false;
}

/* The first of `lanes` of warp w (the running thread's lane not among them), which read a byte at the
 * warp's clock `clock` after `gen` of its lane syncs, whose read is not ordered before the running
 * thread's access; -1: none. `ordered` holds the lanes already found ordered at the same (w, clock,
 * gen) in this access. */
[[gnu::noinline]] int unordered_lane(const race_state &s, int w, uint32_t lanes, uint32_t clock, uint32_t gen,
                                     lanes_seen &ordered)
{
    if (ordered.warp != w || ordered.clock != clock || ordered.gen != gen)
        ordered = lanes_seen{w, clock, gen, 0};
    for (uint32_t left = lanes & ~ordered.lanes; left; left &= left - 1) {
        const int other = w * 32 + __builtin_ctz(left);
        if (!lane_ordered(s, other, clock, gen))
            return other;
        ordered.lanes |= left & -left;
    }
    return -1;
}

} // namespace

} /* namespace ddp_cudaemu */

#endif
