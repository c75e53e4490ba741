/* test_gpt_bf16.c — GPT-2 with precision bf16 (bf16 activations and GEMM operands, a
 * stochastically rounded bf16 copy of the fp32 weights, fp32 gradients) on the CUDA backend
 * against PyTorch's float64 reference (fixture gpt-reference): logits, loss, every
 * gradient tensor, the global gradient norm and the losses of a 3-step AdamW trajectory, each
 * within a tolerance derived below from bf16 rounding. Also: the bf16 path really rounds (its
 * logits are farther from the reference than fp32's can be), the weight copy follows the seed and
 * step and is reproduced exactly, and the CPU backend refuses a bf16 model. Shapes come from the
 * fixture's MANIFEST, so the tolerances scale with its depth.
 *
 * Tolerances, norm-wise: |X - X_ref|_2 / |X_ref|_2. One rounding to bf16 (8 significant bits)
 * errs relatively by at most half an ulp, 2^-8; over many values with no pattern the error is
 * uniform in +-half an ulp, whose RMS is 2^-8/sqrt(3) in the worst binade. The weight copy rounds
 * stochastically: error below one ulp, RMS at most 2^-7/sqrt(6). Independent errors add in
 * quadrature. The longest forward path (embedding, then per layer: ln_1, c_attn and its bias,
 * scores, softmax, att·v, c_proj and bias, residual, ln_2, c_fc and bias, GELU, c_proj and bias,
 * residual; then ln_f and the logits) rounds R = 4 + 16·L stored values and reads W = 4 + 12·L
 * rounded weight tensors, so e_fwd = sqrt(R·(2^-8/√3)² + W·(2^-7/√6)²); LayerNorm's division by
 * the row's deviation and the softmax's exponent can amplify an input error, allowed for by a
 * gain of 4. Backward repeats every rounding once more on the way down (its own outputs) while
 * reading the forward's rounded values: sqrt(2) more. The loss is a smooth mean over rows, so it
 * errs far less than the logits: e_fwd as a relative bound is generous. A wrong formula moves
 * results by O(1); fp32 sits near 1e-6. */
#include "tests/models/gpt_fixture.h"

#include "runtime/base/half.h"
#include "runtime/device/device.h"

#define GAIN 4.0

static double fwd_error(int64_t L)
{
    const double rne = ldexp(1.0, -8) / sqrt(3.0), sr = ldexp(1.0, -7) / sqrt(6.0);
    const double R = 4.0 + 16.0 * (double)L, W = 4.0 + 12.0 * (double)L;
    return sqrt(R * rne * rne + W * sr * sr);
}

/* |got - exp|_2 / |exp|_2 over n values. */
static double rel_l2(const float *got, const float *exp, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)got[i] - (double)exp[i];
        num += d * d;
        den += (double)exp[i] * (double)exp[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static void zero_stats(gfx *f) { f->dev->ops->fill(f->dev, TENSOR_F32, f->stats, 2, 0.0f, NULL); }

static float mean_loss(gfx *f)
{
    float stats[2];
    f->dev->ops->download(f->dev, stats, f->stats, sizeof stats, NULL);
    return stats[0] / (float)(f->B * f->T);
}

/* The logits [rows, V] of the last forward pass, widened to float. */
static float *download_logits(gfx *f)
{
    int64_t rows = f->B * f->T, V = f->shape.vocab_size, ld = 0;
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

static void check_forward_backward(gfx *f, double tol_fwd, double tol_bwd)
{
    ddp_err err = {0};
    int64_t rows = f->B * f->T, V = f->shape.vocab_size;
    model_batch b = gfx_batch(f);
    zero_stats(f);
    CHECK(f->m->ops->evaluate(f->m, &b, f->stats, &err) == 0, "evaluate: %s", err.msg);
    float *logits = download_logits(f), *ref = gfx_load(f, "logits", NULL), *loss = gfx_load(f, "loss", NULL);
    CHECK(ref && loss, "fixture logits/loss");
    if (ref && loss) {
        double e = rel_l2(logits, ref, (size_t)(rows * V));
        fprintf(stderr, "  logits: relative error %.3g (tolerance %.3g)\n", e, tol_fwd);
        CHECK(e <= tol_fwd, "bf16 logits: relative error %.3g > %.3g", e, tol_fwd);
        CHECK(e > 1e-4, "bf16 logits within %.3g of float64: is bf16 really used?", e);
        double le = fabs(mean_loss(f) - loss[0]) / loss[0];
        CHECK(le <= tol_fwd, "bf16 loss %.6f vs %.6f: relative error %.3g > %.3g", mean_loss(f), loss[0], le, tol_fwd);
    }
    free(logits);
    free(ref);
    free(loss);
    zero_stats(f);
    CHECK(f->m->ops->forward_backward(f->m, &b, 1.0f / (float)rows, false, NULL, NULL, f->stats, &err) == 0,
          "forward_backward: %s", err.msg);
    float *grads = malloc(f->m->n_params * 4);
    f->dev->ops->download(f->dev, grads, f->m->grads, f->m->n_params * 4, NULL);
    double worst = 0, sumsq = 0;
    for (int i = 0; i < f->m->n_tensors; i++) {
        const param_tensor *t = &f->m->tensors[i];
        char name[160];
        snprintf(name, sizeof name, "grad.%s", t->name);
        int64_t numel = 0;
        float *exp = gfx_load(f, name, &numel);
        CHECK(exp != NULL, "fixture %s missing", name);
        if (!exp)
            continue;
        double e = rel_l2(grads + t->offset, exp, (size_t)numel);
        worst = e > worst ? e : worst;
        CHECK(e <= tol_bwd, "%s: relative error %.3g > %.3g", name, e, tol_bwd);
        for (int64_t j = 0; j < numel; j++)
            sumsq += (double)grads[t->offset + j] * grads[t->offset + j];
        free(exp);
    }
    fprintf(stderr, "  gradients: worst tensor's relative error %.3g (tolerance %.3g)\n", worst, tol_bwd);
    float *norm = gfx_load(f, "grad_global_norm", NULL);
    if (norm)
        CHECK(fabs(sqrt(sumsq) - norm[0]) <= tol_bwd * norm[0], "global norm %.6g vs %.6g", sqrt(sumsq), norm[0]);
    free(norm);
    free(grads);
}

/* AdamW from init.* for 3 steps: the loss before each step against the reference's. */
static void check_trajectory(gfx *f, double tol_fwd)
{
    ddp_err err = {0};
    CHECK(gfx_upload_params(f, "init") == 0, "reloading init.*");
    optimizer *o = gfx_make_adamw(f, 0.0);
    float *losses = gfx_load(f, "adamw.losses", NULL);
    CHECK(o && losses, "optimizer and adamw.losses");
    for (int step = 0; o && losses && step < 3; step++) {
        model_batch b = gfx_batch(f);
        zero_stats(f);
        CHECK(f->m->ops->forward_backward(f->m, &b, 1.0f / (float)(f->B * f->T), false, NULL, NULL, f->stats, &err) ==
                  0, "step %d: %s", step, err.msg);
        double e = fabs(mean_loss(f) - losses[step]) / losses[step];
        CHECK(e <= tol_fwd, "adamw step %d: loss %.6f vs %.6f (relative %.3g > %.3g)", step, mean_loss(f),
              losses[step], e, tol_fwd);
        CHECK(optim_step(o, f->m->params, f->m->grads, 1e-3, NULL, &err) == 0, "%s", err.msg);
        CHECK(model_params_changed(f->m, 1, (uint64_t)step + 1, &err) == 0, "%s", err.msg);
    }
    free(losses);
    optim_destroy(o);
}

/* The copy's bits follow (seed, step): the same key twice gives the same copy (a resume), another
 * step gives another one. */
static void check_weight_copy(gfx *f)
{
    model *m = f->m;
    ddp_err err = {0};
    float *logits_a = NULL, *logits_b = NULL, *logits_c = NULL;
    model_batch b = gfx_batch(f);
    const uint64_t keys[3][2] = {{7, 11}, {7, 12}, {7, 11}};
    float **outs[3] = {&logits_a, &logits_b, &logits_c};
    CHECK(gfx_upload_params(f, "init") == 0, "reloading init.*");
    for (int k = 0; k < 3; k++) {
        CHECK(model_params_changed(m, keys[k][0], keys[k][1], &err) == 0, "%s", err.msg);
        zero_stats(f);
        CHECK(m->ops->evaluate(m, &b, f->stats, &err) == 0, "%s", err.msg);
        *outs[k] = download_logits(f);
    }
    size_t count = (size_t)(f->B * f->T * f->shape.vocab_size);
    CHECK(memcmp(logits_a, logits_c, count * 4) == 0, "the same (seed, step) gave different logits");
    CHECK(memcmp(logits_a, logits_b, count * 4) != 0, "another step gave the same weight copy");
    free(logits_a);
    free(logits_b);
    free(logits_c);
}

static void check_cpu_refuses(gfx *f)
{
    device *cpu = NULL;
    model *m = NULL;
    ddp_err err = {0};
    CHECK(device_cpu_create(&cpu, &err) == 0, "%s", err.msg);
    sample_layout data = {.input = {SAMPLE_I32, f->T}, .target = {SAMPLE_I32, f->T}, .n_classes = f->shape.vocab_size};
    int rc = cpu ? gpt2_create(&f->shape, &(lm_run){.compute = TENSOR_BF16}, cpu, &data, 1, MODEL_BUFFERS_WHOLE, &m, &err) : 0;
    if (!rc && m) { /* building may succeed; computing must not */
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

int main(void)
{
    gfx f;
    device *d = NULL;
    ddp_err err = {0};
    const device_opts gpu_opts = {.kind = DEVICE_CUDA}; /* no TF32 */
    CHECK(device_cuda_create(0, &gpu_opts, &d, &err) == 0, "cuda device: %s", err.msg);
    if (!d)
        return check_done("test_gpt_bf16");
    int rc = gfx_setup(&f, d, TENSOR_BF16);
    CHECK(rc == 0, "fixture setup");
    if (!rc) {
        double fwd = fwd_error(f.shape.n_layer);
        fprintf(stderr, "gpt-reference L=%lld C=%lld T=%lld V=%lld B=%lld in bf16 on %s:\n",
                (long long)f.shape.n_layer, (long long)f.shape.n_embd, (long long)f.T, (long long)f.shape.vocab_size,
                (long long)f.B, d->name);
        check_forward_backward(&f, GAIN * fwd, GAIN * sqrt(2.0) * fwd);
        check_trajectory(&f, GAIN * fwd);
        check_weight_copy(&f);
        check_cpu_refuses(&f);
    }
    gfx_teardown(&f);
    d->ops->destroy(d);
    return check_done("test_gpt_bf16");
}
