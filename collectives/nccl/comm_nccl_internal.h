/* comm_nccl_internal.h — what the NCCL backend's files share: the backend state, the ring of
 * in-flight collectives (slots) that requests and the watchdog look at, and fingerprints.
 *   comm_nccl.c           creation, the collectives, wait/test
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

    pthread_mutex_t lock;      /* slots' fields other than state, shared with the watchdog */
    ncclcomm_slot slots[NCCLCOMM_SLOTS];

    /* watchdog */
    pthread_t watchdog;
    bool watchdog_running;
    pthread_cond_t wake;       /* wakes the watchdog (stop), and its starter once it has started */
    int watchdog_started;      /* 0 starting, 1 running, -1 could not select the GPU */
    cudaError_t watchdog_start_error;
    bool stop;
    atomic_bool aborting;      /* the watchdog is taking the process down */
    double teardown_deadline;  /* > 0: the communicator is being torn down; past this monotonic
                                  time the watchdog ends the process */
    double teardown_limit_s;
    const char *teardown_what;

    /* test-only fault switches (comm_nccl_check.c) */
    int stall_rank, skew_rank;
    uint64_t stall_seq, skew_seq;
} ncclcomm_impl;

const char *ncclcomm_kind_name(ncclcomm_kind k);
/* "allreduce avg, 1234 x float, root -1" style description for messages. */
void ncclcomm_fingerprint_describe(const ncclcomm_fingerprint *fp, char *out, size_t len);

/* comm_nccl_teardown.c: ends the communicator and frees c (abort: ncclCommAbort at once). */
void ncclcomm_free(comm *c, bool abort);

/* comm_nccl_watchdog.c */
/* Starts the watchdog thread and returns once it runs on im->device, or with the error that kept
 * it from selecting that GPU. */
int ncclcomm_watchdog_start(comm *c, ddp_err *err);
/* Teardown has begun: from now on the watchdog leaves the collectives alone (their events are
 * about to go) and ends the process, saying `what` did not finish, if the teardown is not over
 * within limit_s. A wedged GPU can hang any CUDA or NCCL call; this bounds them all. */
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
