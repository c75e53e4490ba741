/* exact_double.h — a double as the shortest text that reads back to exactly it, so that what is
 * written (the resolved config, a model's description) is both readable and exact: 300 rather
 * than 3e+02, 1e-05 rather than 1.0000000000000001e-05. Header only; must not depend on anything
 * of ours. */
#ifndef DDP_EXACT_DOUBLE_H
#define DDP_EXACT_DOUBLE_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* Integers below 1e15 as "%.0f"; anything else as the shortest "%g" strtod reads back to v. */
static inline void format_double_exact(double v, char *out, size_t n)
{
    if (v == floor(v) && fabs(v) < 1e15) {
        snprintf(out, n, "%.0f", v);
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(out, n, "%.*g", prec, v);
        if (strtod(out, NULL) == v)
            return;
    }
}

#endif
