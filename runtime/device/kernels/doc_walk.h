/* doc_walk.h — a position's offset in its document (the GPU kernels' clamped reading of a start),
 * and the walk over a packed row's documents that the position-table gradient takes on both
 * backends (embedding_cpu.c, embedding.cu), from one source so the CPU and the GPU add the same
 * terms in the same order and give the same bits. Header-only (host_device.h); it must not hold
 * kernels or ops.
 *
 * A row's document bounds are attn_shape's: start[t] and end[t] are the first position of t's
 * document and the one past its last. */
#ifndef DDP_DOC_WALK_H
#define DDP_DOC_WALK_H

#include <stdint.h>

#include "runtime/device/kernels/host_device.h"

/* Position t's offset in its document, start_t being its entry of the row's starts (NULL: the row
 * is one document). The starts are data on the device that the host cannot check without waiting,
 * so one outside [0, t] is clamped into it: a wrong row at worst, never a read outside a table. */
DDP_HOST_DEVICE_FN int64_t ddp_doc_offset(const int32_t *start_t, int64_t t)
{
    const int64_t s = start_t ? *start_t : 0;
    return t - (s < 0 ? 0 : s > t ? t : s);
}

/* The first position t' >= t of a row whose offset in its document is p, or T if none; start and
 * end are the row's document bounds (NULL: the row is one document). Each step lands on a
 * document's position p or jumps to the next document's, so a walk from t = p, continued from
 * end[t'] + p after each hit, visits each document of the row once. Bounds that break the
 * contract (a step that does not move forward) end the walk: it never loops. */
DDP_HOST_DEVICE_FN int64_t ddp_doc_at_position(const int32_t *start, const int32_t *end, int64_t t, int64_t p,
                                               int64_t T)
{
    if (!start)
        return t == p ? t : T;
    while (t < T && t - start[t] != p) {
        const int64_t next = t - start[t] < p ? (int64_t)start[t] + p : (int64_t)end[t] + p;
        if (next <= t)
            return T;
        t = next;
    }
    return t < T ? t : T;
}

/* Where the walk goes after a hit at t: the next document's position p, or T for an unpacked row
 * (and for bounds that would not move it forward: the walk never loops nor reads before the row). */
DDP_HOST_DEVICE_FN int64_t ddp_doc_next_position(const int32_t *start, const int32_t *end, int64_t t, int64_t p,
                                                 int64_t T)
{
    const int64_t from = end ? (int64_t)end[t] + p : T;
    return from <= t ? T : ddp_doc_at_position(start, end, from, p, T);
}

#endif
