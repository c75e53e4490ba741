/* test_replace_file.c — runtime/base/replace_file.c: a file written whole through either writer
 * (contents exact, no temporary left, an existing file replaced); a writer that fails or a
 * stream whose writes fail (RLIMIT_FSIZE: the kernel refuses the bytes) leave the old file
 * byte for byte and no temporary behind, with the writer's or the system's error passed on; a
 * path that names a folder, and one whose folder is missing, are usage errors naming the path; a
 * FIFO written in place (write_stream_in_place) stays one; stale temporaries of one name pattern
 * removed, nothing else. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/check.h"
#include "runtime/base/replace_file.h"

static char dir[64];

static char *slurp(const char *path)
{
    static char buf[1 << 16];
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* Entries in dir other than . and .. whose name contains part. */
static int count(const char *part)
{
    int n = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strstr(e->d_name, part);
    if (d)
        closedir(d);
    return n;
}

static int put_text(FILE *f, void *ctx, ddp_err *err)
{
    (void)err;
    fputs(ctx, f);
    return DDP_OK;
}

static int put_fd(int fd, const char *tmp, void *ctx, ddp_err *err)
{
    size_t n = strlen(ctx);
    if (write(fd, ctx, n) != (ssize_t)n)
        return ddp_fail(err, DDP_ERUNTIME, "%s: write", tmp);
    return DDP_OK;
}

static int refuse(FILE *f, void *ctx, ddp_err *err)
{
    fputs("half of it", f);
    return ddp_fail(err, DDP_ERUNTIME, "the writer gave up (%s)", (const char *)ctx);
}

/* Writes the text, noting whether the stream's descriptor is close-on-exec (a command another
 * thread starts meanwhile must not inherit it). */
static int put_noting_cloexec(FILE *f, void *ctx, ddp_err *err)
{
    (void)err;
    *(int *)ctx = fcntl(fileno(f), F_GETFD) & FD_CLOEXEC;
    fputs("third\n", f);
    return DDP_OK;
}

/* More than the stream's buffer, so the kernel sees writes past RLIMIT_FSIZE. */
static int put_big(FILE *f, void *ctx, ddp_err *err)
{
    (void)ctx;
    (void)err;
    for (int i = 0; i < 200000; i++)
        fputs("0123456789", f);
    return DDP_OK;
}

static void written_whole(const char *path)
{
    ddp_err err = {0};
    CHECK_EQ_INT(replace_file_stream(path, put_text, "first\n", &err), DDP_OK);
    CHECK(slurp(path) && !strcmp(slurp(path), "first\n"), "stream writer: %s", slurp(path));
    CHECK_EQ_INT(replace_file_fd(path, put_fd, "second\n", &err), DDP_OK);
    CHECK(slurp(path) && !strcmp(slurp(path), "second\n"), "fd writer replaced it: %s", slurp(path));
    CHECK_EQ_INT(count(".tmp."), 0);
    int cloexec = 0;
    CHECK_EQ_INT(replace_file_stream(path, put_noting_cloexec, &cloexec, &err), DDP_OK);
    CHECK(cloexec, "the stream's descriptor is not close-on-exec");
    CHECK_EQ_INT(replace_file_fd(path, put_fd, "second\n", &err), DDP_OK);
}

static void failures_keep_the_old_file(const char *path)
{
    ddp_err err = {0};
    CHECK_EQ_INT(replace_file_stream(path, refuse, "test", &err), DDP_ERUNTIME);
    CHECK_STR_CONTAINS(err.msg, "the writer gave up (test)");
    CHECK(!strcmp(slurp(path), "second\n"), "after a refusing writer: %s", slurp(path));
    CHECK_EQ_INT(count(".tmp."), 0);

    struct rlimit old, small = {.rlim_cur = 4096};
    getrlimit(RLIMIT_FSIZE, &old);
    small.rlim_max = old.rlim_max;
    signal(SIGXFSZ, SIG_IGN);
    CHECK_EQ_INT(setrlimit(RLIMIT_FSIZE, &small), 0);
    int rc = replace_file_stream(path, put_big, NULL, &err);
    setrlimit(RLIMIT_FSIZE, &old);
    CHECK_EQ_INT(rc, DDP_ERUNTIME);
    CHECK_STR_CONTAINS(err.msg, "File too large");
    CHECK(!strcmp(slurp(path), "second\n"), "after a write the kernel refused: %s", slurp(path));
    CHECK_EQ_INT(count(".tmp."), 0);
}

static void bad_paths(void)
{
    ddp_err err = {0};
    char path[128];
    snprintf(path, sizeof path, "%s/", dir);
    CHECK_EQ_INT(replace_file_stream(path, put_text, "x", &err), DDP_EUSAGE);
    CHECK_STR_CONTAINS(err.msg, "names a folder");
    snprintf(path, sizeof path, "%s/missing/out.json", dir);
    CHECK_EQ_INT(replace_file_stream(path, put_text, "x", &err), DDP_EUSAGE);
    CHECK_STR_CONTAINS(err.msg, "missing/.out.json.tmp.");
    CHECK_STR_CONTAINS(err.msg, "cannot create");
}

/* A FIFO (a reader waiting at its other end) has nothing to replace: the text goes through it. */
static void fifo_written_in_place(void)
{
    char path[128], buf[32] = {0};
    snprintf(path, sizeof path, "%s/pipe", dir);
    CHECK_EQ_INT(mkfifo(path, 0600), 0);
    int rd = open(path, O_RDONLY | O_NONBLOCK);
    ddp_err err = {0};
    CHECK(rd >= 0 && write_stream_in_place(path, put_text, "through\n", &err) == DDP_OK, "FIFO: %s", err.msg);
    ssize_t n = rd >= 0 ? read(rd, buf, sizeof buf - 1) : -1;
    struct stat st;
    CHECK(n == 8 && !strcmp(buf, "through\n"), "FIFO: read %zd bytes: %s", n, buf);
    CHECK(stat(path, &st) == 0 && S_ISFIFO(st.st_mode), "the FIFO was replaced by a file");
    CHECK(write_stream_in_place(path, refuse, "in place", &err) == DDP_ERUNTIME &&
          strstr(err.msg, "the writer gave up (in place)"), "FIFO: a refusing writer: %s", err.msg);
    CHECK_EQ_INT(count(".tmp."), 0);
    if (rd >= 0)
        close(rd);
    unlink(path);
}

/* Only temporaries (".NAME.tmp.DIGITS") whose NAME matches the pattern go. */
static void stale_temps_removed(void)
{
    static const char *const gone[] = {".trace-rank0.json.tmp.12", ".trace-rank13.json.tmp.4194304"};
    static const char *const kept[] = {".trace-rank0.json.tmp.12x", "trace-rank1.json.tmp.5", ".trace-rank1.json",
                                       ".profile.json.tmp.7", ".trace-rank2.json.tmp.", ".ckpt-00000001.ddp.tmp.7"};
    char path[160];
    for (int i = 0; i < 2 + 6; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, i < 2 ? gone[i] : kept[i - 2]);
        fclose(fopen(path, "w"));
    }
    replace_file_remove_temps(dir, "trace-rank*.json");
    for (int i = 0; i < 2 + 6; i++) {
        const char *name = i < 2 ? gone[i] : kept[i - 2];
        snprintf(path, sizeof path, "%s/%s", dir, name);
        CHECK(access(path, F_OK) == (i < 2 ? -1 : 0), "%s %s", name, i < 2 ? "was left" : "was removed");
        unlink(path);
    }
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/test_replace_file.XXXXXX");
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char path[128];
    snprintf(path, sizeof path, "%s/out.json", dir);
    written_whole(path);
    failures_keep_the_old_file(path);
    bad_paths();
    fifo_written_in_place();
    stale_temps_removed();
    unlink(path);
    rmdir(dir);
    return check_done("test_replace_file");
}
