/* nccl_shim.c — the emulated build's NCCL, part 1: communicators, errors, argument validation,
 * data types and reduction operators. Groups and running queued calls are nccl_shim_group.c.
 *
 * Emulated device memory is host memory, so a collective here is MPI over the caller's buffers.
 * A call (or a ncclGroupStart/End group) is validated when issued and queued on its stream
 * (cudaemu.h): it runs in stream order, on the issuing thread or the emulator's progress thread
 * (MPI_THREAD_MULTIPLE), when something waits for that stream, so a missing wait between the compute and communication streams reads
 * or overwrites data as on a GPU. ncclCommInitRank needs MPI initialised and every rank of
 * MPI_COMM_WORLD to call it at the same time (it splits MPI_COMM_WORLD by the unique id), and
 * rejects two ranks on one device of one host, as NCCL does. ncclCommDestroy waits for the
 * communicator's queued calls, then for every rank of the communicator on this host to call it
 * too (NCCL documents it as an intra-node collective: a rank that destroys while a peer of its
 * host still works waits for that peer). ncclCommAbort may be called from another thread (a watchdog): it
 * sets a flag that makes any wait in progress give up and queued calls be dropped, and leaves the
 * memory to the exiting process.
 * C ABI exactly as declared by the real nccl.h. It must not implement anything our code does not
 * call, nor accept arguments real NCCL rejects. */
#include "nccl_shim_internal.h"

#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime/base/half_mpi.h"
#include "runtime/base/host_name.h"
#include "runtime/base/max_chunk.h"
#include "tests/cudaemu/cudaemu.h"

/* ---- errors ----------------------------------------------------------------------------- */

static char last_global_error[512];

ncclResult_t shim_fail(ncclComm_t comm, ncclResult_t rc, const char *fmt, ...)
{
    char *buf = comm ? comm->last_error : last_global_error;
    size_t cap = comm ? sizeof comm->last_error : sizeof last_global_error;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
    fprintf(stderr, "NCCL WARN (emulated) %s\n", buf);
    return rc;
}

ncclResult_t shim_mpi_fail(ncclComm_t comm, int mpi_rc, const char *call, int line)
{
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    if (MPI_Error_string(mpi_rc, msg, &len) != MPI_SUCCESS)
        snprintf(msg, sizeof msg, "MPI error code %d", mpi_rc);
    if (comm)
        atomic_store(&comm->async_error, ncclSystemError);
    return shim_fail(comm, ncclSystemError, "%s:%d: %s: %s", __FILE__, line, call, msg);
}

const char *ncclGetErrorString(ncclResult_t rc)
{
    switch (rc) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

const char *ncclGetLastError(ncclComm_t comm)
{
    return comm ? comm->last_error : last_global_error;
}

ncclResult_t ncclGetVersion(int *version)
{
    if (!version)
        return shim_fail(NULL, ncclInvalidArgument, "ncclGetVersion: version argument is NULL");
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

/* ---- validation --------------------------------------------------------------------------- */

ncclResult_t shim_check_comm(ncclComm_t comm, const char *fn)
{
    if (!comm)
        return shim_fail(NULL, ncclInvalidArgument, "%s: comm argument is NULL", fn);
    if (atomic_load(&comm->aborted))
        return shim_fail(comm, ncclInvalidUsage, "%s: the communicator was aborted", fn);
    return ncclSuccess;
}

size_t shim_type_size(ncclDataType_t dt)
{
    switch (dt) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0; /* fp8 types and anything out of range: not supported here */
    }
}

ncclResult_t shim_check_type(ncclComm_t comm, ncclDataType_t dt, const char *fn)
{
    if ((unsigned)dt >= ncclNumTypes)
        return shim_fail(comm, ncclInvalidArgument, "%s: invalid type %d", fn, (int)dt);
    if (shim_type_size(dt) == 0)
        return shim_fail(comm, ncclInvalidArgument, "%s: type %d (fp8) is not supported by the emulated "
                         "NCCL shim", fn, (int)dt);
    return ncclSuccess;
}

ncclResult_t shim_check_op(ncclComm_t comm, ncclRedOp_t op, const char *fn)
{
    if ((unsigned)op >= ncclNumOps)
        return shim_fail(comm, ncclInvalidArgument, "%s: invalid reduction operation %d", fn, (int)op);
    return ncclSuccess;
}

ncclResult_t shim_check_rank(ncclComm_t comm, int r, const char *what, const char *fn)
{
    if (r < 0 || r >= comm->size)
        return shim_fail(comm, ncclInvalidArgument, "%s: %s %d is not in [0, %d)", fn, what, r, comm->size);
    return ncclSuccess;
}

static bool is_device_byte(const void *p)
{
    struct cudaPointerAttributes a;
    return cudaPointerGetAttributes(&a, p) == cudaSuccess &&
           (a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged);
}

ncclResult_t shim_check_buffer(ncclComm_t comm, const void *buf, size_t count, ncclDataType_t dt,
                               const char *what, const char *fn)
{
    size_t esz = shim_type_size(dt);
    if (count == 0)
        return ncclSuccess;
    if (!buf)
        return shim_fail(comm, ncclInvalidArgument, "%s: %s argument is NULL", fn, what);
    if (count > SIZE_MAX / esz)
        return shim_fail(comm, ncclInvalidArgument, "%s: count %zu overflows", fn, count);
    const char *last = (const char *)buf + count * esz - 1;
    if (!is_device_byte(buf) || !is_device_byte(last))
        return shim_fail(comm, ncclInvalidArgument, "%s: %s %p + %zu bytes is not (all) device memory "
                         "from cudaMalloc", fn, what, buf, count * esz);
    return ncclSuccess;
}

ncclResult_t shim_check_stream(ncclComm_t comm, cudaStream_t stream, const char *fn)
{
    unsigned flags = 0;
    cudaError_t e = cudaStreamGetFlags(stream, &flags); /* validates without running queued work */
    if (e != cudaSuccess)
        return shim_fail(comm, ncclUnhandledCudaError, "%s: stream %p: %s", fn, (void *)stream,
                         cudaGetErrorString(e));
    return ncclSuccess;
}

/* ---- half / bfloat16 reductions, averages ------------------------------------------------ */

ncclResult_t shim_create_ops(ncclComm_t comm)
{
    /* indexed by ncclSum, ncclProd, ncclMax, ncclMin */
    static const enum fp16_mpi_op as_fp16[SHIM_BUILTIN_OPS] = {FP16_SUM, FP16_PROD, FP16_MAX, FP16_MIN};
    int rc = fp16_mpi_ops_create(as_fp16, SHIM_BUILTIN_OPS, &comm->two_byte, comm->half_op, comm->bf16_op);
    return rc == MPI_SUCCESS ? ncclSuccess : shim_mpi_fail(comm, rc, "MPI_Op_create", __LINE__);
}

void shim_free_ops(ncclComm_t comm)
{
    fp16_mpi_ops_free(SHIM_BUILTIN_OPS, &comm->two_byte, comm->half_op, comm->bf16_op);
}

MPI_Datatype shim_mpi_type(ncclComm_t comm, ncclDataType_t dt)
{
    switch (dt) {
    case ncclInt8: return MPI_INT8_T;
    case ncclUint8: return MPI_UINT8_T;
    case ncclInt32: return MPI_INT32_T;
    case ncclUint32: return MPI_UINT32_T;
    case ncclInt64: return MPI_INT64_T;
    case ncclUint64: return MPI_UINT64_T;
    case ncclFloat32: return MPI_FLOAT;
    case ncclFloat64: return MPI_DOUBLE;
    default: return comm->two_byte;
    }
}

MPI_Op shim_mpi_op(ncclComm_t comm, ncclDataType_t dt, ncclRedOp_t op)
{
    int base = op == ncclAvg ? ncclSum : (int)op;
    if (dt == ncclFloat16)
        return comm->half_op[base];
    if (dt == ncclBfloat16)
        return comm->bf16_op[base];
    static const MPI_Op native[SHIM_BUILTIN_OPS] = {MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN};
    return native[base];
}

/* ---- communicators ------------------------------------------------------------------------ */

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    static unsigned counter;
    if (!id)
        return shim_fail(NULL, ncclInvalidArgument, "ncclGetUniqueId: uniqueId argument is NULL");
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    memset(id, 0, sizeof *id);
    snprintf(id->internal, sizeof id->internal, "ddp-nccl-shim %ld %lld.%09ld %u", (long)getpid(),
             (long long)ts.tv_sec, ts.tv_nsec, counter++);
    return ncclSuccess;
}

static int color_of(const ncclUniqueId *id)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < sizeof id->internal; i++)
        h = (h ^ (uint8_t)id->internal[i]) * 16777619u;
    return (int)(h & 0x7fffffffu);
}

/* NCCL refuses two ranks of a communicator on one GPU ("Duplicate GPU detected"), a GPU being
 * its PCI bus id: whatever index each rank's CUDA_VISIBLE_DEVICES gives it. */
static ncclResult_t check_duplicate_devices(ncclComm_t c)
{
    struct where { char host[DDP_HOST_NAME_MAX]; int32_t device; } me, *all = calloc((size_t)c->size, sizeof *all);
    if (!all)
        return shim_fail(c, ncclSystemError, "ncclCommInitRank: out of memory");
    memset(&me, 0, sizeof me);
    gethostname(me.host, sizeof me.host - 1);
    struct cudaDeviceProp p;
    me.device = cudaGetDeviceProperties(&p, c->device) == cudaSuccess ? p.pciBusID : c->device;
    int rc = MPI_Allgather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me, MPI_BYTE, c->mpi);
    ncclResult_t result = rc == MPI_SUCCESS ? ncclSuccess : shim_mpi_fail(c, rc, "MPI_Allgather", __LINE__);
    for (int a = 0; a < c->size && result == ncclSuccess; a++)
        for (int b = a + 1; b < c->size && result == ncclSuccess; b++)
            if (all[a].device == all[b].device && strcmp(all[a].host, all[b].host) == 0)
                result = shim_fail(c, ncclInvalidUsage, "ncclCommInitRank: Duplicate GPU detected : rank %d and rank "
                                   "%d both on the GPU at PCI bus %d of host %s", a, b, all[a].device, all[a].host);
    free(all);
    return result;
}

static ncclResult_t join(ncclComm_t c, int nranks, ncclUniqueId id, int rank)
{
    int rc = MPI_Comm_split(MPI_COMM_WORLD, color_of(&id), rank, &c->mpi);
    if (rc != MPI_SUCCESS)
        return shim_mpi_fail(c, rc, "MPI_Comm_split", __LINE__);
    MPI_Comm_set_errhandler(c->mpi, MPI_ERRORS_RETURN);
    MPI_Comm_rank(c->mpi, &c->rank);
    MPI_Comm_size(c->mpi, &c->size);
    if (c->size != nranks)
        return shim_fail(c, ncclInvalidUsage, "ncclCommInitRank: nranks is %d but %d processes joined "
                         "with this unique id", nranks, c->size);
    if (c->rank != rank)
        return shim_fail(c, ncclInvalidUsage, "ncclCommInitRank: rank %d given twice (or ranks are not "
                         "0..%d)", rank, nranks - 1);
    rc = MPI_Comm_split_type(c->mpi, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &c->node);
    if (rc != MPI_SUCCESS)
        return shim_mpi_fail(c, rc, "MPI_Comm_split_type", __LINE__);
    ncclResult_t dup = check_duplicate_devices(c);
    return dup != ncclSuccess ? dup : shim_create_ops(c);
}

static void free_comm(ncclComm_t c)
{
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) {
        shim_free_ops(c);
        if (c->node != MPI_COMM_NULL)
            MPI_Comm_free(&c->node);
        if (c->mpi != MPI_COMM_NULL)
            MPI_Comm_free(&c->mpi);
    }
    free(c);
}

/* Destroy's wait for the communicator's other ranks on this host, polled so that ncclCommAbort
 * from another thread (a watchdog's, while this rank waits here) ends it as it ends NCCL's. */
static ncclResult_t wait_for_host_peers(ncclComm_t comm)
{
    MPI_Request req;
    int rc = MPI_Ibarrier(comm->node, &req);
    if (rc != MPI_SUCCESS)
        return shim_mpi_fail(comm, rc, "MPI_Ibarrier", __LINE__);
    for (int done = 0;;) {
        rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS)
            return shim_mpi_fail(comm, rc, "MPI_Test", __LINE__);
        if (done)
            return ncclSuccess;
        if (atomic_load(&comm->aborted)) /* the request is left to the exiting process */
            return shim_fail(comm, ncclInvalidUsage, "ncclCommDestroy: aborted while waiting for this host's "
                             "other ranks of the communicator to destroy it too");
        usleep(1000);
    }
}

ncclResult_t ncclCommInitRank(ncclComm_t *out, int nranks, ncclUniqueId id, int rank)
{
    int initialized = 0;
    if (!out)
        return shim_fail(NULL, ncclInvalidArgument, "ncclCommInitRank: comm argument is NULL");
    *out = NULL;
    if (nranks < 1 || rank < 0 || rank >= nranks)
        return shim_fail(NULL, ncclInvalidArgument, "ncclCommInitRank: rank %d / nranks %d are invalid", rank, nranks);
    MPI_Initialized(&initialized);
    if (!initialized)
        return shim_fail(NULL, ncclInvalidUsage, "ncclCommInitRank: the emulated NCCL runs over MPI; "
                         "call MPI_Init first");
    int level = MPI_THREAD_SINGLE;
    MPI_Query_thread(&level);
    if (level < MPI_THREAD_MULTIPLE)
        return shim_fail(NULL, ncclInvalidUsage, "ncclCommInitRank: the emulated NCCL's collectives also run on "
                         "the CUDA emulator's progress thread: initialise MPI with MPI_THREAD_MULTIPLE "
                         "(runtime/base/mpi_thread.h)");
    size_t chunk;
    ddp_err chunk_err = {0};
    if (max_chunk_read(&chunk, &chunk_err))
        return shim_fail(NULL, ncclInvalidUsage, "ncclCommInitRank: %s", chunk_err.msg);
    ncclComm_t c = calloc(1, sizeof *c);
    if (!c)
        return shim_fail(NULL, ncclSystemError, "ncclCommInitRank: out of memory");
    c->mpi = c->node = MPI_COMM_NULL;
    c->two_byte = MPI_DATATYPE_NULL;
    for (int i = 0; i < SHIM_BUILTIN_OPS; i++)
        c->half_op[i] = c->bf16_op[i] = MPI_OP_NULL;
    c->max_chunk = chunk;
    atomic_init(&c->async_error, ncclSuccess);
    atomic_init(&c->aborted, false);
    atomic_init(&c->pending, 0);
    if (cudaGetDevice(&c->device) != cudaSuccess)
        c->device = -1;
    ncclResult_t rc = join(c, nranks, id, rank);
    if (rc != ncclSuccess) {
        snprintf(last_global_error, sizeof last_global_error, "%s", c->last_error);
        free_comm(c);
        return rc;
    }
    *out = c;
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    if (!comm)
        return shim_fail(NULL, ncclInvalidArgument, "ncclCommDestroy: comm argument is NULL");
    if (atomic_load(&comm->aborted))
        return ncclSuccess; /* ncclCommAbort already released it (see the header comment) */
    if (atomic_load(&comm->pending) > 0) {
        cudaError_t e = cudaemu_synchronize_all(); /* NCCL waits for the communicator's work */
        if (e != cudaSuccess)
            return shim_fail(comm, ncclUnhandledCudaError, "ncclCommDestroy: waiting for queued work: %s",
                             cudaGetErrorString(e));
    }
    ncclResult_t rc = wait_for_host_peers(comm);
    if (rc == ncclSuccess || !atomic_load(&comm->aborted))
        free_comm(comm);
    return rc;
}

/* Called from a watchdog thread while the owner may be inside a collective: flag only, no MPI
 * (MPI is initialised FUNNELED) and no free (the owner still holds pointers into it). */
ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    if (!comm)
        return shim_fail(NULL, ncclInvalidArgument, "ncclCommAbort: comm argument is NULL");
    atomic_store(&comm->aborted, true);
    return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *async_error)
{
    if (!comm || !async_error)
        return shim_fail(comm, ncclInvalidArgument, "ncclCommGetAsyncError: NULL argument");
    *async_error = (ncclResult_t)atomic_load(&comm->async_error);
    return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
    if (!comm || !count)
        return shim_fail(comm, ncclInvalidArgument, "ncclCommCount: NULL argument");
    *count = comm->size;
    return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
    if (!comm || !rank)
        return shim_fail(comm, ncclInvalidArgument, "ncclCommUserRank: NULL argument");
    *rank = comm->rank;
    return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device)
{
    if (!comm || !device)
        return shim_fail(comm, ncclInvalidArgument, "ncclCommCuDevice: NULL argument");
    *device = comm->device;
    return ncclSuccess;
}
