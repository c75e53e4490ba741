/* replace_file.c — a file written whole or not at all (replace_file.h). Owns the temporary name,
 * the fsyncs and the rename, and the checks of a stream's writes (also of one written in place);
 * the contents are the caller's writer's. Must not touch path until the new contents are durable
 * in the temporary file. */
#define _POSIX_C_SOURCE 200809L
#include "replace_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "dirs.h"
#include "log.h"

#define REPLACE_PATH_MAX 4096

/* path's folder into dir and the temporary name beside it into tmp. */
static int temp_name(const char *path, char dir[REPLACE_PATH_MAX], char tmp[REPLACE_PATH_MAX + 64], ddp_err *err)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    int dir_len = slash ? (slash == path ? 1 : (int)(slash - path)) : 1;
    if (!*base)
        return ddp_fail(err, DDP_EUSAGE, "%s: names a folder, not a file", path);
    if (snprintf(dir, REPLACE_PATH_MAX, "%.*s", dir_len, slash ? path : ".") >= REPLACE_PATH_MAX ||
        snprintf(tmp, REPLACE_PATH_MAX + 64, "%s/.%s.tmp.%ld", dir, base, (long)getpid()) >= REPLACE_PATH_MAX + 64)
        return ddp_fail(err, DDP_EUSAGE, "%.200s...: path too long", path);
    return DDP_OK;
}

/* The temporary file's descriptor in *fd. */
static int create_temp(const char *tmp, int *fd, ddp_err *err)
{
    *fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (*fd >= 0)
        return DDP_OK;
    return ddp_fail(err, errno == ENOENT || errno == EACCES || errno == ENOTDIR ? DDP_EUSAGE : DDP_ERUNTIME,
                    "%s: cannot create: %s", tmp, strerror(errno));
}

/* The contents are written (rc says how that went) and fd is still open: make them durable,
 * rename them over path and make the rename durable; on any failure only the temporary goes. */
static int commit(int fd, int rc, const char *dir, const char *tmp, const char *path, ddp_err *err)
{
    if (!rc && fsync(fd) != 0)
        rc = ddp_fail(err, DDP_ERUNTIME, "%s: fsync: %s", tmp, strerror(errno));
    if (close(fd) != 0 && !rc)
        rc = ddp_fail(err, DDP_ERUNTIME, "%s: close: %s", tmp, strerror(errno));
    if (!rc && rename(tmp, path) != 0)
        rc = ddp_fail(err, DDP_ERUNTIME, "%s: cannot rename %s into place: %s", path, tmp, strerror(errno));
    if (rc) {
        unlink(tmp);
        return rc;
    }
    return dir_fsync(dir, err);
}

int replace_file_fd(const char *path, replace_file_fd_writer write, void *ctx, ddp_err *err)
{
    char dir[REPLACE_PATH_MAX], tmp[REPLACE_PATH_MAX + 64];
    int fd = -1, rc = temp_name(path, dir, tmp, err);
    if (!rc)
        rc = create_temp(tmp, &fd, err);
    if (rc)
        return rc;
    return commit(fd, write(fd, tmp, ctx, err), dir, tmp, path, err);
}

/* f's contents from write, flushed and closed (f named name in messages); the first failure. */
static int write_stream(FILE *f, const char *name, replace_file_stream_writer write, void *ctx, ddp_err *err)
{
    int rc = write(f, ctx, err);
    if ((fflush(f) != 0 || ferror(f)) && !rc)
        rc = ddp_fail(err, DDP_ERUNTIME, "%s: write failed: %s", name, errno ? strerror(errno) : "stream error");
    if (fclose(f) != 0 && !rc)
        rc = ddp_fail(err, DDP_ERUNTIME, "%s: close: %s", name, strerror(errno));
    return rc;
}

int write_stream_in_place(const char *path, replace_file_stream_writer write, void *ctx, ddp_err *err)
{
    FILE *f = fopen(path, "we");
    return f ? write_stream(f, path, write, ctx, err)
             : ddp_fail(err, DDP_ERUNTIME, "%s: cannot write: %s", path, strerror(errno));
}

int replace_file_stream(const char *path, replace_file_stream_writer write, void *ctx, ddp_err *err)
{
    char dir[REPLACE_PATH_MAX], tmp[REPLACE_PATH_MAX + 64];
    int fd = -1, rc = temp_name(path, dir, tmp, err);
    if (!rc)
        rc = create_temp(tmp, &fd, err);
    if (rc)
        return rc;
    /* the stream gets its own descriptor, so that commit() still holds fd after fclose */
    int own = fcntl(fd, F_DUPFD_CLOEXEC, 0); /* not for a command a thread starts meanwhile */
    FILE *f = own < 0 ? NULL : fdopen(own, "w");
    if (!f) {
        if (own >= 0)
            close(own);
        return commit(fd, ddp_fail(err, DDP_ERUNTIME, "%s: fdopen: %s", tmp, strerror(errno)), dir, tmp, path, err);
    }
    return commit(fd, write_stream(f, tmp, write, ctx, err), dir, tmp, path, err);
}

int replace_file_write(int fd, const char *tmp, const void *p, size_t n, ddp_err *err)
{
    for (size_t off = 0; off < n;) {
        ssize_t w = write(fd, (const char *)p + off, n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return ddp_fail(err, DDP_ERUNTIME, "%s: write failed: %s", tmp, w < 0 ? strerror(errno) : "no progress");
        off += (size_t)w;
    }
    return DDP_OK;
}

/* name's NAME into out when it is a temporary's name, ".NAME.tmp.PID" */
static bool temp_of(const char *name, char *out, size_t size)
{
    const char *tag = strstr(name, ".tmp."), *next;
    while (tag && (next = strstr(tag + 1, ".tmp.")) != NULL) /* the last one */
        tag = next;
    if (name[0] != '.' || !tag || tag == name || !tag[5] || strspn(tag + 5, "0123456789") != strlen(tag + 5))
        return false;
    return snprintf(out, size, "%.*s", (int)(tag - name - 1), name + 1) < (int)size;
}

void replace_file_remove_temps(const char *dir, const char *pattern)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    char name[256];
    for (struct dirent *de; (de = readdir(d)) != NULL;)
        if (temp_of(de->d_name, name, sizeof name) && fnmatch(pattern, name, 0) == 0 &&
            unlinkat(dirfd(d), de->d_name, 0) == 0)
            log_warn("%s/%s: removed, left by a write that was cut short", dir, de->d_name);
    closedir(d);
}
