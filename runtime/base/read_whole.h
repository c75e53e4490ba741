/* read_whole.h — reading a small file whole (a config, a JSON file of a Hugging Face folder,
 * chat.json, a prompt) up to a limit: a larger file, or a stream that never ends, is refused once
 * the limit is passed, and the buffer starts at a regular file's own size, so a 2 KB file does not
 * cost the limit. Must not open or close the stream (the caller chooses: open_input.h for a regular
 * file alone, fopen where a FIFO or /dev/stdin is welcome) or parse what it read. */
#ifndef DDP_READ_WHOLE_H
#define DDP_READ_WHOLE_H

#include <stddef.h>
#include <stdio.h>

#include "err.h"

/* All of f, path naming it in messages, into *text (malloc'd, NUL-terminated; free it) and its
 * length (without the NUL) into *len. DDP_EUSAGE "PATH: larger than MAX_BYTES bytes" when f holds
 * more; DDP_ERUNTIME naming path for a read error or no memory. *text is NULL on failure. */
int read_whole(FILE *f, const char *path, size_t max_bytes, char **text, size_t *len, ddp_err *err);

#endif
