/* dir_lock.h — a folder that belongs to one process at a time: an flock(2) on a lock file inside
 * it, held for as long as the process keeps it and released by the kernel when the process ends
 * however it ends (a crash or SIGKILL leaves no stale lock to clean up). The lock file holds the
 * holder's host, pid and start time, so a refused process can name who has the folder.
 * On NFS, Linux emulates flock with a whole-file POSIX lock, which the server arbitrates between
 * clients where the mount supports locking (NFSv4; NFSv3 with lockd; not with `nolock` or
 * `local_lock=flock`, where it holds only among the processes of one machine). The lock file is
 * never removed: removing it would let a second process lock a new file of the same name while the
 * first still holds the old one. Must not touch anything else in the folder. */
#ifndef DDP_DIR_LOCK_H
#define DDP_DIR_LOCK_H

#include "err.h"

typedef struct dir_lock dir_lock;

/* Creates dir if needed (make_dirs), then takes the lock on dir/name without waiting, writing
 * "HOST pid PID since TIME" into it. DDP_EUSAGE naming dir, the holder and the lock file when
 * another process holds it; DDP_ERUNTIME naming the call for a failed create, open or write. */
int dir_lock_take(const char *dir, const char *name, const char *host, dir_lock **out, ddp_err *err);

/* Releases and frees (NULL: nothing). */
void dir_lock_release(dir_lock *l);

#endif
