/* test_reducer_fail.c — the reducer (collectives/reducer.h) after one of its collectives fails to
 * start, over a communicator that only records: it issues no later bucket (the peers' next
 * collective is still the failed one, which a later bucket would be paired with) and
 * reducer_finish reports the failure; a bucket whose gradients backward never reported is named
 * and none after it issued. ZeRO-3, which shares that order of collectives between the gradients'
 * reduce-scatters and the parameter windows' all-gathers (param_gather.h): after either fails,
 * neither issues another. No MPI: the communicator is this file's; the device is the CPU's. */
#include <stdlib.h>
#include <string.h>

#include "collectives/param_gather.h"
#include "collectives/reducer.h"
#include "tests/check.h"

typedef struct recorder {
    int calls, fail_at;          /* all-reduces issued; the one (1-based) that fails */
    size_t counts[16];
    int gathers, scatters;       /* ZeRO-3: all-gathers and reduce-scatters issued */
    int gather_fail_at, scatter_fail_at; /* the one of each (1-based) that fails, 0: none */
    int issued_at_failure;       /* all-gathers and reduce-scatters tried when the planted one failed */
} recorder;

static recorder g_rec;
static int g_token;

static int rec_allreduce(comm *c, const void *send, void *recv, size_t count, comm_dtype dt, comm_op op,
                         comm_req **req, ddp_err *err)
{
    (void)c, (void)send, (void)recv, (void)dt, (void)op;
    if (g_rec.calls < 16)
        g_rec.counts[g_rec.calls] = count;
    if (++g_rec.calls == g_rec.fail_at)
        return ddp_fail(err, DDP_ERUNTIME, "planted failure of all-reduce %d", g_rec.calls);
    if (req)
        *req = (comm_req *)&g_token;
    return DDP_OK;
}

static int rec_allgather(comm *c, const void *send, void *recv, size_t count, comm_dtype dt, comm_req **req,
                         ddp_err *err)
{
    (void)c, (void)send, (void)recv, (void)count, (void)dt;
    if (++g_rec.gathers == g_rec.gather_fail_at) {
        g_rec.issued_at_failure = g_rec.gathers + g_rec.scatters;
        return ddp_fail(err, DDP_ERUNTIME, "planted failure of all-gather %d", g_rec.gathers);
    }
    *req = (comm_req *)&g_token;
    return DDP_OK;
}

static int rec_reducescatter(comm *c, const void *send, void *recv, size_t count, comm_dtype dt, comm_op op,
                             comm_req **req, ddp_err *err)
{
    (void)c, (void)send, (void)recv, (void)count, (void)dt, (void)op;
    if (++g_rec.scatters == g_rec.scatter_fail_at) {
        g_rec.issued_at_failure = g_rec.gathers + g_rec.scatters;
        return ddp_fail(err, DDP_ERUNTIME, "planted failure of reduce-scatter %d", g_rec.scatters);
    }
    *req = (comm_req *)&g_token;
    return DDP_OK;
}

static int rec_wait(comm *c, comm_req *req, ddp_err *err)
{
    (void)c, (void)req, (void)err;
    return DDP_OK;
}

static int rec_test(comm *c, comm_req *req, bool *done, ddp_err *err)
{
    (void)c, (void)req, (void)err;
    *done = true;
    return DDP_OK;
}

static const struct comm_ops rec_ops = {.name = "recorder", .allreduce = rec_allreduce, .allgather = rec_allgather,
                                        .reducescatter = rec_reducescatter, .wait = rec_wait, .test = rec_test};

/* Four tensors of 64 floats in buckets of one tensor each; all-reduce fail_at (0: none) fails;
 * backward reports every tensor but `unreported` (-1: all). */
static void run_reporting(int fail_at, int unreported)
{
    comm c = {.ops = &rec_ops, .rank = 0, .size = 2};
    enum { N = 256 };
    float *grads = calloc(N, sizeof *grads);
    const size_t offs[4] = {0, 64, 128, 192};
    reducer *r = NULL;
    ddp_err err = {0};
    g_rec = (recorder){.fail_at = fail_at};
    int rc = reducer_create(&c, grads, N, offs, 4, 256.0 / (1 << 20), 256.0 / (1 << 20), &r, &err);
    CHECK(rc == DDP_OK, "reducer_create: %s", err.msg);
    if (rc == DDP_OK) {
        CHECK_EQ_INT(r->n_buckets, 4);
        reducer_begin(r, false);
        for (int t = 3; t >= 0; t--)
            if (t != unreported)
                reducer_grad_ready(r, offs[t], 64);
        rc = reducer_finish(r, &err);
        if (unreported >= 0) { /* buckets hold the tensors in reverse order */
            CHECK(rc != DDP_OK && strstr(err.msg, "has 0 of 64 gradients final at the end of backward"),
                  "finish with tensor %d unreported: %s", unreported, err.msg);
            CHECK(g_rec.calls == 3 - unreported, "all-reduces issued before bucket %d: %d", 3 - unreported,
                  g_rec.calls);
        } else if (fail_at) {
            CHECK(rc != DDP_OK && strstr(err.msg, "planted failure"), "finish after a failed bucket: %d %s", rc,
                  err.msg);
            CHECK(g_rec.calls == fail_at, "all-reduces issued with number %d failing: %d (none after it)", fail_at,
                  g_rec.calls);
        } else {
            CHECK(rc == DDP_OK && g_rec.calls == 4, "no failure: %d all-reduces, %s", g_rec.calls, err.msg);
        }
    }
    reducer_destroy(r);
    free(grads);
}

static void run(int fail_at)
{
    run_reporting(fail_at, -1);
}

/* One ZeRO-3 step over four units of 64 floats at world size 2: forward asks for every unit's
 * window, backward for each from the last down, writing its gradients into the reducer's window
 * and reporting them. gather_fail_at / scatter_fail_at (1-based, 0: none) plant a failure; after
 * it neither an all-gather nor a reduce-scatter is issued, and the step fails naming it. */
static void run_zero3(device *d, int gather_fail_at, int scatter_fail_at)
{
    comm c = {.ops = &rec_ops, .rank = 0, .size = 2};
    enum { N = 256, UNITS = 4 };
    const size_t offs[UNITS] = {0, 64, 128, 192};
    float params[N + 2] = {0}, shard[N / 2] = {0};
    reducer *r = NULL;
    param_gather *g = NULL;
    ddp_err err = {0};
    g_rec = (recorder){.gather_fail_at = gather_fail_at, .scatter_fail_at = scatter_fail_at};
    int rc = reducer_create(&c, NULL, N, offs, UNITS, 1.0, 1.0, &r, &err);
    if (rc == DDP_OK)
        rc = reducer_use_zero_units(r, offs, UNITS, params, d, &err);
    if (rc == DDP_OK)
        rc = param_gather_create(r, d, TENSOR_F32, shard, &g, &err);
    CHECK(rc == DDP_OK, "ZeRO-3 set-up: %s", err.msg);
    if (rc != DDP_OK) {
        reducer_destroy(r);
        return;
    }
    for (int u = 0; u < UNITS; u++)
        param_gather_window(g, u);
    reducer_begin(r, false);
    for (int u = UNITS - 1; u >= 0; u--) {
        param_gather_window(g, u);
        reducer_unit_window(r, u);
        reducer_grad_ready(r, offs[u], 64);
    }
    int grc = param_gather_status(g, &err);
    ddp_err gerr = err;
    int rrc = reducer_finish(r, &err);
    const char *planted = gather_fail_at ? "planted failure of all-gather" : "planted failure of reduce-scatter";
    if (!gather_fail_at && !scatter_fail_at) {
        CHECK(grc == DDP_OK && rrc == DDP_OK && !reducer_halted(r) && g_rec.scatters == UNITS,
              "ZeRO-3 without a failure: %d reduce-scatters, %s", g_rec.scatters, err.msg);
    } else {
        CHECK(g_rec.issued_at_failure > 0 && g_rec.gathers + g_rec.scatters == g_rec.issued_at_failure,
              "ZeRO-3, all-gather %d / reduce-scatter %d failing: %d collectives at the failure, %d all-gathers and "
              "%d reduce-scatters at the end (none after it)", gather_fail_at, scatter_fail_at,
              g_rec.issued_at_failure, g_rec.gathers, g_rec.scatters);
        /* the windows fail too where they had a gather left to issue */
        CHECK(rrc != DDP_OK && (grc != DDP_OK || !gather_fail_at), "ZeRO-3: the step fails: windows %d (%s), "
              "reducer %d (%s)", grc, gerr.msg, rrc, err.msg);
        CHECK(strstr(gather_fail_at ? gerr.msg : err.msg, planted) && (grc == DDP_OK || strstr(gerr.msg, planted)),
              "ZeRO-3: the failure named, by the windows too: %s / %s", gerr.msg, err.msg);
    }
    param_gather_destroy(g);
    reducer_destroy(r);
}

int main(void)
{
    run_reporting(0, 1);
    run_reporting(0, 3);
    run(0);
    run(1);
    run(2);
    run(4);
    device *d = NULL;
    ddp_err err = {0};
    const device_opts cpu = {.kind = DEVICE_CPU};
    int rc = device_open(&cpu, 0, &d, &err);
    CHECK(rc == DDP_OK, "cpu device: %s", err.msg);
    if (rc == DDP_OK) {
        run_zero3(d, 0, 0);
        for (int k = 1; k <= 5; k++) /* forward's gathers, then backward's prefetch */
            run_zero3(d, k, 0);
        for (int k = 1; k <= 3; k++)
            run_zero3(d, 0, k);
        d->ops->destroy(d);
    }
    return check_done("test_reducer_fail");
}
