/* read_whole.c — a small file read whole, up to a limit (read_whole.h). Must not open, close or
 * parse. */
#include "read_whole.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The first buffer: a regular file's size and one byte (so its end is seen in one read), else
 * 64 KiB (a pipe, /proc say no size); never more than the limit and one byte. */
static size_t first_cap(FILE *f, size_t max_bytes)
{
    struct stat st;
    size_t cap = 65536;
    if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
        cap = (uint64_t)st.st_size < max_bytes ? (size_t)st.st_size + 1 : max_bytes + 1;
    return cap < max_bytes + 1 ? cap : max_bytes + 1;
}

static int read_into(FILE *f, const char *path, size_t max_bytes, char **text, size_t *len, ddp_err *err)
{
    for (size_t cap = first_cap(f, max_bytes);; cap = cap > max_bytes / 2 ? max_bytes + 1 : 2 * cap) {
        char *grown = realloc(*text, cap + 1); /* + 1: the NUL */
        if (!grown)
            return ddp_fail(err, DDP_ERUNTIME, "%s: out of memory for %zu bytes", path, cap + 1);
        *text = grown;
        *len += fread(*text + *len, 1, cap - *len, f);
        if (ferror(f))
            return ddp_fail(err, DDP_ERUNTIME, "%s: cannot read: %s", path, strerror(errno));
        if (*len > max_bytes)
            return ddp_fail(err, DDP_EUSAGE, "%s: larger than %zu bytes", path, max_bytes);
        if (*len < cap) { /* the end of the file */
            (*text)[*len] = '\0';
            return DDP_OK;
        }
    }
}

int read_whole(FILE *f, const char *path, size_t max_bytes, char **text, size_t *len, ddp_err *err)
{
    *text = NULL;
    *len = 0;
    int rc = read_into(f, path, max_bytes, text, len, err);
    if (rc != DDP_OK) {
        free(*text);
        *text = NULL;
        *len = 0;
    }
    return rc;
}
