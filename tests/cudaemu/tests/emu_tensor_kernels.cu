/* emu_tensor_kernels.cu — small kernels that exercise the emulator's tensor-core and cp.async
 * instructions (tests only), through runtime/device/kernels/tensor_core.cuh so the same file
 * builds with nvcc. Each has an extern "C" entry point returning the launch status; the C driver
 * is test_cudaemu_tensor.c. Kernels named *_broken break a rule of the ISA on purpose. */
#include "runtime/device/kernels/tensor_core.cuh"

using namespace ddp_kernels;

/* Every lane writes the registers ldmatrix gave it: out[lane * 4 + i] = reg i (count regs).
 * src holds four 8x8 bf16 matrices, row-major, matrix i at src + 64 i, copied to shared memory
 * with a row pitch of `pitch` elements (a multiple of 8). */
__global__ void ldmatrix_kernel(const uint16_t *src, uint32_t *out, int count, int trans, int pitch)
{
    __shared__ __align__(16) uint16_t tile[4 * 8 * 24];
    for (int i = threadIdx.x; i < 4 * 64; i += 32)
        tile[(i / 64 * 8 + i % 64 / 8) * pitch + i % 8] = src[i];
    __syncthreads();
    const int lane = threadIdx.x, m = lane / 8, r = lane % 8;
    const uint16_t *row = tile + (m * 8 + r) * pitch;
    uint32_t regs[4] = {0, 0, 0, 0};
    if (count == 1) ldmatrix_x1(regs, row);
    else if (count == 2 && !trans) ldmatrix_x2(regs, row);
    else if (count == 2) ldmatrix_x2_trans(regs, row);
    else if (!trans) ldmatrix_x4(regs, row);
    else ldmatrix_x4_trans(regs, row);
    for (int i = 0; i < 4; i++) out[lane * 4 + i] = regs[i];
}

extern "C" int emu_ldmatrix(const uint16_t *src, uint32_t *out, int count, int trans, int pitch)
{
    DDP_LAUNCH(ldmatrix_kernel, 1, 32, 0, 0, src, out, count, trans, pitch);
    return (int)DDP_LAUNCH_STATUS();
}

/* D (16x8 fp32, row-major) = A (16x16 bf16, row-major) · B (16x8 bf16, row-major) + C, one warp:
 * A through ldmatrix.x4, B through ldmatrix.x2.trans (B's rows are k), C and D by the ISA's
 * accumulator layout. */
__global__ void mma_kernel(const uint16_t *a, const uint16_t *b, const float *c, float *d)
{
    __shared__ __align__(16) uint16_t sa[16 * 16];
    __shared__ __align__(16) uint16_t sb[16 * 8];
    const int lane = threadIdx.x, g = lane / 4, t = lane % 4;
    for (int i = lane; i < 256; i += 32) sa[i] = a[i];
    for (int i = lane; i < 128; i += 32) sb[i] = b[i];
    __syncthreads();
    uint32_t ra[4], rb[2];
    /* matrices 0..3 of A: rows 0-7/8-15 of columns 0-7, then of columns 8-15 */
    ldmatrix_x4(ra, sa + (lane % 16) * 16 + (lane / 16) * 8);
    /* B's two 8x8 blocks: k rows 0-7 and 8-15, transposed so each lane holds a column pair */
    ldmatrix_x2_trans(rb, sb + (lane % 16) * 8);
    float acc[4];
    for (int i = 0; i < 4; i++) acc[i] = c[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2];
    mma_m16n8k16_bf16(acc, ra, rb, acc);
    for (int i = 0; i < 4; i++) d[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2] = acc[i];
}

extern "C" int emu_mma(const uint16_t *a, const uint16_t *b, const float *c, float *d)
{
    DDP_LAUNCH(mma_kernel, 1, 32, 0, 0, a, b, c, d);
    return (int)DDP_LAUNCH_STATUS();
}

/* Raw registers in, raw registers out: out[lane * 4 + i] = d_i for a[lane*4+r], b[lane*2+r]. */
__global__ void mma_regs_kernel(const uint32_t *a, const uint32_t *b, float *out)
{
    const int lane = threadIdx.x;
    const uint32_t ra[4] = {a[lane * 4], a[lane * 4 + 1], a[lane * 4 + 2], a[lane * 4 + 3]};
    const uint32_t rb[2] = {b[lane * 2], b[lane * 2 + 1]};
    const float zero[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    float d[4];
    mma_m16n8k16_bf16(d, ra, rb, zero);
    for (int i = 0; i < 4; i++) out[lane * 4 + i] = d[i];
}

extern "C" int emu_mma_regs(const uint32_t *a, const uint32_t *b, float *out)
{
    DDP_LAUNCH(mma_regs_kernel, 1, 32, 0, 0, a, b, out);
    return (int)DDP_LAUNCH_STATUS();
}

/* 64 threads copy n_chunks 16-byte chunks of src into shared memory with cp.async in two commit
 * groups (the first half, then the second), chunks at or past `valid` zero-filled; mode 0 waits
 * for both groups and a barrier before reading; mode 1 waits only for the older group (wait_group
 * 1) and reads just the first half. out gets the shared copy as floats. */
__global__ void cp_async_kernel(const float *src, float *out, int n_chunks, int valid, int mode)
{
    __shared__ __align__(16) float tile[64 * 4];
    const int half = n_chunks / 2;
    for (int c = threadIdx.x; c < half; c += blockDim.x) cp_async_16(tile + 4 * c, src + 4 * c, c < valid ? 16 : 0);
    cp_async_commit();
    for (int c = half + threadIdx.x; c < n_chunks; c += blockDim.x)
        cp_async_16(tile + 4 * c, src + 4 * c, c < valid ? 16 : 0);
    cp_async_commit();
    if (mode == 0) cp_async_wait<0>();
    else cp_async_wait<1>();
    __syncthreads();
    const int upto = mode == 1 ? half : n_chunks;
    for (int i = threadIdx.x; i < 4 * upto; i += blockDim.x) out[i] = tile[i];
    __syncthreads();
    cp_async_wait<0>();
}

extern "C" int emu_cp_async(const float *src, float *out, int n_chunks, int valid, int mode)
{
    DDP_LAUNCH(cp_async_kernel, 1, 64, 0, 0, src, out, n_chunks, valid, mode);
    return (int)DDP_LAUNCH_STATUS();
}

/* The broken ones: each must abort with a message naming the rule. */
__global__ void tensor_broken_kernel(int which, float *gmem)
{
    __shared__ __align__(16) uint16_t tile[8 * 16];
    for (int i = threadIdx.x; i < 8 * 16; i += blockDim.x) tile[i] = 0;
    __syncthreads();
    uint32_t r[4];
    float acc[4] = {0, 0, 0, 0};
    switch (which) {
    case 0: ldmatrix_x1(r, tile + threadIdx.x % 8 * 16 + 4); break;            /* 8-byte aligned row */
    case 1: ldmatrix_x1(r, gmem + 4 * (threadIdx.x % 8)); break;               /* global, not shared */
    case 2: cp_async_16(tile + 4, gmem, 16); cp_async_wait<0>(); break;         /* misaligned destination */
    case 3: cp_async_16(gmem + 64, gmem, 16); cp_async_wait<0>(); break;        /* global destination */
    case 4: mma_m16n8k16_bf16(acc, r, r, acc); break;                           /* a 16-thread block */
    case 5:                                                                     /* two call sites */
        if (threadIdx.x < 16) mma_m16n8k16_bf16(acc, r, r, acc);
        else mma_m16n8k16_bf16(acc, r, r, acc);
        break;
    case 6: /* a destination read before the wait_group that lands it (across a barrier, even) */
        if (threadIdx.x == 0) cp_async_16(tile, gmem, 16);
        cp_async_commit();
        __syncthreads();
        acc[0] = (float)tile[0];
        cp_async_wait<0>();
        break;
    }
    gmem[threadIdx.x] = acc[0] + (float)r[0] * 0.0f;
}

extern "C" int emu_tensor_broken(int which, float *gmem)
{
    DDP_LAUNCH(tensor_broken_kernel, 1, which == 4 ? 16 : 32, 0, 0, which, gmem);
    return (int)DDP_LAUNCH_STATUS();
}
