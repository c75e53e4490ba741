/* hf_logits.h — how the tests that referee a model against a Hugging Face fixture's logits
 * (test_gpt2_hf.c, test_llama_hf.c, test_qwen2_hf.c, test_mistral_hf.c, test_gpt_packed.c) measure the gap and what
 * they allow: each fixture's stated float32 noise floor, the relative error of a model's logits
 * against the fixture's, and the model's parameters brought to the host. Header only, for tests;
 * it checks nothing itself. */
#ifndef DDP_TESTS_HF_LOGITS_H
#define DDP_TESTS_HF_LOGITS_H

#include "tests/check.h"

#include <math.h>
#include <stdlib.h>

#include "models/model.h"
#include "runtime/device/device.h"

/* tests/fixtures/README.md: HF reloading each checkpoint in float32 reproduces its `logits` within
 * these fractions of the largest logit (float64 logits rounded once, against a float32 forward;
 * the fixtures this repository makes, hf-mistral-*, give theirs as MANIFEST's `floor`); a correct
 * float32 implementation is held to HF_LOGITS_TOL_FACTOR times that. A wrong position, weight or
 * key moves logits by O(1) of the largest. */
#define HF_GPT2_TINY_LOGITS_FLOOR 3e-7
#define HF_LLAMA_TINY_LOGITS_FLOOR 3e-7
#define HF_QWEN2_TINY_LOGITS_FLOOR 2.9e-7
#define HF_LOGITS_TOL_FACTOR 8

/* m's parameters as float32 on the host (malloc'd). */
static inline float *hf_params_of(device *dev, const model *m)
{
    float *host = malloc(m->n_params * sizeof *host);
    dev->ops->download(dev, host, m->params, m->n_params * sizeof *host, NULL);
    return host;
}

/* Evaluates b (rows of T positions) on m (stats: two floats of device memory, zeroed here) and
 * returns the largest |logit - ref| over the first V columns of its positions, relative to the
 * largest |ref|; ref holds V columns a position, the model's logits their padded width. */
static inline double hf_batch_logits_error(device *dev, model *m, const model_batch *b, int64_t T, void *stats,
                                           const float *ref, int64_t V)
{
    int64_t ld = 0;
    ddp_err err = {0};
    dev->ops->fill(dev, TENSOR_F32, stats, 2, 0.0f, NULL);
    CHECK(m->ops->evaluate(m, b, stats, &err) == DDP_OK, "evaluate: %s", err.msg);
    const int64_t rows = b->rows * T;
    const void *p = m->ops->logits(m, &ld);
    float *logits = malloc(sizeof(float) * (size_t)(rows * ld));
    dev->ops->download(dev, logits, p, sizeof(float) * (size_t)(rows * ld), NULL);
    double worst = 0, top = 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t v = 0; v < V; v++) {
            worst = fmax(worst, fabs((double)logits[r * ld + v] - ref[r * V + v]));
            top = fmax(top, fabs((double)ref[r * V + v]));
        }
    free(logits);
    return worst / top;
}

/* hf_batch_logits_error of the B rows of T tokens `input` (their own tokens as the targets). */
static inline double hf_logits_error(device *dev, model *m, const int32_t *input, int64_t B, int64_t T,
                                     const float *ref, int64_t V)
{
    void *x = NULL, *stats = NULL;
    dev->ops->alloc(dev, sizeof(int32_t) * (size_t)(B * T), &x, NULL);
    dev->ops->alloc(dev, 2 * sizeof(float), &stats, NULL);
    dev->ops->upload(dev, x, input, sizeof(int32_t) * (size_t)(B * T), NULL);
    const double e = hf_batch_logits_error(dev, m, &(model_batch){.inputs = x, .targets = x, .rows = B}, T, stats, ref, V);
    dev->ops->free(dev, x);
    dev->ops->free(dev, stats);
    return e;
}

#endif
