/* test_cudaemu_tensor.c — the emulator's tensor-core and cp.async instructions follow the PTX ISA.
 *
 * Proves, under every fiber order: ldmatrix .x1/.x2/.x4 with and without .trans hands each lane
 * the elements the ISA's fragment figures assign it (checked against the layout written out here
 * from the ISA text, with rows padded so addresses are not contiguous); mma.m16n8k16 with bf16
 * operands computes A·B + C for operands loaded by ldmatrix, and for raw registers placed by the
 * ISA's A/B/C layouts (a wrong layout in either place gives another product); cp.async copies land
 * at the wait that covers their group, with zero fill past src-size; and the broken kernels abort
 * naming the rule (misaligned or non-shared ldmatrix rows, misaligned or non-shared cp.async
 * destinations, a partial warp at an mma, lanes at two different mma call sites, a cp.async
 * destination read before its wait_group, which is a race on a GPU whatever barriers pass). */
#include "emu_test_util.h"
#include "tests/check.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>

int emu_ldmatrix(const uint16_t *src, uint32_t *out, int count, int trans, int pitch);
int emu_mma(const uint16_t *a, const uint16_t *b, const float *c, float *d);
int emu_mma_regs(const uint32_t *a, const uint32_t *b, float *out);
int emu_cp_async(const float *src, float *out, int n_chunks, int valid, int mode);
int emu_tensor_broken(int which, float *gmem);

static void *to_device(const void *host, size_t bytes)
{
    void *d = NULL;
    CHECK(cudaMalloc(&d, bytes) == cudaSuccess, "cudaMalloc");
    CHECK(cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice) == cudaSuccess, "H2D");
    return d;
}

static void from_device(void *host, const void *dev, size_t bytes)
{
    CHECK(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost) == cudaSuccess, "D2H");
}

/* bf16 of a small integer-valued float: exact, so products and sums are exact too. */
static uint16_t bf16_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (uint16_t)(u >> 16);
}

static float float_of(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* ldmatrix: matrix m (8x8, row-major) holds 1000 m + 8 r + c; lane L's register m must hold
 * (row L/4, columns 2(L%4), +1) of matrix m, or with .trans (rows 2(L%4), +1 of column L/4). */
static void test_ldmatrix(void)
{
    uint16_t src[256];
    for (int i = 0; i < 256; i++)
        src[i] = (uint16_t)(1000 * (i / 64) + i % 64);
    uint16_t *dsrc = to_device(src, sizeof src);
    uint32_t *dout = NULL;
    cudaMalloc((void **)&dout, 32 * 4 * sizeof(uint32_t));
    const int counts[] = {1, 2, 4, 2, 4}, transes[] = {0, 0, 0, 1, 1}, pitches[] = {8, 16, 24, 8, 16};
    for (int o = 0; o < EMU_ORDER_COUNT; o++) {
        emu_set_order(emu_orders[o]);
        for (int v = 0; v < 5; v++) {
            CHECK_EQ_INT(emu_ldmatrix(dsrc, dout, counts[v], transes[v], pitches[v]), cudaSuccess);
            uint32_t out[128];
            from_device(out, dout, sizeof out);
            int wrong = 0;
            for (int lane = 0; lane < 32; lane++)
                for (int m = 0; m < counts[v]; m++) {
                    int g = lane / 4, t = lane % 4;
                    int r0 = transes[v] ? 2 * t : g, c0 = transes[v] ? g : 2 * t;
                    int r1 = transes[v] ? 2 * t + 1 : g, c1 = transes[v] ? g : 2 * t + 1;
                    uint32_t want = (uint32_t)(1000 * m + 8 * r0 + c0) | (uint32_t)(1000 * m + 8 * r1 + c1) << 16;
                    wrong += out[lane * 4 + m] != want;
                }
            CHECK(wrong == 0, "ldmatrix x%d%s pitch %d order %s: %d registers differ from the ISA's layout",
                  counts[v], transes[v] ? ".trans" : "", pitches[v], emu_orders[o], wrong);
        }
    }
    cudaFree(dsrc);
    cudaFree(dout);
}

/* D = A·B + C with small integers: exact in any summation order. */
static void test_mma_through_ldmatrix(void)
{
    uint16_t a[256], b[128];
    float c[128], ha[256], hb[128];
    for (int i = 0; i < 256; i++) {
        ha[i] = (float)((i * 7 + 3) % 17 - 8);
        a[i] = bf16_of(ha[i]);
    }
    for (int i = 0; i < 128; i++) {
        hb[i] = (float)((i * 5 + 1) % 13 - 6);
        b[i] = bf16_of(hb[i]);
        c[i] = (float)(i % 9) - 4.0f;
    }
    uint16_t *da = to_device(a, sizeof a), *db = to_device(b, sizeof b);
    float *dc = to_device(c, sizeof c), *dd = NULL;
    cudaMalloc((void **)&dd, sizeof c);
    for (int o = 0; o < EMU_ORDER_COUNT; o++) {
        emu_set_order(emu_orders[o]);
        CHECK_EQ_INT(emu_mma(da, db, dc, dd), cudaSuccess);
        float d[128];
        from_device(d, dd, sizeof d);
        int wrong = 0;
        for (int r = 0; r < 16; r++)
            for (int n = 0; n < 8; n++) {
                float want = c[r * 8 + n];
                for (int k = 0; k < 16; k++)
                    want += ha[r * 16 + k] * hb[k * 8 + n];
                wrong += d[r * 8 + n] != want;
            }
        CHECK(wrong == 0, "mma through ldmatrix, order %s: %d of 128 outputs differ from A·B + C", emu_orders[o],
              wrong);
    }
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
    cudaFree(dd);
}

/* Registers placed by the ISA's figures (g = lane/4, t = lane%4): a_i at row g + 8((i/2)%2),
 * column 2t + i%2 + 8(i/4); b_i at row 2t + i%2 + 8(i/2), column g; d_i at row g + 8(i/2),
 * column 2t + i%2. A is the identity plus a marked entry, so D shows where each B row went. */
static void test_mma_register_layout(void)
{
    float A[16][16] = {{0}}, B[16][8];
    for (int i = 0; i < 16; i++)
        A[i][i] = 1.0f;
    A[3][12] = 2.0f; /* row 3 also takes 2 x row 12 of B */
    for (int k = 0; k < 16; k++)
        for (int n = 0; n < 8; n++)
            B[k][n] = (float)(k * 8 + n);
    uint32_t ra[128], rb[64];
    for (int lane = 0; lane < 32; lane++) {
        int g = lane / 4, t = lane % 4;
        uint16_t ea[8], eb[4];
        for (int i = 0; i < 8; i++)
            ea[i] = bf16_of(A[g + 8 * ((i / 2) % 2)][2 * t + i % 2 + 8 * (i / 4)]);
        for (int i = 0; i < 4; i++)
            eb[i] = bf16_of(B[2 * t + i % 2 + 8 * (i / 2)][g]);
        for (int r = 0; r < 4; r++)
            ra[lane * 4 + r] = (uint32_t)ea[2 * r] | (uint32_t)ea[2 * r + 1] << 16;
        for (int r = 0; r < 2; r++)
            rb[lane * 2 + r] = (uint32_t)eb[2 * r] | (uint32_t)eb[2 * r + 1] << 16;
    }
    uint32_t *da = to_device(ra, sizeof ra), *db = to_device(rb, sizeof rb);
    float *dout = NULL, out[128];
    cudaMalloc((void **)&dout, sizeof out);
    emu_set_order("random:7");
    CHECK_EQ_INT(emu_mma_regs(da, db, dout), cudaSuccess);
    from_device(out, dout, sizeof out);
    int wrong = 0;
    for (int lane = 0; lane < 32; lane++)
        for (int i = 0; i < 4; i++) {
            int row = lane / 4 + 8 * (i / 2), col = 2 * (lane % 4) + i % 2;
            float want = B[row][col] + (row == 3 ? 2.0f * B[12][col] : 0.0f);
            wrong += out[lane * 4 + i] != want;
        }
    CHECK(wrong == 0, "mma with ISA-placed registers: %d of 128 accumulator elements misplaced", wrong);
    CHECK(float_of(bf16_of(2.0f)) == 2.0f, "bf16 helper");
    cudaFree(da);
    cudaFree(db);
    cudaFree(dout);
}

static void test_cp_async(void)
{
    float src[256], out[256];
    for (int i = 0; i < 256; i++)
        src[i] = (float)i + 0.5f;
    float *dsrc = to_device(src, sizeof src), *dout = NULL;
    cudaMalloc((void **)&dout, sizeof out);
    for (int o = 0; o < EMU_ORDER_COUNT; o++) {
        emu_set_order(emu_orders[o]);
        /* everything waited for: chunks below 50 copied, the rest zero-filled */
        CHECK_EQ_INT(emu_cp_async(dsrc, dout, 64, 50, 0), cudaSuccess);
        from_device(out, dout, sizeof out);
        int wrong = 0;
        for (int i = 0; i < 256; i++)
            wrong += out[i] != (i / 4 < 50 ? src[i] : 0.0f);
        CHECK(wrong == 0, "cp.async + wait_group 0, order %s: %d floats wrong", emu_orders[o], wrong);
        /* wait_group 1: the older group is there */
        CHECK_EQ_INT(emu_cp_async(dsrc, dout, 64, 64, 1), cudaSuccess);
        from_device(out, dout, 128 * sizeof(float));
        wrong = 0;
        for (int i = 0; i < 128; i++)
            wrong += out[i] != src[i];
        CHECK(wrong == 0, "cp.async + wait_group 1, older group, order %s: %d floats wrong", emu_orders[o], wrong);
    }
    cudaFree(dsrc);
    cudaFree(dout);
}

static void run_broken(int which)
{
    float *g = NULL;
    cudaMalloc((void **)&g, 256 * sizeof(float));
    emu_tensor_broken(which, g);
    cudaDeviceSynchronize();
}

static void test_broken(void)
{
    const char *expect[] = {"misaligned ldmatrix address", "ldmatrix outside shared memory", "misaligned cp.async",
                            "cp.async outside shared memory", "partial warp", "mismatched warp operation",
                            "into it is in flight"};
    for (int which = 0; which < (int)(sizeof expect / sizeof expect[0]); which++) {
        char buf[4096];
        int status = emu_run_in_child(run_broken, which, buf, sizeof buf);
        CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "broken tensor kernel %d: status 0x%x, expected "
              "abort", which, status);
        CHECK(strstr(buf, expect[which]) != NULL, "broken tensor kernel %d: expected \"%s\" in: %s", which,
              expect[which], buf);
    }
}

int main(void)
{
    test_ldmatrix();
    test_mma_through_ldmatrix();
    test_mma_register_layout();
    test_cp_async();
    test_broken();
    return check_done("test_cudaemu_tensor");
}
