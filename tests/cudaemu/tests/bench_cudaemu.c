/* bench_cudaemu.c — how fast the emulator runs (a meson benchmark, not a test: no assertions on
 * time). Reports the fiber context-switch cost (a 1024-thread block looping over __syncthreads:
 * every barrier switches into and out of every fiber) and the emulated time of small kernels.
 * Times are process CPU time, so other load on the machine inflates them less.
 * Run: meson test -C build-emu --benchmark --suite cudaemu -v */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int emu_barrier_loop(float *out, int threads, int iterations);
int emu_scale_add(const float *x, float *y, float a, int n);
int emu_block_sum(const float *x, float *partial, int n);
int emu_warp_block_sum(const float *x, float *partial, int n, int block);

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts); /* CPU time: the CI machine is shared */
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(void)
{
    const int n = 1 << 20, threads = 1024, iterations = 200;
    float *x = NULL, *y = NULL, *partial = NULL;
    if (cudaMalloc((void **)&x, (size_t)n * sizeof(float)) != cudaSuccess ||
        cudaMalloc((void **)&y, (size_t)n * sizeof(float)) != cudaSuccess ||
        cudaMalloc((void **)&partial, (size_t)n / 32 * sizeof(float)) != cudaSuccess)
        return 1;
    cudaMemset(x, 0, (size_t)n * sizeof(float));
    cudaMemset(y, 0, (size_t)n * sizeof(float));
    const char *order = getenv("DDP_CUDA_EMU_ORDER");
    printf("fiber order: %s\n", order ? order : "forward");

    double t = now_s();
    if (emu_barrier_loop(y, threads, iterations) != cudaSuccess)
        return 1;
    t = now_s() - t;
    double switches = 2.0 * threads * (iterations + 1);
    printf("context switch: %.1f ns (%d threads x %d barriers, %.3f s)\n", t / switches * 1e9, threads, iterations, t);

    const struct {
        const char *name;
        int kind;
    } kernels[] = {{"scale_add (256-thread blocks)", 0}, {"block_sum<256> (shared memory)", 1},
                   {"warp_block_sum (shuffles, 256)", 2}};
    for (int k = 0; k < 3; k++) {
        int sizes[] = {4096, n};
        for (int s = 0; s < 2; s++) {
            int reps = sizes[s] == n ? 3 : 50, rc = 0;
            t = now_s();
            for (int r = 0; r < reps; r++)
                rc |= kernels[k].kind == 0   ? emu_scale_add(x, y, 1.0f, sizes[s])
                      : kernels[k].kind == 1 ? emu_block_sum(x, partial, sizes[s])
                                             : emu_warp_block_sum(x, partial, sizes[s], 256);
            t = (now_s() - t) / reps;
            if (rc)
                return 1;
            printf("%-32s n=%8d: %9.3f ms per launch, %6.1f ns per thread\n", kernels[k].name, sizes[s], t * 1e3,
                   t / sizes[s] * 1e9);
        }
    }
    cudaFree(x);
    cudaFree(y);
    cudaFree(partial);
    return 0;
}
