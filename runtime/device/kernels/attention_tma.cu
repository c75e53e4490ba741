/* attention_tma.cu — Hopper's causal flash attention, forward and backward, warp-specialised as
 * FlashAttention-3 describes: a producer warp feeds the tiles through the tensor memory accelerator,
 * two consumer warpgroups compute (sm_90a alone, taken on compute capability 9.0 devices where the
 * driver has cuTensorMapEncodeTiled, unless DDP_ATTENTION_TMA=0). Same algorithms, masks, outputs
 * and shapes as attention_wgmma.cu's kernels, whose per-tile steps (attention_wgmma.cuh's
 * forward_step, dq_step and dkdv_step) they run.
 *
 * Warps 0-7 (two warpgroups) consume, warp 8 produces: the forward's block is 288 threads; the
 * backward's producer is a whole warpgroup (384 threads) that hands its registers to the consumers
 * (setmaxnreg, below). The forward and dQ blocks own 128 query rows of one head: the producer's lane
 * 0 issues their resident boxes once (Q; in dQ, dO too), then each key tile's K and V boxes (64
 * rows x 64 columns, 128-byte swizzle: attention_wgmma.cuh's layout; an HS of 128 as two) into a
 * ring of kWgStages stages. The dK/dV blocks own 128 keys of one K/V head: K and V are resident, and
 * the query tiles (Q, dO and their per-row inputs, which the producer warp writes) stream through
 * the ring. Each stage's "full" mbarrier expects its bytes (and the producer's arrival), and its
 * "empty" mbarrier collects an arrival from every consumer thread once no product reads the stage
 * any more, which the producer waits for before refilling it. Every consumer thread arrives, and
 * the role is read from lane 0, so that no branch the compiler sees as divergent surrounds the
 * wgmma (ptxas would serialise them: its note C7520). In the forward the two consumer warpgroups
 * take turns issuing their products (pingpong, below). The consumers never stop the whole block:
 * no __syncthreads after the mbarriers are set up (the producer leaves early), no cp.async, no
 * proxy fence (the copies and wgmma both go through the async proxy). Rows past T arrive
 * zero-filled (the tensor map's bounds). The tensor maps describe Q, dO, K and V as (HS, heads, T,
 * B) with the op's row strides, encoded per call. This file must not hold kernels whose tiles
 * arrive another way. */
#include "attention_wgmma.cuh"
#include "mbarrier.cuh"

using ddp_kernels::mbarrier_arrive;
using ddp_kernels::mbarrier_arrive_expect_tx;
using ddp_kernels::mbarrier_fence_init;
using ddp_kernels::mbarrier_init;
using ddp_kernels::mbarrier_wait_parity;
using ddp_kernels::named_barrier_arrive;
using ddp_kernels::named_barrier_sync;
using ddp_kernels::setmaxnreg_dec;
using ddp_kernels::setmaxnreg_inc;
using ddp_kernels::tma_load_4d;

/* The forward's block: the consumers and one producer warp (159 registers at HS 128). The backward's
 * consumers need more than ptxas gives a 288-thread block (at HS 128 it held dQ to 166, spilled and
 * serialised the wgmma: note C7512; dK/dV wants 239), so its producer is a whole warpgroup that
 * hands its registers to the consumers (setmaxnreg): 168 a thread at launch, 24 for the producer,
 * 240 for each consumer warpgroup, 64512 in all. */
constexpr int kTmaThreads = kWgThreads + 32, kTmaWideThreads = kWgThreads + 128;
constexpr int kProducerRegisters = 24, kConsumerRegisters = 240;

/* The tensor maps a block's producer reads, each box 64 columns of one head: Q and (the backward) dO
 * by boxes of 128 rows in the forward and dQ, of 64 in dK/dV; K and V by boxes of 64 rows. */
struct tma_maps {
    CUtensorMap q, dout, k, v;
};

/* The block's mbarriers: its resident tiles' (loaded once: Q, and dO in dQ; K and V in dK/dV), and
 * each stage's full and empty. */
struct tma_barriers {
    uint64_t resident, full[kWgStages], empty[kWgStages];
    /* Thread 0 initialises them; the block's barrier publishes them, the last the block takes. */
    __device__ void init()
    {
        if (threadIdx.x == 0) {
            mbarrier_init(&resident, 1);
            for (int s = 0; s < kWgStages; s++) {
                mbarrier_init(&full[s], 1);
                mbarrier_init(&empty[s], kWgThreads);
            }
            mbarrier_fence_init();
        }
        __syncthreads();
    }
};

/* Whether this thread's warp is the producer, read from lane 0's thread index so that the compiler
 * sees it warp-uniform. */
__device__ inline bool producer_warp() { return __shfl_sync(0xffffffffu, (int)threadIdx.x, 0) >= kWgThreads; }

/* FlashAttention-3's ping-pong of the two consumer warpgroups: warpgroup w issues a tile's products
 * only at its turn (named barrier 1 + w, a bar.sync of its 128 threads against the other's
 * bar.arrive), then hands the turn over, so one warpgroup's softmax runs while the other's products
 * keep the tensor cores busy. Warpgroup 0 starts; warpgroup 1 hands nothing over after its last
 * tile, so no barrier is left half arrived. */
struct pingpong {
    int wg;
    bool last;
    __device__ static void start(int wg)
    {
        if (wg == 1)
            named_barrier_arrive(1, kWgThreads);
    }
    __device__ static void wait_turn(int wg) { named_barrier_sync(1 + wg, kWgThreads); }
    __device__ void operator()() const
    {
        if (wg == 0 || !last)
            named_barrier_arrive(2 - wg, kWgThreads);
    }
};

/* The producer (lane 0 of warp 8): the query side's boxes once (Q's; DOUT, dO's too), then every
 * key tile's K and V boxes, stage by stage, each stage refilled once the consumers have released its
 * previous tile. */
template <int HS, bool DOUT>
__device__ void produce_tiles(const wg_block<HS> &blk, const tma_maps &m, const wg_query_smem<HS, DOUT> &sm,
                              tma_barriers &bar)
{
    constexpr unsigned kRows = kWgRows * HS * sizeof(bf16), kTile = kWgKeys * HS * sizeof(bf16);
    const int b = (int)blk.b, h = (int)blk.h, kvh = (int)blk.kvh, q0 = (int)blk.q0;
    mbarrier_arrive_expect_tx(&bar.resident, DOUT ? 2 * kRows : kRows);
    for (int cb = 0; cb < HS / 64; cb++) {
        tma_load_4d(sm.q + cb * kWgRows * 64, &m.q, 64 * cb, h, q0, b, &bar.resident);
        if (DOUT)
            tma_load_4d(sm.dout + cb * kWgRows * 64, &m.dout, 64 * cb, h, q0, b, &bar.resident);
    }
    for (int64_t j = blk.first; j <= blk.last; j++) {
        const int64_t n = j - blk.first;
        const int s = (int)(n % kWgStages);
        mbarrier_wait_parity(&bar.empty[s], (unsigned)((n / kWgStages) & 1) ^ 1u); /* a fresh stage is free */
        mbarrier_arrive_expect_tx(&bar.full[s], 2 * kTile);
        for (int cb = 0; cb < HS / 64; cb++) {
            const int off = cb * kWgKeys * 64;
            tma_load_4d(sm.k_of(s) + off, &m.k, 64 * cb, kvh, (int)(j * kWgKeys), b, &bar.full[s]);
            tma_load_4d(sm.v_of(s) + off, &m.v, 64 * cb, kvh, (int)(j * kWgKeys), b, &bar.full[s]);
        }
    }
}

template <int HS>
__global__ void __launch_bounds__(kTmaThreads, 1) ddp_flash_forward_tma_kernel(attn_args a, int64_t n_tiles,
                                                                              const __grid_constant__ tma_maps maps)
{
    DDP_DYNAMIC_SHARED(char, smem_raw);
    const wg_query_smem<HS, false> sm(smem_raw);
    __shared__ __align__(8) tma_barriers bar;
    bar.init();
    const wg_block<HS> blk(a, n_tiles);
    if (producer_warp()) {
        if (threadIdx.x == kWgThreads)
            produce_tiles<HS>(blk, maps, sm, bar);
        return;
    }
    float o[HS / 2] = {}, m_row[2] = {-INFINITY, -INFINITY}, l_row[2] = {};
    uint32_t p[4][4] = {}; /* P_{j-1}, packed */
    const float c = a.scale * kWgLog2e;
    int prev = 0; /* tile j - 1's stage */
    mbarrier_wait_parity(&bar.resident, 0);
    pingpong::start(blk.wg);
    for (int64_t j = blk.first; j <= blk.last; j++) {
        const int64_t n = j - blk.first;
        const int buf = (int)(n % kWgStages);
        mbarrier_wait_parity(&bar.full[buf], (unsigned)((n / kWgStages) & 1));
        pingpong::wait_turn(blk.wg);
        forward_step<HS>(a, blk, j, sm.q, sm.k_of(buf), sm.v_of(prev), c, o, p, m_row, l_row,
                         pingpong{blk.wg, j == blk.last});
        if (j > blk.first) /* tile j - 1's K and V are read: its stage may be refilled */
            mbarrier_arrive(&bar.empty[prev]);
        prev = buf;
    }
    finish_forward<HS>(a, blk, sm.v_of(prev), o, p, m_row, l_row);
}

/* The dQ pass, warp-specialised: the producer feeds Q and dO once and the key tiles as in the
 * forward; the consumers run attention_wgmma.cuh's dq_step, which reads K_j and V_j at tile j and
 * K_{j-1} beside them, so tile j - 1's stage is released after tile j's step, as in the forward.
 * No ping-pong: each tile's element-wise work already runs under the previous tile's dS·K. */
template <int HS>
__global__ void __launch_bounds__(kTmaWideThreads, 1) ddp_flash_dq_tma_kernel(attn_args a, int64_t n_tiles,
                                                                             const __grid_constant__ tma_maps maps)
{
    DDP_DYNAMIC_SHARED(char, smem_raw);
    const wg_query_smem<HS, true> sm(smem_raw);
    __shared__ __align__(8) tma_barriers bar;
    bar.init();
    const wg_block<HS> blk(a, n_tiles);
    if (producer_warp()) {
        setmaxnreg_dec<kProducerRegisters>();
        if (threadIdx.x == kWgThreads)
            produce_tiles<HS>(blk, maps, sm, bar);
        return;
    }
    setmaxnreg_inc<kConsumerRegisters>();
    float lse2[2], drow[2], dq[HS / 2] = {};
    dq_row_inputs<HS>(a, blk, lse2, drow);
    uint32_t ds[4][4] = {}; /* dS_{j-1}, packed */
    const float c = a.scale * kWgLog2e;
    int prev = 0; /* tile j - 1's stage */
    mbarrier_wait_parity(&bar.resident, 0);
    for (int64_t j = blk.first; j <= blk.last; j++) {
        const int64_t n = j - blk.first;
        const int buf = (int)(n % kWgStages);
        mbarrier_wait_parity(&bar.full[buf], (unsigned)((n / kWgStages) & 1));
        dq_step<HS>(a, blk, j, sm.q, sm.dout, sm.k_of(buf), sm.v_of(buf), sm.k_of(prev), c, lse2, drow, dq, ds);
        if (j > blk.first) /* K_{j-1} and V_{j-1} are read: tile j - 1's stage may be refilled */
            mbarrier_arrive(&bar.empty[prev]);
        prev = buf;
    }
    finish_dq<HS>(a, blk, sm.k_of(prev), dq, ds);
}

/* The dK/dV pass's producer, warp 8: lane 0 issues K's and V's 128 rows once (two boxes of 64 rows
 * per 64 columns), then for each item the warp waits for its stage to be free, writes the query
 * tile's per-row inputs (plain stores, made visible by the __syncwarp and lane 0's arrival, which
 * releases them with the warp's other writes), and lane 0 issues its Q and dO boxes. */
template <int HS>
__device__ void produce_query_tiles(const attn_args &a, const dkdv_block &blk, const tma_maps &m,
                                    const wg_dkdv_smem<HS, kWgStages> &sm, tma_barriers &bar)
{
    constexpr unsigned kTile = kWgKeys * HS * sizeof(bf16);
    const int lane = threadIdx.x & 31, b = (int)blk.b, kvh = (int)blk.kvh;
    if (lane == 0) {
        mbarrier_arrive_expect_tx(&bar.resident, 4 * kTile);
        for (int cb = 0; cb < HS / 64; cb++)
            for (int half = 0; half < 2; half++) {
                const int off = cb * kWgRows * 64 + half * kWgKeys * 64, row = (int)blk.k0 + half * kWgKeys;
                tma_load_4d(sm.k + off, &m.k, 64 * cb, kvh, row, b, &bar.resident);
                tma_load_4d(sm.v + off, &m.v, 64 * cb, kvh, row, b, &bar.resident);
            }
    }
    for (int64_t it = 0; it < blk.items; it++) {
        const int s = (int)(it % kWgStages);
        const int64_t h = blk.head(it), i = blk.tile(it);
        mbarrier_wait_parity(&bar.empty[s], (unsigned)((it / kWgStages) & 1) ^ 1u); /* a fresh stage is free */
        for (int r = lane; r < kWgKeys; r += 32)
            dkdv_load_row(a, blk.b, h, i, r, sm.rows_of(s));
        __syncwarp();
        if (lane == 0) {
            mbarrier_arrive_expect_tx(&bar.full[s], 2 * kTile);
            for (int cb = 0; cb < HS / 64; cb++) {
                const int off = cb * kWgKeys * 64;
                tma_load_4d(sm.q_of(s) + off, &m.q, 64 * cb, (int)h, (int)(i * kWgKeys), b, &bar.full[s]);
                tma_load_4d(sm.dout_of(s) + off, &m.dout, 64 * cb, (int)h, (int)(i * kWgKeys), b, &bar.full[s]);
            }
        }
    }
}

/* The dK/dV pass, warp-specialised: a block per (128 keys, K/V head) as attention_wgmma.cu's, whose
 * per-item step (attention_wgmma.cuh's dkdv_step) it runs; the query tiles stream through a ring of
 * kWgStages stages, each released once its step returns. The registers as in the dQ pass (dK/dV
 * holds both accumulators: 239 at HS 128 in a 256-thread block). */
template <int HS>
__global__ void __launch_bounds__(kTmaWideThreads, 1) ddp_flash_dkdv_tma_kernel(attn_args a,
                                                                               const __grid_constant__ tma_maps maps)
{
    DDP_DYNAMIC_SHARED(char, smem_raw);
    const wg_dkdv_smem<HS, kWgStages> sm(smem_raw);
    __shared__ __align__(8) tma_barriers bar;
    bar.init();
    const dkdv_block blk(a);
    if (producer_warp()) {
        setmaxnreg_dec<kProducerRegisters>();
        if (threadIdx.x < kWgThreads + 32)
            produce_query_tiles<HS>(a, blk, maps, sm, bar);
        return;
    }
    setmaxnreg_inc<kConsumerRegisters>();
    float dk[HS / 2] = {}, dv[HS / 2] = {};
    const float c = a.scale * kWgLog2e;
    mbarrier_wait_parity(&bar.resident, 0);
    for (int64_t it = 0; it < blk.items; it++) {
        const int s = (int)(it % kWgStages);
        mbarrier_wait_parity(&bar.full[s], (unsigned)((it / kWgStages) & 1));
        dkdv_step<HS>(blk, it, sm.k, sm.v, sm.q_of(s), sm.dout_of(s), sm.rows_of(s), c, dk, dv);
        mbarrier_arrive(&bar.empty[s]); /* no product reads the stage any more */
    }
    store_dkdv<HS>(a, blk, dk, dv);
}

/* One tensor's map: (HS, heads, T, B) bf16 with row stride ld, boxes of 64 columns x `rows` rows
 * of one head, 128-byte swizzle, zeros past T. */
static int encode_head_map(const cuda_traits *t, CUtensorMap *map, const void *base, int64_t hs, int64_t heads,
                           int64_t ld, const attn_args *a, uint32_t rows, const char *name, ddp_err *err)
{
    typedef CUresult (*encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                                  const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave,
                                  CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
    const cuuint64_t dims[4] = {(cuuint64_t)hs, (cuuint64_t)heads, (cuuint64_t)a->T, (cuuint64_t)a->B};
    const cuuint64_t strides[3] = {(cuuint64_t)hs * 2, (cuuint64_t)ld * 2, (cuuint64_t)(a->T * ld) * 2};
    const cuuint32_t box[4] = {64, 1, rows, 1}, ones[4] = {1, 1, 1, 1};
    const CUresult r = reinterpret_cast<encode_fn>(t->encode_tensor_map)(
        map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, const_cast<void *>(base), dims, strides, box, ones,
        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS)
        return ddp_fail(err, DDP_ERUNTIME, "attention: cuTensorMapEncodeTiled refused %s's map (CUresult %d): "
                        "B %lld, T %lld, %lld heads of %lld, row stride %lld", name, (int)r, (long long)a->B,
                        (long long)a->T, (long long)heads, (long long)hs, (long long)ld);
    return DDP_OK;
}

/* K's and V's maps for a call, boxes of kWgKeys rows. */
static int encode_key_maps(const cuda_traits *t, const attn_args *a, tma_maps *m, ddp_err *err)
{
    const int rc = encode_head_map(t, &m->k, a->k, a->hs, a->NKV, a->ld_kv, a, kWgKeys, "K", err);
    return rc != DDP_OK ? rc : encode_head_map(t, &m->v, a->v, a->hs, a->NKV, a->ld_kv, a, kWgKeys, "V", err);
}

/* Q's and (with_dout) dO's maps for a call, boxes query_rows high: 128 for the forward's and dQ's
 * resident rows, kWgKeys for dK/dV's streamed query tiles. */
static int encode_query_maps(const cuda_traits *t, const attn_args *a, bool with_dout, uint32_t query_rows,
                             tma_maps *m, ddp_err *err)
{
    const int rc = encode_head_map(t, &m->q, a->q, a->hs, a->NH, a->ld_q, a, query_rows, "Q", err);
    if (rc != DDP_OK || !with_dout)
        return rc;
    return encode_head_map(t, &m->dout, a->dout, a->hs, a->NH, a->ld_o, a, query_rows, "dO", err);
}

/* The forward: a block per (128 query rows, head), heaviest first. */
template <int HS> static int forward_tma_hs(device *d, const attn_args *a, ddp_err *err)
{
    tma_maps maps{};
    const cuda_traits *t = device_cuda_traits(d);
    const int64_t n_tiles = (a->T + kWgRows - 1) / kWgRows;
    const size_t smem = wg_query_smem<HS, false>::bytes;
    int rc;
    if ((rc = encode_key_maps(t, a, &maps, err)) != DDP_OK ||
        (rc = encode_query_maps(t, a, false, kWgRows, &maps, err)) != DDP_OK ||
        (rc = allow_smem(reinterpret_cast<const void *>(ddp_flash_forward_tma_kernel<HS>), smem, err)) != DDP_OK)
        return rc;
    DDP_LAUNCH_OP((ddp_flash_forward_tma_kernel<HS>), (unsigned)(n_tiles * a->B * a->NH), kTmaThreads, smem, *a,
                  n_tiles, maps);
    return DDP_OK;
}

/* The backward: dK and dV (a block per 128 keys and K/V head), then dQ (as the forward's blocks).
 * K's and V's maps serve both; Q's and dO's boxes differ in height. The launch copies the maps, so
 * the second pass's may be written over the first's. */
template <int HS> static int backward_tma_hs(device *d, const attn_args *a, ddp_err *err)
{
    tma_maps maps{};
    const cuda_traits *t = device_cuda_traits(d);
    const int64_t n_tiles = (a->T + kWgRows - 1) / kWgRows;
    const size_t dkdv_smem = wg_dkdv_smem<HS, kWgStages>::bytes, dq_smem = wg_query_smem<HS, true>::bytes;
    int rc;
    if ((rc = encode_key_maps(t, a, &maps, err)) != DDP_OK ||
        (rc = encode_query_maps(t, a, true, kWgKeys, &maps, err)) != DDP_OK ||
        (rc = allow_smem(reinterpret_cast<const void *>(ddp_flash_dkdv_tma_kernel<HS>), dkdv_smem, err)) != DDP_OK)
        return rc;
    DDP_LAUNCH_OP((ddp_flash_dkdv_tma_kernel<HS>), (unsigned)(n_tiles * a->B * a->NKV), kTmaWideThreads, dkdv_smem,
                  *a, maps);
    if ((rc = encode_query_maps(t, a, true, kWgRows, &maps, err)) != DDP_OK ||
        (rc = allow_smem(reinterpret_cast<const void *>(ddp_flash_dq_tma_kernel<HS>), dq_smem, err)) != DDP_OK)
        return rc;
    DDP_LAUNCH_OP((ddp_flash_dq_tma_kernel<HS>), (unsigned)(n_tiles * a->B * a->NH), kTmaWideThreads, dq_smem, *a,
                  n_tiles, maps);
    return DDP_OK;
}

extern "C" bool attention_tma_supports(device *d, const attn_args *a)
{
    const cuda_traits *t = device_cuda_traits(d);
    return attention_wgmma_supports(d, a) && t->attention_tma && t->encode_tensor_map != NULL;
}

extern "C" int attention_tma_forward(device *d, const attn_args *a, ddp_err *err)
{
    return a->hs == 64 ? forward_tma_hs<64>(d, a, err) : forward_tma_hs<128>(d, a, err);
}

extern "C" int attention_tma_backward(device *d, const attn_args *a, ddp_err *err)
{
    return a->hs == 64 ? backward_tma_hs<64>(d, a, err) : backward_tma_hs<128>(d, a, err);
}
