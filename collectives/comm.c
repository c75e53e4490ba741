/* comm.c — backend-independent facts about the communicator's element types and reductions:
 * sizes and the names nccl-tests prints. It must not talk to MPI or NCCL. */
#include "comm.h"

static const struct {
    const char *name;
    size_t size;
} dtype_info[DT_COUNT] = {
    [DT_FLOAT] = {"float", 4},  [DT_DOUBLE] = {"double", 8}, [DT_HALF] = {"half", 2},
    [DT_BFLOAT16] = {"bfloat16", 2}, [DT_INT32] = {"int32", 4}, [DT_INT8] = {"int8", 1},
    [DT_UINT8] = {"uint8", 1},  [DT_INT64] = {"int64", 8},   [DT_UINT64] = {"uint64", 8},
};

static const char *const op_names[OP_COUNT] = {
    [OP_SUM] = "sum", [OP_PROD] = "prod", [OP_MIN] = "min", [OP_MAX] = "max", [OP_AVG] = "avg",
};

size_t comm_dtype_size(comm_dtype dt)
{
    return (unsigned)dt < DT_COUNT ? dtype_info[dt].size : 0;
}

const char *comm_dtype_name(comm_dtype dt)
{
    return (unsigned)dt < DT_COUNT ? dtype_info[dt].name : "?";
}

const char *comm_op_name(comm_op op)
{
    return (unsigned)op < OP_COUNT ? op_names[op] : "?";
}
