/* cudaemu_tma.cpp — Hopper's tensor memory accelerator: tensor maps (cuTensorMapEncodeTiled, reached
 * as on a GPU through cudaGetDriverEntryPointByVersion) and the tiled tensor copy from global to
 * shared memory that completes on an mbarrier (cp.async.bulk.tensor.Nd...tile.mbarrier::complete_tx).
 *
 * A tensor map keeps, in the 128 opaque bytes of a CUtensorMap, what the copy needs: the base
 * address, element size, each dimension's extent and byte stride, the box, the swizzle and the
 * out-of-bounds fill. Encoding checks the driver's documented rules (alignments, strides a multiple
 * of 16, box sizes, a swizzled box's inner extent within the swizzle span, the whole tensor inside
 * one device allocation) and returns CUDA_ERROR_INVALID_VALUE naming the rule; layouts the emulator
 * does not implement (interleaved, element strides other than 1, a swizzled box narrower than its
 * span, sub-byte types) are refused the same way, saying so. The copy writes the box densely,
 * dimension 0 fastest, elements outside the tensor as zero (or NaN), then applies the swizzle to the
 * offset in the block's dynamic shared memory as wgmma reads it (cudaemu_wgmma.cpp: address bits
 * 4.. XOR bits 7..), and counts the whole box's bytes on the mbarrier; the race check and the phase
 * are cudaemu_sync.cpp's. Must not schedule fibers. */
#include "cudaemu_internal.h"
#include "cudaemu_kernel.h"

#include <cuda.h>
#include <stdarg.h>
#include <atomic>
#include <stdio.h>
#include <string.h>

namespace ddp_cudaemu {

namespace {

enum { MAX_RANK = 5, MAP_MAGIC = 0x544d4150 /* "TMAP" */ };

std::atomic<uint64_t> tensor_copy_count{0};

/* What the emulator keeps in a CUtensorMap. */
struct tensor_map {
    uint32_t magic;
    uint8_t rank, elem_bytes, swizzle_span /* bytes, 0: none */, nan_fill;
    const char *base;
    uint64_t dims[MAX_RANK];
    uint64_t strides[MAX_RANK]; /* bytes; strides[0] is the element size */
    uint16_t box[MAX_RANK];
};
static_assert(sizeof(tensor_map) <= sizeof(CUtensorMap), "a tensor map fits a CUtensorMap's opaque bytes");

/* The element size of a data type, 0 for the sub-byte types the emulator does not implement. */
int element_bytes(CUtensorMapDataType type, bool *is_float)
{
    *is_float = true;
    switch (type) {
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16: return 2;
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ: return 4;
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT64: return 8;
    default: break;
    }
    *is_float = false;
    switch (type) {
    case CU_TENSOR_MAP_DATA_TYPE_UINT8: return 1;
    case CU_TENSOR_MAP_DATA_TYPE_UINT16: return 2;
    case CU_TENSOR_MAP_DATA_TYPE_UINT32:
    case CU_TENSOR_MAP_DATA_TYPE_INT32: return 4;
    case CU_TENSOR_MAP_DATA_TYPE_UINT64:
    case CU_TENSOR_MAP_DATA_TYPE_INT64: return 8;
    default: return 0;
    }
}

CUresult refuse(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
CUresult refuse(const char *fmt, ...)
{
    char text[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    fprintf(stderr, "cudaemu: cuTensorMapEncodeTiled: %s\n", text);
    return CUDA_ERROR_INVALID_VALUE;
}

int span_of(CUtensorMapSwizzle swizzle)
{
    switch (swizzle) {
    case CU_TENSOR_MAP_SWIZZLE_NONE: return 0;
    case CU_TENSOR_MAP_SWIZZLE_32B: return 32;
    case CU_TENSOR_MAP_SWIZZLE_64B: return 64;
    case CU_TENSOR_MAP_SWIZZLE_128B: return 128;
    default: return -1;
    }
}

/* The shape rules: extents, strides, box, element strides. */
CUresult check_shape(tensor_map &m, const cuuint64_t *dims, const cuuint64_t *strides, const cuuint32_t *box,
                     const cuuint32_t *element_strides)
{
    m.strides[0] = m.elem_bytes;
    for (int i = 0; i < m.rank; i++) {
        if (dims[i] == 0 || dims[i] > (1ull << 32))
            return refuse("globalDim[%d] = %llu (1 to 2^32)", i, (unsigned long long)dims[i]);
        if (box[i] == 0 || box[i] > 256)
            return refuse("boxDim[%d] = %u (1 to 256)", i, box[i]);
        if (element_strides[i] != 1)
            return refuse("elementStrides[%d] = %u: the emulator implements element strides of 1 only", i,
                          element_strides[i]);
        m.dims[i] = dims[i];
        m.box[i] = (uint16_t)box[i];
        if (i == 0)
            continue;
        const uint64_t stride = strides[i - 1];
        if (stride % 16 != 0 || stride >= (1ull << 40))
            return refuse("globalStrides[%d] = %llu bytes (a multiple of 16, below 2^40)", i - 1,
                          (unsigned long long)stride);
        if (stride < m.strides[i - 1] * m.dims[i - 1])
            return refuse("globalStrides[%d] = %llu bytes, less than the %llu bytes of the dimension below it",
                          i - 1, (unsigned long long)stride, (unsigned long long)(m.strides[i - 1] * m.dims[i - 1]));
        m.strides[i] = stride;
    }
    if (box[0] * m.elem_bytes % 16 != 0)
        return refuse("boxDim[0] = %u elements of %d bytes: the inner box must be a multiple of 16 bytes", box[0],
                      m.elem_bytes);
    if (m.swizzle_span && box[0] * m.elem_bytes > m.swizzle_span)
        return refuse("an inner box of %u bytes exceeds the %d-byte swizzle", box[0] * m.elem_bytes,
                      m.swizzle_span);
    if (m.swizzle_span && box[0] * m.elem_bytes != m.swizzle_span)
        return refuse("an inner box of %u bytes under the %d-byte swizzle: the emulator implements swizzled boxes "
                      "exactly one span wide only", box[0] * m.elem_bytes, m.swizzle_span);
    return CUDA_SUCCESS;
}

CUresult encode_tiled(CUtensorMap *out, CUtensorMapDataType type, cuuint32_t rank, void *address,
                      const cuuint64_t *dims, const cuuint64_t *strides, const cuuint32_t *box,
                      const cuuint32_t *element_strides, CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                      CUtensorMapL2promotion, CUtensorMapFloatOOBfill oob_fill)
{
    if (!out || (uintptr_t)out % 64 != 0)
        return refuse("tensorMap %p is not 64-byte aligned", (void *)out);
    if (rank < 1 || rank > MAX_RANK || !dims || !box || !element_strides || (rank > 1 && !strides))
        return refuse("tensorRank %u (1 to %d) or a missing array", rank, MAX_RANK);
    if (interleave != CU_TENSOR_MAP_INTERLEAVE_NONE)
        return refuse("interleave %d: the emulator implements CU_TENSOR_MAP_INTERLEAVE_NONE only", (int)interleave);
    tensor_map m{};
    bool is_float = false;
    m.magic = MAP_MAGIC;
    m.rank = (uint8_t)rank;
    m.elem_bytes = (uint8_t)element_bytes(type, &is_float);
    if (m.elem_bytes == 0)
        return refuse("data type %d: the emulator implements whole-byte types only", (int)type);
    const int span = span_of(swizzle);
    if (span < 0)
        return refuse("swizzle %d: the emulator implements none, 32, 64 and 128 bytes", (int)swizzle);
    m.swizzle_span = (uint8_t)span;
    if (oob_fill == CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA && !is_float)
        return refuse("a NaN out-of-bounds fill needs a floating-point type");
    m.nan_fill = oob_fill == CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA;
    if ((uintptr_t)address % 16 != 0)
        return refuse("globalAddress %p is not 16-byte aligned", address);
    m.base = static_cast<const char *>(address);
    if (CUresult r = check_shape(m, dims, strides, box, element_strides))
        return r;
    uint64_t extent = m.elem_bytes;
    for (int i = 0; i < m.rank; i++)
        extent += (m.dims[i] - 1) * m.strides[i];
    if (const char *problem = device_range_problem(address, extent))
        return refuse("the tensor (%llu bytes from %p): %s", (unsigned long long)extent, address, problem);
    memset(out, 0, sizeof *out);
    memcpy(out, &m, sizeof m);
    return CUDA_SUCCESS;
}

/* Writes the box whose first element is at `coords` into the box-sized buffer at dst (window offset
 * `window_offset`), swizzled; elements outside the tensor get the fill. The copy at file:line reads
 * the elements inside for the running block. */
void copy_box(const tensor_map &m, const int *coords, char *dst, size_t window_offset, const char *file, int line)
{
    size_t count = 1;
    for (int i = 0; i < m.rank; i++)
        count *= m.box[i];
    const unsigned bits = m.swizzle_span == 128 ? 7u : m.swizzle_span == 64 ? 3u : m.swizzle_span == 32 ? 1u : 0u;
    const size_t eb = m.elem_bytes;
    char fill[8];
    memset(fill, 0, sizeof fill);
    if (m.nan_fill)
        memset(fill, 0xff, sizeof fill); /* all-ones: a NaN in every floating-point width */
    for (size_t e = 0; e < count; e++) {
        size_t rest = e, src = 0;
        bool inside = true;
        for (int i = 0; i < m.rank; i++) {
            const int64_t g = (int64_t)coords[i] + (int64_t)(rest % m.box[i]);
            rest /= m.box[i];
            inside = inside && g >= 0 && (uint64_t)g < m.dims[i];
            src += inside ? (size_t)g * m.strides[i] : 0;
        }
        const size_t at = window_offset + e * eb, swizzled = at ^ (((at >> 7) & bits) << 4);
        if (inside)
            global_race_copy_read(m.base + src, eb, "cp.async.bulk.tensor", file, line);
        memcpy(dst + (swizzled - window_offset), inside ? m.base + src : fill, eb);
    }
}

} // namespace

void cp_async_bulk_tensor(void *dst, const void *map, int rank, const int *coords, uint64_t *bar, const char *file,
                          int line)
{
    running_thread_index("cp.async.bulk.tensor");
    char detail[400];
    tensor_map m;
    memcpy(&m, map, sizeof m);
    if (m.magic != MAP_MAGIC || m.rank != rank) {
        snprintf(detail, sizeof detail, "at %s:%d: a %dd copy through %s", file, line, rank,
                 m.magic != MAP_MAGIC ? "bytes no cuTensorMapEncodeTiled wrote (a tensor map passed by pointer to "
                                        "host memory, or garbage)" : "a tensor map of another rank");
        die_in_kernel("invalid cp.async.bulk.tensor", detail);
    }
    size_t bytes = m.elem_bytes, window = 0;
    for (int i = 0; i < m.rank; i++)
        bytes *= m.box[i];
    const char *base = dynamic_shared_window(&window);
    char *d = static_cast<char *>(dst);
    const bool in_window = d >= base && d + bytes <= base + window;
    /* dynamic shared memory stands for a 1024-byte-aligned window (as for wgmma's descriptors) */
    const uintptr_t alignment = in_window ? (uintptr_t)(d - base) : (uintptr_t)dst;
    if (alignment % 128 != 0 || !in_shared_memory(dst, bytes) || (m.swizzle_span && !in_window)) {
        snprintf(detail, sizeof detail, "at %s:%d: destination %p..+%zu must be 128-byte aligned and inside %s", file,
                 line, dst, bytes, m.swizzle_span ? "dynamic shared memory (swizzled)" : "one shared-memory array");
        die_in_kernel("misaligned cp.async.bulk.tensor", detail);
    }
    tensor_copy_count.fetch_add(1, std::memory_order_relaxed);
    land_bulk_copy(bar, dst, bytes, "cp.async.bulk.tensor", file, line,
                   [&] { copy_box(m, coords, d, in_window ? (size_t)(d - base) : 0, file, line); });
}

} /* namespace ddp_cudaemu */

extern "C" uint64_t cudaemu_tma_count(void)
{
    return ddp_cudaemu::tensor_copy_count.load(std::memory_order_relaxed);
}

extern "C" cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **fn, unsigned int version,
                                                        unsigned long long flags,
                                                        enum cudaDriverEntryPointQueryResult *status)
{
    (void)version, (void)flags;
    const bool found = symbol && strcmp(symbol, "cuTensorMapEncodeTiled") == 0;
    if (status)
        *status = found ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
    if (!fn)
        return ddp_cudaemu::fail(cudaErrorInvalidValue, "cudaGetDriverEntryPointByVersion: funcPtr is NULL");
    *fn = found ? reinterpret_cast<void *>(&ddp_cudaemu::encode_tiled) : nullptr;
    if (!found)
        fprintf(stderr, "cudaemu: cudaGetDriverEntryPointByVersion: %s is not emulated (only cuTensorMapEncodeTiled)\n",
                symbol ? symbol : "(null)");
    return cudaSuccess;
}
