/* host_mem.c — VmRSS and VmHWM from /proc/self/status, and the peak's reset through
 * /proc/self/clear_refs (see host_mem.h). Must not allocate or log. */
#include "host_mem.h"

#include <stdio.h>
#include <string.h>

static int64_t status_kib(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    char line[256];
    long long kib = -1;
    size_t n = strlen(field);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, field, n) && line[n] == ':' && sscanf(line + n + 1, "%lld", &kib) == 1)
            break;
    fclose(f);
    return kib;
}

int64_t host_mem_rss_kib(void) { return status_kib("VmRSS"); }

int64_t host_mem_peak_kib(void) { return status_kib("VmHWM"); }

int host_mem_reset_peak(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f)
        return -1;
    int ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}
