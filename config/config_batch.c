/* config_batch.c — how a run splits an optimizer step's samples over its ranks: the per-rank batch
 * and the accumulation, as set, or derived from train.global_batch at the run's world size.
 *
 * The config holds the global batch, which the load checked against data.batch_size
 * (config_check.c); only the world size is new here, so both the launcher (before mpirun starts)
 * and every rank (before anything is built) refuse a world size that does not divide it with the
 * same message. This file must not read files or talk to ranks. */
#include "config_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ACCUM_MAX ((int64_t)1 << 20) /* train.grad_accum's own upper bound (config_keys.c) */
#define LISTED_MAX 24                /* world sizes a refusal names before "..." */

/* The largest divisor of share that is <= most (1 at worst), over the divisor pairs (d, share / d)
 * with d <= sqrt(share), so a large global batch costs no more than its square root. */
static int64_t largest_divisor_at_most(int64_t share, int64_t most)
{
    int64_t best = 1;
    for (int64_t d = 1; d <= share / d; d++) {
        if (share % d != 0)
            continue;
        if (d <= most && d > best)
            best = d;
        if (share / d <= most && share / d > best)
            best = share / d;
    }
    return best;
}

/* The split of the global batch at world ranks: false when world does not divide it or the
 * accumulation would exceed train.grad_accum's range. */
static bool split_global(const config *c, int64_t world, batch_split *out)
{
    int64_t g = c->train.global_batch, b = c->data.batch_size;
    if (world < 1 || g % world != 0)
        return false;
    int64_t share = g / world;
    if (c->train.micro_batch == MICRO_BATCH_AUTO)
        b = largest_divisor_at_most(share, b);
    if (share % b != 0 || share / b > ACCUM_MAX)
        return false;
    *out = (batch_split){.batch = b, .accum = share / b};
    return true;
}

/* Ascending order for qsort. */
static int by_value(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* "1, 2, 3, 4, 6, 12": the world sizes that split the global batch, ascending; all divide it, and
 * a number below 2^31 has at most 1600 divisors. */
static void list_worlds(const config *c, char *out, size_t cap)
{
    int64_t g = c->train.global_batch, divisors[2048];
    int n = 0;
    for (int64_t d = 1; d <= g / d && n < 2046; d++)
        if (g % d == 0) {
            divisors[n++] = d;
            if (g / d != d)
                divisors[n++] = g / d;
        }
    qsort(divisors, (size_t)n, sizeof divisors[0], by_value);
    size_t used = 0;
    int listed = 0;
    out[0] = '\0';
    batch_split s;
    for (int i = 0; i < n && divisors[i] <= INT32_MAX && used < cap; i++) {
        if (!split_global(c, divisors[i], &s))
            continue;
        if (listed++ == LISTED_MAX) {
            snprintf(out + used, cap - used, ", ...");
            break;
        }
        used += (size_t)snprintf(out + used, cap - used, "%s%lld", listed > 1 ? ", " : "", (long long)divisors[i]);
    }
}

int config_batch_split(const config *c, int world, batch_split *out, ddp_err *err)
{
    if (c->train.global_batch == 0) {
        *out = (batch_split){.batch = c->data.batch_size, .accum = c->train.grad_accum};
        return DDP_OK;
    }
    if (split_global(c, world, out))
        return DDP_OK;
    char why[256], worlds[256], where[CFG_WHERE_MAX];
    int64_t g = c->train.global_batch, b = c->data.batch_size;
    if (g % world != 0)
        snprintf(why, sizeof why, "%lld samples do not divide into %d equal shares", (long long)g, world);
    else if (c->train.micro_batch == MICRO_BATCH_FIXED && (g / world) % b != 0)
        snprintf(why, sizeof why, "%lld / (%d ranks x data.batch_size %lld) is not a whole number of micro-steps",
                 (long long)g, world, (long long)b);
    else
        snprintf(why, sizeof why, "it would take %lld micro-steps, more than train.grad_accum's %lld",
                 (long long)(g / world / (c->train.micro_batch == MICRO_BATCH_AUTO
                                              ? largest_divisor_at_most(g / world, b) : b)),
                 (long long)ACCUM_MAX);
    list_worlds(c, worlds, sizeof worlds);
    return ddp_fail(err, DDP_EUSAGE, "%s: train.global_batch %lld cannot be split over %d rank%s: %s; world sizes "
                    "that would: %s%s", config_where(c, "train.global_batch", where, sizeof where), (long long)g,
                    world, world == 1 ? "" : "s", why, worlds, c->train.micro_batch == MICRO_BATCH_FIXED ? " (train.micro_batch: auto allows every "
                    "divisor of train.global_batch)" : "");
}

int config_world_at_most(const config *c, int most)
{
    batch_split s;
    for (int w = most; w >= 1; w--)
        if (c->train.global_batch == 0 || split_global(c, w, &s))
            return w;
    return 0;
}
