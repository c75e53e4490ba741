/* bench_opts.h — ddprun-bench's options (nccl-tests' flags: sizes, iterations, check, op, dtype,
 * root, time aggregation, JSON output) plus the backend choice and the test-only fault switches.
 * Parsing only; must not act on them. */
#ifndef DDP_BENCH_OPTS_H
#define DDP_BENCH_OPTS_H

#include <stdbool.h>
#include <stddef.h>

#include "runtime/base/err.h"

enum bench_agg { AGG_AVG, AGG_MIN, AGG_MAX };

typedef struct bench_opts {
    const char *coll;          /* allreduce allgather reducescatter broadcast reduce alltoall sendrecv */
    size_t min_bytes, max_bytes;
    double step_factor;        /* used when step_bytes == 0 */
    size_t step_bytes;
    int iters, warmup;
    bool check;
    int op;                    /* comm_op, or -1 for all */
    int dtype;                 /* comm_dtype, or -1 for all */
    int root;
    enum bench_agg agg;
    const char *json_path;     /* NULL: no JSON */
    const char *backend;       /* mpi nccl auto */
    double timeout_s;          /* NCCL watchdog: a collective stalled this long ends the job */
    int corrupt_rank;          /* test only: -1, or the rank whose results get one element perturbed */
    int fail_rank;             /* test only: -1, or the rank whose second row fails as a collective error would */
} bench_opts;

/* A sweep longer than this many sizes is refused: -f 1.000001 or -i 1 would run for days. */
#define BENCH_MAX_SIZES 10000

/* Options from argv (after the OP word); DDP_EUSAGE with the flag named on bad input. */
int bench_parse_args(int argc, char **argv, bench_opts *o, ddp_err *err);
void bench_usage(void);
/* The size after bytes in the sweep: -i's step, else -f's factor (at least one byte more). */
size_t bench_next_size(const bench_opts *o, size_t bytes);

#endif
