/* cudart_device.cpp — the CUDA runtime shim's device part: devices, streams, events, attributes.
 *
 * The emulated machine has DDP_CUDA_EMU_DEVICES devices (default 1; 0 behaves like a machine
 * without a GPU) named "CUDA emulator (CPU)", shaped like an H100 (sm_90, 132 SMs, 48 KiB default
 * / 227 KiB opt-in shared memory per block). Work runs synchronously at launch, so streams and
 * events only need to be validated and timestamped. C ABI as declared by cuda_runtime_api.h;
 * memory lives in cudart_memory.cpp, the error state in cudart_error.cpp. */
#include "cudaemu_internal.h"

#include <cuda_runtime_api.h>
#include <map>
#include <mutex>
#include <set>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/base/clock.h"

struct CUstream_st {
    unsigned flags;
    int device;
};
struct CUevent_st {
    unsigned flags;
    bool recorded;
    double time_ms;
};

namespace ddp_cudaemu {

static std::mutex handles_lock;
static std::set<cudaStream_t> live_streams;
static std::set<cudaEvent_t> live_events;
static std::map<const void *, size_t> dynamic_smem_limits;
static thread_local int current_device;

bool stream_is_valid(cudaStream_t stream)
{
    if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread)
        return true;
    std::lock_guard<std::mutex> hold(handles_lock);
    return live_streams.count(stream) != 0;
}

static bool event_is_valid(cudaEvent_t event)
{
    std::lock_guard<std::mutex> hold(handles_lock);
    return live_events.count(event) != 0;
}

size_t kernel_max_dynamic_smem(const void *fn)
{
    std::lock_guard<std::mutex> hold(handles_lock);
    auto it = dynamic_smem_limits.find(fn);
    return it == dynamic_smem_limits.end() ? (size_t)DEFAULT_DYNAMIC_SMEM : it->second;
}

static int device_count()
{
    const char *env = getenv("DDP_CUDA_EMU_DEVICES");
    if (!env || !*env)
        return 1;
    char *end;
    long n = strtol(env, &end, 10);
    if (*end != '\0' || n < 0 || n > 64) {
        fprintf(stderr, "cudaemu: DDP_CUDA_EMU_DEVICES=%s: expected a device count between 0 and 64\n", env);
        return 0;
    }
    return (int)n;
}

static cudaError_t check_device(int device, const char *fn)
{
    int n = device_count();
    if (n == 0)
        return fail(cudaErrorNoDevice, "%s: no CUDA-capable device (DDP_CUDA_EMU_DEVICES=0)", fn);
    if (device < 0 || device >= n)
        return fail(cudaErrorInvalidDevice, "%s: device %d, the emulator has %d", fn, device, n);
    return cudaSuccess;
}

static int attribute_value(cudaDeviceAttr attr, int *value)
{
    switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *value = MAX_THREADS_PER_BLOCK; return 1;
    case cudaDevAttrMaxBlockDimX: case cudaDevAttrMaxBlockDimY: *value = 1024; return 1;
    case cudaDevAttrMaxBlockDimZ: *value = 64; return 1;
    case cudaDevAttrMaxGridDimX: *value = 0x7fffffff; return 1;
    case cudaDevAttrMaxGridDimY: case cudaDevAttrMaxGridDimZ: *value = 65535; return 1;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = DEFAULT_DYNAMIC_SMEM; return 1;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = MAX_DYNAMIC_SMEM_OPTIN; return 1;
    case cudaDevAttrWarpSize: *value = 32; return 1;
    case cudaDevAttrMultiProcessorCount: *value = EMULATED_SM_COUNT; return 1;
    case cudaDevAttrComputeCapabilityMajor: *value = 9; return 1;
    case cudaDevAttrComputeCapabilityMinor: *value = 0; return 1;
    case cudaDevAttrMaxThreadsPerMultiProcessor: *value = 2048; return 1;
    case cudaDevAttrUnifiedAddressing: case cudaDevAttrCanMapHostMemory: *value = 1; return 1;
    case cudaDevAttrConcurrentManagedAccess: case cudaDevAttrManagedMemory: *value = 0; return 1;
    case cudaDevAttrIntegrated: case cudaDevAttrCooperativeLaunch: *value = 0; return 1;
    default: return 0;
    }
}

} /* namespace ddp_cudaemu */

using namespace ddp_cudaemu;

extern "C" {

cudaError_t cudaGetDeviceCount(int *count)
{
    if (!count)
        return fail(cudaErrorInvalidValue, "cudaGetDeviceCount: count is NULL");
    *count = device_count();
    return *count == 0 ? fail(cudaErrorNoDevice, "cudaGetDeviceCount: no device (DDP_CUDA_EMU_DEVICES=0)")
                       : cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
    cudaError_t err = check_device(device, "cudaSetDevice");
    if (err == cudaSuccess)
        current_device = device;
    return err;
}

cudaError_t cudaGetDevice(int *device)
{
    if (!device)
        return fail(cudaErrorInvalidValue, "cudaGetDevice: device is NULL");
    *device = current_device;
    return check_device(current_device, "cudaGetDevice");
}

cudaError_t cudaSetDeviceFlags(unsigned int flags)
{
    (void)flags;
    return check_device(current_device, "cudaSetDeviceFlags");
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    if (!prop)
        return fail(cudaErrorInvalidValue, "cudaGetDeviceProperties: prop is NULL");
    cudaError_t err = check_device(device, "cudaGetDeviceProperties");
    if (err != cudaSuccess)
        return err;
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "CUDA emulator (CPU)");
    prop->totalGlobalMem = (size_t)sysconf(_SC_PHYS_PAGES) * (size_t)sysconf(_SC_PAGESIZE);
    prop->sharedMemPerBlock = DEFAULT_DYNAMIC_SMEM;
    prop->sharedMemPerBlockOptin = MAX_DYNAMIC_SMEM_OPTIN;
    prop->sharedMemPerMultiprocessor = 228 * 1024;
    prop->regsPerBlock = 65536;
    prop->warpSize = 32;
    prop->maxThreadsPerBlock = MAX_THREADS_PER_BLOCK;
    prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = 1024;
    prop->maxThreadsDim[2] = 64;
    prop->maxGridSize[0] = 0x7fffffff;
    prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
    prop->totalConstMem = 65536;
    prop->major = 9;
    prop->minor = 0;
    prop->multiProcessorCount = EMULATED_SM_COUNT;
    prop->maxThreadsPerMultiProcessor = 2048;
    prop->unifiedAddressing = 1;
    prop->canMapHostMemory = 1;
    prop->concurrentKernels = 1;
    prop->pciBusID = device;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
    if (!value)
        return fail(cudaErrorInvalidValue, "cudaDeviceGetAttribute: value is NULL");
    cudaError_t err = check_device(device, "cudaDeviceGetAttribute");
    if (err != cudaSuccess)
        return err;
    if (!attribute_value(attr, value))
        return fail(cudaErrorInvalidValue, "cudaDeviceGetAttribute: attribute %d is not emulated", (int)attr);
    return cudaSuccess;
}

cudaError_t cudaDeviceCanAccessPeer(int *canAccessPeer, int device, int peerDevice)
{
    cudaError_t err = check_device(device, "cudaDeviceCanAccessPeer");
    if (err == cudaSuccess)
        err = check_device(peerDevice, "cudaDeviceCanAccessPeer");
    if (err != cudaSuccess)
        return err;
    if (!canAccessPeer)
        return fail(cudaErrorInvalidValue, "cudaDeviceCanAccessPeer: canAccessPeer is NULL");
    *canAccessPeer = device != peerDevice; /* emulated devices share host memory */
    return cudaSuccess;
}

cudaError_t cudaDeviceEnablePeerAccess(int peerDevice, unsigned int flags)
{
    if (flags != 0)
        return fail(cudaErrorInvalidValue, "cudaDeviceEnablePeerAccess: flags must be 0");
    return check_device(peerDevice, "cudaDeviceEnablePeerAccess");
}

cudaError_t cudaDeviceGetP2PAttribute(int *value, enum cudaDeviceP2PAttr attr, int srcDevice, int dstDevice)
{
    cudaError_t err = check_device(srcDevice, "cudaDeviceGetP2PAttribute");
    if (err == cudaSuccess)
        err = check_device(dstDevice, "cudaDeviceGetP2PAttribute");
    if (err != cudaSuccess)
        return err;
    if (!value || srcDevice == dstDevice)
        return fail(cudaErrorInvalidDevice, "cudaDeviceGetP2PAttribute: NULL value or same device %d", srcDevice);
    *value = attr == cudaDevP2PAttrPerformanceRank ? 0 : attr == cudaDevP2PAttrCudaArrayAccessSupported ? 0 : 1;
    return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *driverVersion)
{
    if (!driverVersion)
        return fail(cudaErrorInvalidValue, "cudaDriverGetVersion: NULL");
    *driverVersion = CUDART_VERSION;
    return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *runtimeVersion)
{
    if (!runtimeVersion)
        return fail(cudaErrorInvalidValue, "cudaRuntimeGetVersion: NULL");
    *runtimeVersion = CUDART_VERSION;
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
    if (!free_bytes || !total_bytes)
        return fail(cudaErrorInvalidValue, "cudaMemGetInfo: NULL output");
    *total_bytes = (size_t)sysconf(_SC_PHYS_PAGES) * (size_t)sysconf(_SC_PAGESIZE);
    *free_bytes = (size_t)sysconf(_SC_AVPHYS_PAGES) * (size_t)sysconf(_SC_PAGESIZE);
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) { return check_device(current_device, "cudaDeviceSynchronize"); }
cudaError_t cudaDeviceReset(void) { return cudaSuccess; }

cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, int value)
{
    if (!func)
        return fail(cudaErrorInvalidDeviceFunction, "cudaFuncSetAttribute: func is NULL");
    if (attr == cudaFuncAttributePreferredSharedMemoryCarveout)
        return cudaSuccess;
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize)
        return fail(cudaErrorInvalidValue, "cudaFuncSetAttribute: attribute %d is not emulated", (int)attr);
    if (value < 0 || value > MAX_DYNAMIC_SMEM_OPTIN)
        return fail(cudaErrorInvalidValue, "cudaFuncSetAttribute: %d bytes of dynamic shared memory, the "
                    "limit is %d", value, MAX_DYNAMIC_SMEM_OPTIN);
    std::lock_guard<std::mutex> hold(handles_lock);
    dynamic_smem_limits[func] = (size_t)value;
    return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags)
{
    if (!pStream || (flags & ~(unsigned)cudaStreamNonBlocking))
        return fail(cudaErrorInvalidValue, "cudaStreamCreateWithFlags: NULL output or unknown flags 0x%x", flags);
    cudaStream_t s = new CUstream_st{flags, current_device};
    std::lock_guard<std::mutex> hold(handles_lock);
    live_streams.insert(s);
    *pStream = s;
    return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *pStream) { return cudaStreamCreateWithFlags(pStream, cudaStreamDefault); }

/* Priorities as on an H100: 0 (least) down to -5 (greatest); values outside are clamped, as CUDA does. */
enum { LEAST_STREAM_PRIORITY = 0, GREATEST_STREAM_PRIORITY = -5 };

cudaError_t cudaDeviceGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
    if (leastPriority)
        *leastPriority = LEAST_STREAM_PRIORITY;
    if (greatestPriority)
        *greatestPriority = GREATEST_STREAM_PRIORITY;
    return check_device(current_device, "cudaDeviceGetStreamPriorityRange");
}

cudaError_t cudaStreamCreateWithPriority(cudaStream_t *pStream, unsigned int flags, int priority)
{
    (void)priority; /* every emulated stream runs only when something waits for it */
    return cudaStreamCreateWithFlags(pStream, flags);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    std::lock_guard<std::mutex> hold(handles_lock);
    if (!live_streams.erase(stream))
        return fail(cudaErrorInvalidResourceHandle, "cudaStreamDestroy: %p is not a live stream",
                    static_cast<void *>(stream));
    delete stream;
    return cudaSuccess;
}

static cudaError_t check_stream(cudaStream_t stream, const char *fn)
{
    return stream_is_valid(stream) ? cudaSuccess
         : fail(cudaErrorInvalidResourceHandle, "%s: %p is not a live stream", fn, static_cast<void *>(stream));
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) { return check_stream(stream, "cudaStreamSynchronize"); }
cudaError_t cudaStreamQuery(cudaStream_t stream) { return check_stream(stream, "cudaStreamQuery"); }

cudaError_t cudaStreamGetFlags(cudaStream_t hStream, unsigned int *flags)
{
    cudaError_t err = check_stream(hStream, "cudaStreamGetFlags");
    if (err == cudaSuccess && !flags)
        err = fail(cudaErrorInvalidValue, "cudaStreamGetFlags: flags is NULL");
    if (err == cudaSuccess)
        *flags = (hStream == nullptr || hStream == cudaStreamLegacy || hStream == cudaStreamPerThread)
                     ? cudaStreamDefault : hStream->flags;
    return err;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
    cudaError_t err = check_stream(stream, "cudaStreamWaitEvent");
    if (err == cudaSuccess && !event_is_valid(event))
        err = fail(cudaErrorInvalidResourceHandle, "cudaStreamWaitEvent: %p is not a live event",
                   static_cast<void *>(event));
    if (err == cudaSuccess && flags & ~(unsigned)cudaEventWaitExternal)
        err = fail(cudaErrorInvalidValue, "cudaStreamWaitEvent: unknown flags 0x%x", flags);
    return err;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
    unsigned known = cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess;
    if (!event || (flags & ~known))
        return fail(cudaErrorInvalidValue, "cudaEventCreateWithFlags: NULL output or unknown flags 0x%x", flags);
    cudaEvent_t e = new CUevent_st{flags, false, 0.0};
    std::lock_guard<std::mutex> hold(handles_lock);
    live_events.insert(e);
    *event = e;
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }

cudaError_t cudaEventDestroy(cudaEvent_t event)
{
    std::lock_guard<std::mutex> hold(handles_lock);
    if (!live_events.erase(event))
        return fail(cudaErrorInvalidResourceHandle, "cudaEventDestroy: %p is not a live event",
                    static_cast<void *>(event));
    delete event;
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    cudaError_t err = check_stream(stream, "cudaEventRecord");
    if (err == cudaSuccess && !event_is_valid(event))
        err = fail(cudaErrorInvalidResourceHandle, "cudaEventRecord: %p is not a live event",
                   static_cast<void *>(event));
    if (err == cudaSuccess) {
        event->recorded = true;
        event->time_ms = 1e3 * monotonic_s();
    }
    return err;
}

cudaError_t cudaEventQuery(cudaEvent_t event)
{
    return event_is_valid(event) ? cudaSuccess
         : fail(cudaErrorInvalidResourceHandle, "cudaEventQuery: %p is not a live event", static_cast<void *>(event));
}

cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
    return event_is_valid(event) ? cudaSuccess
         : fail(cudaErrorInvalidResourceHandle, "cudaEventSynchronize: %p is not a live event",
                static_cast<void *>(event));
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    if (!ms)
        return fail(cudaErrorInvalidValue, "cudaEventElapsedTime: ms is NULL");
    if (!event_is_valid(start) || !event_is_valid(end))
        return fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: not a live event");
    if ((start->flags | end->flags) & cudaEventDisableTiming)
        return fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: an event was created with "
                    "cudaEventDisableTiming");
    if (!start->recorded || !end->recorded)
        return fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: an event was never recorded");
    *ms = (float)(end->time_ms - start->time_ms);
    return cudaSuccess;
}

} /* extern "C" */
