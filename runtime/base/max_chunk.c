/* max_chunk.c — max_chunk_read: parses DDP_COMM_MAX_CHUNK. */
#include "max_chunk.h"

#include <limits.h>
#include <stdlib.h>

int max_chunk_read(size_t *elems, ddp_err *err)
{
    const char *s = getenv("DDP_COMM_MAX_CHUNK");
    *elems = INT_MAX;
    if (!s || !*s)
        return DDP_OK;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || v == 0 || s[0] == '-')
        return ddp_fail(err, DDP_EUSAGE, "DDP_COMM_MAX_CHUNK: expected a positive element count, got \"%s\"", s);
    *elems = v < INT_MAX ? (size_t)v : INT_MAX;
    return DDP_OK;
}
