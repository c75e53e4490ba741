/* param_gather.c — ZeRO-3's parameter windows (see param_gather.h): which unit each window holds,
 * the gathers in flight, and the prefetch of the next unit. Must not change the shard it gathers
 * from nor know what the units are. */
#include "param_gather.h"

#include <stdio.h>
#include <stdlib.h>

#include "runtime/device/device_prof.h"
#include "comm_prof.h"

#define N_WINDOWS 3

typedef struct unit_state {
    int window;          /* the window holding it, or -1 */
    comm_req *req;       /* its gather, until waited for */
    int prof_host;       /* its gather's host-clock profiler range (MPI), or -1 */
} unit_state;

struct param_gather {
    reducer *layout;         /* its failures halt the reducer's collectives, and the reducer's these */
    comm *comm;
    device *dev;
    tensor_dtype t;
    size_t elem;
    const char *shard;
    void *windows[N_WINDOWS];
    int holder[N_WINDOWS];   /* the unit in each window, or -1 */
    unit_state *units;
    int n_units;
    int last;                /* the unit asked for before, or -1 */
    int status;
    ddp_err err;
};

static const reducer_bucket *bucket_of(const param_gather *g, int unit)
{
    return &g->layout->buckets[g->n_units - 1 - unit];
}

/* A window's elements for unit: its block for every rank. */
static size_t unit_span(const param_gather *g, int unit)
{
    return bucket_of(g, unit)->block * (size_t)g->comm->size;
}

size_t param_gather_window_n(const reducer *layout)
{
    size_t first = 0, other = 0, w = (size_t)layout->comm->size;
    for (int i = 0; i < layout->n_buckets; i++) {
        size_t n = layout->buckets[i].block * w;
        if (i == layout->n_buckets - 1)
            first = n;
        else if (n > other)
            other = n;
    }
    return first + 2 * other;
}

int param_gather_create(reducer *layout, device *d, tensor_dtype t, const void *shard, param_gather **out,
                        ddp_err *err)
{
    *out = NULL;
    param_gather *g = calloc(1, sizeof *g);
    if (!g || !(g->units = calloc((size_t)layout->n_buckets, sizeof *g->units))) {
        free(g);
        return ddp_fail(err, DDP_ERUNTIME, "parameter windows: out of memory");
    }
    *g = (param_gather){.layout = layout, .comm = layout->comm, .dev = d, .t = t, .elem = tensor_dtype_size(t),
                        .shard = shard, .units = g->units, .n_units = layout->n_buckets, .last = -1};
    size_t other = 0;
    for (int u = 1; u < g->n_units; u++)
        other = unit_span(g, u) > other ? unit_span(g, u) : other;
    const size_t sizes[N_WINDOWS] = {unit_span(g, 0), other, other};
    int rc = DDP_OK;
    for (int w = 0; w < N_WINDOWS; w++) {
        g->holder[w] = -1;
        if (rc == DDP_OK && sizes[w] > 0)
            rc = d->ops->alloc(d, sizes[w] * g->elem, &g->windows[w], err);
    }
    for (int u = 0; u < g->n_units; u++)
        g->units[u] = (unit_state){.window = -1, .prof_host = -1};
    if (rc != DDP_OK) {
        param_gather_destroy(g);
        return ddp_prefix(err, "parameter windows of %zu elements", sizes[0] + 2 * other);
    }
    *out = g;
    return DDP_OK;
}

static int wait_unit(param_gather *g, int unit, ddp_err *err)
{
    unit_state *s = &g->units[unit];
    if (!s->req)
        return DDP_OK;
    comm_req *req = s->req;
    s->req = NULL;
    int rc = g->comm->ops->wait(g->comm, req, err);
    comm_prof_host_end(g->dev, &s->prof_host);
    return rc;
}

/* Unit's gather into window w (after the one it held was waited for), non-blocking. */
static int start_gather(param_gather *g, int unit, int w, ddp_err *err)
{
    int rc = DDP_OK;
    if (g->holder[w] >= 0) {
        rc = wait_unit(g, g->holder[w], err);
        g->units[g->holder[w]].window = -1;
    }
    g->holder[w] = unit;
    g->units[unit].window = w;
    const reducer *r = g->layout;
    if (g->status != DDP_OK) /* after either side's failure the peers would pair a gather with another collective */
        return g->status;
    if (reducer_halted(r))
        return ddp_fail(err, r->status ? r->status : DDP_ERUNTIME, "parameters of unit %d of %d not gathered after a "
                        "gradient collective failed: %s", unit + 1, g->n_units,
                        r->status ? r->err.msg : "(the reducer says why)");
    const reducer_bucket *b = bucket_of(g, unit);
    size_t at, shard_at, count;
    reducer_zero_part(g->layout, g->n_units - 1 - unit, g->comm->rank, &at, &shard_at, &count);
    char *mine = (char *)g->windows[w] + (size_t)g->comm->rank * b->block * g->elem;
    if (rc == DDP_OK && count > 0)
        rc = g->dev->ops->copy(g->dev, mine, g->shard + shard_at * g->elem, count * g->elem, err);
    const comm_dtype dt = g->t == TENSOR_BF16 ? DT_BFLOAT16 : DT_FLOAT;
    const size_t bytes = b->block * (size_t)g->comm->size * g->elem;
    char name[PROF_NAME_MAX];
    snprintf(name, sizeof name, "all-gather unit %d/%d (%.1f MB)", unit + 1, g->n_units, (double)bytes / 1e6);
    int stream_id = -1;
    if (rc == DDP_OK)
        rc = comm_prof_begin(g->comm, g->dev, name, bytes, dt, &stream_id, &g->units[unit].prof_host, err);
    snprintf(g->comm->label, sizeof g->comm->label, "parameters of unit %d of %d", unit + 1, g->n_units);
    if (rc == DDP_OK)
        rc = g->comm->ops->allgather(g->comm, mine, g->windows[w], b->block, dt, &g->units[unit].req, err);
    g->comm->label[0] = '\0';
    return rc == DDP_OK ? comm_prof_stream_end(g->dev, stream_id, err) : rc;
}

/* The window unit goes into: the first unit's own, else a turn window not holding `keep` (the
 * unit being computed), an empty one first. */
static int window_for(const param_gather *g, int unit, int keep)
{
    if (unit == 0)
        return 0;
    if (keep >= 0 && (g->holder[1] == keep || g->holder[2] == keep))
        return g->holder[1] == keep ? 2 : 1;
    return g->holder[1] < 0 || g->holder[2] >= 0 ? 1 : 2;
}

static void keep_error(param_gather *g, int rc, const ddp_err *e)
{
    if (rc != DDP_OK)
        reducer_halt(g->layout);
    if (rc != DDP_OK && g->status == DDP_OK) {
        g->status = rc;
        g->err = *e;
    }
}

const void *param_gather_window(void *ctx, int unit)
{
    param_gather *g = ctx;
    ddp_err e = {0};
    unit_state *s = &g->units[unit];
    int rc = DDP_OK;
    if (s->window < 0)
        rc = start_gather(g, unit, window_for(g, unit, g->last), &e);
    if (rc == DDP_OK)
        rc = wait_unit(g, unit, &e);
    keep_error(g, rc, &e);
    /* after an invalidation, the first unit starts a forward pass: upward */
    int dir = g->last < 0 ? unit == 0 : unit == g->last ? 0 : unit > g->last ? 1 : -1, next = unit + dir;
    if (unit != g->last && dir != 0 && next >= 0 && next < g->n_units && g->units[next].window < 0) {
        rc = start_gather(g, next, window_for(g, next, unit), &e);
        keep_error(g, rc, &e);
    }
    g->last = unit;
    return g->windows[s->window];
}

bool param_gather_holds(const param_gather *g, int unit)
{
    return g->units[unit].window >= 0;
}

int param_gather_invalidate(param_gather *g, ddp_err *err)
{
    int rc = DDP_OK;
    for (int u = 0; u < g->n_units; u++) {
        int wrc = wait_unit(g, u, err);
        rc = rc == DDP_OK ? wrc : rc;
        g->units[u].window = -1;
    }
    for (int w = 0; w < N_WINDOWS; w++)
        g->holder[w] = -1;
    g->last = -1;
    return rc;
}

int param_gather_status(param_gather *g, ddp_err *err)
{
    int rc = g->status;
    if (rc != DDP_OK)
        *err = g->err;
    g->status = DDP_OK;
    return rc;
}

void param_gather_abandon(param_gather *g)
{
    for (int u = 0; g && g->units && u < g->n_units; u++)
        g->units[u].req = NULL;
}

void param_gather_destroy(param_gather *g)
{
    if (!g)
        return;
    for (int u = 0; g->units && u < g->n_units; u++)
        if (g->units[u].req)
            g->comm->ops->wait(g->comm, g->units[u].req, NULL);
    for (int w = 0; w < N_WINDOWS; w++)
        if (g->windows[w])
            g->dev->ops->free(g->dev, g->windows[w]);
    free(g->units);
    free(g);
}
