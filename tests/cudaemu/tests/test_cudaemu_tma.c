/* test_cudaemu_tma.c — the tensor memory accelerator (cuTensorMapEncodeTiled, reached through
 * cudaGetDriverEntryPointByVersion, and mbarrier.cuh's tma_load_*) lays a box of a global tensor into
 * shared memory as the PTX ISA and the driver say: under the emulator in every fiber order (suite
 * cudaemu), and built with -DDDP_TMA_ON_GPU on an sm_90 GPU (suite gpu), where the hardware referees.
 *
 * Proves, byte for byte against a layout computed here from the shape alone: 2-, 3- and 4-dimensional
 * bf16 boxes (dimension 0 innermost, a padded row pitch), without swizzle and with the 32-, 64- and
 * 128-byte swizzles (16-byte chunk c of 128-byte row r at chunk c XOR r % 8, narrower spans alike),
 * boxes hanging over every edge of the tensor and at negative coordinates filled with zeros (NaN
 * with the NaN fill), a head's rows picked out of a (T, H, hs) tensor, a box landing over ordinary
 * stores fenced by fence.proxy.async. The driver refuses (both builds) a stride not a multiple of
 * 16, a box over 256, a 128-byte swizzle under a 256-byte inner box, a misaligned base. Emulator
 * only: a read of the box with no mbarrier wait is a race, a box landing over ordinary stores with
 * no fence.proxy.async is a proxy hazard, a copy completing on an mbarrier whose init no
 * fence.mbarrier_init followed, a destination off 128-byte alignment and a map of the wrong rank
 * abort, and a phase expecting fewer bytes than the box is a deadlock naming its transaction
 * count. */
#include "tests/check.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "emu_test_util.h"

int emu_tma(int mode, const CUtensorMap *map, int rank, const int *coords, unsigned box_bytes, unsigned char *out);
int emu_tma_source_written(const CUtensorMap *map, int rank, const int *coords, unsigned box_bytes,
                           unsigned char *out, unsigned char *src, unsigned src_bytes);

enum { TMA_RIGHT, TMA_STORED_FIRST, TMA_NO_WAIT, TMA_MISALIGNED, TMA_SHORT_TX, TMA_NO_INIT_FENCE,
       TMA_STORES_UNFENCED, TMA_FENCED_LATE }; /* emu_tma_kernels.cu's tma_mode (and TMA_SOURCE_WRITTEN:
                                                 emu_tma_source_written) */
enum { MAX_ELEMS = 1 << 16 };

typedef CUresult (*encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                              const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave,
                              CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

/* A bf16 tensor: extents (dimension 0 innermost), row pitch in bytes (higher strides packed). */
struct tensor {
    int rank;
    uint64_t dims[4];
    uint64_t pitch;
};
struct box_case {
    const char *name;
    struct tensor t;
    uint32_t box[4];
    CUtensorMapSwizzle swizzle;
    int nan_fill;
    int coords[4];
};

static const struct box_case cases[] = {
    {"2d plain, padded pitch", {2, {80, 100}, 192}, {64, 16}, CU_TENSOR_MAP_SWIZZLE_NONE, 0, {8, 4}},
    {"2d 128B", {2, {80, 100}, 160}, {64, 16}, CU_TENSOR_MAP_SWIZZLE_128B, 0, {0, 0}},
    {"2d 128B past both ends", {2, {80, 100}, 160}, {64, 16}, CU_TENSOR_MAP_SWIZZLE_128B, 0, {40, 90}},
    {"2d 128B negative", {2, {80, 100}, 160}, {64, 16}, CU_TENSOR_MAP_SWIZZLE_128B, 0, {-16, -3}},
    {"2d 64B", {2, {80, 100}, 160}, {32, 8}, CU_TENSOR_MAP_SWIZZLE_64B, 0, {16, 7}},
    {"2d 32B NaN fill", {2, {80, 100}, 160}, {16, 8}, CU_TENSOR_MAP_SWIZZLE_32B, 1, {72, 95}},
    {"3d one head's rows", {3, {64, 4, 50}, 128}, {64, 1, 32}, CU_TENSOR_MAP_SWIZZLE_128B, 0, {0, 2, 10}},
    {"3d rows past T", {3, {64, 4, 50}, 128}, {64, 1, 32}, CU_TENSOR_MAP_SWIZZLE_128B, 0, {0, 3, 40}},
    {"4d (hs, H, T, B)", {4, {64, 3, 40, 2}, 128}, {64, 1, 16, 1}, CU_TENSOR_MAP_SWIZZLE_128B, 0, {0, 1, 30, 1}},
};
enum { CASES = (int)(sizeof cases / sizeof cases[0]) };

static encode_fn encoder(void)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
    CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &status) ==
          cudaSuccess && status == cudaDriverEntryPointSuccess && fn, "cuTensorMapEncodeTiled found");
    return (encode_fn)fn;
}

static uint64_t elements(const struct tensor *t)
{
    uint64_t n = t->pitch / 2;
    for (int i = 1; i < t->rank; i++)
        n *= t->dims[i];
    return n;
}

static uint16_t value_at(uint64_t linear) { return (uint16_t)((linear * 7 + 3) % 0x7f00); }

/* The tensor on the device, filled with value_at of each element's linear index (pitch included). */
static uint16_t *device_tensor(const struct tensor *t)
{
    static uint16_t host[MAX_ELEMS];
    const uint64_t n = elements(t);
    CHECK(n <= MAX_ELEMS, "tensor fits the test's buffer");
    for (uint64_t i = 0; i < n; i++)
        host[i] = value_at(i);
    uint16_t *d = NULL;
    CHECK(cudaMalloc((void **)&d, n * 2) == cudaSuccess, "cudaMalloc");
    cudaMemcpy(d, host, n * 2, cudaMemcpyHostToDevice);
    return d;
}

static CUresult encode(encode_fn fn, CUtensorMap *map, const struct tensor *t, void *base, const uint32_t *box,
                       CUtensorMapSwizzle swizzle, int nan_fill)
{
    cuuint64_t strides[3] = {t->pitch, 0, 0};
    const cuuint32_t ones[4] = {1, 1, 1, 1};
    for (int i = 1; i + 1 < t->rank; i++)
        strides[i] = strides[i - 1] * t->dims[i];
    return fn(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, (cuuint32_t)t->rank, base, t->dims, strides, box, ones,
              CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_NONE,
              nan_fill ? CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA : CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

static int span_bits(CUtensorMapSwizzle s)
{
    return s == CU_TENSOR_MAP_SWIZZLE_128B ? 7 : s == CU_TENSOR_MAP_SWIZZLE_64B ? 3 : s == CU_TENSOR_MAP_SWIZZLE_32B;
}

static int is_bf16_nan(uint16_t v) { return (v & 0x7f80u) == 0x7f80u && (v & 0x7fu) != 0; }

/* Compares the box as it landed with the layout the shape gives; returns the elements that differ. */
static int check_box(const struct box_case *c, const uint16_t *got, uint32_t count)
{
    int wrong = 0;
    for (uint32_t e = 0; e < count; e++) {
        uint32_t rest = e;
        uint64_t linear = 0, stride = 1;
        int inside = 1;
        for (int i = 0; i < c->t.rank; i++) {
            const int64_t g = (int64_t)c->coords[i] + rest % c->box[i];
            rest /= c->box[i];
            inside &= g >= 0 && (uint64_t)g < c->t.dims[i];
            linear += inside ? (uint64_t)g * stride : 0;
            stride *= i == 0 ? c->t.pitch / 2 : c->t.dims[i];
        }
        const uint32_t at = 2 * e, placed = at ^ (((at >> 7) & (uint32_t)span_bits(c->swizzle)) << 4);
        const uint16_t v = got[placed / 2];
        const int ok = inside ? v == value_at(linear) : c->nan_fill ? is_bf16_nan(v) : v == 0;
        if (!ok && wrong++ < 3)
            fprintf(stderr, "  %s: element %u (byte %u) holds 0x%04x, want %s 0x%04x\n", c->name, e, placed, v,
                    inside ? "value" : "fill", inside ? value_at(linear) : 0);
    }
    return wrong;
}

static uint32_t box_elements(const struct box_case *c)
{
    uint32_t n = 1;
    for (int i = 0; i < c->t.rank; i++)
        n *= c->box[i];
    return n;
}

static void run_case(encode_fn fn, const struct box_case *c, int mode, const char *order)
{
    uint16_t *src = device_tensor(&c->t);
    CUtensorMap map;
    CHECK(encode(fn, &map, &c->t, src, c->box, c->swizzle, c->nan_fill) == CUDA_SUCCESS, "%s: encoded", c->name);
    const uint32_t count = box_elements(c);
    unsigned char *out = NULL;
    CHECK(cudaMalloc((void **)&out, count * 2) == cudaSuccess, "cudaMalloc");
    cudaMemset(out, 0x5a, count * 2);
    CHECK(emu_tma(mode, &map, c->t.rank, c->coords, count * 2, out) == 0 && cudaDeviceSynchronize() == cudaSuccess,
          "%s (%s): runs", c->name, order);
    static uint16_t got[MAX_ELEMS];
    cudaMemcpy(got, out, count * 2, cudaMemcpyDeviceToHost);
    CHECK(check_box(c, got, count) == 0, "%s (%s): the box as laid out", c->name, order);
    cudaFree(out);
    cudaFree(src);
}

/* Shapes the driver must refuse, on a GPU and here. */
static void check_refusals(encode_fn fn)
{
    const struct tensor t = {2, {80, 100}, 160};
    uint16_t *src = device_tensor(&t);
    CUtensorMap map;
    const uint32_t box[2] = {64, 16}, wide[2] = {128, 8}, huge[2] = {64, 512};
    const struct tensor odd_pitch = {2, {80, 100}, 168};
    CHECK(encode(fn, &map, &odd_pitch, src, box, CU_TENSOR_MAP_SWIZZLE_NONE, 0) != CUDA_SUCCESS,
          "a pitch of 168 bytes is refused");
    CHECK(encode(fn, &map, &t, src, huge, CU_TENSOR_MAP_SWIZZLE_NONE, 0) != CUDA_SUCCESS, "a box of 512 is refused");
    CHECK(encode(fn, &map, &t, src, wide, CU_TENSOR_MAP_SWIZZLE_128B, 0) != CUDA_SUCCESS,
          "a 256-byte inner box under the 128-byte swizzle is refused");
    CHECK(encode(fn, &map, &t, src + 1, box, CU_TENSOR_MAP_SWIZZLE_NONE, 0) != CUDA_SUCCESS,
          "a base off 16-byte alignment is refused");
    cudaFree(src);
}

#ifndef DDP_TMA_ON_GPU
static int broken_mode;
static void run_broken(int which)
{
    run_case(encoder(), &cases[which], broken_mode, "broken");
    _exit(0);
}

static void check_broken(int mode, int which, const char *report)
{
    char buf[8192];
    broken_mode = mode;
    int status = emu_run_in_child(run_broken, which, buf, sizeof buf);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT && strstr(buf, report) && strstr(buf, "tma_kernel"),
          "mode %d on %s: status 0x%x, expected an abort with \"%s\" in: %s", mode, cases[which].name, status, report,
          buf);
}

/* Case `which`'s tensor on the device, its map, and room for its box: for the broken runs below. */
struct box_run {
    const struct box_case *c;
    uint16_t *src;
    CUtensorMap map;
    unsigned char *out;
};

static struct box_run box_run_setup(int which)
{
    struct box_run r = {&cases[which], NULL, {{0}}, NULL};
    r.src = device_tensor(&r.c->t);
    encode(encoder(), &r.map, &r.c->t, r.src, r.c->box, r.c->swizzle, 0);
    cudaMalloc((void **)&r.out, box_elements(r.c) * 2);
    return r;
}

/* Two blocks: one zeroes the tensor another copies a box of. */
static void run_source_written(int which)
{
    struct box_run r = box_run_setup(which);
    emu_tma_source_written(&r.map, r.c->t.rank, r.c->coords, box_elements(r.c) * 2, r.out, (unsigned char *)r.src,
                           (unsigned)(elements(&r.c->t) * 2));
    _exit(cudaDeviceSynchronize() == cudaSuccess ? 0 : 3);
}

/* A 2-D copy through a 3-D map. */
static void run_wrong_rank(int which)
{
    struct box_run r = box_run_setup(which);
    emu_tma(TMA_RIGHT, &r.map, 2, r.c->coords, box_elements(r.c) * 2, r.out);
    _exit(cudaDeviceSynchronize() == cudaSuccess ? 0 : 3);
}
#endif

int main(void)
{
#ifdef DDP_TMA_ON_GPU
    if (!emu_have_sm90("test_tma"))
        return 77;
    for (int i = 0; i < CASES; i++)
        run_case(encoder(), &cases[i], TMA_RIGHT, "gpu");
    run_case(encoder(), &cases[1], TMA_STORED_FIRST, "gpu, over fenced stores");
    check_refusals(encoder());
    return check_done("test_tma (gpu)");
#else
    for (int o = 0; o < EMU_ORDER_COUNT; o++) {
        emu_set_order(emu_orders[o]);
        for (int i = 0; i < CASES; i++)
            run_case(encoder(), &cases[i], TMA_RIGHT, emu_orders[o]);
        run_case(encoder(), &cases[1], TMA_STORED_FIRST, emu_orders[o]);
        check_broken(TMA_NO_WAIT, 1, "shared-memory race");
        check_broken(TMA_NO_INIT_FENCE, 1, "mbarrier init not fenced");
        check_broken(TMA_STORES_UNFENCED, 1, "shared-memory proxy hazard");
        check_broken(TMA_FENCED_LATE, 1, "shared-memory proxy hazard");
        check_broken(TMA_MISALIGNED, 1, "misaligned cp.async.bulk.tensor");
        check_broken(TMA_SHORT_TX, 6, "-16 transaction bytes");
        char buf[8192];
        int status = emu_run_in_child(run_source_written, 1, buf, sizeof buf);
        CHECK(WIFSIGNALED(status) && strstr(buf, "global-memory race between blocks") &&
              strstr(buf, "block 1 reads it (cp.async.bulk.tensor at"), "a box copied from what another block "
              "writes aborts: %s", buf);
        status = emu_run_in_child(run_wrong_rank, 6, buf, sizeof buf);
        CHECK(WIFSIGNALED(status) && strstr(buf, "a tensor map of another rank"), "a 2d copy through a 3d map "
              "aborts: %s", buf);
    }
    check_refusals(encoder());
    return check_done("test_cudaemu_tma");
#endif
}
