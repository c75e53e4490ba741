/* test_cudaemu_kernels.c — the emulator runs CUDA kernels correctly and catches their bugs.
 *
 * Plain C host code against the real cuda_runtime_api.h, linked with the emulator (as
 * runtime/device/device_cuda.c is). Every kernel runs under each fiber order of emu_orders.
 * Proves: reductions through static shared memory and warp shuffles are right for block and grid sizes
 * that are not multiples of 32; a reduction missing one __syncthreads aborts with a shared-memory
 * race report under every order; unwritten shared memory reads NaN in every block (template, plain and
 * dynamic shared memory, and in an inline device function); warp intrinsics match a reference;
 * multi-dimensional geometry; launch limits reach cudaGetLastError; and each kernel bug (exited
 * lane in a mask, partial warp, exit before a barrier, divergent barriers, stack overflow, a read
 * not aligned to its size, which a GPU faults on and an x86 CPU does not, blocks adding into one
 * element or one block reading another's output, which the emulator's one-block-at-a-time order
 * gets right and a GPU does not) aborts with a message naming it. */
#include "emu_test_util.h"
#include "tests/check.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <signal.h>

int emu_block_sum(const float *x, float *partial, int n);
int emu_block_sum_racy(const float *x, float *partial, int n);
int emu_read_unwritten(int which, float *out);
int emu_warp_block_sum(const float *x, float *partial, int n, int block);
int emu_warp_intrinsics(const int *in, int *out);
int emu_coordinates(int *out, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz);
int emu_dynamic_fill(float *out, int threads, size_t smem_bytes, cudaStream_t stream);
int emu_dynamic_fill_set_limit(int bytes);
int emu_broken_kernel(int which, const float *in, float *out);

enum { MAX_N = 3000 };

static float *device_copy(const float *host, size_t n)
{
    float *d = NULL;
    CHECK(cudaMalloc((void **)&d, n * sizeof(float)) == cudaSuccess, "cudaMalloc");
    CHECK(cudaMemcpy(d, host, n * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess, "H2D");
    return d;
}

/* Runs a block-sum entry point over x[0..n) and returns the largest relative error of the partial
 * sums (NaN if any is NaN). */
static double block_sums_error(int (*launch)(const float *, float *, int), const float *x, int n, int block)
{
    float *dx = device_copy(x, (size_t)n), *dp = NULL, partial[MAX_N];
    int blocks = (n + block - 1) / block;
    cudaMalloc((void **)&dp, (size_t)blocks * sizeof(float));
    CHECK_EQ_INT(launch(dx, dp, n), cudaSuccess);
    cudaMemcpy(partial, dp, (size_t)blocks * sizeof(float), cudaMemcpyDeviceToHost);
    double worst = 0.0;
    for (int b = 0; b < blocks; b++) {
        double ref = 0.0;
        for (int i = b * block; i < n && i < (b + 1) * block; i++)
            ref += x[i];
        double err = fabs(partial[b] - ref) / (fabs(ref) + 1e-6);
        worst = isnan(partial[b]) ? NAN : (err > worst ? err : worst);
        if (isnan(worst))
            break;
    }
    cudaFree(dx);
    cudaFree(dp);
    return worst;
}

static int warp_sum_256(const float *x, float *p, int n) { return emu_warp_block_sum(x, p, n, 256); }
static int warp_sum_96(const float *x, float *p, int n) { return emu_warp_block_sum(x, p, n, 96); }
static int warp_sum_1024(const float *x, float *p, int n) { return emu_warp_block_sum(x, p, n, 1024); }

static const float *racy_input; /* test_reductions' x, for the forked child */
static void run_racy_sum(int order)
{
    emu_set_order(emu_orders[order]);
    block_sums_error(emu_block_sum_racy, racy_input, 1000, 256);
}

static void test_reductions(const float *x)
{
    const int sizes[] = {1, 255, 1000, 2049};
    racy_input = x;
    for (int o = 0; o < EMU_ORDER_COUNT; o++) {
        emu_set_order(emu_orders[o]);
        for (int s = 0; s < 4; s++) {
            int n = sizes[s];
            double e = block_sums_error(emu_block_sum, x, n, 256);
            CHECK(e < 1e-5, "block_sum n=%d order %s: rel error %g", n, emu_orders[o], e);
            e = block_sums_error(warp_sum_256, x, n, 256);
            CHECK(e < 1e-5, "warp_block_sum(256) n=%d order %s: rel error %g", n, emu_orders[o], e);
            e = block_sums_error(warp_sum_96, x, n, 96);
            CHECK(e < 1e-5, "warp_block_sum(96) n=%d order %s: rel error %g", n, emu_orders[o], e);
            e = block_sums_error(warp_sum_1024, x, n, 1024);
            CHECK(e < 1e-5, "warp_block_sum(1024) n=%d order %s: rel error %g", n, emu_orders[o], e);
        }
        char buf[4096]; /* the race check aborts at the first read of another warp's write */
        int status = emu_run_in_child(run_racy_sum, o, buf, sizeof buf);
        CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT && strstr(buf, "shared-memory race"),
              "the reduction missing a __syncthreads, order %s: status 0x%x, expected a race report in: %s",
              emu_orders[o], status, buf);
    }
}

static void test_unwritten_shared(void)
{
    static const char *const kinds[] = {"template static", "plain static", "dynamic", "device function"};
    float out[128], *d = NULL;
    cudaMalloc((void **)&d, sizeof out);
    for (int o = 0; o < EMU_ORDER_COUNT; o++) {
        emu_set_order(emu_orders[o]);
        for (int which = 0; which < 4; which++) {
            CHECK_EQ_INT(emu_read_unwritten(which, d), cudaSuccess);
            cudaMemcpy(out, d, sizeof out, cudaMemcpyDeviceToHost);
            int ones = 0, nans = 0;
            for (int i = 0; i < 64; i++)
                ones += out[i] == 1.0f;
            for (int i = 64; i < 128; i++)
                nans += isnan(out[i]) != 0;
            CHECK(ones == 64 && nans == 64, "%s shared memory (%s): block 0 read %d ones, block 1 read %d NaNs",
                  kinds[which], emu_orders[o], ones, nans);
        }
    }
    cudaFree(d);
}

static void test_warp_intrinsics(void)
{
    int in[32], out[100], *din = NULL, *dout = NULL;
    for (int i = 0; i < 32; i++)
        in[i] = (i * 7 + 3) % 31 + 1; /* 1..31, never zero */
    cudaMalloc((void **)&din, sizeof in);
    cudaMalloc((void **)&dout, sizeof out);
    cudaMemcpy(din, in, sizeof in, cudaMemcpyHostToDevice);
    for (int o = 0; o < EMU_ORDER_COUNT; o++) {
        emu_set_order(emu_orders[o]);
        CHECK_EQ_INT(emu_warp_intrinsics(din, dout), cudaSuccess);
        cudaMemcpy(out, dout, sizeof out, cudaMemcpyDeviceToHost);
        int scan = 0, bad = 0, odd_count = 0, any = 0;
        unsigned odd = 0;
        for (int i = 0; i < 32; i++) {
            scan += in[i];
            bad += out[i] != scan || out[32 + i] != in[7];
            int seg = 0;
            for (int j = i / 16 * 16; j < i / 16 * 16 + 16; j++)
                seg += in[j];
            bad += out[68 + i] != seg;
            odd |= (unsigned)(in[i] & 1) << i;
            odd_count += in[i] & 1;
            any |= in[i] > 30;
        }
        CHECK(bad == 0, "order %s: %d wrong scan/broadcast/segment values", emu_orders[o], bad);
        CHECK((unsigned)out[64] == odd, "order %s: ballot 0x%x, expected 0x%x", emu_orders[o], (unsigned)out[64], odd);
        CHECK(out[65] == any && out[66] == 1 && out[67] == odd_count, "order %s: any %d all %d count %d",
              emu_orders[o], out[65], out[66], out[67]);
    }
    cudaFree(din);
    cudaFree(dout);
}

static void test_geometry(void)
{
    const unsigned shapes[][6] = {{3, 2, 2, 8, 4, 2}, {5, 1, 1, 33, 1, 1}, {1, 3, 1, 7, 5, 3}};
    static int out[12 * 64 * 3];
    int *d = NULL;
    cudaMalloc((void **)&d, sizeof out);
    for (int s = 0; s < 3; s++) {
        const unsigned *g = shapes[s];
        emu_set_order(emu_orders[s % EMU_ORDER_COUNT]);
        CHECK_EQ_INT(emu_coordinates(d, g[0], g[1], g[2], g[3], g[4], g[5]), cudaSuccess);
        cudaMemcpy(out, d, sizeof out, cudaMemcpyDeviceToHost);
        int bad = 0, threads = (int)(g[3] * g[4] * g[5]);
        for (unsigned bz = 0; bz < g[2]; bz++)
            for (unsigned by = 0; by < g[1]; by++)
                for (unsigned bx = 0; bx < g[0]; bx++)
                    for (unsigned tz = 0; tz < g[5]; tz++)
                        for (unsigned ty = 0; ty < g[4]; ty++)
                            for (unsigned tx = 0; tx < g[3]; tx++) {
                                int blk = (int)((bz * g[1] + by) * g[0] + bx);
                                int thr = (int)((tz * g[4] + ty) * g[3] + tx);
                                int code = (int)((((bx * 8 + by) * 8 + bz) * 64 + tx) * 64 + ty) * 64 + (int)tz;
                                bad += out[blk * threads + thr] != code;
                            }
        CHECK(bad == 0, "grid (%u,%u,%u) block (%u,%u,%u): %d threads saw wrong indices", g[0], g[1], g[2], g[3],
              g[4], g[5], bad);
    }
    cudaFree(d);
}

static void test_launch_limits(void)
{
    float *d = NULL, out[1024];
    cudaMalloc((void **)&d, sizeof out);
    emu_set_order("forward");
    CHECK_EQ_INT(emu_dynamic_fill(d, 1025, 1025 * sizeof(float), 0), cudaErrorInvalidConfiguration);
    CHECK_EQ_INT(cudaGetLastError(), cudaSuccess); /* the error was returned once, then cleared */
    CHECK_EQ_INT(emu_coordinates(NULL, 1, 1, 1, 1, 1, 65), cudaErrorInvalidConfiguration);
    CHECK_EQ_INT(emu_coordinates(NULL, 1, 65536, 1, 1, 1, 1), cudaErrorInvalidConfiguration);
    CHECK_EQ_INT(emu_coordinates(NULL, 0, 1, 1, 1, 1, 1), cudaErrorInvalidConfiguration);
    CHECK_EQ_INT(emu_dynamic_fill(d, 32, 48 * 1024 + 4, 0), cudaErrorInvalidValue);
    CHECK_EQ_INT(emu_dynamic_fill_set_limit(227 * 1024 + 1), cudaErrorInvalidValue);
    CHECK_EQ_INT(cudaGetLastError(), cudaErrorInvalidValue); /* any failed call sets the last error */
    CHECK_EQ_INT(emu_dynamic_fill_set_limit(100 * 1024), cudaSuccess);
    CHECK_EQ_INT(emu_dynamic_fill(d, 1000, 100 * 1024, 0), cudaSuccess);
    cudaMemcpy(out, d, 1000 * sizeof(float), cudaMemcpyDeviceToHost);
    CHECK(out[0] == 999.0f && out[999] == 0.0f, "dynamic shared reversal: %g %g", out[0], out[999]);
    cudaStream_t s;
    cudaStreamCreate(&s);
    CHECK_EQ_INT(emu_dynamic_fill(d, 32, 128, s), cudaSuccess);
    cudaStreamDestroy(s);
    CHECK_EQ_INT(emu_dynamic_fill(d, 32, 128, s), cudaErrorInvalidResourceHandle);
    emu_set_order("sideways");
    CHECK_EQ_INT(emu_dynamic_fill(d, 32, 128, 0), cudaErrorInvalidValue);
    emu_set_order("forward");
    cudaFree(d);
}

static void run_broken(int which)
{
    float *in = NULL, *d = NULL; /* of different sizes: a report names the right one */
    cudaMalloc((void **)&in, 16 * sizeof(float));
    cudaMemset(in, 0, 16 * sizeof(float));
    cudaMalloc((void **)&d, 64 * sizeof(float));
    emu_broken_kernel(which, in, d);
    cudaDeviceSynchronize(); /* the launch only queued it */
}

static void test_bug_reports(void)
{
    static const char *const expect[][3] = { /* the kernel, what its report says (and then, if given) */
        {"shfl_after_exit", "lane 5 (thread 5) named in the mask has exited"},
        {"shfl_partial_warp", "does not exist (partial warp)"},
        {"barrier_after_exit", "threads exited, the others wait forever"},
        {"barrier_divergent", "divergent __syncthreads"},
        {"stack_overflow", "fiber stack overflow"},
        {"misaligned_uint4", "which is not 16-byte aligned"},
        {"blocks_add_up", "RAW race on byte 0 of the device allocation"},
        {"block_reads_previous", "RAW race on byte 4 of the device allocation"},
        {"last_block_rescales", "WAR race on byte 0 of the device allocation"},
        {"block_copies_previous", "RAW race on byte 16 of the device allocation"},
        {"block_reads_previous_past_input", "RAW race on byte 4 of the device allocation at 0x", "(256 bytes): block 1"},
    };
    char buf[4096];
    for (int which = 0; which < (int)(sizeof expect / sizeof expect[0]); which++) {
        emu_set_order(emu_orders[which % EMU_ORDER_COUNT]);
        int status = emu_run_in_child(run_broken, which, buf, sizeof buf);
        CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "broken kernel %s: status 0x%x, expected abort",
              expect[which][0], status);
        CHECK_STR_CONTAINS(buf, expect[which][0]);
        CHECK_STR_CONTAINS(buf, expect[which][1]);
        if (expect[which][2])
            CHECK_STR_CONTAINS(buf, expect[which][2]);
    }
}

int main(void)
{
    static float x[MAX_N];
    unsigned state = 12345;
    for (int i = 0; i < MAX_N; i++) { /* fresh non-zero values of both signs */
        state = state * 1664525u + 1013904223u;
        x[i] = ((float)(state >> 8) / 16777216.0f - 0.3f) * 4.0f + 0.01f;
    }
    test_reductions(x);
    test_unwritten_shared();
    test_warp_intrinsics();
    test_geometry();
    test_launch_limits();
    test_bug_reports();
    return check_done("test_cudaemu_kernels");
}
