/* bench_colls.h — the collectives `ddprun -np N bench OP` measures, one small descriptor each:
 * how many elements a row moves, its bus-bandwidth factor, how to fill inputs, what every result
 * element must be, and how to run it through comm.h, so one harness times and checks every
 * collective on every backend alike. Inputs are small integers generated from (seed, rank,
 * index): every result is exact in every dtype and op, so a check compares for equality (but
 * NCCL's floating averages, within their rounding error).
 * Must not know which backend it drives beyond comm.h. */
#ifndef DDP_BENCH_COLLS_H
#define DDP_BENCH_COLLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collectives/comm.h"

/* One table row: one collective on one dtype/op/size. count = elements per rank block. */
typedef struct bench_row {
    const struct bench_coll *coll;
    comm_dtype dt;
    comm_op op;
    int root;
    size_t count;
    uint32_t seed;
    int rank, ranks;
    /* The backend averages floating types by pre-multiplying (NCCL, comm.h): the result is then
     * only within avg_slack of the exact mean, as the summation order is NCCL's. */
    bool avg_premultiplies;
} bench_row;

typedef enum bench_copies { COPIES_NEVER, COPIES_UNDER_NCCL, COPIES_ALWAYS } bench_copies;

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
    /* the backends whose in-place form copies the input before exchanging it (NCCL's grouped
     * send/recv has no in-place form; MPI's sendrecv receives aside): there the in-place column
     * times the exchange alone, out of place from a copy made before the loop; the check still
     * runs the in-place call. Elsewhere (MPI_IN_PLACE) the in-place call is timed as it is. */
    bench_copies in_place_copies;
} bench_coll;

const bench_coll *bench_find(const char *name);
const char *bench_coll_names(void); /* "allreduce allgather ..." for usage messages */

/* Host helpers the harness uses on staging buffers. */
void bench_fill_sentinel(void *buf, size_t bytes); /* a byte pattern no result ever equals */

/* Counts result elements that differ from r->coll->expected. */
size_t bench_count_wrong(const bench_row *r, bool in_place, const void *recv);

#endif
