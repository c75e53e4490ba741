/* dirs.c — make_dirs: mkdir on each prefix of the path in turn, ignoring the ones that exist. */
#include "dirs.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

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
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return ddp_fail(err, DDP_ERUNTIME, "cannot create directory %s: %s", buf, strerror(errno));
        *p = saved;
        if (saved == '\0')
            return DDP_OK;
    }
}
