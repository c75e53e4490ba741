/* cudaemu_race_report.h — between the checks of kernels' memory accesses (cudaemu_race.cpp,
 * cudaemu_global_race.cpp, cudaemu_kernel_memory.cpp) and their reports (cudaemu_race_report.cpp):
 * the reports, each of which ends the process through die_in_kernel (a shared-memory byte is named by
 * its object, cudaemu_race_shadow.h's shadow_range). Only those files include it. */
#ifndef DDP_CUDAEMU_RACE_REPORT_H
#define DDP_CUDAEMU_RACE_REPORT_H

#include "cudaemu_internal.h"
#include "cudaemu_kernel.h"
#include "cudaemu_race_shadow.h"

#include <stddef.h>
#include <stdint.h>

namespace ddp_cudaemu {

/* The running thread's index in its block, or -1 between fibers. */
int race_running_thread();

/* When and by whom an access to device memory was made, for the check between one block's threads
 * (cudaemu_global_race.cpp): 1 + the thread (0: nobody), its barrier epoch (unique to a block and
 * the barriers it passed, so a stamp of another block or before a __syncthreads orders nothing
 * more), its warp's clock and lane syncs then. */
struct race_stamp {
    uint32_t epoch, clock, gen;
    uint32_t thread;
};
/* The running thread's stamp now; nobody's between fibers. */
race_stamp race_now();
/* Whether an access stamped `earlier` happens before the running thread's next one, by the shared-
 * memory check's rules: nobody's, an older epoch, its own thread, or ordered by what the running
 * thread acquired and the lane syncs. */
bool race_ordered(race_stamp earlier);

/* Byte p of r: the running thread's access (`how`, `what` at file:line, or the instruction at pc)
 * races with thread `other`'s (of warp `other_warp`), which `earlier` says ("read it", ...). */
[[noreturn]] void report(const shadow_range &r, const char *p, const char *kind, int other, int other_warp,
                         const char *earlier, race_access_kind how, const char *what, const char *file, int line,
                         const void *pc);
/* ... with a cp.async of thread `issuer` still copying into it. */
[[noreturn]] void report_in_flight(const shadow_range &r, const char *p, int issuer, race_access_kind how,
                                   const char *what, const char *file, int line, const void *pc);
/* ... with the access of another lane of its warp that nothing orders before it. */
[[noreturn]] void report_lanes(const shadow_range &r, const char *p, const char *kind, int other, bool other_wrote,
                               race_access_kind how, const char *what, const char *file, int line, const void *pc);
/* ... through the async proxy, with thread `writer`'s write through the generic proxy, which that
 * thread fenced after nothing ordered before this access (fenced_late) or did not fence at all. */
[[noreturn]] void report_proxies(const shadow_range &r, const char *p, int writer, bool fenced_late,
                                 race_access_kind how, const char *what, const char *file, int line);
/* Byte p of a device allocation: block `block`'s access (`write` or a read; `what` at file:line, or
 * the instruction at pc) races with block `other`'s of the same grid, which wrote it (other_wrote)
 * or read it (cudaemu_global_race.cpp). */
[[noreturn]] void report_blocks(const memory_range &allocation, const char *p, const char *kind, uint32_t block,
                                uint32_t other, bool other_wrote, bool write, const char *what, const char *file,
                                int line, const void *pc);
/* Byte p of a device allocation: the running thread's access (as for report_blocks) races with
 * thread `other`'s of the same block, which wrote it (other_wrote) or read it, and which nothing
 * orders before it (cudaemu_global_race.cpp). */
[[noreturn]] void report_threads(const memory_range &allocation, const char *p, const char *kind, int other,
                                 bool other_wrote, bool write, const char *what, const char *file, int line,
                                 const void *pc);
/* A kernel's access of `bytes` at p (a write or a read, at pc) to host memory. */
[[noreturn]] void report_host_access(const void *p, size_t bytes, bool write, const void *pc);
/* A kernel's access into the guard after a static __shared__ object. */
[[noreturn]] void report_outside_shared(const memory_range &guard, const void *p, size_t bytes, bool write,
                                        const char *what, const char *file, int line, const void *pc);
/* A kernel's access of `bytes` at p (at pc) that is not wholly inside device allocation a's data. */
[[noreturn]] void report_outside_allocation(const memory_range &a, const void *p, size_t bytes, bool write,
                                            const void *pc);
/* A kernel's access of `bytes` at p, not aligned to its size, made at pc. */
[[noreturn]] void report_misaligned(const void *p, size_t bytes, race_access_kind how, const void *pc);

} /* namespace ddp_cudaemu */

#endif
