/* checked_size.h — sizes (element counts, bytes) built from products and sums that say when they
 * leave 64 bits, instead of wrapping to a smaller number. The memory plan, the models' activation
 * layouts and parameter tables form every size product through it, so a shape too large to fit
 * is refused where it is computed, once, and the plan and the buffers carved from it agree.
 * A size_check collects the verdict of a whole chain: after an overflow every result is SIZE_MAX
 * (so a chain stays monotone and its end says "too large"), and the caller asks once at the end
 * and names its own inputs in the message. Inputs are counts the caller knows are not negative.
 * Header only, for C; must not depend on anything. */
#ifndef DDP_CHECKED_SIZE_H
#define DDP_CHECKED_SIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

_Static_assert(SIZE_MAX >= UINT64_MAX, "sizes are 64-bit");

typedef struct size_check {
    bool overflow; /* some result did not fit: it, and all after it, read SIZE_MAX */
} size_check;

/* a * b, or SIZE_MAX with k->overflow set. */
static inline size_t size_mul(size_check *k, size_t a, size_t b)
{
    size_t r;
    if (k->overflow || __builtin_mul_overflow(a, b, &r)) {
        k->overflow = true;
        return SIZE_MAX;
    }
    return r;
}

/* a + b, or SIZE_MAX with k->overflow set. */
static inline size_t size_add(size_check *k, size_t a, size_t b)
{
    size_t r;
    if (k->overflow || __builtin_add_overflow(a, b, &r)) {
        k->overflow = true;
        return SIZE_MAX;
    }
    return r;
}

#endif
