/* rng.h — small deterministic random streams, one per purpose (init, sampler, synthetic data).
 *
 * xoshiro256** seeded through splitmix64 from (seed, stream id), so every stream is reproducible
 * on every rank. Every stream is re-derived from (run.seed, purpose, epoch) when it is needed, so
 * checkpoints store no RNG state (docs/checkpoint-format.md says what a resume rests on).
 * Not for cryptography; must not keep global state. */
#ifndef DDP_RNG_H
#define DDP_RNG_H

#include <stdint.h>

typedef struct rng { uint64_t s[4]; } rng;

enum rng_stream { RNG_INIT = 1, RNG_SAMPLER = 2, RNG_SYNTHETIC = 3, RNG_DROPOUT = 4, RNG_GENERATE = 5,
                  RNG_SYNTHETIC_TEST = 6 };

void rng_seed(rng *r, uint64_t seed, uint64_t stream);
uint64_t rng_next(rng *r);
/* uniform in [0, bound) without modulo bias; bound > 0 */
uint64_t rng_below(rng *r, uint64_t bound);
/* uniform float in [lo, hi) with 24 random bits */
float rng_uniform(rng *r, float lo, float hi);
/* A standard normal N(0, 1) sample (Box–Muller, in double). */
double rng_normal(rng *r);

#endif
