/* gfx_bf16.h — the checks of a reference fixture's model with precision bf16 on the CUDA backend
 * that test_gpt_bf16.c and test_llama_bf16.c share: logits and loss, every gradient, an AdamW
 * trajectory and the weight copy against gpt_fixture.h's gfx, and the CPU backend's refusal. The
 * tolerances are each test's, derived there from bf16 rounding; every error here is norm-wise,
 * |X - X_ref|_2 / |X_ref|_2. Header-only, included after gpt_fixture.h or llama_fixture.h. */
#ifndef DDP_GFX_BF16_H
#define DDP_GFX_BF16_H

#include "runtime/base/half.h"
#include "tests/models/gpt_fixture.h"

/* |got - exp|_2 / |exp|_2 over n values. */
static inline double gfx_rel_l2(const float *got, const float *exp, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)got[i] - (double)exp[i];
        num += d * d;
        den += (double)exp[i] * (double)exp[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* The bf16 logits [rows, V] of the last forward pass, widened to float. */
static inline float *gfx_bf16_logits(gfx *f, int64_t V)
{
    int64_t rows = f->B * f->T, ld = 0;
    const void *dev_logits = f->m->ops->logits(f->m, &ld);
    uint16_t *raw = malloc((size_t)(rows * ld) * 2);
    float *out = malloc((size_t)(rows * V) * 4);
    f->dev->ops->download(f->dev, raw, dev_logits, (size_t)(rows * ld) * 2, NULL);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t v = 0; v < V; v++)
            out[r * V + v] = bf16_to_float(raw[r * ld + v]);
    free(raw);
    return out;
}

/* The logits (V columns) and the loss within tol of the reference's, and the logits farther than
 * float32 could be: bf16 is really used. */
static inline void gfx_bf16_check_forward(gfx *f, int64_t V, double tol)
{
    ddp_err err = {0};
    const int64_t rows = f->B * f->T;
    CHECK(gfx_pass(f, false, &err) == 0, "evaluate: %s", err.msg);
    float *logits = gfx_bf16_logits(f, V), *ref = gfx_load(f, "logits", NULL), *loss = gfx_load(f, "loss", NULL);
    CHECK(ref && loss, "fixture logits/loss");
    if (ref && loss) {
        double e = gfx_rel_l2(logits, ref, (size_t)(rows * V)), le = fabs(gfx_mean_loss(f) - loss[0]) / loss[0];
        fprintf(stderr, "  logits: relative error %.3g, loss %.3g (tolerance %.3g)\n", e, le, tol);
        CHECK(e <= tol, "bf16 logits: relative error %.3g > %.3g", e, tol);
        CHECK(e > 1e-4, "bf16 logits within %.3g of float64: is bf16 really used?", e);
        CHECK(le <= tol, "bf16 loss %.6f vs %.6f: relative error %.3g > %.3g", gfx_mean_loss(f), loss[0], le, tol);
    }
    free(logits);
    free(ref);
    free(loss);
}

/* A gradient tensor's tolerance, by its name (the test's derivation). */
typedef double (*gfx_grad_tol_fn)(const gfx *f, const char *tensor);

/* forward_backward on the reference batch: every gradient tensor within its tolerance, and the
 * global norm within the loosest. */
static inline void gfx_bf16_check_gradients(gfx *f, gfx_grad_tol_fn tolerance)
{
    ddp_err err = {0};
    CHECK(gfx_pass(f, true, &err) == 0, "forward_backward: %s", err.msg);
    float *grads = malloc(f->m->n_params * 4);
    f->dev->ops->download(f->dev, grads, f->m->grads, f->m->n_params * 4, NULL);
    double sumsq = 0, loosest = 0;
    for (int i = 0; i < f->m->n_tensors; i++) {
        const param_tensor *t = &f->m->tensors[i];
        char name[160];
        snprintf(name, sizeof name, "grad.%s", t->name);
        int64_t numel = 0;
        float *exp = gfx_load(f, name, &numel);
        CHECK(exp != NULL, "fixture %s missing", name);
        if (!exp)
            continue;
        double e = gfx_rel_l2(grads + t->offset, exp, (size_t)numel), tol = tolerance(f, t->name);
        loosest = fmax(loosest, tol);
        fprintf(stderr, "  %-52s relative error %.3g (tolerance %.3g)\n", name, e, tol);
        CHECK(e <= tol, "%s: relative error %.3g > %.3g", name, e, tol);
        for (int64_t j = 0; j < numel; j++)
            sumsq += (double)grads[t->offset + j] * grads[t->offset + j];
        free(exp);
    }
    float *norm = gfx_load(f, "grad_global_norm", NULL);
    if (norm)
        CHECK(fabs(sqrt(sumsq) - norm[0]) <= loosest * norm[0], "global norm %.6g vs %.6g", sqrt(sumsq), norm[0]);
    free(norm);
    free(grads);
}

/* AdamW from init.* for 3 steps: the loss before each step within tol of the reference's. */
static inline void gfx_bf16_check_trajectory(gfx *f, double tol)
{
    ddp_err err = {0};
    CHECK(gfx_upload_params(f, "init") == 0, "reloading init.*");
    optimizer *o = gfx_make_adamw(f, 0.0);
    float *losses = gfx_load(f, "adamw.losses", NULL);
    CHECK(o && losses, "optimizer and adamw.losses");
    for (int step = 0; o && losses && step < 3; step++) {
        CHECK(gfx_pass(f, true, &err) == 0, "step %d: %s", step, err.msg);
        double e = fabs(gfx_mean_loss(f) - losses[step]) / losses[step];
        CHECK(e <= tol, "adamw step %d: loss %.6f vs %.6f (relative %.3g > %.3g)", step, gfx_mean_loss(f),
              losses[step], e, tol);
        CHECK(optim_step(o, f->m->params, f->m->grads, 1e-3, NULL, &err) == 0, "%s", err.msg);
        CHECK(model_params_changed(f->m, 1, (uint64_t)step + 1, &err) == 0, "%s", err.msg);
    }
    free(losses);
    optim_destroy(o);
}

/* The weight copy's bits follow (seed, step): the same key twice gives the same logits (a resume),
 * another step other ones. */
static inline void gfx_bf16_check_weight_copy(gfx *f, int64_t V)
{
    model *m = f->m;
    ddp_err err = {0};
    float *logits[3];
    const uint64_t keys[3][2] = {{7, 11}, {7, 12}, {7, 11}};
    CHECK(gfx_upload_params(f, "init") == 0, "reloading init.*");
    for (int k = 0; k < 3; k++) {
        CHECK(model_params_changed(m, keys[k][0], keys[k][1], &err) == 0, "%s", err.msg);
        CHECK(gfx_pass(f, false, &err) == 0, "%s", err.msg);
        logits[k] = gfx_bf16_logits(f, V);
    }
    size_t count = (size_t)(f->B * f->T * V);
    CHECK(memcmp(logits[0], logits[2], count * 4) == 0, "the same (seed, step) gave different logits");
    CHECK(memcmp(logits[0], logits[1], count * 4) != 0, "another step gave the same weight copy");
    for (int k = 0; k < 3; k++)
        free(logits[k]);
}

/* The model `build` makes, in bf16 on the CPU backend, is refused: at build or at its first pass,
 * naming the CUDA backend. */
static inline void gfx_bf16_check_cpu_refuses(gfx *f, gfx_build_fn build)
{
    device *cpu = NULL, *gpu = f->dev;
    ddp_err err = {0};
    CHECK(device_cpu_create(&cpu, &err) == 0, "%s", err.msg);
    f->dev = cpu; /* the builder builds on f->dev; f stays where it is, inside its lfx for the Llama */
    model *m = cpu ? build(f, &(lm_run){.compute = TENSOR_BF16}, &err) : NULL;
    f->dev = gpu;
    int rc = cpu && !m;
    if (m) { /* building may succeed; computing must not */
        rc = model_params_changed(m, 0, 0, &err);
        if (!rc) {
            model_batch b = {.rows = 1};
            rc = m->ops->evaluate(m, &b, NULL, &err);
        }
        m->ops->destroy(m);
    }
    CHECK(rc != 0 && strstr(err.msg, "bf16 tensors need the CUDA backend"), "CPU bf16: \"%s\"", err.msg);
    if (cpu)
        cpu->ops->destroy(cpu);
}

#endif
