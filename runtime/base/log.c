/* log.c — rank-0 info lines and rank-tagged warnings/errors. Holds only the rank identity
 * set by log_init; never exits or aborts. */
#include "log.h"
#include "host_name.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int g_rank = 0;
static char g_host[DDP_HOST_NAME_MAX] = "localhost";

void log_init(int rank, const char *host)
{
    g_rank = rank;
    if (host)
        snprintf(g_host, sizeof g_host, "%s", host);
}

void log_info(const char *fmt, ...)
{
    if (g_rank != 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    flockfile(stdout); /* one line whole, also from a checkpoint writer's thread */
    vfprintf(stdout, fmt, ap);
    va_end(ap);
    fputc('\n', stdout);
    fflush(stdout);
    funlockfile(stdout);
}

static void log_tagged(const char *level, const char *fmt, va_list ap)
{
    char line[16384]; /* a deadline's verdict, naming hosts whole (host_name.h), is read back by ddprun */
    vsnprintf(line, sizeof line, fmt, ap);
    fprintf(stderr, "[rank %d %s] %s%s\n", g_rank, g_host, level, line);
    fflush(stderr);
}

void log_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_tagged("warning: ", fmt, ap);
    va_end(ap);
}

void log_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_tagged("error: ", fmt, ap);
    va_end(ap);
}
