/* cudaemu_race_report.cpp — the words of the race checks' reports (cudaemu_race_report.h): which
 * byte of which shared-memory object or device allocation, which threads or blocks did what where
 * (the emulator's site, or the kernel's instruction with the addr2line line that finds it), and why
 * nothing orders them. Each ends the process through die_in_kernel. Must not decide what is a
 * hazard: cudaemu_race.cpp and cudaemu_global_race.cpp do. */
#include "cudaemu_race_report.h"

#include "cudaemu_internal.h"

#include <dlfcn.h>
#include <stdio.h>

namespace ddp_cudaemu {

namespace {

/* Where the access was made: the emulator's site, or the instruction in the executable. */
void describe_site(char *out, size_t cap, const char *what, const char *file, int line, const void *pc)
{
    if (!what)
        what = "the load or store";
    if (file) {
        snprintf(out, cap, "%s at %s:%d", what, file, line);
        return;
    }
    Dl_info info;
    if (pc && dladdr(pc, &info) && info.dli_fname) {
        uintptr_t off = (uintptr_t)pc - (uintptr_t)info.dli_fbase;
        snprintf(out, cap, "%s at %s+0x%zx (addr2line -f -C -e %s 0x%zx)", what, info.dli_fname, (size_t)off,
                 info.dli_fname, (size_t)off);
    } else {
        snprintf(out, cap, "%s", what);
    }
}

/* What each race_access_kind does, for the reports. */
const char *const access_verbs[] = {"reads it", "writes it", "updates it atomically"};

/* Which shared-memory byte: "dynamic shared memory, byte N" or the static object's address and size. */
void describe_byte(char *out, size_t cap, const shadow_range &r, const char *p)
{
    if (r.dynamic)
        snprintf(out, cap, "dynamic shared memory, byte %zu", (size_t)(p - r.lo));
    else
        snprintf(out, cap, "static __shared__ object %p (%zu bytes), byte %zu", (const void *)r.lo, r.bytes,
                 (size_t)(p - r.lo));
}

/* What every report of an access to byte p of r says: where the access was made, which byte, and by
 * which thread (the running one). */
struct access_context {
    char site[512], where[128];
    int self;
    access_context(const shadow_range &r, const char *p, const char *what, const char *file, int line,
                   const void *pc)
        : self(race_running_thread())
    {
        describe_site(site, sizeof site, what, file, line, pc);
        describe_byte(where, sizeof where, r, p);
    }
};

[[noreturn]] void end_with(const char *title, const char *detail)
{
    race_leave(); /* the report itself must not recurse */
    die_in_kernel(title, detail);
}

} // namespace

[[noreturn]] void report(const shadow_range &r, const char *p, const char *kind, int other, int other_warp,
                         const char *earlier, race_access_kind how, const char *what, const char *file, int line,
                         const void *pc)
{
    const access_context c(r, p, what, file, line, pc);
    char who[64], detail[1024];
    if (other_warp == other / 32)
        snprintf(who, sizeof who, "thread %d (warp %d)", other, other_warp);
    else
        snprintf(who, sizeof who, "a thread of warp %d", other_warp);
    snprintf(detail, sizeof detail,
             "%s hazard on %s: thread %d (warp %d) %s (%s) where %s %s, and no __syncthreads, named barrier "
             "or mbarrier wait orders them", kind, c.where, c.self, c.self / 32, access_verbs[how], c.site, who,
             earlier);
    end_with("shared-memory race", detail);
}

/* An access to a byte a cp.async of thread `issuer` is still copying into. */
[[noreturn]] void report_in_flight(const shadow_range &r, const char *p, int issuer, race_access_kind how,
                                   const char *what, const char *file, int line, const void *pc)
{
    const access_context c(r, p, what, file, line, pc);
    char detail[1024];
    snprintf(detail, sizeof detail,
             "%s: thread %d (warp %d) %s (%s) while a cp.async of thread %d (warp %d) into it is in flight (no "
             "cp.async.wait_group of that thread has landed it): on a GPU the copy may land before, during or "
             "after this access", c.where, c.self, c.self / 32, access_verbs[how], c.site, issuer, issuer / 32);
    end_with("shared-memory race", detail);
}

[[noreturn]] void report_lanes(const shadow_range &r, const char *p, const char *kind, int other, bool other_wrote,
                               race_access_kind how, const char *what, const char *file, int line, const void *pc)
{
    const access_context c(r, p, what, file, line, pc);
    char detail[1536];
    snprintf(detail, sizeof detail,
             "%s hazard on %s: thread %d (warp %d, lane %d) %s (%s) where thread %d (warp %d, lane %d) "
             "%s it, and nothing orders that lane's access: no __syncwarp or bar.sync both lanes took part in "
             "(or chain of them, each with a lane of the one before), and no release that lane made, or made by "
             "a lane such syncs led to from it, was acquired (an arrival by one lane releases only what that "
             "lane has ordered before it)", kind, c.where, c.self, c.self / 32,
             c.self % 32, access_verbs[how], c.site, other, other / 32, other % 32, other_wrote ? "wrote" : "read");
    end_with("shared-memory race", detail);
}

/* An access through the async proxy to a byte whose last write came through the generic proxy with
 * no fence.proxy.async of its writer since, or none that happens before the access. */
[[noreturn]] void report_proxies(const shadow_range &r, const char *p, int writer, bool fenced_late,
                                 race_access_kind how, const char *what, const char *file, int line)
{
    const access_context c(r, p, what, file, line, nullptr);
    char detail[2048];
    snprintf(detail, sizeof detail,
             "proxy hazard on %s: thread %d (warp %d) %s through the async proxy (%s) where thread %d (warp %d) "
             "wrote it through the generic proxy (a store or cp.async), and %s: on a GPU the async proxy may not "
             "see the write, whatever barrier orders the two threads", c.where, c.self, c.self / 32,
             access_verbs[how], c.site, writer, writer / 32,
             fenced_late ? "its fence.proxy.async after that write does not happen before this access (a fence "
                           "takes effect in its own thread; it must precede the barrier or arrival that orders them)"
                         : "that thread executed no fence.proxy.async since");
    end_with("shared-memory proxy hazard", detail);
}

[[noreturn]] __attribute__((noinline)) void report_host_access(const void *p, size_t bytes, bool write,
                                                               const void *pc)
{
    char site[512], detail[1024];
    describe_site(site, sizeof site, nullptr, nullptr, 0, pc);
    snprintf(detail, sizeof detail,
             "thread %d of the block %s %zu bytes at %p (%s), which is host memory: not a device allocation, "
             "shared memory, a __device__ variable, the kernel's arguments or pinned host memory. On a GPU that "
             "is an illegal address (cudaErrorIllegalAddress)", race_running_thread(), write ? "writes" : "reads",
             bytes, p, site);
    end_with("kernel access to host memory", detail);
}

[[noreturn]] __attribute__((noinline)) void report_outside_shared(const memory_range &guard, const void *p,
                                                                  size_t bytes, bool write, const char *what,
                                                                  const char *file, int line, const void *pc)
{
    char site[512], detail[1024];
    describe_site(site, sizeof site, what, file, line, pc);
    const char *g = static_cast<const char *>(guard.addr), *c = static_cast<const char *>(p);
    long off = (long)(c - g);
    snprintf(detail, sizeof detail,
             "thread %d of the block %s %zu bytes at %p (%s), %s byte %ld of the %zu-byte guard after a static "
             "__shared__ array: past that array's end or before the next one's start. On a GPU that %s another "
             "array's bytes or faults (compute-sanitizer's memcheck: an invalid __shared__ %s)",
             race_running_thread(), write ? "writes" : "reads", bytes, p, site, off < 0 ? "ending at" : "at",
             off < 0 ? (long)(c + bytes - g) - 1 : off, guard.bytes, write ? "corrupts" : "reads",
             write ? "write" : "read");
    end_with("kernel access outside its __shared__ array", detail);
}

[[noreturn]] __attribute__((noinline)) void report_outside_allocation(const memory_range &a, const void *p,
                                                                      size_t bytes, bool write, const void *pc)
{
    char site[512], detail[1024];
    describe_site(site, sizeof site, nullptr, nullptr, 0, pc);
    const char *lo = static_cast<const char *>(a.addr), *c = static_cast<const char *>(p);
    bool before = c < lo;
    size_t off = before ? (size_t)(lo - c) : (size_t)(c + bytes - lo) - a.bytes;
    snprintf(detail, sizeof detail,
             "thread %d of the block %s %zu bytes at %p (%s), %s %zu byte(s) %s a %zu-byte cudaMalloc allocation "
             "at %p. On a GPU that %s whatever lies there (compute-sanitizer's memcheck: an invalid __global__ %s)",
             race_running_thread(), write ? "writes" : "reads", bytes, p, site, before ? "starting" : "ending", off,
             before ? "before the start of" : "past the end of", a.bytes, a.addr, write ? "corrupts" : "reads",
             write ? "write" : "read");
    end_with("kernel access outside its allocation", detail);
}

/* A kernel's access of `bytes` at p whose type promises alignment to its size, made at pc: a GPU
 * requires every access to be so aligned (it faults with cudaErrorMisalignedAddress), an x86 CPU
 * does not, so the emulator asks. */
[[noreturn]] __attribute__((noinline)) void report_misaligned(const void *p, size_t bytes, race_access_kind how,
                                                              const void *pc)
{
    char site[512], detail[768];
    describe_site(site, sizeof site, nullptr, nullptr, 0, pc);
    snprintf(detail, sizeof detail, "thread %d %s %zu bytes at %p, which is not %zu-byte aligned (%s): a GPU "
             "faults on it (misaligned address)", race_running_thread(), how == RACE_READ ? "reads" : "writes",
             bytes, p, bytes, site);
    end_with("misaligned address", detail);
}

[[noreturn]] void report_blocks(const memory_range &allocation, const char *p, const char *kind, uint32_t block,
                                uint32_t other, bool other_wrote, bool write, const char *what, const char *file,
                                int line, const void *pc)
{
    char site[512], detail[1024];
    describe_site(site, sizeof site, what, file, line, pc);
    snprintf(detail, sizeof detail,
             "%s race on byte %zu of the device allocation at %p (%zu bytes): block %u %s it (%s) where block %u "
             "of the same grid %s it, and nothing orders two blocks of a grid (a GPU runs them in any order and "
             "at once)", kind, (size_t)(p - (const char *)allocation.addr), allocation.addr, allocation.bytes, block,
             write ? "writes" : "reads", site, other, other_wrote ? "wrote" : "read");
    die_in_kernel("global-memory race between blocks", detail);
}

[[noreturn]] void report_threads(const memory_range &allocation, const char *p, const char *kind, int other,
                                 bool other_wrote, bool write, const char *what, const char *file, int line,
                                 const void *pc)
{
    char site[512], detail[1536];
    const int self = race_running_thread();
    describe_site(site, sizeof site, what, file, line, pc);
    snprintf(detail, sizeof detail,
             "%s race on byte %zu of the device allocation at %p (%zu bytes): thread %d (warp %d, lane %d) %s it "
             "(%s) where thread %d (warp %d, lane %d) of the same block %s it, and no __syncthreads, named barrier "
             "or mbarrier wait, or __syncwarp both lanes took part in (or chain of them), orders them (a GPU's "
             "threads see each other's global stores only through one)", kind,
             (size_t)(p - (const char *)allocation.addr), allocation.addr, allocation.bytes, self, self / 32,
             self % 32, write ? "writes" : "reads", site, other, other / 32, other % 32,
             other_wrote ? "wrote" : "read");
    end_with("global-memory race between threads of a block", detail);
}

} /* namespace ddp_cudaemu */
