/* dirs.c — path_is_dir; make_dirs: mkdir on each prefix of the path in turn, ignoring the ones
 * that exist, and fsyncing the parent of each one made; the empty files (a writability probe, or
 * one kept for others to find); the directory fsync (dirs.h). */
#include "dirs.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool path_is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The directory holding `path` (a made directory) fsynced, so that its new entry is durable. */
static int fsync_parent(const char *path, ddp_err *err)
{
    char copy[PATH_MAX];
    snprintf(copy, sizeof copy, "%s", path); /* dirname may write into its argument */
    return dir_fsync(dirname(copy), err);
}

int make_dirs(const char *path, ddp_err *err)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return ddp_fail(err, DDP_EUSAGE, "directory path too long: %s", path);
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char saved = *p;
        *p = '\0';
        bool made = mkdir(buf, 0777) == 0;
        if (!made && errno != EEXIST)
            return ddp_fail(err, DDP_ERUNTIME, "cannot create directory %s: %s", buf, strerror(errno));
        if (made && fsync_parent(buf, err) != DDP_OK) /* what is saved inside must not outlive its entry */
            return err->code;
        *p = saved;
        if (saved == '\0')
            return DDP_OK;
    }
}

/* Creates the empty file dir/name (flags: O_EXCL or O_TRUNC), its path into path; a file whose
 * close failed is removed again, so that a failure leaves nothing behind. */
static int make_empty(const char *dir, const char *name, int flags, char path[PATH_MAX], ddp_err *err)
{
    if (snprintf(path, PATH_MAX, "%s/%s", dir, name) >= PATH_MAX)
        return ddp_fail(err, DDP_EUSAGE, "directory path too long: %s", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | flags, 0644);
    if (fd < 0)
        return ddp_fail(err, DDP_ERUNTIME, "cannot make %s in it: %s", name, strerror(errno));
    if (close(fd) == 0)
        return DDP_OK;
    int e = errno;
    unlink(path);
    return ddp_fail(err, DDP_ERUNTIME, "cannot close %s in it: %s", name, strerror(e));
}

int dir_make_file(const char *dir, const char *name, ddp_err *err)
{
    char path[PATH_MAX];
    return make_empty(dir, name, O_EXCL, path, err);
}

int dir_try_file(const char *dir, const char *name, ddp_err *err)
{
    char path[PATH_MAX];
    int rc = make_empty(dir, name, O_TRUNC, path, err);
    if (rc == DDP_OK && unlink(path) != 0)
        return ddp_fail(err, DDP_ERUNTIME, "cannot remove %s from it: %s", name, strerror(errno));
    return rc;
}

int make_writable_dir(const char *path, ddp_err *err)
{
    int rc = make_dirs(path, err);
    if (rc)
        return rc;
    char host[256] = "host", name[320];
    gethostname(host, sizeof host - 1); /* on failure, the pid alone names it */
    snprintf(name, sizeof name, ".ddprun-probe.%s.%ld", host, (long)getpid());
    return dir_try_file(path, name, err);
}

int dir_fsync(const char *path, ddp_err *err)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return ddp_fail(err, DDP_ERUNTIME, "directory %s: open for fsync: %s", path, strerror(errno));
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    if (rc != 0 && e != EINVAL) /* some filesystems cannot fsync directories */
        return ddp_fail(err, DDP_ERUNTIME, "directory %s: fsync: %s", path, strerror(e));
    return DDP_OK;
}
