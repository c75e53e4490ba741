/* attention_internal.h — what attention.cu (the attention ops' host launchers, the SIMT kernels and
 * the row-dot preprocessing) and attention_tc.cu (the tensor-core kernels) share: the kernels'
 * argument block and the tensor-core launchers. Nothing outside runtime/device/kernels/attention*
 * includes it; it must not hold kernels. */
#ifndef DDP_ATTENTION_INTERNAL_H
#define DDP_ATTENTION_INTERNAL_H

#include "runtime/device/device_cuda.h"

/* The op's tensors and shape as every attention kernel takes them (by value). Element pointers
 * are of the op's storage type; row (b, t) of a tensor with stride ld starts at (b·T + t)·ld and
 * head h at column h·hs. drow: the per-row dots dout·out, [B, NH, T] (backward only). */
typedef struct attn_args {
    const void *q, *k, *v, *out, *dout;
    void *o, *dq, *dk, *dv;
    const float *lse_in;
    float *lse_out, *drow;
    int64_t B, T, NH, NKV, hs, ld_q, ld_kv, ld_o;
    float scale;
} attn_args;

#ifdef __cplusplus
extern "C" {
#endif

/* Whether the tensor-core kernels take this job: bf16, hs 64 or 128, every row 16-byte aligned,
 * and a GPU of compute capability 8.0 or newer. */
bool attention_tc_supports(device *d, const attn_args *a);
/* The tensor-core forward and backward (attention_tc.cu); the backward expects drow computed. */
int attention_tc_forward(device *d, const attn_args *a, ddp_err *err);
int attention_tc_backward(device *d, const attn_args *a, ddp_err *err);

#ifdef __cplusplus
}
#endif

#endif
