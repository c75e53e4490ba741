/* transformer.cu — the CUDA side of the transformer family (CPU: transformer_cpu.c).
 *
 * Not written yet: every launcher fails with a message naming the op, so a GPT-2 run on a CUDA
 * device stops at its first transformer op instead of computing garbage. The kernels come with
 * the CUDA half of the transformer (bf16, fused attention). This file must not hold GEMMs or
 * element-wise ops. */
#include "kernel_common.cuh"

#pragma GCC diagnostic ignored "-Wunused-parameter"

#define DDP_NO_CUDA_KERNEL(name, params)                                                           \
    extern "C" int device_cuda_##name(DEVICE_UNPAREN params, ddp_err *err)                         \
    {                                                                                              \
        (void)d;                                                                                   \
        return ddp_fail(err, DDP_EUSAGE, "%s has no CUDA kernel yet: run this model on device: cpu", #name); \
    }
DEVICE_TRANSFORMER_OPS(DDP_NO_CUDA_KERNEL)
