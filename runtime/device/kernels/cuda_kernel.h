/* cuda_kernel.h — the portability header every .cu file includes, first.
 *
 * It lets one kernel source compile two ways: with nvcc for a real GPU, and with g++ (through a
 * .cpp wrapper that #includes the .cu, with DDP_CUDA_EMULATION defined) for the CUDA-on-CPU
 * emulator in tests/cudaemu/. Kernels must use the macros below instead of the two CUDA
 * constructs g++ cannot parse: the <<<...>>> launch and `extern __shared__` arrays.
 *
 *   DDP_LAUNCH(kernel, grid, block, smem_bytes, stream, args...)   launch (errors: DDP_LAUNCH_STATUS)
 *   DDP_DYNAMIC_SHARED(T, name);   declares `name`, usable as T name[], the dynamic shared memory
 *   DDP_LAUNCH_STATUS()            cudaError_t of the last launch (cudaGetLastError), both builds
 *
 * A template kernel with several template arguments needs parentheses:
 * DDP_LAUNCH((k<float, 256>), ...). Everything else is plain CUDA: __global__, __device__,
 * __shared__ arrays declared inside kernels or __device__ functions (not at file scope),
 * threadIdx/blockIdx/blockDim/gridDim/warpSize, __syncthreads() reached by every thread,
 * __syncwarp(), __shfl_*_sync, __ballot_sync/__any_sync/__all_sync, atomicAdd, bf16/fp16 types,
 * libm math and the usual float intrinsics (__expf, rsqrtf, __fdividef, ...), and the tensor-core
 * and cp.async instructions of tensor_core.cuh (mma.m16n8k16 bf16, ldmatrix, cp.async groups).
 * Not available under emulation (so not allowed in our kernels): CUB, cooperative groups, other
 * inline PTX, cross-block synchronisation. This header must not grow host
 * code: the ops' host launchers live beside their kernels and launch through kernel_common.cuh. */
#ifndef DDP_CUDA_KERNEL_H
#define DDP_CUDA_KERNEL_H

#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>

#if defined(__CUDACC__) && !defined(DDP_CUDA_EMULATION)

#define DDP_LAUNCH(kernel, grid, block, smem_bytes, stream, ...) \
    kernel<<<(grid), (block), (smem_bytes), (stream)>>>(__VA_ARGS__)
#define DDP_DYNAMIC_SHARED(T, name) extern __shared__ T name[]

#else /* emulation: g++ compiles the kernel as host code run by tests/cudaemu */

#ifndef DDP_CUDA_EMULATION
#error "cuda_kernel.h: compile .cu files with nvcc, or with g++ and -DDDP_CUDA_EMULATION"
#endif
#include "cudaemu_kernel.h" /* the emulator's; on the include path of the emulated build only */

#define DDP_LAUNCH(kernel, grid, block, smem_bytes, stream, ...) \
    ::ddp_cudaemu::make_launcher(#kernel, kernel, (grid), (block), (smem_bytes), (stream))(__VA_ARGS__)
#define DDP_DYNAMIC_SHARED(T, name) T *const name = static_cast<T *>(::ddp_cudaemu::dynamic_shared())

#endif

#define DDP_LAUNCH_STATUS() cudaGetLastError()

#endif
