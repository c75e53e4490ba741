/* cuda_query.h — whether a CUDA event has been reached, for the device layer and the NCCL
 * communicator. cudaEventQuery answers cudaErrorNotReady for work not yet done, and the runtime
 * keeps that code as the calling thread's last error: the next kernel launch's check
 * (cudaGetLastError, runtime/device/kernels/cuda_kernel.h) would report it as that launch's
 * failure. cuda_event_query clears it. Must hold nothing else. */
#ifndef DDP_CUDA_QUERY_H
#define DDP_CUDA_QUERY_H

#include <cuda_runtime_api.h>

/* cudaEventQuery(e), with cudaErrorNotReady no longer the thread's last error. */
static inline cudaError_t cuda_event_query(cudaEvent_t e)
{
    cudaError_t reached = cudaEventQuery(e);
    if (reached == cudaErrorNotReady)
        (void)cudaGetLastError();
    return reached;
}

#endif
