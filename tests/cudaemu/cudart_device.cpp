/* cudart_device.cpp — the CUDA runtime shim's device part: devices, the calling thread's current
 * device, attributes, kernel attributes.
 *
 * The emulated machine has DDP_CUDA_EMU_DEVICES devices (default 1; 0 behaves like a machine
 * without a GPU), of which a process sees those CUDA_VISIBLE_DEVICES lists (by index, each with
 * its machine index for its PCI bus number), named "CUDA emulator (CPU)", shaped like an H100 (sm_90, 132 SMs, 48 KiB default
 * / 227 KiB opt-in shared memory per block); DDP_CUDA_EMU_ARCH=80 makes them report compute
 * capability 8.0, so the kernels' paths for GPUs before Hopper run (and Hopper's instructions abort). Stricter than CUDA: a thread that never called
 * cudaSetDevice may not use a device while several exist (CUDA silently gives it device 0, which
 * on a multi-GPU node makes a context there). C ABI as declared by cuda_runtime_api.h; streams and
 * streams in cudaemu_streams.cpp, events in cudart_event.cpp, memory in cudart_memory.cpp, errors
 * in cudart_error.cpp. */
#include "cudaemu_internal.h"

#include <cuda_runtime_api.h>
#include <map>
#include <mutex>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


namespace ddp_cudaemu {

static std::mutex handles_lock;
static std::map<const void *, size_t> dynamic_smem_limits;
static thread_local int current_device = -1; /* -1: this thread never called cudaSetDevice */

size_t kernel_max_dynamic_smem(const void *fn)
{
    std::lock_guard<std::mutex> hold(handles_lock);
    auto it = dynamic_smem_limits.find(fn);
    return it == dynamic_smem_limits.end() ? (size_t)DEFAULT_DYNAMIC_SMEM : it->second;
}

static int machine_devices()
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

/* The machine's devices this process sees, as CUDA reads CUDA_VISIBLE_DEVICES: indices separated
 * by commas, up to the first that is not one of the machine's (none set: all). physical[i] gets
 * the machine's index of visible device i. */
static int visible_devices(int physical[64])
{
    int n = machine_devices(), seen = 0;
    const char *list = getenv("CUDA_VISIBLE_DEVICES");
    for (int i = 0; !list && i < n; i++)
        physical[seen++] = i;
    for (const char *p = list; p && *p && seen < 64;) {
        char *end;
        long d = strtol(p, &end, 10);
        if (end == p || d < 0 || d >= n || (*end != ',' && *end != '\0'))
            break;
        physical[seen++] = (int)d;
        p = *end ? end + 1 : end;
    }
    return seen;
}

static int device_count()
{
    int physical[64];
    return visible_devices(physical);
}

int emulated_cc_major()
{
    const char *env = getenv("DDP_CUDA_EMU_ARCH");
    if (!env || !*env || strcmp(env, "90") == 0)
        return 9;
    if (strcmp(env, "80") == 0)
        return 8;
    fprintf(stderr, "cudaemu: DDP_CUDA_EMU_ARCH=%s: expected 90 (an H100, the default) or 80 (an A100)\n", env);
    abort();
}

static cudaError_t check_device(int device, const char *fn)
{
    int n = device_count();
    if (n == 0)
        return fail(cudaErrorNoDevice, "%s: no CUDA-capable device (DDP_CUDA_EMU_DEVICES=0, or none in CUDA_VISIBLE_DEVICES)", fn);
    if (device < 0 || device >= n)
        return fail(cudaErrorInvalidDevice, "%s: device %d, the emulator has %d", fn, device, n);
    return cudaSuccess;
}

int calling_device(const char *fn)
{
    int n = device_count();
    if (current_device < 0 && n > 1) {
        fail(cudaErrorInvalidDevice, "%s: called from a thread that never selected a device while %d exist "
             "(on a GPU it silently uses device 0): call cudaSetDevice in every thread that calls CUDA", fn, n);
        return -1;
    }
    int device = current_device < 0 ? 0 : current_device;
    return check_device(device, fn) == cudaSuccess ? device : -1;
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
    case cudaDevAttrComputeCapabilityMajor: *value = emulated_cc_major(); return 1;
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
    return *count == 0 ? fail(cudaErrorNoDevice, "cudaGetDeviceCount: no device (DDP_CUDA_EMU_DEVICES=0, or none in CUDA_VISIBLE_DEVICES)")
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
    *device = current_device < 0 ? 0 : current_device; /* as CUDA; using it is what is checked */
    return check_device(*device, "cudaGetDevice");
}

cudaError_t cudaSetDeviceFlags(unsigned int flags)
{
    (void)flags;
    return calling_device("cudaSetDeviceFlags") < 0 ? cudaErrorInvalidDevice : cudaSuccess;
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
    prop->major = emulated_cc_major();
    prop->minor = 0;
    prop->multiProcessorCount = EMULATED_SM_COUNT;
    prop->maxThreadsPerMultiProcessor = 2048;
    prop->unifiedAddressing = 1;
    prop->canMapHostMemory = 1;
    prop->concurrentKernels = 1;
    int physical[64];
    visible_devices(physical);
    prop->pciBusID = physical[device]; /* the machine's device, whichever index this process sees it at */
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

cudaError_t cudaDeviceReset(void) { return cudaSuccess; }

cudaError_t cudaDeviceSynchronize(void)
{
    count_blocking_call("cudaDeviceSynchronize", __builtin_return_address(0));
    int device = calling_device("cudaDeviceSynchronize");
    return device < 0 ? cudaErrorInvalidDevice : synchronize_device(device, "cudaDeviceSynchronize");
}

/* Priorities as on an H100: 0 (least) down to -5 (greatest). Emulated streams run when something
 * waits for them, so a priority changes nothing here. */
enum { LEAST_STREAM_PRIORITY = 0, GREATEST_STREAM_PRIORITY = -5 };

cudaError_t cudaDeviceGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
    if (calling_device("cudaDeviceGetStreamPriorityRange") < 0)
        return cudaErrorInvalidDevice;
    if (leastPriority)
        *leastPriority = LEAST_STREAM_PRIORITY;
    if (greatestPriority)
        *greatestPriority = GREATEST_STREAM_PRIORITY;
    return cudaSuccess;
}


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

} /* extern "C" */
