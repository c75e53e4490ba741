/* dirs.h — `mkdir -p`: create a directory and every missing parent, as the run directory and the
 * checkpoint directory need. Permissions are 0777 before the umask, as mkdir(1) gives.
 * Must not remove or change anything that exists. */
#ifndef DDP_DIRS_H
#define DDP_DIRS_H

#include "err.h"

/* DDP_OK when path is a directory afterwards (existing already is fine); DDP_ERUNTIME naming the
 * component that could not be created, or DDP_EUSAGE when path is longer than PATH_MAX. */
int make_dirs(const char *path, ddp_err *err);

#endif
