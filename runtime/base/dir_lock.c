/* dir_lock.c — the one-process-at-a-time lock of a folder (dir_lock.h): flock on a file in it,
 * the holder's name written into the file. Must not wait for a lock or remove the lock file. */
#include "dir_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "dirs.h"

struct dir_lock {
    int fd;
};

/* The holder's words from the lock file, one line, or what to say when it wrote none yet. */
static void read_holder(int fd, char *buf, size_t size)
{
    ssize_t n = pread(fd, buf, size - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
    if (!buf[0])
        snprintf(buf, size, "a process that has not written its name yet");
}

static int write_holder(int fd, const char *path, const char *host, ddp_err *err)
{
    char since[32], line[256];
    time_t now = time(NULL);
    struct tm tm;
    strftime(since, sizeof since, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
    int n = snprintf(line, sizeof line, "host %s pid %ld since %s\n", host, (long)getpid(), since);
    if (ftruncate(fd, 0) != 0 || pwrite(fd, line, (size_t)n, 0) != n)
        return ddp_fail(err, DDP_ERUNTIME, "%s: cannot write the lock's holder: %s", path, strerror(errno));
    return DDP_OK;
}

int dir_lock_take(const char *dir, const char *name, const char *host, dir_lock **out, ddp_err *err)
{
    *out = NULL;
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path)
        return ddp_fail(err, DDP_EUSAGE, "%s: path too long for its lock file", dir);
    int rc = make_dirs(dir, err);
    if (rc != DDP_OK)
        return rc;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return ddp_fail(err, DDP_ERUNTIME, "%s: cannot open the lock file: %s", path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        char holder[256];
        read_holder(fd, holder, sizeof holder);
        close(fd);
        if (e == EWOULDBLOCK)
            return ddp_fail(err, DDP_EUSAGE, "%s is in use by another job (%s; lock %s): give this job another "
                            "folder, or wait until that job has ended", dir, holder, path);
        return ddp_fail(err, DDP_ERUNTIME, "%s: flock: %s", path, strerror(e));
    }
    dir_lock *l = malloc(sizeof *l);
    rc = l ? write_holder(fd, path, host, err) : ddp_fail(err, DDP_ERUNTIME, "out of memory");
    if (rc != DDP_OK) {
        free(l);
        close(fd); /* releases the lock */
        return rc;
    }
    l->fd = fd;
    *out = l;
    return DDP_OK;
}

void dir_lock_release(dir_lock *l)
{
    if (!l)
        return;
    close(l->fd); /* the last descriptor of the open file: the kernel drops the flock */
    free(l);
}
