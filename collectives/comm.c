/* comm.c — backend-independent facts about the communicator's element types and reductions
 * (sizes, the names nccl-tests prints), and the one agreement built on any backend's collectives
 * (comm_first_failure). It must not talk to MPI or NCCL itself. */
#include "comm.h"

#include <stdint.h>

#include "runtime/base/half.h"

static const struct {
    const char *name;
    size_t size;
    double unit_roundoff; /* 2^-(significand bits) for the floating types, 0 for the integers */
} dtype_info[DT_COUNT] = {
    [DT_FLOAT] = {"float", 4, 0x1p-24},       [DT_DOUBLE] = {"double", 8, 0x1p-53},
    [DT_HALF] = {"half", 2, 0x1p-11},         [DT_BFLOAT16] = {"bfloat16", 2, 0x1p-8},
    [DT_INT32] = {"int32", 4, 0},             [DT_INT8] = {"int8", 1, 0},
    [DT_UINT8] = {"uint8", 1, 0},             [DT_INT64] = {"int64", 8, 0},
    [DT_UINT64] = {"uint64", 8, 0},
};

static const char *const op_names[OP_COUNT] = {
    [OP_SUM] = "sum", [OP_PROD] = "prod", [OP_MIN] = "min", [OP_MAX] = "max", [OP_AVG] = "avg",
};

size_t comm_dtype_size(comm_dtype dt)
{
    return (unsigned)dt < DT_COUNT ? dtype_info[dt].size : 0;
}

double comm_dtype_unit_roundoff(comm_dtype dt)
{
    return (unsigned)dt < DT_COUNT ? dtype_info[dt].unit_roundoff : 0;
}

const char *comm_dtype_name(comm_dtype dt)
{
    return (unsigned)dt < DT_COUNT ? dtype_info[dt].name : "?";
}

const char *comm_op_name(comm_op op)
{
    return (unsigned)op < OP_COUNT ? op_names[op] : "?";
}

void comm_dtype_store(void *b, size_t i, comm_dtype dt, double v)
{
    switch (dt) {
    case DT_FLOAT: ((float *)b)[i] = (float)v; break;
    case DT_DOUBLE: ((double *)b)[i] = v; break;
    case DT_HALF: ((uint16_t *)b)[i] = float_to_half((float)v); break;
    case DT_BFLOAT16: ((uint16_t *)b)[i] = float_to_bf16((float)v); break;
    case DT_INT32: ((int32_t *)b)[i] = (int32_t)v; break;
    case DT_INT8: ((int8_t *)b)[i] = (int8_t)v; break;
    case DT_UINT8: ((uint8_t *)b)[i] = (uint8_t)v; break;
    case DT_INT64: ((int64_t *)b)[i] = (int64_t)v; break;
    default: ((uint64_t *)b)[i] = (uint64_t)v; break;
    }
}

double comm_dtype_load(const void *b, size_t i, comm_dtype dt)
{
    switch (dt) {
    case DT_FLOAT: return ((const float *)b)[i];
    case DT_DOUBLE: return ((const double *)b)[i];
    case DT_HALF: return half_to_float(((const uint16_t *)b)[i]);
    case DT_BFLOAT16: return bf16_to_float(((const uint16_t *)b)[i]);
    case DT_INT32: return ((const int32_t *)b)[i];
    case DT_INT8: return ((const int8_t *)b)[i];
    case DT_UINT8: return ((const uint8_t *)b)[i];
    case DT_INT64: return (double)((const int64_t *)b)[i];
    default: return (double)((const uint64_t *)b)[i];
    }
}

int comm_first_failure(comm *c, int32_t mine, int32_t *first, int32_t *status, ddp_err *err)
{
    int32_t me = mine != DDP_OK ? c->rank : INT32_MAX, lowest = INT32_MAX;
    *first = -1;
    *status = mine;
    int rc = c->ops->allreduce(c, &me, &lowest, 1, DT_INT32, OP_MIN, NULL, err);
    if (rc == DDP_OK && lowest != INT32_MAX)
        rc = c->ops->broadcast(c, status, 1, DT_INT32, lowest, NULL, err);
    if (rc == DDP_OK && lowest != INT32_MAX)
        *first = lowest;
    return rc;
}
