/* device_bad_calls.h — the device ops' argument mistakes test_device_contract.c runs on every
 * backend: one call per mistake (device_bad_calls.c), each with the exact message device.c's
 * checking table must give, and the buffers the calls' other arguments point at. Test code: it
 * asserts nothing itself. */
#ifndef DDP_TESTS_DEVICE_BAD_CALLS_H
#define DDP_TESTS_DEVICE_BAD_CALLS_H

#include <stddef.h>

#include "runtime/device/device.h"

/* Valid device buffers for the arguments a call does not get wrong. */
typedef struct bufs {
    float *f;      /* BUF_FLOATS floats */
    double *sumsq; /* one double */
    int32_t *labels;
    device_timer *timer;
    device_stamps *stamps; /* STAMP_SLOTS slots, none stamped */
} bufs;

enum { BUF_FLOATS = 64, STAMP_SLOTS = 4 };

typedef struct bad_call {
    const char *expect; /* the whole message */
    int (*call)(device *d, const bufs *b, ddp_err *err);
} bad_call;

extern const bad_call device_bad_calls[];
extern const size_t device_n_bad_calls;
/* Valid optimizer arguments (SGD with momentum; AdamW's first step), for the empty jobs too. */
extern const sgd_args sgd_momentum;
extern const adamw_args adamw_step1;

#endif
