/* attention.cu — the CUDA code of the attention family (CPU: attention_cpu.c): the host launchers
 * of attention_forward and attention_backward, the backward's per-row dots dout·out, and the SIMT
 * kernels that serve every job the tensor-core kernels (attention_tc.cu) do not take: float
 * storage, head sizes other than 64 and 128 (up to 256), rows not 16-byte aligned, or a GPU older
 * than compute capability 8.0.
 *
 * The SIMT kernels give one warp a row (a query for the forward and dQ, a key for dK and dV) and
 * walk the other side 32 rows at a time, one per lane: the lane's score is its own dot product in
 * float, the online softmax's max and sum are warp reductions in a fixed order, and each lane
 * accumulates hs / 32 of the row's output columns from the 32 weights, which the lanes leave in
 * shared memory for each other (one __syncwarp instead of 32 shuffles). dK and dV
 * sum every query head that shares the key/value head, in order: no atomics, so every run gives
 * the same bits.
 *
 * Packed rows (attn_shape's doc_start, doc_end): a query walks only its own document's keys, from
 * the document's start up to itself, and a key only the queries from itself to its document's
 * end, so every chunk starts at the first visible row and nothing before it is read; the bounds
 * are clamped into the row (attention_internal.h). Without them the walks are the causal ones,
 * the same instructions and bits as before packing. Arguments arrive checked
 * (device_check_attention.c); launchers never wait. This file must not hold the tensor-core
 * kernels. */
#include "kernel_common.cuh"
#include "attention_internal.h"

using ddp_kernels::from_float;
using ddp_kernels::grid_for;
using ddp_kernels::kFullMask;
using ddp_kernels::load_pack;
using ddp_kernels::pack;
using ddp_kernels::to_float;
using ddp_kernels::warp_sum;

constexpr int kSimtWarps = 4, kSimtThreads = 32 * kSimtWarps, kMaxHs = 256;

__device__ inline float warp_max(float v)
{
    for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
    return v;
}

/* Row t of head `head` of sequence b of a tensor with row stride ld. */
template <typename E> __device__ inline const E *row_ptr(const void *base, const attn_args &a, int64_t b, int64_t t,
                                                         int64_t ld, int64_t head)
{
    return static_cast<const E *>(base) + (b * a.T + t) * ld + head * a.hs;
}

/* The warp's copy of one row (hs floats) in shared memory, for the lanes' dot products; the caller
 * syncs the warp once its rows are staged. No sync is needed before staging: the lanes' last reads
 * of the previous row's copy came before that row's last chunk's closing __syncwarp. */
template <typename E> __device__ inline void stage_row(float *dst, const E *src, int64_t hs)
{
    for (int64_t i = threadIdx.x & 31; i < hs; i += 32) dst[i] = to_float(src[i]);
}

/* x·y over hs columns, x a staged row: x is read a pack of four at a time (one 16-byte shared
 * load that every lane of the warp reads at once, a broadcast; a quarter of the shared-memory
 * instructions), the sum taken in column order either way. */
template <typename E> __device__ inline float dot_row(const float *x, const E *y, int64_t hs)
{
    float acc = 0.0f;
    int64_t i = 0;
    for (; i + 4 <= hs; i += 4) {
        const pack<float, 4> xs = load_pack<4>(x, (size_t)i / 4);
        for (int u = 0; u < 4; u++) acc = fmaf(xs.v[u], to_float(y[i + u]), acc);
    }
    for (; i < hs; i++) acc = fmaf(x[i], to_float(y[i]), acc);
    return acc;
}

/* Weight jj (of 32) of a warp's chunk, read as dot_row reads x: a pack of four at a time. The
 * caller reads them in order, so each pack is loaded once, when its first weight is asked for. A
 * pack may run past the chunk's last visible row: every lane wrote its weight of this chunk before
 * the __syncwarp, so those are this chunk's values (unused), never another chunk's. */
struct staged_weights {
    const float *w;
    pack<float, 4> cur = {};
    __device__ inline float at(int jj)
    {
        if (jj % 4 == 0) cur = load_pack<4>(w, (size_t)jj / 4);
        return cur.v[jj % 4];
    }
};

/* The lane's columns lane + 32·i of an output row, scaled, stored. */
template <typename E, int DPL> __device__ inline void store_cols(E *dst, const float (&acc)[DPL], float f, int64_t hs)
{
    const int lane = threadIdx.x & 31;
    for (int i = 0; i < DPL; i++)
        if (lane + 32 * i < hs) dst[lane + 32 * i] = from_float<E>(acc[i] * f);
}

/* ---- forward ------------------------------------------------------------------------------- */

template <typename E, int DPL> __global__ void __launch_bounds__(kSimtThreads, 4) ddp_attention_forward_simt_kernel(attn_args a)
{
    __shared__ __align__(16) float qrow[kSimtWarps][kMaxHs];
    __shared__ __align__(16) float weights[kSimtWarps][32];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t rows = a.B * a.NH * a.T;
    for (int64_t r = (int64_t)blockIdx.x * kSimtWarps + warp; r < rows; r += (int64_t)gridDim.x * kSimtWarps) {
        const int64_t t = r % a.T, bh = r / a.T, b = bh / a.NH, h = bh % a.NH, kvh = h / (a.NH / a.NKV);
        stage_row(qrow[warp], row_ptr<E>(a.q, a, b, t, a.ld_q, h), a.hs);
        __syncwarp(); /* every lane reads the whole staged row */
        float m = -INFINITY, l = 0.0f, o[DPL] = {};
        for (int64_t k0 = attn_doc_start(a, b, t); k0 <= t; k0 += 32) { /* its document's keys up to t */
            const int64_t kj = k0 + lane;
            const float s = kj <= t ? a.scale * dot_row(qrow[warp], row_ptr<E>(a.k, a, b, kj, a.ld_kv, kvh), a.hs)
                                    : -INFINITY;
            const float m_new = fmaxf(m, warp_max(s)); /* key k0 is visible: finite */
            const float alpha = expf(m - m_new), p = expf(s - m_new);
            l = l * alpha + warp_sum(p);
            m = m_new;
            weights[warp][lane] = p;
            __syncwarp(); /* every lane reads the chunk's 32 weights */
            for (int i = 0; i < DPL; i++) o[i] *= alpha;
            const int64_t n = t - k0 + 1 < 32 ? t - k0 + 1 : 32;
            staged_weights w{weights[warp]};
            for (int jj = 0; jj < n; jj++) {
                const float pj = w.at(jj);
                const E *vrow = row_ptr<E>(a.v, a, b, k0 + jj, a.ld_kv, kvh);
                for (int i = 0; i < DPL; i++)
                    if (lane + 32 * i < a.hs) o[i] = fmaf(pj, to_float(vrow[lane + 32 * i]), o[i]);
            }
            __syncwarp(); /* weights is rewritten by the next chunk, qrow by the next row */
        }
        store_cols<E, DPL>(static_cast<E *>(a.o) + (b * a.T + t) * a.ld_o + h * a.hs, o, 1.0f / l, a.hs);
        if (lane == 0) a.lse_out[r] = m + logf(l);
    }
}

/* ---- backward ------------------------------------------------------------------------------ */

/* drow[(b·NH + h)·T + t] = dout · out of that row, in float, one warp per row. */
template <typename E> __global__ void __launch_bounds__(kSimtThreads, 4) ddp_attention_row_dots_kernel(attn_args a)
{
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t rows = a.B * a.NH * a.T;
    for (int64_t r = (int64_t)blockIdx.x * kSimtWarps + warp; r < rows; r += (int64_t)gridDim.x * kSimtWarps) {
        const int64_t t = r % a.T, bh = r / a.T, b = bh / a.NH, h = bh % a.NH;
        const E *dout = row_ptr<E>(a.dout, a, b, t, a.ld_o, h), *out = row_ptr<E>(a.out, a, b, t, a.ld_o, h);
        float acc = 0.0f;
        for (int64_t i = lane; i < a.hs; i += 32) acc = fmaf(to_float(dout[i]), to_float(out[i]), acc);
        acc = warp_sum(acc);
        if (lane == 0) a.drow[r] = acc;
    }
}

/* dQ: one warp per query row, keys from its document's start (0 unpacked) to t. */
template <typename E, int DPL> __global__ void __launch_bounds__(kSimtThreads, 4) ddp_attention_dq_simt_kernel(attn_args a)
{
    __shared__ __align__(16) float rows_smem[kSimtWarps][2][kMaxHs];
    __shared__ __align__(16) float weights[kSimtWarps][32];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t rows = a.B * a.NH * a.T;
    for (int64_t r = (int64_t)blockIdx.x * kSimtWarps + warp; r < rows; r += (int64_t)gridDim.x * kSimtWarps) {
        const int64_t t = r % a.T, bh = r / a.T, b = bh / a.NH, h = bh % a.NH, kvh = h / (a.NH / a.NKV);
        float *q = rows_smem[warp][0], *dout = rows_smem[warp][1];
        stage_row(q, row_ptr<E>(a.q, a, b, t, a.ld_q, h), a.hs);
        stage_row(dout, row_ptr<E>(a.dout, a, b, t, a.ld_o, h), a.hs);
        __syncwarp(); /* every lane reads the whole staged rows */
        const float lse = a.lse_in[r], D = a.drow[r];
        float dq[DPL] = {};
        for (int64_t k0 = attn_doc_start(a, b, t); k0 <= t; k0 += 32) {
            const int64_t kj = k0 + lane;
            float ds = 0.0f;
            if (kj <= t) {
                const float p = expf(a.scale * dot_row(q, row_ptr<E>(a.k, a, b, kj, a.ld_kv, kvh), a.hs) - lse);
                ds = p * (dot_row(dout, row_ptr<E>(a.v, a, b, kj, a.ld_kv, kvh), a.hs) - D);
            }
            weights[warp][lane] = ds;
            __syncwarp(); /* every lane reads the chunk's 32 dS */
            const int64_t n = t - k0 + 1 < 32 ? t - k0 + 1 : 32;
            staged_weights w{weights[warp]};
            for (int jj = 0; jj < n; jj++) {
                const float dsj = w.at(jj);
                const E *krow = row_ptr<E>(a.k, a, b, k0 + jj, a.ld_kv, kvh);
                for (int i = 0; i < DPL; i++)
                    if (lane + 32 * i < a.hs) dq[i] = fmaf(dsj, to_float(krow[lane + 32 * i]), dq[i]);
            }
            __syncwarp(); /* weights is rewritten by the next chunk, the staged rows by the next row */
        }
        store_cols<E, DPL>(static_cast<E *>(a.dq) + (b * a.T + t) * a.ld_q + h * a.hs, dq, a.scale, a.hs);
    }
}

/* dK, dV: one warp per key row, every query head of its group in order, queries from t to its
 * document's end (T unpacked). */
template <typename E, int DPL> __global__ void __launch_bounds__(kSimtThreads, 4) ddp_attention_dkdv_simt_kernel(attn_args a)
{
    __shared__ __align__(16) float rows_smem[kSimtWarps][2][kMaxHs];
    __shared__ __align__(16) float weights[kSimtWarps][2][32];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t rows = a.B * a.NKV * a.T, group = a.NH / a.NKV;
    for (int64_t r = (int64_t)blockIdx.x * kSimtWarps + warp; r < rows; r += (int64_t)gridDim.x * kSimtWarps) {
        const int64_t t = r % a.T, bkv = r / a.T, b = bkv / a.NKV, kvh = bkv % a.NKV;
        const int64_t end = attn_doc_end(a, b, t);
        float *k = rows_smem[warp][0], *v = rows_smem[warp][1];
        stage_row(k, row_ptr<E>(a.k, a, b, t, a.ld_kv, kvh), a.hs);
        stage_row(v, row_ptr<E>(a.v, a, b, t, a.ld_kv, kvh), a.hs);
        __syncwarp(); /* every lane reads the whole staged rows */
        float dk[DPL] = {}, dv[DPL] = {};
        for (int64_t h = kvh * group; h < (kvh + 1) * group; h++) {
            const int64_t bh = b * a.NH + h;
            for (int64_t q0 = t; q0 < end; q0 += 32) {
                const int64_t qj = q0 + lane;
                float p = 0.0f, ds = 0.0f;
                if (qj < end) {
                    p = expf(a.scale * dot_row(k, row_ptr<E>(a.q, a, b, qj, a.ld_q, h), a.hs) - a.lse_in[bh * a.T + qj]);
                    ds = p * (dot_row(v, row_ptr<E>(a.dout, a, b, qj, a.ld_o, h), a.hs) - a.drow[bh * a.T + qj]);
                }
                weights[warp][0][lane] = p;
                weights[warp][1][lane] = ds;
                __syncwarp(); /* every lane reads the chunk's 32 p and dS */
                const int64_t n = end - q0 < 32 ? end - q0 : 32;
                staged_weights wp{weights[warp][0]}, wds{weights[warp][1]};
                for (int jj = 0; jj < n; jj++) {
                    const float pj = wp.at(jj), dsj = wds.at(jj);
                    const E *qrow = row_ptr<E>(a.q, a, b, q0 + jj, a.ld_q, h);
                    const E *drow = row_ptr<E>(a.dout, a, b, q0 + jj, a.ld_o, h);
                    for (int i = 0; i < DPL; i++)
                        if (lane + 32 * i < a.hs) {
                            dv[i] = fmaf(pj, to_float(drow[lane + 32 * i]), dv[i]);
                            dk[i] = fmaf(dsj, to_float(qrow[lane + 32 * i]), dk[i]);
                        }
                }
                __syncwarp(); /* weights is rewritten by the next chunk, the staged rows by the next row */
            }
        }
        store_cols<E, DPL>(static_cast<E *>(a.dk) + (b * a.T + t) * a.ld_kv + kvh * a.hs, dk, a.scale, a.hs);
        store_cols<E, DPL>(static_cast<E *>(a.dv) + (b * a.T + t) * a.ld_kv + kvh * a.hs, dv, 1.0f, a.hs);
    }
}

/* ---- launchers ------------------------------------------------------------------------------- */

/* Runs STATEMENT with DPL, the columns per lane, a power of two covering hs (hs <= kMaxHs). */
#define DDP_DPL_SWITCH(hs, ...)                                                                     \
    do {                                                                                            \
        if ((hs) <= 32) { constexpr int DPL = 1; __VA_ARGS__; }                                     \
        else if ((hs) <= 64) { constexpr int DPL = 2; __VA_ARGS__; }                                \
        else if ((hs) <= 128) { constexpr int DPL = 4; __VA_ARGS__; }                               \
        else { constexpr int DPL = 8; __VA_ARGS__; }                                                \
    } while (0)

static int check_simt(const attn_args *a, ddp_err *err)
{
    if (a->hs > kMaxHs)
        return ddp_fail(err, DDP_ERUNTIME, "attention on CUDA: head size %lld is over %d (the tensor-core kernels "
                        "take 64 and 128 in bf16)", (long long)a->hs, kMaxHs);
    return DDP_OK;
}

static attn_args make_args(const attn_shape *s)
{
    attn_args a = {};
    a.B = s->B;
    a.T = s->T;
    a.NH = s->NH;
    a.NKV = s->NKV;
    a.hs = s->hs;
    a.ld_q = s->ld_q;
    a.ld_kv = s->ld_kv;
    a.ld_o = s->ld_o;
    a.scale = s->scale;
    a.doc_start = s->doc_start;
    a.doc_end = s->doc_end;
    return a;
}

extern "C" int device_cuda_attention_forward(device *d, tensor_dtype t, const attn_shape *s, void *out, float *lse,
                                             const void *q, const void *k, const void *v, ddp_err *err)
{
    attn_args a = make_args(s);
    a.q = q;
    a.k = k;
    a.v = v;
    a.o = out;
    a.lse_out = lse;
    if (t == TENSOR_BF16 && attention_tc_supports(d, &a))
        return attention_tc_forward(d, &a, err);
    int rc = check_simt(&a, err);
    if (rc)
        return rc;
    const unsigned grid = grid_for((size_t)(s->B * s->NH * s->T), kSimtWarps);
    DDP_DTYPE_SWITCH(t, E, DDP_DPL_SWITCH(s->hs, DDP_LAUNCH_OP((ddp_attention_forward_simt_kernel<E, DPL>), grid,
                                                               kSimtThreads, 0, a)));
    return DDP_OK;
}

extern "C" int device_cuda_attention_backward(device *d, tensor_dtype t, const attn_shape *s, void *dq, void *dk,
                                              void *dv, const void *dout, const void *out, const float *lse,
                                              const void *q, const void *k, const void *v, ddp_err *err)
{
    attn_args a = make_args(s);
    a.q = q;
    a.k = k;
    a.v = v;
    a.out = out;
    a.dout = dout;
    a.dq = dq;
    a.dk = dk;
    a.dv = dv;
    a.lse_in = lse;
    const size_t rows = (size_t)(s->B * s->NH * s->T);
    int rc = device_cuda_scratch(d, rows * sizeof(float), (void **)&a.drow, err);
    if (rc)
        return rc;
    const bool tc = t == TENSOR_BF16 && attention_tc_supports(d, &a);
    if (!tc && (rc = check_simt(&a, err)))
        return rc;
    DDP_DTYPE_SWITCH(t, E, DDP_LAUNCH_OP(ddp_attention_row_dots_kernel<E>, grid_for(rows, kSimtWarps), kSimtThreads,
                                         0, a));
    if (tc)
        return attention_tc_backward(d, &a, err);
    const unsigned grid_q = grid_for(rows, kSimtWarps), grid_kv = grid_for((size_t)(s->B * s->NKV * s->T), kSimtWarps);
    DDP_DTYPE_SWITCH(t, E, DDP_DPL_SWITCH(s->hs,
                                          DDP_LAUNCH_OP((ddp_attention_dq_simt_kernel<E, DPL>), grid_q, kSimtThreads, 0,
                                                        a);
                                          DDP_LAUNCH_OP((ddp_attention_dkdv_simt_kernel<E, DPL>), grid_kv,
                                                        kSimtThreads, 0, a)));
    return DDP_OK;
}
