/* cast.h — the C entry points of the float <-> bfloat16 conversion kernels used by
 * ddp.grad_dtype: bf16 (gradients travel in bf16 and are accumulated back into fp32).
 * Same conventions as kernels.h: enqueue on `stream`, return the launch status, device pointers,
 * size_t counts, no allocation or synchronisation. */
#ifndef DDP_CUDA_CAST_KERNELS_H
#define DDP_CUDA_CAST_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* dst[i] = bf16(src[i]), rounded to nearest-even (NaN stays NaN). */
cudaError_t ddp_cuda_cast_f32_to_bf16(const float *src, uint16_t *dst, size_t n, cudaStream_t stream);
/* dst[i] = float(src[i]) * scale */
cudaError_t ddp_cuda_cast_bf16_to_f32(const uint16_t *src, float *dst, size_t n, float scale, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
