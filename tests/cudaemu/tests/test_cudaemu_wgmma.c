/* test_cudaemu_wgmma.c — the warpgroup matrix instructions (runtime/device/kernels/wgmma.cuh) compute
 * A·B (+ C) with the PTX ISA's layouts: under the emulator in every fiber order (suite cudaemu), and
 * built with -DDDP_WGMMA_ON_GPU on an sm_90 GPU (suite gpu), where the hardware referees the
 * emulator's reading of the ISA.
 *
 * Proves: m64n64k16 and m64n128k16 with bf16 operands and fp32 accumulators, chained over K = 16 to
 * 64, give the exact product of small-integer operands (every sum exact in float) for A and B in
 * shared memory K-major and MN-major, without swizzle and with the 32-, 64- and 128-byte swizzles,
 * and for A in registers; scale-d 0 drops C; two warpgroups in a block each compute the whole
 * product (their warps' ranks within the group). A wrong fragment, layout, swizzle or descriptor
 * field gives another product. Emulator only: the product lands at wgmma.wait_group (the
 * accumulators read between the commit and the wait still hold what they held), and the broken
 * kernels abort naming the rule: no wgmma.fence, a descriptor outside dynamic shared memory, a
 * partial warpgroup, lanes with different descriptors, a base offset, a thread that exits before
 * the wait_group that would land its product, operands stored with no fence.proxy.async before
 * the wgmma reads them. */
#include "tests/check.h"

#include <cuda_runtime_api.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "emu_test_util.h"
#ifndef DDP_WGMMA_ON_GPU
int emu_wgmma_early_read(const uint16_t *a, const uint16_t *b, float *out_early, float *out);
int emu_wgmma_broken(int which, float *gmem);
#endif
int emu_wgmma_gemm(const uint16_t *a, const uint16_t *b, const float *c, float *d, int n, int k, int a_mn,
                   int a_swizzle, int b_mn, int b_swizzle, int a_regs, int accumulate, int groups);

enum { INTER = 0, S128 = 1, S64 = 2, S32 = 3 };

static void *to_device(const void *host, size_t bytes)
{
    void *d = NULL;
    CHECK(cudaMalloc(&d, bytes) == cudaSuccess, "cudaMalloc");
    CHECK(cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice) == cudaSuccess, "H2D");
    return d;
}

/* bf16 bits of a small integer (exact). */
static uint16_t bf16_of(int v)
{
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (uint16_t)(u >> 16);
}

typedef struct gemm_case {
    int n, k, a_mn, a_swizzle, b_mn, b_swizzle, a_regs, accumulate, groups;
} gemm_case;

/* A [64][k], B [k][n], C [64][n] of small integers; each warpgroup's d must be A·B (+ C) exactly. */
static void run_gemm(const gemm_case *c, const char *order)
{
    const int n = c->n, k = c->k;
    uint16_t *a = malloc(sizeof *a * 64 * (size_t)k), *b = malloc(sizeof *b * (size_t)(k * n));
    float *cc = malloc(sizeof *cc * 64 * (size_t)n), *d = malloc(sizeof *d * 64 * (size_t)n * (size_t)c->groups);
    int *ai = malloc(sizeof *ai * 64 * (size_t)k), *bi = malloc(sizeof *bi * (size_t)(k * n));
    for (int i = 0; i < 64 * k; i++) ai[i] = (i * 7 + 3) % 5 - 2, a[i] = bf16_of(ai[i]);
    for (int i = 0; i < k * n; i++) bi[i] = (i * 11 + 1) % 5 - 2, b[i] = bf16_of(bi[i]);
    for (int i = 0; i < 64 * n; i++) cc[i] = (float)((i * 13) % 17 - 8);
    void *da = to_device(a, sizeof *a * 64 * (size_t)k), *db = to_device(b, sizeof *b * (size_t)(k * n));
    void *dc = to_device(cc, sizeof *cc * 64 * (size_t)n), *dd = NULL;
    const size_t d_bytes = sizeof *d * 64 * (size_t)n * (size_t)c->groups;
    CHECK(cudaMalloc(&dd, d_bytes) == cudaSuccess, "cudaMalloc");
    int rc = emu_wgmma_gemm(da, db, dc, dd, n, k, c->a_mn, c->a_swizzle, c->b_mn, c->b_swizzle, c->a_regs,
                            c->accumulate, c->groups);
    CHECK(rc == 0 && cudaDeviceSynchronize() == cudaSuccess, "wgmma gemm launch: %d", rc);
    CHECK(cudaMemcpy(d, dd, d_bytes, cudaMemcpyDeviceToHost) == cudaSuccess, "D2H");
    int bad = 0, first = -1;
    for (int g = 0; g < c->groups; g++)
        for (int m = 0; m < 64; m++)
            for (int j = 0; j < n; j++) {
                long want = c->accumulate ? (long)cc[m * n + j] : 0;
                for (int q = 0; q < k; q++)
                    want += (long)ai[m * k + q] * bi[q * n + j];
                const int at = (g * 64 + m) * n + j;
                if (d[at] != (float)want && bad++ == 0)
                    first = at;
            }
    CHECK(bad == 0, "wgmma m64n%dk16 x%d (A %s%s, B %s swizzle %d, accumulate %d, %d warpgroups, order %s): %d of %d "
          "wrong, first at %d: %g", n, k / 16, c->a_regs ? "registers" : c->a_mn ? "MN-major" : "K-major",
          c->a_regs ? "" : c->a_swizzle ? " swizzled" : "", c->b_mn ? "MN-major" : "K-major", c->b_swizzle,
          c->accumulate, c->groups, order, bad, 64 * n * c->groups, first, first >= 0 ? d[first] : 0.0);
    cudaFree(da), cudaFree(db), cudaFree(dc), cudaFree(dd);
    free(a), free(b), free(cc), free(d), free(ai), free(bi);
}

static void test_gemms(const char *order)
{
    const gemm_case cases[] = {
        {64, 32, 0, INTER, 0, INTER, 0, 1, 1},  {64, 64, 0, S128, 0, S128, 0, 1, 1},
        {128, 64, 0, S128, 0, S128, 0, 0, 2},   {64, 32, 0, S64, 0, S64, 0, 1, 1},
        {64, 16, 0, S32, 0, S32, 0, 1, 1},      {128, 64, 0, S128, 1, S128, 0, 1, 1},
        {64, 32, 0, INTER, 1, INTER, 0, 1, 1},  {64, 64, 1, S128, 0, S128, 0, 1, 1},
        {64, 64, 0, INTER, 0, S128, 1, 1, 1},   {128, 32, 0, INTER, 1, S64, 1, 0, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_gemm(&cases[i], order);
}

#ifndef DDP_WGMMA_ON_GPU
/* Between the commit and the wait the accumulators still hold -1; after it, A·B. */
static void test_early_read(void)
{
    uint16_t a[64 * 16], b[16 * 64];
    int ai[64 * 16], bi[16 * 64];
    for (int i = 0; i < 64 * 16; i++) ai[i] = i % 3 - 1, a[i] = bf16_of(ai[i]);
    for (int i = 0; i < 16 * 64; i++) bi[i] = i % 5 - 2, b[i] = bf16_of(bi[i]);
    void *da = to_device(a, sizeof a), *db = to_device(b, sizeof b), *de = NULL, *dout = NULL;
    CHECK(cudaMalloc(&de, 128 * 32 * sizeof(float)) == cudaSuccess && cudaMalloc(&dout, 128 * 32 * sizeof(float)) ==
          cudaSuccess, "cudaMalloc");
    CHECK(emu_wgmma_early_read(da, db, de, dout) == 0 && cudaDeviceSynchronize() == cudaSuccess, "early read");
    static float early[128 * 32], out[128 * 32];
    cudaMemcpy(early, de, sizeof early, cudaMemcpyDeviceToHost);
    cudaMemcpy(out, dout, sizeof out, cudaMemcpyDeviceToHost);
    int stale = 0, right = 0;
    for (int th = 0; th < 128; th++)
        for (int j = 0; j < 32; j++) {
            const int lane = th % 32, row = 16 * (th / 32) + lane / 4 + 8 * (j % 4 / 2);
            const int col = 8 * (j / 4) + 2 * (lane % 4) + j % 2;
            long want = 0;
            for (int q = 0; q < 16; q++)
                want += (long)ai[row * 16 + q] * bi[q * 64 + col];
            stale += early[th * 32 + j] == -1.0f;
            right += out[th * 32 + j] == (float)want;
        }
    CHECK(stale == 128 * 32, "accumulators read before wgmma.wait_group: %d of %d still -1", stale, 128 * 32);
    CHECK(right == 128 * 32, "accumulators after wgmma.wait_group: %d of %d right", right, 128 * 32);
    cudaFree(da), cudaFree(db), cudaFree(de), cudaFree(dout);
}

static void run_broken(int which)
{
    float *g = NULL;
    cudaMalloc((void **)&g, 256 * sizeof(float));
    emu_wgmma_broken(which, g);
    cudaDeviceSynchronize();
}

static void test_broken(void)
{
    const char *expect[] = {"wgmma without a fence", "wgmma descriptor outside dynamic shared memory",
                            "partial warpgroup", "mismatched wgmma operands", "unsupported wgmma descriptor",
                            "exits with wgmma products in flight", "shared-memory proxy hazard"};
    for (int which = 0; which < (int)(sizeof expect / sizeof expect[0]); which++) {
        char buf[4096];
        int status = emu_run_in_child(run_broken, which, buf, sizeof buf);
        CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "broken wgmma kernel %d: status 0x%x, expected "
              "abort", which, status);
        CHECK(strstr(buf, expect[which]) != NULL, "broken wgmma kernel %d: expected \"%s\" in: %s", which,
              expect[which], buf);
    }
}
#endif

int main(void)
{
#ifdef DDP_WGMMA_ON_GPU
    if (!emu_have_sm90("test_wgmma"))
        return 77;
    test_gemms("gpu");
    return check_done("test_wgmma (gpu)");
#else
    for (int i = 0; i < EMU_ORDER_COUNT; i++) {
        emu_set_order(emu_orders[i]);
        test_gemms(emu_orders[i]);
    }
    test_early_read();
    test_broken();
    return check_done("test_cudaemu_wgmma");
#endif
}
