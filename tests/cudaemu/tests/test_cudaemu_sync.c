/* test_cudaemu_sync.c — named barriers, mbarriers and bulk copies (runtime/device/kernels/mbarrier.cuh)
 * hand shared memory from a producer warp to a consumer warp: under the emulator in every fiber order
 * (suite cudaemu), and built with -DDDP_SYNC_ON_GPU on an sm_90 GPU (suite gpu), where the hardware
 * referees the emulator's semantics for the right cases.
 *
 * Proves: bar.arrive / bar.sync, an mbarrier's phase 0, a two-stage full/empty ring over six rounds
 * (parities alternating, a fresh mbarrier's parity 1 complete) and a bulk copy completing on an
 * mbarrier's transaction count each deliver exactly the producer's values. Emulator only: the same
 * hand-overs broken abort naming the hazard — a read without the bar.sync, a wait for the wrong
 * parity (or, when the producer came first, the deadlock a GPU would hang in), consumers arriving
 * on "empty" before they read, a read of a bulk copy's destination with no wait, or after a wait on
 * another stage's mbarrier (each mbarrier orders only the copies that complete on it), an
 * mbarrier.init no barrier orders before another warp's arrival, lanes' writes that one lane's
 * arrival publishes with no __syncwarp before it (in every order, the reverse one included, where
 * every write comes before that arrival), lanes reading what only another lane of their warp waited
 * for (a wait acquires for its own lane; a __syncwarp after it passes it on: that case runs), a
 * stage refilled after one lane's arrival released it while the other lanes' reads were not
 * synced before that arrival (with the __syncwarp it runs), lanes' writes that partial-mask
 * __syncwarps lead to the arriving lane through no chain (with a chain, through a lane in both
 * syncs, it runs); and
 * the waits nothing can end are reported as deadlocks naming the wait (an mbarrier with no
 * arrival, a bar.sync short of its count, a phase short of its expected bytes), as is a wait on an
 * mbarrier never initialised, and a named barrier left half arrived at the block's end.
 * setmaxnreg (a 384-thread block, 168 registers a thread at launch): a producer warpgroup's dec to
 * 24 pays for two consumer warpgroups' inc to 240 and the hand-over after it delivers; an inc with
 * no dec before it, incs wanting more than the dec returned, and an inc half a warpgroup skips are
 * deadlocks naming the pool; counts that differ within a warpgroup, or an inc below the launch's
 * count, are misuse. Under the forward order (warp 0 first) the hazard named is the one the case is
 * built for. */
#include "tests/check.h"

#include <cuda_runtime_api.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "emu_test_util.h"

int emu_sync(int which, const float *src, float *out);

enum { NAMED_HANDOFF, NAMED_NO_SYNC, MBAR_HANDOFF, MBAR_WRONG_PARITY, RING, RING_EARLY_RELEASE, BULK_HANDOFF,
       BULK_NO_WAIT, BULK_OTHER_STAGE, MBAR_NEVER_ARRIVES, NAMED_SHORT, BULK_SHORT, MBAR_NO_INIT, MBAR_INIT_UNORDERED,
       NAMED_UNBALANCED, MBAR_NO_SYNCWARP, MBAR_LANE_WAITS, MBAR_LANE_WAITS_ALONE, RING_LANE_RELEASES,
       RING_LANE_RELEASES_ALONE, MBAR_PARTIAL_CHAIN, MBAR_PARTIAL_NO_CHAIN, REGS_HANDOFF, REGS_NO_DEC, REGS_OVER,
       REGS_PART, REGS_MISMATCH, REGS_BELOW,
       SYNC_CASES };
enum { THREADS = 64, ROUNDS = 6 };

/* What each case must do: run and deliver (NULL), or abort with `report` in its message (any
 * order) and `forward` too under the forward order. */
static const struct {
    const char *report, *forward;
} expect[SYNC_CASES] = {
    [NAMED_NO_SYNC] = {"shared-memory race", "RAW hazard"},
    /* a race when the consumer comes first; a hang (the wrong phase never comes) when the producer does */
    [MBAR_WRONG_PARITY] = {"in kernel sync_kernel", "RAW hazard"},
    [RING_EARLY_RELEASE] = {"shared-memory race", "WAR hazard"},
    [BULK_NO_WAIT] = {"shared-memory race", "RAW hazard"},
    [BULK_OTHER_STAGE] = {"shared-memory race", "through a cp.async.bulk"},
    [MBAR_NEVER_ARRIVES] = {"deadlock", "mbarrier.try_wait.parity 0 on the mbarrier set up at"},
    [NAMED_SHORT] = {"deadlock", "bar.sync 2 (32 of 64 threads arrived)"},
    [BULK_SHORT] = {"deadlock", "still needs 0 of 1 arrivals and 256 transaction bytes"},
    [MBAR_NO_INIT] = {"mbarrier used before mbarrier.init", "no mbarrier.init of this block set up"},
    [MBAR_INIT_UNORDERED] = {"in kernel sync_kernel", "WAW hazard"},
    [NAMED_UNBALANCED] = {"unbalanced named barrier", "holds 32 of its 64 threads' arrivals"},
    /* RAW when lane 0 arrives before another lane's write (or WAR when that write comes after the read);
     * when every write comes first (the reverse order), only the lanes' ordering finds it */
    [MBAR_NO_SYNCWARP] = {"shared-memory race", "RAW hazard"},
    /* RAW in every order: lanes 1-31 read after lane 0's wait (the shuffle waits for it), which
     * acquires for lane 0 alone */
    [MBAR_LANE_WAITS_ALONE] = {"shared-memory race", "RAW hazard"},
    /* WAR in every order: when every lane reads before lane 0 arrives (the reverse order), only the
     * lanes' ordering finds it */
    [RING_LANE_RELEASES_ALONE] = {"shared-memory race", "WAR hazard"},
    /* RAW in every order: lane 0's arrival speaks for lanes 16-31 through no chain of syncs */
    [MBAR_PARTIAL_NO_CHAIN] = {"shared-memory race", "RAW hazard"},
    [REGS_NO_DEC] = {"deadlock", "setmaxnreg.inc 240 in warpgroup 0 (128 of 128 threads arrived; the block's "
                     "register pool holds 0, the inc needs 9216)"},
    /* whichever warpgroup completes its inc first takes 11264 */
    [REGS_OVER] = {"deadlock", "register pool holds 7168, the inc needs 11264"},
    [REGS_PART] = {"deadlock", "(64 of 128 threads arrived"},
    [REGS_MISMATCH] = {"mismatched setmaxnreg", "other threads arrived at setmaxnreg.inc 240"},
    [REGS_BELOW] = {"invalid setmaxnreg", "setmaxnreg.inc 160 in warpgroup 0, whose threads hold 168 registers"},
};

static float source(int i) { return 0.25f * (float)i + 1.0f; }

/* What consumer lane `lane` (warp 1) holds at the end of a right case. */
static float expected(int which, int lane)
{
    switch (which) {
    case RING:
    case RING_LANE_RELEASES: {
        float sum = 0.0f;
        for (int r = 0; r < ROUNDS; r++)
            sum += source((32 * r + lane) % 64) + (float)r;
        return sum;
    }
    case BULK_HANDOFF: return source(lane) + source(lane + 32);
    default: return source(lane);
    }
}

static void check_delivery(int which, const char *order)
{
    float host[THREADS], *src = NULL, *out = NULL;
    for (int i = 0; i < THREADS; i++)
        host[i] = source(i);
    CHECK(cudaMalloc((void **)&src, sizeof host) == cudaSuccess && cudaMalloc((void **)&out, sizeof host) ==
          cudaSuccess, "cudaMalloc");
    cudaMemcpy(src, host, sizeof host, cudaMemcpyHostToDevice);
    cudaMemset(out, 0xff, sizeof host);
    CHECK(emu_sync(which, src, out) == 0 && cudaDeviceSynchronize() == cudaSuccess, "case %d (%s) runs", which,
          order);
    cudaMemcpy(host, out, sizeof host, cudaMemcpyDeviceToHost);
    int wrong = 0;
    for (int lane = 0; lane < 32; lane++)
        wrong += host[32 + lane] != expected(which, lane) || host[lane] != 0.0f;
    CHECK(wrong == 0, "case %d (%s): %d of 32 consumer lanes (or producer zeros) wrong, lane 0 has %g (want %g)",
          which, order, wrong, (double)host[32], (double)expected(which, 0));
    cudaFree(src);
    cudaFree(out);
}

#ifndef DDP_SYNC_ON_GPU
static void run_broken(int which)
{
    float *src = NULL, *out = NULL;
    cudaMalloc((void **)&src, THREADS * sizeof(float));
    cudaMalloc((void **)&out, THREADS * sizeof(float));
    cudaMemset(src, 0, THREADS * sizeof(float));
    emu_sync(which, src, out);
    _exit(cudaDeviceSynchronize() == cudaSuccess ? 0 : 3);
}

static void check_broken(int which, int forward, const char *order)
{
    char buf[8192];
    int status = emu_run_in_child(run_broken, which, buf, sizeof buf);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "broken case %d (%s): status 0x%x, expected an abort",
          which, order, status);
    const char *kernel = which >= REGS_HANDOFF ? "regs_kernel" : "sync_kernel";
    CHECK(strstr(buf, expect[which].report) && strstr(buf, kernel), "broken case %d (%s): expected \"%s\" naming %s "
          "in: %s", which, order, expect[which].report, kernel, buf);
    CHECK(!forward || strstr(buf, expect[which].forward), "broken case %d (forward): expected \"%s\" in: %s", which,
          expect[which].forward, buf);
}
#endif

int main(void)
{
#ifdef DDP_SYNC_ON_GPU
    if (!emu_have_sm90("test_sync"))
        return 77;
    for (int which = 0; which < SYNC_CASES; which++)
        if (!expect[which].report)
            check_delivery(which, "gpu");
    return check_done("test_sync (gpu)");
#else
    for (int o = 0; o < EMU_ORDER_COUNT; o++) {
        emu_set_order(emu_orders[o]);
        for (int which = 0; which < SYNC_CASES; which++) {
            if (expect[which].report)
                check_broken(which, o == 0, emu_orders[o]);
            else
                check_delivery(which, emu_orders[o]);
        }
    }
    return check_done("test_cudaemu_sync");
#endif
}
