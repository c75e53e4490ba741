/* placed.h — test device buffers placed a few bytes past an aligned start, so that the kernels'
 * one-element fallbacks for misaligned pointers run against the same references as their vector
 * paths (test_cuda_kernels.c, and through cuda_pair.h test_cuda_transformer.c and
 * test_cuda_bf16.c). placed_alloc returns device memory `offset` bytes into an allocation;
 * placed_free frees it by the pointer it returned. Header-only and test-only; it must not check
 * op results. */
#ifndef DDP_TEST_PLACED_H
#define DDP_TEST_PLACED_H

#include <stdio.h>
#include <stdlib.h>

#include "runtime/device/device.h"

static struct {
    void *p, *base;
} placed_bufs[64];

/* `bytes` of device memory on d, `offset` bytes past the start of an allocation of exactly
 * bytes + offset (at least 1; an allocation starts 256-byte aligned, and a write past its end is
 * an error the emulator reports); ends the test on failure. */
static inline void *placed_alloc(device *d, size_t bytes, size_t offset)
{
    ddp_err err = {0};
    void *base = NULL;
    if (d->ops->alloc(d, bytes + offset ? bytes + offset : 1, &base, &err)) {
        fprintf(stderr, "FATAL: alloc: %s\n", err.msg);
        exit(1);
    }
    for (size_t i = 0; i < sizeof placed_bufs / sizeof placed_bufs[0]; i++)
        if (!placed_bufs[i].p) {
            placed_bufs[i].p = (char *)base + offset;
            placed_bufs[i].base = base;
            return placed_bufs[i].p;
        }
    fprintf(stderr, "FATAL: more than %zu placed test buffers at once\n", sizeof placed_bufs / sizeof placed_bufs[0]);
    exit(1);
}

/* Frees p: a buffer of placed_alloc, or any other device buffer. */
static inline void placed_free(device *d, void *p)
{
    for (size_t i = 0; i < sizeof placed_bufs / sizeof placed_bufs[0]; i++)
        if (placed_bufs[i].p == p) {
            d->ops->free(d, placed_bufs[i].base);
            placed_bufs[i].p = placed_bufs[i].base = NULL;
            return;
        }
    d->ops->free(d, p);
}

#endif
