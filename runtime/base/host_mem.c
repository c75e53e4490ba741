/* host_mem.c — VmRSS and VmHWM from /proc/self/status, the peak's reset through
 * /proc/self/clear_refs, and madvise for mapped pages a reader is done with (see host_mem.h). Must
 * not allocate or log. */
#include "host_mem.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

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

void host_mem_release_pages(const void *p, size_t n)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = ((uintptr_t)p + page - 1) / page * page, hi = ((uintptr_t)p + n) / page * page;
    if (hi > lo)
        (void)madvise((void *)lo, hi - lo, MADV_DONTNEED); /* advice: nothing to do if refused */
}
