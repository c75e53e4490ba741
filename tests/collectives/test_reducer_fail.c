/* test_reducer_fail.c — the reducer (collectives/reducer.h) after one of its collectives fails to
 * start, over a communicator that only records: it issues no later bucket (the peers' next
 * collective is still the failed one, which a later bucket would be paired with) and
 * reducer_finish reports the failure; a bucket whose gradients backward never reported is named
 * and none after it issued. No MPI: the communicator is this file's. */
#include <stdlib.h>
#include <string.h>

#include "collectives/reducer.h"
#include "tests/check.h"

typedef struct recorder {
    int calls, fail_at;          /* all-reduces issued; the one (1-based) that fails */
    size_t counts[16];
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

static const struct comm_ops rec_ops = {.name = "recorder", .allreduce = rec_allreduce, .wait = rec_wait,
                                        .test = rec_test};

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

int main(void)
{
    run_reporting(0, 1);
    run_reporting(0, 3);
    run(0);
    run(1);
    run(2);
    run(4);
    return check_done("test_reducer_fail");
}
