/* rng.h — small deterministic random streams, one per purpose (init, sampler, synthetic data).
 *
 * Two kinds. A sequential stream (rng): xoshiro256** seeded through splitmix64 from (seed, stream
 * id), drawn in order, for the sampler's shuffle, synthetic data and sampling. A counter-based
 * one (rng_key): Philox4x32-10 (Salmon, Moraes, Dror and Shaw, "Parallel random numbers: as easy
 * as 1, 2, 3", SC'11; the generator of cuRAND's and PyTorch's GPU draws), whose value i is a pure
 * function of (key, i), so a rank draws only its own slice of a stream, in as many threads as it
 * likes, and gets exactly the values a whole draw puts there: the initial parameters.
 * Every stream is re-derived from (run.seed, purpose, epoch) when it is needed, so checkpoints
 * store no RNG state (docs/checkpoint-format.md says what a resume rests on).
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

/* A counter-based stream: Philox's key and the upper half of its counter (the lower half counts
 * blocks within the stream). */
typedef struct rng_key { uint32_t key[2]; uint32_t sub[2]; } rng_key;
/* Stream `sub` (a tensor's index) of purpose `stream` under seed. */
rng_key rng_key_of(uint64_t seed, uint64_t stream, uint64_t sub);
/* Philox4x32-10's block for counter ctr under key, in Random123's word order. */
void rng_philox(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);
/* Values [lo, hi) of the key's N(0, 1) stream, times scale, into dst[0 .. hi - lo): values 2p
 * and 2p + 1 are the cosine and sine branch of Box–Muller (in double) on block p. */
void rng_normals_at(const rng_key *k, uint64_t lo, uint64_t hi, double scale, float *dst);
/* Values [lo, hi) of the key's uniform stream in [a, b) (24 random bits each, the four words of
 * block q giving values 4q .. 4q + 3) into dst[0 .. hi - lo). */
void rng_uniforms_at(const rng_key *k, uint64_t lo, uint64_t hi, float a, float b, float *dst);

#endif
