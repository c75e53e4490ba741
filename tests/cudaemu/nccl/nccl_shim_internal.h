/* nccl_shim_internal.h — what the three parts of the emulated build's NCCL shim share: the
 * communicator object, the recorded calls (everything issued since ncclGroupStart, or one call
 * outside a group) that run later in stream order, the MPI requests of the calls running now,
 * argument validation and error recording.
 * Not for code outside tests/cudaemu/nccl/: callers see the real nccl.h only. */
#ifndef DDP_NCCL_SHIM_INTERNAL_H
#define DDP_NCCL_SHIM_INTERNAL_H

#include <mpi.h>
#include <nccl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <cuda_runtime_api.h>

/* MPI has no 2-byte float types: half and bfloat16 travel as 2 bytes reduced by our own ops. */
enum { SHIM_BUILTIN_OPS = 4 }; /* sum prod max min; avg is a sum then a division */

struct ncclComm {
    MPI_Comm mpi;                 /* this communicator's own MPI communicator */
    MPI_Comm node;                /* its ranks on this host (MPI's shared-memory split): destroy's barrier */
    int rank, size, device;
    size_t max_chunk;             /* elements per MPI call (INT_MAX, or DDP_COMM_MAX_CHUNK) */
    MPI_Datatype two_byte;
    MPI_Op half_op[SHIM_BUILTIN_OPS], bf16_op[SHIM_BUILTIN_OPS];
    atomic_int async_error;       /* ncclResult_t; read by another thread (a watchdog) */
    atomic_bool aborted;          /* set by ncclCommAbort, possibly from another thread */
    atomic_int pending;           /* recorded calls queued on a stream that have not run yet */
    char last_error[512];
};

/* Work to do after a batch's MPI requests complete, in order. */
typedef struct shim_post {
    enum { POST_DIVIDE, POST_MOVE } kind;
    ncclComm_t comm;
    void *dst;
    const void *src;              /* POST_MOVE */
    size_t count;                 /* elements (POST_DIVIDE) or bytes (POST_MOVE) */
    ncclDataType_t dt;
} shim_post;

/* Records a failure on comm (ncclGetLastError), prints it as NCCL WARN does, returns rc. */
ncclResult_t shim_fail(ncclComm_t comm, ncclResult_t rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
ncclResult_t shim_mpi_fail(ncclComm_t comm, int mpi_rc, const char *call, int line);

/* Validation shared by every entry point, as strict as NCCL documents. */
ncclResult_t shim_check_comm(ncclComm_t comm, const char *fn);
ncclResult_t shim_check_type(ncclComm_t comm, ncclDataType_t dt, const char *fn);
ncclResult_t shim_check_op(ncclComm_t comm, ncclRedOp_t op, const char *fn);
ncclResult_t shim_check_rank(ncclComm_t comm, int r, const char *what, const char *fn);
/* buf must be emulated device memory covering count elements (NULL is fine when count is 0). */
ncclResult_t shim_check_buffer(ncclComm_t comm, const void *buf, size_t count, ncclDataType_t dt,
                               const char *what, const char *fn);
ncclResult_t shim_check_stream(ncclComm_t comm, cudaStream_t stream, const char *fn);

size_t shim_type_size(ncclDataType_t dt);
MPI_Datatype shim_mpi_type(ncclComm_t comm, ncclDataType_t dt);
MPI_Op shim_mpi_op(ncclComm_t comm, ncclDataType_t dt, ncclRedOp_t op);
ncclResult_t shim_create_ops(ncclComm_t comm);
void shim_free_ops(ncclComm_t comm);

/* A collective or point-to-point call, validated and recorded when issued; it runs (becomes MPI
 * calls) when its stream is drained. */
typedef enum { CALL_ALLREDUCE, CALL_BROADCAST, CALL_REDUCE, CALL_ALLGATHER, CALL_REDUCESCATTER, CALL_SEND,
               CALL_RECV } shim_call_kind;
typedef struct shim_call {
    shim_call_kind kind;
    ncclComm_t comm;
    const void *send;
    void *recv;
    size_t count;
    ncclDataType_t dt;
    ncclRedOp_t op;
    int root;                     /* the root, or the peer of a send or receive */
} shim_call;

/* Records a validated call in the current group (a group of one outside ncclGroupStart).
 * Every call of a group must use the same stream. */
ncclResult_t shim_record(const shim_call *call, cudaStream_t stream);
bool shim_in_group(void);
/* Inside a group a failing call is reported by it and again by ncclGroupEnd, like NCCL. */
ncclResult_t shim_group_note(ncclResult_t rc);
/* Outside a group: queues the recorded call on its stream, or forgets it after a failure. */
ncclResult_t shim_submit(void);
void shim_discard(void);
/* Issues one recorded call as non-blocking MPI calls (nccl_shim_coll.c) while it runs. */
ncclResult_t shim_issue(const shim_call *call);

/* While calls run: a slot for one more MPI request (NULL after recording an out-of-memory
 * failure) and one more post-completion step. */
MPI_Request *shim_batch_request(ncclComm_t comm);
ncclResult_t shim_batch_post(const shim_post *p);
/* bytes of host memory that live until the batch's requests and post steps are done (NULL
 * after recording an out-of-memory failure). */
void *shim_batch_scratch(ncclComm_t comm, size_t bytes);

#endif
