/* cudart_memory.cpp — the CUDA runtime shim's memory part: allocation, copies, fills.
 *
 * Emulated device memory is host memory, but it is registered so that every copy, fill and
 * cuBLAS call can check that a "device" pointer really came from cudaMalloc, that the range fits
 * its allocation, and that the copy direction matches (on a GPU each of those bugs is an illegal
 * address or silent garbage). New device allocations are filled with 0xFF (NaN), so reading
 * memory nothing wrote shows up. Execution is synchronous, so Async variants copy at once.
 * C ABI exactly as declared by cuda_runtime_api.h; no device/stream/event logic here
 * (cudart_device.cpp) and no error state (cudart_error.cpp). */
#include "cudaemu_internal.h"

#include <cuda_runtime_api.h>
#include <map>
#include <mutex>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

namespace ddp_cudaemu {

struct allocation {
    size_t bytes;
    alloc_kind kind;
};
static std::mutex registry_lock;
static std::map<uintptr_t, allocation> registry;

bool alloc_lookup(const void *p, size_t bytes, alloc_kind *kind, size_t *overrun_bytes)
{
    uintptr_t a = reinterpret_cast<uintptr_t>(p);
    std::lock_guard<std::mutex> hold(registry_lock);
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

static cudaError_t register_new(void **out, size_t bytes, alloc_kind kind, const char *fn)
{
    if (!out)
        return fail(cudaErrorInvalidValue, "%s: the output pointer is NULL", fn);
    *out = nullptr;
    if (bytes == 0)
        return cudaSuccess;
    size_t rounded = (bytes + 255) / 256 * 256;
    void *p = aligned_alloc(256, rounded);
    if (!p)
        return fail(cudaErrorMemoryAllocation, "%s: out of memory allocating %zu bytes", fn, bytes);
    memset(p, 0xff, rounded); /* NaN: reading memory nothing wrote is visible */
    std::lock_guard<std::mutex> hold(registry_lock);
    registry[reinterpret_cast<uintptr_t>(p)] = allocation{bytes, kind};
    *out = p;
    return cudaSuccess;
}

static cudaError_t unregister_free(void *p, alloc_kind kind, const char *fn)
{
    if (!p)
        return cudaSuccess;
    std::lock_guard<std::mutex> hold(registry_lock);
    auto it = registry.find(reinterpret_cast<uintptr_t>(p));
    if (it == registry.end() || it->second.kind != kind)
        return fail(kind == ALLOC_DEVICE ? cudaErrorInvalidDevicePointer : cudaErrorInvalidValue,
                    "%s(%p): not the start of a live %s allocation", fn, p,
                    kind == ALLOC_DEVICE ? "cudaMalloc" : "cudaMallocHost");
    registry.erase(it);
    free(p);
    return cudaSuccess;
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

static bool is_device_memory(const void *p)
{
    alloc_kind kind;
    size_t overrun;
    return (alloc_lookup(p, 1, &kind, &overrun) || overrun) && kind == ALLOC_DEVICE;
}

static cudaError_t copy(void *dst, const void *src, size_t count, cudaMemcpyKind kind,
                        cudaStream_t stream, const char *fn)
{
    if (!stream_is_valid(stream))
        return fail(cudaErrorInvalidResourceHandle, "%s: stream %p is not a live stream", fn,
                    static_cast<void *>(stream));
    if (count == 0)
        return cudaSuccess;
    bool dst_dev, src_dev;
    switch (kind) {
    case cudaMemcpyHostToHost: dst_dev = src_dev = false; break;
    case cudaMemcpyHostToDevice: dst_dev = true; src_dev = false; break;
    case cudaMemcpyDeviceToHost: dst_dev = false; src_dev = true; break;
    case cudaMemcpyDeviceToDevice: dst_dev = src_dev = true; break;
    case cudaMemcpyDefault: dst_dev = is_device_memory(dst); src_dev = is_device_memory(src); break;
    default: return fail(cudaErrorInvalidMemcpyDirection, "%s: invalid copy kind %d", fn, (int)kind);
    }
    cudaError_t err = check_side(dst, count, dst_dev, fn, "dst");
    if (err == cudaSuccess)
        err = check_side(src, count, src_dev, fn, "src");
    if (err != cudaSuccess)
        return err;
    memmove(dst, src, count);
    return cudaSuccess;
}

static cudaError_t fill(void *p, int value, size_t count, cudaStream_t stream, const char *fn)
{
    if (!stream_is_valid(stream))
        return fail(cudaErrorInvalidResourceHandle, "%s: stream %p is not a live stream", fn,
                    static_cast<void *>(stream));
    if (count == 0)
        return cudaSuccess;
    cudaError_t err = check_side(p, count, true, fn, "devPtr");
    if (err == cudaSuccess)
        memset(p, value, count);
    return err;
}

} /* namespace ddp_cudaemu */

using namespace ddp_cudaemu;

extern "C" {

cudaError_t cudaMalloc(void **devPtr, size_t size) { return register_new(devPtr, size, ALLOC_DEVICE, "cudaMalloc"); }
cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t hStream)
{
    if (!stream_is_valid(hStream))
        return fail(cudaErrorInvalidResourceHandle, "cudaMallocAsync: stream %p is not a live stream",
                    static_cast<void *>(hStream));
    return register_new(devPtr, size, ALLOC_DEVICE, "cudaMallocAsync");
}
cudaError_t cudaFree(void *devPtr) { return unregister_free(devPtr, ALLOC_DEVICE, "cudaFree"); }
cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t hStream)
{
    if (!stream_is_valid(hStream))
        return fail(cudaErrorInvalidResourceHandle, "cudaFreeAsync: stream %p is not a live stream",
                    static_cast<void *>(hStream));
    return unregister_free(devPtr, ALLOC_DEVICE, "cudaFreeAsync");
}
cudaError_t cudaMallocHost(void **ptr, size_t size) { return register_new(ptr, size, ALLOC_PINNED_HOST, "cudaMallocHost"); }
cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
    if (flags & ~(unsigned)(cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined))
        return fail(cudaErrorInvalidValue, "cudaHostAlloc: unknown flags 0x%x", flags);
    return register_new(pHost, size, ALLOC_PINNED_HOST, "cudaHostAlloc");
}
cudaError_t cudaFreeHost(void *ptr) { return unregister_free(ptr, ALLOC_PINNED_HOST, "cudaFreeHost"); }

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
    alloc_kind kind;
    size_t overrun;
    bool known = alloc_lookup(ptr, 1, &kind, &overrun);
    attributes->type = !known ? cudaMemoryTypeUnregistered
                     : kind == ALLOC_DEVICE ? cudaMemoryTypeDevice : cudaMemoryTypeHost;
    attributes->device = 0;
    attributes->devicePointer = known ? const_cast<void *>(ptr) : nullptr;
    attributes->hostPointer = known && kind == ALLOC_PINNED_HOST ? const_cast<void *>(ptr) : nullptr;
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    return copy(dst, src, count, kind, nullptr, "cudaMemcpy");
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream)
{
    return copy(dst, src, count, kind, stream, "cudaMemcpyAsync");
}
cudaError_t cudaMemcpyPeer(void *dst, int dstDevice, const void *src, int srcDevice, size_t count)
{
    (void)dstDevice;
    (void)srcDevice;
    return copy(dst, src, count, cudaMemcpyDeviceToDevice, nullptr, "cudaMemcpyPeer");
}
cudaError_t cudaMemcpyPeerAsync(void *dst, int dstDevice, const void *src, int srcDevice, size_t count,
                                cudaStream_t stream)
{
    (void)dstDevice;
    (void)srcDevice;
    return copy(dst, src, count, cudaMemcpyDeviceToDevice, stream, "cudaMemcpyPeerAsync");
}

static cudaError_t copy_2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                           size_t height, cudaMemcpyKind kind, cudaStream_t stream, const char *fn)
{
    if (width > dpitch || width > spitch)
        return fail(cudaErrorInvalidPitchValue, "%s: width %zu exceeds dpitch %zu or spitch %zu", fn, width,
                    dpitch, spitch);
    for (size_t row = 0; row < height; row++) {
        cudaError_t err = copy(static_cast<char *>(dst) + row * dpitch,
                               static_cast<const char *>(src) + row * spitch, width, kind, stream, fn);
        if (err != cudaSuccess)
            return err;
    }
    return cudaSuccess;
}
cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                         enum cudaMemcpyKind kind)
{
    return copy_2d(dst, dpitch, src, spitch, width, height, kind, nullptr, "cudaMemcpy2D");
}
cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                              size_t height, enum cudaMemcpyKind kind, cudaStream_t stream)
{
    return copy_2d(dst, dpitch, src, spitch, width, height, kind, stream, "cudaMemcpy2DAsync");
}

cudaError_t cudaMemcpyToSymbol(const void *symbol, const void *src, size_t count, size_t offset,
                               enum cudaMemcpyKind kind)
{
    if (!symbol || !src || (kind != cudaMemcpyHostToDevice && kind != cudaMemcpyDeviceToDevice &&
                            kind != cudaMemcpyDefault))
        return fail(cudaErrorInvalidValue, "cudaMemcpyToSymbol: NULL symbol/src or invalid kind %d", (int)kind);
    memcpy(static_cast<char *>(const_cast<void *>(symbol)) + offset, src, count);
    return cudaSuccess;
}

cudaError_t cudaMemset(void *devPtr, int value, size_t count) { return fill(devPtr, value, count, nullptr, "cudaMemset"); }
cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream)
{
    return fill(devPtr, value, count, stream, "cudaMemsetAsync");
}

} /* extern "C" */
