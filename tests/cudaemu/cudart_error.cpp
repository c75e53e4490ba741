/* cudart_error.cpp — the CUDA runtime shim's error state: fail (what every part of the emulator
 * reports a failed call through), the per-thread last error behind cudaGetLastError and
 * cudaPeekAtLastError, and the names and texts of the error codes the emulator returns (the real
 * runtime's wording). C ABI exactly as declared by cuda_runtime_api.h. Must not depend on the
 * other parts: they all report through it. */
#include "cudaemu_internal.h"

#include <cuda_runtime_api.h>
#include <stdarg.h>
#include <stdio.h>

namespace ddp_cudaemu {

static thread_local cudaError_t last_error = cudaSuccess;

cudaError_t fail(cudaError_t err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("cudaemu: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    last_error = err;
    return err;
}

cudaError_t not_ready()
{
    last_error = cudaErrorNotReady;
    return cudaErrorNotReady;
}

struct error_text {
    cudaError_t code;
    const char *name, *text;
};
#define DDP_ERR(code, text) {code, #code, text}
static const error_text error_texts[] = {
    DDP_ERR(cudaSuccess, "no error"),
    DDP_ERR(cudaErrorInvalidValue, "invalid argument"),
    DDP_ERR(cudaErrorMemoryAllocation, "out of memory"),
    DDP_ERR(cudaErrorInitializationError, "initialization error"),
    DDP_ERR(cudaErrorInvalidConfiguration, "invalid configuration argument"),
    DDP_ERR(cudaErrorInvalidDevicePointer, "invalid device pointer"),
    DDP_ERR(cudaErrorInvalidMemcpyDirection, "invalid copy direction for memcpy"),
    DDP_ERR(cudaErrorInsufficientDriver, "CUDA driver version is insufficient for CUDA runtime version"),
    DDP_ERR(cudaErrorNoDevice, "no CUDA-capable device is detected"),
    DDP_ERR(cudaErrorInvalidDevice, "invalid device ordinal"),
    DDP_ERR(cudaErrorInvalidResourceHandle, "invalid resource handle"),
    DDP_ERR(cudaErrorNotReady, "device not ready"),
    DDP_ERR(cudaErrorIllegalAddress, "an illegal memory access was encountered"),
    DDP_ERR(cudaErrorLaunchFailure, "unspecified launch failure"),
    DDP_ERR(cudaErrorPeerAccessAlreadyEnabled, "peer access is already enabled"),
    DDP_ERR(cudaErrorNotSupported, "operation not supported"),
    DDP_ERR(cudaErrorUnknown, "unknown error"),
};
#undef DDP_ERR

static const error_text *find_error(cudaError_t code)
{
    for (const error_text &e : error_texts)
        if (e.code == code)
            return &e;
    return nullptr;
}

} /* namespace ddp_cudaemu */

using namespace ddp_cudaemu;

extern "C" {

cudaError_t cudaGetLastError(void)
{
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void) { return last_error; }

const char *cudaGetErrorString(cudaError_t error)
{
    const error_text *e = find_error(error);
    return e ? e->text : "unrecognized error code";
}

const char *cudaGetErrorName(cudaError_t error)
{
    const error_text *e = find_error(error);
    return e ? e->name : "cudaErrorUnknown";
}

} /* extern "C" */
