/* op_times.h — per-op time accounting for the CUDA-against-CPU tests (test_cuda_kernels.c,
 * test_cuda_transformer.c, test_cuda_bf16.c): each timed device op adds its wall time under its name, and the test
 * prints the table at the end, so a slow emulated kernel shows up in the log. Header-only and
 * test-only; it must not check anything. */
#ifndef DDP_TEST_OP_TIMES_H
#define DDP_TEST_OP_TIMES_H

#include <stdio.h>
#include <string.h>

#define OP_TIMES_MAX 48

static struct op_time {
    const char *name;
    double ms;
    int calls;
} op_times[OP_TIMES_MAX + 1]; /* the last entry stays empty: it ends the table */

/* Adds ms to op name's total; names past OP_TIMES_MAX go uncounted (timing is informational). */
static inline void op_time_add(const char *name, double ms)
{
    int i = 0;
    while (i < OP_TIMES_MAX && op_times[i].name && strcmp(op_times[i].name, name) != 0)
        i++;
    if (i == OP_TIMES_MAX)
        return;
    op_times[i].name = name;
    op_times[i].ms += ms;
    op_times[i].calls++;
}

static inline void op_times_print(void)
{
    for (int i = 0; op_times[i].name; i++)
        fprintf(stderr, "  op %-27s %5d calls %9.1f ms\n", op_times[i].name, op_times[i].calls, op_times[i].ms);
}

#endif
