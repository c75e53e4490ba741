/* replace_dir.c — a folder written whole or not at all (replace_dir.h). Owns the temporary and
 * aside names, the carrying of the old folder's other entries, the swap and the removals, and the
 * in-place write of a folder no temporary beside it can take; the contents are the caller's
 * writer's. Must not touch the old folder's entries until the new contents are durable, and then
 * only to move unlinkable ones across (undone if the swap fails) or, in place, to replace and
 * remove the entries the caller claims. */
#include "replace_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dirs.h"
#include "log.h"

typedef struct swap {
    const char *path;           /* as the caller named it, for messages */
    char target[PATH_MAX];      /* the folder replaced: path, a link resolved */
    const char *base;           /* target's last name, in target */
    char parent[PATH_MAX];
    char tmp[PATH_MAX + 64], aside[PATH_MAX + 64];
    bool exists;
    bool in_place;              /* the temporary inside target, its files moved in one by one */
    mode_t mode;
    replace_dir_claims claims;
    const char *last;           /* moved in last in place (NULL: none) */
    bool keep_tmp;              /* in place: the temporary holds what could not be put back */
    char **moved;               /* entries moved from target into tmp, to move back on failure */
    int n_moved;
} swap;

static int path_join(char *out, size_t size, const char *dir, const char *name)
{
    return snprintf(out, size, "%s/%s", dir, name) >= (int)size ? -1 : 0;
}

/* Whether path is the root of a mount. A bind mount of a folder of the same filesystem (docker's
 * `-v /srv/data/out:/data/out`) keeps its parent's st_dev, yet rename() does not cross its edge
 * either. Without statx's answer (a kernel before 5.8), false: st_dev alone decides. */
static bool mount_root(const char *path)
{
#ifdef STATX_ATTR_MOUNT_ROOT
    struct statx sx;
    if (statx(AT_FDCWD, path, 0, STATX_BASIC_STATS, &sx) == 0 && (sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT))
        return (sx.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
#endif
    (void)path;
    return false;
}

/* The temporary and aside names: beside target, or in place inside it. Unique (mkdtemp's): a
 * pid-based name would collide with a leftover of an earlier process of the same pid, which in a
 * container is every run's. */
static int temp_names(swap *x, ddp_err *err)
{
    const char *in = x->in_place ? x->target : x->parent;
    if (snprintf(x->tmp, sizeof x->tmp, "%s/.%s.tmp.XXXXXX", in, x->base) >= (int)sizeof x->tmp ||
        snprintf(x->aside, sizeof x->aside, "%s/.%s.old.XXXXXX", in, x->base) >= (int)sizeof x->aside)
        return ddp_fail(err, DDP_EUSAGE, "%.200s...: path too long", x->path);
    return DDP_OK;
}

/* target, parent and the temporary names from path: what exists resolved (realpath), a missing
 * path taken as named less its trailing slashes. */
static int resolve(swap *x, ddp_err *err)
{
    struct stat st;
    if (stat(x->path, &st) == 0) {
        if (!S_ISDIR(st.st_mode))
            return ddp_fail(err, DDP_EUSAGE, "%s: exists and is not a folder", x->path);
        if (!realpath(x->path, x->target))
            return ddp_fail(err, DDP_ERUNTIME, "%s: cannot resolve: %s", x->path, strerror(errno));
        x->exists = true, x->mode = st.st_mode & 07777;
    } else if (errno != ENOENT) {
        return ddp_fail(err, DDP_EUSAGE, "%s: %s", x->path, strerror(errno));
    } else if (snprintf(x->target, sizeof x->target, "%s", x->path) >= (int)sizeof x->target) {
        return ddp_fail(err, DDP_EUSAGE, "%.200s...: path too long", x->path);
    }
    for (size_t n = strlen(x->target); n > 1 && x->target[n - 1] == '/';)
        x->target[--n] = '\0';
    const char *slash = strrchr(x->target, '/');
    x->base = slash ? slash + 1 : x->target;
    if (!*x->base || !strcmp(x->base, ".") || !strcmp(x->base, ".."))
        return ddp_fail(err, DDP_EUSAGE, "%s: cannot replace this folder (name one by its own name)", x->path);
    int dir_len = slash ? (slash == x->target ? 1 : (int)(slash - x->target)) : 1; /* "/" for /NAME */
    snprintf(x->parent, sizeof x->parent, "%.*s", dir_len, slash ? x->target : ".");
    struct stat parent;
    /* a mount point (a container's volume): no rename crosses into it from beside it */
    x->in_place = x->exists && ((stat(x->parent, &parent) == 0 && parent.st_dev != st.st_dev) || mount_root(x->target));
    return temp_names(x, err);
}

/* Names each temporary or aside folder of target's that an earlier process left (killed before
 * it removed it): it may hold entries of the old folder moved out before a swap, and it holds disk. */
static void warn_leftovers(const swap *x, const char *dir)
{
    bool inside = !strcmp(dir, x->target); /* an in-place write's: new files only */
    DIR *d = opendir(dir);
    if (!d)
        return;
    size_t n = strlen(x->base);
    for (struct dirent *e; (e = readdir(d));) {
        const char *s = e->d_name;
        if (s[0] == '.' && !strncmp(s + 1, x->base, n) && (!strncmp(s + 1 + n, ".tmp.", 5) || !strncmp(s + 1 + n, ".old.", 5)))
            log_warn("%s: %s/%s was left by an earlier write of it that did not finish; %s: remove it once nothing in "
                     "it is needed", x->path, dir, s, inside ? "it holds that write's new files (and maybe the folder's "
                     "earlier .previous.*)" : "it may hold entries moved out of the folder before its swap");
    }
    closedir(d);
}

/* The process's umask, read where reading it changes nothing (Linux 4.7's /proc field): setting
 * it to read it back would, for a moment, be another thread's umask too. */
static mode_t current_umask(void)
{
    FILE *f = fopen("/proc/self/status", "re");
    char line[256];
    unsigned mask = 0;
    bool found = false;
    while (f && !found && fgets(line, sizeof line, f))
        found = sscanf(line, "Umask: %o", &mask) == 1;
    if (f)
        fclose(f);
    if (found)
        return (mode_t)mask;
    mode_t m = umask(022);
    umask(m);
    return m;
}

/* The temporary folder: beside target, or in place when target is a mount point or a folder whose
 * parent this process may not write (a temporary there cannot be made). */
static int create_temp(swap *x, ddp_err *err)
{
    warn_leftovers(x, x->parent);
    if (x->exists)
        warn_leftovers(x, x->target);
    if (!x->exists) /* mkdtemp makes 0700; a new folder gets what mkdir would give it */
        x->mode = 0777 & ~current_umask();
    bool made = !x->in_place && mkdtemp(x->tmp);
    if (!made && !x->in_place && x->exists && (errno == EACCES || errno == EPERM || errno == EROFS)) {
        x->in_place = true;
        int rc = temp_names(x, err);
        if (rc)
            return rc;
    }
    if (!made && !(x->in_place && mkdtemp(x->tmp))) {
        bool usage = errno == ENOENT || errno == EACCES || errno == EPERM || errno == ENOTDIR || errno == EROFS;
        return ddp_fail(err, usage ? DDP_EUSAGE : DDP_ERUNTIME, "%s: cannot create the temporary folder %s: %s", x->path,
                        x->tmp, strerror(errno));
    }
    if (!x->in_place && chmod(x->tmp, x->mode) != 0) /* in place the folder keeps its own mode */
        return ddp_fail(err, DDP_ERUNTIME, "%s: chmod: %s", x->tmp, strerror(errno));
    return DDP_OK;
}

/* An entry of the old folder the new one takes over: not claimed, not written anew. *dst gets
 * its name in the temporary folder. */
static bool carried(const swap *x, const char *name, char *src, char *dst, size_t size)
{
    struct stat st;
    if (!strcmp(name, ".") || !strcmp(name, "..") || x->claims(name))
        return false;
    if (path_join(src, size, x->target, name) || path_join(dst, size, x->tmp, name))
        return false;
    return lstat(dst, &st) != 0;
}

/* Links the old folder's carried non-folders into the temporary one (with move, also moves
 * those left: folders, and anything link() refused). */
static int carry(swap *x, bool move, ddp_err *err)
{
    DIR *d = opendir(x->target);
    if (!d)
        return ddp_fail(err, DDP_ERUNTIME, "%s: cannot list: %s", x->path, strerror(errno));
    int rc = DDP_OK;
    char src[PATH_MAX + 256], dst[PATH_MAX + 320];
    for (struct dirent *e; !rc && (e = readdir(d));) {
        struct stat st;
        if (!carried(x, e->d_name, src, dst, sizeof src) || lstat(src, &st) != 0)
            continue;
        if (!move) {
            if (!S_ISDIR(st.st_mode))
                (void)!linkat(AT_FDCWD, src, AT_FDCWD, dst, 0); /* what fails is moved at the swap */
            continue;
        }
        char **grown = realloc(x->moved, (size_t)(x->n_moved + 1) * sizeof *grown);
        if (!grown) {
            rc = ddp_fail(err, DDP_ERUNTIME, "%s: out of memory", x->path);
            break;
        }
        x->moved = grown;
        if (!(grown[x->n_moved] = strdup(e->d_name)))
            rc = ddp_fail(err, DDP_ERUNTIME, "%s: out of memory", x->path);
        else if (rename(src, dst) != 0) {
            rc = ddp_fail(err, DDP_ERUNTIME, "%s: cannot move %s into the new folder: %s", x->path, e->d_name,
                          strerror(errno));
            free(grown[x->n_moved]);
        } else {
            x->n_moved++;
        }
    }
    closedir(d);
    return rc;
}

static void move_back(swap *x)
{
    char src[PATH_MAX + 320], dst[PATH_MAX + 256];
    for (int i = 0; i < x->n_moved; i++)
        if (!path_join(src, sizeof src, x->tmp, x->moved[i]) && !path_join(dst, sizeof dst, x->target, x->moved[i]) &&
            rename(src, dst) != 0)
            log_warn("%s: cannot move %s back from %s: %s", x->path, x->moved[i], x->tmp, strerror(errno));
}

/* Unlinks dir's entries (files only: the folders in it were moved back) and dir itself. */
static int remove_flat(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT ? 0 : -1;
    char path[PATH_MAX + 320];
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && !path_join(path, sizeof path, dir, e->d_name))
            (void)unlink(path);
    closedir(d);
    return rmdir(dir);
}

/* The new folder into place; the old one's path in *old (NULL when there was none). */
static int exchange(swap *x, const char **old, ddp_err *err)
{
    *old = NULL;
    if (!x->exists) {
        if (rename(x->tmp, x->target) != 0)
            return ddp_fail(err, DDP_ERUNTIME, "%s: cannot rename %s into place: %s", x->path, x->tmp, strerror(errno));
        return DDP_OK;
    }
#ifdef RENAME_EXCHANGE
    if (renameat2(AT_FDCWD, x->tmp, AT_FDCWD, x->target, RENAME_EXCHANGE) == 0) {
        *old = x->tmp;
        return DDP_OK;
    }
    if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
        return ddp_fail(err, DDP_ERUNTIME, "%s: cannot exchange it with %s: %s", x->path, x->tmp, strerror(errno));
#endif
    if (!mkdtemp(x->aside)) /* an empty folder of a unique name, which the rename replaces */
        return ddp_fail(err, DDP_ERUNTIME, "%s: cannot create %s to rename it aside to: %s", x->path, x->aside,
                        strerror(errno));
    if (rename(x->target, x->aside) != 0) {
        int e = errno;
        (void)rmdir(x->aside);
        return ddp_fail(err, DDP_ERUNTIME, "%s: cannot rename it aside to %s: %s", x->path, x->aside, strerror(e));
    }
    if (rename(x->tmp, x->target) != 0) {
        int e = errno;
        if (rename(x->aside, x->target) != 0)
            log_warn("%s: cannot rename the old folder back from %s: %s", x->path, x->aside, strerror(errno));
        return ddp_fail(err, DDP_ERUNTIME, "%s: cannot rename %s into place: %s", x->path, x->tmp, strerror(e));
    }
    *old = x->aside;
    return DDP_OK;
}

/* Whether name is among the n names. */
static bool listed(char *const *names, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(names[i], name))
            return true;
    return false;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The names in the temporary (but . and ..) into *out, by name, x->last after the others; *n of
 * them. */
static int list_written(const swap *x, char ***out, int *n, ddp_err *err)
{
    *out = NULL, *n = 0;
    DIR *d = opendir(x->tmp);
    if (!d)
        return ddp_fail(err, DDP_ERUNTIME, "%s: cannot list: %s", x->tmp, strerror(errno));
    int rc = DDP_OK;
    for (struct dirent *e; !rc && (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char **grown = realloc(*out, (size_t)(*n + 1) * sizeof *grown);
        if (grown)
            *out = grown;
        if (!grown || !(grown[*n] = strdup(e->d_name)))
            rc = ddp_fail(err, DDP_ERUNTIME, "%s: out of memory", x->path);
        else
            ++*n;
    }
    closedir(d);
    if (!rc) /* a fixed order, whatever readdir's */
        qsort(*out, (size_t)*n, sizeof **out, by_name);
    for (int i = 0; !rc && x->last && i + 1 < *n; i++)
        if (!strcmp((*out)[i], x->last)) {
            char *last = (*out)[i];
            memmove(&(*out)[i], &(*out)[i + 1], (size_t)(*n - i - 1) * sizeof **out);
            (*out)[*n - 1] = last;
            break;
        }
    return rc;
}

/* In place, after the other new files: target's claimed entries the writer did not write removed
 * (an earlier export's stale shards). */
static int remove_stale(const swap *x, char *const *names, int n, ddp_err *err)
{
    DIR *d = opendir(x->target);
    if (!d)
        return ddp_fail(err, DDP_ERUNTIME, "%s: cannot list: %s", x->path, strerror(errno));
    int rc = DDP_OK;
    char path[PATH_MAX + 256];
    for (struct dirent *e; !rc && (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && x->claims(e->d_name) && !listed(names, n, e->d_name) &&
            !path_join(path, sizeof path, x->target, e->d_name) && unlink(path) != 0)
            rc = ddp_fail(err, DDP_ERUNTIME, "%s: cannot remove %s, which the new contents replace: %s", x->path,
                          e->d_name, strerror(errno));
    closedir(d);
    return rc;
}

/* In place: the written files renamed from the temporary into target one by one, each replacing its
 * name atomically. Target's own x->last goes first, into the temporary (".previous.NAME"), so that a
 * folder cut off part-way lacks it and shows itself incomplete rather than pairing it with a mix of
 * old and new files (it is put back when nothing else has moved yet); then the other new files,
 * then the claimed entries not written anew are removed, and the new x->last goes in last. */
static int move_in(swap *x, ddp_err *err)
{
    char **names;
    int n, rc = list_written(x, &names, &n, err);
    bool has_last = !rc && x->last && n > 0 && !strcmp(names[n - 1], x->last);
    char src[PATH_MAX + 320], dst[PATH_MAX + 256], stash[PATH_MAX + 320], at_last[PATH_MAX + 256];
    bool stashed = false;
    if (has_last && (path_join(at_last, sizeof at_last, x->target, x->last) ||
                     snprintf(stash, sizeof stash, "%s/.previous.%s", x->tmp, x->last) >= (int)sizeof stash))
        rc = ddp_fail(err, DDP_EUSAGE, "%.200s...: path too long", x->path);
    else if (has_last && !(stashed = rename(at_last, stash) == 0) && errno != ENOENT)
        rc = ddp_fail(err, DDP_ERUNTIME, "%s: cannot move the earlier %s aside: %s", x->path, x->last, strerror(errno));
    int others = has_last ? n - 1 : n, moved = 0;
    while (!rc && moved < others)
        if (path_join(src, sizeof src, x->tmp, names[moved]) ||
            path_join(dst, sizeof dst, x->target, names[moved]) || rename(src, dst) != 0)
            rc = ddp_fail(err, DDP_ERUNTIME, "%s: cannot move %s into place: %s", x->path, names[moved], strerror(errno));
        else
            moved++;
    if (rc && moved == 0 && stashed) { /* nothing of the new contents is in: the folder as it was */
        if (rename(stash, at_last) == 0)
            stashed = false;
        else /* kept for the user: the temporary stays */
            x->keep_tmp = true, log_warn("%s: cannot put the earlier %s back from %s: %s", x->path, x->last, stash,
                                         strerror(errno));
    }
    if (!rc)
        rc = remove_stale(x, names, n, err);
    if (!rc && has_last && (path_join(src, sizeof src, x->tmp, x->last) || rename(src, at_last) != 0))
        rc = ddp_fail(err, DDP_ERUNTIME, "%s: cannot move %s into place: %s", x->path, x->last, strerror(errno));
    if (rc && has_last && (moved > 0 || stashed))
        ddp_prefix(err, "%s is left without %s%s", x->path, x->last, moved > 0 ? ", with part of the new files" : "");
    else if (rc && moved > 0)
        ddp_prefix(err, "%s holds part of the new files", x->path);
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return rc;
}

/* Beside target: the old folder's other entries carried, the temporary swapped into place; *old
 * gets the old folder's path (NULL when there was none). */
static int swap_in(swap *x, const char **old, ddp_err *err)
{
    *old = NULL;
    int rc = x->exists ? carry(x, false, err) : DDP_OK;
    if (!rc && x->exists)
        rc = carry(x, true, err);
    if (!rc)
        rc = dir_fsync(x->tmp, err);
    return rc ? rc : exchange(x, old, err);
}

int replace_dir(const char *path, replace_dir_writer write, replace_dir_claims claims, const char *last, void *ctx,
                ddp_err *err)
{
    swap x = {.path = path, .claims = claims, .last = last};
    int rc = resolve(&x, err);
    if (!rc)
        rc = create_temp(&x, err);
    if (rc)
        return rc;
    const char *old = NULL;
    rc = write(x.tmp, ctx, err);
    if (!rc)
        rc = x.in_place ? move_in(&x, err) : swap_in(&x, &old, err);
    if (rc && x.keep_tmp) {
        log_warn("%s: the temporary folder %s is left as it is", path, x.tmp);
    } else if (rc) {
        move_back(&x);
        if (remove_flat(x.tmp) != 0)
            log_warn("%s: cannot remove the temporary folder %s: %s", path, x.tmp, strerror(errno));
    } else if (x.in_place) {
        if (remove_flat(x.tmp) != 0) /* empty, or the earlier x.last */
            log_warn("%s: cannot remove the temporary folder %s: %s", path, x.tmp, strerror(errno));
        rc = dir_fsync(x.target, err);
    } else {
        rc = dir_fsync(x.parent, err); /* the new folder is in place either way */
        if (old && remove_flat(old) != 0)
            log_warn("%s: replaced; the old folder, now %s, could not be removed: %s", path, old, strerror(errno));
    }
    for (int i = 0; i < x.n_moved; i++)
        free(x.moved[i]);
    free(x.moved);
    return rc;
}
