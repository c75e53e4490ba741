/* cudaemu_warp_exchange.cpp — completes a warp's exchanges once every lane named in the mask has
 * arrived: shuffles, votes and __syncwarp here, the matrix instructions' (mma, ldmatrix, wgmma)
 * operand hand-over to cudaemu_tensor.cpp and cudaemu_wgmma.cpp, which compute their results. Owns
 * the checks that make a warp operation well formed (the caller in its mask, all 32 lanes at one
 * call site for .sync.aligned instructions, a power-of-two shuffle width, every lane at the same
 * operation) and the deadlock report of a mask naming a lane that has exited or does not exist:
 * on a GPU those hang or read garbage. Runs on the scheduler's stack; must not pick or switch
 * fibers (cudaemu_sched.cpp). */
#include "cudaemu_sched.h"

#include "cudaemu_internal.h"
#include "cudaemu_kernel.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

namespace ddp_cudaemu {

const char *warp_op_name(warp_op_kind op)
{
    static const char *const names[] = {"__syncwarp", "__shfl_sync", "__shfl_up_sync", "__shfl_down_sync",
                                        "__shfl_xor_sync", "__ballot_sync", "__any_sync", "__all_sync",
                                        "mma.sync", "ldmatrix", "wgmma.mma_async", "wgmma.wait_group"};
    return names[op];
}

/* The .sync.aligned matrix instructions: a full warp at one call site, operands handed over by pointer. */
static bool is_matrix_op(warp_op_kind op)
{
    return op == WARP_MMA || op == WARP_LDMATRIX || op == WARP_WGMMA || op == WARP_WGMMA_WAIT;
}

static int source_lane(const emu_thread &t, int lane)
{
    int seg = lane / t.width * t.width, pos = lane - seg;
    switch (t.op) {
    case WARP_SHFL_IDX: return seg + (t.param & (t.width - 1));
    case WARP_SHFL_UP: return pos - t.param >= 0 ? lane - t.param : lane;
    case WARP_SHFL_DOWN: return pos + t.param < t.width ? lane + t.param : lane;
    case WARP_SHFL_XOR: {
        int src = lane ^ t.param;
        return src >= seg + t.width ? lane : src;
    }
    default: return lane;
    }
}

static void complete_exchange(block_run &b, int base, unsigned mask)
{
    /* the masked lanes' op (lane 0 may be elsewhere when the mask leaves it out); only the matrix
     * ops read a parameter, and they hold all 32 lanes, so lane 0's is theirs */
    const warp_op_kind op = b.threads[base + __builtin_ctz(mask)].op;
    if (is_matrix_op(op)) { /* all 32 lanes (try_warp_exchange) */
        void *lane_ops[32];
        for (int lane = 0; lane < 32; lane++)
            lane_ops[lane] = reinterpret_cast<void *>(static_cast<uintptr_t>(b.threads[base + lane].in));
        if (op == WARP_WGMMA || op == WARP_WGMMA_WAIT)
            complete_wgmma_exchange(op, b.threads[base].param, lane_ops);
        else
            complete_tensor_exchange(op, b.threads[base].param, lane_ops);
        for (int lane = 0; lane < 32; lane++)
            make_runnable(b, b.threads[base + lane]);
        return;
    }
    if (op == WARP_SYNC)
        race_lane_sync(base / 32, mask);
    uint64_t ballot = 0;
    for (int lane = 0; lane < 32; lane++)
        if (mask >> lane & 1u)
            ballot |= (b.threads[base + lane].in != 0 ? 1ull : 0ull) << lane;
    for (int lane = 0; lane < 32; lane++) {
        if (!(mask >> lane & 1u))
            continue;
        emu_thread &t = b.threads[base + lane];
        switch (t.op) {
        case WARP_BALLOT: t.out = ballot; break;
        case WARP_ANY: t.out = ballot != 0; break;
        case WARP_ALL: t.out = ballot == mask; break;
        case WARP_SYNC: t.out = 0; break;
        default: {
            int src = source_lane(t, lane);
            /* reading a lane that did not take part is undefined: poison it like shared memory */
            t.out = (src >= 0 && src < 32 && (mask >> src & 1u)) ? b.threads[base + src].in : ~0ull;
        }
        }
        make_runnable(b, t);
    }
}

static void check_lane_in_mask(block_run &b, const emu_thread &t, int base, int lane)
{
    char detail[640];
    int idx = base + lane;
    const char *why = idx >= b.nthreads ? "does not exist (partial warp)"
                    : b.threads[idx].state == EXITED ? "has exited" : nullptr;
    if (!why)
        return;
    snprintf(detail, sizeof detail,
             "%s at %s:%d by thread %d with mask 0x%08x: lane %d (thread %d) named in the mask %s, "
             "so the lanes waiting for it never continue", warp_op_name(t.op), t.file, t.line,
             t.linear, t.mask, lane, idx, why);
    die_in_kernel("deadlock", detail);
}

/* t just arrived at a warp operation: complete it if every lane of its mask is there. */
void try_warp_exchange(block_run &b, const emu_thread &t)
{
    int base = t.linear / 32 * 32, own = t.linear - base;
    char detail[640];
    if (!(t.mask >> own & 1u)) {
        snprintf(detail, sizeof detail, "%s at %s:%d: mask 0x%08x does not include the calling lane %d",
                 warp_op_name(t.op), t.file, t.line, t.mask, own);
        die_in_kernel("invalid warp mask", detail);
    }
    if (is_matrix_op(t.op) && t.mask != 0xffffffffu) {
        snprintf(detail, sizeof detail, "%s at %s:%d: .sync.aligned instructions need all 32 lanes (mask 0x%08x)",
                 warp_op_name(t.op), t.file, t.line, t.mask);
        die_in_kernel("invalid warp mask", detail);
    }
    if (t.width < 1 || t.width > 32 || (t.width & (t.width - 1)) != 0) {
        snprintf(detail, sizeof detail, "%s at %s:%d: width %d is not a power of two in [1, 32]",
                 warp_op_name(t.op), t.file, t.line, t.width);
        die_in_kernel("invalid shuffle width", detail);
    }
    unsigned gone = t.mask & ~b.warp_live[base / 32];
    if (gone)
        check_lane_in_mask(b, t, base, __builtin_ctz(gone));
    if (b.warp_waiting[base / 32] < __builtin_popcount(t.mask))
        return; /* cheap test first: not enough lanes are waiting yet */
    for (int lane = 0; lane < 32; lane++) {
        if (!(t.mask >> lane & 1u))
            continue;
        const emu_thread &o = b.threads[base + lane];
        if (o.state != AT_WARP)
            return; /* still running, or at __syncthreads (a deadlock the scheduler reports) */
        const bool same = o.op == t.op && o.mask == t.mask &&
                          !(is_matrix_op(t.op) && (o.param != t.param || o.line != t.line || strcmp(o.file, t.file)));
        if (!same && !(o.mask >> own & 1u))
            return; /* o is in an exchange without t's lane (partial masks): t waits until o has done it */
        if (!same) {
            snprintf(detail, sizeof detail,
                     "lane %d is at %s (mask 0x%08x) at %s:%d while lane %d is at %s (mask 0x%08x) at %s:%d",
                     t.linear - base, warp_op_name(t.op), t.mask, t.file, t.line, lane, warp_op_name(o.op),
                     o.mask, o.file, o.line);
            die_in_kernel("mismatched warp operation", detail);
        }
    }
    complete_exchange(b, base, t.mask);
}

/* A thread exited: a lane of its warp waiting on it can never continue. */
void check_warp_after_exit(block_run &b, const emu_thread &t)
{
    int base = t.linear / 32 * 32;
    if (b.warp_waiting[t.linear / 32] == 0)
        return;
    for (int lane = 0; lane < 32 && base + lane < b.nthreads; lane++) {
        const emu_thread &o = b.threads[base + lane];
        if (o.state == AT_WARP && (o.mask >> (t.linear - base) & 1u))
            check_lane_in_mask(b, o, base, t.linear - base);
    }
}

} /* namespace ddp_cudaemu */
