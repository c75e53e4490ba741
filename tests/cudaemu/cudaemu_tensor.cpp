/* cudaemu_tensor.cpp — the tensor-core and asynchronous-copy instructions our kernels use, as the
 * PTX ISA defines them: mma.sync m16n8k16 with bf16 operands and fp32 accumulation, ldmatrix
 * (.x1/.x2/.x4, optionally .trans) and cp.async with its commit and wait groups.
 *
 * Each lane holds exactly the fragment elements the ISA assigns it (PTX ISA, "Matrix Fragments for
 * mma.m16n8k16" and "ldmatrix"), so a kernel that assumes another layout computes wrong numbers
 * here as it would on a GPU. What a GPU would fault on or silently corrupt is reported and aborts:
 * an ldmatrix row address that is not 16-byte aligned or not in shared memory, a cp.async whose
 * destination is not shared memory or whose source bytes are not inside one device allocation, a
 * misaligned or oversized copy. A cp.async copy lands only when
 * the issuing thread's cp.async.wait_group covers it, so shared memory read before the wait (or,
 * under another fiber order, before the barrier after another thread's wait) holds stale data or
 * the NaN poison. ldmatrix's row reads and cp.async's writes (when issued and when landed) go to
 * the race check (cudaemu_race.cpp). mma and ldmatrix are warp exchanges (cudaemu_warp_exchange.cpp), which
 * checks that all 32 lanes reach the same call site; this file computes their results. It must not
 * schedule fibers. */
#include "cudaemu_internal.h"
#include "cudaemu_kernel.h"

#include <stdio.h>
#include <string.h>

#include <atomic>

#include "cudaemu.h"

namespace ddp_cudaemu {

namespace {

std::atomic<uint64_t> mma_count{0};

/* One lane's operands of an mma (registers as the ISA numbers them). */
struct mma_lane {
    const uint32_t *a; /* 4 regs: a0..a7, two bf16 per reg, lower-indexed element in the low half */
    const uint32_t *b; /* 2 regs: b0..b3 */
    const float *c;    /* 4: c0..c3 */
    float *d;          /* 4: d0..d3 */
};

struct ldmatrix_lane {
    const void *row; /* the row address this lane supplies (lanes 8i..8i+7: matrix i) */
    uint32_t *regs;  /* count regs */
};

float bf16_bits_to_float(uint16_t bits)
{
    uint32_t u = (uint32_t)bits << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

uint16_t half_of(uint32_t reg, int hi) { return (uint16_t)(hi ? reg >> 16 : reg & 0xffffu); }

/* m16n8k16 fragment layouts, with g = lane / 4 and t = lane % 4:
 *   A (16x16): a_i at row g + 8·((i / 2) % 2), column 2t + (i % 2) + 8·(i / 4), a_i in reg i / 2;
 *   B (16x8):  b_i at row 2t + (i % 2) + 8·(i / 2), column g, b_i in reg i / 2;
 *   C, D (16x8 fp32): c_i at row g + 8·(i / 2), column 2t + (i % 2). */
void complete_mma(void *const lane_ops[32])
{
    mma_count.fetch_add(1, std::memory_order_relaxed);
    float A[16][16], B[16][8], C[16][8];
    for (int lane = 0; lane < 32; lane++) {
        const mma_lane *op = static_cast<const mma_lane *>(lane_ops[lane]);
        const int g = lane / 4, t = lane % 4;
        for (int i = 0; i < 8; i++)
            A[g + 8 * ((i / 2) % 2)][2 * t + (i % 2) + 8 * (i / 4)] = bf16_bits_to_float(half_of(op->a[i / 2], i % 2));
        for (int i = 0; i < 4; i++)
            B[2 * t + (i % 2) + 8 * (i / 2)][g] = bf16_bits_to_float(half_of(op->b[i / 2], i % 2));
        for (int i = 0; i < 4; i++)
            C[g + 8 * (i / 2)][2 * t + (i % 2)] = op->c[i];
    }
    float D[16][8];
    for (int r = 0; r < 16; r++)
        for (int n = 0; n < 8; n++) {
            double acc = 0.0; /* bf16 products are exact in float; the sum is rounded once */
            for (int k = 0; k < 16; k++)
                acc += (double)A[r][k] * (double)B[k][n];
            D[r][n] = (float)(acc + (double)C[r][n]);
        }
    for (int lane = 0; lane < 32; lane++) { /* every c is read above, so d may alias c */
        const mma_lane *op = static_cast<const mma_lane *>(lane_ops[lane]);
        const int g = lane / 4, t = lane % 4;
        for (int i = 0; i < 4; i++)
            op->d[i] = D[g + 8 * (i / 2)][2 * t + (i % 2)];
    }
}

/* ldmatrix: matrix i's row r comes from lane 8i + r's address. Without .trans lane L receives row
 * L / 4, elements 2(L % 4) and 2(L % 4) + 1; with .trans element j of its pair is the matrix's row
 * 2(L % 4) + j, column L / 4. */
void complete_ldmatrix(int param, void *const lane_ops[32])
{
    const int count = param & 7;
    const bool trans = (param >> 4) & 1;
    uint16_t m[4][8][8];
    for (int i = 0; i < count; i++)
        for (int r = 0; r < 8; r++) {
            const ldmatrix_lane *op = static_cast<const ldmatrix_lane *>(lane_ops[8 * i + r]);
            char detail[256];
            if ((uintptr_t)op->row % 16 != 0) {
                snprintf(detail, sizeof detail, "lane %d's row address %p (matrix %d, row %d) is not 16-byte aligned",
                         8 * i + r, op->row, i, r);
                die_in_kernel("misaligned ldmatrix address", detail);
            }
            if (!in_shared_memory(op->row, 16)) {
                snprintf(detail, sizeof detail, "lane %d's row address %p (matrix %d, row %d) is not inside one "
                         "shared-memory array of this block", 8 * i + r, op->row, i, r);
                die_in_kernel("ldmatrix outside shared memory", detail);
            }
            memcpy(m[i][r], op->row, 16);
        }
    for (int lane = 0; lane < 32; lane++) {
        const ldmatrix_lane *op = static_cast<const ldmatrix_lane *>(lane_ops[lane]);
        for (int i = 0; i < count; i++) {
            uint16_t lo, hi;
            if (trans) {
                lo = m[i][2 * (lane % 4)][lane / 4];
                hi = m[i][2 * (lane % 4) + 1][lane / 4];
            } else {
                lo = m[i][lane / 4][2 * (lane % 4)];
                hi = m[i][lane / 4][2 * (lane % 4) + 1];
            }
            op->regs[i] = (uint32_t)lo | (uint32_t)hi << 16;
        }
    }
}

void complete_copy(const async_copy &c)
{
    race_async_land(c.dst, c.bytes, "the landing (at cp.async.wait_group) of the cp.async issued", c.file, c.line);
    memcpy(c.dst, c.src, c.src_bytes);
    memset(static_cast<char *>(c.dst) + c.src_bytes, 0, c.bytes - c.src_bytes);
}

} // namespace

void complete_tensor_exchange(int kind, int param, void *const lane_ops[32])
{
    if (kind == WARP_MMA)
        complete_mma(lane_ops);
    else
        complete_ldmatrix(param, lane_ops);
}

void mma_m16n8k16_bf16(float *d, const uint32_t *a, const uint32_t *b, const float *c, const char *file, int line)
{
    mma_lane op{a, b, c, d};
    warp_op(WARP_MMA, 0xffffffffu, static_cast<uint64_t>(reinterpret_cast<uintptr_t>(&op)), 0, 32, file, line);
}

void ldmatrix(uint32_t *regs, int count, bool trans, const void *row, const char *file, int line)
{
    if (count != 1 && count != 2 && count != 4) {
        char detail[128];
        snprintf(detail, sizeof detail, "at %s:%d: .x%d (the ISA has .x1, .x2 and .x4)", file, line, count);
        die_in_kernel("invalid ldmatrix", detail);
    }
    if (race_running_lane() < 8 * count) /* lanes 8·count and up supply no row */
        race_access(row, 16, RACE_READ, "ldmatrix", file, line);
    ldmatrix_lane op{row, regs};
    warp_op(WARP_LDMATRIX, 0xffffffffu, static_cast<uint64_t>(reinterpret_cast<uintptr_t>(&op)),
            count | (trans ? 16 : 0), 32, file, line);
}

void cp_async(void *dst, const void *src, unsigned bytes, unsigned src_bytes, const char *file, int line)
{
    async_queue &q = running_async_queue("cp.async");
    char detail[256];
    if (bytes != 4 && bytes != 8 && bytes != 16) {
        snprintf(detail, sizeof detail, "at %s:%d: copy size %u (the ISA has 4, 8 and 16)", file, line, bytes);
        die_in_kernel("invalid cp.async", detail);
    }
    if (src_bytes > bytes || (uintptr_t)dst % bytes != 0 || (src_bytes > 0 && (uintptr_t)src % bytes != 0)) {
        snprintf(detail, sizeof detail, "at %s:%d: %u of %u bytes from %p to %p (both must be aligned to the copy "
                 "size, and src-size at most cp-size)", file, line, src_bytes, bytes, src, dst);
        die_in_kernel("misaligned cp.async", detail);
    }
    const char *problem = src_bytes > 0 ? device_range_problem(src, src_bytes) : nullptr;
    if (problem) {
        snprintf(detail, sizeof detail, "at %s:%d: source %p..+%u is %s (on a GPU: an illegal address, or another "
                 "allocation's bytes)", file, line, src, src_bytes, problem);
        die_in_kernel("cp.async outside device memory", detail);
    }
    if (!in_shared_memory(dst, bytes)) {
        snprintf(detail, sizeof detail, "at %s:%d: destination %p is not inside one shared-memory array of this block",
                 file, line, dst);
        die_in_kernel("cp.async outside shared memory", detail);
    }
    /* the copy may land at any moment until its wait_group: a write from now on, and in flight; its
     * source is read for this block whenever it lands */
    race_async_issue(dst, bytes, file, line);
    if (src_bytes > 0)
        global_race_copy_read(src, src_bytes, "cp.async", file, line);
    q.copies.push_back(async_copy{dst, src, bytes, src_bytes, q.committed, file, line});
}

void cp_async_commit()
{
    running_async_queue("cp.async.commit_group").committed++;
}

void cp_async_wait(int newest_pending)
{
    async_queue &q = running_async_queue("cp.async.wait_group");
    /* groups numbered below committed - newest_pending are complete; uncommitted copies never are */
    const uint64_t done_below = q.committed > (uint64_t)newest_pending ? q.committed - (uint64_t)newest_pending : 0;
    size_t kept = 0;
    for (const async_copy &c : q.copies) {
        if (c.group < done_below)
            complete_copy(c);
        else
            q.copies[kept++] = c;
    }
    q.copies.resize(kept);
}

} /* namespace ddp_cudaemu */

extern "C" uint64_t cudaemu_mma_count(void)
{
    return ddp_cudaemu::mma_count.load(std::memory_order_relaxed);
}
