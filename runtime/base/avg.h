/* avg.h — the last step of the MPI communicator's averaging reductions: the element-wise sum
 * divided by the number of ranks, as each element type divides. Floating types take one division
 * in their own precision (half and bfloat16 in float, rounded back to nearest-even); integer types
 * use C division, truncating toward zero, as NCCL's ncclAvg does for them (the emulated NCCL ends
 * its integer averages here too; its floating ones pre-multiply, as NCCL does).
 * Must not reduce across ranks: only the division after the sum. */
#ifndef DDP_AVG_H
#define DDP_AVG_H

#include <stddef.h>

/* The element types avg_divide knows; callers map their own type enums onto these. */
typedef enum avg_elem {
    AVG_F32, AVG_F64, AVG_F16, AVG_BF16, AVG_I8, AVG_U8, AVG_I32, AVG_U32, AVG_I64, AVG_U64
} avg_elem;

/* Divides count elements of type elem at buf, in place, by ranks (> 0). */
void avg_divide(void *buf, size_t count, avg_elem elem, int ranks);

#endif
