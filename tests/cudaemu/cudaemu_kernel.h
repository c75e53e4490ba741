/* cudaemu_kernel.h — what a kernel sees when g++ compiles it for the CUDA-on-CPU emulator.
 *
 * Included only by runtime/device/kernels/cuda_kernel.h (after the real CUDA headers, which in
 * host mode turn __global__/__device__ into nothing and leave the built-in variables and device
 * intrinsics undeclared). It redirects the built-ins to the running fiber's state, declares the barrier,
 * warp and atomic intrinsics over the emulator (cudaemu_sched.cpp), marks static __shared__
 * variables so they can be poisoned, and defines the launcher behind DDP_LAUNCH. It holds no
 * scheduling logic itself and must not be included by host-only code. */
#ifndef DDP_CUDAEMU_KERNEL_H
#define DDP_CUDAEMU_KERNEL_H

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <tuple>
#include <type_traits>
#include <utility>

namespace ddp_cudaemu {

/* Built-in variables of the fiber that is running (set by the scheduler at every switch).
 * initial-exec TLS: the emulator is linked statically into executables, and kernels read these
 * often. */
#define DDP_CUDAEMU_TLS __thread __attribute__((tls_model("initial-exec")))
extern DDP_CUDAEMU_TLS const uint3 *cur_thread_idx;
extern DDP_CUDAEMU_TLS uint3 cur_block_idx;
extern DDP_CUDAEMU_TLS uint3 cur_block_dim;
extern DDP_CUDAEMU_TLS uint3 cur_grid_dim;

enum warp_op_kind { WARP_SYNC, WARP_SHFL_IDX, WARP_SHFL_UP, WARP_SHFL_DOWN, WARP_SHFL_XOR,
                    WARP_BALLOT, WARP_ANY, WARP_ALL, WARP_MMA, WARP_LDMATRIX, WARP_WGMMA, WARP_WGMMA_WAIT };
enum block_reduce_kind { BLOCK_SYNC, BLOCK_COUNT, BLOCK_AND, BLOCK_OR };

/* Block barrier; all threads of the block must reach the same call site. Returns the reduction
 * of `predicate` over the block for __syncthreads_count/_and/_or. */
int syncthreads(block_reduce_kind kind, int predicate, const char *file, int line);
/* Exchange among the lanes named in mask (which must include the caller): every lane deposits
 * `bits`; returns the bits of its source lane (shuffles), or the ballot/any/all result. A source
 * lane outside the mask yields all-ones bits (NaN for floats), like unwritten shared memory. */
uint64_t warp_op(warp_op_kind kind, unsigned mask, uint64_t bits, int param, int width,
                 const char *file, int line);
unsigned active_mask();
void *dynamic_shared();

/* Tensor-core and asynchronous-copy instructions (cudaemu_tensor.cpp), as the PTX ISA defines
 * them; kernels reach them through runtime/device/kernels/tensor_core.cuh. mma and ldmatrix are
 * warp-collective (.sync.aligned): every lane of a full warp must reach the same call site, and
 * each lane holds exactly the fragment elements the ISA assigns it. */
/* mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32: d = a·b + c, a 16x16 (4 regs of 2 bf16),
 * b 16x8 (2 regs), c and d 16x8 fp32 (4 each); d may alias c. */
void mma_m16n8k16_bf16(float *d, const uint32_t *a, const uint32_t *b, const float *c, const char *file, int line);
/* ldmatrix.sync.aligned.m8n8.x{count}[.trans].shared.b16: lanes 8i..8i+7 give the 16-byte-aligned
 * shared-memory addresses of matrix i's rows; regs[i] gets this lane's two elements of matrix i. */
void ldmatrix(uint32_t *regs, int count, bool trans, const void *row, const char *file, int line);
/* cp.async.cg.shared.global [dst], [src], bytes, src_bytes: queued on the calling thread and done
 * (src_bytes copied, the rest of bytes zero-filled) only when a cp_async_wait covers its group. */
void cp_async(void *dst, const void *src, unsigned bytes, unsigned src_bytes, const char *file, int line);
/* cp.async.commit_group / cp.async.wait_group N: completes every committed group but the N newest. */
void cp_async_commit();
void cp_async_wait(int newest_pending);

/* The warpgroup matrix instructions of sm_90a (cudaemu_wgmma.cpp), as the PTX ISA defines them for
 * bf16 operands and fp32 accumulators: wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16 with A
 * from shared memory (a = NULL, desc_a) or from four registers (a), B from shared memory (desc_b),
 * d += A·B (scale_d 1) or d = A·B (0), tnsp_a / tnsp_b 1 for an MN-major operand; wgmma.fence,
 * commit_group and wait_group N. The product lands in d only at the wait_group that covers its
 * commit group, from shared memory and registers as they are then. Descriptors name shared memory
 * by shared_window_offset: a byte offset into the block's dynamic shared memory, which stands for
 * a 1024-byte-aligned window (the swizzle patterns repeat every 1024 bytes). */
uint32_t shared_window_offset(const void *p, const char *file, int line);
void wgmma_bf16(float *d, int n, const uint32_t *a, uint64_t desc_a, uint64_t desc_b, int scale_d, int tnsp_a,
                int tnsp_b, const char *file, int line);
void wgmma_fence(const char *file, int line);
void wgmma_commit(const char *file, int line);
void wgmma_wait(int newest_pending, const char *file, int line);
/* fence.proxy.async.shared::cta: the running thread's earlier shared-memory writes through the generic
 * proxy (stores, cp.async) made visible to the async proxy (wgmma's operand reads, bulk copies) and
 * its mbarrier inits to bulk copies' completions; fence.mbarrier_init: only the latter
 * (cudaemu_sync.cpp). */
void fence_proxy_async();
void fence_mbarrier_init();

/* Named barriers, mbarriers and bulk copies (cudaemu_sync.cpp), as the PTX ISA defines them; kernels
 * reach them through runtime/device/kernels/mbarrier.cuh. bar.sync / bar.arrive (wait false) on
 * barrier id 1..15 (0 is __syncthreads's) completes when `threads` threads (a multiple of 32) have
 * arrived; bar.sync waits for that. An mbarrier is 8 bytes of shared memory set up by
 * mbarrier_init with an arrival count; mbarrier_arrive arrives `count` times after adding tx_bytes
 * to the transaction count (arrive.expect_tx; 0: plain arrive), returning the phase it arrived in;
 * a phase completes when all arrivals and all expected bytes are in. mbarrier_try_wait_parity
 * returns once the phase with that parity is complete (the emulator waits as long as it takes; a
 * wait nothing can end is a deadlock it reports). cp_async_bulk copies bytes (a multiple of 16,
 * both ends 16-byte aligned) from global to shared memory and completes them on bar's transaction
 * count. */
void named_barrier(int id, int threads, bool wait, const char *file, int line);
void mbarrier_init(uint64_t *bar, unsigned count, const char *file, int line);
uint64_t mbarrier_arrive(uint64_t *bar, unsigned count, unsigned tx_bytes, const char *file, int line);
bool mbarrier_try_wait_parity(uint64_t *bar, unsigned parity, const char *file, int line);
void cp_async_bulk(void *dst, const void *src, unsigned bytes, uint64_t *bar, const char *file, int line);
/* setmaxnreg.{inc,dec}.sync.aligned (cudaemu_sync.cpp): once all 128 threads of the running thread's
 * warpgroup have arrived with the same action and count, its registers a thread become `count`; a
 * dec returns the difference to the block's pool, an inc waits until the pool holds it. At launch
 * every thread holds what __launch_bounds__(threads, 1) allows and the pool is empty. */
void setmaxnreg(bool inc, int count, const char *file, int line);
/* cp.async.bulk.tensor.{rank}d tile mode (cudaemu_tma.cpp): the box of the tensor map `map` (a
 * CUtensorMap from cuTensorMapEncodeTiled) whose first element is at coords (dimension 0 first) into
 * dst (128-byte aligned), swizzled as the map says, completing on bar's transaction count. */
void cp_async_bulk_tensor(void *dst, const void *map, int rank, const int *coords, uint64_t *bar, const char *file,
                          int line);

/* The shared-memory race check (cudaemu_race.cpp): an access the kernel's compiled loads and stores
 * do not show it (atomics, the emulated ldmatrix and cp.async), made by the running thread; `what`,
 * file and line name it in a report. Anything outside shared memory is ignored. RACE_ASYNC_READ is a
 * read through the async proxy (a wgmma's operands), which must find the byte's last ordinary write
 * followed by a fence.proxy.async of its writer. */
enum race_access_kind { RACE_READ, RACE_WRITE, RACE_ATOMIC, RACE_ASYNC_READ };
void race_access(const void *p, size_t bytes, race_access_kind how, const char *what, const char *file, int line);

typedef void (*kernel_thunk)(const void *ctx);
/* Validates the configuration (errors go to cudaGetLastError) and queues the grid on the stream;
 * it runs when something waits for that stream. launch owns ctx (ctx_bytes: the kernel may read
 * them, as a GPU's kernel reads its parameters) and calls release(ctx) after the grid ran (or at
 * once when the launch is rejected). */
void launch(const char *name, const void *fn, dim3 grid, dim3 block, size_t smem_bytes,
            cudaStream_t stream, kernel_thunk thunk, const void *ctx, size_t ctx_bytes, kernel_thunk release);

template <class... P> struct kernel_call {
    void (*fn)(P...);
    std::tuple<typename std::decay<P>::type...> args; /* copied at launch, as a GPU copies them */
    static void run(const void *ctx)
    {
        const kernel_call *call = static_cast<const kernel_call *>(ctx);
        std::apply(call->fn, call->args); /* each thread gets its own copies of the arguments */
    }
    static void release(const void *ctx) { delete static_cast<const kernel_call *>(ctx); }
};

template <class... P> struct launcher {
    const char *name;
    void (*fn)(P...);
    dim3 grid, block;
    size_t smem_bytes;
    cudaStream_t stream;
    template <class... A> void operator()(A &&...a) const
    {
        static_assert(sizeof...(A) == sizeof...(P), "DDP_LAUNCH: wrong number of kernel arguments");
        const kernel_call<P...> *call = new kernel_call<P...>{fn, {std::forward<A>(a)...}};
        launch(name, reinterpret_cast<const void *>(fn), grid, block, smem_bytes, stream,
               &kernel_call<P...>::run, call, sizeof *call, &kernel_call<P...>::release);
    }
};

template <class... P>
launcher<P...> make_launcher(const char *name, void (*fn)(P...), dim3 grid, dim3 block,
                             size_t smem_bytes, cudaStream_t stream)
{
    return launcher<P...>{name, fn, grid, block, smem_bytes, stream};
}

template <class T> inline uint64_t to_bits(T v)
{
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value,
                  "warp shuffles carry at most 8 trivially copyable bytes");
    uint64_t bits = 0;
    memcpy(&bits, &v, sizeof v);
    return bits;
}
template <class T> inline T from_bits(uint64_t bits)
{
    T v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

} /* namespace ddp_cudaemu */

/* ---- built-in variables ---- */
#define threadIdx (*::ddp_cudaemu::cur_thread_idx)
#define blockIdx (static_cast<const uint3 &>(::ddp_cudaemu::cur_block_idx))
#define blockDim (static_cast<const uint3 &>(::ddp_cudaemu::cur_block_dim))
#define gridDim (static_cast<const uint3 &>(::ddp_cudaemu::cur_grid_dim))
#define warpSize 32

/* ---- memory spaces and qualifiers ---- */
/* Static shared memory: a static local (one object per function, shared by the block's fibers).
 * The emulator fills it with 0xFF before every block; it finds these objects in the symbol table
 * through the marker declared beside them (every writable static local of a function holding a
 * marker is shared memory). The marker is a guard of DDP_CUDAEMU_SHARED_GUARD bytes, which g++
 * places right after the object declared with it: a kernel's access into one (an index past a
 * static shared array, or before the next one) aborts as memcheck reports an invalid __shared__
 * access. Declare __shared__ inside kernels and __device__ functions; `extern __shared__` needs
 * DDP_DYNAMIC_SHARED. */
#define DDP_CUDAEMU_CAT2(a, b) a##b
#define DDP_CUDAEMU_CAT(a, b) DDP_CUDAEMU_CAT2(a, b)
#define DDP_CUDAEMU_SHARED_GUARD 64
#undef __shared__
#define __shared__ \
    static __attribute__((used)) char DDP_CUDAEMU_CAT(ddp_cudaemu_shared_marker_, __COUNTER__)[DDP_CUDAEMU_SHARED_GUARD]; \
    static
#ifndef __launch_bounds__
#define __launch_bounds__(...)
#endif

/* ---- barriers and warp intrinsics ----
 * The call site (file:line, filled in by the default arguments) identifies a barrier: every
 * thread of a block, or every lane of a mask, must wait at the same one. */
#define DDP_CUDAEMU_SITE const char *file = __builtin_FILE(), int line = __builtin_LINE()
inline void __syncthreads(DDP_CUDAEMU_SITE)
{
    ddp_cudaemu::syncthreads(ddp_cudaemu::BLOCK_SYNC, 0, file, line);
}
inline int __syncthreads_count(int p, DDP_CUDAEMU_SITE)
{
    return ddp_cudaemu::syncthreads(ddp_cudaemu::BLOCK_COUNT, p != 0, file, line);
}
inline int __syncthreads_and(int p, DDP_CUDAEMU_SITE)
{
    return ddp_cudaemu::syncthreads(ddp_cudaemu::BLOCK_AND, p != 0, file, line);
}
inline int __syncthreads_or(int p, DDP_CUDAEMU_SITE)
{
    return ddp_cudaemu::syncthreads(ddp_cudaemu::BLOCK_OR, p != 0, file, line);
}
inline void __syncwarp(unsigned mask = 0xffffffffu, DDP_CUDAEMU_SITE)
{
    ddp_cudaemu::warp_op(ddp_cudaemu::WARP_SYNC, mask, 0, 0, 32, file, line);
}
template <class T> inline T __shfl_sync(unsigned mask, T v, int src_lane, int width = 32, DDP_CUDAEMU_SITE)
{
    using namespace ddp_cudaemu;
    return from_bits<T>(warp_op(WARP_SHFL_IDX, mask, to_bits(v), src_lane, width, file, line));
}
template <class T> inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32, DDP_CUDAEMU_SITE)
{
    using namespace ddp_cudaemu;
    return from_bits<T>(warp_op(WARP_SHFL_UP, mask, to_bits(v), (int)delta, width, file, line));
}
template <class T> inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32, DDP_CUDAEMU_SITE)
{
    using namespace ddp_cudaemu;
    return from_bits<T>(warp_op(WARP_SHFL_DOWN, mask, to_bits(v), (int)delta, width, file, line));
}
template <class T> inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32, DDP_CUDAEMU_SITE)
{
    using namespace ddp_cudaemu;
    return from_bits<T>(warp_op(WARP_SHFL_XOR, mask, to_bits(v), lane_mask, width, file, line));
}
inline unsigned __ballot_sync(unsigned mask, int p, DDP_CUDAEMU_SITE)
{
    return (unsigned)ddp_cudaemu::warp_op(ddp_cudaemu::WARP_BALLOT, mask, p != 0, 0, 32, file, line);
}
inline int __any_sync(unsigned mask, int p, DDP_CUDAEMU_SITE)
{
    return (int)ddp_cudaemu::warp_op(ddp_cudaemu::WARP_ANY, mask, p != 0, 0, 32, file, line);
}
inline int __all_sync(unsigned mask, int p, DDP_CUDAEMU_SITE)
{
    return (int)ddp_cudaemu::warp_op(ddp_cudaemu::WARP_ALL, mask, p != 0, 0, 32, file, line);
}
inline unsigned __activemask() { return ddp_cudaemu::active_mask(); }
#undef DDP_CUDAEMU_SITE

/* ---- atomics: fibers of one process never run at the same time, so plain updates are atomic ----
 * Their own loads and stores are not instrumented (no_sanitize): the race check sees one atomic
 * update, which is no hazard with another warp's atomic update. */
#define DDP_CUDAEMU_ATOMIC __attribute__((no_sanitize("thread")))
#define DDP_CUDAEMU_RACE_ATOMIC(a) \
    ::ddp_cudaemu::race_access(a, sizeof *(a), ::ddp_cudaemu::RACE_ATOMIC, "an atomic", nullptr, 0)
template <class T> DDP_CUDAEMU_ATOMIC inline T ddp_cudaemu_fetch_add(T *address, T val)
{
    DDP_CUDAEMU_RACE_ATOMIC(address);
    T old = *address;
    *address = old + val;
    return old;
}
inline float atomicAdd(float *a, float v) { return ddp_cudaemu_fetch_add(a, v); }
inline double atomicAdd(double *a, double v) { return ddp_cudaemu_fetch_add(a, v); }
inline int atomicAdd(int *a, int v) { return ddp_cudaemu_fetch_add(a, v); }
inline unsigned atomicAdd(unsigned *a, unsigned v) { return ddp_cudaemu_fetch_add(a, v); }
inline unsigned long long atomicAdd(unsigned long long *a, unsigned long long v)
{
    return ddp_cudaemu_fetch_add(a, v);
}
template <class T> DDP_CUDAEMU_ATOMIC inline T atomicExch(T *a, T v)
{
    DDP_CUDAEMU_RACE_ATOMIC(a);
    T old = *a;
    *a = v;
    return old;
}
template <class T> DDP_CUDAEMU_ATOMIC inline T atomicCAS(T *a, T compare, T v)
{
    DDP_CUDAEMU_RACE_ATOMIC(a);
    T old = *a;
    if (old == compare)
        *a = v;
    return old;
}
template <class T> DDP_CUDAEMU_ATOMIC inline T atomicMax(T *a, T v)
{
    DDP_CUDAEMU_RACE_ATOMIC(a);
    T old = *a;
    *a = old < v ? v : old;
    return old;
}
template <class T> DDP_CUDAEMU_ATOMIC inline T atomicMin(T *a, T v)
{
    DDP_CUDAEMU_RACE_ATOMIC(a);
    T old = *a;
    *a = v < old ? v : old;
    return old;
}

/* ---- device math and bit intrinsics missing from the host-mode CUDA headers ---- */
template <class T> inline T min(T a, T b) { return b < a ? b : a; }
template <class T> inline T max(T a, T b) { return a < b ? b : a; }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float __expf(float x) { return expf(x); }
inline float __exp10f(float x) { return powf(10.0f, x); }
inline float __logf(float x) { return logf(x); }
inline float __log2f(float x) { return log2f(x); }
inline float __powf(float x, float y) { return powf(x, y); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __tanf(float x) { return tanf(x); }
inline float __fdividef(float x, float y) { return x / y; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return sqrtf(x); }
inline float __fadd_rn(float x, float y) { return x + y; }
inline float __fmul_rn(float x, float y) { return x * y; }
inline float __fmaf_rn(float x, float y, float z) { return fmaf(x, y, z); }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
inline float normcdff(float x) { return 0.5f * erfcf(-x * 0.70710678118654752f); }
inline double normcdf(double x) { return 0.5 * erfc(-x * 0.70710678118654752); }
inline int __float2int_rn(float x) { return (int)nearbyintf(x); }
inline int __float_as_int(float x) { return ddp_cudaemu::from_bits<int>(ddp_cudaemu::to_bits(x)); }
inline unsigned __float_as_uint(float x) { return ddp_cudaemu::from_bits<unsigned>(ddp_cudaemu::to_bits(x)); }
inline float __int_as_float(int x) { return ddp_cudaemu::from_bits<float>(ddp_cudaemu::to_bits(x)); }
inline float __uint_as_float(unsigned x) { return ddp_cudaemu::from_bits<float>(ddp_cudaemu::to_bits(x)); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
template <class T> inline T __ldg(const T *p) { return *p; }

#endif
