/* mlp_fixture.h — shared by test_mlp.c and test_optim.c: loads the PyTorch reference tensors of
 * $DDP_TEST_FIXTURES/mlp-reference (README there) and builds the 784-64-32-10 MLP they describe
 * on the CPU device, with the reference batch uploaded.
 *
 * Header-only like check.h; it checks file sizes against the expected shapes but asserts nothing
 * about the model (the tests do). */
#ifndef DDP_MLP_FIXTURE_H
#define DDP_MLP_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../models/mlp.h"
#include "check.h"

#define FX_BATCH 16
#define FX_IN 784
#define FX_CLASSES 10

typedef struct fx_mlp {
    device *dev;
    model *m;
    float *x;        /* device [16, 784] */
    int32_t *labels; /* device [16] */
    float *stats;    /* device [2] */
} fx_mlp;

/* Reads NAME.bin (count 4-byte values) into a malloc'd buffer; NULL (after a message) when
 * missing or of the wrong size. */
static inline void *fx_load(const char *name, size_t count)
{
    const char *dir = getenv("DDP_TEST_FIXTURES");
    char path[2048];
    snprintf(path, sizeof path, "%s/mlp-reference/%s.bin", dir ? dir : "../shared/fixtures", name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "fixture %s: cannot open (set DDP_TEST_FIXTURES)\n", path);
        return NULL;
    }
    void *buf = malloc(count * 4 + 1);
    size_t got = buf ? fread(buf, 1, count * 4 + 1, f) : 0;
    fclose(f);
    if (got != count * 4) {
        fprintf(stderr, "fixture %s: %zu bytes, expected %zu\n", path, got, count * 4);
        free(buf);
        return NULL;
    }
    return buf;
}

/* Uploads fixture PREFIX.<tensor> into dst (a params-layout device buffer) for every tensor. */
static inline int fx_load_params(model *m, const char *prefix, float *dst)
{
    for (int i = 0; i < m->n_tensors; i++) {
        const param_tensor *t = &m->tensors[i];
        char name[128];
        snprintf(name, sizeof name, "%s.%s", prefix, t->name);
        float *h = fx_load(name, t->numel);
        if (!h)
            return 1;
        m->dev->ops->upload(m->dev, dst + t->offset, h, t->numel * 4, NULL);
        free(h);
    }
    return 0;
}

static inline void *fx_device_copy(device *d, const void *host, size_t bytes)
{
    void *p = NULL;
    if (d->ops->alloc(d, bytes, &p, NULL))
        return NULL;
    d->ops->upload(d, p, host, bytes, NULL);
    return p;
}

/* The reference MLP with activation act and parameters "<init_prefix>.*"; 0 on success. */
static inline int fx_setup(fx_mlp *fx, act_kind act, const char *init_prefix)
{
    memset(fx, 0, sizeof *fx);
    ddp_err err = {0};
    config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.model.kind = MODEL_MLP;
    cfg.model.n_hidden = 2;
    cfg.model.hidden[0] = 64;
    cfg.model.hidden[1] = 32;
    cfg.model.activation = act;
    if (device_cpu_create(&fx->dev, &err) ||
        model_create(&cfg, fx->dev, FX_IN, FX_CLASSES, FX_BATCH, &fx->m, &err)) {
        fprintf(stderr, "fixture setup: %s\n", err.msg);
        return 1;
    }
    float *x = fx_load("input", FX_BATCH * FX_IN);
    int32_t *y = fx_load("labels", FX_BATCH);
    float zero[2] = {0, 0};
    if (!x || !y || fx_load_params(fx->m, init_prefix, fx->m->params)) {
        free(x);
        free(y);
        return 1;
    }
    fx->x = fx_device_copy(fx->dev, x, sizeof(float) * FX_BATCH * FX_IN);
    fx->labels = fx_device_copy(fx->dev, y, sizeof(int32_t) * FX_BATCH);
    fx->stats = fx_device_copy(fx->dev, zero, sizeof zero);
    free(x);
    free(y);
    return !fx->x || !fx->labels || !fx->stats;
}

static inline void fx_teardown(fx_mlp *fx)
{
    if (fx->m)
        fx->m->ops->destroy(fx->m);
    if (fx->dev) {
        fx->dev->ops->free(fx->dev, fx->x);
        fx->dev->ops->free(fx->dev, fx->labels);
        fx->dev->ops->free(fx->dev, fx->stats);
        fx->dev->ops->destroy(fx->dev);
    }
}

/* Compares n values elementwise with |got-exp| <= atol + rtol*|exp| (one CHECK for the tensor)
 * and prints the largest errors, so the report can quote them. Returns the max abs error. */
static inline double fx_compare(const char *what, const float *got, const float *exp, size_t n, double rtol,
                                double atol)
{
    double max_abs = 0, max_rel = 0;
    size_t bad = 0, worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)exp[i]);
        double rel = d / (fabs((double)exp[i]) + 1e-30);
        if (d > max_abs) {
            max_abs = d;
            worst = i;
        }
        if (fabs((double)exp[i]) > 1e-3 && rel > max_rel)
            max_rel = rel;
        if (!(d <= atol + rtol * fabs((double)exp[i])))
            bad++;
    }
    fprintf(stderr, "  %-34s n=%-6zu max_abs=%.3g max_rel(|ref|>1e-3)=%.3g\n", what, n, max_abs, max_rel);
    CHECK(bad == 0, "%s: %zu of %zu values off (worst [%zu] %.9g vs %.9g)", what, bad, n, worst, (double)got[worst],
          (double)exp[worst]);
    return max_abs;
}

/* Downloads PREFIX-layout device buffer buf and compares each tensor with fixture "<prefix>.*". */
static inline void fx_compare_params(const fx_mlp *fx, const float *buf, const char *prefix, double rtol,
                                     double atol)
{
    model *m = fx->m;
    float *host = malloc(m->n_params * 4);
    m->dev->ops->download(m->dev, host, buf, m->n_params * 4, NULL);
    for (int i = 0; i < m->n_tensors; i++) {
        const param_tensor *t = &m->tensors[i];
        char name[128];
        snprintf(name, sizeof name, "%s.%s", prefix, t->name);
        float *exp = fx_load(name, t->numel);
        CHECK(exp != NULL, "fixture %s missing", name);
        if (exp)
            fx_compare(name, host + t->offset, exp, t->numel, rtol, atol);
        free(exp);
    }
    free(host);
}

#endif
