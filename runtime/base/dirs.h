/* dirs.h — directories the run writes into and reads from: whether a path is one, `mkdir -p` (the
 * run directory and the checkpoint directory), a check at start that files can be created there,
 * an empty file made for other processes to find, and the directory fsync that makes a rename or
 * unlink in it durable. Permissions are 0777 before the umask, as mkdir(1) gives. Must not remove
 * or change anything that exists (the check removes only its own file). */
#ifndef DDP_DIRS_H
#define DDP_DIRS_H

#include <stdbool.h>

#include "err.h"

/* Whether path names a directory now (a link to one counts); false where it cannot be looked at. */
bool path_is_dir(const char *path);

/* DDP_OK when path is a directory afterwards (existing already is fine); DDP_ERUNTIME naming the
 * component that could not be created, or DDP_EUSAGE when path is longer than PATH_MAX. */
int make_dirs(const char *path, ddp_err *err);

/* Creates the empty file dir/name, which must not exist yet (O_EXCL), and leaves it for the caller
 * to remove: a file others are to find. DDP_ERUNTIME naming the file, the step that failed and why
 * (the caller names dir; nothing is left where it fails); DDP_EUSAGE when the path is longer than
 * PATH_MAX. */
int dir_make_file(const char *dir, const char *name, ddp_err *err);

/* Creates the empty file dir/name and removes it: that this process may write in dir, seen
 * before any work depends on it. name must be one no other process uses (the caller's host and
 * pid in it). DDP_ERUNTIME naming the file, the step that failed and why (the caller names dir);
 * DDP_EUSAGE when the path is longer than PATH_MAX. */
int dir_try_file(const char *dir, const char *name, ddp_err *err);

/* make_dirs, then dir_try_file of ".ddprun-probe.<host>.<pid>" in path (a directory that hosts
 * share may see two processes of one pid), so that a read-only filesystem or a directory this
 * process may not write is found before any work depends on it. */
int make_writable_dir(const char *path, ddp_err *err);

/* fsync of the directory itself. A filesystem that cannot fsync directories (EINVAL) counts as
 * done. DDP_ERUNTIME naming path and strerror otherwise. */
int dir_fsync(const char *path, ddp_err *err);

#endif
