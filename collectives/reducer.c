/* reducer.c — bucketed, overlapped gradient all-reduce for DDP (see reducer.h).
 * Owns the bucket plan, the in-flight requests and their profiler ranges; must not touch gradient
 * values itself (the bf16 casts are device ops on the compute stream, ordered with the
 * collectives). */
#include "reducer.h"

#include "runtime/device/device_prof.h"
#include "comm_prof.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A bucket cap of mb MiB in floats; a cap past any buffer (ddp.bucket_mb has no upper bound) is
 * SIZE_MAX rather than a conversion out of size_t's range. */
static size_t bucket_cap(double mb)
{
    double floats = mb * 1024 * 1024 / sizeof(float);
    return floats < (double)SIZE_MAX ? (size_t)floats : SIZE_MAX;
}

/* Walk tensors from the last to the first, closing a bucket when adding the next tensor would
 * pass the cap. Buckets are stored in reduction order (bucket 0 = end of the buffer). */
static int plan_buckets(reducer *r, const size_t *offs, int n_tensors, double bucket_mb, double first_mb)
{
    r->buckets = calloc((size_t)n_tensors, sizeof *r->buckets);
    if (!r->buckets)
        return -1;
    size_t cap = bucket_cap(first_mb);
    size_t end = r->n;
    size_t start = r->n;
    for (int t = n_tensors - 1; t >= 0; t--) {
        size_t tsize = start - offs[t];
        if (start != end && (end - start) + tsize > cap) {
            r->buckets[r->n_buckets++] = (reducer_bucket){.offset = start, .count = end - start, .prof_id = -1,
                                                          .prof_gather_id = -1};
            end = start;
            cap = bucket_cap(bucket_mb);
        }
        start = offs[t];
    }
    if (end > start)
        r->buckets[r->n_buckets++] = (reducer_bucket){.offset = start, .count = end - start, .prof_id = -1,
                                                          .prof_gather_id = -1};
    return 0;
}

int reducer_create(comm *c, float *grads, size_t n, const size_t *tensor_offsets, int n_tensors,
                   double bucket_mb, double first_bucket_mb, reducer **out, ddp_err *err)
{
    *out = NULL;
    if (n_tensors < 1 || tensor_offsets[0] != 0)
        return ddp_fail(err, DDP_ERUNTIME, "reducer: tensor offsets must start at 0");
    for (int t = 1; t < n_tensors; t++)
        if (tensor_offsets[t] <= tensor_offsets[t - 1] || tensor_offsets[t] >= n)
            return ddp_fail(err, DDP_ERUNTIME, "reducer: tensor offsets must ascend inside the buffer");
    reducer *r = calloc(1, sizeof *r);
    if (!r)
        return ddp_fail(err, DDP_ERUNTIME, "reducer: out of memory");
    r->comm = c;
    r->grads = grads;
    r->n = n;
    const char *delay = getenv("DDP_TEST_COMM_DELAY_MS");
    r->test_delay_ms = delay ? strtol(delay, NULL, 10) : 0;
    if (plan_buckets(r, tensor_offsets, n_tensors, bucket_mb, first_bucket_mb) != 0) {
        free(r);
        return ddp_fail(err, DDP_ERUNTIME, "reducer: out of memory");
    }
    *out = r;
    return DDP_OK;
}

void reducer_set_device(reducer *r, device *d) { r->dev = d; }

int reducer_use_bf16(reducer *r, device *d, ddp_err *err)
{
    if (r->units)
        return ddp_fail(err, DDP_EUSAGE, "reducer: bf16 gradients need a whole gradient buffer (not ZeRO-2)");
    int rc = d->ops->alloc(d, (r->n + r->tail) * sizeof *r->bf16, (void **)&r->bf16, err);
    /* the ZeRO padding reads the shadow's tail: zero, as the gradients' tail is */
    if (rc == DDP_OK && r->tail > 0)
        rc = d->ops->cast_f32_to_bf16(d, r->grads + r->n, r->bf16 + r->n, r->tail, err);
    if (rc != DDP_OK)
        return ddp_prefix(err, "reducer: bf16 gradient shadow of %zu elements", r->n);
    r->dev = d;
    return DDP_OK;
}

/* Moves every bucket's start down to a multiple of w (dropping a bucket left empty), so every
 * bucket but the one ending at n holds a whole number of w-element rows; then sizes the blocks. */
static void cut_for_ranks(reducer *r, size_t w)
{
    int kept = 0;
    size_t end = r->n, shard = 0;
    for (int i = 0; i < r->n_buckets; i++) {
        size_t start = r->buckets[i].offset / w * w;
        if (start == end)
            continue;
        size_t count = end - start, block = (count + w - 1) / w;
        r->buckets[kept++] = (reducer_bucket){.offset = start, .count = count, .block = block, .shard_offset = shard,
                                              .prof_id = -1, .prof_gather_id = -1};
        shard += block;
        end = start;
    }
    r->n_buckets = kept;
    r->shard_n = shard;
}

int reducer_zero_shard_n(const size_t *tensor_offsets, int n_tensors, size_t n, double bucket_mb,
                         double first_bucket_mb, int world, size_t *shard_n, ddp_err *err)
{
    reducer r = {.n = n};
    if (world < 2 || plan_buckets(&r, tensor_offsets, n_tensors, bucket_mb, first_bucket_mb) != 0)
        return ddp_fail(err, DDP_ERUNTIME, world < 2 ? "reducer: ZeRO needs 2 or more ranks" : "reducer: out of memory");
    cut_for_ranks(&r, (size_t)world);
    free(r.buckets);
    *shard_n = r.shard_n;
    return DDP_OK;
}

int reducer_use_zero(reducer *r, float *params, size_t tail, ddp_err *err)
{
    size_t w = (size_t)r->comm->size;
    if (w < 2 || tail < w - 1)
        return ddp_fail(err, DDP_ERUNTIME, "reducer: ZeRO needs 2 or more ranks and %zu spare floats past the "
                        "parameters (has %zu ranks, %zu spare)", w - 1, w, tail);
    cut_for_ranks(r, w);
    r->zero_ranks = (int)w;
    r->params = params;
    r->tail = tail;
    return DDP_OK;
}

void reducer_zero_part(const reducer *r, int bucket, int rank, size_t *param_offset, size_t *shard_offset,
                       size_t *count)
{
    const reducer_bucket *b = &r->buckets[bucket];
    size_t at = b->offset + (size_t)rank * b->block, end = b->offset + b->count;
    *param_offset = at < end ? at : end;
    *count = at < end ? (end - at < b->block ? end - at : b->block) : 0;
    *shard_offset = b->shard_offset;
}

void reducer_abandon(reducer *r)
{
    for (int i = 0; r && i < r->n_buckets; i++)
        r->buckets[i].req = r->buckets[i].gather_req = NULL;
}

void reducer_destroy(reducer *r)
{
    if (!r)
        return;
    for (int i = 0; i < r->n_buckets; i++) {
        if (r->buckets[i].req)
            r->comm->ops->wait(r->comm, r->buckets[i].req, NULL);
        if (r->buckets[i].gather_req)
            r->comm->ops->wait(r->comm, r->buckets[i].gather_req, NULL);
    }
    if (r->bf16)
        r->dev->ops->free(r->dev, r->bf16);
    for (int w = 0; w < 3; w++)
        if (r->windows[w])
            r->dev->ops->free(r->dev, r->windows[w]);
    if (r->shard_grads)
        r->dev->ops->free(r->dev, r->shard_grads);
    free(r->buckets);
    free(r);
}

void reducer_begin(reducer *r, bool accumulate)
{
    for (int i = 0; i < r->n_buckets; i++) {
        r->buckets[i].ready = 0;
        r->buckets[i].started = 0;
        r->buckets[i].req = NULL;
        r->buckets[i].prof_id = -1;
        r->buckets[i].window = -1;
    }
    r->next_to_start = 0;
    r->status = DDP_OK;
    r->accumulate = accumulate;
    r->turns = 0;
}

/* A failure of one of the bucket collectives, or of what had to come before one (e: its error):
 * the first kept for reducer_finish, and the order with the peers broken (reducer_halt). */
static void keep_failure(reducer *r, int rc, const ddp_err *e)
{
    if (rc == DDP_OK)
        return;
    r->halted = true;
    if (r->status == DDP_OK) {
        r->status = rc;
        if (e != &r->err)
            r->err = *e;
    }
}

void reducer_halt(reducer *r) { r->halted = true; }

bool reducer_halted(const reducer *r) { return r->halted; }

/* The bucket's average, in place: all-reduced, or under ZeRO reduce-scattered (this rank's block
 * receives it; the windows of two buckets never overlap, the last one's runs into the tail).
 * bfloat16 buckets are summed and scaled by 1/size when cast back (reducer_finish): NCCL's own
 * average would scale by 1/size rounded to bfloat16, 0.2 % off at three ranks (comm.h). */
static int average_bucket(reducer *r, reducer_bucket *b, void *data, comm_dtype dt)
{
    comm_op op = dt == DT_BFLOAT16 ? OP_SUM : OP_AVG;
    if (r->zero_ranks == 0)
        return r->comm->ops->allreduce(r->comm, data, data, b->count, dt, op, &b->req, &r->err);
    char *mine = (char *)data + (size_t)r->comm->rank * b->block * comm_dtype_size(dt);
    return r->comm->ops->reducescatter(r->comm, data, mine, b->block, dt, op, &b->req, &r->err);
}

/* ---- the profiler's ranges (only while r->dev has one attached) ---------------------------- */

/* Begins the range of bucket b's collective `what` over bytes (comm_prof.h). */
static int prof_collective_begin(reducer *r, const char *what, const reducer_bucket *b, size_t bytes, comm_dtype dt,
                                 int *stream_id, int *host_id, ddp_err *err)
{
    char name[PROF_NAME_MAX];
    bool mb = bytes >= 1000000;
    snprintf(name, sizeof name, "%s bucket %d/%d (%.1f %s)", what, (int)(b - r->buckets) + 1, r->n_buckets,
             (double)bytes / (mb ? 1e6 : 1e3), mb ? "MB" : "kB");
    return comm_prof_begin(r->comm, r->dev, name, bytes, dt, stream_id, host_id, err);
}

static int prof_stream_end(reducer *r, int stream_id, ddp_err *err)
{
    return comm_prof_stream_end(r->dev, stream_id, err);
}

static void prof_host_end(reducer *r, int *host_id)
{
    comm_prof_host_end(r->dev, host_id);
}

/* Bucket b's average, recorded when a profiler is attached. */
static int average_bucket_recorded(reducer *r, reducer_bucket *b, void *data, comm_dtype dt)
{
    size_t elems = r->zero_ranks == 0 ? b->count : b->block * (size_t)r->comm->size;
    int stream_id = -1;
    int rc = prof_collective_begin(r, r->zero_ranks == 0 ? "allreduce" : "reduce-scatter", b,
                                   elems * comm_dtype_size(dt), dt, &stream_id, &b->prof_id, &r->err);
    if (rc == DDP_OK)
        rc = average_bucket(r, b, data, dt);
    if (rc == DDP_OK)
        rc = prof_stream_end(r, stream_id, &r->err);
    return rc;
}

static void start_bucket(reducer *r, reducer_bucket *b)
{
    float *p = r->units ? reducer_unit_window(r, r->n_buckets - 1 - (int)(b - r->buckets)) : r->grads + b->offset;
    int rc = DDP_OK;
    snprintf(r->comm->label, sizeof r->comm->label, "bucket %d of %d", (int)(b - r->buckets) + 1, r->n_buckets);
    if (r->bf16) {
        uint16_t *h = r->bf16 + b->offset;
        rc = r->dev->ops->cast_f32_to_bf16(r->dev, p, h, b->count, &r->err);
        if (rc == DDP_OK)
            rc = average_bucket_recorded(r, b, h, DT_BFLOAT16);
    } else {
        rc = average_bucket_recorded(r, b, p, DT_FLOAT);
    }
    r->comm->label[0] = '\0';
    b->started = 1;
    keep_failure(r, rc, &r->err);
}

/* Start every bucket, in order, whose gradients are complete. None after a failure, the parameter
 * windows' included (reducer_halt): the peers' next collective is still the failed one, which a
 * later one would be paired with (other counts: a hang, or sums of different gradients);
 * reducer_finish reports the failure. */
static void start_ready_buckets(reducer *r)
{
    while (r->status == DDP_OK && !r->halted && r->next_to_start < r->n_buckets) {
        reducer_bucket *b = &r->buckets[r->next_to_start];
        if (b->ready < b->count)
            break;
        start_bucket(r, b);
        r->next_to_start++;
    }
}

/* Give MPI a chance to progress what is in flight (it has no progress thread). */
static void poke_in_flight(reducer *r)
{
    for (int i = 0; i < r->next_to_start; i++) {
        reducer_bucket *b = &r->buckets[i];
        bool done = false;
        if (b->req && r->comm->ops->test(r->comm, b->req, &done, &r->err) != DDP_OK)
            keep_failure(r, r->err.code ? r->err.code : DDP_ERUNTIME, &r->err);
    }
}

void reducer_grad_ready(void *ctx, size_t offset, size_t count)
{
    reducer *r = ctx;
    if (r->comm->size == 1)
        return; /* the average over one rank is the gradient itself */
    size_t end = offset + count;
    for (int i = 0; i < r->n_buckets; i++) {
        reducer_bucket *b = &r->buckets[i];
        size_t lo = offset > b->offset ? offset : b->offset;
        size_t hi = end < b->offset + b->count ? end : b->offset + b->count;
        if (hi > lo)
            b->ready += hi - lo;
    }
    poke_in_flight(r);
    start_ready_buckets(r);
}

/* ---- ZeRO-2: units in windows ------------------------------------------------------------- */

/* The window a unit's bucket takes: the first unit's own, or the next of the two taking turns. */
static int next_window(reducer *r, int bucket)
{
    return bucket == r->n_buckets - 1 ? 0 : 1 + r->turns++ % 2;
}

/* Ends window w's use: waits for its bucket's collective, then moves the result out — a
 * reduce-scatter's block into the gradient shard (copied, or added when accumulating), an
 * all-gather's unit into the parameters. */
static int release_window(reducer *r, int w, ddp_err *err)
{
    int h = r->holder[w];
    if (h < 0)
        return DDP_OK;
    reducer_bucket *b = &r->buckets[h];
    device *d = r->dev;
    float *win = r->windows[w];
    comm_req **req = r->gathering[w] ? &b->gather_req : &b->req;
    int rc = DDP_OK;
    r->holder[w] = -1;
    b->window = -1;
    if (!r->gathering[w] && !b->started)
        return ddp_fail(err, DDP_ERUNTIME, "reducer: a window was needed again before bucket %d [%zu, +%zu) had all "
                        "its gradients (%zu of %zu)", h, b->offset, b->count, b->ready, b->count);
    if (*req) {
        rc = r->comm->ops->wait(r->comm, *req, err);
        *req = NULL;
        prof_host_end(r, r->gathering[w] ? &b->prof_gather_id : &b->prof_id);
    }
    if (rc != DDP_OK)
        return rc;
    if (r->gathering[w])
        return d->ops->copy(d, r->params + b->offset, win, b->count * sizeof(float), err);
    float *mine = win + (size_t)r->comm->rank * b->block, *dst = r->shard_grads + b->shard_offset;
    return r->accumulate ? d->ops->add(d, TENSOR_F32, dst, dst, mine, b->block, err)
                         : d->ops->copy(d, dst, mine, b->block * sizeof(float), err);
}

/* Window w for bucket, after the collective that used it before; zeroed for gradients. */
static int take_window(reducer *r, int w, int bucket, bool gathering, ddp_err *err)
{
    int rc = release_window(r, w, err);
    r->holder[w] = bucket;
    r->gathering[w] = gathering;
    r->buckets[bucket].window = w;
    size_t n = r->buckets[bucket].block * (size_t)r->comm->size;
    if (rc == DDP_OK && !gathering)
        rc = r->dev->ops->fill(r->dev, TENSOR_F32, r->windows[w], n, 0.0f, err);
    return rc;
}

float *reducer_unit_window(void *ctx, int unit)
{
    reducer *r = ctx;
    int bucket = r->n_buckets - 1 - unit;
    reducer_bucket *b = &r->buckets[bucket];
    if (b->window < 0) {
        ddp_err e = {0};
        keep_failure(r, take_window(r, next_window(r, bucket), bucket, false, &e), &e);
    }
    return r->windows[b->window];
}

/* Bucket's parameters to every rank through a window: this rank's updated block copied in, the
 * window all-gathered in place, and (when the window is released) copied into the parameters. */
static int gather_unit(reducer *r, int bucket, ddp_err *err)
{
    reducer_bucket *b = &r->buckets[bucket];
    int w = next_window(r, bucket);
    int rc = take_window(r, w, bucket, true, err);
    size_t at, unused, count;
    reducer_zero_part(r, bucket, r->comm->rank, &at, &unused, &count);
    float *win = r->windows[w], *mine = win + (size_t)r->comm->rank * b->block;
    if (rc == DDP_OK && count > 0)
        rc = r->dev->ops->copy(r->dev, mine, r->params + at, count * sizeof(float), err);
    int stream_id = -1;
    if (rc == DDP_OK)
        rc = prof_collective_begin(r, "all-gather", b, b->block * (size_t)r->comm->size * sizeof(float), DT_FLOAT,
                                   &stream_id, &b->prof_gather_id, err);
    snprintf(r->comm->label, sizeof r->comm->label, "parameters of unit %d of %d", r->n_buckets - bucket,
             r->n_buckets);
    if (rc == DDP_OK)
        rc = r->comm->ops->allgather(r->comm, mine, win, b->block, DT_FLOAT, &b->gather_req, err);
    r->comm->label[0] = '\0';
    return rc == DDP_OK ? prof_stream_end(r, stream_id, err) : rc;
}

/* The units as buckets (into r->buckets when r is given), their shard and window sizes. */
static void plan_units(reducer *r, const size_t *offs, int n_units, size_t n, size_t w, size_t *shard_n,
                       size_t *first_window, size_t *window)
{
    *shard_n = *first_window = *window = 0;
    for (int i = 0; i < n_units; i++) {
        int u = n_units - 1 - i;
        size_t end = u + 1 < n_units ? offs[u + 1] : n, count = end - offs[u], block = (count + w - 1) / w;
        if (r)
            r->buckets[i] = (reducer_bucket){.offset = offs[u], .count = count, .block = block,
                                             .shard_offset = *shard_n, .prof_id = -1, .prof_gather_id = -1,
                                             .window = -1};
        *shard_n += block;
        size_t *win = u == 0 ? first_window : window;
        *win = block * w > *win ? block * w : *win;
    }
}

void reducer_zero_units_size(const size_t *unit_offsets, int n_units, size_t n, int world, size_t *shard_n,
                             size_t *window_n)
{
    size_t first, other;
    plan_units(NULL, unit_offsets, n_units, n, (size_t)world, shard_n, &first, &other);
    *window_n = first + 2 * other;
}

int reducer_use_zero_units(reducer *r, const size_t *unit_offsets, int n_units, float *params, device *d,
                           ddp_err *err)
{
    size_t w = (size_t)r->comm->size;
    if (w < 2 || n_units < 1 || unit_offsets[0] != 0)
        return ddp_fail(err, DDP_ERUNTIME, "reducer: ZeRO-2 needs 2 or more ranks and units from offset 0");
    for (int u = 1; u < n_units; u++)
        if (unit_offsets[u] <= unit_offsets[u - 1] || unit_offsets[u] >= r->n)
            return ddp_fail(err, DDP_ERUNTIME, "reducer: unit offsets must ascend inside the buffer");
    reducer_bucket *b = calloc((size_t)n_units, sizeof *b);
    if (!b)
        return ddp_fail(err, DDP_ERUNTIME, "reducer: out of memory");
    free(r->buckets);
    r->buckets = b;
    r->n_buckets = n_units;
    size_t first, other;
    plan_units(r, unit_offsets, n_units, r->n, w, &r->shard_n, &first, &other);
    r->units = true;
    r->zero_ranks = (int)w;
    r->params = params;
    r->dev = d;
    const size_t sizes[3] = {first, other, other};
    int rc = d->ops->alloc(d, r->shard_n * sizeof(float), (void **)&r->shard_grads, err);
    if (rc == DDP_OK)
        rc = d->ops->fill(d, TENSOR_F32, r->shard_grads, r->shard_n, 0.0f, err);
    for (int i = 0; i < 3 && rc == DDP_OK; i++) {
        r->holder[i] = -1;
        if (sizes[i] > 0)
            rc = d->ops->alloc(d, sizes[i] * sizeof(float), (void **)&r->windows[i], err);
    }
    return rc ? ddp_prefix(err, "reducer: ZeRO-2 gradient shard of %zu and windows of %zu floats", r->shard_n,
                           first + 2 * other) : DDP_OK;
}

/* Test-only (DDP_TEST_COMM_DELAY_MS): as if the collectives finished this much later. */
static void test_delay(const reducer *r)
{
    if (r->test_delay_ms <= 0)
        return;
    struct timespec ts = {.tv_sec = r->test_delay_ms / 1000, .tv_nsec = r->test_delay_ms % 1000 * 1000000L};
    nanosleep(&ts, NULL);
}

int reducer_finish(reducer *r, ddp_err *err)
{
    test_delay(r);
    if (r->comm->size == 1)
        return DDP_OK;
    start_ready_buckets(r); /* backward's last report started them already; the same rule either way */
    int rc = r->status;
    if (rc != DDP_OK) {
        *err = r->err;
        return rc;
    }
    if (r->halted)
        return ddp_fail(err, DDP_ERUNTIME, "reducer: no bucket issued after a parameter window's collective failed");
    if (r->next_to_start < r->n_buckets) {
        const reducer_bucket *b = &r->buckets[r->next_to_start];
        return ddp_fail(err, DDP_ERUNTIME, "reducer: bucket %d [%zu, +%zu) has %zu of %zu gradients final at the "
                        "end of backward", r->next_to_start, b->offset, b->count, b->ready, b->count);
    }
    for (int i = 0; i < r->n_buckets && rc == DDP_OK; i++) {
        reducer_bucket *b = &r->buckets[i];
        if (r->units && b->window >= 0) {
            rc = release_window(r, b->window, err);
        } else if (b->req) {
            rc = r->comm->ops->wait(r->comm, b->req, err);
            b->req = NULL;
            prof_host_end(r, &b->prof_id);
        }
    }
    if (rc == DDP_OK && r->status != DDP_OK) {
        *err = r->err;
        rc = r->status;
    }
    for (int i = 0; i < r->n_buckets && rc == DDP_OK && r->bf16; i++) {
        size_t at = r->buckets[i].offset, count = r->buckets[i].count, unused;
        if (r->zero_ranks > 0) /* only this rank's block was averaged */
            reducer_zero_part(r, i, r->comm->rank, &at, &unused, &count);
        rc = r->dev->ops->cast_bf16_to_f32(r->dev, r->bf16 + at, r->grads + at, count,
                                            (float)(1.0 / r->comm->size), err);
    }
    return rc;
}

int reducer_gather(reducer *r, int bucket, ddp_err *err)
{
    for (int i = 0; i < r->n_buckets; i++) { /* MPI progresses requests only inside its calls */
        bool done = false;
        if (r->buckets[i].gather_req && r->comm->ops->test(r->comm, r->buckets[i].gather_req, &done, err) != DDP_OK)
            return err->code ? err->code : DDP_ERUNTIME;
    }
    if (r->units)
        return gather_unit(r, bucket, err);
    reducer_bucket *b = &r->buckets[bucket];
    float *rows = r->params + b->offset;
    int stream_id = -1;
    int rc = prof_collective_begin(r, "all-gather", b, b->block * (size_t)r->comm->size * sizeof(float), DT_FLOAT,
                                   &stream_id, &b->prof_gather_id, err);
    snprintf(r->comm->label, sizeof r->comm->label, "parameters of bucket %d of %d", bucket + 1, r->n_buckets);
    if (rc == DDP_OK)
        rc = r->comm->ops->allgather(r->comm, rows + (size_t)r->comm->rank * b->block, rows, b->block, DT_FLOAT,
                                     &b->gather_req, err);
    r->comm->label[0] = '\0';
    return rc == DDP_OK ? prof_stream_end(r, stream_id, err) : rc;
}

int reducer_gather_finish(reducer *r, ddp_err *err)
{
    int rc = DDP_OK;
    for (int w = 0; r->units && w < 3; w++) {
        int wrc = r->holder[w] >= 0 ? release_window(r, w, err) : DDP_OK;
        rc = rc == DDP_OK ? wrc : rc;
    }
    for (int i = 0; i < r->n_buckets; i++) {
        reducer_bucket *b = &r->buckets[i];
        if (b->gather_req) {
            int wrc = r->comm->ops->wait(r->comm, b->gather_req, err);
            rc = rc == DDP_OK ? wrc : rc;
            b->gather_req = NULL;
            prof_host_end(r, &b->prof_gather_id);
        }
    }
    return rc;
}
