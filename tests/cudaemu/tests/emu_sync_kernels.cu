/* emu_sync_kernels.cu — a producer warp and a consumer warp handing shared memory over through named
 * barriers, mbarriers and bulk copies (runtime/device/kernels/mbarrier.cuh), rightly and wrongly,
 * for the emulator's synchronisation and race check; the C driver is test_cudaemu_sync.c. One
 * kernel, 64 threads (warp 0 produces, warp 1 consumes), one case per `which` (sync_case), and one of
 * 384 threads for setmaxnreg, whose producer is a whole warpgroup. Written
 * through mbarrier.cuh only, so the same file builds with nvcc for sm_90a, where the right cases run
 * on the GPU as the referee of the emulator's semantics. */
#include "runtime/device/kernels/mbarrier.cuh"

using namespace ddp_kernels;

/* The cases; the C driver keeps the same list. */
enum sync_case {
    NAMED_HANDOFF,      /* warp 0 writes, bar.arrive 1; warp 1 bar.sync 1, reads */
    NAMED_NO_SYNC,      /* race: warp 1 reads without its bar.sync */
    MBAR_HANDOFF,       /* warp 0 writes, lane 0 arrives on full; warp 1 waits for phase 0, reads */
    MBAR_WRONG_PARITY,  /* race: warp 1 waits for parity 1, which a fresh mbarrier reports complete */
    RING,               /* two stages, six rounds: full/empty mbarriers, every consumer lane arrives on empty */
    RING_EARLY_RELEASE, /* race: consumers arrive on empty before reading, so a refill may overwrite the read */
    BULK_HANDOFF,       /* lane 0: arrive.expect_tx, cp.async.bulk completing on full; warp 1 waits, reads */
    BULK_NO_WAIT,       /* race: warp 1 reads the bulk copy's destination without waiting */
    BULK_OTHER_STAGE,   /* race: both stages bulk-copied, warp 1 waits on stage 1's mbarrier, reads stage 0 */
    MBAR_NEVER_ARRIVES, /* deadlock: warp 1 waits on an mbarrier nobody arrives at */
    NAMED_SHORT,        /* deadlock: bar.sync 2 for 64 threads, only warp 1 comes */
    BULK_SHORT,         /* deadlock: 512 bytes expected, 256 copied */
    MBAR_NO_INIT,       /* misuse: a wait on 8 bytes no mbarrier.init set up */
    MBAR_INIT_UNORDERED,/* race: thread 0 initialises an mbarrier that warp 1 arrives at, no barrier between */
    NAMED_UNBALANCED,   /* misuse: warp 0 arrives at barrier 3 for 64 threads, nobody else ever comes */
    MBAR_NO_SYNCWARP,   /* race: MBAR_HANDOFF without its __syncwarp: lane 0's arrival releases its own write
                         * alone, whichever order the lanes wrote in */
    MBAR_LANE_WAITS,    /* as MBAR_HANDOFF, but only warp 1's lane 0 waits; a __syncwarp passes it on */
    MBAR_LANE_WAITS_ALONE, /* race: the same with a shuffle instead: lanes 1-31 wait for lane 0 but
                            * read what they never acquired (a shuffle orders no memory) */
    RING_LANE_RELEASES, /* RING, but warp 1's lane 0 alone arrives on a stage's "freed" (count 1) after a
                         * __syncwarp */
    RING_LANE_RELEASES_ALONE, /* race: the same without the __syncwarp: the refill may overwrite what lanes
                               * 1-31 read, which lane 0's arrival did not release */
    MBAR_PARTIAL_CHAIN, /* MBAR_HANDOFF with two partial-mask __syncwarps, lanes 16-31's then lanes 0-16's:
                         * lane 16 carries the upper lanes' writes on to lane 0, which arrives */
    MBAR_PARTIAL_NO_CHAIN, /* race: the second sync is lanes 0-15's, so no chain leads from lanes 16-31 to
                            * lane 0, whose arrival releases only the lower lanes' writes */
    /* regs_kernel's, 384 threads: warpgroup 2 produces (warp 8), warpgroups 0 and 1 consume (warp 1) */
    REGS_HANDOFF,       /* warpgroup 2 setmaxnreg.dec 24, 0 and 1 inc 240 (the pool just covers both); then
                         * warp 8 hands its values to warp 1 through named barrier 1 */
    REGS_NO_DEC,        /* deadlock: the consumers' inc waits for registers the producer never gives up */
    REGS_OVER,          /* deadlock: inc 256 twice, 22528 registers wanted of the 18432 the dec returns */
    REGS_PART,          /* deadlock: warps 0 and 1 of warpgroup 0 execute the inc, warps 2 and 3 do not */
    REGS_MISMATCH,      /* misuse: warp 0 asks for 240, warps 1-3 of its warpgroup for 232 */
    REGS_BELOW,         /* misuse: an inc to 160, below the 168 a thread the launch gave */
    SYNC_CASES
};

enum { ROUNDS = 6 };

__global__ void sync_kernel(int which, const float *src, float *out)
{
    __shared__ __align__(128) float stage[2][64];
    __shared__ __align__(8) uint64_t full[2];
    __shared__ __align__(8) uint64_t empty[2];
    __shared__ __align__(8) uint64_t freed[2];
    __shared__ __align__(8) uint64_t late;
    __shared__ __align__(8) uint64_t never;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    (void)never;
    if (threadIdx.x == 0) {
        for (int i = 0; i < 2; i++) {
            mbarrier_init(&full[i], 1);
            mbarrier_init(&empty[i], 32);
            mbarrier_init(&freed[i], 1);
        }
        mbarrier_fence_init();
    }
    __syncthreads();
    float v = 0.0f;
    switch (which) {
    case NAMED_HANDOFF:
    case NAMED_NO_SYNC:
        if (warp == 0) {
            stage[0][lane] = src[lane];
            named_barrier_arrive(1, 64);
        } else {
            if (which == NAMED_HANDOFF)
                named_barrier_sync(1, 64);
            v = stage[0][lane];
        }
        break;
    case MBAR_HANDOFF:
    case MBAR_WRONG_PARITY:
    case MBAR_NO_SYNCWARP:
    case MBAR_LANE_WAITS:
    case MBAR_LANE_WAITS_ALONE:
        if (warp == 0) {
            stage[0][lane] = src[lane];
            if (which != MBAR_NO_SYNCWARP)
                __syncwarp();
            if (lane == 0)
                mbarrier_arrive(&full[0]);
        } else {
            const bool one_lane = which == MBAR_LANE_WAITS || which == MBAR_LANE_WAITS_ALONE;
            if (!one_lane || lane == 0)
                mbarrier_wait_parity(&full[0], which == MBAR_WRONG_PARITY ? 1 : 0);
            if (which == MBAR_LANE_WAITS)
                __syncwarp();
            else if (which == MBAR_LANE_WAITS_ALONE)
                v = (float)__shfl_sync(0xffffffffu, lane, 0);
            v = stage[0][lane];
        }
        break;
    case MBAR_PARTIAL_CHAIN:
    case MBAR_PARTIAL_NO_CHAIN:
        if (warp == 0) {
            const bool chain = which == MBAR_PARTIAL_CHAIN;
            stage[0][lane] = src[lane];
            if (lane >= 16)
                __syncwarp(0xffff0000u);
            if (lane < 16 || (chain && lane == 16))
                __syncwarp(chain ? 0x0001ffffu : 0x0000ffffu);
            if (lane == 0)
                mbarrier_arrive(&full[0]);
        } else {
            mbarrier_wait_parity(&full[0], 0);
            v = stage[0][lane];
        }
        break;
    case RING:
    case RING_EARLY_RELEASE:
    case RING_LANE_RELEASES:
    case RING_LANE_RELEASES_ALONE:
        for (int r = 0; r < ROUNDS; r++) {
            const int s = r % 2;
            const unsigned use = (unsigned)(r / 2) & 1u; /* the parity of this use of stage s */
            const bool lane_releases = which == RING_LANE_RELEASES || which == RING_LANE_RELEASES_ALONE;
            if (warp == 0) {
                mbarrier_wait_parity(lane_releases ? &freed[s] : &empty[s], use ^ 1u);
                stage[s][lane] = src[(32 * r + lane) % 64] + (float)r;
                __syncwarp();
                if (lane == 0)
                    mbarrier_arrive(&full[s]);
            } else {
                mbarrier_wait_parity(&full[s], use);
                if (which == RING_EARLY_RELEASE)
                    mbarrier_arrive(&empty[s]);
                v += stage[s][lane];
                if (which == RING)
                    mbarrier_arrive(&empty[s]);
                if (which == RING_LANE_RELEASES)
                    __syncwarp();
                if (lane_releases && lane == 0)
                    mbarrier_arrive(&freed[s]);
            }
        }
        break;
    case BULK_HANDOFF:
    case BULK_NO_WAIT:
        if (warp == 0 && lane == 0) {
            mbarrier_arrive_expect_tx(&full[0], 64 * sizeof(float));
            cp_async_bulk(stage[0], src, 64 * sizeof(float), &full[0]);
        } else if (warp == 1) {
            if (which == BULK_HANDOFF)
                mbarrier_wait_parity(&full[0], 0);
            v = stage[0][lane] + stage[0][lane + 32];
        }
        break;
    case BULK_OTHER_STAGE:
        if (warp == 0 && lane == 0) {
            for (int s = 0; s < 2; s++) {
                mbarrier_arrive_expect_tx(&full[s], 64 * sizeof(float));
                cp_async_bulk(stage[s], src, 64 * sizeof(float), &full[s]);
            }
        } else if (warp == 1) {
            mbarrier_wait_parity(&full[1], 0);
            v = stage[0][lane];
        }
        break;
    case MBAR_NEVER_ARRIVES:
        if (warp == 1)
            mbarrier_wait_parity(&full[0], 0);
        break;
    case NAMED_SHORT:
        if (warp == 1)
            named_barrier_sync(2, 64);
        break;
    case BULK_SHORT:
        if (warp == 0 && lane == 0) {
            mbarrier_arrive_expect_tx(&full[0], 128 * sizeof(float));
            cp_async_bulk(stage[0], src, 64 * sizeof(float), &full[0]);
        } else if (warp == 1) {
            mbarrier_wait_parity(&full[0], 0);
        }
        break;
    case MBAR_NO_INIT:
        if (warp == 1)
            mbarrier_wait_parity(&never, 0);
        break;
    case NAMED_UNBALANCED:
        if (warp == 0)
            named_barrier_arrive(3, 64);
        break;
    case MBAR_INIT_UNORDERED:
        if (threadIdx.x == 0)
            mbarrier_init(&late, 2);
        else if (threadIdx.x == 32)
            mbarrier_arrive(&late);
        break;
    }
    out[threadIdx.x] = v;
}

/* The register cases: 384 threads, one block a multiprocessor, so 168 registers a thread at launch
 * (ptxas's count for a kernel with setmaxnreg) and a pool that starts empty. */
__global__ void __launch_bounds__(384, 1) regs_kernel(int which, const float *src, float *out)
{
    __shared__ float stage[32];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    float v = 0.0f;
    if (warp >= 8) { /* the producer warpgroup */
        if (which != REGS_NO_DEC)
            setmaxnreg_dec<24>();
        if (warp == 8) {
            stage[lane] = src[lane];
            named_barrier_arrive(1, 64);
        }
        return;
    }
    switch (which) {
    case REGS_HANDOFF:
    case REGS_NO_DEC: setmaxnreg_inc<240>(); break;
    case REGS_OVER: setmaxnreg_inc<256>(); break;
    case REGS_PART:
        if (warp % 4 < 2)
            setmaxnreg_inc<240>();
        break;
    case REGS_MISMATCH:
        if (warp == 0)
            setmaxnreg_inc<240>();
        else
            setmaxnreg_inc<232>();
        break;
    case REGS_BELOW: setmaxnreg_inc<160>(); break;
    }
    if (warp == 1) {
        named_barrier_sync(1, 64);
        v = stage[lane];
    }
    if (warp < 2)
        out[threadIdx.x] = v;
}

extern "C" int emu_sync(int which, const float *src, float *out)
{
    if (which >= REGS_HANDOFF)
        DDP_LAUNCH(regs_kernel, 1, 384, 0, 0, which, src, out);
    else
        DDP_LAUNCH(sync_kernel, 1, 64, 0, 0, which, src, out);
    return (int)DDP_LAUNCH_STATUS();
}
