/* gpt_fixture.h — the PyTorch reference checks of the fixture gpt-reference (tests/fixtures/README.md):
 * reads every shape from the fixture's MANIFEST (L, C, NH, T, V, B and each tensor's own line),
 * builds the GPT-2 it describes on a device with the reference batch uploaded, and compares
 * logits, loss, every gradient, the global gradient norm and two 3-step AdamW trajectories, with
 * one set of tolerances for every backend. A fixture made by the same generator with other shapes
 * passes unchanged. Through a builder (gfx_build_fn) the same setup, passes and checks serve
 * llama_fixture.h's Llama; gfx_bf16.h adds the bf16 checks.
 *
 * Header-only like check.h. */
#ifndef DDP_GPT_FIXTURE_H
#define DDP_GPT_FIXTURE_H

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/gpt2.h"
#include "runtime/device/device.h"
#include "models/lm_layout.h"
#include "runtime/optim/optim.h"
#include "tests/check.h"
#include "tests/fixture.h"

/* Forward values and gradients: the README says a correct float32 implementation lands within
 * ~1e-5 relative of the float64 reference. Each value is a sum of at most max(C, 4C, T, V, B·T)
 * float32 products, whose rounding is bounded by ~K·eps·sum|terms| in the worst case and
 * ~sqrt(K)·eps·|terms| typically; 1e-4 of the tensor's largest magnitude covers the worst case
 * for K <= 1024 with margin, while any wrong formula moves values by O(their magnitude). */
#define GFX_RTOL 1e-4
#define GFX_SCALE_ATOL 1e-4   /* times max |reference| of the tensor */
/* AdamW divides each gradient by its own magnitude: the README gives the float32 noise floor of
 * the trajectories (PyTorch float32 vs float64); our float32 differs from PyTorch's by the same
 * order, so a few times the floor. A wrong formula moves a step by O(lr) = 1e-3. */
#define GFX_TRAJ_FLOORS 8.0

/* The CPU device, or with cuda the CUDA device (the emulator in emulated builds); NULL, said on
 * stderr, when it cannot be made. */
static inline device *gfx_open_device(bool cuda)
{
    device *d = NULL;
    ddp_err err = {0};
    const device_opts gpu_opts = {.kind = DEVICE_CUDA}; /* no TF32 */
    if (cuda ? device_cuda_create(0, &gpu_opts, &d, &err) : device_cpu_create(&d, &err))
        fprintf(stderr, "%s device: %s\n", cuda ? "cuda" : "cpu", err.msg);
    return d;
}

typedef struct gfx {
    gpt2_shape shape;
    int64_t Vp;                 /* the model's padded vocabulary: row stride of its logits */
    int64_t B, T;
    double noise_floor;
    device *dev;
    model *m;
    int32_t *tokens, *targets;  /* device [B, T] */
    float *stats;               /* device [2] */
    fixture_manifest manifest;  /* gpt-reference's */
} gfx;

/* Parses MANIFEST: the shape line (L, C, NH, T, V, B), the noise floor, and each tensor's line. */
static inline int gfx_read_manifest(gfx *f)
{
    const fixture_manifest *mf = &f->manifest;
    if (fixture_manifest_read(&f->manifest, "gpt-reference"))
        return 1;
    f->shape.n_layer = fixture_header_int(mf, "L");
    f->shape.n_embd = fixture_header_int(mf, "C");
    f->shape.n_head = fixture_header_int(mf, "NH");
    f->T = fixture_header_int(mf, "T");
    f->shape.vocab_size = fixture_header_int(mf, "V");
    f->B = fixture_header_int(mf, "B");
    f->shape.block_size = f->T;
    f->Vp = gpt2_vocab_padded(f->shape.vocab_size);
    const char *floor = strstr(mf->header, "max abs)");
    f->noise_floor = floor ? strtod(floor + strlen("max abs)"), NULL) : -1;
    if (f->shape.n_layer < 1 || f->shape.n_embd < 1 || f->shape.n_head < 1 || f->shape.vocab_size < 2 || f->B < 1 ||
        f->T < 1 || f->noise_floor <= 0) {
        fprintf(stderr, "fixture %s/MANIFEST: header line not understood: %s\n", mf->dir, mf->header);
        return 1;
    }
    return 0;
}

/* NAME.bin at its MANIFEST size (fixture_load); NULL after a message. */
static inline void *gfx_load(const gfx *f, const char *name, int64_t *numel_out)
{
    return fixture_load(&f->manifest, name, numel_out);
}

/* The fixture's tensor PREFIX.<name> for model tensor t: wte's fixture rows are the first
 * vocab_size of the model's vocab_padded, the rest stay zero. */
static inline float *gfx_load_param(const gfx *f, const char *prefix, const param_tensor *t)
{
    char name[160];
    snprintf(name, sizeof name, "%s.%s", prefix, t->name);
    int64_t numel = 0;
    float *src = gfx_load(f, name, &numel);
    if (!src)
        return NULL;
    float *full = calloc(t->numel, sizeof *full);
    if (full && numel <= (int64_t)t->numel)
        memcpy(full, src, (size_t)numel * 4);
    free(src);
    if (numel > (int64_t)t->numel) {
        fprintf(stderr, "fixture %s: %lld values, the model's tensor has %zu\n", name, (long long)numel, t->numel);
        free(full);
        return NULL;
    }
    return full;
}

static inline int gfx_upload_params(gfx *f, const char *prefix)
{
    model *m = f->m;
    for (int i = 0; i < m->n_tensors; i++) {
        float *h = gfx_load_param(f, prefix, &m->tensors[i]);
        if (!h)
            return 1;
        m->dev->ops->upload(m->dev, m->params + m->tensors[i].offset, h, m->tensors[i].numel * 4, NULL);
        free(h);
    }
    /* the bf16 compute copy, where the model has one, from these parameters */
    return model_params_changed(m, 0, 0, NULL) != DDP_OK;
}

static inline void *gfx_device_copy(device *d, const void *host, size_t bytes)
{
    void *p = NULL;
    if (d->ops->alloc(d, bytes, &p, NULL))
        return NULL;
    d->ops->upload(d, p, host, bytes, NULL);
    return p;
}

/* Builds a model of f's shape on f->dev as `run` says; NULL, with err said, if it cannot. */
typedef model *(*gfx_build_fn)(gfx *f, const lm_run *run, ddp_err *err);

/* gpt-reference's builder: GPT-2 of f->shape for batches of f->B rows of f->T tokens. */
static inline model *gfx_build_gpt2(gfx *f, const lm_run *run, ddp_err *err)
{
    sample_layout data = {.input = {SAMPLE_I32, f->T}, .target = {SAMPLE_I32, f->T},
                          .n_classes = f->shape.vocab_size};
    model *m = NULL;
    return gpt2_create(&f->shape, run, f->dev, &data, f->B, MODEL_BUFFERS_WHOLE, &m, err) ? NULL : m;
}

/* Once the manifest is read: f->m built by `build` computing in `compute`, with parameters
 * init.*, and the reference batch and zeroed stats on f->dev; 0 on success. */
static inline int gfx_start(gfx *f, gfx_build_fn build, tensor_dtype compute)
{
    ddp_err err = {0};
    if (!(f->m = build(f, &(lm_run){.compute = compute}, &err))) {
        fprintf(stderr, "fixture setup: %s\n", err.msg);
        return 1;
    }
    int32_t *x = gfx_load(f, "input", NULL), *y = gfx_load(f, "targets", NULL);
    float zero[2] = {0, 0};
    int rc = !x || !y || gfx_upload_params(f, "init");
    if (!rc) {
        f->tokens = gfx_device_copy(f->dev, x, sizeof(int32_t) * (size_t)(f->B * f->T));
        f->targets = gfx_device_copy(f->dev, y, sizeof(int32_t) * (size_t)(f->B * f->T));
        f->stats = gfx_device_copy(f->dev, zero, sizeof zero);
        rc = !f->tokens || !f->targets || !f->stats;
    }
    free(x);
    free(y);
    return rc;
}

/* The reference GPT-2 with parameters init.* on dev, computing in `compute`; 0 on success. Call
 * gfx_teardown either way. */
static inline int gfx_setup(gfx *f, device *dev, tensor_dtype compute)
{
    memset(f, 0, sizeof *f);
    f->dev = dev;
    return gfx_read_manifest(f) || gfx_start(f, gfx_build_gpt2, compute);
}

static inline void gfx_teardown(gfx *f)
{
    if (f->m)
        f->m->ops->destroy(f->m);
    if (f->dev) {
        f->dev->ops->free(f->dev, f->tokens);
        f->dev->ops->free(f->dev, f->targets);
        f->dev->ops->free(f->dev, f->stats);
    }
}

/* The README's AdamW (lr 1e-3, betas (0.9, 0.95), eps 1e-8, weight decay 0.1 on the 2-D tensors
 * only), clipping the global gradient norm to clip (0 = off). */
static inline optimizer *gfx_make_adamw(gfx *f, double clip)
{
    const optim_opts opts = {.kind = OPT_ADAMW, .lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8,
                             .weight_decay = 0.1, .grad_clip = clip, .schedule.kind = SCHED_CONSTANT};
    optimizer *o = NULL;
    ddp_err err = {0};
    CHECK(optim_create(&opts, f->dev, f->m->n_params, &o, &err) == 0, "optim_create: %s", err.msg);
    /* the README's param groups: decay on the 2-D tensors only */
    optim_span *spans = malloc((size_t)f->m->n_tensors * sizeof *spans);
    int n = 0;
    for (int i = 0; i < f->m->n_tensors; i++) {
        const param_tensor *t = &f->m->tensors[i];
        CHECK(t->weight_decay == (t->ndim == 2), "%s: weight_decay %d for a %d-D tensor", t->name, t->weight_decay,
              t->ndim);
        if (!t->weight_decay)
            spans[n++] = (optim_span){t->offset, t->numel};
    }
    CHECK(optim_set_no_decay(o, spans, n, &err) == 0, "optim_set_no_decay: %s", err.msg);
    free(spans);
    return o;
}

static inline model_batch gfx_batch(const gfx *f)
{
    model_batch b = {.inputs = f->tokens, .targets = f->targets, .rows = f->B};
    return b;
}

/* One pass of m (f->m, or a model of its shape) over the reference batch, f's stats zeroed first:
 * forward_backward (the mean loss's gradient) if backward, else evaluate. */
static inline int gfx_pass_of(gfx *f, model *m, bool backward, ddp_err *err)
{
    model_batch b = gfx_batch(f);
    int rc = f->dev->ops->fill(f->dev, TENSOR_F32, f->stats, 2, 0.0f, err);
    if (rc)
        return rc;
    return backward ? m->ops->forward_backward(m, &b, 1.0f / (float)(f->B * f->T), false, NULL, NULL, f->stats, err)
                    : m->ops->evaluate(m, &b, f->stats, err);
}

/* gfx_pass_of f->m. */
static inline int gfx_pass(gfx *f, bool backward, ddp_err *err) { return gfx_pass_of(f, f->m, backward, err); }

/* The mean loss of the last pass. */
static inline double gfx_mean_loss(const gfx *f)
{
    float stats[2];
    f->dev->ops->download(f->dev, stats, f->stats, sizeof stats, NULL);
    return stats[0] / (double)(f->B * f->T);
}

/* The gradients of the reference batch from `other`, a model of f->m's shape (built by the
 * caller with another train.recompute), given f->m's parameters: two passes, so the second
 * backward runs on what the first left behind. A malloc'd host copy; `other` is destroyed. */
static inline float *gfx_grads_of(gfx *f, model *other)
{
    device *d = f->dev;
    ddp_err err = {0};
    size_t bytes = f->m->n_params * sizeof(float);
    float *host = malloc(bytes);
    d->ops->download(d, host, f->m->params, bytes, NULL);
    d->ops->upload(d, other->params, host, bytes, NULL);
    for (int pass = 0; pass < 2; pass++)
        CHECK(gfx_pass_of(f, other, true, &err) == 0, "forward_backward: %s", err.msg);
    d->ops->download(d, host, other->grads, bytes, NULL);
    other->ops->destroy(other);
    return host;
}

/* train.recompute selective and full give none's gradients bit for bit in less activation memory. */
static inline void gfx_check_recompute(gfx *f, gfx_build_fn build)
{
    float *grads[3] = {NULL, NULL, NULL};
    size_t act[3] = {0, 0, 0};
    for (int mode = RECOMPUTE_NONE; mode <= RECOMPUTE_FULL; mode++) {
        ddp_err err = {0};
        model *m = build(f, &(lm_run){.compute = f->m->act_dtype, .recompute = (recompute_mode)mode}, &err);
        CHECK(m != NULL, "recompute %s: %s", recompute_mode_names[mode], err.msg);
        if (m) {
            act[mode] = m->activation_bytes;
            grads[mode] = gfx_grads_of(f, m);
        }
    }
    size_t n = f->m->n_params * sizeof(float);
    for (int mode = RECOMPUTE_SELECTIVE; mode <= RECOMPUTE_FULL; mode++)
        CHECK(grads[0] && grads[mode] && !memcmp(grads[0], grads[mode], n),
              "recompute %s: the gradients of none, bit for bit", recompute_mode_names[mode]);
    fprintf(stderr, "  activations: none %zu, selective %zu, full %zu bytes\n", act[0], act[1], act[2]);
    CHECK(act[2] < act[1] && act[1] < act[0], "recompute keeps less: full < selective < none");
    for (int mode = 0; mode < 3; mode++)
        free(grads[mode]);
}

/* One pass of language model m over rows packed rows of T positions (model_batch.docs), from host
 * arrays: tokens and targets [rows·T], docs [2, rows·T] (starts, then ends). backward:
 * forward_backward with grad_scale, adding into the gradients if accumulate; else evaluate.
 * logits_out [rows·T, V] (the vocabulary's columns, without padding) unless NULL. Returns the loss
 * sum. */
static inline double gfx_packed_pass(model *m, const int32_t *tokens, const int32_t *targets, const int32_t *docs,
                                     int64_t rows, int64_t T, bool backward, float grad_scale, bool accumulate,
                                     float *logits_out)
{
    const size_t n = (size_t)(rows * T), V = (size_t)m->io.sample.n_classes;
    device *d = m->dev;
    void *x = NULL, *y = NULL, *dd = NULL, *stats = NULL;
    float st[2] = {0, 0};
    d->ops->alloc(d, n * 4, &x, NULL), d->ops->alloc(d, n * 4, &y, NULL);
    d->ops->alloc(d, 2 * n * 4, &dd, NULL), d->ops->alloc(d, 2 * sizeof(float), &stats, NULL);
    d->ops->upload(d, x, tokens, n * 4, NULL), d->ops->upload(d, y, targets, n * 4, NULL);
    d->ops->upload(d, dd, docs, 2 * n * 4, NULL);
    d->ops->fill(d, TENSOR_F32, stats, 2, 0.0f, NULL);
    model_batch b = {.inputs = x, .targets = y, .rows = rows, .docs = dd};
    ddp_err err = {0};
    int rc = backward ? m->ops->forward_backward(m, &b, grad_scale, accumulate, NULL, NULL, stats, &err)
                      : m->ops->evaluate(m, &b, stats, &err);
    CHECK(rc == DDP_OK, "%s: %s", backward ? "forward_backward" : "evaluate", err.msg);
    d->ops->download(d, st, stats, sizeof st, NULL);
    if (logits_out) {
        int64_t ld = 0;
        const void *lg = m->ops->logits(m, &ld);
        float *all = malloc(n * (size_t)ld * 4);
        d->ops->download(d, all, lg, n * (size_t)ld * 4, NULL);
        for (size_t r = 0; r < n; r++)
            memcpy(logits_out + r * V, all + r * (size_t)ld, V * 4);
        free(all);
    }
    d->ops->free(d, x), d->ops->free(d, y), d->ops->free(d, dd), d->ops->free(d, stats);
    return st[0];
}

/* One CHECK per tensor: |got - exp| <= atol_scale·max|exp| + rtol·|exp|; prints the worst error. */
static inline void gfx_compare(const char *what, const float *got, const float *exp, size_t n, double rtol,
                               double atol_scale, double atol_abs)
{
    double max_ref = 0, max_abs = 0;
    for (size_t i = 0; i < n; i++)
        max_ref = fmax(max_ref, fabs((double)exp[i]));
    double atol = atol_scale * max_ref + atol_abs;
    size_t bad = 0, worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)exp[i]);
        if (d > max_abs) {
            max_abs = d;
            worst = i;
        }
        if (!(d <= atol + rtol * fabs((double)exp[i])))
            bad++;
    }
    fprintf(stderr, "  %-36s n=%-7zu max_abs=%.3g (max|ref| %.3g)\n", what, n, max_abs, max_ref);
    CHECK(bad == 0, "%s: %zu of %zu values off (worst [%zu] %.9g vs %.9g)", what, bad, n, worst,
          (double)got[worst], (double)exp[worst]);
}

/* Compares the params-layout device buffer buf with fixture "<prefix>.*", tensor by tensor; wte's
 * padding rows must be exactly zero. */
static inline void gfx_compare_params(const gfx *f, const float *buf, const char *prefix, double rtol,
                                      double atol_scale, double atol_abs)
{
    model *m = f->m;
    float *host = malloc(m->n_params * 4);
    m->dev->ops->download(m->dev, host, buf, m->n_params * 4, NULL);
    for (int i = 0; i < m->n_tensors; i++) {
        const param_tensor *t = &m->tensors[i];
        char name[160];
        snprintf(name, sizeof name, "%s.%s", prefix, t->name);
        int64_t numel = 0;
        float *exp = gfx_load(f, name, &numel);
        CHECK(exp != NULL, "fixture %s missing", name);
        if (exp) {
            gfx_compare(name, host + t->offset, exp, (size_t)numel, rtol, atol_scale, atol_abs);
            size_t nonzero = 0;
            for (size_t j = (size_t)numel; j < t->numel; j++)
                nonzero += host[t->offset + j] != 0.0f;
            CHECK(nonzero == 0, "%s: %zu padding values are not zero", name, nonzero);
        }
        free(exp);
    }
    free(host);
}

/* The README's trajectory `name` (adamw, adamw_clip) from init.*, clipping at clip: each step's
 * loss and gradient norm within rtol of the reference's, and the parameters after three steps
 * within floors times the MANIFEST's float32 noise floor. */
static inline void gfx_check_trajectory(gfx *f, const char *name, double clip, double rtol, double floors)
{
    ddp_err err = {0};
    CHECK(gfx_upload_params(f, "init") == 0, "reloading init.*");
    optimizer *o = gfx_make_adamw(f, clip);
    if (!o)
        return;
    char what[64];
    snprintf(what, sizeof what, "%s.losses", name);
    float *losses = gfx_load(f, what, NULL);
    snprintf(what, sizeof what, "%s.grad_norms", name);
    float *norms = gfx_load(f, what, NULL);
    for (int step = 0; step < 3 && losses && norms; step++) {
        CHECK(gfx_pass(f, true, &err) == 0, "%s step %d: %s", name, step, err.msg);
        CHECK_CLOSE(gfx_mean_loss(f), losses[step], rtol, 0);
        double norm = 0;
        const float *scale = NULL;
        CHECK(optim_grad_norm(o, f->m->grads, &scale, &err) == 0, "%s", err.msg);
        CHECK(optim_read_grad_norm(o, &norm, &err) == 0, "%s", err.msg);
        CHECK_CLOSE(norm, norms[step], rtol, 0);
        CHECK(optim_step(o, f->m->params, f->m->grads, 1e-3, scale, &err) == 0, "%s", err.msg);
    }
    snprintf(what, sizeof what, "%s.after3", name);
    fprintf(stderr, "  %s: tolerance %.3g (%.0f x the noise floor %.3g)\n", what, floors * f->noise_floor, floors,
            f->noise_floor);
    gfx_compare_params(f, f->m->params, what, 0, 0, floors * f->noise_floor);
    free(losses);
    free(norms);
    optim_destroy(o);
}

/* The classifier in chunks (lm_run.logits_bytes) against the fixture, with f->m's parameters: one
 * row per chunk, and about a third of the rows (the last chunk shorter when they do not divide):
 * the loss and every gradient within the fixture's tolerances (rtol, atol_scale), since only the
 * sums change order; exactly (B·T - rows per chunk) padded logits rows fewer activation bytes than
 * f->m's whole classifier; no logits left to read. */
static inline void gfx_check_chunked_classifier(gfx *f, gfx_build_fn build, double rtol, double atol_scale)
{
    device *d = f->dev;
    model *whole = f->m;
    const int64_t rows = f->B * f->T;
    const size_t row_bytes = (size_t)f->Vp * tensor_dtype_size(whole->act_dtype);
    const int64_t fits[2] = {1, rows / 3 + 1};
    float *loss = gfx_load(f, "loss", NULL);
    CHECK(loss != NULL, "fixture loss");
    for (int i = 0; i < 2 && loss; i++) {
        const lm_run run = {.compute = whole->act_dtype, .logits_bytes = (size_t)fits[i] * row_bytes + row_bytes / 2};
        const int64_t chunk = lm_logit_rows(run.logits_bytes, f->Vp, run.compute, rows);
        ddp_err err = {0};
        model *m = build(f, &run, &err);
        CHECK(m != NULL, "classifier in chunks of %lld rows: %s", (long long)chunk, err.msg);
        if (!m)
            continue;
        int64_t ld = 0;
        CHECK(m->ops->logits(m, &ld) == NULL, "chunks of %lld rows: no logits to read", (long long)chunk);
        CHECK(m->activation_bytes == whole->activation_bytes - (size_t)(rows - chunk) * row_bytes,
              "chunks of %lld rows: activations %zu bytes, whole %zu", (long long)chunk, m->activation_bytes,
              whole->activation_bytes);
        fprintf(stderr, "  classifier in chunks of %lld of %lld rows: activations %zu bytes (whole: %zu)\n",
                (long long)chunk, (long long)rows, m->activation_bytes, whole->activation_bytes);
        d->ops->copy(d, m->params, whole->params, whole->n_params * sizeof(float), NULL);
        CHECK(gfx_pass_of(f, m, true, &err) == 0, "forward_backward: %s", err.msg);
        CHECK_CLOSE(gfx_mean_loss(f), loss[0], rtol, 0);
        f->m = m; /* gfx_compare_params reads the tensor table of f->m */
        gfx_compare_params(f, m->grads, "grad", rtol, atol_scale, 0);
        f->m = whole;
        m->ops->destroy(m);
    }
    free(loss);
}

#endif
