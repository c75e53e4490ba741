/* embedding.cu — the CUDA code of the token and position embeddings, part of the transformer family
 * (CPU: embedding_cpu.c): the forward gather, and the backward's scatter-add into dwte and column
 * sums into dwpe; each op's kernels and its host launcher.
 *
 * dwte: a token can occur at many positions, so rows of dwte are not independent outputs. The
 * positions are sorted by token on the device (a stable LSD radix sort, 8 bits a pass, as many
 * passes as V needs: two for GPT-2's vocabulary; counts, an exclusive scan and a scatter per pass,
 * all in integers), each token's run of positions is found by binary search, and one warp per
 * (token, 32 packs of columns) adds the run's dout rows in position order in float onto dwte's
 * row. That is the CPU code's order of additions for every element, so the bits are the CPU's, and
 * GPT-2's 65,536 positions spread over ~50,000 x 3 warp tasks instead of 768 threads walking all of
 * them. The host never waits: the sort's sizes are known at launch. A token's run is one warp's
 * serial loop, so the most frequent token bounds the time (~2,500 of 65,536 in English text).
 * dwpe[p,c] += the sum of dout[b,t,c] over the (b,t) at position p: one thread per pack of (p, c),
 * the sum in double over (b,t) in order, rounded once, as the CPU does. In packed rows a position
 * is its offset in its document (p = t - doc_start), and the thread walks each row's documents
 * (doc_walk.h) instead of reading one t per row. Without a position table (wpe, dwpe NULL: RoPE
 * places positions) the forward copies the token rows (a template flag, so both keep the
 * vectorised packs) and the backward has no dwpe sums.
 *
 * Where rows are 16-byte aligned, every row access moves packs of kVec<E> elements. Arguments
 * arrive checked (device_check_*.c); token ids are trusted to lie in [0, V) by the forward, and the
 * backward skips any outside it rather than write outside dwte. This file must not hold other
 * ops. */
#include "kernel_common.cuh"
#include "runtime/device/kernels/doc_walk.h"

using ddp_kernels::all_aligned;
using ddp_kernels::from_float;
using ddp_kernels::global_index;
using ddp_kernels::grid_for;
using ddp_kernels::grid_stride;
using ddp_kernels::kBlock;
using ddp_kernels::kFullMask;
using ddp_kernels::kVec;
using ddp_kernels::load_pack;
using ddp_kernels::pack;
using ddp_kernels::store_pack;
using ddp_kernels::to_float;
using ddp_kernels::vec_width;

/* ---- forward ---------------------------------------------------------------------------------- */

/* Positions: wpe is added (else there is none: out is the token rows as they are). */
template <typename E, int W, bool Positions>
__global__ void ddp_embedding_forward_kernel(E *out, const int32_t *tokens, const E *wte, const E *wpe,
                                             const int32_t *doc_start, size_t T, size_t C, size_t BT)
{
    const size_t packs = C / W;
    for (size_t i = global_index(); i < BT * packs; i += grid_stride()) {
        const size_t bt = i / packs, k = i % packs;
        pack<E, W> o = load_pack<W>(wte + (size_t)tokens[bt] * C, k);
        if (Positions) {
            const size_t p = (size_t)ddp_doc_offset(doc_start ? doc_start + bt : NULL, (int64_t)(bt % T));
            const pack<E, W> pe = load_pack<W>(wpe + p * C, k);
            DDP_UNROLL
            for (int q = 0; q < W; q++) o.v[q] = from_float<E>(to_float(o.v[q]) + to_float(pe.v[q]));
        }
        store_pack<W>(out + bt * C, k, o);
    }
}

template <typename E, bool Positions>
static int launch_embedding_forward(device *d, E *out, const int32_t *tokens, const E *wte, const E *wpe,
                                    const int32_t *doc_start, size_t T, size_t C, size_t BT, ddp_err *err)
{
    if (vec_width<E>(C, {out, wte, wpe}) > 1)
        DDP_LAUNCH_OP((ddp_embedding_forward_kernel<E, kVec<E>, Positions>), grid_for(BT * (C / kVec<E>), kBlock),
                      kBlock, 0, out, tokens, wte, wpe, doc_start, T, C, BT);
    else
        DDP_LAUNCH_OP((ddp_embedding_forward_kernel<E, 1, Positions>), grid_for(BT * C, kBlock), kBlock, 0, out,
                      tokens, wte, wpe, doc_start, T, C, BT);
    return DDP_OK;
}

extern "C" int device_cuda_embedding_forward(device *d, tensor_dtype t, void *out, const int32_t *tokens,
                                             const void *wte, const void *wpe, const int32_t *doc_start, int64_t B,
                                             int64_t T, int64_t C, ddp_err *err)
{
    const size_t BT = (size_t)B * (size_t)T, cols = (size_t)C;
    DDP_DTYPE_SWITCH(t, E,
                     E *o = static_cast<E *>(out);
                     const E *te = static_cast<const E *>(wte);
                     const E *pe = static_cast<const E *>(wpe);
                     return pe ? launch_embedding_forward<E, true>(d, o, tokens, te, pe, doc_start, (size_t)T, cols, BT,
                                                                   err)
                               : launch_embedding_forward<E, false>(d, o, tokens, te, pe, NULL, (size_t)T, cols, BT,
                                                                    err));
    return DDP_OK;
}

/* ---- the token sort ----------------------------------------------------------------------------
 * Keys are token ids (V for one outside [0, V)), values their positions, both uint32. A pass
 * sorts by the digit (key >> shift) & 255, stably: tiles of kSortTile elements count their digits
 * (counts[digit][tile]), one block scans the counts into each (digit, tile)'s first slot, and each
 * tile scatters its elements there in order. Integer atomics only count, so every pass's output is
 * the same for any schedule. */
constexpr unsigned kSortBlock = 256;   /* = the 256 digits: thread d owns digit d's counters */
constexpr size_t kSortTile = 1024;     /* elements per tile: 4 rounds of kSortBlock */
constexpr unsigned kScanBlock = 1024;

__global__ void ddp_sort_init_kernel(uint32_t *keys, uint32_t *vals, const int32_t *tokens, size_t n, uint32_t V)
{
    for (size_t i = global_index(); i < n; i += grid_stride()) {
        const int32_t tok = tokens[i];
        keys[i] = tok >= 0 && (uint32_t)tok < V ? (uint32_t)tok : V;
        vals[i] = (uint32_t)i;
    }
}

__global__ void ddp_sort_count_kernel(uint32_t *counts, const uint32_t *keys, size_t n, unsigned shift, size_t n_tiles)
{
    __shared__ unsigned hist[kSortBlock];
    for (size_t tile = blockIdx.x; tile < n_tiles; tile += gridDim.x) {
        hist[threadIdx.x] = 0;
        __syncthreads();
        const size_t end = (tile + 1) * kSortTile < n ? (tile + 1) * kSortTile : n;
        for (size_t i = tile * kSortTile + threadIdx.x; i < end; i += kSortBlock)
            atomicAdd(&hist[(keys[i] >> shift) & 255u], 1u);
        __syncthreads();
        counts[threadIdx.x * n_tiles + tile] = hist[threadIdx.x];
        __syncthreads(); /* hist is cleared for the next tile */
    }
}

/* Exclusive prefix sum of x[0, n) in place, in one block of kScanBlock threads: each thread's
 * contiguous segment is summed, the segment sums are scanned with warp shuffles, and each
 * segment is rewritten from its prefix. The total (at most the 2^32 - 1 positions) fits uint32. */
__global__ void ddp_sort_scan_kernel(uint32_t *x, size_t n)
{
    __shared__ unsigned warp_totals[32];
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    const size_t seg = n / kScanBlock + (n % kScanBlock != 0);
    const size_t begin = threadIdx.x * seg < n ? threadIdx.x * seg : n, end = begin + seg < n ? begin + seg : n;
    unsigned sum = 0;
    for (size_t i = begin; i < end; i++) sum += x[i];
    unsigned incl = sum;
    for (int off = 1; off < 32; off <<= 1) {
        const unsigned y = __shfl_up_sync(kFullMask, incl, off);
        if ((int)lane >= off) incl += y;
    }
    if (lane == 31) warp_totals[warp] = incl;
    __syncthreads();
    if (warp == 0) {
        unsigned tot = warp_totals[lane], tincl = tot;
        for (int off = 1; off < 32; off <<= 1) {
            const unsigned y = __shfl_up_sync(kFullMask, tincl, off);
            if ((int)lane >= off) tincl += y;
        }
        warp_totals[lane] = tincl - tot; /* the warps before this one */
    }
    __syncthreads();
    unsigned run = warp_totals[warp] + incl - sum;
    for (size_t i = begin; i < end; i++) {
        const unsigned v = x[i];
        x[i] = run;
        run += v;
    }
}

/* Each tile's elements in rounds of kSortBlock, in index order: an element's slot is its digit's
 * next slot for this tile (run), plus the same-digit elements of earlier warps in the round
 * (wcount), plus those of earlier lanes in its warp (found with eight ballots, one per digit bit). */
__global__ void ddp_sort_scatter_kernel(uint32_t *keys_out, uint32_t *vals_out, const uint32_t *keys_in,
                                        const uint32_t *vals_in, size_t n, unsigned shift, const uint32_t *starts,
                                        size_t n_tiles)
{
    __shared__ unsigned run[kSortBlock];
    __shared__ unsigned wcount[kSortBlock / 32][kSortBlock];
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    for (size_t tile = blockIdx.x; tile < n_tiles; tile += gridDim.x) {
        run[threadIdx.x] = starts[threadIdx.x * n_tiles + tile];
        for (size_t base = tile * kSortTile; base < (tile + 1) * kSortTile && base < n; base += kSortBlock) {
            const size_t i = base + threadIdx.x;
            const bool valid = i < n;
            const uint32_t key = valid ? keys_in[i] : 0u, val = valid ? vals_in[i] : 0u;
            const unsigned digit = (key >> shift) & 255u;
            unsigned peers = __ballot_sync(kFullMask, valid);
            for (int bit = 0; bit < 8; bit++) {
                const unsigned ones = __ballot_sync(kFullMask, (digit >> bit) & 1u);
                peers &= (digit >> bit) & 1u ? ones : ~ones;
            }
            const unsigned rank = (unsigned)__popc(peers & ((1u << lane) - 1u));
            for (unsigned w = 0; w < kSortBlock / 32; w++) wcount[w][threadIdx.x] = 0;
            __syncthreads(); /* also publishes run[] on the first round */
            if (valid && rank == 0) wcount[warp][digit] = (unsigned)__popc(peers);
            __syncthreads();
            if (valid) {
                unsigned slot = run[digit] + rank;
                for (unsigned w = 0; w < warp; w++) slot += wcount[w][digit];
                keys_out[slot] = key;
                vals_out[slot] = val;
            }
            __syncthreads();
            unsigned round_count = 0;
            for (unsigned w = 0; w < kSortBlock / 32; w++) round_count += wcount[w][threadIdx.x];
            run[threadIdx.x] += round_count;
            __syncthreads(); /* run[] and wcount[] are read and cleared by the next round */
        }
    }
}

/* offsets[v] = the first index of the sorted keys holding v or more, v in [0, V]: token v's
 * positions are vals[offsets[v], offsets[v + 1]). */
__global__ void ddp_sort_offsets_kernel(uint32_t *offsets, const uint32_t *keys, size_t n, uint32_t V)
{
    for (size_t v = global_index(); v <= V; v += grid_stride()) {
        size_t lo = 0, hi = n;
        while (lo < hi) {
            const size_t mid = lo + (hi - lo) / 2;
            if (keys[mid] < v) lo = mid + 1;
            else hi = mid;
        }
        offsets[v] = (uint32_t)lo;
    }
}

/* ---- backward ------------------------------------------------------------------------------------ */

/* One warp per (token v, 32 packs of columns): lane l adds pack ct·32 + l of every dout row of v's
 * run, in position order, onto dwte's row in float. */
template <typename E, int W>
__global__ void ddp_embedding_backward_wte_kernel(float *dwte, const E *dout, const uint32_t *vals,
                                                  const uint32_t *offsets, size_t V, size_t C)
{
    const unsigned lane = threadIdx.x & 31u;
    const size_t packs = C / W, n_ctiles = (packs + 31) / 32, n_warps = grid_stride() / 32;
    for (size_t task = global_index() / 32; task < V * n_ctiles; task += n_warps) {
        const size_t v = task / n_ctiles, k = task % n_ctiles * 32 + lane;
        const uint32_t lo = offsets[v], hi = offsets[v + 1];
        if (lo == hi || k >= packs) continue;
        pack<float, W> acc = load_pack<W>(dwte + v * C, k);
        for (uint32_t i = lo; i < hi; i++) {
            const pack<E, W> g = load_pack<W>(dout + (size_t)vals[i] * C, k);
            DDP_UNROLL
            for (int q = 0; q < W; q++) acc.v[q] += to_float(g.v[q]);
        }
        store_pack<W>(dwte + v * C, k, acc);
    }
}

/* dwpe[p,c] += Σ dout[b,t,c] over the (b,t) at position p: one thread per pack of the T·C
 * entries, double over (b,t) in order. */
template <typename E, int W>
__global__ void ddp_embedding_backward_wpe_kernel(float *dwpe, const E *dout, const int32_t *doc_start,
                                                  const int32_t *doc_end, size_t B, size_t T, size_t C)
{
    const size_t packs = C / W;
    for (size_t k = global_index(); k < T * packs; k += grid_stride()) {
        const size_t p = k / packs, col = k % packs;
        double acc[W];
        DDP_UNROLL
        for (int q = 0; q < W; q++) acc[q] = 0.0;
        for (size_t b = 0; b < B; b++) {
            const int32_t *s = doc_start ? doc_start + b * T : NULL, *e = doc_end ? doc_end + b * T : NULL;
            for (int64_t t = ddp_doc_at_position(s, e, (int64_t)p, (int64_t)p, (int64_t)T); t < (int64_t)T;
                 t = ddp_doc_next_position(s, e, t, (int64_t)p, (int64_t)T)) {
                const pack<E, W> g = load_pack<W>(dout + (b * T + (size_t)t) * C, col);
                DDP_UNROLL
                for (int q = 0; q < W; q++) acc[q] += (double)to_float(g.v[q]);
            }
        }
        pack<float, W> sum = load_pack<W>(dwpe, k);
        DDP_UNROLL
        for (int q = 0; q < W; q++) sum.v[q] = (float)((double)sum.v[q] + acc[q]);
        store_pack<W>(dwpe, k, sum);
    }
}

static size_t round_up_256(size_t bytes) { return (bytes + 255) / 256 * 256; }

/* Sorts the positions [0, BT) by token into scratch; on return *vals holds them sorted and
 * *offsets each token's first index (V + 1 of them). */
static int sort_positions(device *d, const int32_t *tokens, size_t BT, uint32_t V, const uint32_t **vals,
                          const uint32_t **offsets, ddp_err *err)
{
    const size_t n_tiles = BT / kSortTile + (BT % kSortTile != 0), n_counts = 256 * n_tiles;
    const size_t buf = round_up_256(BT * sizeof(uint32_t)), counts_bytes = round_up_256(n_counts * sizeof(uint32_t));
    char *scratch = NULL; /* keys, vals, keys, vals, counts, offsets */
    int rc = device_cuda_scratch(d, 4 * buf + counts_bytes + ((size_t)V + 1) * sizeof(uint32_t), (void **)&scratch,
                                 err);
    if (rc) return rc;
    uint32_t *keys[2] = {(uint32_t *)scratch, (uint32_t *)(scratch + 2 * buf)};
    uint32_t *vs[2] = {(uint32_t *)(scratch + buf), (uint32_t *)(scratch + 3 * buf)};
    uint32_t *counts = (uint32_t *)(scratch + 4 * buf), *offs = (uint32_t *)(scratch + 4 * buf + counts_bytes);
    unsigned bits = 0; /* to hold every key, V (the skipped tokens) included */
    while (bits < 32 && ((uint64_t)V >> bits) != 0) bits++;
    const unsigned passes = bits <= 8 ? 1 : (bits + 7) / 8;
    DDP_LAUNCH_OP(ddp_sort_init_kernel, grid_for(BT, kBlock), kBlock, 0, keys[0], vs[0], tokens, BT, V);
    for (unsigned p = 0; p < passes; p++) {
        const unsigned in = p % 2, out = 1 - in;
        DDP_LAUNCH_OP(ddp_sort_count_kernel, grid_for(n_tiles, 1), kSortBlock, 0, counts, keys[in], BT, 8 * p,
                      n_tiles);
        DDP_LAUNCH_OP(ddp_sort_scan_kernel, 1, kScanBlock, 0, counts, n_counts);
        DDP_LAUNCH_OP(ddp_sort_scatter_kernel, grid_for(n_tiles, 1), kSortBlock, 0, keys[out], vs[out], keys[in],
                      vs[in], BT, 8 * p, counts, n_tiles);
    }
    DDP_LAUNCH_OP(ddp_sort_offsets_kernel, grid_for((size_t)V + 1, kBlock), kBlock, 0, offs, keys[passes % 2], BT, V);
    *vals = vs[passes % 2];
    *offsets = offs;
    return DDP_OK;
}

extern "C" int device_cuda_embedding_backward(device *d, tensor_dtype t, float *dwte, float *dwpe, const void *dout,
                                              const int32_t *tokens, const int32_t *doc_start,
                                              const int32_t *doc_end, int64_t B, int64_t T, int64_t C, int64_t V,
                                              ddp_err *err)
{
    const size_t BT = (size_t)B * (size_t)T, TC = (size_t)T * (size_t)C, cols = (size_t)C;
    if (BT >= UINT32_MAX || (uint64_t)V >= UINT32_MAX)
        return ddp_fail(err, DDP_ERUNTIME, "embedding_backward: %zu positions of %lld tokens; the CUDA backend sorts "
                        "positions and token ids below 2^32 - 1", BT, (long long)V);
    const uint32_t *vals = NULL, *offsets = NULL;
    int rc = sort_positions(d, tokens, BT, (uint32_t)V, &vals, &offsets, err);
    if (rc) return rc;
    const unsigned warps_per_block = kBlock / 32;
    DDP_DTYPE_SWITCH(t, E,
                     const E *g = static_cast<const E *>(dout);
                     constexpr int W = kVec<E>;
                     if (vec_width<E>(cols, {dout}) > 1 && all_aligned(W * sizeof(float), {dwte}))
                         DDP_LAUNCH_OP((ddp_embedding_backward_wte_kernel<E, W>),
                                       grid_for((size_t)V * ((cols / W + 31) / 32), warps_per_block), kBlock, 0, dwte,
                                       g, vals, offsets, (size_t)V, cols);
                     else
                         DDP_LAUNCH_OP((ddp_embedding_backward_wte_kernel<E, 1>),
                                       grid_for((size_t)V * ((cols + 31) / 32), warps_per_block), kBlock, 0, dwte, g,
                                       vals, offsets, (size_t)V, cols);
                     if (!dwpe)
                         return DDP_OK; /* no position table */
                     if (vec_width<E>(cols, {dout}) > 1 && all_aligned(W * sizeof(float), {dwpe}))
                         DDP_LAUNCH_OP((ddp_embedding_backward_wpe_kernel<E, W>), grid_for(TC / W, kBlock), kBlock, 0,
                                       dwpe, g, doc_start, doc_end, (size_t)B, (size_t)T, cols);
                     else
                         DDP_LAUNCH_OP((ddp_embedding_backward_wpe_kernel<E, 1>), grid_for(TC, kBlock), kBlock, 0,
                                       dwpe, g, doc_start, doc_end, (size_t)B, (size_t)T, cols));
    return DDP_OK;
}
