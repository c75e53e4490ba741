/* test_reducer_zero.c — the reducer's ZeRO-1 mode (collectives/reducer.h) under real mpirun, on
 * the MPI communicator (host buffers), at any world size of 2 or more.
 *
 * For parameter counts below, at and around the world size and well past it, with tensors of
 * uneven sizes and buckets small enough that there are many: the buckets start at multiples of
 * the world size and cover the buffer in order; every parameter belongs to exactly one rank's
 * block; after a backward pass reported in pieces, each rank's block of the gradients holds the
 * exact average (small integers, so the average is exact) and the spare floats past the gradients
 * stay zero; the all-gather then gives every rank every block's parameters, and the spare floats
 * past the parameters stay zero.
 *
 * ZeRO-2 (reducer_use_zero_units, on the CPU device): the same tensors as units; a backward that
 * writes each unit's gradients into the window the reducer hands out — the first unit's first and
 * last, as a tied head does — over two micro-steps leaves in this rank's shard the exact sum of the
 * two averages, every window handed out zeroed; the all-gather through the windows gives every
 * rank every parameter; a window asked for again before its unit was reported is an error naming
 * the bucket.
 *
 * ZeRO-3's parameter windows (param_gather.h) over the same layout: units asked for in forward
 * order, in backward order, and as a tied head does (the first unit between the others) each hold
 * exactly that unit's parameters from every rank's shard; after the shard changes and the windows
 * are invalidated, no window shows the old values, and the first unit asked for then starts the
 * second's gather (the pass goes up). */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/param_gather.h"
#include "collectives/reducer.h"
#include "tests/check.h"

static int g_rank, g_size;

static float grad_of(int rank, size_t i) { return (float)((i * 7 + (size_t)rank * 3) % 5) - 2.0f; }
static float param_of(size_t i) { return 0.5f * (float)i + 1.0f; }

/* Up to five tensors of uneven sizes, the first at 0. */
static int make_tensors(size_t n, size_t *offs)
{
    int k = 0;
    for (size_t t = 0; t < 5; t++) {
        size_t at = t == 0 ? 0 : t * n / 5 + t % 2;
        if (k == 0 || (at > offs[k - 1] && at < n))
            offs[k++] = at;
    }
    return k;
}

/* The plan: buckets in reduction order cover [0, n) from the end, start at multiples of the world
 * size, and the blocks of all ranks cover every parameter exactly once. */
static void check_plan(const reducer *r, size_t n)
{
    size_t end = n, w = (size_t)g_size;
    unsigned char *owner = calloc(n, 1);
    for (int b = 0; b < r->n_buckets; b++) {
        const reducer_bucket *k = &r->buckets[b];
        CHECK(k->offset + k->count == end && k->offset % w == 0, "n=%zu: bucket %d [%zu, +%zu) after %zu", n, b,
              k->offset, k->count, end);
        CHECK(k->block * w >= k->count && k->block * w < k->count + w, "n=%zu: bucket %d block %zu", n, b, k->block);
        end = k->offset;
        for (int rank = 0; rank < g_size; rank++) {
            size_t p, s, c;
            reducer_zero_part(r, b, rank, &p, &s, &c);
            for (size_t j = 0; j < c; j++)
                owner[p + j]++;
        }
    }
    CHECK(end == 0, "n=%zu: buckets end at %zu, not 0", n, end);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += owner[i] != 1;
    CHECK(bad == 0, "n=%zu: %zu parameters not in exactly one block", n, bad);
    free(owner);
}

/* Backward reports the tensors from the last to the first, each in two pieces. */
static void backward(reducer *r, const size_t *offs, int n_tensors, size_t n)
{
    reducer_begin(r, false);
    for (int t = n_tensors - 1; t >= 0; t--) {
        size_t lo = offs[t], hi = t + 1 < n_tensors ? offs[t + 1] : n, mid = lo + (hi - lo) / 2;
        reducer_grad_ready(r, mid, hi - mid);
        reducer_grad_ready(r, lo, mid - lo);
    }
}

static void check_averages(const reducer *r, const float *grads, size_t n, size_t tail)
{
    size_t bad = 0, tail_bad = 0;
    for (int b = 0; b < r->n_buckets; b++) {
        size_t p, s, c;
        reducer_zero_part(r, b, g_rank, &p, &s, &c);
        for (size_t j = 0; j < c; j++) {
            float sum = 0;
            for (int rank = 0; rank < g_size; rank++)
                sum += grad_of(rank, p + j);
            bad += grads[p + j] != sum / (float)g_size;
        }
    }
    for (size_t i = n; i < n + tail; i++)
        tail_bad += grads[i] != 0.0f;
    CHECK(bad == 0 && tail_bad == 0, "n=%zu: %zu gradients of this rank's blocks not the average, %zu spare floats "
          "not zero", n, bad, tail_bad);
}

static void check_gather(reducer *r, float *params, size_t n, size_t tail)
{
    for (size_t i = 0; i < n; i++)
        params[i] = -7.0f; /* what this rank does not own must arrive */
    for (int b = 0; b < r->n_buckets; b++) {
        size_t p, s, c;
        reducer_zero_part(r, b, g_rank, &p, &s, &c);
        for (size_t j = 0; j < c; j++)
            params[p + j] = param_of(p + j);
    }
    ddp_err err = {0};
    int rc = DDP_OK;
    for (int b = 0; b < r->n_buckets && rc == DDP_OK; b++)
        rc = reducer_gather(r, b, &err);
    if (rc == DDP_OK)
        rc = reducer_gather_finish(r, &err);
    CHECK(rc == DDP_OK, "n=%zu: gather: %s", n, err.msg);
    size_t bad = 0, tail_bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += params[i] != param_of(i);
    for (size_t i = n; i < n + tail; i++)
        tail_bad += params[i] != 0.0f;
    CHECK(bad == 0 && tail_bad == 0, "n=%zu: %zu parameters not gathered, %zu spare floats not zero", n, bad,
          tail_bad);
}

static void test_count(comm *c, size_t n)
{
    size_t tail = (size_t)g_size - 1, offs[8];
    int n_tensors = make_tensors(n, offs);
    float *grads = calloc(n + tail, sizeof *grads), *params = calloc(n + tail, sizeof *params);
    for (size_t i = 0; i < n; i++)
        grads[i] = grad_of(g_rank, i);
    reducer *r = NULL;
    ddp_err err = {0};
    /* buckets of 3 floats after a first of 2: many buckets, most moved by the cut */
    int rc = reducer_create(c, grads, n, offs, n_tensors, 12.0 / (1 << 20), 8.0 / (1 << 20), &r, &err);
    if (rc == DDP_OK)
        rc = reducer_use_zero(r, params, tail, &err);
    CHECK(rc == DDP_OK, "n=%zu: reducer: %s", n, err.msg);
    if (rc == DDP_OK) {
        check_plan(r, n);
        backward(r, offs, n_tensors, n);
        rc = reducer_finish(r, &err);
        CHECK(rc == DDP_OK, "n=%zu: finish: %s", n, err.msg);
        check_averages(r, grads, n, tail);
        check_gather(r, params, n, tail);
    }
    reducer_destroy(r);
    free(grads);
    free(params);
}

/* ZeRO-2: micro-step `step`'s backward: unit 0's window first (a tied head), then the units from
 * the last, each written whole (window zero checked first) and reported; unit 0 last. */
static size_t units_backward(reducer *r, const size_t *offs, int n_units, size_t n, int step)
{
    size_t dirty = 0;
    reducer_begin(r, step > 0);
    float *first = reducer_unit_window(r, 0);
    for (int u = n_units - 1; u >= 0; u--) {
        size_t lo = offs[u], hi = u + 1 < n_units ? offs[u + 1] : n;
        float *w = u == 0 ? first : reducer_unit_window(r, u);
        for (size_t i = lo; i < hi; i++) {
            dirty += w[i - lo] != 0.0f;
            w[i - lo] = grad_of(g_rank, i) * (float)(step + 1);
        }
        reducer_grad_ready(r, lo, hi - lo);
    }
    return dirty;
}

/* ZeRO-2's reducer over n floats cut into make_tensors' units (*n_units of them at offs). */
static int units_reducer(comm *c, device *d, size_t n, size_t *offs, int *n_units, float *params, reducer **r,
                         ddp_err *err)
{
    *n_units = make_tensors(n, offs);
    *r = NULL;
    int rc = reducer_create(c, NULL, n, offs, *n_units, 1.0, 1.0, r, err);
    return rc == DDP_OK ? reducer_use_zero_units(*r, offs, *n_units, params, d, err) : rc;
}

static void test_units(comm *c, device *d, size_t n)
{
    size_t offs[8];
    int n_units;
    float *params = calloc(n, sizeof *params);
    reducer *r;
    ddp_err err = {0};
    int rc = units_reducer(c, d, n, offs, &n_units, params, &r, &err);
    CHECK(rc == DDP_OK, "units n=%zu: reducer: %s", n, err.msg);
    size_t dirty = 0;
    for (int step = 0; rc == DDP_OK && step < 2; step++) {
        dirty += units_backward(r, offs, n_units, n, step);
        rc = reducer_finish(r, &err);
        CHECK(rc == DDP_OK, "units n=%zu: finish: %s", n, err.msg);
    }
    CHECK(dirty == 0, "units n=%zu: %zu window elements not zero when handed out", n, dirty);
    size_t bad = 0;
    for (int b = 0; rc == DDP_OK && b < r->n_buckets; b++) {
        size_t p, s, k;
        reducer_zero_part(r, b, g_rank, &p, &s, &k);
        for (size_t j = 0; j < k; j++) {
            float sum = 0;
            for (int rank = 0; rank < g_size; rank++)
                sum += grad_of(rank, p + j);
            bad += r->shard_grads[s + j] != sum / (float)g_size * 3.0f; /* micro-steps x1 and x2 */
        }
    }
    CHECK(bad == 0, "units n=%zu: %zu shard gradients not the sum of the micro-steps' averages", n, bad);
    if (rc == DDP_OK)
        check_gather(r, params, n, 0);
    reducer_destroy(r);
    free(params);
}

/* Every element of unit u's window is param_of(offset) * scale. */
static size_t window_wrong(param_gather *g, const size_t *offs, int n_units, size_t n, int u, float scale)
{
    const float *w = param_gather_window(g, u);
    size_t lo = offs[u], hi = u + 1 < n_units ? offs[u + 1] : n, bad = 0;
    for (size_t i = lo; i < hi; i++)
        bad += w[i - lo] != param_of(i) * scale;
    return bad;
}

static void test_param_windows(comm *c, device *d, size_t n)
{
    size_t offs[8];
    int n_units;
    reducer *r;
    ddp_err err = {0};
    int rc = units_reducer(c, d, n, offs, &n_units, NULL, &r, &err);
    float *shard = rc == DDP_OK ? calloc(r->shard_n + 1, sizeof *shard) : NULL;
    param_gather *g = NULL;
    if (shard)
        rc = param_gather_create(r, d, TENSOR_F32, shard, &g, &err);
    CHECK(rc == DDP_OK && shard, "windows n=%zu: %s", n, err.msg);
    for (float scale = 1.0f; g && scale <= 2.0f; scale += 1.0f) {
        for (int b = 0; b < r->n_buckets; b++) {
            size_t p, s, k;
            reducer_zero_part(r, b, g_rank, &p, &s, &k);
            for (size_t j = 0; j < k; j++)
                shard[s + j] = param_of(p + j) * scale;
        }
        size_t bad = 0;
        for (int u = 0; u < n_units; u++) /* forward */
            bad += window_wrong(g, offs, n_units, n, u, scale);
        for (int u = n_units - 1; u >= 0; u--) /* backward, the first unit between (a tied head) */
            bad += window_wrong(g, offs, n_units, n, u, scale) + window_wrong(g, offs, n_units, n, 0, scale);
        rc = param_gather_status(g, &err);
        CHECK(rc == DDP_OK && bad == 0, "windows n=%zu scale %g: %zu elements wrong (%s)", n, (double)scale, bad,
              rc ? err.msg : "no error");
        rc = param_gather_invalidate(g, &err); /* the parameters change: nothing old may show */
        CHECK(rc == DDP_OK, "windows n=%zu: invalidate: %s", n, err.msg);
        if (n_units > 1 && scale == 1.0f) { /* the next pass's first unit starts the second's gather */
            bad = window_wrong(g, offs, n_units, n, 0, scale);
            CHECK(bad == 0 && param_gather_holds(g, 1), "windows n=%zu: after an invalidation unit 0's pass left "
                  "unit 1 ungathered", n);
            rc = param_gather_invalidate(g, &err);
        }
    }
    param_gather_destroy(g);
    free(shard);
    reducer_destroy(r);
}

/* A window needed again before the unit holding it was reported is an error, not a silent reuse. */
static void test_units_early_reuse(comm *c, device *d)
{
    size_t n = 40 * (size_t)g_size, offs[8];
    int n_units;
    float *params = calloc(n, sizeof *params);
    reducer *r;
    ddp_err err = {0};
    int rc = units_reducer(c, d, n, offs, &n_units, params, &r, &err);
    if (rc == DDP_OK && n_units >= 4) {
        reducer_begin(r, false);
        for (int u = n_units - 1; u >= n_units - 3; u--) /* three units, none reported: two windows */
            (void)reducer_unit_window(r, u);
        for (int u = n_units - 1; u >= 0; u--) /* then everything, so the collectives match */
            reducer_grad_ready(r, offs[u], (u + 1 < n_units ? offs[u + 1] : n) - offs[u]);
        rc = reducer_finish(r, &err);
        CHECK(rc != DDP_OK && strstr(err.msg, "before bucket"), "early reuse refused: %s", err.msg);
    } else {
        CHECK(0, "early reuse: setup with %d units: %s", n_units, err.msg);
    }
    reducer_destroy(r);
    free(params);
}

/* Too few spare floats is refused, naming what is needed. */
static void test_refusal(comm *c)
{
    float grads[4] = {0}, params[4] = {0};
    size_t offs[1] = {0};
    reducer *r = NULL;
    ddp_err err = {0};
    int rc = reducer_create(c, grads, 4, offs, 1, 1.0, 1.0, &r, &err);
    if (rc == DDP_OK)
        rc = reducer_use_zero(r, params, (size_t)g_size - 2, &err);
    CHECK(rc != DDP_OK && strstr(err.msg, "spare floats"), "tail of size-2 refused: %s", err.msg);
    reducer_destroy(r);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    comm *c = NULL;
    ddp_err err = {0};
    int rc = comm_mpi_create(&c, &err);
    CHECK(rc == DDP_OK, "setup: %s", err.msg);
    if (rc == DDP_OK) {
        g_rank = c->rank;
        g_size = c->size;
        const size_t w = (size_t)g_size, counts[] = {1, 2, w - 1, w, w + 1, 2 * w + 1, 37, 1000, 4099};
        for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
            if (counts[i] > 0)
                test_count(c, counts[i]);
        test_refusal(c);
        device *d = NULL;
        const device_opts cpu = {.kind = DEVICE_CPU};
        rc = device_open(&cpu, 0, &d, &err);
        CHECK(rc == DDP_OK, "cpu device: %s", err.msg);
        for (size_t i = 0; rc == DDP_OK && i < sizeof counts / sizeof counts[0]; i++)
            if (counts[i] >= 5)
                test_units(c, d, counts[i]);
        for (size_t i = 0; rc == DDP_OK && i < sizeof counts / sizeof counts[0]; i++)
            if (counts[i] > 0)
                test_param_windows(c, d, counts[i]);
        if (rc == DDP_OK)
            test_units_early_reuse(c, d);
        if (d)
            d->ops->destroy(d);
    }
    if (c)
        c->ops->destroy(c);
    int failed = check_done("test_reducer_zero");
    int any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return any;
}
