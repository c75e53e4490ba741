/* host_mem.h — this process's resident memory as Linux reports it (/proc/self/status), for the
 * start of a job that must not hold a whole model on any rank to say what a phase cost. Values
 * are KiB, or -1 where /proc is not there to read (another OS, a restricted container); and giving
 * back the pages of a file mapping a reader is done with. Must not allocate, log or fail a job: a
 * missing reading is a missing number, not an error. */
#ifndef DDP_HOST_MEM_H
#define DDP_HOST_MEM_H

#include <stddef.h>
#include <stdint.h>

/* Resident now (VmRSS), KiB. */
int64_t host_mem_rss_kib(void);
/* The resident peak (VmHWM) since the process started or since host_mem_reset_peak, KiB. */
int64_t host_mem_peak_kib(void);
/* The pages that lie wholly inside [p, p + n) of a read-only file mapping leave this process's
 * resident memory (madvise MADV_DONTNEED: read from the file again if touched again); advice, so
 * nothing happens where it is refused. */
void host_mem_release_pages(const void *p, size_t n);
/* Starts a new peak from what is resident now (Linux 4.0's clear_refs "5"); 0, or -1 if refused. */
int host_mem_reset_peak(void);

#endif
