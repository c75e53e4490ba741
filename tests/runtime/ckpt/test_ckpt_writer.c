/* test_ckpt_writer.c — writing checkpoint files: a file past the 64 MiB the page cache may run
 * ahead of the storage (read back whole, its progress counted, a failed wait for its writeback
 * failing the write), and the background writer: snapshot semantics, a write error reported once,
 * the prune timed apart from the write, a shard written in place (write_as), a job run in the
 * background (start), and the stall watch
 * (a slow write waited out, a stalled write, prune or shard given up). */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ckpt_test_state.h"
#include "runtime/base/clock.h"
#include "runtime/base/test_fault.h"
#include "tests/check.h"

static char dir[512];

/* A file past the 64 MiB the page cache may run ahead of the storage (the writer then waits for the
 * writeback behind it, chunk by chunk) reads back byte for byte, and the write's progress counter
 * counted each byte twice: once taken by the file, once checksummed. */
static void test_past_write_behind(void)
{
    const int64_t n = (int64_t)25 << 20; /* 100 MiB of float */
    uint32_t *v = malloc((size_t)n * sizeof *v);
    CHECK(v != NULL, "out of memory");
    if (!v)
        return;
    for (int64_t i = 0; i < n; i++)
        v[i] = (uint32_t)i * 2654435761u;
    ckpt_tensor t = {.name = "param/big", .dtype = CKPT_F32, .ndim = 1, .shape = {n}, .data = v};
    _Atomic uint64_t progress = 0;
    ckpt_state s = {.hdr = {.step = 5}, .n_tensors = 1, .tensors = &t, .progress = &progress};
    char d[600], path[CKPT_PATH_MAX];
    snprintf(d, sizeof d, "%s/big", dir);
    ddp_err err = {0};
    CHECK(ckpt_write_atomic(d, &s, path, &err) == DDP_OK, "write: %s", err.msg);
    ckpt_loaded c;
    if (ckpt_read(path, &c, &err) == DDP_OK) {
        const ckpt_tensor *r = ckpt_loaded_tensor(&c, "param/big");
        CHECK(r && r->nbytes == (uint64_t)n * 4 && memcmp(r->data, v, r->nbytes) == 0, "100 MiB read back");
        uint64_t counted = atomic_load(&progress);
        CHECK(counted >= 2 * r->nbytes && counted <= 2 * c.file_bytes, "progress %llu for a file of %llu bytes",
              (unsigned long long)counted, (unsigned long long)c.file_bytes);
        ckpt_loaded_free(&c);
    } else {
        CHECK(0, "read: %s", err.msg);
    }
    free(v);
    ts_rmrf(d);
}

/* A wait for writeback that fails (DDP_CKPT_TEST_WRITEBACK_FAIL: EIO, as storage that lost a
 * write) fails the write naming it, leaving neither the file nor its temporary: the error is the
 * write's, as the fsync after it would not report it again. Only a file past the bound waits. */
static void test_writeback_failure(void)
{
    test_state ts;
    ts_init(&ts, 6, 11, 2048); /* ~19 MB: no wait, the hook unused */
    char d[600];
    snprintf(d, sizeof d, "%s/writeback", dir);
    ddp_err err = {0};
    setenv("DDP_CKPT_TEST_WRITEBACK_FAIL", "1", 1);
    CHECK(ckpt_write_atomic(d, &ts.s, NULL, &err) == DDP_OK, "a file below the bound waits for nothing: %s",
          err.msg);
    const int64_t n = (int64_t)20 << 20; /* 80 MiB of float: past the bound */
    float *v = calloc((size_t)n, sizeof *v);
    CHECK(v != NULL, "out of memory");
    ckpt_tensor t = {.name = "param/big", .dtype = CKPT_F32, .ndim = 1, .shape = {n}, .data = v};
    ckpt_state s = {.hdr = {.step = 7}, .n_tensors = 1, .tensors = &t};
    if (v)
        CHECK(ckpt_write_atomic(d, &s, NULL, &err) == DDP_ERUNTIME, "a failed writeback failed no write");
    unsetenv("DDP_CKPT_TEST_WRITEBACK_FAIL");
    CHECK_STR_CONTAINS(err.msg, "writeback: Input/output error");
    CHECK_STR_CONTAINS(err.msg, ".ckpt-00000007.ddp.tmp.");
    CHECK(!ts_file_exists(d, "ckpt-00000007.ddp"), "no file of the failed write");
    CHECK_EQ_INT(ts_count(d, ".tmp."), 0); /* its temporary removed */
    free(v);
    ts_free(&ts);
}

#define STALL_LIMIT "the test's stall_s"

/* A background writer on dir/sub keeping keep_last saves (stall_s: ckpt_writer_set_stall's,
 * named STALL_LIMIT when > 0), and the state the writer tests save: ~19 MB in 14 tensors, so >= 16
 * chunks, each followed by a sleep when the test asks for one. */
static ckpt_writer *writer_on(char *d, size_t size, const char *sub, int keep_last, double stall_s, test_state *ts)
{
    snprintf(d, size, "%s/%s", dir, sub);
    ckpt_writer *w = NULL;
    ddp_err err = {0};
    CHECK_EQ_INT(ckpt_writer_create(d, keep_last, &w, &err), DDP_OK);
    if (w)
        ckpt_writer_set_stall(w, stall_s, stall_s > 0 ? STALL_LIMIT : NULL);
    ts_init(ts, 1, 11, 2048);
    return w;
}

static void test_background_writer(void)
{
    char d[600];
    test_state ts;
    ckpt_writer *w = writer_on(d, sizeof d, "writer", 0, 0, &ts);
    ddp_err err = {0};
    test_state ref;
    ts_init(&ref, 1, 11, 2048);
    setenv("DDP_CKPT_TEST_SLOW_WRITE_MS", "50", 1);
    CHECK_EQ_INT(ckpt_writer_submit(w, &ts.s, &err), DDP_OK);
    /* the write needs >= 800 ms of test sleeps, so it cannot be complete yet */
    CHECK(!ts_file_exists(d, "ckpt-00000001.ddp"), "submit returned before the write finished");
    memset(ts.buf[0], 0, ckpt_tensor_numel(&ts.t[0]) * 4);   /* training moves on */
    ts.s.hdr.step = 2;
    CHECK_EQ_INT(ckpt_writer_submit(w, &ts.s, &err), DDP_OK);
    CHECK(ts_file_exists(d, "ckpt-00000001.ddp"), "second submit waited for the first");
    ckpt_write_stats st;
    CHECK_EQ_INT(ckpt_writer_wait(w, &st, &err), DDP_OK);
    unsetenv("DDP_CKPT_TEST_SLOW_WRITE_MS");   /* only once no write is in flight */
    CHECK_STR_CONTAINS(st.path, "ckpt-00000002.ddp");
    CHECK(st.snapshot_s > 0 && st.write_s > 0 && st.bytes > 19000000, "stats %g %g %llu",
          st.snapshot_s, st.write_s, (unsigned long long)st.bytes);
    ckpt_writer_destroy(w);

    ckpt_loaded c;
    char p1[700];
    snprintf(p1, sizeof p1, "%s/ckpt-00000001.ddp", d);
    CHECK(ckpt_read(p1, &c, &err) == DDP_OK, "%s", err.msg);
    const ckpt_tensor *t = ckpt_loaded_tensor(&c, "param/fc1.weight");
    CHECK(t && memcmp(t->data, ref.buf[0], t->nbytes) == 0, "snapshot independent of later changes");
    ckpt_loaded_free(&c);

    /* a write error surfaces in wait with the path, and the writer stays usable */
    char bad[700];
    snprintf(bad, sizeof bad, "%s/ckpt-00000001.ddp/sub", d);   /* parent is a file */
    CHECK_EQ_INT(ckpt_writer_create(bad, 0, &w, &err), DDP_OK);
    CHECK_EQ_INT(ckpt_writer_submit(w, &ts.s, &err), DDP_OK);
    CHECK_EQ_INT(ckpt_writer_wait(w, NULL, &err), DDP_ERUNTIME);
    CHECK_STR_CONTAINS(err.msg, "Not a directory");
    CHECK_STR_CONTAINS(err.msg, "ckpt-00000001.ddp");
    ckpt_write_stats failed;
    CHECK_EQ_INT(ckpt_writer_wait(w, &failed, &err), DDP_OK);   /* reported once */
    CHECK(failed.path[0] == '\0', "a failed write has no path to call written: \"%s\"", failed.path);
    ckpt_writer_destroy(w);
    ts_free(&ts);
    ts_free(&ref);
}

/* write_as: the caller's state written as dir/name, waited for, readable at once, with no prune
 * (keep_last 1 keeps the saved file beside it) and no stats of a write of the writer's own; a slow-write fault for another rank than this
 * process's (0 until test_fault_set_rank) leaves it alone; and the next submit writes to the
 * writer's directory again, by step. */
static void test_writer_write_as(void)
{
    char d[600], set[700], path[CKPT_PATH_MAX] = "";
    test_state ts;
    ckpt_writer *w = writer_on(d, sizeof d, "writer-as", 1, 1.0, &ts);
    ddp_err err = {0};
    CHECK_EQ_INT(ckpt_writer_submit(w, &ts.s, &err), DDP_OK);
    CHECK_EQ_INT(ckpt_writer_wait(w, NULL, &err), DDP_OK);
    snprintf(set, sizeof set, "%s/ckpt-00000005", d);
    CHECK_EQ_INT(mkdir(set, 0755), 0);
    setenv("DDP_TEST_FAULT", "slow-write:1:5:60", 1);
    ts.s.hdr.step = 5;
    CHECK_EQ_INT(ckpt_writer_write_as(w, set, "shard-00000-of-00001.ddp", &ts.s, path, &err), DDP_OK);
    unsetenv("DDP_TEST_FAULT");
    CHECK_STR_CONTAINS(path, "/ckpt-00000005/shard-00000-of-00001.ddp");
    ckpt_loaded c;
    CHECK(ckpt_read(path, &c, &err) == DDP_OK && c.hdr.step == 5, "the shard reads back: %s", err.msg);
    ckpt_loaded_free(&c);
    CHECK(ts_file_exists(d, "ckpt-00000001.ddp") && !ckpt_writer_stalled(w), "no prune after a shard");
    ckpt_write_stats st;
    CHECK_EQ_INT(ckpt_writer_wait(w, &st, &err), DDP_OK);
    CHECK(st.step == -1 && st.path[0] == '\0', "a job's stats are no write's: step %lld \"%s\"", (long long)st.step,
          st.path);
    ts.s.hdr.step = 6;
    CHECK_EQ_INT(ckpt_writer_submit(w, &ts.s, &err), DDP_OK);
    CHECK_EQ_INT(ckpt_writer_wait(w, &st, &err), DDP_OK);
    CHECK(strstr(st.path, "/writer-as/ckpt-00000006.ddp") && !ts_file_exists(d, "ckpt-00000001.ddp"),
          "the next submit writes by step and prunes: \"%s\"", st.path);
    ckpt_writer_destroy(w);
    ts_free(&ts);
}

/* A job of ten 30 ms steps, each counted as progress; rc: it fails at its end. */
typedef struct slow_job {
    _Atomic int done;
    int rc;
} slow_job;

static int slow_job_main(void *ctx, _Atomic uint64_t *progress, ddp_err *err)
{
    slow_job *j = ctx;
    for (int i = 0; i < 10; i++) {
        nanosleep(&(struct timespec){0, 30000000L}, NULL);
        atomic_fetch_add(progress, 1);
    }
    j->done = 1;
    return j->rc ? ddp_fail(err, DDP_ERUNTIME, "the job failed on purpose") : DDP_OK;
}

/* start: the job runs while the caller goes on (it is not done when start returns), and the next
 * call that waits waits for it, watched (its 0.3 s of steps outlast no stall limit of 1 s): wait
 * returns its status; a failed job's error comes once, from the next start, which then starts
 * nothing; the start after that runs. */
static void test_writer_start(void)
{
    char d[600];
    test_state ts;
    ckpt_writer *w = writer_on(d, sizeof d, "writer-start", 1, 1.0, &ts);
    ddp_err err = {0};
    slow_job a = {0}, b = {.rc = 1}, c = {0};
    CHECK_EQ_INT(ckpt_writer_start(w, "job a", slow_job_main, &a, &err), DDP_OK);
    CHECK(!a.done, "start waited for its job");
    CHECK_EQ_INT(ckpt_writer_wait(w, NULL, &err), DDP_OK);
    CHECK(a.done, "wait did not wait for the job started");
    CHECK_EQ_INT(ckpt_writer_start(w, "job b", slow_job_main, &b, &err), DDP_OK);
    CHECK_EQ_INT(ckpt_writer_start(w, "job c", slow_job_main, &c, &err), DDP_ERUNTIME);
    CHECK_STR_CONTAINS(err.msg, "the job failed on purpose");
    CHECK(b.done && !c.done, "job c ran after job b failed");
    CHECK_EQ_INT(ckpt_writer_start(w, "job c", slow_job_main, &c, &err), DDP_OK);
    CHECK_EQ_INT(ckpt_writer_wait(w, NULL, &err), DDP_OK);
    CHECK(c.done && !ckpt_writer_stalled(w), "job c did not run");
    ckpt_writer_destroy(w);
    ts_free(&ts);
}

/* With keep_last 1 the second save removes the first; its time is reported apart from the write's,
 * which alone holds the test's per-chunk sleeps (>= 16 chunks of 50 ms). */
static void test_writer_prune_timed_apart(void)
{
    char d[600];
    test_state ts;
    ckpt_writer *w = writer_on(d, sizeof d, "writer-prune", 1, 0, &ts);
    ddp_err err = {0};
    CHECK_EQ_INT(ckpt_writer_submit(w, &ts.s, &err), DDP_OK);
    ckpt_write_stats st;
    CHECK_EQ_INT(ckpt_writer_wait(w, &st, &err), DDP_OK);
    ts.s.hdr.step = 2;
    setenv("DDP_CKPT_TEST_SLOW_WRITE_MS", "50", 1);
    CHECK_EQ_INT(ckpt_writer_submit(w, &ts.s, &err), DDP_OK);
    CHECK_EQ_INT(ckpt_writer_wait(w, &st, &err), DDP_OK);
    unsetenv("DDP_CKPT_TEST_SLOW_WRITE_MS");
    CHECK(!ts_file_exists(d, "ckpt-00000001.ddp") && ts_file_exists(d, "ckpt-00000002.ddp"),
          "keep_last 1 keeps only the newest save");
    CHECK(st.write_s >= 0.8 && st.prune_s > 0, "write %g s (holds the sleeps), prune %g s", st.write_s, st.prune_s);
    ckpt_writer_destroy(w);
    ts_free(&ts);
}

static void count_keepalive(void *ctx) { (*(int *)ctx)++; }

/* The stall watch: a write slower in all than stall_s, whose storage takes a chunk every 100 ms,
 * is waited out (>= 16 chunks: >= 1.6 s against 1 s), its wait calling the keepalive at its start
 * and every 0.25 s (at least 3 times, at most once more than a quarter second's count), as it does
 * for a stalled one until the watch gives it up, and never after. One the storage takes no byte of (the
 * slow-write fault: 60 s before its first) is given up within about stall_s: the wait fails
 * naming it, every later call gives the same answer at once, the checkpoint before it is as it
 * was, and destroy leaves the writer to its thread. A prune that stalls after the file is durable
 * (slow-prune) is given up naming the file as written, under the limit ckpt_writer_set_stall set
 * last. Last of the tests: those threads sleep on until the process ends, reading DDP_TEST_FAULT
 * again when they wake, so it is never unset. */
static void test_writer_stall(void)
{
    char d[600];
    test_state ts;
    ckpt_writer *w = writer_on(d, sizeof d, "writer-stall", 0, 1.0, &ts);
    ddp_err err = {0};
    ckpt_write_stats st;
    int told = 0;
    ckpt_writer_set_keepalive(w, 0.25, count_keepalive, &told);
    setenv("DDP_CKPT_TEST_SLOW_WRITE_MS", "100", 1);
    CHECK_EQ_INT(ckpt_writer_submit(w, &ts.s, &err), DDP_OK);
    double t0 = monotonic_s();
    CHECK_EQ_INT(ckpt_writer_wait(w, &st, &err), DDP_OK);
    double waited = monotonic_s() - t0;
    unsetenv("DDP_CKPT_TEST_SLOW_WRITE_MS");
    CHECK(st.write_s >= 1.6 && ts_file_exists(d, "ckpt-00000001.ddp") && !ckpt_writer_stalled(w),
          "a write of %g s that went on was waited out: %s", st.write_s, err.msg);
    CHECK(told >= 3 && told <= waited / 0.25 + 1, "%d keepalives in a wait of %g s for a write that went on", told,
          waited);
    int before = told;

    setenv("DDP_TEST_FAULT", "slow-write:0:2:60", 1);
    ts.s.hdr.step = 2;
    CHECK_EQ_INT(ckpt_writer_submit(w, &ts.s, &err), DDP_OK);
    CHECK_EQ_INT(ckpt_writer_wait(w, &st, &err), DDP_ERUNTIME);
    CHECK_STR_CONTAINS(err.msg, CKPT_WRITE_GIVEN_UP "step 2 in ");
    CHECK_STR_CONTAINS(err.msg, d);
    CHECK_STR_CONTAINS(err.msg, "took no byte of it for 1 s (the checkpoints written before it are as they were); "
                       "the limit is " STALL_LIMIT);
    CHECK(ckpt_writer_stalled(w), "the writer does not say it gave up");
    CHECK(told - before >= 3 && told - before <= 1.0 / 0.25 + 2, "%d keepalives for a write the storage took "
          "nothing of, given up after 1 s", told - before);
    before = told;
    ddp_err again = {0};
    int status = DDP_OK;
    CHECK(ckpt_writer_poll(w, &st, &status, &again) && status == DDP_ERUNTIME && strcmp(again.msg, err.msg) == 0,
          "poll: %d \"%s\"", status, again.msg);
    ts.s.hdr.step = 3;
    CHECK_EQ_INT(ckpt_writer_submit(w, &ts.s, &again), DDP_ERUNTIME);
    CHECK_STR_CONTAINS(again.msg, CKPT_WRITE_GIVEN_UP "step 2 in ");
    CHECK(told == before, "%d keepalives once the write was given up", told - before);
    CHECK(!ts_file_exists(d, "ckpt-00000002.ddp") && !ts_file_exists(d, "ckpt-00000003.ddp"),
          "no checkpoint of a later step is there");
    ckpt_loaded c;
    char p1[700];
    snprintf(p1, sizeof p1, "%s/ckpt-00000001.ddp", d);
    CHECK(ckpt_read(p1, &c, &err) == DDP_OK, "the checkpoint before it: %s", err.msg);
    ckpt_loaded_free(&c);
    CHECK(ckpt_writer_destroy(w), "destroy did not leave the writer to its thread");
    ts_free(&ts); /* the snapshot the writer still holds is its own copy */

    /* a prune that stalls once the file is durable: given up too, naming the file as written and
     * the limit set last */
    w = writer_on(d, sizeof d, "writer-stall-prune", 1, 30.0, &ts);
    ckpt_writer_set_stall(w, 1.0, "the limit set last");
    setenv("DDP_TEST_FAULT", "slow-prune:0:4:60", 1);
    ts.s.hdr.step = 4;
    CHECK_EQ_INT(ckpt_writer_submit(w, &ts.s, &err), DDP_OK);
    CHECK_EQ_INT(ckpt_writer_wait(w, &st, &err), DDP_ERUNTIME);
    CHECK_STR_CONTAINS(err.msg, CKPT_WRITE_GIVEN_UP "step 4 is written (");
    CHECK_STR_CONTAINS(err.msg, "/writer-stall-prune/ckpt-00000004.ddp), but removing older ones");
    CHECK_STR_CONTAINS(err.msg, "made no progress for 1 s (the storage may have stopped answering); the limit is the "
                       "limit set last");
    snprintf(p1, sizeof p1, "%s/ckpt-00000004.ddp", d);
    CHECK(ckpt_read(p1, &c, &err) == DDP_OK, "the file written before the prune stalled: %s", err.msg);
    ckpt_loaded_free(&c);
    CHECK(ckpt_writer_destroy(w), "destroy did not leave the second writer to its thread");
    ts_free(&ts);

    /* a shard (write_as) the storage takes nothing of, on this process's rank: given up naming it;
     * its buffers are the caller's, which the writer's thread may still read: they live as long as
     * the process, never freed */
    static test_state shard;
    w = writer_on(d, sizeof d, "writer-stall-as", 0, 1.0, &shard);
    test_fault_set_rank(1);
    setenv("DDP_TEST_FAULT", "slow-write:1:7:60", 1);
    shard.s.hdr.step = 7;
    CHECK_EQ_INT(ckpt_writer_write_as(w, d, "shard-00001-of-00002.ddp", &shard.s, NULL, &err), DDP_ERUNTIME);
    CHECK_STR_CONTAINS(err.msg, CKPT_WRITE_GIVEN_UP);
    CHECK_STR_CONTAINS(err.msg, "/writer-stall-as/shard-00001-of-00002.ddp (step 7): the storage took no byte of it "
                       "for 1 s; the limit is " STALL_LIMIT);
    CHECK(ckpt_writer_stalled(w) && ckpt_writer_destroy(w), "the shard's writer is left to its thread");
}

int main(void)
{
    if (!ts_tmpdir(dir, sizeof dir, "writer")) {
        perror("mkdtemp");
        return 1;
    }
    test_past_write_behind();
    test_writeback_failure();
    test_background_writer();
    test_writer_prune_timed_apart();
    test_writer_write_as();
    test_writer_start();
    test_writer_stall();
    int rc = check_done("test_ckpt_writer");
    if (rc == 0)
        ts_rmrf(dir);
    return rc;
}
