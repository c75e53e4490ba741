/* cuda_pair.h — what the tests that run an op on the CPU backend and on the CUDA device and
 * compare (test_cuda_kernels.c, test_cuda_transformer.c, test_cuda_bf16.c, ...) share: the two
 * devices, the seeded RNG of their random inputs, buffer helpers that end the test on an error, and
 * the main loop over groups of checks with their times, run once with every buffer at an aligned
 * start, once with every buffer one element past it (pair_offset: the kernels' vector paths, then
 * their one-element fallbacks) and, for a test that asks, once with every other buffer past it
 * (mixed alignment within one op). Header-only and test-only; it must not check op results. */
#ifndef DDP_TEST_CUDA_PAIR_H
#define DDP_TEST_CUDA_PAIR_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime/base/clock.h"
#include "runtime/base/rng.h"
#include "runtime/device/device.h"
#include "tests/check.h"
#include "tests/runtime/device/op_times.h"
#include "tests/runtime/device/placed.h"

static rng test_rng;
static device *cpu, *gpu;
/* The placement pair_main runs the groups at (pair_placements), and the elements (of each buffer's
 * own type) by which it places buffers past an aligned start: 0 aligned, 1 otherwise (mixed: every
 * other buffer, pair_next_offset). */
static const char *const pair_placements[] = {"aligned", "misaligned", "mixed"};
static size_t pair_placement, pair_offset;
static unsigned pair_buffers_placed;

/* Elements past an aligned start for the next buffer placed. */
static size_t pair_next_offset(void)
{
    return pair_placement == 2 ? pair_buffers_placed++ % 2 : pair_offset;
}

static void die_on(int rc, const ddp_err *err, const char *what)
{
    if (rc) {
        fprintf(stderr, "FATAL: %s: %s\n", what, err->msg);
        exit(1);
    }
}

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "FATAL: out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
    return p;
}

/* Device memory holding h's `bytes`, placed pair_next_offset() elements of elem_size bytes past an
 * aligned start; free it with placed_free. */
static void *dev_alloc_upload(device *d, const void *h, size_t bytes, size_t elem_size)
{
    ddp_err err = {0};
    void *p = placed_alloc(d, bytes, pair_next_offset() * elem_size);
    die_on(d->ops->upload(d, p, h, bytes, &err), &err, "upload");
    return p;
}

static void download(device *d, void *h, const void *p, size_t bytes)
{
    ddp_err err = {0};
    die_on(d->ops->download(d, h, p, bytes, &err), &err, "download");
}

typedef struct pair_group {
    const char *name;
    void (*run)(void);
} pair_group;

/* Seeds test_rng (from DDP_TEST_SEED, else the clock; printed so a run can be repeated), opens both
 * devices (a build without CUDA leaves gpu NULL: only a test that also checks the CPU alone is
 * built there), runs every group with its time at each of the first `placements` placements (1:
 * aligned only; 2: then misaligned; 3: then mixed), prints the per-op times and closes the
 * devices. */
static int pair_main(const char *test, uint64_t rng_stream, const pair_group *groups, size_t n_groups,
                     size_t placements)
{
    const char *seed_env = getenv("DDP_TEST_SEED");
    uint64_t seed = seed_env ? strtoull(seed_env, NULL, 10) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16);
    rng_seed(&test_rng, seed, rng_stream);
    const char *order = getenv("DDP_CUDA_EMU_ORDER");
    fprintf(stderr, "%s: seed %llu (DDP_TEST_SEED repeats), order %s\n", test, (unsigned long long)seed,
            order ? order : "(default)");
    ddp_err err = {0};
    die_on(device_cpu_create(&cpu, &err), &err, "device_cpu_create");
#ifdef DDP_HAVE_CUDA
    const device_opts gpu_opts = {.kind = DEVICE_CUDA}; /* no TF32 */
    die_on(device_cuda_create(0, &gpu_opts, &gpu, &err), &err, "device_cuda_create");
    CHECK(gpu->kind == DEVICE_CUDA && gpu->stream != NULL, "cuda device has no stream");
#endif
    for (pair_placement = 0; pair_placement < placements && pair_placement < 3; pair_placement++) {
        pair_offset = pair_placement > 0;
        for (size_t i = 0; i < n_groups; i++) {
            double t0 = 1e3 * monotonic_s();
            groups[i].run();
            fprintf(stderr, "  %-22s %-10s %8.1f ms\n", groups[i].name, pair_placements[pair_placement],
                    1e3 * monotonic_s() - t0);
        }
    }
    op_times_print();
    if (gpu)
        gpu->ops->destroy(gpu);
    cpu->ops->destroy(cpu);
    return check_done(test);
}

#endif
