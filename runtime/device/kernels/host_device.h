/* host_device.h — the one way to write a function that both backends' kernels call, so the CPU
 * code (FAMILY_cpu.c) and the CUDA kernels (FAMILY.cu) compute it from the same source and give
 * the same bits: DDP_HOST_DEVICE_FN marks it `static inline __host__ __device__` for CUDA code and
 * `static inline` for C. Header-only; it must not hold kernels or ops, nor anything that is not
 * valid both as C17 and as CUDA C++.
 *
 * CUDA code is nvcc's, or the emulated build's C++ (cuda_kernel.h, included first, defines both
 * words as nothing there). The emulated build also defines DDP_CUDA_EMULATION for its C files,
 * which know neither word. */
#ifndef DDP_HOST_DEVICE_H
#define DDP_HOST_DEVICE_H

#if defined(__CUDACC__) || (defined(__cplusplus) && defined(DDP_CUDA_EMULATION))
#define DDP_HOST_DEVICE_FN static inline __host__ __device__
#else
#define DDP_HOST_DEVICE_FN static inline
#endif

#endif
