/* attention_tma.cu — Hopper's causal flash-attention forward, warp-specialised as FlashAttention-3
 * describes: a producer warp feeds the tiles through the tensor memory accelerator, two consumer
 * warpgroups compute (sm_90a alone, taken on compute capability 9.0 devices where the driver has
 * cuTensorMapEncodeTiled, unless DDP_ATTENTION_TMA=0). Same algorithm, masks, outputs and shapes
 * as attention_wgmma.cu's forward, whose per-tile step (attention_wgmma.cuh's forward_step) it runs.
 *
 * A block is 288 threads for 128 query rows of one head: warps 0-7 (two warpgroups, 64 rows each)
 * consume, warp 8 produces. The producer's lane 0 issues Q's box once, then each key tile's K and
 * V boxes (64 rows x 64 columns, 128-byte swizzle: attention_wgmma.cuh's layout; an HS of 128 as
 * two) into a ring of kWgStages stages; each stage's "full" mbarrier expects their bytes, and its
 * "empty" mbarrier collects an arrival from every consumer thread once no product reads the stage
 * any more (tile j - 1's stage after tile j's step), which the producer waits for before refilling
 * it. Every consumer thread arrives, and the role is read from lane 0, so that no branch the
 * compiler sees as divergent surrounds the wgmma (ptxas would serialise them: its note C7520). The
 * two consumer warpgroups take turns issuing their products (pingpong, below). The
 * consumers never stop the whole block: no __syncthreads after the mbarriers are set up (the
 * producer leaves early), no cp.async, no proxy fence (the copies and wgmma both go through the
 * async proxy). Rows past T arrive zero-filled (the tensor map's bounds). The tensor maps describe Q,
 * K and V as (HS, heads, T, B) with the op's row strides, encoded per call. This file must not hold
 * kernels whose tiles arrive another way. */
#include "attention_wgmma.cuh"
#include "mbarrier.cuh"

using ddp_kernels::mbarrier_arrive;
using ddp_kernels::mbarrier_arrive_expect_tx;
using ddp_kernels::mbarrier_fence_init;
using ddp_kernels::mbarrier_init;
using ddp_kernels::mbarrier_wait_parity;
using ddp_kernels::named_barrier_arrive;
using ddp_kernels::named_barrier_sync;
using ddp_kernels::tma_load_4d;

constexpr int kTmaThreads = kWgThreads + 32;

/* The block's mbarriers: Q's, and each stage's full and empty. */
struct tma_barriers {
    uint64_t q_full, full[kWgStages], empty[kWgStages];
};

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

/* The producer (lane 0 of warp 8): Q's box, then every key tile's K and V boxes, stage by stage,
 * each stage refilled once the consumers have released its previous tile. */
template <int HS>
__device__ void produce_tiles(const wg_block<HS> &blk, const CUtensorMap *mq, const CUtensorMap *mk,
                              const CUtensorMap *mv, bf16 *sq, bf16 *sk, bf16 *sv, tma_barriers &bar)
{
    constexpr unsigned kTile = kWgKeys * HS * sizeof(bf16); /* a stage's K (or V): HS / 64 boxes */
    const int b = (int)blk.b, kvh = (int)blk.kvh;
    mbarrier_arrive_expect_tx(&bar.q_full, kWgRows * HS * sizeof(bf16));
    for (int cb = 0; cb < HS / 64; cb++)
        tma_load_4d(sq + cb * kWgRows * 64, mq, 64 * cb, (int)blk.h, (int)blk.q0, b, &bar.q_full);
    for (int64_t j = blk.first; j <= blk.last; j++) {
        const int64_t n = j - blk.first;
        const int s = (int)(n % kWgStages);
        mbarrier_wait_parity(&bar.empty[s], (unsigned)((n / kWgStages) & 1) ^ 1u); /* a fresh stage is free */
        mbarrier_arrive_expect_tx(&bar.full[s], 2 * kTile);
        for (int cb = 0; cb < HS / 64; cb++) {
            const int off = s * kWgKeys * HS + cb * kWgKeys * 64;
            tma_load_4d(sk + off, mk, 64 * cb, kvh, (int)(j * kWgKeys), b, &bar.full[s]);
            tma_load_4d(sv + off, mv, 64 * cb, kvh, (int)(j * kWgKeys), b, &bar.full[s]);
        }
    }
}

template <int HS>
__global__ void __launch_bounds__(kTmaThreads, 1) ddp_flash_forward_tma_kernel(attn_args a, int64_t n_tiles,
    const __grid_constant__ CUtensorMap mq, const __grid_constant__ CUtensorMap mk, const __grid_constant__ CUtensorMap mv)
{
    DDP_DYNAMIC_SHARED(char, smem_raw);
    bf16 *sq = reinterpret_cast<bf16 *>(wgmma_align_1024(smem_raw)), *sk = sq + kWgRows * HS;
    bf16 *sv = sk + kWgStages * kWgKeys * HS;
    __shared__ __align__(8) tma_barriers bar;
    if (threadIdx.x == 0) {
        mbarrier_init(&bar.q_full, 1);
        for (int s = 0; s < kWgStages; s++) {
            mbarrier_init(&bar.full[s], 1);
            mbarrier_init(&bar.empty[s], kWgThreads);
        }
        mbarrier_fence_init();
    }
    __syncthreads();
    const wg_block<HS> blk(a, n_tiles);
    /* the role from lane 0's thread index: warp-uniform as far as the compiler can see */
    if (__shfl_sync(0xffffffffu, (int)threadIdx.x, 0) >= kWgThreads) {
        if (threadIdx.x == kWgThreads)
            produce_tiles<HS>(blk, &mq, &mk, &mv, sq, sk, sv, bar);
        return;
    }
    float o[HS / 2] = {}, m_row[2] = {-INFINITY, -INFINITY}, l_row[2] = {};
    uint32_t p[4][4] = {}; /* P_{j-1}, packed */
    const float c = a.scale * kWgLog2e;
    int prev = 0; /* tile j - 1's stage */
    mbarrier_wait_parity(&bar.q_full, 0);
    pingpong::start(blk.wg);
    for (int64_t j = blk.first; j <= blk.last; j++) {
        const int64_t n = j - blk.first;
        const int buf = (int)(n % kWgStages);
        mbarrier_wait_parity(&bar.full[buf], (unsigned)((n / kWgStages) & 1));
        pingpong::wait_turn(blk.wg);
        forward_step<HS>(a, blk, j, sq, sk + buf * kWgKeys * HS, sv + prev * kWgKeys * HS, c, o, p, m_row, l_row,
                         pingpong{blk.wg, j == blk.last});
        if (j > blk.first) /* tile j - 1's K and V are read: its stage may be refilled */
            mbarrier_arrive(&bar.empty[prev]);
        prev = buf;
    }
    finish_forward<HS>(a, blk, sv + prev * kWgKeys * HS, o, p, m_row, l_row);
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

template <int HS> static int forward_tma_hs(device *d, const attn_args *a, ddp_err *err)
{
    const cuda_traits *t = device_cuda_traits(d);
    CUtensorMap mq, mk, mv;
    int rc;
    if ((rc = encode_head_map(t, &mq, a->q, HS, a->NH, a->ld_q, a, kWgRows, "Q", err)) != DDP_OK ||
        (rc = encode_head_map(t, &mk, a->k, HS, a->NKV, a->ld_kv, a, kWgKeys, "K", err)) != DDP_OK ||
        (rc = encode_head_map(t, &mv, a->v, HS, a->NKV, a->ld_kv, a, kWgKeys, "V", err)) != DDP_OK)
        return rc;
    const int64_t n_tiles = (a->T + kWgRows - 1) / kWgRows;
    /* 1024: the alignment; the mbarriers are static shared memory */
    const size_t smem = 1024 + (size_t)(kWgRows + 2 * kWgStages * kWgKeys) * HS * sizeof(bf16);
    const void *kernel = reinterpret_cast<const void *>(ddp_flash_forward_tma_kernel<HS>);
    CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    DDP_LAUNCH_OP((ddp_flash_forward_tma_kernel<HS>), (unsigned)(n_tiles * a->B * a->NH), kTmaThreads, smem, *a,
                  n_tiles, mq, mk, mv);
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
