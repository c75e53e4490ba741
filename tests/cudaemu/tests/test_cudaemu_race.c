/* test_cudaemu_race.c — the emulator's shared-memory race check (cudaemu_race.cpp) finds what
 * compute-sanitizer's racecheck would.
 *
 * Proves, under every fiber order: a read of another warp's write (RAW), a write over another
 * warp's read (WAR) and two warps writing one word (WAW) with no __syncthreads between them abort
 * naming the hazard, the kernel and the shared-memory byte; so do a plain read of another warp's
 * atomic update, a read of a cp.async's destination by another warp after the issuing warp's wait
 * but before a barrier or while the copy is in flight, and a write over rows another warp's
 * ldmatrix reads, and a lane's read of a word another lane of its warp wrote with no __syncwarp
 * between them (racecheck compares a warp's lanes too). The same accesses with the barrier,
 * atomics from several warps, and one warp's lanes sharing words after __syncwarp run. Under the
 * forward order (warp 0 first) the kind named is the one the case is built for. */
#include "emu_test_util.h"
#include "tests/check.h"

#include <cuda_runtime_api.h>
#include <signal.h>

int emu_race(int which, const float *src, float *out);

enum { CASES = 12 };
/* The kind each case reports under the forward order; NULL: no race. */
static const char *const expect[CASES] = {"RAW", NULL, "WAR", "WAW", NULL, NULL, "RAW", NULL, "RAW", "RAW",
                                          "WAR", "RAW"};

static void run_case(int which)
{
    float *src = NULL, *out = NULL;
    cudaMalloc((void **)&src, 64 * sizeof(float));
    cudaMalloc((void **)&out, 64 * sizeof(float));
    cudaMemset(src, 0, 64 * sizeof(float));
    emu_race(which, src, out);
    _exit(cudaDeviceSynchronize() == cudaSuccess ? 0 : 3);
}

int main(void)
{
    for (int o = 0; o < EMU_ORDER_COUNT; o++) {
        emu_set_order(emu_orders[o]);
        for (int which = 0; which < CASES; which++) {
            char buf[4096];
            int status = emu_run_in_child(run_case, which, buf, sizeof buf);
            if (!expect[which]) {
                CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "race-free case %d, order %s: status 0x%x",
                      which, emu_orders[o], status);
                continue;
            }
            CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "racy case %d, order %s: status 0x%x, "
                  "expected an abort", which, emu_orders[o], status);
            CHECK(strstr(buf, "shared-memory race in kernel race_kernel") && strstr(buf, "static __shared__ object"),
                  "racy case %d, order %s: expected a race report naming the kernel and object in: %s", which,
                  emu_orders[o], buf);
            char kind[32];
            snprintf(kind, sizeof kind, "%s hazard", expect[which]);
            CHECK(o != 0 || strstr(buf, kind), "racy case %d, forward order: expected \"%s\" in: %s", which, kind,
                  buf);
        }
    }
    return check_done("test_cudaemu_race");
}
