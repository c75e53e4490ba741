/* train_profile.c — train.profile_steps: when the profiler's window opens and closes, the phases
 * the step loop marks, and each rank's Chrome/Perfetto trace, run.dir/trace-rank{R}.json.
 *
 * The window opens at the start of a step once this run has done train.profile_start steps: every
 * rank waits for its device, meets the others at an MPI barrier and takes its monotonic clock
 * there as the trace's time 0, so ts 0 is one moment on every rank (to within the barrier's exit
 * skew). It closes after its last step (or where the run stops), waiting for the device once,
 * outside any step. Rank 0's table and profile.json are train_profile_report.c's. It owns the
 * window (struct train_prof). Must not change what training computes, and must not wait for the
 * device inside a step. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/base/clock.h"
#include "runtime/base/dirs.h"
#include "runtime/base/json_text.h"
#include "runtime/base/log.h"
#include "runtime/base/replace_file.h"
#include "runtime/device/device_prof.h"
#include "train_ckpt.h"
#include "train_profile.h"
#include "train_profile_report.h"

/* Stamp slots a step may use (two per range): the tests' 2-layer GPT-2 records about 110 ranges a
 * step, GPT-2 124M's twelve layers several hundred. */
#define SLOTS_PER_STEP 8192u
#define SLOTS_MAX (1u << 18)

struct train_prof {
    int64_t first_step;     /* t->step when the window opens */
    int64_t planned;        /* train.profile_steps */
    int64_t steps;          /* the window's steps, cut to what the run trains */
    int64_t done;           /* steps recorded so far */
    bool open, finished;
    double zero_s;          /* the ranks' common time 0 */
    device_prof *rec;
    char *table;            /* rank 0: printed at the end of training */
};

int train_profile_open(train_job *t, ddp_err *err)
{
    (void)err;
    const config *c = t->cfg;
    if (c->train.profile_steps == 0)
        return DDP_OK;
    int64_t first = t->step + c->train.profile_start, left = t->total_steps - first;
    if (left <= 0) {
        log_info("profile: training ends at step %lld, before the window of train.profile_start %lld steps would open "
                 "(step %lld): nothing is profiled", (long long)t->total_steps, (long long)c->train.profile_start,
                 (long long)first + 1);
        return DDP_OK;
    }
    struct train_prof *p = calloc(1, sizeof *p);
    if (!p)
        return ddp_fail(err, DDP_ERUNTIME, "profile: out of memory");
    p->first_step = first;
    p->planned = c->train.profile_steps;
    p->steps = left < p->planned ? left : p->planned;
    if (p->steps < p->planned)
        log_info("profile: train.profile_steps %lld cut to %lld: training ends at step %lld", (long long)p->planned,
                 (long long)p->steps, (long long)t->total_steps);
    t->prof = p;
    return DDP_OK;
}

/* The writer thread's checkpoint writes, on their own track (ckpt_writer_set_observer); a write
 * that began before the window opened counts from time 0 (a trace holds no negative times, and the
 * table only the window's). */
static void observe_ckpt_write(void *ctx, const char *what, double begin_s, double end_s)
{
    const struct train_prof *p = ctx;
    if (end_s >= p->zero_s)
        device_prof_host_range(p->rec, what, PROF_TRACK_CKPT_WRITER, fmax(begin_s, p->zero_s), end_s);
}

static int open_window(train_job *t, struct train_prof *p, ddp_err *err)
{
    uint64_t slots = (uint64_t)p->steps * SLOTS_PER_STEP + (uint64_t)p->steps + 2;
    uint32_t capacity = slots < SLOTS_MAX ? (uint32_t)slots : SLOTS_MAX;
    int rc = device_prof_open(t->dev, capacity, (uint32_t)p->steps + 1, err);
    if (rc == DDP_OK)
        rc = t->ctl->ops->barrier(t->ctl, err);
    if (rc != DDP_OK)
        return ddp_prefix(err, "profile: opening the window at step %lld", (long long)t->step + 1);
    p->zero_s = monotonic_s();
    p->rec = t->dev->prof;
    p->open = true;
    train_ckpt_observe(t, observe_ckpt_write, p);
    return DDP_OK;
}

int train_profile_step_begin(train_job *t, ddp_err *err)
{
    struct train_prof *p = t->prof;
    if (!p || p->open || p->finished || t->step != p->first_step)
        return DDP_OK;
    int rc = open_window(t, p, err);
    return rc == DDP_OK ? device_prof_mark_step(t->dev, err) : rc;
}

int train_phase_begin(train_job *t, const char *name, int *id, ddp_err *err)
{
    return device_prof_begin(t->dev, name, "phase", PROF_TRACK_COMPUTE, NULL, NULL, id, err);
}

int train_phase_end(train_job *t, int id, ddp_err *err) { return device_prof_end(t->dev, id, err); }

/* ---- the trace -------------------------------------------------------------------------- */

static const char *const track_names[PROF_TRACKS] = {
    [PROF_TRACK_COMPUTE] = "compute stream",
    [PROF_TRACK_COMM] = "communication stream",
    [PROF_TRACK_HOST] = "host",
    [PROF_TRACK_CKPT_WRITER] = "checkpoint writer",
};
/* Rank R is process R + 1 and its tracks threads 1, 2, ...: Perfetto takes pid and tid 0 for the
 * kernel's swapper (its maintainers ask synthetic traces to start at 1). */
#define TRACE_PID(rank) ((rank) + 1)
#define STEPS_TID 1                       /* the step boundaries' own track */
#define TRACK_TID(track) ((int)(track) + 2)
/* A Perfetto thread holds nested ranges only, and the communication track's overlap in part (on
 * MPI a bucket's range runs from its issue to the return of its wait, the next issued before it
 * ends; under ZeRO-0 every bucket's until the waits after backward): it is split into as many lanes
 * as ranges run at once, each range on the first lane free when it begins. Lane 0 is the track's
 * own thread, lane k > 0 thread LANE_TID(k), "communication stream k+1". */
#define LANE_TID(lane) ((lane) == 0 ? TRACK_TID(PROF_TRACK_COMM) : TRACK_TID(PROF_TRACKS) + (lane) - 1)

static void trace_metadata(FILE *f, const train_job *t, int comm_lanes)
{
    int r = TRACE_PID(t->ctl->rank);
    fprintf(f, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"rank %d (", r,
            STEPS_TID, t->ctl->rank);
    json_put_text(f, t->ctl->host, SIZE_MAX);
    fprintf(f, ")\"}},\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
            "\"args\":{\"sort_index\":%d}}", r, STEPS_TID, t->ctl->rank);
    fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"steps\"}}", r,
            STEPS_TID);
    for (int k = 0; k < PROF_TRACKS; k++)
        fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"%s\"}}", r,
                TRACK_TID(k), track_names[k]);
    for (int lane = 1; lane < comm_lanes; lane++)
        fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"%s %d\"}}",
                r, LANE_TID(lane), track_names[PROF_TRACK_COMM], lane + 1);
}

typedef struct comm_range {
    double begin_us;
    size_t index;
} comm_range;

static int begins_first(const void *a, const void *b)
{
    double x = ((const comm_range *)a)->begin_us, y = ((const comm_range *)b)->begin_us;
    return (x > y) - (x < y);
}

/* tid[i] for each of the n records; returns the communication lanes used (at least 1), or -1 when
 * out of memory. */
static int comm_lanes(const prof_record *recs, size_t n, int *tid)
{
    comm_range *order = malloc((n + 1) * sizeof *order);
    double *free_at = malloc((n + 1) * sizeof *free_at); /* a lane's end; never more lanes than ranges */
    if (!order || !free_at) {
        free(order);
        free(free_at);
        return -1;
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        tid[i] = TRACK_TID(recs[i].track);
        if (recs[i].track == PROF_TRACK_COMM)
            order[m++] = (comm_range){recs[i].begin_us, i};
    }
    qsort(order, m, sizeof *order, begins_first);
    int used = 1;
    free_at[0] = -INFINITY;
    for (size_t k = 0; k < m; k++) {
        const prof_record *e = &recs[order[k].index];
        int lane = 0;
        while (lane < used && free_at[lane] > e->begin_us)
            lane++;
        used = lane + 1 > used ? lane + 1 : used;
        free_at[lane] = e->end_us;
        tid[order[k].index] = LANE_TID(lane);
    }
    free(order);
    free(free_at);
    return used;
}

/* "ts":..,"dur":.. in microseconds to the nanosecond, both from the same rounded stamps, so that
 * ts + dur of a range that ends where the next begins is that range's ts in the file too (rounding
 * each on its own could put an end a nanosecond past the next begin, and that range no longer
 * nests). */
static void trace_span(FILE *f, double begin_us, double end_us, double zero_us)
{
    double b_ns = nearbyint((begin_us - zero_us) * 1e3), e_ns = nearbyint((end_us - zero_us) * 1e3);
    fprintf(f, "\"ts\":%.3f,\"dur\":%.3f", b_ns / 1e3, (e_ns - b_ns) / 1e3);
}

static void trace_event(FILE *f, int pid, int tid, const prof_record *e, double zero_us)
{
    fprintf(f, ",\n{\"name\":\"");
    json_put_text(f, e->name, SIZE_MAX);
    fprintf(f, "\",\"cat\":\"%s\",\"ph\":\"X\",", e->family);
    trace_span(f, e->begin_us, e->end_us, zero_us);
    fprintf(f, ",\"pid\":%d,\"tid\":%d,\"args\":{", pid, tid);
    fprintf(f, "\"detail\":\"");
    json_put_text(f, e->detail, SIZE_MAX);
    fprintf(f, "\",\"bytes\":%.0f,\"flops\":%.0f}}", e->bytes, e->flops);
}

typedef struct trace_src {
    const train_job *t;
    const struct train_prof *p;
} trace_src;

/* replace_file_stream's writer; write errors show in ferror(f) */
static int write_trace_file(FILE *f, void *ctx, ddp_err *err)
{
    const train_job *t = ((const trace_src *)ctx)->t;
    const struct train_prof *p = ((const trace_src *)ctx)->p;
    size_t n = 0;
    int n_marks = 0;
    const prof_record *recs = device_prof_records(p->rec, &n);
    const double *marks = device_prof_marks(p->rec, &n_marks);
    double zero_us = 1e6 * p->zero_s;
    int *tid = malloc((n + 1) * sizeof *tid);
    if (!tid)
        return ddp_fail(err, DDP_ERUNTIME, "out of memory for the trace's %zu ranges", n);
    int lanes = comm_lanes(recs, n, tid);
    if (lanes < 0) {
        free(tid);
        return ddp_fail(err, DDP_ERUNTIME, "out of memory for the trace's %zu ranges", n);
    }
    fprintf(f, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
    trace_metadata(f, t, lanes);
    for (int i = 0; i + 1 < n_marks; i++) {
        fprintf(f, ",\n{\"name\":\"step %lld\",\"cat\":\"step\",\"ph\":\"X\",", (long long)p->first_step + i + 1);
        trace_span(f, marks[i], marks[i + 1], zero_us);
        fprintf(f, ",\"pid\":%d,\"tid\":%d,\"args\":{}}", TRACE_PID(t->ctl->rank), STEPS_TID);
    }
    for (size_t i = 0; i < n; i++)
        trace_event(f, TRACE_PID(t->ctl->rank), tid[i], &recs[i], zero_us);
    fprintf(f, "\n]}\n");
    free(tid);
    return DDP_OK;
}

/* run.dir/trace-rank{R}.json, written whole (runtime/base/replace_file.h). */
static int write_trace(const train_job *t, const struct train_prof *p, ddp_err *err)
{
    char path[CFG_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/trace-rank%d.json", t->cfg->run.dir, t->ctl->rank);
    int rc = replace_file_stream(path, write_trace_file, &(trace_src){.t = t, .p = p}, err);
    for (int r = t->ctl->size; rc == DDP_OK && t->ctl->rank == 0; r++) { /* an attempt with more ranks left these */
        snprintf(path, sizeof path, "%s/trace-rank%d.json", t->cfg->run.dir, r);
        if (unlink(path) != 0)
            break;
    }
    return rc ? ddp_prefix(err, "profile") : DDP_OK;
}

/* ---- the end of the window ------------------------------------------------------------------ */

static int close_window(train_job *t, struct train_prof *p, ddp_err *err)
{
    p->open = false;
    p->finished = true;
    int rc = device_prof_finish(t->dev, p->rec, err);
    if (rc == DDP_OK)
        rc = make_dirs(t->cfg->run.dir, err);
    if (rc == DDP_OK)
        rc = write_trace(t, p, err);
    if (rc == DDP_OK && t->ctl->rank == 0)
        rc = train_profile_report(t, p->rec, p->first_step, p->planned, &p->table, err);
    if (rc == DDP_OK && t->ctl->rank == 0)
        log_info("profile: steps %lld-%lld recorded: %s/trace-rank{0..%d}.json, %s/profile.json; the table follows "
                 "at the end", (long long)p->first_step + 1, (long long)(p->first_step + p->done), t->cfg->run.dir,
                 t->ctl->size - 1, t->cfg->run.dir);
    return rc;
}

int train_profile_step_end(train_job *t, ddp_err *err)
{
    struct train_prof *p = t->prof;
    if (!p || !p->open)
        return DDP_OK;
    int rc = device_prof_mark_step(t->dev, err);
    p->done++;
    if (rc == DDP_OK && p->done == p->steps)
        rc = close_window(t, p, err);
    return rc;
}

int train_profile_finish(train_job *t, ddp_err *err)
{
    struct train_prof *p = t->prof;
    if (!p)
        return DDP_OK;
    int rc = DDP_OK;
    if (p->open) {
        log_info("profile: training stopped after %lld of the window's %lld steps; reporting those", (long long)p->done,
                 (long long)p->steps);
        rc = p->done > 0 ? close_window(t, p, err) : DDP_OK;
    } else if (!p->finished) {
        log_info("profile: training stopped before the window opened at step %lld: nothing is profiled",
                 (long long)p->first_step + 1);
    }
    /* a line at a time: one write per line keeps it whole through mpirun's output forwarding */
    for (const char *line = p->table; rc == DDP_OK && line && *line;) {
        const char *end = strchr(line, '\n');
        int len = end ? (int)(end - line) : (int)strlen(line);
        log_info("%.*s", len, line);
        line = end ? end + 1 : line + len;
    }
    return rc;
}

void train_profile_close(train_job *t)
{
    struct train_prof *p = t->prof;
    if (!p)
        return;
    if (t->dev)
        device_prof_free(t->dev, p->rec);
    free(p->table);
    free(p);
    t->prof = NULL;
}
