/* device_prof.c — the profiler's recorder (device_prof.h): stamp slots handed out to ranges and
 * step marks while a window is open, host ranges under a lock, and the conversion of stamps to
 * host-clock records when the window ends.
 *
 * Owns the op families' names for the records. Must not wait for the device anywhere but at open
 * and finish, must not fail an op for lack of room (it drops and counts instead), and must not
 * format or write reports: the training job does that with the records. */
#include "runtime/device/device_prof.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/clock.h"

/* ---- the ops' names and families ---------------------------------------------------------- */

#define PROF_OP_NAME(name, params) #name,
static const char *const op_names[DEVICE_OP_COUNT] = {DEVICE_OPS(PROF_OP_NAME)};

/* Each family's block counted, in DEVICE_OPS order: an op's family is the block its number falls in. */
#define PROF_COUNT_OP(name, params) +1
#define PROF_FAMILY_ROW(fam, block) {fam, 0 block(PROF_COUNT_OP)},
#define PROF_FAMILY_SUM(fam, block) block(PROF_COUNT_OP)
static const struct { const char *name; int n_ops; } families[] = {DEVICE_FAMILIES(PROF_FAMILY_ROW)};
_Static_assert(0 DEVICE_FAMILIES(PROF_FAMILY_SUM) == DEVICE_OP_COUNT,
               "DEVICE_FAMILIES must name every block of DEVICE_OPS");

const char *device_op_name(device_op op) { return (unsigned)op < DEVICE_OP_COUNT ? op_names[op] : "?"; }

const char *device_op_family(device_op op)
{
    int first = 0;
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) {
        if ((int)op < first + families[f].n_ops)
            return families[f].name;
        first += families[f].n_ops;
    }
    return "?";
}

prof_cost prof_cost_of(double bytes, double flops, prof_math math, const char *fmt, ...)
{
    prof_cost c = {.bytes = bytes, .flops = flops, .math = math};
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c.detail, sizeof c.detail, fmt, ap);
        va_end(ap);
    }
    return c;
}

const char *prof_dtype_name(tensor_dtype t) { return t == TENSOR_BF16 ? "bf16" : "f32"; }

/* ---- the recorder ------------------------------------------------------------------------ */

typedef struct device_range {
    prof_record rec;        /* times filled in by finish */
    uint32_t begin, end;    /* stamp slots */
    void *stream;
    bool ended;
} device_range;

struct device_prof {
    device_stamps *stamps;
    uint32_t capacity;              /* slots: 0, ranges' [1, marks_first), step marks' [marks_first, capacity) */
    uint32_t next_slot, marks_first;
    double host0_s;                 /* host clock at slot 0 */
    device_range *ranges;           /* up to marks_first / 2 */
    uint32_t n_ranges;
    int open_depth[PROF_TRACKS];    /* device ranges begun and not yet ended, per track */
    uint32_t n_marks;
    uint64_t dropped;               /* device and host ranges, step marks */

    pthread_mutex_t lock;           /* the host ranges, `recording` and `dropped_host` */
    bool recording;
    prof_record *host;
    size_t n_host, host_cap;
    uint64_t dropped_host;

    prof_record *out;               /* finish: every record */
    size_t n_out;
    double *mark_us;
    int n_mark_us;
};

static void prof_release(device *d, device_prof *p)
{
    if (p->stamps)
        d->ops->stamps_destroy(d, p->stamps);
    pthread_mutex_destroy(&p->lock);
    free(p->ranges);
    free(p->host);
    free(p->out);
    free(p->mark_us);
    free(p);
}

/* Slot 0 is stamped on an idle compute stream between two host clock readings: the device's time
 * base is tied to the host's to within the readings' gap (a stamp, on the CPU; a record and a wait
 * for an idle GPU). */
static int prof_anchor(device *d, device_prof *p, ddp_err *err)
{
    int rc = d->ops->synchronize(d, err);
    double before = monotonic_s();
    if (rc == DDP_OK)
        rc = d->ops->stamp(d, p->stamps, 0, NULL, err);
    if (rc == DDP_OK)
        rc = d->ops->synchronize(d, err);
    p->host0_s = 0.5 * (before + monotonic_s());
    p->next_slot = 1;
    return rc;
}

int device_prof_open(device *d, uint32_t capacity, uint32_t marks, ddp_err *err)
{
    if (d->prof)
        return ddp_fail(err, DDP_ERUNTIME, "profiler: a window is already open on %s", d->name);
    if (capacity < 2 || marks > capacity - 2)
        return ddp_fail(err, DDP_ERUNTIME, "profiler: %u stamp slots cannot hold slot 0, a range and %u step marks",
                        capacity, marks);
    device_prof *p = calloc(1, sizeof *p);
    if (!p)
        return ddp_fail(err, DDP_ERUNTIME, "profiler: out of memory");
    pthread_mutex_init(&p->lock, NULL);
    p->capacity = capacity;
    p->marks_first = capacity - marks;
    p->host_cap = capacity / 8 + 1024;
    p->ranges = malloc((size_t)(p->marks_first / 2 + 1) * sizeof *p->ranges);
    p->host = malloc(p->host_cap * sizeof *p->host);
    int rc = p->ranges && p->host ? DDP_OK : ddp_fail(err, DDP_ERUNTIME, "profiler: out of memory for %u ranges",
                                                       p->marks_first / 2);
    if (rc == DDP_OK)
        rc = d->ops->stamps_create(d, capacity, &p->stamps, err);
    if (rc == DDP_OK)
        rc = prof_anchor(d, p, err);
    if (rc != DDP_OK) {
        prof_release(d, p);
        return ddp_prefix(err, "profiler");
    }
    p->recording = true;
    d->prof = p;
    return DDP_OK;
}

/* The next n slots, or false (counted as dropped) when fewer are left. */
static bool take_slots(device_prof *p, uint32_t n, uint32_t *first)
{
    if (p->marks_first - p->next_slot < n) {
        p->dropped++;
        return false;
    }
    *first = p->next_slot;
    p->next_slot += n;
    return true;
}

int device_prof_begin(device *d, const char *name, const char *family, prof_track track, void *stream,
                      const prof_cost *cost, int *id, ddp_err *err)
{
    device_prof *p = d->prof;
    *id = -1;
    uint32_t slot;
    if (!p || !take_slots(p, 2, &slot))
        return DDP_OK;
    device_range *r = &p->ranges[p->n_ranges];
    *r = (device_range){.begin = slot, .end = slot + 1, .stream = stream};
    snprintf(r->rec.name, sizeof r->rec.name, "%s", name);
    r->rec.family = family;
    r->rec.track = track;
    r->rec.depth = p->open_depth[track];
    if (cost) {
        r->rec.bytes = cost->bytes;
        r->rec.flops = cost->flops;
        r->rec.math = cost->math;
        memcpy(r->rec.detail, cost->detail, sizeof r->rec.detail);
    }
    int rc = stream ? d->ops->stream_wait_compute(d, stream, err) : DDP_OK;
    if (rc == DDP_OK)
        rc = d->ops->stamp(d, p->stamps, slot, stream, err);
    if (rc != DDP_OK)
        return ddp_prefix(err, "profiler: %s", name);
    *id = (int)p->n_ranges++;
    p->open_depth[track]++;
    return DDP_OK;
}

int device_prof_end(device *d, int id, ddp_err *err)
{
    device_prof *p = d->prof;
    if (!p || id < 0 || (uint32_t)id >= p->n_ranges || p->ranges[id].ended)
        return DDP_OK;
    device_range *r = &p->ranges[id];
    r->ended = true;
    p->open_depth[r->rec.track]--;
    int rc = d->ops->stamp(d, p->stamps, r->end, r->stream, err);
    return rc != DDP_OK ? ddp_prefix(err, "profiler: end of %s", r->rec.name) : DDP_OK;
}

int device_prof_op_begin(device *d, device_op op, const prof_cost *cost, int *id, ddp_err *err)
{
    return device_prof_begin(d, device_op_name(op), device_op_family(op), PROF_TRACK_COMPUTE, NULL, cost, id, err);
}

int device_prof_op_end(device *d, int id, int rc, ddp_err *err)
{
    if (rc != DDP_OK) { /* the op's error is the one to report; the range still ends */
        ddp_err ignored = {0};
        device_prof_end(d, id, &ignored);
        return rc;
    }
    return device_prof_end(d, id, err);
}

int device_prof_mark_step(device *d, ddp_err *err)
{
    device_prof *p = d->prof;
    if (!p)
        return DDP_OK;
    if (p->marks_first + p->n_marks >= p->capacity) {
        p->dropped++;
        return DDP_OK;
    }
    int rc = d->ops->stamp(d, p->stamps, p->marks_first + p->n_marks++, NULL, err);
    return rc != DDP_OK ? ddp_prefix(err, "profiler: step mark") : DDP_OK;
}

/* ---- host ranges ------------------------------------------------------------------------- */

static int host_add(device_prof *p, const char *name, prof_track track, double begin_us, double end_us)
{
    int id = -1;
    pthread_mutex_lock(&p->lock);
    if (p->recording && p->n_host < p->host_cap) {
        prof_record *r = &p->host[p->n_host];
        const char *family = track == PROF_TRACK_COMM          ? "comm"
                             : track == PROF_TRACK_CKPT_WRITER ? "checkpoint"
                                                               : "host";
        *r = (prof_record){.family = family, .track = track, .begin_us = begin_us, .end_us = end_us};
        snprintf(r->name, sizeof r->name, "%s", name);
        id = (int)p->n_host++;
    } else if (p->recording) {
        p->dropped_host++;
    }
    pthread_mutex_unlock(&p->lock);
    return id;
}

int device_prof_host_begin(device_prof *p, const char *name, prof_track track)
{
    return p ? host_add(p, name, track, 1e6 * monotonic_s(), NAN) : -1;
}

void device_prof_host_end(device_prof *p, int id)
{
    if (!p || id < 0)
        return;
    double now = 1e6 * monotonic_s();
    pthread_mutex_lock(&p->lock);
    if ((size_t)id < p->n_host)
        p->host[id].end_us = now;
    pthread_mutex_unlock(&p->lock);
}

void device_prof_host_range(device_prof *p, const char *name, prof_track track, double begin_s, double end_s)
{
    if (p)
        host_add(p, name, track, 1e6 * begin_s, 1e6 * end_s);
}

/* ---- the end of the window --------------------------------------------------------------- */

/* Device ranges with both stamps taken become records on the host clock; the others are dropped. */
static void convert_ranges(device_prof *p, const double *us, double host0_us)
{
    for (uint32_t i = 0; i < p->n_ranges; i++) {
        const device_range *r = &p->ranges[i];
        if (!r->ended || isnan(us[r->begin]) || isnan(us[r->end])) {
            p->dropped++;
            continue;
        }
        prof_record *o = &p->out[p->n_out++];
        *o = r->rec;
        o->begin_us = host0_us + us[r->begin];
        o->end_us = host0_us + us[r->end];
    }
}

int device_prof_finish(device *d, device_prof *p, ddp_err *err)
{
    pthread_mutex_lock(&p->lock);
    p->recording = false;
    pthread_mutex_unlock(&p->lock);
    if (d->prof == p)
        d->prof = NULL;
    double *us = malloc((size_t)p->capacity * sizeof *us);
    p->out = malloc((p->n_ranges + p->n_host) * sizeof *p->out + 1);
    p->mark_us = malloc((size_t)p->n_marks * sizeof *p->mark_us + 1);
    if (!us || !p->out || !p->mark_us) {
        free(us);
        return ddp_fail(err, DDP_ERUNTIME, "profiler: out of memory reading %u stamps", p->capacity);
    }
    int rc = d->ops->synchronize(d, err);
    if (rc == DDP_OK)
        rc = d->ops->stamps_read(d, p->stamps, p->capacity, us, err);
    if (rc != DDP_OK) {
        free(us);
        return ddp_prefix(err, "profiler: reading the window's stamps");
    }
    double host0_us = 1e6 * p->host0_s;
    convert_ranges(p, us, host0_us);
    for (uint32_t i = 0; i < p->n_marks; i++)
        p->mark_us[i] = host0_us + us[p->marks_first + i];
    p->n_mark_us = (int)p->n_marks;
    free(us);
    for (size_t i = 0; i < p->n_host; i++) {
        if (isnan(p->host[i].end_us))
            p->dropped++; /* begun, never ended */
        else
            p->out[p->n_out++] = p->host[i];
    }
    p->dropped += p->dropped_host;
    return DDP_OK;
}

const prof_record *device_prof_records(const device_prof *p, size_t *n)
{
    *n = p->n_out;
    return p->out;
}

const double *device_prof_marks(const device_prof *p, int *n_marks)
{
    *n_marks = p->n_mark_us;
    return p->mark_us;
}

uint64_t device_prof_dropped(const device_prof *p) { return p->dropped; }

void device_prof_free(device *d, device_prof *p)
{
    if (!p)
        return;
    if (d->prof == p)
        d->prof = NULL;
    prof_release(d, p);
}
