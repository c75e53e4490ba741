/* reducer.h — DDP gradient averaging in buckets, overlapped with the backward pass.
 *
 * The gradient buffer is cut into buckets along parameter-tensor boundaries in reverse tensor
 * order (backward produces the last layer's gradients first): a small first bucket
 * (ddp.first_bucket_mb) so communication starts early, then buckets of up to ddp.bucket_mb; a
 * tensor larger than the cap is a bucket of its own. As backward reports finished gradient ranges
 * (reducer_grad_ready, a model grad_ready_fn), each bucket whose gradients are all final starts a
 * non-blocking all-reduce (average), strictly in bucket order, which is the same on every rank.
 * reducer_finish waits for all of them before the optimizer may step.
 *
 * ZeRO-1 (reducer_use_zero): each bucket is reduce-scattered in place instead, so rank r holds
 * the average of its block of every bucket where the block is, and after the optimizer has
 * updated a block, reducer_gather sends it to every rank (an in-place all-gather of the
 * parameters) while the next block is updated. Blocks are equal, so a bucket's size must be a
 * multiple of the ranks: bucket boundaries move to multiples of the world size, and the one bucket
 * at the end of the buffer pads its last block into the spare floats past it (model.param_tail),
 * which stay zero. Any parameter count and world size work.
 *
 * ZeRO-2 (reducer_use_zero_units): there is no whole gradient buffer. A bucket is one of the
 * caller's units (a model's unit: whole tensors), padded to a multiple of the ranks, and the
 * backward writes each unit's gradients into a window the reducer hands out (reducer_unit_window,
 * a model grad_window_fn): the first unit (the embeddings, whose tied head writes first and last)
 * has one of its own, the others take turns in two, so a unit's reduce-scatter runs while the next
 * unit's backward fills the other. A window is reduce-scattered in place; before it is handed out
 * again (or at reducer_finish) this rank's block is moved into its gradient shard (shard_grads,
 * shard_n floats): copied, or added on a later micro-step of the same optimizer step. After the
 * update, reducer_gather all-gathers a unit's parameters through the same windows. Test-only: the env
 * DDP_TEST_COMM_DELAY_MS=N makes reducer_finish sleep N ms first, as a collective that slow would.
 * When its device (reducer_set_device) has a profiler attached, every bucket's collective is
 * recorded on the communication track: on the communicator's stream where it has one (NCCL),
 * else from its issue to its wait's return on the host clock (MPI).
 * The reducer must not know about models beyond offsets, nor call the optimizer. */
#ifndef DDP_REDUCER_H
#define DDP_REDUCER_H

#include <stdbool.h>
#include <stddef.h>

#include "runtime/device/device.h"
#include "comm.h"

typedef struct reducer_bucket {
    size_t offset, count;   /* slice of the gradient buffer, in elements */
    size_t ready;           /* elements reported final in the current pass */
    comm_req *req;          /* in flight, or NULL */
    int started;
    /* ZeRO: every rank's block is `block` elements (the last ones may run past the parameters);
     * rank r's is at offset + r * block, and at shard_offset of each rank's shard (the blocks of
     * all buckets one after another: where the optimizer keeps its state) */
    size_t block, shard_offset;
    comm_req *gather_req;   /* the parameter all-gather in flight, or NULL */
    int window;             /* ZeRO-2: the window it holds now (0..2), or -1 */
    int prof_id, prof_gather_id; /* host-clock profiler ranges of req and gather_req, or -1 */
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
    bool halted;            /* a collective failed or was not issued (reducer_halt) */
    long test_delay_ms;     /* test-only DDP_TEST_COMM_DELAY_MS: finish() sleeps this long before its waits */
    device *dev;            /* the profiler's device, and under bf16 the one running the casts */
    uint16_t *bf16;         /* bf16 only: device shadow of grads that the all-reduce carries */
    /* ZeRO only (zero_ranks > 0): */
    int zero_ranks;         /* the world size the buckets are cut for */
    float *params;          /* the parameters reducer_gather all-gathers */
    size_t tail;            /* spare floats past n in grads and params (and the bf16 shadow) */
    size_t shard_n;         /* a rank's shard: the sum of the buckets' blocks */
    /* ZeRO-2 only (units): */
    bool units;             /* buckets are the caller's units, gradients in windows */
    bool accumulate;        /* this pass adds into shard_grads (reducer_begin) */
    float *shard_grads;     /* this rank's averaged gradients, shard_n floats (device) */
    float *windows[3];      /* the first unit's, then the two taking turns */
    int holder[3];          /* the bucket using each window, or -1 */
    bool gathering[3];      /* ... for a parameter all-gather (else a gradient reduce-scatter) */
    int turns;              /* windows 1 and 2 handed out so far in this pass */
} reducer;

/* tensor_offsets: start offset of each parameter tensor, ascending, n_tensors entries. */
int reducer_create(comm *c, float *grads, size_t n, const size_t *tensor_offsets, int n_tensors,
                   double bucket_mb, double first_bucket_mb, reducer **out, ddp_err *err);
/* The device whose profiler (d->prof, when attached) records the collectives. */
void reducer_set_device(reducer *r, device *d);
/* ddp.grad_dtype bf16: each bucket is cast to a bf16 shadow (allocated on d), summed in bf16
 * (half the bytes) and cast back into the fp32 gradients times 1/size by reducer_finish; d
 * becomes the reducer's device. */
int reducer_use_bf16(reducer *r, device *d, ddp_err *err);
/* ddp.zero 1 over comm's ranks (call before reducer_use_bf16): re-cuts the buckets at multiples of
 * the world size and gathers into params. grads and params need tail >= size - 1 spare zero
 * floats past n. */
int reducer_use_zero(reducer *r, float *params, size_t tail, ddp_err *err);
/* ZeRO-2 over comm's ranks instead of reducer_use_zero (r made with grads NULL): one bucket per
 * unit, the units starting at unit_offsets (ascending from 0, n_units of them, the last ending at
 * n); allocates on d the gradient shard and the windows; gathers into params. */
int reducer_use_zero_units(reducer *r, const size_t *unit_offsets, int n_units, float *params, device *d,
                           ddp_err *err);
/* ZeRO-2: a model grad_window_fn (ctx is the reducer): unit's zeroed window for this pass,
 * waiting first for the collective of the bucket that used it before. */
float *reducer_unit_window(void *ctx, int unit);
/* The floats of device memory reducer_use_zero_units allocates for these units over world ranks
 * (the shard and the windows), and the shard's: for the memory plan. */
void reducer_zero_units_size(const size_t *unit_offsets, int n_units, size_t n, int world, size_t *shard_n,
                             size_t *window_n);
/* The shard_n reducer_create + reducer_use_zero would give over world ranks, without a
 * communicator or buffers: for the memory plan of a job that is not started. */
int reducer_zero_shard_n(const size_t *tensor_offsets, int n_tensors, size_t n, double bucket_mb,
                         double first_bucket_mb, int world, size_t *shard_n, ddp_err *err);
/* ZeRO: the parameters `rank` updates in `bucket`: its block, cut at the end of the bucket
 * (count 0 for a block wholly past it), and where the block starts in that rank's shard. */
void reducer_zero_part(const reducer *r, int bucket, int rank, size_t *param_offset, size_t *shard_offset,
                       size_t *count);
/* ZeRO: starts the all-gather of bucket's updated blocks into params (non-blocking), giving MPI a
 * chance to progress the gathers already in flight. */
int reducer_gather(reducer *r, int bucket, ddp_err *err);
/* ZeRO: waits for every all-gather started since the last call. */
int reducer_gather_finish(reducer *r, ddp_err *err);
/* A collective of the reducer's or of the parameter windows' (param_gather.h), which share its
 * communicator and its order of collectives, failed or was not issued: the peers' next collective
 * is still that one, which a later one would be paired with, so neither issues another
 * (reducer_finish fails). Never cleared: the job ends on it. */
void reducer_halt(reducer *r);
bool reducer_halted(const reducer *r);
/* Before the communicator is aborted (a collective may never finish): forgets the requests in
 * flight without waiting for them (the abort ends them), so reducer_destroy frees memory only. */
void reducer_abandon(reducer *r);
void reducer_destroy(reducer *r);
/* Start of a backward pass whose gradients will be reduced; under ZeRO-2, accumulate adds them
 * to the shard the earlier micro-steps of this optimizer step left (each micro-step is reduced). */
void reducer_begin(reducer *r, bool accumulate);
/* grad_ready_fn: gradients [offset, offset+count) are final. ctx is the reducer. */
void reducer_grad_ready(void *ctx, size_t offset, size_t count);
/* Starts any bucket not yet started (all gradients must have been reported), waits for all. Under
 * ZeRO only this rank's blocks of the gradients are then averaged (ZeRO-2: in shard_grads). */
int reducer_finish(reducer *r, ddp_err *err);

#endif
