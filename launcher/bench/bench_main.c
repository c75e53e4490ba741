/* bench_main.c — ddprun-bench, one rank of `ddprun -np N bench OP [flags]`: choosing and opening
 * the backend (MPI on host buffers, or NCCL on this rank's GPU), the shared harness that times
 * and checks every collective the same way, the exit status, and `ddprun-bench topo`.
 * Timing: NCCL collectives run on one stream, back to back, as in nccl-tests (the communicator's
 * single_stream mode), and two timing events on it bracket the batch of iterations (nccl-tests
 * reads a host clock around it); on host buffers MPI_Wtime does. Inside the timed loop nothing
 * runs but the collectives: no allocation, and no copy but MPI's in-place reduce-scatter's move.
 *
 * Error policy (no rank may be left waiting): set-up steps (backend, buffers) end with an
 * agreement over MPI_COMM_WORLD, so when one rank fails every rank exits cleanly and the failing
 * rank names itself. Once collectives run, a failure on one rank (a collective's error, a copy)
 * may leave the others inside a collective, so that rank prints "[rank N host] error: ..." and
 * calls MPI_Abort. Verdicts every rank reaches together (usage errors, wrong elements) exit
 * normally and are printed once. NCCL stalls are the communicator watchdog's (-T).
 * The collective under test goes through comm.h only; bookkeeping uses MPI. What each collective
 * moves and must produce lives in bench_colls.c, the options in bench_opts.c,
 * printing in bench_report.c. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/mpi_thread.h"
#include "bench_report.h"
#include "launcher/shared/gpu_share.h"
#include "runtime/base/log.h"
#include "launcher/shared/stop_signals.h"

typedef struct harness {
    const mpi_identity *id;
    const bench_opts *o;
    const bench_coll *coll;
    comm *c;
    device *dev;                 /* NULL: the collective works on host memory (MPI backend) */
    device_timer *timer;         /* on dev's stream: events around the timed iterations */
    void *send, *recv;           /* what the collective gets; recv is also the in-place buffer */
    void *host_send, *host_recv; /* where inputs are made and results checked (== send/recv on host) */
    row_result *rows;
    size_t n_rows, cap_rows;
    bool swept;                  /* every collective of the sweep completed here (the peers' too, or
                                    they aborted the job): the communicator's end is a destroy, which
                                    NCCL pairs with the host's other ranks, whatever fails after */
} harness;

/* Who prints a failure: this rank, rank 0 alone (a verdict all ranks share), or nobody here
 * (another rank failed and said so). */
enum report { REPORT_SELF, REPORT_ONCE, REPORT_NONE };
static enum report g_report = REPORT_SELF;

/* ---- error policy ---- */

/* FNV-1a, folded to a non-negative int: tells whether every rank's message is the same. */
static int message_hash(const char *msg)
{
    unsigned h = 2166136261u;
    for (; *msg; msg++)
        h = (h ^ (unsigned char)*msg) * 16777619u;
    return (int)(h >> 1);
}

/* Every rank learns whether any rank's set-up step failed. A rank that failed keeps its error and
 * prints it (rank 0 alone when every rank failed with the same status and message); the others
 * return the worst status quietly. */
static int agree(const mpi_identity *id, int rc, ddp_err *err)
{
    int h = rc ? message_hash(err->msg) : -1;
    int mine[4] = {rc, -rc, h, -h}, all[4];
    MPI_Allreduce(mine, all, 4, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (all[0] == DDP_OK)
        return DDP_OK;
    if (rc == DDP_OK) {
        g_report = REPORT_NONE;
        return ddp_fail(err, all[0], "another rank failed (see its message)");
    }
    if (all[0] == -all[1] && all[2] == -all[3] && id->size > 1)
        g_report = REPORT_ONCE; /* same status and same message on every rank */
    return rc;
}

/* ---- backend ---- */

/* The one-rank-per-GPU rule over every rank's host and GPU count (gpu_share.h), so all ranks
 * reach the same verdict. Collective. */
static int check_gpu_share(const mpi_identity *id, int gpus, ddp_err *err)
{
    char bus_id[32] = "";
    if (gpus > 0)
        device_cuda_bus_id(id->local_rank % gpus, bus_id, sizeof bus_id);
    gpu_share_rank me = gpu_share_me(id->host, id->local_rank, gpus, bus_id);
    gpu_share_rank *all = bench_xalloc((size_t)id->size * sizeof *all);
    MPI_Allgather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me, MPI_BYTE, MPI_COMM_WORLD);
    int rc = gpu_share_check(all, id->size, "use --backend mpi", err);
    free(all);
    return rc;
}

/* auto: NCCL when every rank of the job has a GPU of its own, else MPI (all ranks agree). */
static bool auto_picks_nccl(const mpi_identity *id)
{
    char reason[256] = "";
    int gpus = device_cuda_count(reason, sizeof reason);
    ddp_err shared = {0};
    bool shares = check_gpu_share(id, gpus, &shared) != DDP_OK;
    int mine = gpus > 0, all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all || shares)
        log_info("# backend auto: mpi (%s)", !mine ? reason : !all ? "a rank on another host has no GPU" : shared.msg);
    return all && !shares;
}

static int open_gpu(const mpi_identity *id, device **dev, ddp_err *err)
{
    char reason[256] = "";
    int gpus = device_cuda_count(reason, sizeof reason);
    if (check_gpu_share(id, gpus, err))
        return ddp_prefix(err, "--backend nccl");
    const device_opts opts = {.kind = DEVICE_CUDA}; /* no TF32: the benchmark runs no GEMMs */
    int rc = device_cuda_create(id->local_rank, &opts, dev, err);
    if (rc && gpus == 0) /* builds without CUDA say so with DDP_EUSAGE, machines without a GPU DDP_ERUNTIME */
        return ddp_fail(err, rc, "--backend nccl: no CUDA devices (%s)", reason);
    return rc ? ddp_prefix(err, "--backend nccl") : DDP_OK;
}

/* The communicator (and, for NCCL, the device whose memory and stream it uses). Collective. */
static int open_backend(const mpi_identity *id, const bench_opts *o, comm **c, device **dev, ddp_err *err)
{
    bool nccl = strcmp(o->backend, "nccl") == 0 || (strcmp(o->backend, "auto") == 0 && auto_picks_nccl(id));
    if (!nccl)
        return agree(id, comm_mpi_create(c, err), err);
    int rc = agree(id, open_gpu(id, dev, err), err);
    if (rc)
        return rc;
    /* one stream, as nccl-tests: the collectives run on the device's stream, back to back */
    comm_nccl_opts no = {.compute_stream = (*dev)->stream, .device = (*dev)->index, .timeout_s = o->timeout_s,
                         .single_stream = true};
    rc = comm_nccl_create(&no, c, err);
    return agree(id, rc, err);
}

/* ---- buffers: host memory, or device memory with host staging ---- */

static void placement_bytes(const bench_row *r, bool in_place, size_t *send, size_t *recv)
{
    size_t s, v, esz = comm_dtype_size(r->dt);
    r->coll->elems(r, &s, &v);
    *send = in_place ? 0 : s * esz;
    *recv = (in_place && s > v ? s : v) * esz;
}

static size_t row_count(const harness *h, size_t bytes, comm_dtype dt)
{
    return bytes / comm_dtype_size(dt) / (h->coll->blocks ? (size_t)h->id->size : 1);
}

static int alloc_pair(harness *h, size_t bytes, void **buf, void **host, ddp_err *err)
{
    *host = malloc(bytes ? bytes : 1);
    if (!*host)
        return ddp_fail(err, DDP_ERUNTIME, "cannot allocate %zu bytes of host buffer", bytes);
    if (!h->dev) {
        *buf = *host;
        return DDP_OK;
    }
    return h->dev->ops->alloc(h->dev, bytes, buf, err);
}

/* The largest row's buffers, whatever its dtype; in place uses recv, sized for either role. */
static int alloc_buffers(harness *h, ddp_err *err)
{
    size_t send = 0, recv = 0;
    for (int dt = 0; dt < DT_COUNT; dt++) {
        bench_row r = {h->coll, dt, OP_SUM, 0, row_count(h, h->o->max_bytes, dt), 0, h->id->rank, h->id->size, false};
        size_t s, v, none, in_place;
        placement_bytes(&r, false, &s, &v);
        placement_bytes(&r, true, &none, &in_place);
        send = s > send ? s : send;
        recv = v > recv ? v : recv;
        recv = in_place > recv ? in_place : recv;
    }
    int rc = alloc_pair(h, send, &h->send, &h->host_send, err);
    return rc ? rc : alloc_pair(h, recv, &h->recv, &h->host_recv, err);
}

static void free_pair(harness *h, void *buf, void *host)
{
    if (h->dev && buf)
        h->dev->ops->free(h->dev, buf);
    free(host);
}

/* This rank's inputs made on the host, then copied to where the collective reads them. */
static int stage_inputs(harness *h, const bench_row *r, bool in_place, ddp_err *err)
{
    r->coll->init(r, in_place, in_place ? h->host_recv : h->host_send, h->host_recv);
    if (!h->dev)
        return DDP_OK;
    size_t send, recv;
    placement_bytes(r, in_place, &send, &recv);
    int rc = send ? h->dev->ops->upload(h->dev, h->send, h->host_send, send, err) : DDP_OK;
    return rc ? rc : h->dev->ops->upload(h->dev, h->recv, h->host_recv, recv, err);
}

/* The result elements this rank checks, copied to the host; waits for the collective. */
static int fetch_results(harness *h, const bench_row *r, bool in_place, ddp_err *err)
{
    size_t first, n, esz = comm_dtype_size(r->dt);
    r->coll->checked(r, in_place, &first, &n);
    if (!h->dev || !n)
        return DDP_OK;
    return h->dev->ops->download(h->dev, (char *)h->host_recv + first * esz, (char *)h->recv + first * esz, n * esz, err);
}

/* Host: MPI collectives are complete on return. NCCL: the collectives run on the device's stream
 * (single_stream), so waiting for it waits for every collective issued. */
static int sync_device(harness *h, ddp_err *err)
{
    return h->dev ? h->dev->ops->synchronize(h->dev, err) : DDP_OK;
}

/* ---- timing and checking one placement of one row ---- */

static double combine_times(const harness *h, double local)
{
    double out = local;
    MPI_Op op = h->o->agg == AGG_MIN ? MPI_MIN : h->o->agg == AGG_MAX ? MPI_MAX : MPI_SUM;
    MPI_Allreduce(&local, &out, 1, MPI_DOUBLE, op, MPI_COMM_WORLD);
    return h->o->agg == AGG_AVG ? out / h->id->size : out;
}

static void corrupt_one(const bench_row *r, bool in_place, void *recv)
{
    size_t first, n;
    r->coll->checked(r, in_place, &first, &n);
    if (n)
        comm_dtype_store(recv, first, r->dt, comm_dtype_load(recv, first, r->dt) + 1);
}

static int run_coll(harness *h, const bench_row *r, bool in_place, ddp_err *err)
{
    return r->coll->run(h->c, r, in_place, in_place ? h->recv : h->send, h->recv, err);
}

/* What the timed loop runs: the collective itself, except that an in-place exchange whose form
 * under this backend copies its input (bench_coll.in_place_copies) is timed out of place, from a
 * copy of the in-place input made here, before any timing, into the send buffer. */
static int stage_timed(harness *h, const bench_row *r, bool in_place, bool *out_of_place, ddp_err *err)
{
    bench_copies when = r->coll->in_place_copies;
    bool copies = in_place && (when == COPIES_ALWAYS || (when == COPIES_UNDER_NCCL && h->dev));
    *out_of_place = !in_place || copies;
    if (!copies)
        return DDP_OK;
    size_t none, bytes;
    placement_bytes(r, true, &none, &bytes);
    if (!h->dev) {
        memcpy(h->send, h->recv, bytes);
        return DDP_OK;
    }
    return h->dev->ops->copy(h->dev, h->send, h->recv, bytes, err);
}

/* Seconds per iteration. On a device, timing events on the one stream the collectives run on
 * bracket the whole batch (the GPU's time); on host buffers, MPI_Wtime. Nothing but the
 * collectives runs inside: no allocation, no second stream, no copy of the harness's own. */
static int timed_loop(harness *h, const bench_row *r, bool in_place, double *sec, ddp_err *err)
{
    int rc = DDP_OK, iters = h->o->iters;
    MPI_Barrier(MPI_COMM_WORLD);
    if (!h->dev) {
        double t0 = MPI_Wtime();
        for (int i = 0; !rc && i < iters; i++)
            rc = run_coll(h, r, in_place, err);
        *sec = (MPI_Wtime() - t0) / iters;
        return rc;
    }
    double ms = 0;
    rc = h->dev->ops->timer_start(h->dev, h->timer, err);
    for (int i = 0; !rc && i < iters; i++)
        rc = run_coll(h, r, in_place, err);
    if (!rc)
        rc = h->dev->ops->timer_stop(h->dev, h->timer, err);
    if (!rc)
        rc = h->dev->ops->timer_take_ms(h->dev, h->timer, &ms, err); /* waits for the stop event */
    *sec = ms / 1e3 / iters;
    return rc;
}

static int check_placement(harness *h, const bench_row *r, bool in_place, long long *wrong, ddp_err *err)
{
    int rc = stage_inputs(h, r, in_place, err);
    if (!rc)
        rc = run_coll(h, r, in_place, err);
    if (!rc)
        rc = fetch_results(h, r, in_place, err);
    if (rc)
        return rc;
    if (h->o->corrupt_rank == r->rank)
        corrupt_one(r, in_place, h->host_recv);
    long long mine = (long long)bench_count_wrong(r, in_place, h->host_recv);
    MPI_Allreduce(&mine, wrong, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    return DDP_OK;
}

static int time_placement(harness *h, const bench_row *r, bool in_place, size_t bytes, placement *p, ddp_err *err)
{
    bool out_of_place = !in_place;
    int rc = stage_inputs(h, r, in_place, err);
    if (!rc)
        rc = stage_timed(h, r, in_place, &out_of_place, err);
    for (int i = 0; !rc && i < h->o->warmup; i++)
        rc = run_coll(h, r, !out_of_place, err);
    if (!rc)
        rc = sync_device(h, err);
    double sec = 0;
    if (!rc)
        rc = timed_loop(h, r, !out_of_place, &sec, err);
    if (rc)
        return rc;
    sec = combine_times(h, sec);
    p->time_us = sec * 1e6;
    p->algbw = sec > 0 ? (double)bytes / 1e9 / sec : 0;
    p->busbw = p->algbw * r->coll->busbw_factor(r->ranks);
    p->wrong = -1;
    return h->o->check ? check_placement(h, r, in_place, &p->wrong, err) : DDP_OK;
}

/* ---- the sweep ---- */

static int add_row(harness *h, const row_result *x, ddp_err *err)
{
    if (h->n_rows == h->cap_rows) {
        size_t cap = h->cap_rows ? 2 * h->cap_rows : 64;
        row_result *rows = realloc(h->rows, cap * sizeof *rows);
        if (!rows)
            return ddp_fail(err, DDP_ERUNTIME, "out of memory for the results table");
        h->rows = rows, h->cap_rows = cap;
    }
    h->rows[h->n_rows++] = *x;
    return DDP_OK;
}

static int run_row(harness *h, comm_dtype dt, int op, size_t bytes, ddp_err *err)
{
    bench_row r = {h->coll, dt, op < 0 ? OP_SUM : (comm_op)op, h->o->root, row_count(h, bytes, dt),
                   (uint32_t)h->n_rows, h->id->rank, h->id->size, strcmp(h->c->ops->name, "nccl") == 0};
    if (r.count == 0)
        return DDP_OK; /* smaller than one element per rank */
    row_result x = {.count = r.count, .dt = dt, .op = op, .root = h->coll->rooted ? r.root : -1};
    x.bytes = r.count * (h->coll->blocks ? (size_t)r.ranks : 1) * comm_dtype_size(dt);
    for (int in_place = 0; in_place < 2; in_place++) {
        /* what the NCCL watchdog names if this row stalls */
        snprintf(h->c->label, sizeof h->c->label, "ddprun-bench row %zu B %s%s", x.bytes, comm_dtype_name(dt),
                 in_place ? " in-place" : "");
        int rc = h->o->fail_rank == r.rank && h->n_rows == 1
                     ? ddp_fail(err, DDP_ERUNTIME, "planted failure (--fail %d, test only)", r.rank)
                     : time_placement(h, &r, in_place, x.bytes, &x.p[in_place], err);
        if (rc)
            return ddp_prefix(err, "%s %zu B %s%s", h->coll->name, x.bytes, comm_dtype_name(dt),
                              in_place ? " in-place" : "");
    }
    bench_print_row(&x);
    return add_row(h, &x, err);
}

static int sweep(harness *h, ddp_err *err)
{
    int rc = DDP_OK;
    int dt_lo = h->o->dtype < 0 ? 0 : h->o->dtype, dt_hi = h->o->dtype < 0 ? DT_COUNT - 1 : h->o->dtype;
    int op_lo = h->o->op < 0 ? 0 : h->o->op, op_hi = h->o->op < 0 ? OP_COUNT - 1 : h->o->op;
    if (!h->coll->reduction)
        op_lo = op_hi = -1;
    for (int dt = dt_lo; !rc && dt <= dt_hi; dt++)
        for (int op = op_lo; !rc && op <= op_hi; op++)
            for (size_t b = h->o->min_bytes; !rc && b <= h->o->max_bytes; b = bench_next_size(h->o, b))
                rc = run_row(h, (comm_dtype)dt, op, b, err);
    return rc;
}

static int run_bench(harness *h, ddp_err *err)
{
    char device_label[128] = "cpu";
    if (h->dev)
        bench_gpu_label(h->dev, device_label, sizeof device_label);
    rank_info *all = bench_gather_ranks(h->id, device_label);
    bench_run run = {h->id, h->o, h->coll, h->c->ops->name, all, NULL, 0};
    bench_print_header(&run);
    bench_print_topology(h->id, all);
    bench_print_columns();
    int rc = alloc_buffers(h, err);
    if (!rc && h->dev)
        rc = h->dev->ops->timer_create(h->dev, &h->timer, err);
    rc = agree(h->id, rc, err);
    if (!rc && (rc = sweep(h, err)) != DDP_OK)
        bench_abort(rc, err->msg); /* the other ranks may be inside a collective */
    h->swept = rc == DDP_OK;
    long long wrong = 0;
    double avg = 0;
    if (!rc) {
        run.rows = h->rows, run.n_rows = h->n_rows;
        bench_print_footer(&run, &wrong, &avg);
        if (h->o->json_path && h->id->rank == 0)
            rc = bench_write_json(&run, wrong, avg, err);
    }
    if (h->timer)
        h->dev->ops->timer_destroy(h->dev, h->timer);
    free_pair(h, h->send, h->host_send);
    free_pair(h, h->recv, h->host_recv);
    free(h->rows);
    free(all);
    if (!rc && wrong) {
        rc = ddp_fail(err, DDP_ERUNTIME, "%lld wrong result elements (see #wrong)", wrong);
        g_report = REPORT_ONCE;
    }
    return rc;
}

/* ---- main ---- */

static int topo_main(const mpi_identity *id)
{
    rank_info *all = bench_gather_ranks(id, "");
    bench_print_topology(id, all);
    free(all);
    return DDP_OK;
}

static int check_ranks(const mpi_identity *id, const bench_opts *o, ddp_err *err)
{
    if (o->root >= id->size)
        return ddp_fail(err, DDP_EUSAGE, "-r %d: there are only %d ranks", o->root, id->size);
    if (o->corrupt_rank >= id->size)
        return ddp_fail(err, DDP_EUSAGE, "--corrupt %d: there are only %d ranks", o->corrupt_rank, id->size);
    if (o->fail_rank >= id->size)
        return ddp_fail(err, DDP_EUSAGE, "--fail %d: there are only %d ranks", o->fail_rank, id->size);
    return DDP_OK;
}

static int bench_main(int argc, char **argv, const mpi_identity *id, ddp_err *err)
{
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        if (id->rank == 0)
            bench_usage();
        g_report = REPORT_ONCE;
        return argc < 2 ? ddp_fail(err, DDP_EUSAGE, "no collective given") : DDP_OK;
    }
    if (strcmp(argv[1], "topo") == 0)
        return topo_main(id);
    bench_opts o;
    int rc = bench_parse_args(argc - 1, argv + 1, &o, err);
    if (!rc)
        rc = check_ranks(id, &o, err);
    if (rc) {
        g_report = REPORT_ONCE; /* every rank parsed the same command line */
        return rc;
    }
    harness h = {.id = id, .o = &o, .coll = bench_find(o.coll)};
    rc = open_backend(id, &o, &h.c, &h.dev, err);
    if (!rc)
        rc = run_bench(&h, err);
    if (h.c && rc && !h.swept)
        h.c->ops->abort(h.c); /* some rank failed: a collective may never finish */
    else if (h.c)
        h.c->ops->destroy(h.c);
    if (h.dev)
        h.dev->ops->destroy(h.dev);
    return rc;
}

int main(int argc, char **argv)
{
    /* ddprun starts rank programs with the stop signals blocked (stop_signals.h); a benchmark has
     * nothing to save, so a stop ends it, as it does when mpirun starts it directly. */
    sigset_t stop;
    stop_signals_fill(&stop);
    sigprocmask(SIG_UNBLOCK, &stop, NULL);
    int provided = 0; /* runtime/base/mpi_thread.h says which level and why */
    if (MPI_Init_thread(&argc, &argv, DDP_MPI_THREAD_LEVEL, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "ddprun-bench: MPI_Init failed\n");
        return DDP_ERUNTIME;
    }
    mpi_identity id; /* known before any backend exists; MPI_COMM_WORLD's errors are fatal */
    mpi_identity_of(MPI_COMM_WORLD, &id);
    log_init(id.rank, id.host);
    ddp_err err = {0};
    int rc = bench_main(argc, argv, &id, &err);
    if (rc && (g_report == REPORT_SELF || (g_report == REPORT_ONCE && id.rank == 0)))
        log_error("ddprun-bench: %s", err.msg);
    MPI_Finalize();
    return rc;
}
