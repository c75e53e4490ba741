/* err.c — formatting of ddp_err messages. Owns nothing else; never prints. */
#include "err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int ddp_fail(ddp_err *e, int code, const char *fmt, ...)
{
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
        e->code = code;
        e->local = false;
    }
    return code;
}

int ddp_mark_local(ddp_err *e, int code)
{
    if (e)
        e->local = true;
    return code;
}

int ddp_prefix(ddp_err *e, const char *fmt, ...)
{
    if (!e)
        return DDP_ERUNTIME;
    char ctx[DDP_ERR_MSG], old[DDP_ERR_MSG];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx, sizeof ctx, fmt, ap);
    va_end(ap);
    memcpy(old, e->msg, sizeof old);
    /* a message longer than the buffer is cut, never overflowed */
    if (snprintf(e->msg, sizeof e->msg, "%s: %s", ctx, old) < 0)
        e->msg[0] = '\0';
    return e->code ? e->code : DDP_ERUNTIME;
}
