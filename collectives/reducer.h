/* reducer.h — DDP gradient averaging in buckets, overlapped with the backward pass.
 *
 * The gradient buffer is cut into buckets along parameter-tensor boundaries in reverse tensor
 * order (backward produces the last layer's gradients first): a small first bucket
 * (ddp.first_bucket_mb) so communication starts early, then buckets of up to ddp.bucket_mb; a
 * tensor larger than the cap is a bucket of its own. As backward reports finished gradient ranges
 * (reducer_grad_ready, a model grad_ready_fn), each bucket whose gradients are all final starts a
 * non-blocking all-reduce (average), strictly in bucket order, which is the same on every rank.
 * reducer_finish waits for all of them before the optimizer may step. Test-only: the env
 * DDP_TEST_COMM_DELAY_MS=N makes reducer_finish sleep N ms first, as a collective that slow would.
 * The reducer must not know about models beyond offsets, nor call the optimizer. */
#ifndef DDP_REDUCER_H
#define DDP_REDUCER_H

#include <stddef.h>

#include "runtime/device/device.h"
#include "comm.h"

typedef struct reducer_bucket {
    size_t offset, count;   /* slice of the gradient buffer, in elements */
    size_t ready;           /* elements reported final in the current pass */
    comm_req *req;          /* in flight, or NULL */
    int started;
} reducer_bucket;

typedef struct reducer {
    comm *comm;
    float *grads;
    size_t n;
    reducer_bucket *buckets;
    int n_buckets;
    int next_to_start;      /* buckets start in order 0, 1, ... */
    int status;             /* first error seen inside a callback */
    ddp_err err;
    long test_delay_ms;     /* test-only DDP_TEST_COMM_DELAY_MS: finish() sleeps this long before its waits */
    device *dev;            /* bf16 only: runs the casts on its compute stream */
    uint16_t *bf16;         /* bf16 only: device shadow of grads that the all-reduce carries */
} reducer;

/* tensor_offsets: start offset of each parameter tensor, ascending, n_tensors entries. */
int reducer_create(comm *c, float *grads, size_t n, const size_t *tensor_offsets, int n_tensors,
                   double bucket_mb, double first_bucket_mb, reducer **out, ddp_err *err);
/* ddp.grad_dtype bf16: each bucket is cast to a bf16 shadow (allocated on d), averaged in bf16
 * (half the bytes) and cast back into the fp32 gradients by reducer_finish. */
int reducer_use_bf16(reducer *r, device *d, ddp_err *err);
void reducer_destroy(reducer *r);
/* Start of a backward pass whose gradients will be reduced. */
void reducer_begin(reducer *r);
/* grad_ready_fn: gradients [offset, offset+count) are final. ctx is the reducer. */
void reducer_grad_ready(void *ctx, size_t offset, size_t count);
/* Starts any bucket not yet started (all gradients must have been reported), waits for all. */
int reducer_finish(reducer *r, ddp_err *err);

#endif
