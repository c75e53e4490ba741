/* reducer.c — bucketed, overlapped gradient all-reduce for DDP (see reducer.h).
 * Owns the bucket plan, the in-flight requests and their profiler ranges; must not touch gradient
 * values itself (the bf16 casts are device ops on the compute stream, ordered with the
 * collectives). */
#include "reducer.h"

#include "runtime/device/device_prof.h"

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
    size_t at = b->offset + (size_t)rank * b->block;
    *param_offset = at < r->n ? at : r->n;
    *count = at < r->n ? (r->n - at < b->block ? r->n - at : b->block) : 0;
    *shard_offset = b->shard_offset;
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
    free(r->buckets);
    free(r);
}

void reducer_begin(reducer *r)
{
    for (int i = 0; i < r->n_buckets; i++) {
        r->buckets[i].ready = 0;
        r->buckets[i].started = 0;
        r->buckets[i].req = NULL;
        r->buckets[i].prof_id = -1;
    }
    r->next_to_start = 0;
    r->status = DDP_OK;
}

/* The bucket's average, in place: all-reduced, or under ZeRO reduce-scattered (this rank's block
 * receives it; the windows of two buckets never overlap, the last one's runs into the tail). */
static int average_bucket(reducer *r, reducer_bucket *b, void *data, comm_dtype dt)
{
    if (r->zero_ranks == 0)
        return r->comm->ops->allreduce(r->comm, data, data, b->count, dt, OP_AVG, &b->req, &r->err);
    char *mine = (char *)data + (size_t)r->comm->rank * b->block * comm_dtype_size(dt);
    return r->comm->ops->reducescatter(r->comm, data, mine, b->block, dt, OP_AVG, &b->req, &r->err);
}

/* ---- the profiler's ranges (only while r->dev has one attached) ---------------------------- */

/* Begins the range of bucket b's collective `what` over bytes: on the communicator's stream
 * (*host_id -1; the caller ends it with prof_stream_end once issued) or on the host clock
 * (*host_id the range, ended when the wait returns). */
static int prof_collective_begin(reducer *r, const char *what, const reducer_bucket *b, size_t bytes, comm_dtype dt,
                                 int *stream_id, int *host_id, ddp_err *err)
{
    *stream_id = *host_id = -1;
    device_prof *p = r->dev ? r->dev->prof : NULL;
    if (!p)
        return DDP_OK;
    char name[PROF_NAME_MAX];
    bool mb = bytes >= 1000000;
    snprintf(name, sizeof name, "%s bucket %d/%d (%.1f %s)", what, (int)(b - r->buckets) + 1, r->n_buckets,
             (double)bytes / (mb ? 1e6 : 1e3), mb ? "MB" : "kB");
    if (!r->comm->stream) {
        *host_id = device_prof_host_begin(p, name, PROF_TRACK_COMM);
        return DDP_OK;
    }
    prof_cost cost = prof_cost_of((double)bytes, 0, PROF_MATH_NONE, "%s", comm_dtype_name(dt));
    return device_prof_begin(r->dev, name, "comm", PROF_TRACK_COMM, r->comm->stream, &cost, stream_id, err);
}

static int prof_stream_end(reducer *r, int stream_id, ddp_err *err)
{
    return stream_id < 0 || !r->dev ? DDP_OK : device_prof_end(r->dev, stream_id, err);
}

static void prof_host_end(reducer *r, int *host_id)
{
    if (*host_id >= 0 && r->dev)
        device_prof_host_end(r->dev->prof, *host_id);
    *host_id = -1;
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
    float *p = r->grads + b->offset;
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
    if (rc != DDP_OK && r->status == DDP_OK)
        r->status = rc;
}

/* Start every bucket, in order, whose gradients are complete. */
static void start_ready_buckets(reducer *r)
{
    while (r->next_to_start < r->n_buckets) {
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
        if (b->req && r->comm->ops->test(r->comm, b->req, &done, &r->err) != DDP_OK && r->status == DDP_OK)
            r->status = r->err.code ? r->err.code : DDP_ERUNTIME;
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
    int rc = r->status;
    if (rc != DDP_OK) {
        *err = r->err;
        return rc;
    }
    for (int i = r->next_to_start; i < r->n_buckets; i++) {
        reducer_bucket *b = &r->buckets[i];
        if (b->ready != b->count)
            return ddp_fail(err, DDP_ERUNTIME, "reducer: bucket %d [%zu, +%zu) has %zu of %zu gradients final "
                            "at the end of backward", i, b->offset, b->count, b->ready, b->count);
        start_bucket(r, b);
        r->next_to_start++;
    }
    for (int i = 0; i < r->n_buckets && rc == DDP_OK; i++) {
        reducer_bucket *b = &r->buckets[i];
        if (b->req) {
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
        rc = r->dev->ops->cast_bf16_to_f32(r->dev, r->bf16 + at, r->grads + at, count, 1.0f, err);
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
