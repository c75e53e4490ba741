/* model_init.c — a model's initial parameters (model.h's init_tensor, each tensor on its own
 * counter-based stream of RNG_INIT), into the whole buffer or only into the pieces a caller keeps
 * (a ZeRO-3 rank's shard), drawing nothing outside them: the work is cut into chunks the OpenMP
 * threads share, and since every value is a function of its position alone, the result does not
 * depend on the number of threads or ranks. A digest of a probe lets ranks check they drew the
 * same. Must not know any model's tensors or draws (each model's init_tensor does), nor
 * communicate (the caller compares the digests). */
#include <stdlib.h>
#include <string.h>

#include "model.h"

/* Where parameters [offset, offset + n) meet piece p: [*lo, *hi), false when they do not. */
static bool piece_overlap(const param_piece *p, size_t offset, size_t n, size_t *lo, size_t *hi)
{
    *lo = offset > p->offset ? offset : p->offset;
    *hi = offset + n < p->offset + p->count ? offset + n : p->offset + p->count;
    return *lo < *hi;
}

void param_pieces_take(const param_piece *pieces, int n_pieces, float *host, size_t offset, const float *v, size_t n)
{
    for (int k = 0; k < n_pieces; k++) {
        const param_piece *p = &pieces[k];
        size_t lo, hi;
        if (piece_overlap(p, offset, n, &lo, &hi))
            memcpy(host + p->at + (lo - p->offset), v + (lo - offset), (hi - lo) * sizeof *v);
    }
}

/* FNV-1a over the values' bits: order-sensitive, so a draw in another order is another digest. */
static uint64_t digest_add(uint64_t h, const float *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &v[i], sizeof bits);
        h = (h ^ bits) * 0x100000001b3ull;
    }
    return h;
}

size_t model_largest_tensor(const model *m)
{
    size_t n = 1;
    for (int i = 0; i < m->n_tensors; i++)
        n = m->tensors[i].numel > n ? m->tensors[i].numel : n;
    return n;
}

/* One chunk of the draw: values [lo, hi) of tensor `tensor` into dst. A chunk of 2^20 values
 * takes some 10 ms, short enough to balance threads and long enough to dwarf the scheduling. */
typedef struct init_chunk { int tensor; size_t lo, hi; float *dst; } init_chunk;
enum { INIT_CHUNK = 1 << 20 };

/* The chunks of every tensor's values inside the pieces, into chunks (NULL: counted only). */
static size_t plan_chunks(const model *m, const param_piece *pieces, int n_pieces, float *host, init_chunk *chunks)
{
    size_t n = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        const param_tensor *t = &m->tensors[i];
        for (int k = 0; k < n_pieces; k++) {
            const param_piece *p = &pieces[k];
            size_t lo, hi;
            if (!piece_overlap(p, t->offset, t->numel, &lo, &hi))
                continue;
            for (size_t a = lo; a < hi; a += INIT_CHUNK, n++)
                if (chunks)
                    chunks[n] = (init_chunk){i, a - t->offset, (hi - a > INIT_CHUNK ? a + INIT_CHUNK : hi) - t->offset,
                                             host + p->at + (a - p->offset)};
        }
    }
    return n;
}

static void draw(const model *m, uint64_t seed, int tensor, size_t lo, size_t hi, float *dst)
{
    rng_key key = rng_key_of(seed, RNG_INIT, (uint64_t)tensor);
    m->ops->init_tensor(m, &key, &m->tensors[tensor], lo, hi, dst);
}

/* Each tensor's first, middle and last value, drawn alone. */
static uint64_t probe_digest(const model *m, uint64_t seed)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < m->n_tensors; i++) {
        size_t n = m->tensors[i].numel, at[3] = {0, n / 2, n ? n - 1 : 0};
        for (int k = 0; k < 3 && n > 0; k++) {
            float v;
            draw(m, seed, i, at[k], at[k] + 1, &v);
            h = digest_add(h, &v, 1);
        }
    }
    return h;
}

int model_init_params_pieces(const model *m, uint64_t seed, const param_piece *pieces, int n_pieces, float *host,
                             uint64_t *digest, ddp_err *err)
{
    size_t n = plan_chunks(m, pieces, n_pieces, host, NULL);
    init_chunk *chunks = malloc((n ? n : 1) * sizeof *chunks);
    if (!chunks)
        return ddp_fail(err, DDP_ERUNTIME, "model init: out of host memory for the plan of %zu chunks", n);
    plan_chunks(m, pieces, n_pieces, host, chunks);
#pragma omp parallel for schedule(dynamic, 1)
    for (size_t c = 0; c < n; c++)
        draw(m, seed, chunks[c].tensor, chunks[c].lo, chunks[c].hi, chunks[c].dst);
    free(chunks);
    if (digest)
        *digest = probe_digest(m, seed);
    return DDP_OK;
}

int model_init_params(model *m, uint64_t seed, ddp_err *err)
{
    float *host = calloc(m->n_params, sizeof *host);
    if (!host)
        return ddp_fail(err, DDP_ERUNTIME, "model init: out of host memory for %zu parameters", m->n_params);
    const param_piece whole = {0, m->n_params, 0};
    int rc = model_init_params_pieces(m, seed, &whole, 1, host, NULL, err);
    if (rc == DDP_OK && (rc = m->dev->ops->upload(m->dev, m->params, host, m->n_params * sizeof *host, err)) != DDP_OK)
        ddp_prefix(err, "model init: uploading parameters");
    free(host);
    return rc;
}
