/* cudart_memory.cpp — the CUDA runtime shim's memory part: allocation, copies, fills, and the
 * memory checks a GPU's MMU and compute-sanitizer's memcheck would make.
 *
 * Emulated device memory is host memory, registered so that every copy, fill and cuBLAS call can
 * check that a "device" pointer really came from cudaMalloc, that the range fits its allocation,
 * and that the copy direction matches (on a GPU each of those bugs is an illegal address or silent
 * garbage). Each device allocation has pages of its own between guard pages, and guard bytes
 * around its data that every op's end checks: an access outside it is reported naming the kernel
 * or call. It is PROT_NONE except while queued work runs, so host code dereferencing device
 * memory faults, with a report. New device allocations are filled with 0xFF (NaN), so reading
 * memory nothing wrote shows up; freed ones are unmapped. Copies and fills are queued on their
 * stream (cudaemu_streams.cpp) with CUDA's rules for pageable host memory; cudaFree waits for the
 * device, as CUDA's does.
 * C ABI exactly as declared by cuda_runtime_api.h; no device/stream/event logic here
 * (cudart_device.cpp) and no error state (cudart_error.cpp). */
#include "cudaemu_internal.h"

#include <cuda_runtime_api.h>
#include <map>
#include <memory>
#include <mutex>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

namespace ddp_cudaemu {

/* Device allocations are mapped on their own pages: [guard page][guard bytes | data | slack]
 * [guard page], the data placed last so that its 256-byte-rounded end meets the trailing guard
 * page. Guard bytes (GUARD_BYTES before the data) and the rounding slack after it hold a pattern
 * checked after every op; the guard pages fault. */
enum { GUARD_BYTES = 256, ALIGN = 256 };
static const unsigned char GUARD_PATTERN[4] = {0xff, 0xa5, 0xa5, 0xff}; /* a NaN in float and double */

struct allocation {
    size_t bytes;
    alloc_kind kind;
    int device;
    char *map;           /* device: the mapping, guard pages included */
    size_t map_bytes;
    bool freeing;        /* cudaFreeAsync queued: live until its stream reaches the free */
};
/* Never destroyed: the emulator's progress thread may still use them while the process exits. */
static std::mutex &registry_lock = *new std::mutex;
static auto &registry = *new std::map<uintptr_t, allocation>;
static bool device_memory_open;
static size_t page_bytes;

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

/* alloc_lookup with registry_lock held. */
static bool lookup_locked(const void *p, size_t bytes, alloc_kind *kind, size_t *overrun_bytes)
{
    uintptr_t a = reinterpret_cast<uintptr_t>(p);
    *overrun_bytes = 0;
    auto it = registry.upper_bound(a);
    if (it == registry.begin())
        return false;
    --it;
    uintptr_t end = it->first + it->second.bytes;
    if (a >= end && !(a == it->first && it->second.bytes == 0))
        return false;
    *kind = it->second.kind;
    if (a + bytes > end) {
        *overrun_bytes = a + bytes - end;
        return false;
    }
    return true;
}

bool alloc_lookup(const void *p, size_t bytes, alloc_kind *kind, size_t *overrun_bytes)
{
    std::lock_guard<std::mutex> hold(registry_lock);
    return lookup_locked(p, bytes, kind, overrun_bytes);
}

std::vector<memory_range> device_allocations()
{
    std::vector<memory_range> out;
    std::lock_guard<std::mutex> hold(registry_lock);
    for (const auto &[addr, al] : registry)
        if (al.kind == ALLOC_DEVICE)
            out.push_back(memory_range{reinterpret_cast<void *>(addr), al.bytes});
    return out;
}

bool kernel_reachable(const void *p, size_t bytes)
{
    alloc_kind kind;
    size_t overrun = 0;
    std::lock_guard<std::mutex> hold(registry_lock);
    return lookup_locked(p, bytes, &kind, &overrun) && kind == ALLOC_PINNED_HOST;
}

bool device_allocation_beside(const void *p, memory_range *allocation)
{
    std::lock_guard<std::mutex> hold(registry_lock);
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    auto next = registry.upper_bound(a); /* a in its leading guard, or in the previous one's slack or guard */
    for (auto it : {next, next == registry.begin() ? registry.end() : std::prev(next)})
        if (it != registry.end() && it->second.kind == ALLOC_DEVICE &&
            a - reinterpret_cast<uintptr_t>(it->second.map) < it->second.map_bytes) {
            *allocation = memory_range{reinterpret_cast<void *>(it->first), it->second.bytes};
            return true;
        }
    return false;
}

const char *device_range_problem(const void *p, size_t bytes)
{
    alloc_kind kind;
    size_t overrun = 0;
    if (alloc_lookup(p, bytes, &kind, &overrun) && kind == ALLOC_DEVICE)
        return nullptr;
    return overrun ? "past the end of a device allocation" : "not in device memory";
}

/* The pages between the guard pages. */
static char *body(const allocation &al) { return al.map + page_bytes; }
static size_t body_bytes(const allocation &al) { return al.map_bytes - 2 * page_bytes; }

static void protect(const allocation &al, bool open)
{
    if (mprotect(body(al), body_bytes(al), open ? PROT_READ | PROT_WRITE : PROT_NONE) != 0) {
        perror("cudaemu: mprotect of device memory");
        abort();
    }
}

static void fill_guard(unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = GUARD_PATTERN[i % 4];
}

/* Index of the first guard byte in [p, p+n) that changed, or -1 (fill_guard's pattern starts at p);
 * compared four bytes at a time, as every op's end checks them all. */
static ptrdiff_t changed_guard(const unsigned char *p, size_t n)
{
    uint32_t word;
    memcpy(&word, GUARD_PATTERN, 4);
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        uint32_t got;
        memcpy(&got, p + i, 4);
        if (got != word)
            break;
    }
    for (; i < n; i++)
        if (p[i] != GUARD_PATTERN[i % 4])
            return (ptrdiff_t)i;
    return -1;
}

static void *map_device(size_t bytes, allocation *al)
{
    if (!page_bytes)
        page_bytes = (size_t)sysconf(_SC_PAGESIZE);
    size_t rounded = round_up(bytes, ALIGN), inner = round_up(GUARD_BYTES + rounded, page_bytes);
    void *m = mmap(nullptr, inner + 2 * page_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
        return nullptr;
    *al = allocation{bytes, ALLOC_DEVICE, -1, static_cast<char *>(m), inner + 2 * page_bytes, false};
    protect(*al, true);
    unsigned char *data = reinterpret_cast<unsigned char *>(body(*al)) + inner - rounded;
    fill_guard(reinterpret_cast<unsigned char *>(body(*al)), inner - rounded);
    memset(data, 0xff, bytes); /* NaN: reading memory nothing wrote is visible */
    fill_guard(data + bytes, rounded - bytes);
    return data;
}

static cudaError_t register_new(void **out, size_t bytes, alloc_kind kind, const char *fn)
{
    if (!out)
        return fail(cudaErrorInvalidValue, "%s: the output pointer is NULL", fn);
    *out = nullptr;
    int device = kind == ALLOC_DEVICE ? calling_device(fn) : 0;
    if (device < 0)
        return cudaErrorInvalidDevice;
    if (bytes == 0)
        return cudaSuccess;
    install_fault_report();
    allocation al = {bytes, kind, device, nullptr, 0, false};
    void *p = nullptr;
    if (kind == ALLOC_DEVICE) {
        p = map_device(bytes, &al);
        al.device = device;
    } else if ((p = aligned_alloc(ALIGN, round_up(bytes, ALIGN)))) {
        memset(p, 0xff, bytes);
    }
    if (!p)
        return fail(cudaErrorMemoryAllocation, "%s: out of memory allocating %zu bytes", fn, bytes);
    std::lock_guard<std::mutex> hold(registry_lock);
    if (kind == ALLOC_DEVICE && !device_memory_open)
        protect(al, false);
    registry[reinterpret_cast<uintptr_t>(p)] = al;
    *out = p;
    return cudaSuccess;
}

static void release(void *p, const allocation &al)
{
    if (al.kind == ALLOC_DEVICE)
        munmap(al.map, al.map_bytes); /* a later use faults */
    else
        free(p);
}

/* Removes p from the registry; false (reported) when it is not a live allocation of that kind. */
static bool unregister(void *p, alloc_kind kind, const char *fn, allocation *out)
{
    std::lock_guard<std::mutex> hold(registry_lock);
    auto it = registry.find(reinterpret_cast<uintptr_t>(p));
    if (it == registry.end() || it->second.kind != kind || it->second.freeing) {
        fail(kind == ALLOC_DEVICE ? cudaErrorInvalidDevicePointer : cudaErrorInvalidValue,
             "%s(%p): not the start of a live %s allocation", fn, p,
             kind == ALLOC_DEVICE ? "cudaMalloc" : "cudaMallocHost");
        return false;
    }
    *out = it->second;
    registry.erase(it);
    return true;
}

/* cudaFree and cudaFreeHost wait for the device first, as CUDA's do. */
static cudaError_t free_now(void *p, alloc_kind kind, const char *fn, const void *caller)
{
    if (!p)
        return cudaSuccess;
    count_blocking_call(fn, caller);
    synchronize_device(-1, fn);
    allocation al;
    if (!unregister(p, kind, fn, &al))
        return kind == ALLOC_DEVICE ? cudaErrorInvalidDevicePointer : cudaErrorInvalidValue;
    release(p, al);
    return cudaSuccess;
}

void device_memory_access(bool open)
{
    if (!open)
        install_fault_report(); /* still first in line when host code next touches device memory */
    std::lock_guard<std::mutex> hold(registry_lock);
    if (device_memory_open == open)
        return;
    device_memory_open = open;
    for (const auto &kv : registry)
        if (kv.second.kind == ALLOC_DEVICE)
            protect(kv.second, open);
}

[[noreturn]] static void report_out_of_bounds(const char *what, uintptr_t data, const allocation &al,
                                             ptrdiff_t offset)
{
    bool before = offset < 0;
    fprintf(stderr, "cudaemu: %s wrote outside its allocation: byte %td %s a %zu-byte cudaMalloc allocation at "
            "%p (on a GPU: an illegal address, or silently corrupted memory)\n", what,
            before ? -offset : offset - (ptrdiff_t)al.bytes + 1, before ? "before the start of" : "past the end of",
            al.bytes, reinterpret_cast<void *>(data));
    fflush(stderr);
    abort();
}

void check_allocation_bounds(const char *what)
{
    std::lock_guard<std::mutex> hold(registry_lock);
    for (const auto &kv : registry) {
        const allocation &al = kv.second;
        if (al.kind != ALLOC_DEVICE)
            continue;
        const unsigned char *data = reinterpret_cast<const unsigned char *>(kv.first);
        size_t slack = round_up(al.bytes, ALIGN) - al.bytes;
        /* every guard byte before the data (up to a page and GUARD_BYTES: a write there corrupts the
         * allocation before this one on a GPU); the pattern continues from the body's start */
        size_t lead = (size_t)(data - reinterpret_cast<const unsigned char *>(body(al)));
        ptrdiff_t before = changed_guard(reinterpret_cast<const unsigned char *>(body(al)), lead);
        if (before >= 0)
            report_out_of_bounds(what, kv.first, al, before - (ptrdiff_t)lead);
        ptrdiff_t past = changed_guard(data + al.bytes, slack);
        if (past >= 0)
            report_out_of_bounds(what, kv.first, al, (ptrdiff_t)al.bytes + past);
    }
}

void report_device_memory_fault(const void *addr)
{
    /* in a signal handler: no lock (the process is about to end); snprintf is good enough here */
    uintptr_t a = reinterpret_cast<uintptr_t>(addr);
    for (const auto &kv : registry) {
        const allocation &al = kv.second;
        uintptr_t lo = reinterpret_cast<uintptr_t>(al.map);
        if (al.kind != ALLOC_DEVICE || a < lo || a >= lo + al.map_bytes)
            continue;
        const char *op = op_running_on_this_thread();
        char msg[640];
        ptrdiff_t off = (ptrdiff_t)(a - kv.first);
        int n;
        if (off >= 0 && (size_t)off < al.bytes && !op)
            n = snprintf(msg, sizeof msg, "cudaemu: host code dereferenced device memory at %p (byte %td of a %zu-byte "
                         "cudaMalloc allocation at %p): device memory is not host-accessible; copy it with "
                         "cudaMemcpy\n", addr, off, al.bytes, reinterpret_cast<void *>(kv.first));
        else
            n = snprintf(msg, sizeof msg, "cudaemu: %s accessed %p, byte %td %s a %zu-byte cudaMalloc allocation at "
                         "%p (on a GPU: an illegal address)\n", op ? op : "host code", addr,
                         off < 0 ? -off : off - (ptrdiff_t)al.bytes + 1,
                         off < 0 ? "before the start of" : "past the end of",
                         al.bytes, reinterpret_cast<void *>(kv.first));
        if (n > 0 && write(2, msg, (size_t)n) < 0)
            abort();
        abort();
    }
}

/* Checks that [p, p+bytes) is device memory (want_device) or not device memory (host). */
static cudaError_t check_side(const void *p, size_t bytes, bool want_device, const char *fn, const char *arg)
{
    alloc_kind kind = ALLOC_DEVICE;
    size_t overrun = 0;
    bool inside = alloc_lookup(p, bytes, &kind, &overrun);
    if (!p)
        return fail(cudaErrorInvalidValue, "%s: %s is NULL", fn, arg);
    if (overrun)
        return fail(cudaErrorInvalidValue, "%s: %s %p + %zu bytes runs %zu bytes past the end of its allocation",
                    fn, arg, p, bytes, overrun);
    bool is_device = inside && kind == ALLOC_DEVICE;
    if (want_device && !is_device)
        return fail(cudaErrorInvalidValue, "%s: %s %p is not device memory from cudaMalloc", fn, arg, p);
    if (!want_device && is_device)
        return fail(cudaErrorInvalidValue, "%s: %s %p is device memory but the copy kind says host", fn, arg, p);
    return cudaSuccess;
}

static bool is_kind(const void *p, alloc_kind want)
{
    alloc_kind kind;
    size_t overrun;
    return (alloc_lookup(p, 1, &kind, &overrun) || overrun) && kind == want;
}

enum copy_mode { COPY_ASYNC, COPY_SYNC };

/* Queues the copy on stream. The host side of a copy is read or written when the copy runs if it
 * is pinned; pageable memory behaves as CUDA documents: a pageable source is read before the call
 * returns, and a copy into pageable memory returns only once it is done (the host blocks). */
static cudaError_t copy(void *dst, const void *src, size_t count, cudaMemcpyKind kind, cudaStream_t stream,
                        copy_mode mode, const char *fn, const void *caller)
{
    if (!stream_is_valid(stream))
        return cudaErrorInvalidResourceHandle;
    if (count == 0)
        return cudaSuccess;
    bool dst_dev, src_dev;
    switch (kind) {
    case cudaMemcpyHostToHost: dst_dev = src_dev = false; break;
    case cudaMemcpyHostToDevice: dst_dev = true; src_dev = false; break;
    case cudaMemcpyDeviceToHost: dst_dev = false; src_dev = true; break;
    case cudaMemcpyDeviceToDevice: dst_dev = src_dev = true; break;
    case cudaMemcpyDefault: dst_dev = is_kind(dst, ALLOC_DEVICE); src_dev = is_kind(src, ALLOC_DEVICE); break;
    default: return fail(cudaErrorInvalidMemcpyDirection, "%s: invalid copy kind %d", fn, (int)kind);
    }
    cudaError_t err = check_side(dst, count, dst_dev, fn, "dst");
    if (err == cudaSuccess)
        err = check_side(src, count, src_dev, fn, "src");
    if (err != cudaSuccess)
        return err;
    bool pageable_src = !src_dev && !is_kind(src, ALLOC_PINNED_HOST);
    bool pageable_dst = !dst_dev && !is_kind(dst, ALLOC_PINNED_HOST);
    std::function<void()> work = [dst, src, count] { memmove(dst, src, count); };
    if (pageable_src && mode == COPY_ASYNC && !pageable_dst) {
        auto snapshot = std::make_shared<std::vector<char>>(static_cast<const char *>(src),
                                                           static_cast<const char *>(src) + count);
        work = [dst, snapshot] { memcpy(dst, snapshot->data(), snapshot->size()); };
    }
    queued_at done;
    err = enqueue(mode == COPY_SYNC ? nullptr : stream, fn, std::move(work), 0, fn, &done);
    if (err != cudaSuccess || !(mode == COPY_SYNC || pageable_dst))
        return err;
    count_blocking_call(fn, caller);
    return synchronize_point(done, fn);
}

static cudaError_t fill(void *p, int value, size_t count, cudaStream_t stream, const char *fn)
{
    if (!stream_is_valid(stream))
        return cudaErrorInvalidResourceHandle;
    if (count == 0)
        return cudaSuccess;
    cudaError_t err = check_side(p, count, true, fn, "devPtr");
    if (err != cudaSuccess)
        return err;
    return enqueue(stream, fn, [p, value, count] { memset(p, value, count); }, 0, fn, nullptr);
}

} /* namespace ddp_cudaemu */

using namespace ddp_cudaemu;

extern "C" {

cudaError_t cudaMalloc(void **devPtr, size_t size) { return register_new(devPtr, size, ALLOC_DEVICE, "cudaMalloc"); }
cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t hStream)
{
    if (!stream_is_valid(hStream))
        return cudaErrorInvalidResourceHandle;
    return register_new(devPtr, size, ALLOC_DEVICE, "cudaMallocAsync");
}
cudaError_t cudaFree(void *devPtr) { return free_now(devPtr, ALLOC_DEVICE, "cudaFree", __builtin_return_address(0)); }

/* Freed in stream order: the memory stays valid (and checked) for the work queued before. */
cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t hStream)
{
    if (!stream_is_valid(hStream))
        return cudaErrorInvalidResourceHandle;
    if (!devPtr)
        return cudaSuccess;
    {
        std::lock_guard<std::mutex> hold(registry_lock);
        auto it = registry.find(reinterpret_cast<uintptr_t>(devPtr));
        if (it == registry.end() || it->second.kind != ALLOC_DEVICE || it->second.freeing)
            return fail(cudaErrorInvalidDevicePointer, "cudaFreeAsync(%p): not the start of a live cudaMalloc "
                        "allocation", devPtr);
        it->second.freeing = true;
    }
    return enqueue(hStream, "cudaFreeAsync", [devPtr] {
        allocation al;
        std::lock_guard<std::mutex> hold(registry_lock);
        auto it = registry.find(reinterpret_cast<uintptr_t>(devPtr));
        al = it->second;
        registry.erase(it);
        release(devPtr, al);
    }, 0, "cudaFreeAsync", nullptr);
}
cudaError_t cudaMallocHost(void **ptr, size_t size) { return register_new(ptr, size, ALLOC_PINNED_HOST, "cudaMallocHost"); }
cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
    if (flags & ~(unsigned)(cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined))
        return fail(cudaErrorInvalidValue, "cudaHostAlloc: unknown flags 0x%x", flags);
    return register_new(pHost, size, ALLOC_PINNED_HOST, "cudaHostAlloc");
}
cudaError_t cudaFreeHost(void *ptr)
{
    return free_now(ptr, ALLOC_PINNED_HOST, "cudaFreeHost", __builtin_return_address(0));
}

cudaError_t cudaHostGetDevicePointer(void **pDevice, void *pHost, unsigned int flags)
{
    alloc_kind kind;
    size_t overrun;
    if (!pDevice || flags != 0 || !alloc_lookup(pHost, 1, &kind, &overrun) || kind != ALLOC_PINNED_HOST)
        return fail(cudaErrorInvalidValue, "cudaHostGetDevicePointer(%p): not pinned host memory", pHost);
    *pDevice = pHost;
    return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attributes, const void *ptr)
{
    if (!attributes)
        return fail(cudaErrorInvalidValue, "cudaPointerGetAttributes: attributes is NULL");
    memset(attributes, 0, sizeof *attributes);
    uintptr_t a = reinterpret_cast<uintptr_t>(ptr);
    std::lock_guard<std::mutex> hold(registry_lock);
    auto it = registry.upper_bound(a);
    bool known = it != registry.begin() && (--it, a < it->first + it->second.bytes);
    attributes->type = !known ? cudaMemoryTypeUnregistered
                     : it->second.kind == ALLOC_DEVICE ? cudaMemoryTypeDevice : cudaMemoryTypeHost;
    attributes->device = known && it->second.kind == ALLOC_DEVICE ? it->second.device : 0;
    attributes->devicePointer = known ? const_cast<void *>(ptr) : nullptr;
    attributes->hostPointer = known && it->second.kind == ALLOC_PINNED_HOST ? const_cast<void *>(ptr) : nullptr;
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    return copy(dst, src, count, kind, nullptr, COPY_SYNC, "cudaMemcpy", __builtin_return_address(0));
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream)
{
    return copy(dst, src, count, kind, stream, COPY_ASYNC, "cudaMemcpyAsync", __builtin_return_address(0));
}
cudaError_t cudaMemcpyPeer(void *dst, int dstDevice, const void *src, int srcDevice, size_t count)
{
    (void)dstDevice;
    (void)srcDevice;
    return copy(dst, src, count, cudaMemcpyDeviceToDevice, nullptr, COPY_SYNC, "cudaMemcpyPeer",
                __builtin_return_address(0));
}
cudaError_t cudaMemcpyPeerAsync(void *dst, int dstDevice, const void *src, int srcDevice, size_t count,
                                cudaStream_t stream)
{
    (void)dstDevice;
    (void)srcDevice;
    return copy(dst, src, count, cudaMemcpyDeviceToDevice, stream, COPY_ASYNC, "cudaMemcpyPeerAsync",
                __builtin_return_address(0));
}

static cudaError_t copy_2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                           size_t height, cudaMemcpyKind kind, cudaStream_t stream, copy_mode mode, const char *fn,
                           const void *caller)
{
    if (width > dpitch || width > spitch)
        return fail(cudaErrorInvalidPitchValue, "%s: width %zu exceeds dpitch %zu or spitch %zu", fn, width,
                    dpitch, spitch);
    for (size_t row = 0; row < height; row++) {
        cudaError_t err = copy(static_cast<char *>(dst) + row * dpitch, static_cast<const char *>(src) + row * spitch,
                               width, kind, stream, mode, fn, caller);
        if (err != cudaSuccess)
            return err;
    }
    return cudaSuccess;
}
cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                         enum cudaMemcpyKind kind)
{
    return copy_2d(dst, dpitch, src, spitch, width, height, kind, nullptr, COPY_SYNC, "cudaMemcpy2D",
                   __builtin_return_address(0));
}
cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                              size_t height, enum cudaMemcpyKind kind, cudaStream_t stream)
{
    return copy_2d(dst, dpitch, src, spitch, width, height, kind, stream, COPY_ASYNC, "cudaMemcpy2DAsync",
                   __builtin_return_address(0));
}

/* Synchronous like cudaMemcpy: kernels queued before it see the old value. */
cudaError_t cudaMemcpyToSymbol(const void *symbol, const void *src, size_t count, size_t offset,
                               enum cudaMemcpyKind kind)
{
    if (!symbol || !src || (kind != cudaMemcpyHostToDevice && kind != cudaMemcpyDeviceToDevice &&
                            kind != cudaMemcpyDefault))
        return fail(cudaErrorInvalidValue, "cudaMemcpyToSymbol: NULL symbol/src or invalid kind %d", (int)kind);
    char *dst = static_cast<char *>(const_cast<void *>(symbol)) + offset;
    queued_at done;
    cudaError_t err = enqueue(nullptr, "cudaMemcpyToSymbol", [dst, src, count] { memcpy(dst, src, count); }, 0,
                              "cudaMemcpyToSymbol", &done);
    if (err != cudaSuccess)
        return err;
    count_blocking_call("cudaMemcpyToSymbol", __builtin_return_address(0));
    return synchronize_point(done, "cudaMemcpyToSymbol");
}

cudaError_t cudaMemset(void *devPtr, int value, size_t count) { return fill(devPtr, value, count, nullptr, "cudaMemset"); }
cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream)
{
    return fill(devPtr, value, count, stream, "cudaMemsetAsync");
}

} /* extern "C" */
