/* cudaemu_wgmma.cpp — the warpgroup matrix instructions of sm_90a, as the PTX ISA defines them for
 * bf16 operands and fp32 accumulators: wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16 (A from
 * shared memory through a matrix descriptor, or from registers; B from shared memory), wgmma.fence,
 * wgmma.commit_group and wgmma.wait_group.
 *
 * A warpgroup is four consecutive warps, the first a multiple of four; warp w of it computes rows
 * 16w .. 16w + 15 of the 64-row product, so the emulator runs each warp's share as a warp exchange
 * of the scheduler (all 32 lanes at the same call site) and checks that the group's four warps exist.
 * Shared-memory operands follow the ISA's canonical layouts (K-major and MN-major; no swizzle, or the
 * 32-, 64- and 128-byte swizzles, whose XOR of address bits 4.. with bits 7.. is applied to the
 * offset in the block's dynamic shared memory, taken as a 1024-byte-aligned window). Each lane's
 * accumulators are the ISA's fragment: d[4i + q] is row 16w + g + 8(q / 2), column 8i + 2t + q % 2
 * (g = lane / 4, t = lane % 4); register A is mma.m16n8k16's A fragment of the warp's 16 rows.
 *
 * Asynchrony is emulated at its most adversarial: an issued product reads shared memory and the A
 * registers and writes d only at the wait_group that covers its commit group, so a kernel that reads
 * the accumulators early, or overwrites an operand before the wait, computes wrong numbers here. The
 * emulator also asks for a wgmma.fence before the first wgmma after each wait_group (stricter than
 * the ISA, which asks for one where other instructions touched the registers; our kernels fence
 * before each batch), and aborts on descriptors outside dynamic shared memory, a nonzero base
 * offset, mismatched operands within a warp, a partial warpgroup, or (cudaemu_sched.cpp) a thread
 * that exits with products not waited for. Operand reads go to the race
 * check from lane 0 of each warp at the issue. It must not schedule fibers. */
#include "cudaemu_internal.h"
#include "cudaemu_kernel.h"

#include <stdio.h>
#include <string.h>

#include <atomic>

#include "cudaemu.h"

namespace ddp_cudaemu {

namespace {

std::atomic<uint64_t> wgmma_count{0};

/* One lane's operands of a wgmma (param: n | scale_d << 9 | tnsp_a << 10 | tnsp_b << 11). */
struct wgmma_lane {
    float *d;
    const uint32_t *a; /* NULL: A from shared memory */
    uint64_t desc_a, desc_b;
    wgmma_state *state;
    int warp_rank; /* the warp's place in its warpgroup, 0..3 */
};

struct wgmma_wait_lane {
    wgmma_state *state;
    int newest_pending;
};

float bf16_at(const char *p)
{
    uint16_t bits;
    memcpy(&bits, p, sizeof bits);
    uint32_t u = (uint32_t)bits << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

[[noreturn]] void die_at(const char *what, const char *file, int line, const char *detail)
{
    char text[400];
    snprintf(text, sizeof text, "at %s:%d: %s", file, line, detail);
    die_in_kernel(what, text);
}

/* The byte offset, in the dynamic shared-memory window, of element (mn, k) (k < 16) of the operand
 * `desc` describes: the ISA's canonical layouts in 16-byte chunks of 8 bf16, W chunks to a swizzled
 * row. K-major: row mn's chunk k / 8 at (mn % 8)·W + (mn / 8)·SBO + (k / 8)·(W > 1 ? 16 : LBO);
 * MN-major: chunk mn / 8 = j of k-row k at (j % W) + (j / W)·LBO + (k % 8)·W + (k / 8)·SBO for a
 * swizzle, j·SBO + (k % 8) + (k / 8)·LBO without. */
size_t operand_offset(uint64_t desc, bool mn_major, int mn, int k)
{
    const size_t start = (desc & 0x3fffu) << 4, lbo = ((desc >> 16) & 0x3fffu) << 4;
    const size_t sbo = ((desc >> 32) & 0x3fffu) << 4;
    const int mode = (int)(desc >> 62), w = mode == 1 ? 8 : mode == 2 ? 4 : mode == 3 ? 2 : 1;
    size_t off;
    if (!mn_major)
        off = start + (size_t)(mn % 8) * 16 * w + (size_t)(mn / 8) * sbo + (size_t)(k % 8) * 2 +
              (size_t)(k / 8) * (mode ? 16 : lbo);
    else if (mode == 0)
        off = start + (size_t)(mn / 8) * sbo + (size_t)(k % 8) * 16 + (size_t)(k / 8) * lbo + (size_t)(mn % 8) * 2;
    else
        off = start + (size_t)(mn / 8 % w) * 16 + (size_t)(mn / 8 / w) * lbo + (size_t)(k % 8) * 16 * w +
              (size_t)(k / 8) * sbo + (size_t)(mn % 8) * 2;
    const unsigned bits = mode == 1 ? 7u : mode == 2 ? 3u : mode == 3 ? 1u : 0u; /* 128, 64, 32 bytes */
    return off ^ (((off >> 7) & bits) << 4);
}

/* The element's address, checked to lie in the dynamic window. */
const char *operand_at(uint64_t desc, bool mn_major, int mn, int k, const char *file, int line)
{
    size_t window = 0;
    char *base = dynamic_shared_window(&window);
    const size_t off = operand_offset(desc, mn_major, mn, k);
    if (off + 2 > window) {
        char detail[200];
        snprintf(detail, sizeof detail, "element (%d, %d) at byte %zu of a %zu-byte dynamic shared memory window "
                 "(descriptor 0x%016llx)", mn, k, off, window, (unsigned long long)desc);
        die_at("wgmma operand outside dynamic shared memory", file, line, detail);
    }
    return base + off;
}

void check_descriptor(uint64_t desc, const char *which, const char *file, int line)
{
    if ((desc >> 49) & 7u) {
        char detail[160];
        snprintf(detail, sizeof detail, "%s's descriptor 0x%016llx has a base offset (bits 49-51), which only an "
                 "operand not aligned to its swizzle pattern needs", which, (unsigned long long)desc);
        die_at("unsupported wgmma descriptor", file, line, detail);
    }
}

/* Runs one warp's share of an issued wgmma: reads its operands as they are now and writes d. */
void complete_op(const wgmma_pending &op)
{
    const int n = op.n, rank = op.warp_rank;
    float A[16][16], D[16][256];
    for (int r = 0; r < 16; r++)
        for (int k = 0; k < 16; k++)
            if (!op.a[0])
                A[r][k] = bf16_at(operand_at(op.desc_a, op.tnsp_a, 16 * rank + r, k, op.file, op.line));
    for (int lane = 0; lane < 32 && op.a[0]; lane++) {
        const int g = lane / 4, t = lane % 4;
        for (int i = 0; i < 8; i++) {
            const uint32_t reg = op.a[lane][i / 2], bits = i % 2 ? reg >> 16 : reg & 0xffffu;
            const uint16_t half = (uint16_t)bits;
            A[g + 8 * ((i / 2) % 2)][2 * t + (i % 2) + 8 * (i / 4)] = bf16_at(reinterpret_cast<const char *>(&half));
        }
    }
    for (int lane = 0; lane < 32 && op.scale_d; lane++) { /* scale-d 0: d is written, never read */
        const int g = lane / 4, t = lane % 4;
        for (int j = 0; j < n / 2; j++)
            D[g + 8 * (j % 4 / 2)][8 * (j / 4) + 2 * t + j % 2] = op.d[lane][j];
    }
    static thread_local float B[16][256];
    for (int k = 0; k < 16; k++)
        for (int c = 0; c < n; c++)
            B[k][c] = bf16_at(operand_at(op.desc_b, op.tnsp_b, c, k, op.file, op.line));
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < n; c++) {
            double acc = 0.0; /* bf16 products are exact; the sum is rounded once */
            for (int k = 0; k < 16; k++)
                acc += (double)A[r][k] * (double)B[k][c];
            D[r][c] = (float)(acc + (op.scale_d ? (double)D[r][c] : 0.0));
        }
    for (int lane = 0; lane < 32; lane++) {
        const int g = lane / 4, t = lane % 4;
        for (int j = 0; j < n / 2; j++)
            op.d[lane][j] = D[g + 8 * (j % 4 / 2)][8 * (j / 4) + 2 * t + j % 2];
    }
}

void complete_issue(int param, void *const lane_ops[32])
{
    wgmma_count.fetch_add(1, std::memory_order_relaxed);
    const wgmma_lane *first = static_cast<const wgmma_lane *>(lane_ops[0]);
    wgmma_pending op{};
    op.n = param & 511;
    op.scale_d = (param >> 9) & 1;
    op.tnsp_a = (param >> 10) & 1;
    op.tnsp_b = (param >> 11) & 1;
    op.desc_a = first->desc_a;
    op.desc_b = first->desc_b;
    op.warp_rank = first->warp_rank;
    op.group = first->state->committed;
    for (int lane = 0; lane < 32; lane++) {
        const wgmma_lane *l = static_cast<const wgmma_lane *>(lane_ops[lane]);
        char detail[200];
        if (!l->state->fenced) {
            snprintf(detail, sizeof detail, "lane %d issues a wgmma with no wgmma.fence since its last "
                     "wgmma.wait_group (or its start)", lane);
            die_in_kernel("wgmma without a fence", detail);
        }
        if ((l->a != NULL) != (first->a != NULL) || (!l->a && l->desc_a != first->desc_a) ||
            l->desc_b != first->desc_b || l->state->committed != first->state->committed) {
            snprintf(detail, sizeof detail, "lane %d's operands or commit groups differ from lane 0's (a wgmma is one "
                     "instruction of the whole warpgroup)", lane);
            die_in_kernel("mismatched wgmma operands", detail);
        }
        op.d[lane] = l->d;
        op.a[lane] = l->a;
    }
    op.file = first->state->issue_file;
    op.line = first->state->issue_line;
    first->state->pending.push_back(op);
}

void complete_wait(void *const lane_ops[32])
{
    const wgmma_wait_lane *first = static_cast<const wgmma_wait_lane *>(lane_ops[0]);
    wgmma_state &s = *first->state;
    for (int lane = 0; lane < 32; lane++) {
        const wgmma_wait_lane *l = static_cast<const wgmma_wait_lane *>(lane_ops[lane]);
        if (l->state->committed != s.committed || l->newest_pending != first->newest_pending)
            die_in_kernel("mismatched wgmma.wait_group", "the lanes of a warp differ in their commit groups or N");
        l->state->fenced = false;
    }
    const uint64_t done_below = s.committed > (uint64_t)first->newest_pending ? s.committed - first->newest_pending : 0;
    size_t kept = 0;
    for (const wgmma_pending &op : s.pending) {
        if (op.group < done_below)
            complete_op(op);
        else
            s.pending[kept++] = op;
    }
    s.pending.resize(kept);
}

/* The calling thread's place: its warp's rank in its warpgroup, after checking the group exists. */
int warp_rank_checked(const char *file, int line)
{
    const unsigned threads = cur_block_dim.x * cur_block_dim.y * cur_block_dim.z;
    const unsigned linear = cur_thread_idx->x + cur_block_dim.x * (cur_thread_idx->y + cur_block_dim.y *
                                                                   cur_thread_idx->z);
    if ((linear / 128 + 1) * 128 > threads) {
        char detail[160];
        snprintf(detail, sizeof detail, "thread %u's warpgroup (threads %u-%u) is not all in a block of %u threads",
                 linear, linear / 128 * 128, linear / 128 * 128 + 127, threads);
        die_at("partial warpgroup", file, line, detail);
    }
    return (int)(linear / 32 % 4);
}

} // namespace

void complete_wgmma_exchange(int kind, int param, void *const lane_ops[32])
{
    if (kind == WARP_WGMMA)
        complete_issue(param, lane_ops);
    else
        complete_wait(lane_ops);
}

uint32_t shared_window_offset(const void *p, const char *file, int line)
{
    size_t window = 0;
    const char *base = dynamic_shared_window(&window), *c = static_cast<const char *>(p);
    if (c < base || c >= base + window) {
        char detail[160];
        snprintf(detail, sizeof detail, "%p is not in this block's dynamic shared memory (%zu bytes at %p)", p,
                 window, static_cast<const void *>(base));
        die_at("wgmma descriptor outside dynamic shared memory", file, line, detail);
    }
    return (uint32_t)(c - base);
}

void wgmma_bf16(float *d, int n, const uint32_t *a, uint64_t desc_a, uint64_t desc_b, int scale_d, int tnsp_a,
                int tnsp_b, const char *file, int line)
{
    wgmma_state &s = running_wgmma_state("wgmma.mma_async");
    if (emulated_cc_major() < 9)
        die_at("wgmma on a GPU before Hopper", file, line, "the emulated device is sm_80 (DDP_CUDA_EMU_ARCH=80); on "
               "a GPU the kernel would have no sm_90a code to run");
    if (n < 8 || n > 256 || n % 8 != 0 || (a && tnsp_a)) {
        char detail[120];
        snprintf(detail, sizeof detail, "m64n%dk16 with A from %s%s", n, a ? "registers" : "shared memory",
                 a && tnsp_a ? ", transposed (only a shared-memory A can be)" : "");
        die_at("invalid wgmma", file, line, detail);
    }
    if (!a) check_descriptor(desc_a, "A", file, line);
    check_descriptor(desc_b, "B", file, line);
    const int rank = warp_rank_checked(file, line);
    if (race_running_lane() == 0) { /* the warp's operand reads, for the race check */
        for (int k = 0; k < 16; k++) {
            for (int r = 0; r < 16 && !a; r++)
                race_access(operand_at(desc_a, tnsp_a, 16 * rank + r, k, file, line), 2, RACE_ASYNC_READ, "wgmma (A)",
                            file, line);
            for (int c = 0; c < n; c++)
                race_access(operand_at(desc_b, tnsp_b, c, k, file, line), 2, RACE_ASYNC_READ, "wgmma (B)", file,
                            line);
        }
    }
    s.issue_file = file;
    s.issue_line = line;
    wgmma_lane op{d, a, a ? 0 : desc_a, desc_b, &s, rank};
    const int param = n | scale_d << 9 | tnsp_a << 10 | tnsp_b << 11;
    warp_op(WARP_WGMMA, 0xffffffffu, static_cast<uint64_t>(reinterpret_cast<uintptr_t>(&op)), param, 32, file, line);
}

void wgmma_fence(const char *file, int line)
{
    (void)file;
    (void)line;
    running_wgmma_state("wgmma.fence").fenced = true;
}

void wgmma_commit(const char *file, int line)
{
    (void)file;
    (void)line;
    running_wgmma_state("wgmma.commit_group").committed++;
}

void wgmma_wait(int newest_pending, const char *file, int line)
{
    wgmma_wait_lane op{&running_wgmma_state("wgmma.wait_group"), newest_pending};
    warp_op(WARP_WGMMA_WAIT, 0xffffffffu, static_cast<uint64_t>(reinterpret_cast<uintptr_t>(&op)), newest_pending,
            32, file, line);
}

} /* namespace ddp_cudaemu */

extern "C" uint64_t cudaemu_wgmma_count(void)
{
    return ddp_cudaemu::wgmma_count.load(std::memory_order_relaxed);
}
