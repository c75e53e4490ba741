/* mlp_fixture.h — the PyTorch reference checks of the fixture mlp-reference (tests/fixtures/README.md),
 * shared by test_mlp.c and test_optim.c (CPU device) and test_cuda_mlp.c (CUDA device): reads the
 * batch size and layer widths from the fixture's MANIFEST (B and dims, and each tensor's own line),
 * builds the MLP they describe on either device with the reference batch uploaded, and checks
 * forward/backward and 3-step optimizer trajectories against PyTorch with one set of tolerances
 * for both backends. A fixture made the same way with other shapes passes unchanged.
 *
 * Header-only like check.h. */
#ifndef DDP_MLP_FIXTURE_H
#define DDP_MLP_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <math.h>

#include "models/mlp.h"
#include "runtime/optim/optim.h"
#include "tests/check.h"
#include "tests/fixture.h"

#define FX_RTOL 1e-5
#define FX_ATOL_LOGIT 1e-5  /* logits are O(0.1..1) */
#define FX_ATOL_GRAD 1e-7   /* gradients are O(1e-3..1e-1); near-zero entries need an absolute floor */
#define FX_SGD_ATOL 1e-6    /* parameters are O(0.01..0.1); a floor for the ones near zero */
/* An AdamW update is lr·m̂/(sqrt(v̂)+eps): where |g| is near eps (a gradient entry that is a
 * near-cancellation) float32 gradient rounding moves that step by a good fraction of lr = 1e-3;
 * the fixture's seed keeps such entries above ~5e-8, where a correct float32 run lands within
 * ~1e-6. 5e-6 (0.5% of lr) still catches any wrong formula, which shifts steps by O(lr). */
#define FX_ADAMW_ATOL 5e-6

/* The reference model's shape, from MANIFEST's header: "B=16 dims=784-64-32-10" is a batch of
 * 16 rows of 784 inputs, hidden layers 64 and 32, 10 classes. */
typedef struct fx_shape {
    int64_t batch, in, classes;
    int n_hidden;
    int64_t hidden[MLP_MAX_HIDDEN];
} fx_shape;

typedef struct fx_mlp {
    fx_shape shape;
    fixture_manifest manifest; /* mlp-reference's */
    device *dev;
    model *m;
    float *x;        /* device [batch, in] */
    int32_t *labels; /* device [batch] */
    float *stats;    /* device [2] */
} fx_mlp;

/* Parses the header's B and dims into s; 0 on success, else 1 after a message. */
static inline int fx_read_shape(const fixture_manifest *mf, fx_shape *s)
{
    memset(s, 0, sizeof *s);
    char dims[256];
    int64_t widths[MLP_MAX_HIDDEN + 2];
    int n = 0;
    s->batch = fixture_header_int(mf, "B");
    if (fixture_header_word(mf, "dims", dims, sizeof dims))
        for (char *p = dims; *p && n < MLP_MAX_HIDDEN + 2; n++) {
            char *end;
            widths[n] = *p >= '0' && *p <= '9' ? strtoll(p, &end, 10) : 0;
            if (widths[n] < 1 || (*end && *end != '-')) {
                n = 0;
                break;
            }
            p = *end ? end + 1 : end;
        }
    if (s->batch < 1 || n < 3) {
        fprintf(stderr, "fixture %s/MANIFEST: header needs B=ROWS dims=IN-HIDDEN...-CLASSES (1 to %d hidden): %s\n",
                mf->dir, MLP_MAX_HIDDEN, mf->header);
        return 1;
    }
    s->in = widths[0];
    s->classes = widths[n - 1];
    s->n_hidden = n - 2;
    for (int i = 0; i < s->n_hidden; i++)
        s->hidden[i] = widths[i + 1];
    return 0;
}

/* NAME.bin, whose MANIFEST line must give it count values (the model's size for it); NULL after
 * a message otherwise. */
static inline void *fx_load(const fx_mlp *fx, const char *name, int64_t count)
{
    int64_t numel = fixture_numel(&fx->manifest, name);
    if (numel >= 1 && numel != count) {
        fprintf(stderr, "fixture %s/%s: MANIFEST gives %lld values, the model's %lld\n", fx->manifest.dir, name,
                (long long)numel, (long long)count);
        return NULL;
    }
    return fixture_load(&fx->manifest, name, NULL);
}

/* Uploads fixture PREFIX.<tensor> into dst (a params-layout device buffer) for every tensor. */
static inline int fx_load_params(const fx_mlp *fx, const char *prefix, float *dst)
{
    model *m = fx->m;
    for (int i = 0; i < m->n_tensors; i++) {
        const param_tensor *t = &m->tensors[i];
        char name[128];
        snprintf(name, sizeof name, "%s.%s", prefix, t->name);
        float *h = fx_load(fx, name, (int64_t)t->numel);
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

/* The reference MLP with activation act and parameters "<init_prefix>.*" on a device of the
 * given kind (DEVICE_CPU or DEVICE_CUDA), shaped as MANIFEST says; 0 on success. Call fx_teardown
 * either way. */
static inline int fx_setup(fx_mlp *fx, device_kind kind, act_kind act, const char *init_prefix)
{
    memset(fx, 0, sizeof *fx);
    if (fixture_manifest_read(&fx->manifest, "mlp-reference") || fx_read_shape(&fx->manifest, &fx->shape))
        return 1;
    const fx_shape *s = &fx->shape;
    ddp_err err = {0};
    model_opts mo = {.kind = MODEL_MLP, .mlp = {.n_hidden = s->n_hidden, .activation = act}, .compute = TENSOR_F32};
    memcpy(mo.mlp.hidden, s->hidden, sizeof s->hidden);
    sample_layout data = {.input = {SAMPLE_U8, s->in}, .target = {SAMPLE_I32, 1}, .n_classes = s->classes};
    const device_opts gpu_opts = {.kind = DEVICE_CUDA};
    int rc = kind == DEVICE_CUDA ? device_cuda_create(0, &gpu_opts, &fx->dev, &err) : device_cpu_create(&fx->dev, &err);
    if (rc || model_create(&mo, fx->dev, &data, s->batch, MODEL_BUFFERS_WHOLE, &fx->m, &err)) {
        fprintf(stderr, "fixture setup: %s\n", err.msg);
        return 1;
    }
    float *x = fx_load(fx, "input", s->batch * s->in);
    int32_t *y = fx_load(fx, "labels", s->batch);
    float zero[2] = {0, 0};
    rc = !x || !y || fx_load_params(fx, init_prefix, fx->m->params);
    if (!rc) {
        fx->x = fx_device_copy(fx->dev, x, sizeof(float) * (size_t)(s->batch * s->in));
        fx->labels = fx_device_copy(fx->dev, y, sizeof(int32_t) * (size_t)s->batch);
        fx->stats = fx_device_copy(fx->dev, zero, sizeof zero);
        rc = !fx->x || !fx->labels || !fx->stats;
    }
    free(x);
    free(y);
    return rc;
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
        float *exp = fx_load(fx, name, (int64_t)t->numel);
        CHECK(exp != NULL, "fixture %s missing", name);
        if (exp)
            fx_compare(name, host + t->offset, exp, t->numel, rtol, atol);
        free(exp);
    }
    free(host);
}

/* Forward and backward of the reference batch against PyTorch: logits, loss, gradient norm and
 * every gradient tensor. */
static inline void fx_check_forward_backward(device_kind kind, act_kind act, const char *name)
{
    fx_mlp fx;
    int rc = fx_setup(&fx, kind, act, act == ACT_RELU ? "relu.init" : "gelu.init");
    CHECK(rc == 0, "fixture setup for %s", name);
    if (rc) {
        fx_teardown(&fx);
        return;
    }
    const int64_t rows = fx.shape.batch, n_logits = rows * fx.shape.classes;
    fprintf(stderr, "%s fixture on %s (batch %lld, %s):\n", name, fx.dev->name, (long long)rows, fx.m->description);
    ddp_err err = {0};
    device *d = fx.dev;
    rc = mlp_forward_backward_f32(fx.m, fx.x, fx.labels, rows, 1.0f / (float)rows, false, NULL, NULL, fx.stats, &err);
    CHECK(rc == 0, "forward_backward: %s", err.msg);
    float *logits = malloc(sizeof(float) * (size_t)n_logits), stats[2];
    CHECK(d->ops->download(d, logits, mlp_logits(fx.m), sizeof(float) * (size_t)n_logits, &err) == 0, "%s", err.msg);
    CHECK(d->ops->download(d, stats, fx.stats, sizeof stats, &err) == 0, "%s", err.msg);
    char key[64];
    snprintf(key, sizeof key, "%s.logits", name);
    float *exp_logits = fx_load(&fx, key, n_logits);
    snprintf(key, sizeof key, "%s.loss", name);
    float *exp_loss = fx_load(&fx, key, 1);
    snprintf(key, sizeof key, "%s.grad_global_norm", name);
    float *exp_norm = fx_load(&fx, key, 1);
    CHECK(exp_logits && exp_loss && exp_norm, "fixtures for %s", name);
    if (exp_logits && exp_loss && exp_norm) {
        fx_compare("logits", logits, exp_logits, (size_t)n_logits, FX_RTOL, FX_ATOL_LOGIT);
        float mean_loss = stats[0] / (float)rows;
        fx_compare("loss (stats[0] / rows)", &mean_loss, exp_loss, 1, FX_RTOL, 0);
        double sumsq = -1, *sumsq_dev = NULL;
        CHECK(d->ops->alloc(d, sizeof sumsq, (void **)&sumsq_dev, &err) == 0 &&
              d->ops->sumsq(d, fx.m->grads, fx.m->n_params, sumsq_dev, &err) == 0 &&
              d->ops->download(d, &sumsq, sumsq_dev, sizeof sumsq, &err) == 0, "%s", err.msg);
        d->ops->free(d, sumsq_dev);
        float norm = (float)sqrt(sumsq);
        fx_compare("grad_global_norm", &norm, exp_norm, 1, FX_RTOL, 0);
    }
    snprintf(key, sizeof key, "%s.grad", name);
    fx_compare_params(&fx, fx.m->grads, key, FX_RTOL, FX_ATOL_GRAD);
    free(logits);
    free(exp_logits);
    free(exp_loss);
    free(exp_norm);
    fx_teardown(&fx);
}

/* An optimizer of this kind and these settings, AdamW's betas (0.9, 0.999) and eps 1e-8, constant LR. */
static inline optim_opts fx_optim_opts(optim_kind kind, double lr, double momentum, bool nesterov, double wd, double clip)
{
    return (optim_opts){.kind = kind, .lr = lr, .momentum = momentum, .nesterov = nesterov, .weight_decay = wd,
                        .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .grad_clip = clip,
                        .schedule.kind = SCHED_CONSTANT};
}

/* 3 optimizer steps on the fixture batch from relu.init (tests/fixtures/README.md): losses and final
 * parameters against PyTorch's trajectory "name". */
static inline void fx_check_trajectory(device_kind kind, const char *name, const optim_opts *opts, double atol)
{
    fx_mlp fx;
    int rc = fx_setup(&fx, kind, ACT_RELU, "relu.init");
    CHECK(rc == 0, "fixture setup for %s", name);
    if (rc) {
        fx_teardown(&fx);
        return;
    }
    fprintf(stderr, "%s trajectory:\n", name);
    device *d = fx.dev;
    model *m = fx.m;
    optimizer *o = NULL;
    ddp_err err = {0};
    rc = optim_create(opts, d, m->n_params, &o, &err);
    CHECK(rc == 0, "optim_create: %s", err.msg);
    float losses[3] = {0, 0, 0};
    for (int step = 0; step < 3 && rc == 0; step++) {
        float stats[2] = {0, 0};
        rc = d->ops->upload(d, fx.stats, stats, sizeof stats, &err);
        if (!rc)
            rc = mlp_forward_backward_f32(m, fx.x, fx.labels, fx.shape.batch, 1.0f / (float)fx.shape.batch, false, NULL,
                                          NULL, fx.stats, &err);
        if (!rc)
            rc = d->ops->download(d, stats, fx.stats, sizeof stats, &err);
        losses[step] = stats[0] / (float)fx.shape.batch;
        const float *scale = NULL;
        if (!rc)
            rc = optim_grad_norm(o, m->grads, &scale, &err);
        if (!rc)
            rc = optim_step(o, m->params, m->grads, optim_lr_at(o, step, 3), scale, &err);
        CHECK(rc == 0, "step %d: %s", step, err.msg);
    }
    char key[64];
    snprintf(key, sizeof key, "%s.losses", name);
    float *exp_losses = fx_load(&fx, key, 3);
    CHECK(exp_losses != NULL, "fixture %s", key);
    if (exp_losses)
        fx_compare(key, losses, exp_losses, 3, FX_RTOL, 0);
    snprintf(key, sizeof key, "%s.after3", name);
    fx_compare_params(&fx, m->params, key, FX_RTOL, atol);
    free(exp_losses);
    if (o)
        optim_destroy(o);
    fx_teardown(&fx);
}

/* The fixture's four trajectories: SGD+Nesterov+weight decay, plain SGD, AdamW, AdamW+clipping. */
static inline void fx_check_all_trajectories(device_kind kind)
{
    optim_opts sgd = fx_optim_opts(OPT_SGD, 0.1, 0.9, true, 1e-4, 0);
    optim_opts sgd_plain = fx_optim_opts(OPT_SGD, 0.1, 0, false, 0, 0);
    optim_opts adamw = fx_optim_opts(OPT_ADAMW, 1e-3, 0, false, 0.01, 0);
    optim_opts adamw_clip = fx_optim_opts(OPT_ADAMW, 1e-3, 0, false, 0.01, 0.5);
    fx_check_trajectory(kind, "sgd", &sgd, FX_SGD_ATOL);
    fx_check_trajectory(kind, "sgd_plain", &sgd_plain, FX_SGD_ATOL);
    fx_check_trajectory(kind, "adamw", &adamw, FX_ADAMW_ATOL);
    fx_check_trajectory(kind, "adamw_clip", &adamw_clip, FX_ADAMW_ATOL);
}

#endif
