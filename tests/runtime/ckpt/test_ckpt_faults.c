/* test_ckpt_faults.c — checkpoint saves that fail halfway, each in a forked child so the
 * failure is real: a directory the process may not write (EACCES), a file size limit
 * (RLIMIT_FSIZE -> EFBIG through the background writer, with SIGXFSZ not killing the process),
 * a full filesystem (a 1 MB tmpfs when this process may mount; skipped with a note otherwise),
 * and kill -9 in the middle of a slow write. Each must leave the older checkpoint loadable, no
 * torn file under a final name, and give an error naming the path and the system's reason.
 * And a read that runs out of memory (RLIMIT_AS) for the newest checkpoint's tensor table: this
 * machine's failure, so the walk fails rather than passing the checkpoint over for an older one.
 * And a listing of the folder cut short (readdir's EIO from a network mount, made by linking with
 * --wrap=readdir64, readdir's name with 64-bit offsets): an error naming the folder, not a shorter
 * list to resume from. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ckpt_test_state.h"
#include "tests/check.h"

static char dir[512];

typedef int (*child_fn)(const char *d, ddp_err *err);

/* Runs fn in a child; returns its status code and copies its error message into msg. */
static int in_child(child_fn fn, const char *d, char *msg, size_t size)
{
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        ddp_err err = {0};
        int rc = fn(d, &err);
        if (write(fds[1], err.msg, strlen(err.msg)) < 0)
            _exit(99);
        _exit(rc);
    }
    close(fds[1]);
    ssize_t n = read(fds[0], msg, size - 1);
    msg[n > 0 ? n : 0] = '\0';
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status), "child killed by signal %d", WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int write_state(const char *d, int64_t step, int64_t width, ddp_err *err)
{
    test_state ts;
    ts_init(&ts, step, (uint64_t)step, width);
    int rc = ckpt_write_atomic(d, &ts.s, NULL, err);
    ts_free(&ts);
    return rc;
}

/* the older checkpoint (step 10) is still the newest valid one, and nothing torn is visible */
static void check_previous_intact(const char *d)
{
    ckpt_loaded c;
    ddp_err err = {0};
    CHECK(ckpt_find_latest(d, &c, NULL, &err) == DDP_OK, "previous loadable: %s", err.msg);
    CHECK_EQ_INT(c.hdr.step, 10);
    ckpt_loaded_free(&c);
    CHECK_EQ_INT(ts_count(d, "ckpt-") - ts_count(d, ".tmp."), 1);   /* final names only */
}

static int unprivileged_write(const char *d, ddp_err *err)
{
    if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0))
        return 98;   /* root ignores permissions: become nobody first */
    return write_state(d, 20, 64, err);
}

static void test_unwritable_dir(void)
{
    char d[600], msg[DDP_ERR_MSG];
    snprintf(d, sizeof d, "%s/readonly", dir);
    ddp_err err = {0};
    CHECK_EQ_INT(write_state(d, 10, 64, &err), DDP_OK);
    CHECK(chmod(dir, 0755) == 0 && chmod(d, 0555) == 0, "chmod");
    CHECK_EQ_INT(in_child(unprivileged_write, d, msg, sizeof msg), DDP_ERUNTIME);
    CHECK_STR_CONTAINS(msg, "Permission denied");
    CHECK_STR_CONTAINS(msg, d);
    chmod(d, 0755);
    check_previous_intact(d);
}

static int fsize_limited_writer(const char *d, ddp_err *err)
{
    struct rlimit lim = {1 << 20, 1 << 20};
    if (setrlimit(RLIMIT_FSIZE, &lim) != 0)
        return 97;
    ckpt_writer *w;
    if (ckpt_writer_create(d, 1, &w, err))
        return err->code;
    test_state ts;
    ts_init(&ts, 20, 20, 1024);   /* ~12 MB, far past the limit */
    int rc = ckpt_writer_submit(w, &ts.s, err);
    if (!rc)
        rc = ckpt_writer_wait(w, NULL, err);
    ckpt_writer_destroy(w);
    ts_free(&ts);
    return rc;
}

static void test_file_size_limit(void)
{
    char d[600], msg[DDP_ERR_MSG];
    snprintf(d, sizeof d, "%s/fsize", dir);
    ddp_err err = {0};
    CHECK_EQ_INT(write_state(d, 10, 64, &err), DDP_OK);
    CHECK_EQ_INT(in_child(fsize_limited_writer, d, msg, sizeof msg), DDP_ERUNTIME);
    CHECK_STR_CONTAINS(msg, "File too large");
    CHECK_STR_CONTAINS(msg, "ckpt-00000020.ddp");
    CHECK_EQ_INT(ts_count(d, ".tmp."), 0);
    check_previous_intact(d);
}

static int big_write(const char *d, ddp_err *err) { return write_state(d, 20, 1024, err); }

static void test_disk_full(void)
{
    char d[600], msg[DDP_ERR_MSG];
    snprintf(d, sizeof d, "%s/tmpfs", dir);
    CHECK(mkdir(d, 0755) == 0, "mkdir");
    if (mount("tmpfs", d, "tmpfs", 0, "size=1m") != 0) {
        fprintf(stderr, "note: tmpfs disk-full case skipped (mount: %s); RLIMIT_FSIZE case covers it\n",
                strerror(errno));
        return;
    }
    ddp_err err = {0};
    CHECK_EQ_INT(write_state(d, 10, 64, &err), DDP_OK);   /* ~0.6 MB fits */
    CHECK_EQ_INT(in_child(big_write, d, msg, sizeof msg), DDP_ERUNTIME);
    CHECK_STR_CONTAINS(msg, "No space left on device");
    CHECK_STR_CONTAINS(msg, "ckpt-00000020.ddp");
    CHECK_EQ_INT(ts_count(d, ".tmp."), 0);
    check_previous_intact(d);
    CHECK(umount(d) == 0, "umount %s: %s", d, strerror(errno));
}

static int slow_write(const char *d, ddp_err *err)
{
    setenv("DDP_CKPT_TEST_SLOW_WRITE_MS", "200", 1);
    return write_state(d, 20, 2048, err);   /* ~19 MB, >= 16 chunks of 200 ms */
}

/* size of the single ".tmp." file in d, or -1 */
static long temp_size(const char *d)
{
    char cmd[700];
    snprintf(cmd, sizeof cmd, "stat -c %%s '%s'/.ckpt-*.tmp.* 2>/dev/null", d);
    FILE *f = popen(cmd, "r");
    long n = -1;
    if (f) {
        if (fscanf(f, "%ld", &n) != 1)
            n = -1;
        pclose(f);
    }
    return n;
}

static void test_kill_during_write(void)
{
    char d[600];
    snprintf(d, sizeof d, "%s/kill", dir);
    ddp_err err = {0};
    CHECK_EQ_INT(write_state(d, 10, 64, &err), DDP_OK);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0)
        _exit(slow_write(d, &err));
    /* wait until a few MB of tensor data are on disk, then kill; give up after 30 s */
    long size = -1;
    for (int i = 0; i < 3000 && size < (4L << 20); i++) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
        size = temp_size(d);
    }
    CHECK(size >= (4L << 20), "temp file reached %ld bytes", size);
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "child was killed mid-write");
    CHECK(!ts_file_exists(d, "ckpt-00000020.ddp"), "no torn file under the final name");
    CHECK_EQ_INT(ts_count(d, ".tmp."), 1);
    check_previous_intact(d);   /* the leftover temporary is ignored */
    CHECK_EQ_INT(write_state(d, 30, 64, &err), DDP_OK);
    CHECK_EQ_INT(ts_count(d, ".tmp."), 0);   /* and cleaned up by the next save */
}

#if defined(__SANITIZE_ADDRESS__)
static void test_read_out_of_memory(void)
{
    printf("skip - a read short of memory: AddressSanitizer's allocator does not return NULL under RLIMIT_AS\n");
}
#else
#define MANY_TENSORS 30000

/* A checkpoint of step 20 with MANY_TENSORS scalars: a file of about 3 MB whose table takes about
 * 7 MB read back (a ckpt_tensor each). */
static int write_many_tensors(const char *d, ddp_err *err)
{
    test_state ts;
    ts_init(&ts, 20, 20, 64);
    ckpt_tensor *many = calloc(MANY_TENSORS, sizeof *many);
    static const int64_t value = 7;
    for (int i = 0; many && i < MANY_TENSORS; i++) {
        snprintf(many[i].name, sizeof many[i].name, "extra/s%d", i);
        many[i].dtype = CKPT_I64;
        many[i].data = &value;
    }
    ts.s.tensors = many;
    ts.s.n_tensors = MANY_TENSORS;
    int rc = many ? ckpt_write_atomic(d, &ts.s, NULL, err) : ddp_fail(err, DDP_ERUNTIME, "out of memory");
    free(many);
    ts_free(&ts);
    return rc;
}

/* The newest checkpoint read with room for its file but not for its table: 40 when the walk fails
 * as this machine's failure, else the step it resumed (or its error code). */
static int read_short_of_memory(const char *d, ddp_err *err)
{
    uint64_t vm = ts_proc_bytes("VmSize");
    struct rlimit lim = {(rlim_t)(vm + (4u << 20)), RLIM_INFINITY};
    if (vm == 0 || getrlimit(RLIMIT_AS, &(struct rlimit){0}) != 0 || setrlimit(RLIMIT_AS, &lim) != 0)
        return 97;
    ckpt_loaded c;
    int rc = ckpt_find_latest(d, &c, NULL, err);
    if (rc == DDP_OK) {
        rc = (int)c.hdr.step;
        ckpt_loaded_free(&c);
        return rc;
    }
    return rc == DDP_ERUNTIME && err->local ? 40 : rc;
}

static void test_read_out_of_memory(void)
{
    char d[600], msg[DDP_ERR_MSG];
    snprintf(d, sizeof d, "%s/oom", dir);
    ddp_err err = {0};
    CHECK_EQ_INT(write_state(d, 10, 64, &err), DDP_OK);
    CHECK_EQ_INT(write_many_tensors(d, &err), DDP_OK);
    /* the child first: a read here would leave the table's memory in this process's heap */
    CHECK_EQ_INT(in_child(read_short_of_memory, d, msg, sizeof msg), 40);
    CHECK_STR_CONTAINS(msg, "out of memory");
    CHECK_STR_CONTAINS(msg, "ckpt-00000020.ddp");
    CHECK_STR_CONTAINS(msg, "not passed over");
    ckpt_loaded c;
    CHECK(ckpt_find_latest(d, &c, NULL, &err) == DDP_OK && c.hdr.step == 20, "step 20 reads with memory: %s",
          err.msg);
    ckpt_loaded_free(&c);
}
#endif

/* readdir, but after readdir_fail_after more entries, NULL with errno EIO (-1: never) */
static int readdir_fail_after = -1;
struct dirent *__real_readdir64(DIR *d);
struct dirent *__wrap_readdir64(DIR *d);
struct dirent *__wrap_readdir64(DIR *d)
{
    if (readdir_fail_after == 0) {
        errno = EIO;
        return NULL;
    }
    if (readdir_fail_after > 0)
        readdir_fail_after--;
    return __real_readdir64(d);
}

static void test_listing_cut_short(void)
{
    char d[600];
    snprintf(d, sizeof d, "%s/cut", dir);
    ddp_err err = {0};
    CHECK_EQ_INT(write_state(d, 10, 64, &err), DDP_OK);
    CHECK_EQ_INT(write_state(d, 20, 64, &err), DDP_OK);
    for (int after = 0; after < 4; after++) { /* ".", "..", the two checkpoints, in the folder's order */
        ckpt_loaded c;
        readdir_fail_after = after;
        int rc = ckpt_find_latest(d, &c, NULL, &err);
        readdir_fail_after = -1;
        CHECK(rc == DDP_ERUNTIME, "a listing cut short after %d entries fails (%d, step %lld)", after, rc,
              rc == DDP_OK ? (long long)c.hdr.step : -1LL);
        if (rc == DDP_OK)
            ckpt_loaded_free(&c);
        CHECK_STR_CONTAINS(err.msg, "cannot list it: Input/output error");
        CHECK_STR_CONTAINS(err.msg, d);
    }
}

int main(void)
{
    if (!ts_tmpdir(dir, sizeof dir, "faults")) {
        perror("mkdtemp");
        return 1;
    }
    test_unwritable_dir();
    test_file_size_limit();
    test_disk_full();
    test_kill_during_write();
    test_read_out_of_memory();
    test_listing_cut_short();
    int rc = check_done("test_ckpt_faults");
    if (rc == 0)
        ts_rmrf(dir);
    return rc;
}
