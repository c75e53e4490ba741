/* cast_kernels.cpp — the emulated build of cast_kernels.cu: the host C++ compiler compiles the same kernel
 * source for the CUDA-on-CPU emulator (runtime/cudaemu). Nothing else belongs here. */
#ifndef DDP_CUDA_EMULATION
#define DDP_CUDA_EMULATION 1
#endif
#include "cast_kernels.cu"
