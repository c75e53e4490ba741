/* test_mlp.c — the MLP against PyTorch (fixtures), against finite differences, and against its
 * own contract: its self-description (io, description text, the data it refuses), tensor layout,
 * grad_ready order and timing, gradient accumulation, the uint8 input path, evaluation, and
 * initialisation. Runs on the CPU device. */
#include <math.h>
#include <stdlib.h>

#include "runtime/base/rng.h"
#include "tests/models/mlp_fixture.h"

/* Fixture tolerances: references are float64 results rounded to float32. */

/* ---- a tiny MLP for the contract tests -------------------------------------------------------- */

typedef struct tiny {
    device *dev;
    model *m;
    float *x, *stats;
    int32_t *y;
    int64_t rows;
} tiny;

/* The 7-6-5-4 MLP's options and data: u8 x 7 -> i32 x 1 class id in [0, 4). */
static model_opts tiny_opts(act_kind act)
{
    return (model_opts){.kind = MODEL_MLP, .mlp = {.n_hidden = 2, .hidden = {6, 5}, .activation = act},
                        .compute = TENSOR_F32};
}

static const sample_layout tiny_data = {.input = {SAMPLE_U8, 7}, .target = {SAMPLE_I32, 1}, .n_classes = 4};

static void tiny_setup(tiny *t, act_kind act, int64_t rows, uint64_t seed)
{
    ddp_err err = {0};
    model_opts opts = tiny_opts(act);
    t->rows = rows;
    int rc = device_cpu_create(&t->dev, &err);
    if (!rc)
        rc = model_create(&opts, t->dev, &tiny_data, rows, MODEL_BUFFERS_WHOLE, &t->m, &err);
    if (!rc)
        rc = model_init_params(t->m, seed, &err);
    CHECK(rc == 0, "tiny setup: %s", err.msg);
    float x[64 * 7];
    int32_t y[64];
    rng r;
    rng_seed(&r, seed, RNG_SYNTHETIC);
    for (int64_t i = 0; i < rows * 7; i++)
        x[i] = rng_uniform(&r, -2.0f, 2.0f);
    for (int64_t i = 0; i < rows; i++)
        y[i] = (int32_t)rng_below(&r, 4);
    float zero[2] = {0, 0};
    t->x = fx_device_copy(t->dev, x, sizeof(float) * rows * 7);
    t->y = fx_device_copy(t->dev, y, sizeof(int32_t) * rows);
    t->stats = fx_device_copy(t->dev, zero, sizeof zero);
}

static void tiny_teardown(tiny *t)
{
    t->dev->ops->free(t->dev, t->x);
    t->dev->ops->free(t->dev, t->y);
    t->dev->ops->free(t->dev, t->stats);
    t->m->ops->destroy(t->m);
    t->dev->ops->destroy(t->dev);
}

/* Summed loss over the rows at the current parameters (grads are overwritten). */
static double tiny_loss(tiny *t)
{
    float stats[2] = {0, 0};
    t->dev->ops->upload(t->dev, t->stats, stats, sizeof stats, NULL);
    mlp_forward_backward_f32(t->m, t->x, t->y, t->rows, 1.0f, false, NULL, NULL, t->stats, NULL);
    t->dev->ops->download(t->dev, stats, t->stats, sizeof stats, NULL);
    return stats[0];
}

/* The signs of every hidden pre-activation (rows x units, in order) at the current parameters,
 * from a forward pass on the host over the tensor table (fc{l}.weight [out, in], fc{l}.bias);
 * returns their count. */
static int relu_signs(const tiny *t, uint8_t *signs)
{
    const model *m = t->m;
    const float *p = m->params;
    int n = 0, layers = m->n_tensors / 2;
    for (int64_t r = 0; r < t->rows; r++) {
        double a[64], z[64];
        int width = 7;
        for (int i = 0; i < width; i++)
            a[i] = t->x[r * 7 + i];
        for (int l = 0; l < layers - 1; l++) {
            const param_tensor *w = &m->tensors[2 * l], *b = &m->tensors[2 * l + 1];
            int out = (int)w->shape[0];
            for (int o = 0; o < out; o++) {
                z[o] = p[b->offset + (size_t)o];
                for (int i = 0; i < width; i++)
                    z[o] += (double)p[w->offset + (size_t)o * (size_t)width + (size_t)i] * a[i];
                signs[n++] = z[o] > 0;
            }
            for (int o = 0; o < out; o++)
                a[o] = z[o] > 0 ? z[o] : 0;
            width = out;
        }
    }
    return n;
}

/* Central differences on every parameter of a 7-6-5-4 MLP (grad_scale 1: d(summed loss)). Under
 * ReLU, a parameter whose +-eps moves a hidden pre-activation across zero is skipped: that
 * difference spans the kink and measures no derivative (at most a third of a tensor's may be). */
static void test_finite_differences(act_kind act)
{
    tiny t;
    tiny_setup(&t, act, 5, 11);
    model *m = t.m;
    size_t n = m->n_params;
    float *p = m->params, *analytic = malloc(n * 4);
    tiny_loss(&t);
    memcpy(analytic, m->grads, n * 4);
    /* ReLU's network is piecewise linear, so a smaller step costs no curvature and spans fewer kinks;
     * the loss's float rounding (a few 1e-7 of a loss sum near 7) over 2 eps stays under 1e-3 */
    const float eps = act == ACT_RELU ? 2e-3f : 1e-2f;
    for (int ti = 0; ti < m->n_tensors; ti++) {
        const param_tensor *pt = &m->tensors[ti];
        int bad = 0, kinks = 0;
        double worst = 0;
        uint8_t base[64 * 11], up_signs[64 * 11], down_signs[64 * 11];
        int n_signs = relu_signs(&t, base);
        for (size_t i = pt->offset; i < pt->offset + pt->numel; i++) {
            float saved = p[i];
            p[i] = saved + eps;
            double up = tiny_loss(&t);
            relu_signs(&t, up_signs);
            p[i] = saved - eps;
            double down = tiny_loss(&t);
            relu_signs(&t, down_signs);
            p[i] = saved;
            if (act == ACT_RELU && (memcmp(up_signs, base, (size_t)n_signs) || memcmp(down_signs, base, (size_t)n_signs))) {
                kinks++;
                continue;
            }
            double fd = (up - down) / (2.0 * (double)eps), err = fabs(fd - analytic[i]);
            worst = err > worst ? err : worst;
            /* float loss rounding / (2 eps) and O(eps^2) curvature bound the difference */
            if (err > 2e-3 + 2e-2 * fabs(fd))
                bad++;
        }
        CHECK(bad == 0, "%s %s: %d of %zu gradients differ from central differences (worst %.3g)",
              act == ACT_RELU ? "relu" : "gelu", pt->name, bad, pt->numel, worst);
        CHECK((size_t)kinks * 3 <= pt->numel, "%s %s: %d of %zu differences span a ReLU kink",
              act == ACT_RELU ? "relu" : "gelu", pt->name, kinks, pt->numel);
        fprintf(stderr, "  %s %s: %zu checked, %d spanning a kink\n", act == ACT_RELU ? "relu" : "gelu", pt->name,
                pt->numel - (size_t)kinks, kinks);
    }
    free(analytic);
    tiny_teardown(&t);
}

static void test_layout(void)
{
    tiny t;
    tiny_setup(&t, ACT_RELU, 3, 1);
    model *m = t.m;
    static const char *names[] = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias"};
    static const int64_t rows[] = {6, 6, 5, 5, 4, 4}, cols[] = {7, 0, 6, 0, 5, 0};
    CHECK_EQ_INT(m->n_tensors, 6);
    size_t offset = 0;
    for (int i = 0; i < 6 && i < m->n_tensors; i++) {
        const param_tensor *pt = &m->tensors[i];
        CHECK(!strcmp(pt->name, names[i]), "tensor %d is %s, expected %s", i, pt->name, names[i]);
        CHECK_EQ_INT(pt->offset, offset);
        CHECK_EQ_INT(pt->shape[0], rows[i]);
        CHECK_EQ_INT(pt->ndim, cols[i] ? 2 : 1);
        if (cols[i])
            CHECK_EQ_INT(pt->shape[1], cols[i]);
        CHECK_EQ_INT(pt->numel, (size_t)(rows[i] * (cols[i] ? cols[i] : 1)));
        offset += pt->numel;
    }
    CHECK_EQ_INT(m->n_params, offset);
    CHECK(model_find_tensor(m, "fc2.bias") == &m->tensors[3], "model_find_tensor(fc2.bias)");
    CHECK(model_find_tensor(m, "fc4.weight") == NULL, "model_find_tensor of a missing name");
    ddp_err err = {0};
    CHECK(mlp_forward_backward_f32(m, t.x, t.y, 4, 1.0f, false, NULL, NULL, t.stats, &err) != 0,
          "4 rows accepted by a model built for 3");
    CHECK_STR_CONTAINS(err.msg, "rows");
    tiny_teardown(&t);
}

typedef struct ready_log {
    model *m;
    int n;
    size_t offset[16], count[16];
    float *snapshot; /* grads as they were when each range was reported */
} ready_log;

static void on_ready(void *ctx, size_t offset, size_t count)
{
    ready_log *log = ctx;
    if (log->n < 16) {
        log->offset[log->n] = offset;
        log->count[log->n] = count;
    }
    log->n++;
    memcpy(log->snapshot + offset, log->m->grads + offset, count * 4);
}

/* Ranges arrive last layer first, tile [0, n_params) exactly, match each layer's [weight, bias],
 * and hold final values when reported (grads start as NaN so an early report would show). */
static void test_grad_ready(void)
{
    tiny t;
    tiny_setup(&t, ACT_GELU, 5, 3);
    model *m = t.m;
    ready_log log = {.m = m, .snapshot = malloc(m->n_params * 4)};
    m->dev->ops->fill(m->dev, TENSOR_F32, m->grads, m->n_params, NAN, NULL);
    m->dev->ops->fill(m->dev, TENSOR_F32, log.snapshot, m->n_params, -1.0f, NULL);
    ddp_err err = {0};
    int rc = mlp_forward_backward_f32(m, t.x, t.y, 5, 0.2f, false, on_ready, &log, t.stats, &err);
    CHECK(rc == 0, "forward_backward: %s", err.msg);
    CHECK_EQ_INT(log.n, 3);
    size_t end = m->n_params;
    for (int i = 0; i < log.n && i < 3; i++) {
        CHECK(log.offset[i] + log.count[i] == end, "range %d [%zu,+%zu) does not end where the previous began (%zu)",
              i, log.offset[i], log.count[i], end);
        const param_tensor *w = &m->tensors[2 * (2 - i)], *b = &m->tensors[2 * (2 - i) + 1];
        CHECK(log.offset[i] == w->offset && log.count[i] == w->numel + b->numel, "range %d is not %s+%s", i, w->name,
              b->name);
        end = log.offset[i];
    }
    CHECK_EQ_INT(end, 0);
    CHECK(memcmp(log.snapshot, m->grads, m->n_params * 4) == 0, "a range changed after it was reported final");
    free(log.snapshot);
    tiny_teardown(&t);
}

/* accumulate=true adds: two identical passes give twice the gradient and twice the stats. */
static void test_accumulate(void)
{
    tiny t;
    tiny_setup(&t, ACT_RELU, 4, 5);
    model *m = t.m;
    size_t n = m->n_params;
    float *once = malloc(n * 4), stats[2];
    m->dev->ops->fill(m->dev, TENSOR_F32, m->grads, n, 123.0f, NULL);
    mlp_forward_backward_f32(m, t.x, t.y, 4, 0.25f, false, NULL, NULL, t.stats, NULL);
    memcpy(once, m->grads, n * 4);
    mlp_forward_backward_f32(m, t.x, t.y, 4, 0.25f, true, NULL, NULL, t.stats, NULL);
    int bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += fabsf(m->grads[i] - 2.0f * once[i]) > 1e-6f * fabsf(once[i]) + 1e-9f;
    CHECK(bad == 0, "%d of %zu accumulated gradients are not 2x a single pass", bad, n);
    m->dev->ops->download(m->dev, stats, t.stats, sizeof stats, NULL);
    double single = tiny_loss(&t);
    CHECK_CLOSE(stats[0], 2.0 * single, 1e-6, 0);
    free(once);
    tiny_teardown(&t);
}

/* The model_batch path converts uint8 with Fashion-MNIST's mean/std; evaluate matches forward. */
static void test_uint8_path_and_evaluate(void)
{
    tiny t;
    tiny_setup(&t, ACT_GELU, 6, 9);
    model *m = t.m;
    device *d = t.dev;
    uint8_t px[6 * 7];
    float xf[6 * 7];
    for (int i = 0; i < 6 * 7; i++) {
        px[i] = (uint8_t)((i * 37 + 11) % 256);
        xf[i] = (float)(((double)px[i] / 255.0 - 0.2860) / 0.3530);
    }
    uint8_t *dpx = fx_device_copy(d, px, sizeof px);
    float *dxf = fx_device_copy(d, xf, sizeof xf);
    float s_u8[2] = {0, 0}, s_f32[2] = {0, 0}, s_eval[2] = {0, 0};
    size_t n = m->n_params;
    float *g_f32 = malloc(n * 4), logits_f32[6 * 4], logits_u8[6 * 4];
    d->ops->upload(d, t.stats, s_f32, sizeof s_f32, NULL);
    mlp_forward_backward_f32(m, dxf, t.y, 6, 1.0f, false, NULL, NULL, t.stats, NULL);
    d->ops->download(d, s_f32, t.stats, sizeof s_f32, NULL);
    d->ops->download(d, logits_f32, mlp_logits(m), sizeof logits_f32, NULL);
    memcpy(g_f32, m->grads, n * 4);

    model_batch b = {.inputs = dpx, .targets = t.y, .rows = 6};
    d->ops->upload(d, t.stats, s_u8, sizeof s_u8, NULL);
    ddp_err err = {0};
    CHECK(m->ops->forward_backward(m, &b, 1.0f, false, NULL, NULL, t.stats, &err) == 0, "%s", err.msg);
    d->ops->download(d, s_u8, t.stats, sizeof s_u8, NULL);
    d->ops->download(d, logits_u8, mlp_logits(m), sizeof logits_u8, NULL);
    fx_compare("uint8 path logits", logits_u8, logits_f32, 6 * 4, 1e-5, 1e-6);
    fx_compare("uint8 path grads", m->grads, g_f32, n, 1e-4, 1e-6);
    CHECK_CLOSE(s_u8[0], s_f32[0], 1e-5, 0);

    d->ops->fill(d, TENSOR_F32, m->grads, n, 7.0f, NULL);
    d->ops->upload(d, t.stats, s_eval, sizeof s_eval, NULL);
    CHECK(m->ops->evaluate(m, &b, t.stats, &err) == 0, "%s", err.msg);
    d->ops->download(d, s_eval, t.stats, sizeof s_eval, NULL);
    CHECK_CLOSE(s_eval[0], s_u8[0], 1e-6, 0);
    CHECK_EQ_INT(s_eval[1], s_u8[1]);
    CHECK(m->grads[0] == 7.0f && m->grads[n - 1] == 7.0f, "evaluate wrote gradients");
    d->ops->free(d, dpx);
    d->ops->free(d, dxf);
    free(g_f32);
    tiny_teardown(&t);
}

/* The model describes what it takes (the data's layout), that it is a classifier, and its shape
 * as the text checkpoints record; data it cannot take is refused naming what the data is. */
static void test_self_description(void)
{
    tiny t;
    tiny_setup(&t, ACT_GELU, 3, 1);
    const model_io *io = &t.m->io;
    CHECK(io->sample.input.dtype == SAMPLE_U8 && io->sample.input.count == 7, "input u8 x 7");
    CHECK(io->sample.target.dtype == SAMPLE_I32 && io->sample.target.count == 1, "target i32 x 1");
    CHECK_EQ_INT(io->sample.n_classes, 4);
    CHECK(io->classifier && !io->language_model, "a classifier, not a language model");
    CHECK(!strcmp(t.m->description, "mlp hidden=[6,5] activation=gelu in=7 classes=4"), "description \"%s\"",
          t.m->description);
    tiny_teardown(&t);

    model_opts opts = tiny_opts(ACT_RELU);
    sample_layout tokens = {.input = {SAMPLE_I32, 64}, .target = {SAMPLE_I32, 64}, .n_classes = 50257};
    device *d = NULL;
    model *m = NULL;
    ddp_err err = {0};
    device_cpu_create(&d, NULL);
    CHECK_EQ_INT(model_create(&opts, d, &tokens, 4, MODEL_BUFFERS_WHOLE, &m, &err), DDP_EUSAGE);
    CHECK(m == NULL, "a refused model was returned");
    CHECK_STR_CONTAINS(err.msg, "the data has i32 x 64 -> i32 x 64 in [0, 50257)");
    d->ops->destroy(d);
}

/* PyTorch Linear init: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weight and bias; reproducible. */
static void test_init(void)
{
    tiny a, b;
    tiny_setup(&a, ACT_RELU, 2, 42);
    tiny_setup(&b, ACT_RELU, 2, 42);
    CHECK(memcmp(a.m->params, b.m->params, a.m->n_params * 4) == 0, "same seed gave different parameters");
    model_init_params(b.m, 43, NULL);
    CHECK(memcmp(a.m->params, b.m->params, a.m->n_params * 4) != 0, "different seeds gave the same parameters");
    static const double fan_in[] = {7, 7, 6, 6, 5, 5};
    for (int i = 0; i < a.m->n_tensors; i++) {
        const param_tensor *pt = &a.m->tensors[i];
        double bound = 1.0 / sqrt(fan_in[i]), lo = 1, hi = -1;
        for (size_t j = 0; j < pt->numel; j++) {
            double v = a.m->params[pt->offset + j] / bound;
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
        }
        CHECK(lo >= -1.0 && hi <= 1.0, "%s outside +-1/sqrt(%g): [%g, %g] x bound", pt->name, fan_in[i], lo, hi);
        if (pt->numel >= 20)
            CHECK(lo < -0.6 && hi > 0.6, "%s does not fill its range: [%g, %g] x bound", pt->name, lo, hi);
    }
    tiny_teardown(&a);
    tiny_teardown(&b);
}

int main(void)
{
    fx_check_forward_backward(DEVICE_CPU, ACT_RELU, "relu");
    fx_check_forward_backward(DEVICE_CPU, ACT_GELU, "gelu");
    test_finite_differences(ACT_RELU);
    test_finite_differences(ACT_GELU);
    test_self_description();
    test_layout();
    test_grad_ready();
    test_accumulate();
    test_uint8_path_and_evaluate();
    test_init();
    return check_done("test_mlp");
}
