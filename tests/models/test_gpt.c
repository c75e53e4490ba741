/* test_gpt.c — GPT-2 on the CPU backend against PyTorch (fixture gpt-reference): logits,
 * loss, every gradient and the global gradient norm at init; two 3-step AdamW trajectories (with
 * and without clipping) with weight decay on the 2-D tensors only; and a central finite-difference
 * check of a few entries of every parameter tensor; train.recompute selective and full give none's
 * gradients bit for bit in less activation memory. Every shape comes from the fixture's MANIFEST.
 * The same checks, with the same tolerances, hold the CUDA backend to PyTorch with `--cuda`. */
#include "tests/models/gpt_fixture.h"

#include "runtime/device/device.h"

/* The logits of the last forward pass; their row stride must be the padded vocabulary. */
static const void *model_logits(const model *m)
{
    int64_t ld = 0;
    const void *p = m->ops->logits(m, &ld);
    CHECK(ld == gpt2_vocab_padded(m->io.sample.n_classes), "logits row stride %lld", (long long)ld);
    return p;
}

/* Mean cross-entropy of the last forward pass, computed in double on the host from the logits. */
static double host_loss(const gfx *f, const int32_t *targets_host)
{
    int64_t rows = f->B * f->T, Vp = f->Vp, V = f->shape.vocab_size;
    float *logits = malloc((size_t)(rows * Vp) * 4);
    f->dev->ops->download(f->dev, logits, model_logits(f->m), (size_t)(rows * Vp) * 4, NULL);
    double sum = 0;
    for (int64_t r = 0; r < rows; r++) {
        const float *z = logits + r * Vp;
        double mx = -INFINITY, se = 0;
        for (int64_t j = 0; j < V; j++)
            mx = fmax(mx, z[j]);
        for (int64_t j = 0; j < V; j++)
            se += exp((double)z[j] - mx);
        sum += mx + log(se) - z[targets_host[r]];
    }
    free(logits);
    return sum / (double)rows;
}

static void check_forward_backward(gfx *f)
{
    ddp_err err = {0};
    device *d = f->dev;
    int64_t rows = f->B * f->T, Vp = f->Vp, V = f->shape.vocab_size;
    CHECK(gfx_pass(f, false, &err) == 0, "evaluate: %s", err.msg);
    float *logits = malloc((size_t)(rows * Vp) * 4), *packed = malloc((size_t)(rows * V) * 4);
    d->ops->download(d, logits, model_logits(f->m), (size_t)(rows * Vp) * 4, NULL);
    for (int64_t r = 0; r < rows; r++)
        memcpy(packed + r * V, logits + r * Vp, (size_t)V * 4);
    float *ref = gfx_load(f, "logits", NULL), *loss = gfx_load(f, "loss", NULL);
    CHECK(ref && loss, "fixture logits/loss");
    if (ref)
        gfx_compare("logits", packed, ref, (size_t)(rows * V), GFX_RTOL, GFX_SCALE_ATOL, 0);
    float stats[2];
    d->ops->download(d, stats, f->stats, sizeof stats, NULL);
    if (loss)
        CHECK_CLOSE(stats[0] / (double)rows, loss[0], 1e-5, 0);
    free(ref);
    free(logits);
    free(packed);

    CHECK(gfx_pass(f, true, &err) == 0, "forward_backward: %s", err.msg);
    d->ops->download(d, stats, f->stats, sizeof stats, NULL);
    if (loss)
        CHECK_CLOSE(stats[0] / (double)rows, loss[0], 1e-5, 0);
    free(loss);
    gfx_compare_params(f, f->m->grads, "grad", GFX_RTOL, GFX_SCALE_ATOL, 0);
    double sumsq = 0, *sumsq_dev = NULL;
    CHECK(d->ops->alloc(d, sizeof sumsq, (void **)&sumsq_dev, &err) == 0 &&
          d->ops->sumsq(d, f->m->grads, f->m->n_params, sumsq_dev, &err) == 0 &&
          d->ops->download(d, &sumsq, sumsq_dev, sizeof sumsq, &err) == 0, "%s", err.msg);
    d->ops->free(d, sumsq_dev);
    float *norm = gfx_load(f, "grad_global_norm", NULL);
    if (norm)
        CHECK_CLOSE(sqrt(sumsq), norm[0], 1e-5, 0);
    free(norm);
}

/* Central differences of the host-computed loss for the largest-gradient entry and one other
 * entry of every tensor. The error estimate is the difference between steps h and h/2 (their
 * truncation errors differ by 4x, rounding noise shows in both), so the tolerance follows the
 * float32 noise of this very model instead of a constant. */
static void check_finite_differences(gfx *f)
{
    ddp_err err = {0};
    CHECK(gfx_upload_params(f, "init") == 0, "reloading init.*");
    CHECK(gfx_pass(f, true, &err) == 0, "%s", err.msg);
    model *m = f->m;
    device *d = m->dev;
    float *params = malloc(m->n_params * 4), *grads = malloc(m->n_params * 4);
    int32_t *targets = gfx_load(f, "targets", NULL);
    d->ops->download(d, params, m->params, m->n_params * 4, NULL);
    d->ops->download(d, grads, m->grads, m->n_params * 4, NULL);
    int checked = 0;
    for (int i = 0; i < m->n_tensors && targets; i++) {
        const param_tensor *t = &m->tensors[i];
        size_t live = !strcmp(t->name, "wte.weight") ? (size_t)(f->shape.vocab_size * f->shape.n_embd) : t->numel;
        size_t big = 0;
        for (size_t j = 0; j < live; j++)
            if (fabs(grads[t->offset + j]) > fabs(grads[t->offset + big]))
                big = j;
        size_t picks[2] = {big, (big * 7919 + live / 3) % live};
        for (int p = 0; p < 2; p++) {
            size_t at = t->offset + picks[p];
            double fd[2];
            for (int s = 0; s < 2; s++) {
                double h = s ? 5e-3 : 1e-2, lp, lm;
                float orig = params[at];
                params[at] = orig + (float)h;
                d->ops->upload(d, m->params + at, params + at, 4, NULL);
                gfx_pass(f, false, &err);
                lp = host_loss(f, targets);
                params[at] = orig - (float)h;
                d->ops->upload(d, m->params + at, params + at, 4, NULL);
                gfx_pass(f, false, &err);
                lm = host_loss(f, targets);
                params[at] = orig;
                d->ops->upload(d, m->params + at, params + at, 4, NULL);
                /* the perturbation actually applied is the float32 difference */
                fd[s] = (lp - lm) / ((double)(orig + (float)h) - (double)(orig - (float)h));
            }
            double g = grads[at], tol = 3 * fabs(fd[0] - fd[1]) + 1e-3 * fabs(g) + 2e-6;
            CHECK(fabs(fd[1] - g) <= tol, "%s[%zu]: finite difference %.6g, gradient %.6g (tol %.3g)", t->name,
                  picks[p], fd[1], g, tol);
            checked++;
        }
    }
    fprintf(stderr, "  finite differences: %d entries\n", checked);
    free(params);
    free(grads);
    free(targets);
}

/* The deepest model the config allows builds: activations are not allocated per layer. */
static void check_deepest_builds(device *d)
{
    gpt2_shape shape = {.n_layer = GPT2_MAX_LAYERS, .n_head = 1, .n_embd = 8, .block_size = 4, .vocab_size = 16};
    sample_layout data = {.input = {SAMPLE_I32, 4}, .target = {SAMPLE_I32, 4}, .n_classes = 16};
    model *m = NULL;
    ddp_err err = {0};
    CHECK(gpt2_create(&shape, &(lm_run){.compute = TENSOR_F32}, d, &data, 2, MODEL_BUFFERS_WHOLE, &m, &err) == 0, "%d layers: %s", GPT2_MAX_LAYERS, err.msg);
    if (m)
        m->ops->destroy(m);
}

/* `--cuda` runs the PyTorch checks on the CUDA device; the finite differences, which check the
 * model's formulas rather than a backend, run on the CPU only. */
int main(int argc, char **argv)
{
    gfx f;
    bool cuda = argc > 1 && !strcmp(argv[1], "--cuda");
    device *d = gfx_open_device(cuda);
    CHECK(d != NULL, "cpu device");
    if (!d)
        return check_done("test_gpt");
    int rc = gfx_setup(&f, d, TENSOR_F32);
    CHECK(rc == 0, "fixture setup");
    if (!rc) {
        fprintf(stderr, "gpt-reference L=%lld C=%lld NH=%lld T=%lld V=%lld B=%lld on %s:\n",
                (long long)f.shape.n_layer, (long long)f.shape.n_embd, (long long)f.shape.n_head, (long long)f.T,
                (long long)f.shape.vocab_size, (long long)f.B, d->name);
        check_forward_backward(&f);
        gfx_check_recompute(&f, gfx_build_gpt2);
        gfx_check_chunked_classifier(&f, gfx_build_gpt2, GFX_RTOL, GFX_SCALE_ATOL);
        gfx_check_trajectory(&f, "adamw", 0.0, 1e-5, GFX_TRAJ_FLOORS);
        gfx_check_trajectory(&f, "adamw_clip", 0.5, 1e-5, GFX_TRAJ_FLOORS);
        if (!cuda)
            check_finite_differences(&f);
        check_deepest_builds(d);
    }
    gfx_teardown(&f);
    d->ops->destroy(d);
    return check_done("test_gpt");
}
