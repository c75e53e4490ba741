/* test_cudaemu_runtime.c — the CUDA runtime shim behaves like cudart for what ddprun calls.
 *
 * Plain C against the real cuda_runtime_api.h. Proves: copies round-trip in every direction;
 * new device memory reads as NaN; wrong directions, overruns and foreign pointers are rejected
 * with cudaErrorInvalidValue (and reported once by cudaGetLastError); frees of non-allocations
 * fail; streams and events validate their handles and events time; DDP_CUDA_EMU_DEVICES sets the
 * device count (0 = no device); properties, attributes, versions and error strings. */
#include "emu_test_util.h"
#include "tests/check.h"

#include <cuda_runtime_api.h>
#include <math.h>

static void test_copies(void)
{
    float host[100], back[100], *d = NULL, *d2 = NULL, *pinned = NULL;
    for (int i = 0; i < 100; i++)
        host[i] = (float)i * 0.5f + 1.0f;
    CHECK_EQ_INT(cudaMalloc((void **)&d, sizeof host), cudaSuccess);
    CHECK_EQ_INT(cudaMalloc((void **)&d2, sizeof host), cudaSuccess);
    CHECK_EQ_INT(cudaMallocHost((void **)&pinned, sizeof host), cudaSuccess);
    CHECK_EQ_INT(cudaMemcpy(back, d, sizeof back, cudaMemcpyDeviceToHost), cudaSuccess);
    CHECK(isnan(back[0]) && isnan(back[99]), "fresh device memory is not NaN: %g %g", back[0], back[99]);
    CHECK_EQ_INT(cudaMemcpy(d, host, sizeof host, cudaMemcpyHostToDevice), cudaSuccess);
    CHECK_EQ_INT(cudaMemcpyAsync(d2, d, sizeof host, cudaMemcpyDeviceToDevice, 0), cudaSuccess);
    CHECK_EQ_INT(cudaMemcpy(pinned, d2, sizeof host, cudaMemcpyDefault), cudaSuccess);
    CHECK(memcmp(pinned, host, sizeof host) == 0, "H2D, D2D, D2H(default) round trip differs");
    CHECK_EQ_INT(cudaMemset(d, 0, 10 * sizeof(float)), cudaSuccess);
    CHECK_EQ_INT(cudaMemcpy(back, d, sizeof back, cudaMemcpyDeviceToHost), cudaSuccess);
    CHECK(back[9] == 0.0f && back[10] == host[10], "memset: %g %g", back[9], back[10]);

    char msg[4096];
    emu_capture_begin();
    cudaError_t wrong_dir = cudaMemcpy(host, d, sizeof host, cudaMemcpyHostToDevice);
    cudaError_t overrun = cudaMemcpy(d + 50, host, sizeof host, cudaMemcpyHostToDevice);
    cudaError_t foreign = cudaMemset(host, 0, 4);
    cudaError_t interior = cudaFree(d + 1);
    cudaError_t bad_kind = cudaMemcpy(back, d, 4, (enum cudaMemcpyKind)7);
    emu_capture_end(msg, sizeof msg);
    CHECK_EQ_INT(wrong_dir, cudaErrorInvalidValue);
    CHECK_EQ_INT(overrun, cudaErrorInvalidValue);
    CHECK_EQ_INT(foreign, cudaErrorInvalidValue);
    CHECK_EQ_INT(interior, cudaErrorInvalidDevicePointer);
    CHECK_EQ_INT(bad_kind, cudaErrorInvalidMemcpyDirection);
    CHECK_STR_CONTAINS(msg, "runs 200 bytes past the end of its allocation");
    CHECK_STR_CONTAINS(msg, "is not device memory from cudaMalloc");
    CHECK_EQ_INT(cudaPeekAtLastError(), cudaErrorInvalidMemcpyDirection);
    CHECK_EQ_INT(cudaGetLastError(), cudaErrorInvalidMemcpyDirection);
    CHECK_EQ_INT(cudaGetLastError(), cudaSuccess);

    struct cudaPointerAttributes attr;
    CHECK_EQ_INT(cudaPointerGetAttributes(&attr, d + 3), cudaSuccess);
    CHECK_EQ_INT(attr.type, cudaMemoryTypeDevice);
    CHECK_EQ_INT(cudaPointerGetAttributes(&attr, host), cudaSuccess);
    CHECK_EQ_INT(attr.type, cudaMemoryTypeUnregistered);
    CHECK_EQ_INT(cudaFree(d), cudaSuccess);
    CHECK_EQ_INT(cudaFree(d2), cudaSuccess);
    CHECK_EQ_INT(cudaFreeHost(pinned), cudaSuccess);
    CHECK_EQ_INT(cudaFree(NULL), cudaSuccess);
    CHECK_EQ_INT(cudaFree(d), cudaErrorInvalidDevicePointer); /* double free */
    cudaGetLastError();
}

static void test_streams_events(void)
{
    cudaStream_t s = NULL;
    cudaEvent_t start = NULL, stop = NULL, untimed = NULL;
    CHECK_EQ_INT(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    CHECK_EQ_INT(cudaEventCreate(&start), cudaSuccess);
    CHECK_EQ_INT(cudaEventCreate(&stop), cudaSuccess);
    CHECK_EQ_INT(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming), cudaSuccess);
    float ms = -1.0f;
    emu_capture_begin();
    cudaError_t never = cudaEventElapsedTime(&ms, start, stop);
    emu_capture_end((char[512]){0}, 512);
    CHECK_EQ_INT(never, cudaErrorInvalidResourceHandle);
    CHECK_EQ_INT(cudaEventRecord(start, s), cudaSuccess);
    CHECK_EQ_INT(cudaStreamWaitEvent(0, start, 0), cudaSuccess);
    CHECK_EQ_INT(cudaEventRecord(stop, s), cudaSuccess);
    CHECK_EQ_INT(cudaEventRecord(untimed, s), cudaSuccess);
    CHECK_EQ_INT(cudaEventSynchronize(stop), cudaSuccess);
    CHECK_EQ_INT(cudaEventQuery(stop), cudaSuccess);
    CHECK_EQ_INT(cudaEventElapsedTime(&ms, start, stop), cudaSuccess);
    CHECK(ms >= 0.0f && ms < 1000.0f, "elapsed %g ms", ms);
    CHECK_EQ_INT(cudaStreamSynchronize(s), cudaSuccess);
    emu_capture_begin();
    cudaError_t untimed_err = cudaEventElapsedTime(&ms, start, untimed);
    CHECK_EQ_INT(cudaStreamDestroy(s), cudaSuccess);
    cudaError_t dead_stream = cudaStreamSynchronize(s);
    cudaError_t dead_record = cudaEventRecord(start, s);
    CHECK_EQ_INT(cudaEventDestroy(untimed), cudaSuccess);
    cudaError_t dead_event = cudaEventQuery(untimed);
    emu_capture_end((char[1024]){0}, 1024);
    CHECK_EQ_INT(untimed_err, cudaErrorInvalidResourceHandle);
    CHECK_EQ_INT(dead_stream, cudaErrorInvalidResourceHandle);
    CHECK_EQ_INT(dead_record, cudaErrorInvalidResourceHandle);
    CHECK_EQ_INT(dead_event, cudaErrorInvalidResourceHandle);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    cudaGetLastError();
}

static void test_devices(void)
{
    int n = -1, dev = -1, v = 0;
    CHECK_EQ_INT(cudaGetDeviceCount(&n), cudaSuccess);
    CHECK_EQ_INT(n, 1);
    setenv("DDP_CUDA_EMU_DEVICES", "3", 1);
    CHECK_EQ_INT(cudaGetDeviceCount(&n), cudaSuccess);
    CHECK_EQ_INT(n, 3);
    CHECK_EQ_INT(cudaSetDevice(2), cudaSuccess);
    CHECK_EQ_INT(cudaGetDevice(&dev), cudaSuccess);
    CHECK_EQ_INT(dev, 2);
    CHECK_EQ_INT(cudaDeviceCanAccessPeer(&v, 0, 2), cudaSuccess);
    CHECK_EQ_INT(v, 1);
    CHECK_EQ_INT(cudaDeviceGetP2PAttribute(&v, cudaDevP2PAttrAccessSupported, 0, 1), cudaSuccess);
    CHECK_EQ_INT(v, 1);
    emu_capture_begin();
    cudaError_t past = cudaSetDevice(3);
    setenv("DDP_CUDA_EMU_DEVICES", "0", 1);
    cudaError_t none = cudaGetDeviceCount(&n);
    emu_capture_end((char[1024]){0}, 1024);
    CHECK_EQ_INT(past, cudaErrorInvalidDevice);
    CHECK_EQ_INT(none, cudaErrorNoDevice);
    CHECK_EQ_INT(n, 0);
    unsetenv("DDP_CUDA_EMU_DEVICES");
    CHECK_EQ_INT(cudaSetDevice(0), cudaSuccess);
    cudaGetLastError();

    struct cudaDeviceProp prop;
    CHECK_EQ_INT(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
    CHECK(strcmp(prop.name, "CUDA emulator (CPU)") == 0, "name \"%s\"", prop.name);
    CHECK(prop.warpSize == 32 && prop.maxThreadsPerBlock == 1024 && prop.major == 9, "properties");
    CHECK_EQ_INT(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0), cudaSuccess);
    CHECK_EQ_INT(v, 227 * 1024);
    CHECK_EQ_INT(cudaDriverGetVersion(&v), cudaSuccess);
    CHECK(v >= 12000, "driver version %d", v);
    CHECK_EQ_INT(cudaRuntimeGetVersion(&v), cudaSuccess);
    CHECK(v >= 12000, "runtime version %d", v);
    CHECK_EQ_INT(cudaDeviceSynchronize(), cudaSuccess);
    CHECK(strcmp(cudaGetErrorString(cudaErrorInvalidValue), "invalid argument") == 0, "error string");
    CHECK(strcmp(cudaGetErrorName(cudaErrorNoDevice), "cudaErrorNoDevice") == 0, "error name");
    CHECK(strcmp(cudaGetErrorString(cudaSuccess), "no error") == 0, "success string");
}

int main(void)
{
    test_copies();
    test_streams_events();
    test_devices();
    return check_done("test_cudaemu_runtime");
}
