/* align.h — the alignment a matrix operand really has: the largest power of two, up to `cap`,
 * that divides both its address and its row stride in bytes. That is what cuBLASLt's
 * MIN_ALIGNMENT preferences promise, so the CUDA backend (which promises it), the CUDA
 * emulator (which holds a matmul to the promise) and their tests compute it here, once.
 * Header only, for C and C++; must not depend on anything. */
#ifndef DDP_ALIGN_H
#define DDP_ALIGN_H

#include <stdint.h>

/* cap must be a power of two; the result is cap when both are multiples of it. */
static inline uint32_t operand_alignment(const void *p, uint64_t row_bytes, uint32_t cap)
{
    uint64_t bits = (uint64_t)(uintptr_t)p | row_bytes | cap;
    return (uint32_t)(bits & (~bits + 1));
}

#endif
