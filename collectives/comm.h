/* comm.h — the communicator: the only code that knows MPI from NCCL.
 *
 * Buffers are device pointers of the device the communicator was created for (plain host memory
 * for the MPI backend). Every collective has a blocking form (req == NULL) and a non-blocking
 * form that returns a request for ops->wait / ops->test. On a GPU backend, "complete" after
 * ops->wait means later work on the device's compute stream is ordered after the collective
 * (no host synchronisation); on MPI it means the data is in place.
 * Counts are size_t: backends split anything larger than INT_MAX elements themselves.
 * Collectives must be issued in the same order with the same sizes on every rank.
 * This module must not know about models, buckets or training. */
#ifndef DDP_COMM_H
#define DDP_COMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/base/err.h"
#include "runtime/base/host_name.h"

typedef enum {
    DT_FLOAT, DT_DOUBLE, DT_HALF, DT_BFLOAT16, DT_INT32, DT_INT8, DT_UINT8, DT_INT64, DT_UINT64,
    DT_COUNT
} comm_dtype;

/* OP_AVG is the backend's own average. MPI sums, then divides in the element type (half and
 * bfloat16 in float). NCCL multiplies every rank's input by 1/size rounded to the element type,
 * then sums: exact at a power-of-two size, but bfloat16's 1/3 is 0.333984375 (0.2 % off) and
 * half's 1/3 0.33325195, so code that needs a true mean of 2-byte floats sums and scales. */
typedef enum { OP_SUM, OP_PROD, OP_MIN, OP_MAX, OP_AVG, OP_COUNT } comm_op;

typedef struct comm comm;
typedef struct comm_req comm_req;

struct comm_ops {
    const char *name; /* "mpi" or "nccl" */
    int (*allreduce)(comm *c, const void *send, void *recv, size_t count, comm_dtype dt, comm_op op, comm_req **req, ddp_err *err);
    int (*broadcast)(comm *c, void *buf, size_t count, comm_dtype dt, int root, comm_req **req, ddp_err *err);
    int (*reduce)(comm *c, const void *send, void *recv, size_t count, comm_dtype dt, comm_op op, int root, comm_req **req, ddp_err *err);
    /* recv holds size * count elements, rank r's block at r * count */
    int (*allgather)(comm *c, const void *send, void *recv, size_t count, comm_dtype dt, comm_req **req, ddp_err *err);
    /* send holds size * count elements; rank r receives the reduction of every rank's block r */
    int (*reducescatter)(comm *c, const void *send, void *recv, size_t count, comm_dtype dt, comm_op op, comm_req **req, ddp_err *err);
    /* send and recv hold size * count elements; block j of send goes to rank j */
    int (*alltoall)(comm *c, const void *send, void *recv, size_t count, comm_dtype dt, comm_req **req, ddp_err *err);
    /* sends count elements to `to` while receiving count elements from `from` */
    int (*sendrecv)(comm *c, const void *send, int to, void *recv, int from, size_t count, comm_dtype dt, comm_req **req, ddp_err *err);
    int (*barrier)(comm *c, ddp_err *err);
    int (*wait)(comm *c, comm_req *req, ddp_err *err);         /* frees req */
    int (*test)(comm *c, comm_req *req, bool *done, ddp_err *err); /* never frees; call wait after done */
    /* The end of a communicator after success: collectives still in flight may finish (NCCL: for
     * at most the timeout it was created with, then it aborts), then everything is freed. */
    void (*destroy)(comm *c);
    /* The end on an error path, when this rank or another failed and a collective may never
     * finish: nothing in flight is waited for (NCCL: ncclCommAbort), then everything is freed. */
    void (*abort)(comm *c);
};

struct comm {
    const struct comm_ops *ops;
    int rank, size;
    int local_rank, local_size;
    char host[DDP_HOST_NAME_MAX];
    void *impl;
    char label[64];   /* optional: what the caller is reducing now ("bucket 3 of 7"), named in the
                         NCCL watchdog's, ddp.debug's and the MPI deadline's messages as it was
                         when the collective was issued; backends never require it */
    char phase[32];   /* optional: where the caller is ("step 17"), named in the MPI deadline's */
    void *stream;     /* the cudaStream_t collectives run on (NCCL), so a profiler can time them in
                         its order; NULL for host-memory communicators (MPI) */
};

size_t comm_dtype_size(comm_dtype dt);
/* The relative error of one rounding to nearest in dt (2^-24 for float, 2^-8 for bfloat16 …): what
 * checks of a floating reduction's result count in; 0 for the integer types, which are exact. */
double comm_dtype_unit_roundoff(comm_dtype dt);
const char *comm_dtype_name(comm_dtype dt); /* nccl-tests names: float double half bfloat16 int32 int8 uint8 int64 uint64 */
const char *comm_op_name(comm_op op);       /* sum prod min max avg */
/* Element i of a host buffer of type dt, read as / written from a double (written values are
 * converted as a C cast would; half and bfloat16 round to nearest-even). For checking results. */
double comm_dtype_load(const void *buf, size_t i, comm_dtype dt);
void comm_dtype_store(void *buf, size_t i, comm_dtype dt, double v);

/* Every rank's verdict on a step each rank took alone (mine: this rank's status), over a
 * communicator of host buffers (the MPI backend): *first gets the lowest rank that failed (-1:
 * none) and *status that rank's status. Returns the agreement's own error, else DDP_OK. Collective. */
int comm_first_failure(comm *c, int32_t mine, int32_t *first, int32_t *status, ddp_err *err);

/* MPI backend over MPI_COMM_WORLD (MPI must be initialised). Host buffers. */
int comm_mpi_create(comm **out, ddp_err *err);
/* Collective the first time it sets one: from now on every collective of c that is waited for
 * longer than timeout_s (> 0; 0 leaves MPI's own unbounded wait) ends the job, naming the ranks
 * that did not arrive, their hosts, the collective, its label and c's phase (comm_mpi_watch.h).
 * Waiting polls, yielding the core and after 0.1 s sleeping between polls, instead of spinning in
 * MPI_Wait. Once c has a deadline, a later call only changes its length (0: unbounded, still
 * polling), and is not collective. */
int comm_mpi_set_timeout(comm *c, double timeout_s, ddp_err *err);
/* This rank is busy outside c's collectives (`what`: up to 23 bytes, "checkpoint write"): a rank
 * whose wait on c outlasted the deadline meanwhile hears so ("busy with WHAT") and starts its
 * deadline over, so a rank waiting on slow storage is not a hung one, while a rank that answers
 * nobody is still named. Answers only those that ask, nothing without a deadline or on another
 * backend. Call it every second or so while the work is under way, and end work that stopped
 * within about half the deadline (answers hold the others as long as they come). Not collective. */
void comm_mpi_busy(comm *c, const char *what);
/* The deadline's verdict line starts with this and lists the ranks that did not arrive as
 * "Not arrived: rank R (host H), ...", past twelve ranks adding "and N more ranks, on hosts A, B"
 * with every host of one; ddprun reads them from a rank's output. */
#define COMM_DEADLINE_VERDICT "ddp.timeout_s: "
/* The phase (comm.phase) of a resume's collectives, whose deadline is checkpoint.resume_timeout_s:
 * a verdict naming it, ddprun names that key. */
#define COMM_PHASE_RESUME "checkpoint resume"
/* The NCCL watchdog's last line before it aborts the communicator and ends the process:
 * COMM_WATCHDOG_ABORT, why, COMM_WATCHDOG_ABORT_END. ddprun bounds mpirun from then on, as after
 * a deadline's verdict (NCCL cannot say which rank did not arrive). */
#define COMM_WATCHDOG_ABORT "NCCL watchdog: "
#define COMM_WATCHDOG_ABORT_END "; aborting"
#define COMM_DEADLINE_NOT_ARRIVED "Not arrived: "
#define COMM_DEADLINE_ON_HOSTS ", on hosts "

/* NCCL backend: rank 0 makes the ncclUniqueId, MPI broadcasts it. */
typedef struct comm_nccl_opts {
    void *compute_stream; /* cudaStream_t of the device's compute stream, which collectives
                             order themselves after */
    int device;           /* the GPU the caller selected for this rank */
    double timeout_s;     /* > 0: a collective without progress this long ends the process (the
                             watchdog); destroy gives collectives in flight this long too */
    bool debug;           /* ddp.debug: cross-check every collective's fingerprint first */
    bool single_stream;   /* issue collectives on the compute stream itself instead of a
                             communication stream of their own: nothing overlaps them, and no
                             event ties two streams per collective (the benchmark) */
} comm_nccl_opts;
int comm_nccl_create(const comm_nccl_opts *opts, comm **out, ddp_err *err);

#endif
