/* avg.c — avg_divide, one loop per element type. */
#include "avg.h"

#include <stdint.h>

#include "half.h"

void avg_divide(void *buf, size_t n, avg_elem elem, int ranks)
{
    switch (elem) {
    case AVG_F32: for (size_t i = 0; i < n; i++) ((float *)buf)[i] /= (float)ranks; break;
    case AVG_F64: for (size_t i = 0; i < n; i++) ((double *)buf)[i] /= ranks; break;
    case AVG_F16:
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)buf)[i] = float_to_half(half_to_float(((uint16_t *)buf)[i]) / (float)ranks);
        break;
    case AVG_BF16:
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)buf)[i] = float_to_bf16(bf16_to_float(((uint16_t *)buf)[i]) / (float)ranks);
        break;
    case AVG_I8: for (size_t i = 0; i < n; i++) ((int8_t *)buf)[i] = (int8_t)(((int8_t *)buf)[i] / ranks); break;
    case AVG_U8: for (size_t i = 0; i < n; i++) ((uint8_t *)buf)[i] = (uint8_t)(((uint8_t *)buf)[i] / ranks); break;
    case AVG_I32: for (size_t i = 0; i < n; i++) ((int32_t *)buf)[i] /= ranks; break;
    case AVG_U32: for (size_t i = 0; i < n; i++) ((uint32_t *)buf)[i] /= (uint32_t)ranks; break;
    case AVG_I64: for (size_t i = 0; i < n; i++) ((int64_t *)buf)[i] /= ranks; break;
    case AVG_U64: for (size_t i = 0; i < n; i++) ((uint64_t *)buf)[i] /= (uint64_t)ranks; break;
    }
}
