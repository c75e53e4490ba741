/* mpi_allreduce_loop.c — the baseline for scripts/bench-allreduce: a plain loop over
 * MPI_Allreduce (float, sum, out of place, MPI_COMM_WORLD) timed exactly like ddprun-bench times
 * a row (warm-up, barrier, N iterations, per-iteration time averaged over ranks), so the ratio
 * of the two shows what our communicator layer costs. Prints "bytes time_us busbw_GBps" lines.
 * It must stay plain MPI: no ddprun code, no checking. MPI_THREAD_SINGLE unless
 * MPI_LOOP_THREAD_LEVEL=funneled asks for the level ddprun's processes run at (they have threads
 * that make no MPI calls): Open MPI 4.1 adds about 0.13 us to every call at FUNNELED.
 * usage: mpi-allreduce-loop MIN_BYTES MAX_BYTES [ITERS [WARMUP]] (sizes double each row) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    const char *level = getenv("MPI_LOOP_THREAD_LEVEL");
    int provided = 0;
    MPI_Init_thread(&argc, &argv, level && !strcmp(level, "funneled") ? MPI_THREAD_FUNNELED : MPI_THREAD_SINGLE,
                    &provided);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 3) {
        if (rank == 0)
            fprintf(stderr, "usage: %s MIN_BYTES MAX_BYTES [ITERS [WARMUP]]\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    size_t lo = strtoull(argv[1], NULL, 10), hi = strtoull(argv[2], NULL, 10);
    int iters = argc > 3 ? atoi(argv[3]) : 20, warmup = argc > 4 ? atoi(argv[4]) : 5;
    float *send = malloc(hi ? hi : 4), *recv = malloc(hi ? hi : 4);
    if (!send || !recv || iters < 1 || lo < 4) {
        fprintf(stderr, "mpi-allreduce-loop: bad arguments or out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    memset(send, 0, hi);
    memset(recv, 0, hi);
    for (size_t bytes = lo; bytes <= hi; bytes *= 2) {
        int count = (int)(bytes / sizeof(float));
        for (int i = 0; i < warmup; i++)
            MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < iters; i++)
            MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double t = (MPI_Wtime() - t0) / iters, sum = 0;
        MPI_Allreduce(&t, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        double sec = sum / size, busbw = (double)count * sizeof(float) / 1e9 / sec * 2.0 * (size - 1) / size;
        if (rank == 0)
            printf("%zu %.3f %.4f\n", (size_t)count * sizeof(float), sec * 1e6, busbw);
    }
    free(send);
    free(recv);
    MPI_Finalize();
    return 0;
}
