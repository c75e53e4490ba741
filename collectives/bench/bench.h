/* bench.h — the collective bandwidth benchmark behind `ddprun -np N bench OP` (issue #4).
 *
 * One small descriptor per collective (how many elements a row moves, its bus-bandwidth factor,
 * how to fill inputs, what every result element must be, how to run it through comm.h) and one
 * shared harness for timing, checking and printing, so the same code measures every backend.
 * Inputs are small integers generated from (seed, rank, index): every result is exact in every
 * dtype and op, so a check compares for equality.
 * This module must not know which backend it drives beyond comm.h (the harness's own bookkeeping
 * — timing reductions, wrong counts, the rank table — goes over MPI, which every backend has). */
#ifndef DDP_BENCH_H
#define DDP_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collectives/comm.h"

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

/* One table row: one collective on one dtype/op/size. count = elements per rank block. */
typedef struct bench_row {
    const struct bench_coll *coll;
    comm_dtype dt;
    comm_op op;
    int root;
    size_t count;
    uint32_t seed;
    int rank, ranks;
} bench_row;

typedef struct bench_coll {
    const char *name;
    bool reduction, rooted;
    bool blocks;               /* buffers hold one count-sized block per rank (bytes = count*size*n) */
    double (*busbw_factor)(int ranks);
    /* elements of the send and receive buffers (in place uses one buffer of the larger) */
    void (*elems)(const bench_row *r, size_t *send, size_t *recv);
    /* fill this rank's inputs; in place: send == recv is the single buffer */
    void (*init)(const bench_row *r, bool in_place, void *send, void *recv);
    int (*run)(comm *c, const bench_row *r, bool in_place, void *send, void *recv, ddp_err *err);
    /* which result elements this rank checks: [*first, *first + *n) of recv */
    void (*checked)(const bench_row *r, bool in_place, size_t *first, size_t *n);
    double (*expected)(const bench_row *r, size_t j); /* result element j of the checked range */
} bench_coll;

const bench_coll *bench_find(const char *name);
const char *bench_coll_names(void); /* "allreduce allgather ..." for usage messages */

/* Host helpers the harness uses on staging buffers. */
void bench_fill_sentinel(void *buf, size_t bytes); /* a byte pattern no result ever equals */

/* Counts result elements that differ from r->coll->expected. */
size_t bench_count_wrong(const bench_row *r, bool in_place, const void *recv);

/* Options from argv (after the OP word); DDP_EUSAGE with the flag named on bad input. */
int bench_parse_args(int argc, char **argv, bench_opts *o, ddp_err *err);
void bench_usage(void);

#endif
