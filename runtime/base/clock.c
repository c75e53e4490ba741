/* clock.c — monotonic_s over clock_gettime(CLOCK_MONOTONIC). Holds no state. */
#include "clock.h"

#include <time.h>

double monotonic_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
