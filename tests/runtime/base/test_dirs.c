/* test_dirs.c — runtime/base/dirs.c's path_is_dir, and make_dirs: every missing component of a path is made, and
 * the directory holding each one made is fsynced after it (so that what is saved inside never
 * outlives its entry on a crash), while components that existed cost no fsync; a component that is
 * a file is named. fsync is interposed here: this executable's definition is the one dirs.c calls,
 * and it records the path of each directory synced before syncing it through the system call. */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runtime/base/dirs.h"
#include "tests/check.h"

static char synced[8][PATH_MAX];
static int n_synced;

int fsync(int fd)
{
    char link[64], path[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n > 0 && n_synced < 8) {
        path[n] = '\0';
        snprintf(synced[n_synced++], sizeof synced[0], "%s", path);
    }
    return (int)syscall(SYS_fsync, fd);
}

int main(void)
{
    char root[] = "/tmp/test_dirs.XXXXXX", path[PATH_MAX], want[PATH_MAX + 8];
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 1;
    }
    char real[PATH_MAX];
    CHECK(realpath(root, real) != NULL, "realpath");
    ddp_err err = {0};
    snprintf(path, sizeof path, "%s/a/b", root);
    CHECK(make_dirs(path, &err) == DDP_OK, "make a/b: %s", err.msg);
    struct stat st;
    CHECK(stat(path, &st) == 0 && S_ISDIR(st.st_mode), "a/b is a directory");
    CHECK_EQ_INT(n_synced, 2);
    CHECK(!strcmp(synced[0], real), "the root synced after a was made: %s", synced[0]);
    snprintf(want, sizeof want, "%s/a", real);
    CHECK(n_synced > 1 && !strcmp(synced[1], want), "a synced after b was made: %s", synced[1]);
    n_synced = 0;
    CHECK(make_dirs(path, &err) == DDP_OK, "again: %s", err.msg);
    CHECK_EQ_INT(n_synced, 0); /* nothing made, nothing synced */
    snprintf(want, sizeof want, "%s/file", root);
    close(open(want, O_WRONLY | O_CREAT, 0644));
    snprintf(path, sizeof path, "%s/file/c", root);
    CHECK(make_dirs(path, &err) != DDP_OK, "a file in the way is refused");
    CHECK_STR_CONTAINS(err.msg, "file/c");
    /* path_is_dir: a folder, a link to one; not a file, a missing path, a path through a file */
    snprintf(path, sizeof path, "%s/a/b", root);
    CHECK(path_is_dir(path), "a/b is a folder");
    snprintf(path, sizeof path, "%s/link", root);
    CHECK(symlink("a", path) == 0 && path_is_dir(path), "a link to a folder is one");
    CHECK(!path_is_dir(want), "a file is no folder");
    snprintf(path, sizeof path, "%s/missing", root);
    CHECK(!path_is_dir(path), "a missing path is no folder");
    snprintf(path, sizeof path, "%s/file/c", root);
    CHECK(!path_is_dir(path), "a path through a file is no folder");
    snprintf(path, sizeof path, "rm -rf '%s'", root);
    if (system(path) != 0)
        fprintf(stderr, "could not remove %s\n", root);
    return check_done("test_dirs");
}
