/* param_gather.h — ZeRO-3's parameter windows: each unit's compute-type parameters all-gathered
 * from every rank's shard into a reused window just before the passes read them.
 *
 * The layout is the ZeRO-2 reducer's (reducer_use_zero_units): one bucket per unit, rank r's block
 * of it at the bucket's shard_offset of r's shard. The shard to gather from holds this rank's
 * blocks in the compute type (float, or the bf16 copy of the fp32 master shard). Three windows, as
 * the gradients have: the first unit's own (a tied head reads the embedding at both ends of the
 * pass), and two the other units take in turns. A unit is gathered when the passes first ask for
 * it (param_gather_window, a model param_window_fn), unless it is still resident from before; then
 * the unit after it in the direction the passes are moving (up in forward, down in backward) is
 * gathered into the other window in the background, so the next unit's gather hides behind this
 * unit's compute. On NCCL a gather is ordered after the compute stream's work issued so far, so
 * the window it reuses is no longer being read; with MPI the CPU's compute is already done.
 * param_gather_invalidate forgets every window (the parameters changed). Must not know models,
 * the optimizer or checkpoints. */
#ifndef DDP_PARAM_GATHER_H
#define DDP_PARAM_GATHER_H

#include <stdbool.h>

#include "reducer.h"

typedef struct param_gather param_gather;

/* Windows for the units of layout (after reducer_use_zero_units) over its communicator, gathering
 * elements of type t (TENSOR_F32 or TENSOR_BF16) from shard (this rank's blocks, layout->shard_n
 * elements on d). */
int param_gather_create(reducer *layout, device *d, tensor_dtype t, const void *shard, param_gather **out,
                        ddp_err *err);
/* The window holding unit's parameters (a model param_window_fn; ctx is the param_gather): waits
 * for its gather, starting it first if needed, and starts the next unit's. An error is kept for
 * param_gather_status and the window returned anyway; after one, or a failure of the reducer's
 * collectives, no gather is issued and the reducer issues none either (reducer_halt). */
const void *param_gather_window(void *ctx, int unit);
/* Whether unit has a window: gathered, or its gather started (the one before it asked for it). */
bool param_gather_holds(const param_gather *g, int unit);
/* The parameters changed: waits for any gather in flight, then no window counts as resident. */
int param_gather_invalidate(param_gather *g, ddp_err *err);
/* The first error a window request met since the last call (DDP_OK when none), into err. */
int param_gather_status(param_gather *g, ddp_err *err);
/* The elements of the three windows for layout's units (for the memory plan). */
size_t param_gather_window_n(const reducer *layout);
/* Before the communicator is aborted: forgets the gathers in flight without waiting (reducer_abandon's
 * counterpart). */
void param_gather_abandon(param_gather *g);
void param_gather_destroy(param_gather *g);

#endif
