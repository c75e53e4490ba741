/* sampler.h — the distributed sampler, with PyTorch DistributedSampler's semantics and a position
 * that survives checkpoints and a change of world size.
 *
 * Each epoch has one global order: a permutation of [0, n) seeded by (seed + epoch), identical on
 * every rank (identity when shuffle is off). Step k on R ranks with per-rank batch B consumes the
 * global positions [k·R·B, (k+1)·R·B); rank r takes positions r, r+R, r+2R, … of that window,
 * which is exactly DistributedSampler's indices[r::R] cut into batches of B. Globally consumed
 * samples are therefore always a prefix of the epoch's order, and `consumed` is the whole resume
 * position: a job restarted on R' ranks continues with the rest of the order split R' ways.
 * An optimizer step of A micro-steps takes the window [k·A·R·B, (k+1)·A·R·B): for one global
 * batch G = A·R·B the samples of step k and their order in the epoch's order are the same for
 * every split of G into ranks, batch and accumulation, only who computes which differs
 * (train.global_batch resumes on another world size on this).
 * drop_last: the tail that does not fill a global batch is dropped. Otherwise the order is padded
 * by repeating its start up to a multiple of R and the last batch may be shorter than B (which
 * depends on R: train.global_batch therefore needs drop_last).
 * Evaluation uses sampler_eval_range instead: every sample exactly once, no padding.
 * Edge cases: the shuffle is Fisher–Yates driven by rng_seed(seed + epoch, RNG_SAMPLER). Resuming
 * at `consumed` on R' ranks treats the rest [consumed, n) like a fresh epoch for R': drop_last drops
 * its tail short of a global batch, otherwise it is padded up to a multiple of R' with the epoch's
 * order repeated from position 0 (and that repeats cyclically when the pad exceeds n, e.g. n < R).
 * `consumed` never exceeds n: the padded last step advances it to exactly n. With drop_last and
 * n < R·B an epoch has no steps at all (callers should reject that configuration).
 * This module must not read data or talk to other ranks. */
#ifndef DDP_SAMPLER_H
#define DDP_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/base/err.h"

typedef struct sampler {
    int64_t n, batch;
    int rank, world;
    bool shuffle, drop_last;
    uint64_t seed;
    int64_t epoch;
    int64_t consumed;   /* global positions of this epoch's order already consumed */
    int64_t *order;     /* this epoch's global order, n entries */
} sampler;

int sampler_init(sampler *s, int64_t n, int rank, int world, int64_t batch, bool shuffle,
                 bool drop_last, uint64_t seed, ddp_err *err);
void sampler_free(sampler *s);
/* Starts epoch e at position 0 (or `consumed`, when resuming). */
int sampler_set_epoch(sampler *s, int64_t epoch, int64_t consumed, ddp_err *err);
/* (sampler_init starts at epoch 0, position 0; set_epoch rejects consumed outside [0, n].) */
/* Steps left in this epoch from the current position (same on every rank). */
int64_t sampler_steps_left(const sampler *s);
/* Steps in a whole epoch from position 0. */
int64_t sampler_steps_per_epoch(const sampler *s);
/* Fills idx (capacity batch) with this rank's next batch and returns its length, 0 at epoch end.
 * Advances consumed by the whole global batch. */
int64_t sampler_next_batch(sampler *s, int64_t *idx);
/* Evaluation split of n samples: rank r gets [*begin, *end), disjoint and covering [0, n). */
void sampler_eval_range(int64_t n, int rank, int world, int64_t *begin, int64_t *end);

#endif
