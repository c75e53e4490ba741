/* test_cudaemu_race.c — the emulator's shared-memory race check (cudaemu_race.cpp) finds what
 * compute-sanitizer's racecheck would.
 *
 * Proves, under every fiber order: a read of another warp's write (RAW), a write over another
 * warp's read (WAR) and two warps writing one word (WAW) with no __syncthreads between them abort
 * naming the hazard, the kernel and the shared-memory byte; so do a plain read of another warp's
 * atomic update, a read of a cp.async's destination by another warp after the issuing warp's wait
 * but before a barrier or while the copy is in flight, and a write over rows another warp's
 * ldmatrix reads, and a lane's read of a word another lane of its warp wrote with no __syncwarp
 * between them (racecheck compares a warp's lanes too), or with partial-mask __syncwarps that both
 * took part in but that no chain leads through from the writer to the reader; a lane overwriting a
 * word every lane of its warp read, and another warp overwriting it after one lane's arrival freed
 * it, with no __syncwarp before (whichever lane read last). The same accesses with the barrier,
 * atomics from several warps, one warp's lanes sharing words after __syncwarp (a whole warp's, or a
 * chain of partial-mask ones, also while the warp's other lanes shuffle), and a shared word freed
 * after a __syncwarp or by every lane's own arrival, or overwritten after a __syncwarp by a lane that
 * read it again, run; so does a lane reading what another lane waited for once a partial-mask and
 * then a whole-warp __syncwarp passed it on. Accesses to parts of a float are judged byte by byte,
 * as the check's shadow splits and merges its 4-byte granules: a write beside another warp's byte
 * read runs, a write over it aborts naming that byte, and neither a merge nor a split loses a byte's
 * own reader or its clock. Under the forward order (warp 0 first) the kind named is the one the
 * case is built for.
 * And in device memory between one block's threads (cudaemu_global_race.cpp), where no sanitizer
 * looks and a GPU reads whichever value arrived: the same RAW, WAR and WAW between warps, a lane
 * reading another lane's store with no __syncwarp (or partial-mask ones no chain leads through),
 * and a cp.async copying from what another warp stored abort naming both threads and the
 * allocation's byte; a write after two threads' reads is checked against both, whichever ran first
 * (one thread waits at a named barrier the other's unordered read comes after). The barrier,
 * __syncwarp (and a chain of partial-mask ones) and named-barrier hand-overs run. Parts of a float
 * are judged byte by byte there too (its shadow splits and merges words as shared memory's does),
 * in the shared-memory cases' accesses, naming the same bytes.
 * DDP_CUDA_EMU_RACE_GRIDS=N: a kernel's racy grid after N race-free grids of it runs unchecked, and
 * aborts when it is among the first N (in shared and in device memory); the count is per kernel
 * (another kernel's grids do not use it up); a malformed N aborts naming the variable. */
#include "emu_test_util.h"
#include "tests/check.h"

#include <cuda_runtime_api.h>
#include <ctype.h>
#include <signal.h>
#include <stdbool.h>

int emu_race(int which, const float *src, float *out);
int emu_global_race(int which, float *g, float *out);

enum { SHARED_CASES = 28, GLOBAL_CASES = 18 };

/* One kernel's cases and what its reports say. */
struct race_family {
    int (*launch)(int which, float *buf, float *out);
    int cases;
    const char *const *expect; /* the kind each case reports under the forward order; NULL: no race */
    const char *title, *where; /* in every report of the family */
    const char *kind_word;     /* after the kind ("RAW hazard", "RAW race") */
    const int *byte; /* the byte each case's report names under the forward order (-1: any) */
};

static int launch_shared(int which, float *buf, float *out) { return emu_race(which, buf, out); }

static const char *const shared_expect[SHARED_CASES] = {"RAW", NULL, "WAR", "WAW", NULL, NULL,
                                                        "RAW", NULL, "RAW", "RAW", "WAR", "RAW", "RAW", NULL, NULL,
                                                        "WAR", "WAR", NULL, NULL, NULL, NULL, "RAW", "RAW", "RAW",
                                                        NULL, "RAW", "WAR", NULL};
/* Where cases 20-26 (bytes of a float) must put the race: where the record of one byte differs from
 * its granule's others. */
static const int shared_byte[SHARED_CASES] = {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                              -1, -1, -1, -1, 6, 15, 8, -1, 17, 21, -1};
static const char *const global_expect[GLOBAL_CASES] = {"RAW", NULL, "WAR", "WAW", NULL, "RAW", NULL, "WAR", "RAW",
                                                        "WAR", "RAW", NULL, NULL, "RAW", "RAW", "RAW", NULL, "RAW"};
/* Cases 12-17 are shared_byte's 20-25 in device memory. */
static const int global_byte[GLOBAL_CASES] = {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 6, 15, 8, -1, 17};
static const struct race_family families[] = {
    {launch_shared, SHARED_CASES, shared_expect, "shared-memory race in kernel race_kernel",
     "static __shared__ object", "hazard", shared_byte},
    {emu_global_race, GLOBAL_CASES, global_expect,
     "global-memory race between threads of a block in kernel global_race_kernel", "of the same block", "race",
     global_byte},
};
static const struct race_family *family; /* the one run_case runs, for the forked child */

/* Whether a report names byte n ("byte n", not followed by another digit). */
static bool names_byte(const char *report, int n)
{
    char want[32];
    snprintf(want, sizeof want, "byte %d", n);
    for (const char *p = strstr(report, want); p; p = strstr(p + 1, want))
        if (!isdigit((unsigned char)p[strlen(want)]))
            return true;
    return false;
}

static void run_case(int which)
{
    float *buf = NULL, *out = NULL;
    cudaMalloc((void **)&buf, 64 * sizeof(float));
    cudaMalloc((void **)&out, 64 * sizeof(float));
    cudaMemset(buf, 0, 64 * sizeof(float));
    family->launch(which, buf, out);
    _exit(cudaDeviceSynchronize() == cudaSuccess ? 0 : 3);
}

static void run_family(const struct race_family *f)
{
    family = f;
    for (int o = 0; o < EMU_ORDER_COUNT; o++) {
        emu_set_order(emu_orders[o]);
        for (int which = 0; which < f->cases; which++) {
            char buf[4096];
            int status = emu_run_in_child(run_case, which, buf, sizeof buf);
            if (!f->expect[which]) {
                CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: race-free case %d, order %s: status "
                      "0x%x: %s", f->title, which, emu_orders[o], status, buf);
                continue;
            }
            CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "%s: racy case %d, order %s: status 0x%x, "
                  "expected an abort", f->title, which, emu_orders[o], status);
            CHECK(strstr(buf, f->title) && strstr(buf, f->where), "racy case %d, order %s: expected \"%s\" and "
                  "\"%s\" in: %s", which, emu_orders[o], f->title, f->where, buf);
            char kind[32];
            snprintf(kind, sizeof kind, "%s %s", f->expect[which], f->kind_word);
            CHECK(o != 0 || strstr(buf, kind), "racy case %d, forward order: expected \"%s\" in: %s", which, kind,
                  buf);
            const int at = f->byte[which];
            CHECK(o != 0 || at < 0 || names_byte(buf, at), "racy case %d, forward order: expected byte %d in: %s",
                  which, at, buf);
        }
    }
}

/* DDP_CUDA_EMU_RACE_GRIDS=limit, then `clean` race-free grids (case 1) of family `before`'s kernel,
 * then a racy grid (case 0) of family `racy`'s: whether it aborts. */
struct limit_case {
    const char *limit;
    int clean, before, racy;
    bool aborts;
};
static const struct limit_case limit_cases[] = {
    {"2", 2, 0, 0, false}, /* shared memory: the third grid is not checked */
    {"3", 2, 0, 0, true},  /* ... the third of three is */
    {"0", 0, 0, 0, false}, /* none is */
    {"2", 2, 1, 1, false}, /* device memory too */
    {"3", 2, 1, 1, true},
    {"1", 3, 1, 0, true},  /* each kernel counts its own grids: race_kernel's first is checked */
};

static void run_limited(int which)
{
    const struct limit_case *c = &limit_cases[which];
    setenv("DDP_CUDA_EMU_RACE_GRIDS", c->limit, 1);
    float *buf = NULL, *out = NULL;
    cudaMalloc((void **)&buf, 64 * sizeof(float));
    cudaMalloc((void **)&out, 64 * sizeof(float));
    cudaMemset(buf, 0, 64 * sizeof(float));
    for (int i = 0; i < c->clean; i++)
        families[c->before].launch(1, buf, out);
    families[c->racy].launch(0, buf, out);
    _exit(cudaDeviceSynchronize() == cudaSuccess ? 0 : 3);
}

static void run_malformed(int unused)
{
    (void)unused;
    setenv("DDP_CUDA_EMU_RACE_GRIDS", "8x", 1);
    float *buf = NULL, *out = NULL;
    cudaMalloc((void **)&buf, 64 * sizeof(float));
    cudaMalloc((void **)&out, 64 * sizeof(float));
    emu_race(1, buf, out);
    _exit(cudaDeviceSynchronize() == cudaSuccess ? 0 : 3);
}

static void run_grid_limits(void)
{
    emu_set_order("forward");
    char buf[4096];
    for (int i = 0; i < (int)(sizeof limit_cases / sizeof limit_cases[0]); i++) {
        const struct limit_case *c = &limit_cases[i];
        const int status = emu_run_in_child(run_limited, i, buf, sizeof buf);
        if (c->aborts)
            CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT && strstr(buf, families[c->racy].title),
                  "RACE_GRIDS=%s, %d clean grids of %s, then a racy one of %s: expected its race, got status "
                  "0x%x: %s", c->limit, c->clean, families[c->before].title, families[c->racy].title, status, buf);
        else
            CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "RACE_GRIDS=%s, %d clean grids, then a racy "
                  "one of %s: expected it unchecked, got status 0x%x: %s", c->limit, c->clean,
                  families[c->racy].title, status, buf);
    }
    const int status = emu_run_in_child(run_malformed, 0, buf, sizeof buf);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT && strstr(buf, "DDP_CUDA_EMU_RACE_GRIDS=8x"),
          "RACE_GRIDS=8x: expected an abort naming it, got status 0x%x: %s", status, buf);
}

int main(void)
{
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
        run_family(&families[i]);
    run_grid_limits();
    return check_done("test_cudaemu_race");
}
