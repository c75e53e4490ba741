/* replace_file.h — a file written whole or not at all: the contents go to a temporary file beside
 * it (".NAME.tmp.PID"), which is flushed, fsync'd and renamed over the path, then the folder is
 * fsync'd. A reader sees the old file or the new one, never a part; on any failure the temporary
 * file is removed and the old file is untouched. For the files a run writes once or now and then
 * (resolved config, llm.c model files, profiles); checkpoints keep their own writer (ckpt.c),
 * which also prunes stale temporaries of earlier crashes. Must not create folders. */
#ifndef DDP_REPLACE_FILE_H
#define DDP_REPLACE_FILE_H

#include <stdio.h>

#include "err.h"

/* Writes the contents to fd (the temporary file, named tmp for messages); DDP_OK or err filled. */
typedef int (*replace_file_fd_writer)(int fd, const char *tmp, void *ctx, ddp_err *err);
/* Writes the contents to f; a write error it does not report is found from ferror(f). */
typedef int (*replace_file_stream_writer)(FILE *f, void *ctx, ddp_err *err);

/* DDP_OK once path holds what write wrote, durably. DDP_EUSAGE when path names a folder, is too
 * long, or its folder is missing or not writable (the message names the temporary file);
 * DDP_ERUNTIME for a failed write, fsync, close or rename, naming the call and strerror. */
int replace_file_fd(const char *path, replace_file_fd_writer write, void *ctx, ddp_err *err);
int replace_file_stream(const char *path, replace_file_stream_writer write, void *ctx, ddp_err *err);

/* For a path with nothing to replace (/dev/stdout, a FIFO), where the caller has chosen to: the
 * stream written there in place, flushed and closed; no temporary, fsync or rename. Opening a FIFO
 * waits for its reader. DDP_ERUNTIME naming path, the call and strerror. */
int write_stream_in_place(const char *path, replace_file_stream_writer write, void *ctx, ddp_err *err);

/* Removes dir's temporaries (".NAME.tmp.PID") whose NAME matches the fnmatch pattern, each named
 * in a warning: a writer killed between its create and its rename (kill -9, a lost node) leaves
 * one behind. Only for a folder whose writers of such names have all ended (run.dir at a job's
 * start, under its lock): a temporary being written now would go too. */
void replace_file_remove_temps(const char *dir, const char *pattern);

/* For fd writers: all n bytes of p written, retried after EINTR and short writes; DDP_ERUNTIME
 * naming tmp and strerror (a full disk, a file-size limit) otherwise. */
int replace_file_write(int fd, const char *tmp, const void *p, size_t n, ddp_err *err);

#endif
