/* tensor_core.cuh — the tensor-core and asynchronous-copy instructions a kernel may use, one
 * spelling for both builds: inline PTX under nvcc (sm_80 and newer), the emulator's implementation
 * of the same instructions under DDP_CUDA_EMULATION (tests/cudaemu/cudaemu_tensor.cpp, which
 * gives each lane exactly the fragment the PTX ISA assigns it and checks alignment and address
 * spaces).
 *
 *   mma_m16n8k16_bf16(d, a, b, c)   mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
 *   ldmatrix_x{1,2,4}[_trans](regs, row_address)   ldmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared.b16
 *   cp_async_16(dst, src, src_bytes)   cp.async.cg.shared.global, 16 bytes, zero-filled past src_bytes
 *   cp_async_commit(), cp_async_wait<N>()   commit_group / wait_group N
 *
 * Fragment layouts (g = lane / 4, t = lane % 4; two bf16 per 32-bit register, the lower-indexed
 * element in the low half): A 16x16 row-major, reg r holds row g + 8·(r % 2), columns
 * 2t + 8·(r / 2) and +1; B 16x8 ("col"), reg r holds rows 2t + 8r and +1 of column g; C/D 16x8
 * fp32, element i is row g + 8·(i / 2), column 2t + (i % 2). ldmatrix: lanes 8i..8i+7 give matrix
 * i's row addresses (16-byte aligned, shared memory); reg i gets row g, columns 2t and 2t+1 of
 * matrix i (.trans: rows 2t and 2t+1 of column g). This header must not hold kernels. */
#ifndef DDP_TENSOR_CORE_CUH
#define DDP_TENSOR_CORE_CUH

#include "cuda_kernel.h"

#include <stdint.h>

namespace ddp_kernels {

#if defined(DDP_CUDA_EMULATION)

#define DDP_TC_SITE const char *file = __builtin_FILE(), int line = __builtin_LINE()
__device__ inline void mma_m16n8k16_bf16(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4],
                                         DDP_TC_SITE)
{
    ::ddp_cudaemu::mma_m16n8k16_bf16(d, a, b, c, file, line);
}
__device__ inline void ldmatrix_x1(uint32_t r[1], const void *row, DDP_TC_SITE) { ::ddp_cudaemu::ldmatrix(r, 1, false, row, file, line); }
__device__ inline void ldmatrix_x2(uint32_t r[2], const void *row, DDP_TC_SITE) { ::ddp_cudaemu::ldmatrix(r, 2, false, row, file, line); }
__device__ inline void ldmatrix_x4(uint32_t r[4], const void *row, DDP_TC_SITE) { ::ddp_cudaemu::ldmatrix(r, 4, false, row, file, line); }
__device__ inline void ldmatrix_x2_trans(uint32_t r[2], const void *row, DDP_TC_SITE) { ::ddp_cudaemu::ldmatrix(r, 2, true, row, file, line); }
__device__ inline void ldmatrix_x4_trans(uint32_t r[4], const void *row, DDP_TC_SITE) { ::ddp_cudaemu::ldmatrix(r, 4, true, row, file, line); }
__device__ inline void cp_async_16(void *dst, const void *src, unsigned src_bytes, DDP_TC_SITE)
{
    ::ddp_cudaemu::cp_async(dst, src, 16, src_bytes, file, line);
}
__device__ inline void cp_async_commit() { ::ddp_cudaemu::cp_async_commit(); }
template <int N> __device__ inline void cp_async_wait() { ::ddp_cudaemu::cp_async_wait(N); }
#undef DDP_TC_SITE

#else

__device__ inline void mma_m16n8k16_bf16(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4])
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%10,%11,%12,%13};\n"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]),
                   "f"(c[2]), "f"(c[3]));
}

__device__ inline uint32_t shared_address(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

__device__ inline void ldmatrix_x1(uint32_t r[1], const void *row)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(shared_address(row)));
}
__device__ inline void ldmatrix_x2(uint32_t r[2], const void *row)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1]) : "r"(shared_address(row)));
}
__device__ inline void ldmatrix_x4(uint32_t r[4], const void *row)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(shared_address(row)));
}
__device__ inline void ldmatrix_x2_trans(uint32_t r[2], const void *row)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1]) : "r"(shared_address(row)));
}
__device__ inline void ldmatrix_x4_trans(uint32_t r[4], const void *row)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(shared_address(row)));
}
__device__ inline void cp_async_16(void *dst, const void *src, unsigned src_bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(dst)), "l"(src),
                 "r"(src_bytes)
                 : "memory");
}
__device__ inline void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ inline void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

#endif

/* Two floats as one register of two bf16 (x in the low half), rounded to nearest-even: the A
 * operand of an mma built from an fp32 accumulator (attention's probabilities). */
__device__ inline uint32_t pack_bf16x2(float x, float y)
{
    const uint32_t lo = __bfloat16_as_ushort(__float2bfloat16_rn(x));
    const uint32_t hi = __bfloat16_as_ushort(__float2bfloat16_rn(y));
    return lo | hi << 16;
}

} // namespace ddp_kernels

#endif
