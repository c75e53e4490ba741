/* clock.h — the one clock ddprun measures elapsed time with: seconds on CLOCK_MONOTONIC, which
 * never jumps with the wall clock (NTP, a manual date change), so differences are durations.
 * The value has no meaning on its own and must not be printed or stored as a time of day. */
#ifndef DDP_CLOCK_H
#define DDP_CLOCK_H

#ifdef __cplusplus
extern "C" { /* the CUDA emulator's event timestamps (C++) read it too */
#endif

/* Seconds since an arbitrary fixed point; subtract two readings for a duration. */
double monotonic_s(void);

#ifdef __cplusplus
}
#endif

#endif
