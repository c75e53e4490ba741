/* reduce.cu — the CUDA code of the reduction family (CPU: reduce_cpu.c): bias gradients (column
 * sums), fused softmax + cross-entropy with its loss/accuracy statistics, the two-pass sum of
 * squares behind the global gradient norm and the clip factor computed from it on the GPU; each
 * op's kernels and its host launcher.
 *
 * bias_grad and softmax_xent read tensors of their tensor_dtype: their kernels are templates on
 * the storage type (kernel_common.cuh) that widen each element to float and compute exactly as
 * the float kernels (the float instantiation is the float kernel, bit for bit). bias_grad's db
 * and the loss statistics stay float; softmax_xent's dlogits is rounded to bf16 once per element.
 *
 * All of them are deterministic: no atomics, every sum is combined in a fixed order that depends
 * only on the shape, so the same inputs give the same bits on every run and every GPU. Sums are
 * accumulated in double (the CPU code's precision for losses and norms). Intermediate results
 * live in the device's scratch memory; results stay in device memory and no launcher waits for
 * the GPU. Arguments arrive checked (device_check_*.c). This file must not hold element-wise kernels
 * (elementwise.cu). */
#include "kernel_common.cuh"

using ddp_kernels::block_argmax;
using ddp_kernels::block_sum;
using ddp_kernels::from_float;
using ddp_kernels::global_index;
using ddp_kernels::grid_for;
using ddp_kernels::grid_stride;
using ddp_kernels::kBlock;
using ddp_kernels::kSumChunkRows;
using ddp_kernels::kSumLanes;
using ddp_kernels::kVec;
using ddp_kernels::load_pack;
using ddp_kernels::pack;
using ddp_kernels::sum_chunk_partials;
using ddp_kernels::sum_chunks;
using ddp_kernels::store_pack;
using ddp_kernels::to_float;
using ddp_kernels::vec_width;

/* ---- bias_grad: db[c] = beta*db[c] + sum_r dy[r,c] -------------------------------------
 * kernel_common.cuh's two-stage column sum: one thread per (64-row chunk, pack of columns) adds
 * its chunk's rows in order into double partials, reading 16-byte packs where dy's rows are
 * aligned for them; then each column's partials are added in a fixed order. Both orders depend
 * only on rows, so any grid gives the same bits, and GPT-2's 65,536 x 768 gradient runs on 98,304
 * threads instead of the 24 blocks a block per 32 columns gave it. */
template <typename T, int W>
__global__ void ddp_bias_partials_kernel(const T *dy, double *part, size_t rows, size_t cols, size_t n_chunks)
{
    const size_t packs = cols / W;
    for (size_t i = global_index(); i < n_chunks * packs; i += grid_stride()) {
        const size_t chunk = i / packs, k = i % packs;
        const size_t r_end = (chunk + 1) * kSumChunkRows < rows ? (chunk + 1) * kSumChunkRows : rows;
        double acc[W];
        DDP_UNROLL
        for (int j = 0; j < W; j++) acc[j] = 0.0;
        for (size_t r = chunk * kSumChunkRows; r < r_end; r++) {
            const pack<T, W> v = load_pack<W>(dy + r * cols, k);
            DDP_UNROLL
            for (int j = 0; j < W; j++) acc[j] += (double)to_float(v.v[j]);
        }
        DDP_UNROLL
        for (int j = 0; j < W; j++) part[chunk * cols + k * W + j] = acc[j];
    }
}

__global__ void ddp_bias_sums_kernel(float *db, const double *part, size_t n_chunks, size_t cols, float beta)
{
    sum_chunk_partials(part, n_chunks, cols, [=](size_t c, double total) {
        db[c] = (beta == 0.0f ? 0.0f : beta * db[c]) + (float)total; /* beta 0: ignore NaN garbage */
    });
}

/* rows may be 0 (its contract lets it through: beta 0 still clears db); dy is not read then. */
extern "C" int device_cuda_bias_grad(device *d, tensor_dtype t, const void *dy, float *db, int64_t rows, int64_t cols,
                                     float beta, ddp_err *err)
{
    const size_t n_chunks = sum_chunks((size_t)rows), C = (size_t)cols;
    double *part = NULL; /* [n_chunks][cols] */
    if (n_chunks > 0) {
        int rc = device_cuda_scratch(d, sizeof(double) * n_chunks * C, (void **)&part, err);
        if (rc) return rc;
        DDP_DTYPE_SWITCH(t, T,
                         const T *y = static_cast<const T *>(dy);
                         if (vec_width<T>(C, {dy}) > 1)
                             DDP_LAUNCH_OP((ddp_bias_partials_kernel<T, kVec<T>>),
                                           grid_for(n_chunks * (C / kVec<T>), kBlock), kBlock, 0, y, part,
                                           (size_t)rows, C, n_chunks);
                         else
                             DDP_LAUNCH_OP((ddp_bias_partials_kernel<T, 1>), grid_for(n_chunks * C, kBlock), kBlock,
                                           0, y, part, (size_t)rows, C, n_chunks));
    }
    DDP_LAUNCH_OP(ddp_bias_sums_kernel, grid_for(C, 32), dim3(32, kSumLanes), 0, db, part, n_chunks, C, beta);
    return DDP_OK;
}

/* ---- softmax cross-entropy ----------------------------------------------------------------
 * One block per row (grid-stride over rows), threads stride over the columns in packs of W
 * (16-byte accesses where the rows allow), so rows of any length work; rows are ld apart and
 * columns cols..ld-1 are padding (dlogits gets 0 there). The row is read twice: once for its
 * maximum (the first index of it: PyTorch's argmax) and the sum of exp(x - max), kept online per
 * thread (the sum in double, rescaled when the thread's maximum grows, a thread visiting its
 * columns in increasing order) and combined over the block in a fixed tree; once more for dlogits
 * = (exp(x - max) / sum - [c == label]) · grad_scale, in float with the quotient's reciprocal
 * rounded once. Per-row results go to row_stats; ddp_xent_stats_kernel then sums them in order.
 * dlogits may be logits itself: every read of the row other than a thread's own elements (the max,
 * the sum, the label's logit) happens before the block-wide reductions' barriers, and the
 * gradient pass reads each pack just before the same thread overwrites it. */
__device__ inline void xent_online(float v, long long c, float *m, long long *arg, double *s)
{
    if (v > *m) { /* strict: within a thread the first maximum stays */
        *s = *s * (double)expf(*m - v) + 1.0;
        *m = v;
        *arg = c;
    } else if (v != -INFINITY) { /* a masked class adds nothing: exp(-inf - -inf) would be NaN */
        *s += (double)expf(v - *m);
    }
}

template <typename T, int W>
__global__ void ddp_softmax_xent_kernel(const T *logits, size_t ld, const int32_t *labels, size_t rows, size_t cols,
                                        float grad_scale, T *dlogits, float *row_stats)
{
    __shared__ float max_scratch[33];
    __shared__ long long arg_scratch[33];
    __shared__ double sum_scratch[33];
    const size_t packs = cols / W;
    for (size_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const T *x = logits + r * ld;
        const int32_t label = labels[r];
        if (label == XENT_NO_TARGET) { /* the whole block skips the row alike: no barrier is split */
            if (threadIdx.x == 0) {
                row_stats[2 * r] = 0.0f;
                row_stats[2 * r + 1] = 0.0f;
            }
            if (dlogits)
                for (size_t c = threadIdx.x; c < ld; c += blockDim.x) dlogits[r * ld + c] = from_float<T>(0.0f);
            continue;
        }
        const bool label_ok = label >= 0 && (size_t)label < cols;
        const float x_label = label_ok ? to_float(x[label]) : 0.0f; /* read before any thread can overwrite it */
        float best = -INFINITY;
        long long arg = (long long)INT64_MAX;
        double sum = 0.0;
        for (size_t k = threadIdx.x; k < packs; k += blockDim.x) {
            const pack<T, W> v = load_pack<W>(x, k);
            for (int j = 0; j < W; j++) xent_online(to_float(v.v[j]), (long long)(k * W + j), &best, &arg, &sum);
        }
        for (size_t c = packs * W + threadIdx.x; c < cols; c += blockDim.x)
            xent_online(to_float(x[c]), (long long)c, &best, &arg, &sum);
        const float mine = best;
        block_argmax(&best, &arg, max_scratch, arg_scratch);
        sum = block_sum(mine == -INFINITY ? 0.0 : sum * (double)expf(mine - best), sum_scratch);

        if (threadIdx.x == 0) {
            const double lse = (double)best + log(sum);
            row_stats[2 * r] = label_ok ? (float)(lse - (double)x_label) : NAN;
            row_stats[2 * r + 1] = label_ok && arg == (long long)label ? 1.0f : 0.0f;
        }
        if (dlogits) {
            T *dl = dlogits + r * ld;
            const float inv = (float)(1.0 / sum);
            auto grad = [&](float v, size_t c) {
                return from_float<T>((expf(v - best) * inv - ((size_t)label == c ? 1.0f : 0.0f)) * grad_scale);
            };
            for (size_t k = threadIdx.x; k < packs; k += blockDim.x) {
                const pack<T, W> v = load_pack<W>(x, k);
                pack<T, W> o;
                for (int j = 0; j < W; j++) o.v[j] = grad(to_float(v.v[j]), k * W + j);
                store_pack<W>(dl, k, o);
            }
            for (size_t c = packs * W + threadIdx.x; c < cols; c += blockDim.x) dl[c] = grad(to_float(x[c]), c);
            for (size_t c = cols + threadIdx.x; c < ld; c += blockDim.x) dl[c] = from_float<T>(0.0f);
        }
    }
}

/* stats[0] += sum of row losses, stats[1] += sum of correct flags; one block, fixed order. */
__global__ void ddp_xent_stats_kernel(const float *row_stats, size_t rows, float *stats)
{
    __shared__ double scratch[33];
    double loss = 0.0, correct = 0.0;
    for (size_t r = threadIdx.x; r < rows; r += blockDim.x) {
        loss += (double)row_stats[2 * r];
        correct += (double)row_stats[2 * r + 1];
    }
    loss = block_sum(loss, scratch);
    correct = block_sum(correct, scratch);
    if (threadIdx.x == 0) {
        stats[0] += (float)loss;
        stats[1] += (float)correct;
    }
}

/* Threads per softmax row: the columns rounded up to a warp, at most kBlock. */
static unsigned xent_block(size_t cols)
{
    const size_t warps = cols / 32 + (cols % 32 != 0);
    const size_t threads = warps * 32;
    return (unsigned)(threads < 32 ? 32 : threads > kBlock ? kBlock : threads);
}

/* A label outside [0, cols) other than XENT_NO_TARGET cannot be reported without waiting on the
 * GPU: it makes that row's loss, and so the loss sum, NaN instead. */
extern "C" int device_cuda_softmax_xent(device *d, tensor_dtype t, const void *logits, int64_t ld,
                                        const int32_t *labels, int64_t rows, int64_t cols, float grad_scale,
                                        void *dlogits, float *stats, ddp_err *err)
{
    float *row_stats = NULL; /* per-row (loss, correct) pairs */
    int rc = device_cuda_scratch(d, 2 * sizeof(float) * (size_t)rows, (void **)&row_stats, err);
    if (rc) return rc;
    const unsigned grid = grid_for((size_t)rows, 1), block = xent_block((size_t)cols);
    DDP_DTYPE_SWITCH(t, T,
                     const T *x = static_cast<const T *>(logits);
                     T *dx = static_cast<T *>(dlogits);
                     if (vec_width<T>((size_t)ld, {logits, dlogits}) == kVec<T>)
                         DDP_LAUNCH_OP((ddp_softmax_xent_kernel<T, kVec<T>>), grid, block, 0, x, (size_t)ld, labels,
                                       (size_t)rows, (size_t)cols, grad_scale, dx, row_stats);
                     else
                         DDP_LAUNCH_OP((ddp_softmax_xent_kernel<T, 1>), grid, block, 0, x, (size_t)ld, labels,
                                       (size_t)rows, (size_t)cols, grad_scale, dx, row_stats));
    DDP_LAUNCH_OP(ddp_xent_stats_kernel, 1, kBlock, 0, row_stats, (size_t)rows, stats);
    return DDP_OK;
}

/* ---- sum of squares: per-block partials, then one block adds them in block order ---------- */
__global__ void ddp_sumsq_partial_kernel(const float *x, size_t n, double *partials)
{
    __shared__ double scratch[33];
    double acc = 0.0;
    for (size_t i = global_index(); i < n; i += grid_stride()) acc += (double)x[i] * (double)x[i];
    acc = block_sum(acc, scratch);
    if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

__global__ void ddp_sumsq_final_kernel(const double *partials, unsigned n_partials, double *out)
{
    __shared__ double scratch[33];
    double acc = 0.0;
    for (unsigned i = threadIdx.x; i < n_partials; i += blockDim.x) acc += partials[i];
    acc = block_sum(acc, scratch);
    if (threadIdx.x == 0) *out = acc;
}

/* n == 0 runs one partial block over nothing (x is never read): out gets 0. */
extern "C" int device_cuda_sumsq(device *d, const float *x, size_t n, double *out, ddp_err *err)
{
    const unsigned blocks = grid_for(n, kBlock); /* partial sums, then one block for the total */
    double *partials = NULL;
    int rc = device_cuda_scratch(d, sizeof(double) * blocks, (void **)&partials, err);
    if (rc) return rc;
    DDP_LAUNCH_OP(ddp_sumsq_partial_kernel, blocks, kBlock, 0, x, n, partials);
    DDP_LAUNCH_OP(ddp_sumsq_final_kernel, 1, kBlock, 0, partials, blocks, out);
    return DDP_OK;
}

/* One block adds the doubles in the sumsq final kernel's order. */
extern "C" int device_cuda_sum_f64(device *d, const double *x, size_t n, double *out, ddp_err *err)
{
    DDP_LAUNCH_OP(ddp_sumsq_final_kernel, 1, kBlock, 0, x, (unsigned)n, out);
    return DDP_OK;
}

/* ---- clip factor: one thread, the CPU code's double arithmetic -------------------------------
 * sqrt and division in double are correctly rounded on the GPU, and there is no a*b+c for nvcc
 * to contract, so the same *sumsq gives the CPU backend's bits. */
__global__ void ddp_clip_scale_kernel(const double *sumsq, double max_norm, float *scale)
{
    const double coef = max_norm / (sqrt(*sumsq) + 1e-6);
    *scale = coef >= 1.0 ? 1.0f : (float)coef; /* NaN norm: NaN; infinite norm: 0 */
}

extern "C" int device_cuda_clip_scale(device *d, const double *sumsq, double max_norm, float *scale, ddp_err *err)
{
    DDP_LAUNCH_OP(ddp_clip_scale_kernel, 1, 1, 0, sumsq, max_norm, scale);
    return DDP_OK;
}
