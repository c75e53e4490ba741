/* test_cast.c — the bf16 gradient casts (device ops cast_f32_to_bf16 / cast_bf16_to_f32): the CPU
 * backend against hand-computed round-to-nearest-even bit patterns, and the CUDA kernels
 * (runtime/device/kernels/cast.cu, run by the emulator under DDP_CUDA_EMU_ORDER) against the CPU
 * backend bit for bit, on fresh random inputs of mixed magnitudes plus ties, infinities and NaN,
 * over sizes that are not multiples of the block size. CUDA outputs are poisoned first so an
 * element a kernel skips fails. Seed printed; DDP_TEST_SEED repeats a run. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime/device/device.h"
#include "runtime/base/rng.h"
#include "tests/check.h"

static rng test_rng;

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Ties to even, by hand: 1 + 2^-8 lies halfway between bf16 1.0 (even) and 1 + 2^-7 (odd). */
static void known_patterns(device *cpu)
{
    const float in[] = {1.0f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -2.0f - 0x1p-7f, 0x1p-130f, INFINITY,
                        from_bits(0x3f80ffffu), from_bits(0x7f7fffffu)};
    const uint16_t want[] = {0x3f80, 0x3f80, 0x3f82, 0xc000, 0x0008, 0x7f80, 0x3f81, 0x7f80};
    uint16_t got[8];
    ddp_err err = {0};
    CHECK(cpu->ops->cast_f32_to_bf16(cpu, in, got, 8, &err) == DDP_OK, "%s", err.msg);
    for (int i = 0; i < 8; i++)
        CHECK(got[i] == want[i], "bf16(%a) = 0x%04x, expected 0x%04x", (double)in[i], got[i], want[i]);
    float back[8];
    CHECK(cpu->ops->cast_bf16_to_f32(cpu, want, back, 8, 0.5f, &err) == DDP_OK, "%s", err.msg);
    CHECK(back[2] == (1.0f + 0x1p-6f) * 0.5f && back[3] == -1.0f, "bf16 -> f32 x 0.5: %a %a", (double)back[2],
          (double)back[3]);
}

static float *random_inputs(size_t n)
{
    float *h = malloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++) {
        float mag = ldexpf(rng_uniform(&test_rng, 1.0f, 2.0f), (int)rng_below(&test_rng, 40) - 20);
        h[i] = rng_below(&test_rng, 2) ? mag : -mag;
        if (i % 97 == 5) /* an exact tie: the 16 dropped bits are 0x8000 */
            h[i] = from_bits((uint32_t)(rng_next(&test_rng) & 0x3fff0000u) | 0x8000u);
    }
    if (n > 3)
        h[1] = INFINITY, h[2] = -INFINITY, h[3] = NAN;
    return h;
}

static void against_cpu(device *cpu, device *gpu, size_t n)
{
    ddp_err err = {0};
    float *x = random_inputs(n), *back_cpu = malloc(n * sizeof *x), *back_gpu = malloc(n * sizeof *x);
    uint16_t *h_cpu = malloc(n * 2), *h_gpu = malloc(n * 2), *poison = malloc(n * 2);
    memset(poison, 0xff, n * 2);
    float *dx = NULL, *dback = NULL;
    uint16_t *dh = NULL;
    CHECK(gpu->ops->alloc(gpu, n * 4, (void **)&dx, &err) == DDP_OK && gpu->ops->alloc(gpu, n * 2, (void **)&dh, &err) == DDP_OK &&
          gpu->ops->alloc(gpu, n * 4, (void **)&dback, &err) == DDP_OK, "alloc: %s", err.msg);
    gpu->ops->upload(gpu, dx, x, n * 4, &err);
    gpu->ops->upload(gpu, dh, poison, n * 2, &err);
    gpu->ops->fill(gpu, TENSOR_F32, dback, n, NAN, &err);
    CHECK(gpu->ops->cast_f32_to_bf16(gpu, dx, dh, n, &err) == DDP_OK, "cuda cast_f32_to_bf16: %s", err.msg);
    CHECK(gpu->ops->cast_bf16_to_f32(gpu, dh, dback, n, 0.25f, &err) == DDP_OK, "cuda cast_bf16_to_f32: %s", err.msg);
    gpu->ops->download(gpu, h_gpu, dh, n * 2, &err);
    gpu->ops->download(gpu, back_gpu, dback, n * 4, &err);
    cpu->ops->cast_f32_to_bf16(cpu, x, h_cpu, n, &err);
    cpu->ops->cast_bf16_to_f32(cpu, h_cpu, back_cpu, n, 0.25f, &err);
    size_t bad = 0, bad_back = 0;
    for (size_t i = 0; i < n; i++) {
        bool nan_cpu = (h_cpu[i] & 0x7fff) > 0x7f80, nan_gpu = (h_gpu[i] & 0x7fff) > 0x7f80;
        bad += nan_cpu ? !nan_gpu : h_cpu[i] != h_gpu[i];
        bad_back += isnan(back_cpu[i]) ? !isnan(back_gpu[i]) : memcmp(&back_cpu[i], &back_gpu[i], 4) != 0;
    }
    CHECK(bad == 0, "n=%zu: %zu of %zu bf16 values differ from the CPU backend", n, bad, n);
    CHECK(bad_back == 0, "n=%zu: %zu of %zu values cast back differ from the CPU backend", n, bad_back, n);
    gpu->ops->free(gpu, dx);
    gpu->ops->free(gpu, dh);
    gpu->ops->free(gpu, dback);
    free(x), free(back_cpu), free(back_gpu), free(h_cpu), free(h_gpu), free(poison);
}

int main(void)
{
    const char *seed_env = getenv("DDP_TEST_SEED");
    uint64_t seed = seed_env ? strtoull(seed_env, NULL, 10) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16);
    rng_seed(&test_rng, seed, 11);
    const char *order = getenv("DDP_CUDA_EMU_ORDER");
    fprintf(stderr, "test_cast: seed %llu (DDP_TEST_SEED repeats), order %s\n", (unsigned long long)seed,
            order ? order : "(default)");
    device *cpu = NULL, *gpu = NULL;
    ddp_err err = {0};
    config cfg;
    memset(&cfg, 0, sizeof cfg);
    if (device_cpu_create(&cpu, &err) != DDP_OK || device_cuda_create(0, &cfg, &gpu, &err) != DDP_OK) {
        fprintf(stderr, "FATAL: creating devices: %s\n", err.msg);
        return 1;
    }
    known_patterns(cpu);
    const size_t sizes[] = {1, 5, 255, 257, 1000, 70001};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        against_cpu(cpu, gpu, sizes[i]);
    gpu->ops->destroy(gpu);
    cpu->ops->destroy(cpu);
    return check_done("test_cast");
}
