/* test_sampler.c — the distributed sampler (suite 'sampler'), ranks simulated in one process.
 *
 * One sampler per rank; their batches are compared with PyTorch DistributedSampler's definition
 * written out independently here (pad the order with its start to a multiple of R, rank r takes
 * [r::R], cut into batches of B), with coverage/disjointness counts, with resume from a consumed
 * position (same and different world sizes), with a global batch's steps under every split of it
 * into ranks, per-rank batch and accumulation (train.global_batch), and with the evaluation split. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/check.h"
#include "runtime/data/sampler.h"

#define MAX_WORLD 8

static const int64_t sizes[] = {1, 2, 3, 7, 13, 31, 64, 97, 100, 257, 1009};
static const int64_t batches[] = {1, 3, 8, 32};

typedef struct ranks {
    sampler s[MAX_WORLD];
    int world;
} ranks;

static int ranks_init(ranks *g, int64_t n, int world, int64_t batch, bool shuffle, bool drop_last,
                      uint64_t seed)
{
    ddp_err err = {0};
    g->world = world;
    for (int r = 0; r < world; r++)
        if (sampler_init(&g->s[r], n, r, world, batch, shuffle, drop_last, seed, &err)) {
            CHECK(0, "sampler_init: %s", err.msg);
            return 1;
        }
    return 0;
}

static void ranks_set_epoch(ranks *g, int64_t epoch, int64_t consumed)
{
    ddp_err err = {0};
    for (int r = 0; r < g->world; r++)
        CHECK(sampler_set_epoch(&g->s[r], epoch, consumed, &err) == DDP_OK, "set_epoch: %s", err.msg);
}

static void ranks_free(ranks *g)
{
    for (int r = 0; r < g->world; r++)
        sampler_free(&g->s[r]);
}

/* Runs at most max_steps steps on every rank; appends each rank's indices to out[r] (capacity
 * cap) and each rank's total to len[r]; checks every rank agrees on step count and batch size.
 * Returns the steps run. */
static int64_t run_steps(ranks *g, int64_t max_steps, int64_t **out, int64_t *len, int64_t cap)
{
    int64_t batch = g->s[0].batch, steps = 0;
    int64_t *idx = malloc((size_t)batch * sizeof *idx);
    for (; steps < max_steps; steps++) {
        int64_t left0 = sampler_steps_left(&g->s[0]), got0 = -1;
        for (int r = 0; r < g->world; r++) {
            CHECK_EQ_INT(sampler_steps_left(&g->s[r]), left0);
            int64_t got = sampler_next_batch(&g->s[r], idx);
            if (r == 0)
                got0 = got;
            CHECK(got == got0, "rank %d batch of %lld, rank 0 got %lld", r, (long long)got, (long long)got0);
            CHECK(got >= 0 && got <= batch, "batch size %lld", (long long)got);
            CHECK(got > 0 || left0 == 0, "empty batch with %lld steps left", (long long)left0);
            for (int64_t j = 0; j < got && len[r] < cap; j++)
                out[r][len[r]++] = idx[j];
        }
        if (got0 == 0)
            break;
    }
    free(idx);
    return steps;
}

/* DistributedSampler's per-rank list from the order: padded with its start, then [r::R]. */
static int64_t reference_rank_list(const int64_t *order, int64_t n, int64_t from, int world, int rank,
                                   int64_t batch, bool drop_last, int64_t *out)
{
    int64_t m = n - from, total;
    if (drop_last)
        total = m / (world * batch) * world * batch;
    else
        total = (m + world - 1) / world * world;
    int64_t k = 0;
    for (int64_t p = rank; p < total; p += world) {
        int64_t pos = from + p;
        out[k++] = pos < n ? order[pos] : order[(pos - n) % n];
    }
    return k;
}

static int64_t **alloc_lists(int64_t cap)
{
    int64_t **lists = malloc(MAX_WORLD * sizeof *lists);
    for (int r = 0; r < MAX_WORLD; r++)
        lists[r] = malloc((size_t)cap * sizeof **lists);
    return lists;
}

static void free_lists(int64_t **lists)
{
    for (int r = 0; r < MAX_WORLD; r++)
        free(lists[r]);
    free(lists);
}

/* One whole epoch for (n, world, batch): matches the reference, coverage and padding counts. */
static void check_epoch(int64_t n, int world, int64_t batch, bool shuffle, bool drop_last)
{
    ranks g;
    if (ranks_init(&g, n, world, batch, shuffle, drop_last, 1234))
        return;
    ranks_set_epoch(&g, 3, 0);
    int64_t cap = n + world * batch, len[MAX_WORLD] = {0};
    int64_t **got = alloc_lists(cap), *want = malloc((size_t)cap * sizeof *want);
    int64_t steps = run_steps(&g, INT64_MAX, got, len, cap);
    CHECK_EQ_INT(steps, sampler_steps_per_epoch(&g.s[0]));
    int64_t *uses = calloc((size_t)n, sizeof *uses), total = 0;
    for (int r = 0; r < world; r++) {
        int64_t wn = reference_rank_list(g.s[0].order, n, 0, world, r, batch, drop_last, want);
        CHECK(len[r] == wn && memcmp(got[r], want, (size_t)wn * sizeof *want) == 0,
              "n=%lld R=%d B=%lld drop=%d rank %d differs from DistributedSampler's indices[r::R]",
              (long long)n, world, (long long)batch, drop_last, r);
        CHECK_EQ_INT(len[r], len[0]);
        for (int64_t j = 0; j < len[r]; j++)
            uses[got[r][j]]++, total++;
    }
    int64_t gb = world * batch, bad = 0;
    if (drop_last) {
        /* documented count, each used at most once: ranks disjoint, no duplicates */
        CHECK_EQ_INT(total, n / gb * gb);
        CHECK_EQ_INT(steps, n / gb);
        for (int64_t i = 0; i < n; i++)
            bad += uses[i] > 1;
    } else {
        /* every index once, plus the first (padded - n) entries of the order once more each */
        int64_t padded = (n + world - 1) / world * world;
        CHECK_EQ_INT(total, padded);
        CHECK_EQ_INT(steps, (n + gb - 1) / gb);
        int64_t *expect = calloc((size_t)n, sizeof *expect);
        for (int64_t i = 0; i < n; i++)
            expect[i] = 1;
        for (int64_t p = 0; p < padded - n; p++)
            expect[g.s[0].order[p % n]]++;
        for (int64_t i = 0; i < n; i++)
            bad += uses[i] != expect[i];
        free(expect);
    }
    CHECK(bad == 0, "n=%lld R=%d B=%lld drop=%d: %lld indices used the wrong number of times",
          (long long)n, world, (long long)batch, drop_last, (long long)bad);
    CHECK_EQ_INT(g.s[0].consumed, drop_last ? n / gb * gb : n);
    free(uses), free(want), free_lists(got), ranks_free(&g);
}

static int is_permutation(const int64_t *order, int64_t n)
{
    char *seen = calloc((size_t)n, 1);
    int ok = 1;
    for (int64_t i = 0; i < n && ok; i++) {
        ok = order[i] >= 0 && order[i] < n && !seen[order[i]];
        if (ok)
            seen[order[i]] = 1;
    }
    free(seen);
    return ok;
}

static void check_orders(void)
{
    ddp_err err = {0};
    sampler a, b, c, id;
    int64_t n = 1000;
    sampler_init(&a, n, 0, 2, 4, true, false, 7, &err);
    sampler_init(&b, n, 1, 2, 4, true, false, 7, &err);
    sampler_init(&c, n, 0, 2, 4, true, false, 8, &err);
    sampler_init(&id, n, 0, 2, 4, false, false, 7, &err);
    CHECK(is_permutation(a.order, n), "shuffled order is a permutation");
    CHECK(memcmp(a.order, b.order, n * sizeof(int64_t)) == 0, "same seed, same order on every rank");
    CHECK(memcmp(a.order, c.order, n * sizeof(int64_t)) != 0, "another seed, another order");
    int64_t fixed = 0;
    for (int64_t i = 0; i < n; i++)
        fixed += a.order[i] == i;
    CHECK(fixed < 20, "shuffle leaves %lld of %lld in place", (long long)fixed, (long long)n);
    int64_t *epoch0 = malloc(n * sizeof *epoch0);
    memcpy(epoch0, a.order, n * sizeof *epoch0);
    sampler_set_epoch(&a, 1, 0, &err);
    CHECK(is_permutation(a.order, n), "epoch 1 order is a permutation");
    CHECK(memcmp(a.order, epoch0, n * sizeof(int64_t)) != 0, "next epoch, different order");
    sampler_set_epoch(&a, 0, 0, &err);
    CHECK(memcmp(a.order, epoch0, n * sizeof(int64_t)) == 0, "epoch 0 again, same order");
    /* order depends on seed + epoch only, as documented: (seed 7, epoch 1) == (seed 8, epoch 0) */
    sampler_set_epoch(&a, 1, 0, &err);
    CHECK(memcmp(a.order, c.order, n * sizeof(int64_t)) == 0, "order seeded by seed + epoch");
    for (int e = 0; e < 3; e++) {
        sampler_set_epoch(&id, e, 0, &err);
        int64_t moved = 0;
        for (int64_t i = 0; i < n; i++)
            moved += id.order[i] != i;
        CHECK(moved == 0, "shuffle off: epoch %d order is not the identity", e);
    }
    free(epoch0);
    sampler_free(&a), sampler_free(&b), sampler_free(&c), sampler_free(&id);
}

/* Stop after k steps, restore into fresh samplers at the consumed position: same remaining batches. */
static void check_resume_same_world(int64_t n, int world, int64_t batch, bool drop_last, int64_t k)
{
    ranks a, b;
    if (ranks_init(&a, n, world, batch, true, drop_last, 99) || ranks_init(&b, n, world, batch, true, drop_last, 99))
        return;
    ranks_set_epoch(&a, 2, 0);
    int64_t cap = n + world * batch, la[MAX_WORLD] = {0}, lb[MAX_WORLD] = {0};
    int64_t **ga = alloc_lists(cap), **gb = alloc_lists(cap);
    run_steps(&a, k, ga, la, cap);
    int64_t consumed = a.s[0].consumed;
    memset(la, 0, sizeof la);
    run_steps(&a, INT64_MAX, ga, la, cap);
    ranks_set_epoch(&b, 2, consumed);
    run_steps(&b, INT64_MAX, gb, lb, cap);
    for (int r = 0; r < world; r++)
        CHECK(la[r] == lb[r] && memcmp(ga[r], gb[r], (size_t)la[r] * sizeof(int64_t)) == 0,
              "n=%lld R=%d B=%lld k=%lld: rank %d resumes differently", (long long)n, world,
              (long long)batch, (long long)k, r);
    free_lists(ga), free_lists(gb), ranks_free(&a), ranks_free(&b);
}

/* k steps at R=2, then the rest of the epoch at new_world: samples used = order prefix + the rest. */
static void check_world_change(int64_t n, int64_t batch, int64_t k, int new_world, bool drop_last)
{
    ranks a, b;
    if (ranks_init(&a, n, 2, batch, true, drop_last, 31) || ranks_init(&b, n, new_world, batch, true, drop_last, 31))
        return;
    ranks_set_epoch(&a, 4, 0);
    int64_t cap = n + MAX_WORLD * batch, la[MAX_WORLD] = {0}, lb[MAX_WORLD] = {0};
    int64_t **ga = alloc_lists(cap), **gb = alloc_lists(cap);
    run_steps(&a, k, ga, la, cap);
    int64_t consumed = a.s[0].consumed;
    CHECK_EQ_INT(consumed, k * 2 * batch);
    ranks_set_epoch(&b, 4, consumed);
    int64_t steps = run_steps(&b, INT64_MAX, gb, lb, cap);
    int64_t *uses = calloc((size_t)n, sizeof *uses), total = 0;
    for (int r = 0; r < 2; r++)
        for (int64_t j = 0; j < la[r]; j++)
            uses[ga[r][j]]++, total++;
    for (int r = 0; r < new_world; r++) {
        CHECK_EQ_INT(lb[r], lb[0]);
        for (int64_t j = 0; j < lb[r]; j++)
            uses[gb[r][j]]++, total++;
    }
    int64_t m = n - consumed, gbatch = new_world * batch, once = 0, twice = 0, more = 0;
    for (int64_t i = 0; i < n; i++)
        once += uses[i] == 1, twice += uses[i] == 2, more += uses[i] > 2;
    if (drop_last) {
        CHECK_EQ_INT(total, consumed + m / gbatch * gbatch);
        CHECK_EQ_INT(once, total);
        CHECK_EQ_INT(steps, m / gbatch);
    } else {
        int64_t pad = (m + new_world - 1) / new_world * new_world - m;
        CHECK(once + twice == n && twice == pad && more == 0,
              "n=%lld k=%lld R'=%d: once %lld twice %lld more %lld, pad %lld", (long long)n, (long long)k,
              new_world, (long long)once, (long long)twice, (long long)more, (long long)pad);
        if (pad == 0)
            CHECK_EQ_INT(once, n);
        CHECK_EQ_INT(steps, (m + gbatch - 1) / gbatch);
        CHECK_EQ_INT(b.s[0].consumed, n);
    }
    free(uses), free_lists(ga), free_lists(gb), ranks_free(&a), ranks_free(&b);
}

static void check_eval_range(void)
{
    static const int64_t ns[] = {0, 1, 2, 5, 7, 8, 9, 10000, 10007};
    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++)
        for (int world = 1; world <= MAX_WORLD; world++) {
            int64_t next = 0, lo = INT64_MAX, hi = 0;
            for (int r = 0; r < world; r++) {
                int64_t b, e;
                sampler_eval_range(ns[i], r, world, &b, &e);
                CHECK(b == next && e >= b, "n=%lld R=%d rank %d range [%lld, %lld) after %lld",
                      (long long)ns[i], world, r, (long long)b, (long long)e, (long long)next);
                next = e;
                lo = e - b < lo ? e - b : lo;
                hi = e - b > hi ? e - b : hi;
            }
            CHECK(next == ns[i], "n=%lld R=%d ranges end at %lld", (long long)ns[i], world, (long long)next);
            CHECK(hi - lo <= 1, "n=%lld R=%d unbalanced split %lld..%lld", (long long)ns[i], world,
                  (long long)lo, (long long)hi);
        }
}

static void check_bad_arguments(void)
{
    ddp_err err = {0};
    sampler s;
    CHECK(sampler_init(&s, 0, 0, 1, 1, true, false, 1, &err) == DDP_EUSAGE, "n = 0 rejected");
    CHECK(sampler_init(&s, 10, 2, 2, 1, true, false, 1, &err) == DDP_EUSAGE, "rank >= world rejected");
    CHECK(sampler_init(&s, 10, 0, 1, 0, true, false, 1, &err) == DDP_EUSAGE, "batch 0 rejected");
    CHECK(s.order == NULL, "rejected sampler holds nothing");
    CHECK_EQ_INT(sampler_init(&s, 10, 0, 1, 4, true, false, 1, &err), DDP_OK);
    CHECK(sampler_set_epoch(&s, 0, 11, &err) == DDP_EUSAGE, "consumed > n rejected");
    CHECK_STR_CONTAINS(err.msg, "consumed");
    CHECK(sampler_set_epoch(&s, 0, 10, &err) == DDP_OK, "consumed == n accepted");
    CHECK_EQ_INT(sampler_steps_left(&s), 0);
    sampler_free(&s);
}

/* One optimizer step of accum micro-steps over g's ranks, as the training loop takes it, put back
 * into the step's global order (micro-step m, rank r, row j is position m*R*B + r + j*R). Returns
 * the samples placed, 0 when fewer than accum micro-steps are left (the loop's epoch end). */
static int64_t global_step(ranks *g, int64_t accum, int64_t *seq)
{
    int64_t batch = g->s[0].batch, world = g->world, idx[64];
    if (sampler_steps_left(&g->s[0]) < accum)
        return 0;
    for (int64_t m = 0; m < accum; m++)
        for (int r = 0; r < g->world; r++) {
            int64_t rows = sampler_next_batch(&g->s[r], idx);
            CHECK(rows == batch, "a full micro-batch under drop_last (got %lld of %lld)", (long long)rows,
                  (long long)batch);
            for (int64_t j = 0; j < rows; j++)
                seq[m * world * batch + r + j * world] = idx[j];
        }
    return accum * world * batch;
}

/* train.global_batch's promise: with drop_last, each step's samples and their global order depend
 * only on the global batch G = accum x world x batch, not on its split, also when a run changes its
 * split at a step boundary (a resume on another world size), and the epoch has n / G steps. */
static void check_global_batch_splits(int64_t n, uint64_t seed)
{
    static const int64_t splits[][3] = {{4, 3, 1}, {2, 3, 2}, {3, 4, 1}, {1, 4, 3}, {6, 1, 2}, {1, 12, 1}};
    const int n_splits = (int)(sizeof splits / sizeof splits[0]);
    int64_t ref[2048][12], seq[12];
    int64_t steps = 0;
    ranks g;
    if (ranks_init(&g, n, 1, 12, true, true, seed))
        return;
    while (steps < 2048 && global_step(&g, 1, ref[steps]))
        steps++;
    ranks_free(&g);
    CHECK_EQ_INT(steps, n / 12);
    for (int first = 0; first < n_splits; first++) {
        /* the whole epoch at one split, then switching split every 5 steps */
        for (int change = 0; change < 2; change++) {
            int sp = first;
            int64_t done = 0;
            while (done < steps) {
                const int64_t *x = splits[sp];
                if (ranks_init(&g, n, (int)x[0], x[1], true, true, seed))
                    return;
                ranks_set_epoch(&g, 0, done * 12);
                for (int64_t k = 0; (!change || k < 5) && done < steps; k++, done++) {
                    int64_t got = global_step(&g, x[2], seq);
                    CHECK(got == 12, "split %lldx%lldx%lld: step %lld took %lld samples", (long long)x[0],
                          (long long)x[1], (long long)x[2], (long long)done + 1, (long long)got);
                    CHECK(got == 12 && memcmp(seq, ref[done], sizeof seq) == 0,
                          "n=%lld split %lld ranks x %lld x %lld: step %lld differs from the reference's", (long long)n,
                          (long long)x[0], (long long)x[1], (long long)x[2], (long long)done + 1);
                }
                CHECK(done < steps || global_step(&g, x[2], seq) == 0, "a step past n / G");
                ranks_free(&g);
                sp = (sp + 1) % n_splits;
            }
        }
    }
}

int main(void)
{
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        for (int world = 1; world <= MAX_WORLD; world++)
            for (size_t j = 0; j < sizeof batches / sizeof *batches; j++)
                for (int mode = 0; mode < 4; mode++)
                    check_epoch(sizes[i], world, batches[j], mode & 1, mode & 2);
    check_orders();
    for (int world = 1; world <= MAX_WORLD; world++)
        for (int64_t k = 0; k <= 5; k++) {
            check_resume_same_world(97, world, 4, false, k);
            check_resume_same_world(1009, world, 8, true, k);
        }
    static const int64_t wc_sizes[] = {97, 100, 1009};
    for (size_t i = 0; i < sizeof wc_sizes / sizeof *wc_sizes; i++)
        for (int64_t k = 0; k <= 6; k++)
            for (int nw = 1; nw <= 3; nw += 2) {
                check_world_change(wc_sizes[i], 8, k, nw, false);
                check_world_change(wc_sizes[i], 8, k, nw, true);
            }
    check_global_batch_splits(1009, 3);
    check_global_batch_splits(60, 11);
    check_eval_range();
    check_bad_arguments();
    return check_done("test_sampler");
}
