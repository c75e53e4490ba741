/* attention_internal.h — what attention.cu (the attention ops' host launchers, the SIMT kernels and
 * the row-dot preprocessing), attention_tc.cu (the tensor-core kernels), attention_wgmma.cu and
 * attention_tma.cu (Hopper's kernels) share: the kernels'
 * argument block, the two device functions that read packed rows' document bounds, and the
 * tensor-core launchers. Nothing outside runtime/device/kernels/attention* includes it; it must
 * not hold kernels. */
#ifndef DDP_ATTENTION_INTERNAL_H
#define DDP_ATTENTION_INTERNAL_H

#include "cuda_kernel.h"
#include "runtime/device/device_cuda.h"

/* The op's tensors and shape as every attention kernel takes them (by value). Element pointers
 * are of the op's storage type; row (b, t) of a tensor with stride ld starts at (b·T + t)·ld and
 * head h at column h·hs. drow: the per-row dots dout·out, [B, NH, T] (backward only). doc_start,
 * doc_end: attn_shape's packed rows (device int32 [B·T]), or both NULL. */
typedef struct attn_args {
    const void *q, *k, *v, *out, *dout;
    void *o, *dq, *dk, *dv;
    const float *lse_in;
    float *lse_out, *drow;
    int64_t B, T, NH, NKV, hs, ld_q, ld_kv, ld_o;
    float scale;
    const int32_t *doc_start, *doc_end;
} attn_args;

#ifdef __cplusplus
/* The first key query t of row b sees: its document's start, 0 without packed rows. The bounds
 * are data on the device that the host cannot check without waiting, so a bad one is clamped into
 * [0, t]: it may give a wrong result, never a read outside the row, and query t always sees itself
 * (no empty softmax). */
__device__ inline int64_t attn_doc_start(const attn_args &a, int64_t b, int64_t t)
{
    if (!a.doc_start) return 0;
    const int64_t s = a.doc_start[b * a.T + t];
    return s < 0 ? 0 : s > t ? t : s;
}

/* One past the last query that sees key t of row b: its document's end, T without packed rows;
 * clamped into [t + 1, T] for the same reason. */
__device__ inline int64_t attn_doc_end(const attn_args &a, int64_t b, int64_t t)
{
    if (!a.doc_end) return a.T;
    const int64_t e = a.doc_end[b * a.T + t];
    return e <= t ? t + 1 : e > a.T ? a.T : e;
}
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Whether the tensor-core kernels take this job: bf16, hs 64 or 128, every row 16-byte aligned,
 * and a GPU of compute capability 8.0 or newer. */
bool attention_tc_supports(device *d, const attn_args *a);
/* Whether Hopper's kernels (attention_wgmma.cu) take a job the tensor-core kernels support: hs 64
 * or 128 on a GPU of compute capability 9.0, unless DDP_ATTENTION_MMA_SYNC=1; and their forward and
 * backward (drow computed), which attention_tc_forward and attention_tc_backward call. */
bool attention_wgmma_supports(device *d, const attn_args *a);
int attention_wgmma_forward(device *d, const attn_args *a, ddp_err *err);
int attention_wgmma_backward(device *d, const attn_args *a, ddp_err *err);
/* Whether the warp-specialised kernels (attention_tma.cu) take a job Hopper's kernels take: unless
 * DDP_ATTENTION_TMA=0, where the driver has cuTensorMapEncodeTiled; and their forward and backward,
 * which attention_wgmma_forward and attention_wgmma_backward call. */
bool attention_tma_supports(device *d, const attn_args *a);
int attention_tma_forward(device *d, const attn_args *a, ddp_err *err);
int attention_tma_backward(device *d, const attn_args *a, ddp_err *err);
/* The tensor-core forward and backward (attention_tc.cu; Hopper's where they take the job); the
 * backward expects drow computed. */
int attention_tc_forward(device *d, const attn_args *a, ddp_err *err);
int attention_tc_backward(device *d, const attn_args *a, ddp_err *err);

#ifdef __cplusplus
}
#endif

#endif
