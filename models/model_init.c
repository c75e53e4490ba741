/* model_init.c — a model's initial parameters, drawn tensor by tensor (model.h's init_tensor) on
 * the RNG_INIT stream, into the whole buffer or only into the pieces a caller keeps (a ZeRO-3
 * rank's shard), with a digest of the whole draw so ranks can check they drew the same. Holds one
 * tensor at a time besides the caller's buffer. Must not know any model's tensors or draws (each
 * model's init_tensor does), nor communicate (the caller compares the digests). */
#include <stdlib.h>
#include <string.h>

#include "model.h"

void param_pieces_take(const param_piece *pieces, int n_pieces, float *host, size_t offset, const float *v, size_t n)
{
    for (int k = 0; k < n_pieces; k++) {
        const param_piece *p = &pieces[k];
        size_t lo = offset > p->offset ? offset : p->offset;
        size_t hi = offset + n < p->offset + p->count ? offset + n : p->offset + p->count;
        if (lo < hi)
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

int model_init_params_pieces(const model *m, uint64_t seed, const param_piece *pieces, int n_pieces, float *host,
                             uint64_t *digest, ddp_err *err)
{
    size_t cap = model_largest_tensor(m);
    float *v = malloc(cap * sizeof *v);
    if (!v)
        return ddp_fail(err, DDP_ERUNTIME, "model init: out of host memory for a tensor of %zu parameters", cap);
    rng r;
    rng_seed(&r, seed, RNG_INIT);
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < m->n_tensors; i++) {
        const param_tensor *t = &m->tensors[i];
        memset(v, 0, t->numel * sizeof *v);
        m->ops->init_tensor(m, &r, t, v);
        h = digest_add(h, v, t->numel);
        param_pieces_take(pieces, n_pieces, host, t->offset, v, t->numel);
    }
    free(v);
    if (digest)
        *digest = h;
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
