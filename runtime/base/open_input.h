/* open_input.h — opening a file the job reads (a checkpoint, a safetensors or JSON file of a
 * Hugging Face folder, a token shard, a tokenizer, a data file, an llm.c model file).
 *
 * Only a regular file is accepted, and the check comes before anything can block: the open itself
 * is non-blocking (a FIFO named model.safetensors would otherwise hold the rank in open() until a
 * writer appears, out of reach of a stop request), then fstat refuses whatever is not a regular
 * file, naming what it is. Must not read, map or close what it hands back. */
#ifndef DDP_OPEN_INPUT_H
#define DDP_OPEN_INPUT_H

#include <stdio.h>

#include "err.h"

/* A read-only, close-on-exec descriptor of the regular file at path in *fd, blocking as usual from
 * then on. DDP_EUSAGE naming path when it is missing, not readable, or not a regular file (a FIFO,
 * a folder, a device, a socket); DDP_ERUNTIME naming path and strerror for other failures.
 * *fd is -1 on failure, and errno says why (EINVAL for a file that is not regular). */
int open_input(const char *path, int *fd, ddp_err *err);

/* open_input as a stdio stream ("rb"); *f is NULL on failure. */
int fopen_input(const char *path, FILE **f, ddp_err *err);

#endif
