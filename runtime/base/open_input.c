/* open_input.c — the regular-file check before a read (open_input.h). Must not follow the caller
 * further than the open: reading, mapping and closing stay the caller's. */
#include "open_input.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *kind_of(mode_t m)
{
    if (S_ISDIR(m)) return "a folder";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISSOCK(m)) return "a socket";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    return "not a regular file";
}

int open_input(const char *path, int *fd, ddp_err *err)
{
    *fd = -1;
    /* O_NONBLOCK: opening a FIFO for reading would wait for a writer; on a regular file it changes
     * nothing and is cleared below before the caller reads. O_NOCTTY: a terminal named as input
     * must not become ours. */
    int d = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (d < 0) {
        int e = errno;
        bool user = e == ENOENT || e == EACCES || e == ENOTDIR || e == ELOOP || e == ENAMETOOLONG || e == EISDIR;
        int rc = ddp_fail(err, user ? DDP_EUSAGE : DDP_ERUNTIME, "%s: cannot open: %s", path, strerror(e));
        errno = e;
        return rc;
    }
    struct stat sb;
    int rc = DDP_OK, e = 0;
    if (fstat(d, &sb) != 0)
        e = errno, rc = ddp_fail(err, DDP_ERUNTIME, "%s: cannot stat: %s", path, strerror(errno));
    else if (!S_ISREG(sb.st_mode))
        e = EINVAL, rc = ddp_fail(err, DDP_EUSAGE, "%s: is %s, expected a regular file", path, kind_of(sb.st_mode));
    else if (fcntl(d, F_SETFL, fcntl(d, F_GETFL) & ~O_NONBLOCK) != 0)
        e = errno, rc = ddp_fail(err, DDP_ERUNTIME, "%s: fcntl: %s", path, strerror(errno));
    if (rc != DDP_OK) {
        close(d);
        errno = e; /* what the caller may test (ENOENT), not what close or the formatting left */
        return rc;
    }
    *fd = d;
    return DDP_OK;
}

int fopen_input(const char *path, FILE **f, ddp_err *err)
{
    int fd;
    *f = NULL;
    int rc = open_input(path, &fd, err);
    if (rc != DDP_OK)
        return rc;
    if (!(*f = fdopen(fd, "rb"))) {
        close(fd);
        return ddp_fail(err, DDP_ERUNTIME, "%s: fdopen: %s", path, strerror(errno));
    }
    return DDP_OK;
}
