/* test_ckpt.c — checkpoint format and files: round trip of every field and dtype and of a table
 * of only the smallest entries, corruption (tensor byte flip, truncation, header damage, bad
 * magic/version) detected and named, newest-valid fallback, a tensor name twice refused by the
 * writer and the reader, keep_last pruning, leftover temporaries, and the `ckpt info` /
 * `ckpt diff` tool's output and exit codes, and `ckpt info` checking a file larger than its data
 * limit allows it to hold (RLIMIT_DATA). The file write's bound and the background writer are
 * test_ckpt_writer.c's; failure injection that needs a separate process (disk full, kill -9,
 * permissions) lives in test_ckpt_faults.c. */
#include <fcntl.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "ckpt_test_state.h"
#include "launcher/commands/commands.h"
#include "tests/check.h"

static char dir[512];

static void write_step(const char *d, int64_t step, uint64_t seed, char *path)
{
    test_state ts;
    ts_init(&ts, step, seed, 256);
    ddp_err err = {0};
    int rc = ckpt_write_atomic(d, &ts.s, path, &err);
    CHECK(rc == DDP_OK, "write step %lld: %s", (long long)step, err.msg);
    ts_free(&ts);
}

/* byte offset in the file of tensor name's data */
static long tensor_offset(const char *path, const char *name)
{
    ckpt_loaded c;
    ddp_err err = {0};
    if (ckpt_read_lenient(path, &c, &err))
        return -1;
    const ckpt_tensor *t = ckpt_loaded_tensor(&c, name);
    long off = t ? (long)((const uint8_t *)t->data - (const uint8_t *)c.blob_) : -1;
    ckpt_loaded_free(&c);
    return off;
}

static void flip_byte(const char *path, long offset)
{
    int fd = open(path, O_RDWR);
    uint8_t b = 0;
    CHECK(fd >= 0 && pread(fd, &b, 1, offset) == 1, "read %s", path);
    b ^= 0x5a;
    CHECK(pwrite(fd, &b, 1, offset) == 1, "write %s", path);
    close(fd);
}

static void test_round_trip(void)
{
    test_state ts;
    ts_init(&ts, 1234, 7, 1024);   /* fc1.weight and its moments: 3.2 MB each */
    char path[CKPT_PATH_MAX];
    ddp_err err = {0};
    CHECK_EQ_INT(ckpt_write_atomic(dir, &ts.s, path, &err), DDP_OK);
    CHECK_STR_CONTAINS(path, "/ckpt-00001234.ddp");
    CHECK_EQ_INT(ts_count(dir, ".tmp."), 0);

    ckpt_loaded c;
    CHECK(ckpt_read(path, &c, &err) == DDP_OK, "read: %s", err.msg);
    const ckpt_header *a = &ts.s.hdr, *b = &c.hdr;
    CHECK_EQ_INT(b->step, a->step);
    CHECK_EQ_INT(b->epoch, a->epoch);
    CHECK_EQ_INT(b->consumed, a->consumed);
    CHECK_EQ_INT(b->total_steps, a->total_steps);
    CHECK_EQ_INT(b->optim_step, a->optim_step);
    CHECK_EQ_INT(b->world_size, a->world_size);
    CHECK_EQ_INT(b->restart_count, a->restart_count);
    CHECK(b->config_hash == a->config_hash, "config hash");
    CHECK(b->save_time == a->save_time && b->elapsed_s == a->elapsed_s, "times");
    CHECK(strcmp(b->model, a->model) == 0, "model %s", b->model);
    CHECK_EQ_INT(b->n_rng, 2);
    const rng *r = ckpt_loaded_rng(&c, "dropout/rank1");
    CHECK(r && memcmp(r, &a->rng[1].state, sizeof *r) == 0, "rng state");
    CHECK(ckpt_loaded_rng(&c, "nope") == NULL, "unknown rng");
    CHECK_EQ_INT(c.n_tensors, TS_N);
    for (int i = 0; i < TS_N; i++) {
        const ckpt_tensor *x = &ts.t[i], *y = ckpt_loaded_tensor(&c, x->name);
        CHECK(y != NULL, "tensor %s missing", x->name);
        if (!y)
            continue;
        uint64_t bytes = ckpt_tensor_numel(x) * ckpt_dtype_size(x->dtype);
        CHECK(y->dtype == x->dtype && y->ndim == x->ndim && y->nbytes == bytes, "%s meta", x->name);
        CHECK(memcmp(y->shape, x->shape, sizeof(int64_t) * (size_t)x->ndim) == 0, "%s shape", x->name);
        CHECK(memcmp(y->data, x->data, bytes) == 0, "%s data", x->name);
        CHECK(((uintptr_t)y->data % CKPT_ALIGN) == 0 && y->crc_ok, "%s aligned + crc", x->name);
    }
    CHECK(ckpt_loaded_tensor(&c, "param/none") == NULL, "unknown tensor");
    ckpt_loaded_free(&c);

    /* invalid input is refused before anything is written */
    ts.t[3].dtype = (ckpt_dtype)9;
    CHECK_EQ_INT(ckpt_write_atomic(dir, &ts.s, NULL, &err), DDP_EUSAGE);
    CHECK_STR_CONTAINS(err.msg, "param/fc2.bias");
    ts.t[3].dtype = CKPT_F32;
    snprintf(ts.t[3].name, sizeof ts.t[3].name, "param/fc2.weight");
    CHECK_EQ_INT(ckpt_write_atomic(dir, &ts.s, NULL, &err), DDP_EUSAGE);
    CHECK_STR_CONTAINS(err.msg, "twice");
    ts_free(&ts);
}

/* A table of only the smallest entries (scalars with one-letter names, 27 bytes each) is read back:
 * the reader's bound on the tensor count must allow it. */
static void test_smallest_entries(void)
{
    enum { N = 26 };
    ckpt_tensor t[N];
    float v[N];
    for (int i = 0; i < N; i++) {
        memset(&t[i], 0, sizeof t[i]);
        t[i].name[0] = (char)('a' + i);
        t[i].dtype = CKPT_F32;
        v[i] = (float)i + 0.5f;
        t[i].data = &v[i];
    }
    ckpt_state s = {.hdr = {.step = 77}, .n_tensors = N, .tensors = t};
    char d[600], path[CKPT_PATH_MAX];
    snprintf(d, sizeof d, "%s/smallest", dir);
    CHECK(mkdir(d, 0755) == 0, "mkdir %s", d);
    ddp_err err = {0};
    CHECK(ckpt_write_atomic(d, &s, path, &err) == DDP_OK, "write: %s", err.msg);
    ckpt_loaded c;
    int rc = ckpt_read(path, &c, &err);
    CHECK(rc == DDP_OK, "read: %s", err.msg);
    if (rc != DDP_OK)
        return;
    CHECK_EQ_INT(c.n_tensors, N);
    const ckpt_tensor *z = ckpt_loaded_tensor(&c, "z");
    CHECK(z && z->ndim == 0 && *(const float *)z->data == v[N - 1], "scalar z read back");
    ckpt_loaded_free(&c);
}

static void test_corruption_and_fallback(void)
{
    char d[600], p10[CKPT_PATH_MAX], p20[CKPT_PATH_MAX];
    snprintf(d, sizeof d, "%s/corrupt", dir);
    write_step(d, 10, 1, p10);
    write_step(d, 20, 2, p20);
    ckpt_loaded c;
    char used[CKPT_PATH_MAX];
    ddp_err err = {0};
    CHECK(ckpt_find_latest(d, &c, used, &err) == DDP_OK && c.hdr.step == 20, "newest is 20");
    ckpt_loaded_free(&c);

    /* one byte inside a tensor */
    long off = tensor_offset(p20, "param/fc2.weight");
    CHECK(off > 0, "offset");
    flip_byte(p20, off + 17);
    CHECK_EQ_INT(ckpt_read(p20, &c, &err), DDP_ERUNTIME);
    CHECK_STR_CONTAINS(err.msg, "param/fc2.weight");
    CHECK_STR_CONTAINS(err.msg, p20);
    CHECK(c.tensors == NULL && c.n_tensors == 0, "nothing returned from a corrupt file");
    CHECK(ckpt_find_latest(d, &c, used, &err) == DDP_OK, "fallback: %s", err.msg);
    CHECK_EQ_INT(c.hdr.step, 10);
    CHECK(strcmp(used, p10) == 0, "used %s", used);
    ckpt_loaded_free(&c);
    flip_byte(p20, off + 17);   /* repaired */
    CHECK(ckpt_read(p20, &c, &err) == DDP_OK, "repaired: %s", err.msg);
    ckpt_loaded_free(&c);

    /* header damage: step field (covered by the header CRC), magic, version */
    flip_byte(p20, 33);
    CHECK_EQ_INT(ckpt_read(p20, &c, &err), DDP_ERUNTIME);
    CHECK_STR_CONTAINS(err.msg, "header CRC");
    flip_byte(p20, 33);
    flip_byte(p20, 0);
    CHECK_EQ_INT(ckpt_read(p20, &c, &err), DDP_ERUNTIME);
    CHECK_STR_CONTAINS(err.msg, "magic");
    flip_byte(p20, 0);
    flip_byte(p20, 8);
    CHECK_EQ_INT(ckpt_read(p20, &c, &err), DDP_ERUNTIME);
    CHECK_STR_CONTAINS(err.msg, "format version");
    flip_byte(p20, 8);

    /* truncation */
    struct stat st;
    CHECK(stat(p20, &st) == 0, "stat");
    CHECK(truncate(p20, st.st_size - 100) == 0, "truncate");
    CHECK_EQ_INT(ckpt_read(p20, &c, &err), DDP_ERUNTIME);
    CHECK_STR_CONTAINS(err.msg, "truncated");
    CHECK(ckpt_find_latest(d, &c, used, &err) == DDP_OK && c.hdr.step == 10, "fallback after truncation");
    ckpt_loaded_free(&c);
    CHECK(truncate(p20, 20) == 0, "truncate");
    CHECK_EQ_INT(ckpt_read(p20, &c, &err), DDP_ERUNTIME);

    /* every file bad: an error, not "no checkpoint" */
    flip_byte(p10, tensor_offset(p10, "param/fc1.bias"));
    CHECK_EQ_INT(ckpt_find_latest(d, &c, used, &err), DDP_ERUNTIME);
    CHECK_STR_CONTAINS(err.msg, "none valid");

    /* no checkpoint at all */
    char empty[600];
    snprintf(empty, sizeof empty, "%s/empty", dir);
    CHECK_EQ_INT(ckpt_find_latest(empty, &c, used, &err), CKPT_NONE);
    CHECK(mkdir(empty, 0755) == 0, "mkdir");
    CHECK_EQ_INT(ckpt_find_latest(empty, &c, used, &err), CKPT_NONE);
}

/* path with its table's name `from` made `to` (as long) and the header CRC made right again: a
 * file well formed but for the names. */
static void rename_in_table(const char *path, const char *from, const char *to)
{
    int fd = open(path, O_RDWR);
    uint8_t pre[32];
    CHECK(fd >= 0 && pread(fd, pre, sizeof pre, 0) == (ssize_t)sizeof pre, "read %s", path);
    uint32_t header_len = (uint32_t)pre[12] | (uint32_t)pre[13] << 8 | (uint32_t)pre[14] << 16 |
                          (uint32_t)pre[15] << 24;
    uint8_t *h = malloc(header_len);
    CHECK(h && pread(fd, h, header_len, 32) == (ssize_t)header_len, "read the header of %s", path);
    uint8_t *at = memmem(h, header_len, from, strlen(from));
    CHECK(at != NULL && strlen(to) == strlen(from), "%s in the header", from);
    memcpy(at, to, strlen(to));
    uint32_t crc = (uint32_t)crc32(crc32(0L, pre, 24), h, header_len);
    for (int k = 0; k < 4; k++)
        pre[24 + k] = (uint8_t)(crc >> (8 * k));
    CHECK(pwrite(fd, pre, sizeof pre, 0) == (ssize_t)sizeof pre && pwrite(fd, h, header_len, 32) == (ssize_t)header_len,
          "write %s", path);
    free(h);
    close(fd);
}

/* A name twice in a tensor table: the writer refuses such a state before writing, and a reader
 * refuses a file whose table holds one (its CRCs right), naming it. */
static void test_name_twice(void)
{
    char sub[600], path[CKPT_PATH_MAX];
    snprintf(sub, sizeof sub, "%s/twice", dir);
    CHECK(mkdir(sub, 0755) == 0, "mkdir %s", sub);
    test_state ts;
    ts_init(&ts, 5, 3, 16);
    snprintf(ts.t[8].name, sizeof ts.t[8].name, "%s", ts.t[3].name);
    ddp_err err = {0};
    CHECK(ckpt_write_atomic(sub, &ts.s, path, &err) != DDP_OK, "the writer refuses a name twice");
    CHECK_STR_CONTAINS(err.msg, "checkpoint tensor name param/fc2.bias appears twice");
    ts_free(&ts);
    write_step(sub, 6, 3, path);
    rename_in_table(path, "extra/i64", "extra/i32");
    ckpt_loaded c;
    CHECK(ckpt_read(path, &c, &err) != DDP_OK, "a table with a name twice is refused");
    CHECK_STR_CONTAINS(err.msg, "tensor extra/i32 appears twice");
    rename_in_table(path, "extra/i32", "extra/i64"); /* the first of the two: the names differ again */
    CHECK(ckpt_read(path, &c, &err) == DDP_OK, "distinct names read again: %s", err.msg);
    ckpt_loaded_free(&c);
}

/* In dir/name (into d): a valid checkpoint of step 120 and a damaged one of step 140 (its path
 * into p140), which a walk then passes over for 120. */
static void pass_over_140(const char *name, char d[600], char p140[CKPT_PATH_MAX])
{
    char path[CKPT_PATH_MAX];
    snprintf(d, 600, "%s/%s", dir, name);
    ddp_err err = {0};
    write_step(d, 120, 120, path);
    write_step(d, 140, 140, p140);
    flip_byte(p140, tensor_offset(p140, "param/fc2.weight") + 3);
    ckpt_loaded c;
    CHECK(ckpt_find_latest(d, &c, NULL, &err) == DDP_OK && c.hdr.step == 120, "the damaged 140 passed over");
    ckpt_loaded_free(&c);
}

/* A checkpoint the newest-first walk passed over as damaged is neither counted nor deleted by a
 * prune after a save of a higher step either (keep_last 2 keeps two valid ones), until a save of
 * its own step replaces it. */
static void passed_over_kept(void)
{
    char d[600], path[CKPT_PATH_MAX], p140[CKPT_PATH_MAX];
    ddp_err err = {0};
    pass_over_140("passed_over", d, p140);
    write_step(d, 135, 135, path);
    CHECK_EQ_INT(ckpt_prune(d, 2, path, &err), DDP_OK);
    write_step(d, 150, 150, path);
    CHECK_EQ_INT(ckpt_prune(d, 2, path, &err), DDP_OK);
    CHECK(ts_file_exists(d, "ckpt-00000150.ddp") && ts_file_exists(d, "ckpt-00000135.ddp") &&
          ts_file_exists(d, "ckpt-00000140.ddp") && !ts_file_exists(d, "ckpt-00000120.ddp"),
          "keep_last 2 after 150: kept 150 and 135 (valid), left the damaged 140, pruned 120");
    write_step(d, 140, 140, p140); /* a save of its step replaces it: from then on it counts */
    CHECK_EQ_INT(ckpt_prune(d, 2, p140, &err), DDP_OK);
    write_step(d, 160, 160, path);
    CHECK_EQ_INT(ckpt_prune(d, 2, path, &err), DDP_OK);
    CHECK(ts_count(d, "ckpt-") == 2 && ts_file_exists(d, "ckpt-00000160.ddp") &&
          ts_file_exists(d, "ckpt-00000150.ddp"), "after 160: kept 160 and 150, the rewritten 140 pruned");
}

/* A checkpoint passed over and then replaced by a good one (checkpoint.download_cmd fetching it
 * again) that a later walk takes counts again: a prune after the next save keeps it and removes the
 * oldest, rather than leaving it beside keep_last others for the rest of the job. */
static void passed_over_then_taken(void)
{
    char d[600], path[CKPT_PATH_MAX], p140[CKPT_PATH_MAX];
    ddp_err err = {0};
    pass_over_140("passed_over_taken", d, p140);
    ckpt_loaded c;
    write_step(d, 140, 140, p140); /* fetched again, whole */
    CHECK(ckpt_find_latest(d, &c, NULL, &err) == DDP_OK && c.hdr.step == 140, "the fetched 140 taken");
    ckpt_loaded_free(&c);
    write_step(d, 150, 150, path);
    CHECK_EQ_INT(ckpt_prune(d, 2, path, &err), DDP_OK);
    CHECK(ts_count(d, "ckpt-") == 2 && ts_file_exists(d, "ckpt-00000150.ddp") &&
          ts_file_exists(d, "ckpt-00000140.ddp"), "keep_last 2 after 150: kept 150 and the taken 140, pruned 120");
}

static void test_prune_and_temps(void)
{
    char d[600], path[CKPT_PATH_MAX];
    snprintf(d, sizeof d, "%s/prune", dir);
    ddp_err err = {0};
    for (int step = 1; step <= 5; step++) {
        write_step(d, step, (uint64_t)step, path);
        CHECK_EQ_INT(ckpt_prune(d, 2, path, &err), DDP_OK);
    }
    CHECK_EQ_INT(ts_count(d, "ckpt-"), 2);
    CHECK(ts_file_exists(d, "ckpt-00000004.ddp") && ts_file_exists(d, "ckpt-00000005.ddp"), "kept 4 and 5");

    /* the checkpoint just written is never pruned, even when higher steps exist; those (ones a
     * resume passed over as damaged) are neither counted nor deleted: keep_last 2 keeps the one
     * below, the checkpoint such a resume started from */
    write_step(d, 100, 100, path);
    write_step(d, 6, 6, path);
    CHECK_EQ_INT(ckpt_prune(d, 2, path, &err), DDP_OK);
    CHECK_EQ_INT(ts_count(d, "ckpt-"), 3);
    CHECK(ts_file_exists(d, "ckpt-00000005.ddp") && ts_file_exists(d, "ckpt-00000006.ddp") &&
          ts_file_exists(d, "ckpt-00000100.ddp"), "kept 5, 6 and the higher 100");
    CHECK_EQ_INT(ckpt_prune(d, 1, path, &err), DDP_OK);
    CHECK_EQ_INT(ts_count(d, "ckpt-"), 2);
    CHECK(ts_file_exists(d, "ckpt-00000006.ddp"), "kept the one just written");
    write_step(d, 100, 100, path); /* the save of its step replaces it; then it counts */
    CHECK_EQ_INT(ckpt_prune(d, 1, path, &err), DDP_OK);
    CHECK_EQ_INT(ts_count(d, "ckpt-"), 1);
    CHECK(ts_file_exists(d, "ckpt-00000100.ddp"), "kept 100, written last");
    CHECK(unlink(path) == 0, "unlink %s", path);
    write_step(d, 6, 6, path);
    passed_over_kept();
    passed_over_then_taken();

    /* a temporary left by a dead process is ignored by readers and removed by the next save */
    pid_t child = fork();
    if (child == 0)
        _exit(0);
    waitpid(child, NULL, 0);
    char junk[CKPT_PATH_MAX];
    snprintf(junk, sizeof junk, "%s/.ckpt-00000050.ddp.tmp.%ld", d, (long)child);
    FILE *f = fopen(junk, "w");
    CHECK(f && fputs("torn", f) >= 0, "junk");
    if (f)
        fclose(f);
    ckpt_loaded c;
    CHECK(ckpt_find_latest(d, &c, NULL, &err) == DDP_OK && c.hdr.step == 6, "temp ignored");
    ckpt_loaded_free(&c);
    write_step(d, 7, 7, path);
    CHECK_EQ_INT(ts_count(d, ".tmp."), 0);
    /* ... and one under this process's pid (a container's restarted rank 0 has the pid of the one
     * that left it): no save of this process runs while it starts another */
    snprintf(junk, sizeof junk, "%s/.ckpt-00000051.ddp.tmp.%ld", d, (long)getpid());
    f = fopen(junk, "w");
    CHECK(f && fputs("torn", f) >= 0, "junk");
    if (f)
        fclose(f);
    write_step(d, 8, 8, path);
    CHECK_EQ_INT(ts_count(d, ".tmp."), 0);

    /* a directory named like a checkpoint is no checkpoint: it counts toward no keep_last, is left
     * alone by pruning and is not tried (or warned about) by the newest-first lookup */
    char fake[CKPT_PATH_MAX];
    snprintf(fake, sizeof fake, "%s/ckpt-00000099.ddp", d);
    CHECK(mkdir(fake, 0755) == 0, "mkdir %s", fake);
    write_step(d, 8, 8, path);
    CHECK_EQ_INT(ckpt_prune(d, 2, path, &err), DDP_OK);
    CHECK(ts_file_exists(d, "ckpt-00000007.ddp") && ts_file_exists(d, "ckpt-00000008.ddp"),
          "keep_last 2 kept the two newest files, the directory counted for nothing");
    struct stat st;
    CHECK(stat(fake, &st) == 0 && S_ISDIR(st.st_mode), "the directory is left alone");
    CHECK(ckpt_find_latest(d, &c, NULL, &err) == DDP_OK && c.hdr.step == 8, "the directory is not the newest");
    ckpt_loaded_free(&c);
    rmdir(fake);
}

/* runs ckpt_tool_main with stdout captured into out */
static int run_tool(char *out, size_t size, int argc, const char *a1, const char *a2, const char *a3)
{
    char *argv[] = {"ckpt", (char *)a1, (char *)a2, (char *)a3, NULL};
    char cap[700];
    snprintf(cap, sizeof cap, "%s/tool.out", dir);
    fflush(stdout);
    int saved = dup(1), fd = open(cap, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    close(fd);
    int rc = ckpt_tool_main(argc, argv);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    FILE *f = fopen(cap, "r");
    size_t n = f ? fread(out, 1, size - 1, f) : 0;
    out[n] = '\0';
    if (f)
        fclose(f);
    return rc;
}

static void test_tool(void)
{
    char d[600], a[CKPT_PATH_MAX], b[CKPT_PATH_MAX], out[1 << 16];
    snprintf(d, sizeof d, "%s/tool", dir);
    test_state ts;
    ts_init(&ts, 30, 5, 64);
    ddp_err err = {0};
    CHECK_EQ_INT(ckpt_write_atomic(d, &ts.s, a, &err), DDP_OK);
    CHECK_EQ_INT(run_tool(out, sizeof out, 3, "info", a, NULL), 0);
    CHECK_STR_CONTAINS(out, "param/fc1.weight");
    CHECK_STR_CONTAINS(out, "[64,784]");
    CHECK_STR_CONTAINS(out, "all CRCs OK");

    /* same training state from another attempt: provenance differs, verdict identical */
    char d2[700];
    snprintf(d2, sizeof d2, "%s/b", d);
    ts.s.hdr.restart_count = 3;
    ts.s.hdr.save_time += 100;
    CHECK_EQ_INT(ckpt_write_atomic(d2, &ts.s, b, &err), DDP_OK);
    CHECK_EQ_INT(run_tool(out, sizeof out, 4, "diff", a, b), 0);
    CHECK_STR_CONTAINS(out, "IDENTICAL");
    CHECK_STR_CONTAINS(out, "restart_count: 1 vs 3 (not counted)");
    CHECK_STR_CONTAINS(out, "header save_time: "); /* shown, as docs/checkpoint-format.md says */

    /* one element changed by 0.5 */
    float *w = ts.buf[2], before = w[5];
    w[5] += 0.5f;
    double expect = fabs((double)before - (double)w[5]);
    CHECK_EQ_INT(ckpt_write_atomic(d2, &ts.s, b, &err), DDP_OK);
    CHECK_EQ_INT(run_tool(out, sizeof out, 4, "diff", a, b), 1);
    char line[256];
    snprintf(line, sizeof line, "max|a-b| %.6g  (1 of 640 elements differ)", expect);
    CHECK_STR_CONTAINS(out, line);
    CHECK_STR_CONTAINS(out, "param/fc2.weight");
    CHECK_STR_CONTAINS(out, "DIFFERENT: 1 difference(s)");

    /* a corrupt tensor: info names it and exits 1; diff refuses the file */
    flip_byte(b, tensor_offset(b, "optim/m/fc1.weight") + 3);
    CHECK_EQ_INT(run_tool(out, sizeof out, 3, "info", b, NULL), 1);
    CHECK_STR_CONTAINS(out, "BAD CRC: tensor optim/m/fc1.weight");
    CHECK_EQ_INT(run_tool(out, sizeof out, 4, "diff", a, b), 1);

    CHECK_EQ_INT(run_tool(out, sizeof out, 2, "info", NULL, NULL), 2);
    CHECK_EQ_INT(run_tool(out, sizeof out, 3, "frobnicate", a, NULL), 2);
    CHECK_EQ_INT(run_tool(out, sizeof out, 3, "info", "/nonexistent/ckpt.ddp", NULL), 1);
    ts_free(&ts);
}

#if defined(__SANITIZE_ADDRESS__)
static void test_info_without_memory(void)
{
    printf("skip - ckpt info under RLIMIT_DATA: AddressSanitizer's allocator aborts where malloc would fail\n");
}
#else
/* `ckpt info` of a 38 MB file with room for 16 MB more data (RLIMIT_DATA): every CRC checked, the
 * file read a few MiB at a time, none of it held (a read of it whole needs 38 MB). The file
 * is written by a child of its own, so that what its state took is not left free in this heap
 * for a read to take without a new map. */
static void test_info_without_memory(void)
{
    char d[600];
    static char path[CKPT_PATH_MAX];
    snprintf(d, sizeof d, "%s/big", dir);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        test_state ts;
        ts_init(&ts, 40, 7, 4096);
        ddp_err err = {0};
        _exit(ckpt_write_atomic(d, &ts.s, NULL, &err) == DDP_OK ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the 38 MB checkpoint written: status %d", status);
    snprintf(path, sizeof path, "%s/ckpt-00000040.ddp", d);
    pid = fork();
    if (pid == 0) {
        static char out[1 << 16];
        mallopt(M_MMAP_THRESHOLD, 64 << 10); /* a large block mapped anew, never from the heap's top */
        uint64_t data = ts_proc_bytes("VmData");
        struct rlimit lim = {(rlim_t)(data + (16u << 20)), RLIM_INFINITY};
        if (data == 0 || setrlimit(RLIMIT_DATA, &lim) != 0)
            _exit(97);
        int rc = run_tool(out, sizeof out, 3, "info", path, NULL);
        _exit(rc == 0 && strstr(out, "all CRCs OK") ? 0 : 10 + rc);
    }
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "ckpt info under a data limit below the file's size: "
          "status %d (exit 10 + the tool's code: it could not hold the file)", status);
}
#endif

int main(void)
{
    if (!ts_tmpdir(dir, sizeof dir, "test")) {
        perror("mkdtemp");
        return 1;
    }
    test_round_trip();
    test_smallest_entries();
    test_corruption_and_fallback();
    test_name_twice();
    test_prune_and_temps();
    test_tool();
    test_info_without_memory();
    int rc = check_done("test_ckpt");
    if (rc == 0)
        ts_rmrf(dir);
    return rc;
}
