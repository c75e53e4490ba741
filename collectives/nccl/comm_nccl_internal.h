/* comm_nccl_internal.h — what the NCCL backend's files share: the backend state, the ring of
 * in-flight collectives (slots) that requests and the watchdog look at, and fingerprints.
 *   comm_nccl_create.c    creation: the NCCL communicator, the streams, events and watchdog
 *   comm_nccl.c           the collectives (a table of kinds, one path each takes), wait/test
 *   comm_nccl_teardown.c  destroy and abort, with every wait bounded
 *   comm_nccl_watchdog.c  the host thread that aborts a stalled or failed communicator and
 *                         bounds the teardown
 *   comm_nccl_check.c     ddp.debug fingerprint cross-check and the test-only fault switches
 * Internal to collectives/; nothing outside includes it. */
#ifndef DDP_COMM_NCCL_INTERNAL_H
#define DDP_COMM_NCCL_INTERNAL_H

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>
#include <pthread.h>
#include <stdatomic.h>

#include "collectives/comm.h"
#include "runtime/base/worker.h"
#include "runtime/device/cuda_query.h"

/* Collectives in flight at once before issuing one more waits for the oldest. */
#define NCCLCOMM_SLOTS 256

typedef enum { NK_ALLREDUCE, NK_BROADCAST, NK_REDUCE, NK_ALLGATHER, NK_REDUCESCATTER, NK_ALLTOALL,
               NK_SENDRECV, NK_BARRIER } ncclcomm_kind;

/* What a collective is; identical on every rank when ranks agree (ddp.debug compares them). */
typedef struct ncclcomm_fingerprint {
    uint64_t seq;          /* 1-based issue number on this communicator */
    uint64_t count;
    int32_t kind;          /* ncclcomm_kind */
    int32_t op;            /* comm_op, or -1 */
    int32_t dtype;         /* comm_dtype */
    int32_t root;          /* root, or -1 (sendrecv: peers differ per rank, so -1) */
} ncclcomm_fingerprint;

enum { SLOT_FREE, SLOT_ISSUING, SLOT_LAUNCHED };

typedef struct ncclcomm_slot {
    cudaEvent_t done;      /* recorded on the communication stream after the collective */
    atomic_int state;      /* SLOT_*: ISSUING while the host is inside the NCCL call */
    ncclcomm_fingerprint fp;
    char label[64];
    double issued_s;
} ncclcomm_slot;

typedef struct ncclcomm_impl {
    ncclComm_t nccl;
    MPI_Comm ctl;              /* our duplicate of MPI_COMM_WORLD: id broadcast, ddp.debug checks */
    cudaStream_t compute;      /* the device's stream, which collectives order themselves after */
    cudaStream_t stream;       /* where collectives run: our non-blocking communication stream, or
                                  `compute` itself (single_stream; then nothing needs ordering) */
    bool own_stream;           /* stream is ours to destroy */
    cudaEvent_t compute_ready; /* recorded on the compute stream before each launch */
    void *stage;               /* in-place exchanges send from this copy of their input: grown on
                                  demand, stream-ordered, kept for the communicator's life */
    size_t stage_bytes;
    int device;
    bool debug;
    double timeout_s;
    uint64_t seq;              /* of the last collective issued */
    int *barrier_buf;          /* one device int */
    bool failed;               /* an NCCL or CUDA call of ours failed: the end is an abort */
    double abort_limit_s;      /* what ncclCommAbort (and freeing after it) may take: min(timeout, 30 s) */

    ncclcomm_slot slots[NCCLCOMM_SLOTS];

    /* The watchdog thread. Its mutex guards the slots' fields other than state, which the
     * watchdog reads, and the teardown fields below. */
    worker watchdog;
    atomic_bool aborting;      /* the watchdog is taking the process down */
    _Atomic double teardown_deadline; /* > 0: the communicator is being torn down; past this
                                  monotonic time the watchdog (or its monitor) ends the process */
    double teardown_limit_s;
    const char *teardown_what;

    /* The watchdog's monitor: a thread that makes no CUDA or NCCL call and takes none of the
     * communicator's locks, and ends the process when the watchdog has finished no pass for
     * timeout_s + abort_limit_s (a CUDA or NCCL call of its hangs, on a wedged GPU, and holds its
     * mutex), or the teardown overran its deadline unseen. */
    pthread_t monitor;
    bool monitor_started;
    atomic_bool monitor_stop;
    _Atomic double watchdog_beat; /* monotonic time the watchdog last finished a pass */

    /* test-only fault switches (comm_nccl_check.c) */
    int stall_rank, skew_rank;
    uint64_t stall_seq, skew_seq;
} ncclcomm_impl;

const char *ncclcomm_kind_name(ncclcomm_kind k);
/* "allreduce avg, 1234 x float, root -1" style description for messages. */
void ncclcomm_fingerprint_describe(const ncclcomm_fingerprint *fp, char *out, size_t len);

/* comm_nccl.c: the collectives, wait/test, and the backend's comm_ops (creation fills c->ops). */
extern const struct comm_ops ncclcomm_ops;
/* An NCCL call of c's failed with rc: marks the communicator failed (or, when the watchdog is
 * aborting it, waits for the watchdog to end the process) and returns DDP_ERUNTIME naming
 * file:line, the call (up to its '(') and NCCL's error strings. */
int ncclcomm_fail(comm *c, ncclResult_t rc, const char *call, const char *file, int line, ddp_err *err);
/* An NCCL call of communicator c: on failure it marks the communicator failed and returns
 * DDP_ERUNTIME naming file:line, the call and NCCL's error strings (ncclcomm_fail). */
#define NCCL_TRY_MARK_FAILED(c, call)                                                           \
    do {                                                                                        \
        ncclResult_t ncclcomm_rc_ = (call);                                                     \
        if (ncclcomm_rc_ != ncclSuccess)                                                        \
            return ncclcomm_fail((c), ncclcomm_rc_, #call, __FILE__, __LINE__, err);            \
    } while (0)

/* A CUDA call of the communicator's: on failure it marks the communicator failed (its end
 * aborts) and returns DDP_ERUNTIME naming file:line, the call and CUDA's error string. Expects
 * `im` (ncclcomm_impl *) and `err` in scope. (runtime/device's CUDA_TRY only returns.) */
#define CUDA_TRY_MARK_FAILED(call)                                                              \
    do {                                                                                        \
        cudaError_t cuda_rc_ = (call);                                                          \
        if (cuda_rc_ != cudaSuccess) {                                                          \
            im->failed = true;                                                                  \
            return ddp_fail(err, DDP_ERUNTIME, "%s:%d: %s: %s", __FILE__, __LINE__, #call,      \
                            cudaGetErrorString(cuda_rc_));                                      \
        }                                                                                       \
    } while (0)

/* comm_nccl_teardown.c: ends the communicator and frees c (abort: ncclCommAbort at once). */
void ncclcomm_free(comm *c, bool abort);

/* comm_nccl_watchdog.c */
/* Starts the watchdog thread and returns once it runs on im->device, or with the error that kept
 * it from selecting that GPU. */
int ncclcomm_watchdog_start(comm *c, ddp_err *err);
/* Teardown has begun: from now on the watchdog leaves the collectives alone (their events are
 * about to go) and ends the process, saying `what` did not finish, if the teardown is not over
 * within limit_s. A wedged GPU can hang any CUDA or NCCL call, the watchdog's own included (then
 * its monitor ends the process); this bounds them all. */
void ncclcomm_watchdog_teardown(comm *c, double limit_s, const char *what);
void ncclcomm_watchdog_stop(comm *c);
/* The calling thread waits for the watchdog to end the process (used after an NCCL call failed
 * because the watchdog aborted the communicator). Never returns. */
void ncclcomm_watchdog_await_exit(void) __attribute__((noreturn));

/* comm_nccl_check.c */
int ncclcomm_faults_read(ncclcomm_impl *im, ddp_err *err);
/* Applies the test-only fault switches to collective fp on this rank: may stall forever or
 * change fp->count. */
void ncclcomm_faults_apply(comm *c, ncclcomm_fingerprint *fp);
/* ddp.debug: every rank's fingerprint of this collective must match (blocking, control path). */
int ncclcomm_check_fingerprint(comm *c, const ncclcomm_fingerprint *fp, ddp_err *err);

#endif
