/* test_read_whole.c — runtime/base/read_whole.c: a file of up to the limit comes back whole and
 * NUL-terminated, whether it is a regular file (read at its size) or a pipe, which says no size
 * (read through a buffer that grows: 64 KiB first, so a pipe of more than that must come back the
 * same); one byte over the limit is refused naming the file, also from a pipe whose writer never
 * stops (the reader must not wait for an end); an empty file is empty. */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/base/read_whole.h"
#include "tests/check.h"

/* n bytes no two neighbouring 4 KiB pages of which are alike, so a lost or repeated chunk shows. */
static char *pattern(size_t n)
{
    char *p = malloc(n + 1);
    for (size_t i = 0; i < n; i++)
        p[i] = (char)('a' + (i * 7 + i / 4096) % 26);
    return p;
}

/* f's bytes through read_whole with the limit max_bytes: they must be want[0..n) when n <= max. */
static void check_read(FILE *f, const char *what, const char *want, size_t n, size_t max_bytes)
{
    char *text = (char *)1;
    size_t len = 7;
    ddp_err err = {0};
    int rc = read_whole(f, what, max_bytes, &text, &len, &err);
    if (n <= max_bytes) {
        CHECK(rc == DDP_OK, "%s: %zu bytes at most %zu: %s", what, n, max_bytes, err.msg);
        CHECK(rc == DDP_OK && len == n && !memcmp(text, want, n) && text[n] == '\0',
              "%s: %zu bytes back whole and NUL-terminated (%zu)", what, n, len);
    } else {
        char msg[128];
        snprintf(msg, sizeof msg, "%s: larger than %zu bytes", what, max_bytes);
        CHECK(rc == DDP_EUSAGE && text == NULL && len == 0, "%s: %zu bytes at most %zu refused", what, n, max_bytes);
        CHECK_STR_CONTAINS(err.msg, msg);
    }
    free(rc == DDP_OK ? text : NULL);
}

static void regular_file(const char *dir, size_t n, size_t max_bytes)
{
    char path[256];
    snprintf(path, sizeof path, "%s/file", dir);
    char *want = pattern(n);
    FILE *w = fopen(path, "wb");
    fwrite(want, 1, n, w);
    fclose(w);
    FILE *f = fopen(path, "rb");
    check_read(f, path, want, n, max_bytes);
    fclose(f);
    free(want);
}

/* The same through a pipe, from a child that writes n bytes and closes (or, endless, never stops). */
static void pipe_of(size_t n, size_t max_bytes, int endless)
{
    int fds[2];
    if (pipe(fds) != 0) return;
    char *want = pattern(n);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        signal(SIGPIPE, SIG_IGN);
        do
            for (size_t at = 0; at < n;) {
                ssize_t put = write(fds[1], want + at, n - at);
                if (put <= 0) _exit(0);
                at += (size_t)put;
            }
        while (endless);
        _exit(0);
    }
    close(fds[1]);
    FILE *f = fdopen(fds[0], "rb");
    check_read(f, endless ? "endless pipe" : "pipe", want, endless ? (size_t)-1 : n, max_bytes);
    fclose(f);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    free(want);
}

int main(void)
{
    char dir[] = "/tmp/ddp_read_whole.XXXXXX";
    if (!mkdtemp(dir)) return 1;
    const size_t sizes[] = {0, 1, 4095, 65535, 65536, 65537, 200000};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        size_t n = sizes[i];
        regular_file(dir, n, n);              /* exactly at the limit */
        regular_file(dir, n, 1u << 20);       /* far below it */
        pipe_of(n, n, 0);
        pipe_of(n, 1u << 20, 0);
        if (n > 0) {
            regular_file(dir, n, n - 1);      /* one byte over */
            pipe_of(n, n - 1, 0);
        }
    }
    pipe_of(4096, 300000, 1);
    char path[256];
    snprintf(path, sizeof path, "%s/file", dir);
    unlink(path);
    rmdir(dir);
    return check_done("test_read_whole");
}
