/* test_model_init.c — a model's initial draw (models/model_init.c) in pieces: for a GPT-2 whose
 * token embedding spans several of the draw's chunks, a grouped-query Llama and an MLP, the pieces
 * a ZeRO-3 rank keeps (random offsets and lengths, pieces of one value, pieces across tensor
 * boundaries and chunk edges, in any order) get exactly the values the whole draw puts there, with
 * one OpenMP thread or several; nothing outside the pieces is written; the probe's digest is the
 * same whatever the pieces and differs for another seed. */
#include "tests/check.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "models/model.h"
#include "runtime/base/rng.h"
#include "runtime/device/device.h"

static device *dev;

static float *whole_draw(model *m, uint64_t seed)
{
    ddp_err err = {0};
    CHECK(model_init_params(m, seed, &err) == DDP_OK, "whole draw: %s", err.msg);
    float *host = malloc(m->n_params * sizeof *host);
    CHECK(dev->ops->download(dev, host, m->params, m->n_params * sizeof *host, &err) == DDP_OK, "%s", err.msg);
    return host;
}

/* n_pieces disjoint pieces of the parameters in random order, packed into a shard in that order;
 * the first is one value, the second straddles the first tensor boundary. Returns the shard's
 * length. */
static size_t random_pieces(const model *m, rng *r, param_piece *pieces, int n_pieces)
{
    size_t cut[64];
    int n_cut = 0;
    cut[n_cut++] = 0;
    for (int k = 1; k < n_pieces * 2; k++)
        cut[n_cut++] = (size_t)rng_below(r, m->n_params);
    cut[n_cut++] = m->n_params;
    for (int i = 1; i < n_cut; i++) /* sort: consecutive pairs are the pieces, the gaps between them unkept */
        for (int j = i; j > 0 && cut[j - 1] > cut[j]; j--) {
            size_t x = cut[j];
            cut[j] = cut[j - 1], cut[j - 1] = x;
        }
    size_t boundary = m->tensors[1].offset;
    cut[1] = cut[0] + 1;                 /* one value */
    cut[2] = cut[2] < boundary ? cut[2] : boundary - 2;
    cut[3] = cut[3] > boundary ? cut[3] : boundary + 2;
    for (int k = 0; k < n_pieces; k++)
        pieces[k] = (param_piece){cut[2 * k], cut[2 * k + 1] > cut[2 * k] ? cut[2 * k + 1] - cut[2 * k] : 0, 0};
    for (int k = n_pieces - 1; k > 0; k--) { /* shuffle */
        int j = (int)rng_below(r, (uint64_t)k + 1);
        param_piece x = pieces[k];
        pieces[k] = pieces[j], pieces[j] = x;
    }
    size_t at = 0;
    for (int k = 0; k < n_pieces; k++)
        pieces[k].at = at, at += pieces[k].count;
    return at;
}

static void check_pieces(model *m, const char *what)
{
    enum { PIECES = 24 };
    const float sentinel = -12345.0f;
    float *whole = whole_draw(m, 9), *other = whole_draw(m, 10);
    CHECK(memcmp(whole, other, m->n_params * sizeof *whole) != 0, "%s: seeds 9 and 10 drew the same", what);
    rng r;
    rng_seed(&r, 20261205, 1);
    uint64_t first_digest = 0;
    for (int round = 0; round < 4; round++) {
        param_piece pieces[PIECES];
        size_t n = random_pieces(m, &r, pieces, PIECES);
        float *shard = malloc((n + 1) * sizeof *shard);
        for (size_t i = 0; i <= n; i++)
            shard[i] = sentinel;
        omp_set_num_threads(round % 2 ? 3 : 1);
        uint64_t digest = 0, other_digest = 0;
        ddp_err err = {0};
        CHECK(model_init_params_pieces(m, 9, pieces, PIECES, shard, &digest, &err) == DDP_OK, "%s: %s", what, err.msg);
        size_t wrong = 0;
        for (int k = 0; k < PIECES; k++)
            for (size_t j = 0; j < pieces[k].count; j++)
                wrong += memcmp(&shard[pieces[k].at + j], &whole[pieces[k].offset + j], sizeof *shard) != 0;
        CHECK(wrong == 0, "%s, round %d (%d threads): %zu of %zu values in the pieces differ from the whole draw",
              what, round, round % 2 ? 3 : 1, wrong, n);
        CHECK(shard[n] == sentinel, "%s: the draw wrote past the pieces", what);
        if (round == 0)
            first_digest = digest;
        CHECK(digest == first_digest, "%s: the digest depends on the pieces", what);
        CHECK(model_init_params_pieces(m, 10, pieces, 0, shard, &other_digest, &err) == DDP_OK, "%s", err.msg);
        CHECK(other_digest != digest, "%s: seeds 9 and 10 have the same digest", what);
        free(shard);
    }
    free(whole);
    free(other);
}

static model *build(const model_opts *o, const sample_layout *data)
{
    model *m = NULL;
    ddp_err err = {0};
    CHECK(model_create(o, dev, data, 1, MODEL_BUFFERS_WHOLE, &m, &err) == DDP_OK, "model_create: %s", err.msg);
    return m;
}

int main(void)
{
    ddp_err err = {0};
    CHECK(device_cpu_create(&dev, &err) == DDP_OK, "cpu device: %s", err.msg);
    const sample_layout tokens = {.input = {SAMPLE_I32, 8}, .target = {SAMPLE_I32, 8}};
    /* wte: 4,000 (padded) x 640 = 2.56 M values, three of the draw's chunks of 2^20 */
    model_opts gpt2 = {.kind = MODEL_GPT2, .compute = TENSOR_F32,
                       .gpt2 = {.n_layer = 1, .n_head = 2, .n_embd = 640, .block_size = 8, .vocab_size = 3999}};
    model_opts llama = {.kind = MODEL_LLAMA, .compute = TENSOR_F32,
                        .llama = {.n_layer = 2, .n_head = 4, .n_kv_head = 2, .n_embd = 32, .ffn_hidden = 88,
                                  .block_size = 8, .vocab_size = 300, .rope_theta = 10000, .norm_eps = 1e-5}};
    model_opts mlp = {.kind = MODEL_MLP, .mlp = {.n_hidden = 2, .hidden = {48, 16}}};
    const sample_layout pixels = {.input = {SAMPLE_U8, 100}, .target = {SAMPLE_I32, 1}, .n_classes = 10};
    model *m[3] = {build(&gpt2, &tokens), build(&llama, &tokens), build(&mlp, &pixels)};
    const char *what[3] = {"gpt2", "llama", "mlp"};
    for (int i = 0; i < 3; i++)
        if (m[i]) {
            check_pieces(m[i], what[i]);
            m[i]->ops->destroy(m[i]);
        }
    dev->ops->destroy(dev);
    return check_done("test_model_init");
}
