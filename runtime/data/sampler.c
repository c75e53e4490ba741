/* sampler.c — the distributed sampler of sampler.h: one global order per epoch, a consumed prefix
 * as the whole position, and the evaluation split.
 *
 * Everything a rank needs follows from (n, world, batch, drop_last, seed, epoch, consumed), so
 * ranks agree without talking and a resume on another world size needs only `consumed`.
 * This file must not read data or talk to other ranks. */
#include "sampler.h"

#include <stdlib.h>
#include <string.h>

#include "runtime/base/rng.h"

static int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0); }

/* Fisher–Yates over [0, n), seeded by (seed + epoch) on the sampler stream. */
static void build_order(sampler *s)
{
    for (int64_t i = 0; i < s->n; i++)
        s->order[i] = i;
    if (!s->shuffle)
        return;
    rng r;
    rng_seed(&r, s->seed + (uint64_t)s->epoch, RNG_SAMPLER);
    for (int64_t i = s->n - 1; i > 0; i--) {
        int64_t j = (int64_t)rng_below(&r, (uint64_t)i + 1);
        int64_t t = s->order[i];
        s->order[i] = s->order[j];
        s->order[j] = t;
    }
}

int sampler_init(sampler *s, int64_t n, int rank, int world, int64_t batch, bool shuffle, bool drop_last,
                 uint64_t seed, ddp_err *err)
{
    memset(s, 0, sizeof *s);
    if (n <= 0 || world < 1 || rank < 0 || rank >= world || batch < 1)
        return ddp_fail(err, DDP_EUSAGE, "sampler: need n > 0, batch > 0 and 0 <= rank < world "
                        "(got n=%lld batch=%lld rank=%d world=%d)", (long long)n, (long long)batch, rank, world);
    if (batch > INT64_MAX / world || n > INT64_MAX - world)
        return ddp_fail(err, DDP_EUSAGE, "sampler: batch %lld x world %d or n %lld is too large",
                        (long long)batch, world, (long long)n);
    s->order = malloc((size_t)n * sizeof *s->order);
    if (!s->order)
        return ddp_fail(err, DDP_ERUNTIME, "sampler: cannot allocate the order of %lld samples", (long long)n);
    s->n = n;
    s->batch = batch;
    s->rank = rank;
    s->world = world;
    s->shuffle = shuffle;
    s->drop_last = drop_last;
    s->seed = seed;
    return sampler_set_epoch(s, 0, 0, err);
}

void sampler_free(sampler *s)
{
    if (!s)
        return;
    free(s->order);
    memset(s, 0, sizeof *s);
}

int sampler_set_epoch(sampler *s, int64_t epoch, int64_t consumed, ddp_err *err)
{
    if (epoch < 0 || consumed < 0 || consumed > s->n)
        return ddp_fail(err, DDP_EUSAGE, "sampler: position epoch %lld, consumed %lld is outside "
                        "epoch >= 0, 0 <= consumed <= n = %lld", (long long)epoch, (long long)consumed,
                        (long long)s->n);
    s->epoch = epoch;
    s->consumed = consumed;
    build_order(s);
    return DDP_OK;
}

/* Steps to consume m samples from the current position on this world size. */
static int64_t steps_for(const sampler *s, int64_t m)
{
    int64_t global_batch = s->batch * s->world;
    return s->drop_last ? m / global_batch : ceil_div(m, global_batch);
}

int64_t sampler_steps_left(const sampler *s) { return steps_for(s, s->n - s->consumed); }

int64_t sampler_steps_per_epoch(const sampler *s) { return steps_for(s, s->n); }

/* Positions past n are the padding: the order repeated from its start. */
static int64_t order_at(const sampler *s, int64_t pos)
{
    return pos < s->n ? s->order[pos] : s->order[(pos - s->n) % s->n];
}

int64_t sampler_next_batch(sampler *s, int64_t *idx)
{
    if (sampler_steps_left(s) == 0)
        return 0;
    int64_t remaining = s->n - s->consumed, global_batch = s->batch * s->world;
    int64_t padded = ceil_div(remaining, s->world) * s->world;
    int64_t window = padded < global_batch ? padded : global_batch;
    int64_t count = window / s->world;
    for (int64_t j = 0; j < count; j++)
        idx[j] = order_at(s, s->consumed + s->rank + j * s->world);
    s->consumed += window < remaining ? window : remaining;
    return count;
}

void sampler_eval_range(int64_t n, int rank, int world, int64_t *begin, int64_t *end)
{
    int64_t base = n / world, extra = n % world;
    *begin = rank * base + (rank < extra ? rank : extra);
    *end = *begin + base + (rank < extra);
}
