/* test_open_input.c — runtime/base/open_input.c: a regular file opens, blocking as usual afterwards
 * (O_NONBLOCK cleared); a FIFO with no writer, a folder and /dev/null are refused at once naming
 * what they are (the open of a FIFO must not wait for a writer: the test would hang), a missing
 * file is a usage error naming the path with errno ENOENT; the stdio form the same. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/base/open_input.h"
#include "tests/check.h"

static void refused(const char *path, const char *what)
{
    int fd = 7;
    ddp_err err = {0};
    CHECK(open_input(path, &fd, &err) == DDP_EUSAGE && fd == -1, "%s refused as a usage error", path);
    CHECK(strstr(err.msg, path) && strstr(err.msg, what), "%s: the message says %s: %s", path, what, err.msg);
    FILE *f = stdin;
    CHECK(fopen_input(path, &f, &err) == DDP_EUSAGE && f == NULL, "%s refused by the stdio form", path);
}

int main(void)
{
    char dir[] = "/tmp/ddp_open_input.XXXXXX", path[128];
    if (!mkdtemp(dir))
        return 1;
    snprintf(path, sizeof path, "%s/regular", dir);
    FILE *w = fopen(path, "w");
    fputs("abc", w);
    fclose(w);
    int fd = -1;
    ddp_err err = {0};
    CHECK(open_input(path, &fd, &err) == DDP_OK && fd >= 0, "a regular file opens: %s", err.msg);
    CHECK(!(fcntl(fd, F_GETFL) & O_NONBLOCK), "and reads block as usual (O_NONBLOCK cleared)");
    char buf[4] = {0};
    CHECK(read(fd, buf, 3) == 3 && !strcmp(buf, "abc"), "and reads its bytes");
    close(fd);
    FILE *f = NULL;
    CHECK(fopen_input(path, &f, &err) == DDP_OK && f && fgetc(f) == 'a', "the stdio form reads it");
    if (f)
        fclose(f);

    snprintf(path, sizeof path, "%s/fifo", dir);
    CHECK(mkfifo(path, 0600) == 0, "mkfifo");
    alarm(10); /* a blocking open would hang here: fail instead */
    refused(path, "is a FIFO, expected a regular file");
    alarm(0);
    unlink(path);
    refused(dir, "is a folder, expected a regular file");
    refused("/dev/null", "is a character device, expected a regular file");
    snprintf(path, sizeof path, "%s/missing", dir);
    refused(path, "cannot open: No such file or directory");
    errno = 0;
    CHECK(open_input(path, &fd, &err) == DDP_EUSAGE && errno == ENOENT, "errno says ENOENT after the message");
    snprintf(path, sizeof path, "%s/regular", dir);
    unlink(path);
    rmdir(dir);
    return check_done("test_open_input");
}
