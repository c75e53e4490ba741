/* test_optim.c — optimizers, schedules and clipping: 3-step PyTorch trajectories (fixtures) for
 * SGD+Nesterov+weight decay, plain SGD, AdamW and AdamW with clipping; hand-computed updates for
 * what the fixtures do not cover (heavy-ball momentum, a gradient scale); learning-rate schedule
 * values at their key points; clip scale semantics through optim_grad_norm; weight-decay exempt
 * spans updated in one call with the bits of one update per run. Runs on the CPU
 * device (the device ops behind clipping, on CPU and CUDA: tests/runtime/device/test_grad_clip.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/rng.h"
#include "runtime/optim/optim.h"
#include "tests/models/mlp_fixture.h"

/* A device float holding v (the gradient scale optim_step reads). */
static float *device_scalar(device *d, float v)
{
    float *p = NULL;
    CHECK(d->ops->alloc(d, sizeof *p, (void **)&p, NULL) == 0 && d->ops->fill(d, TENSOR_F32, p, 1, v, NULL) == 0,
          "device scalar");
    return p;
}

/* Heavy-ball momentum (no Nesterov) with weight decay and a gradient scale, against the formulas
 * in double: buf1 = g1', buf2 = m*buf1 + g2', p -= lr*buf, with g' = s*g + wd*p. */
static void test_sgd_by_hand(void)
{
    device *d;
    device_cpu_create(&d, NULL);
    optim_opts opts = fx_optim_opts(OPT_SGD, 0.5, 0.8, false, 0.1, 0);
    optimizer *o;
    CHECK(optim_create(&opts, d, 3, &o, NULL) == 0, "optim_create");
    float p[3] = {1.0f, -2.0f, 0.25f}, g[3] = {0.5f, 1.5f, -4.0f};
    double pd[3] = {1.0, -2.0, 0.25}, buf[3];
    for (int step = 0; step < 2; step++) {
        float s = step == 0 ? 0.5f : 2.0f, *s_dev = device_scalar(d, s);
        for (int i = 0; i < 3; i++) {
            double gi = s * g[i] + 0.1 * pd[i];
            buf[i] = step == 0 ? gi : 0.8 * buf[i] + gi;
            pd[i] -= 0.5 * buf[i];
        }
        CHECK(optim_step(o, p, g, 0.5, s_dev, NULL) == 0, "sgd step %d", step);
        d->ops->free(d, s_dev);
    }
    for (int i = 0; i < 3; i++) {
        CHECK_CLOSE(p[i], pd[i], 1e-6, 1e-7);
        CHECK_CLOSE(o->momentum_buffer[i], buf[i], 1e-6, 1e-7);
    }
    optim_destroy(o);
    d->ops->destroy(d);
}

/* AdamW step 1 moves every parameter by lr (times sign) after decay: m̂/sqrt(v̂) = sign(g). */
static void test_adamw_first_step(void)
{
    device *d;
    device_cpu_create(&d, NULL);
    optim_opts opts = fx_optim_opts(OPT_ADAMW, 0.01, 0, false, 0.5, 0);
    optimizer *o;
    CHECK(optim_create(&opts, d, 2, &o, NULL) == 0, "optim_create");
    float p[2] = {1.0f, 2.0f}, g[2] = {3.0f, -0.5f}, *half = device_scalar(d, 0.5f);
    CHECK(optim_step(o, p, g, 0.01, half, NULL) == 0, "adamw step");
    d->ops->free(d, half);
    CHECK_CLOSE(p[0], 1.0 * (1 - 0.01 * 0.5) - 0.01, 1e-6, 0);
    CHECK_CLOSE(p[1], 2.0 * (1 - 0.01 * 0.5) + 0.01, 1e-6, 0);
    CHECK_CLOSE(o->exp_avg[0], 0.1 * 1.5, 1e-6, 0);     /* m = (1-b1) * scaled g */
    /* v = (1-b2) * scaled g^2, 1-b2 from the configured 0.999, as PyTorch's value=1-beta2 (from
     * float32(0.999) it would be 1.3e-5 off): float32 roundings of 1-b2 and of the product */
    CHECK_CLOSE(o->exp_avg_sq[1], 0.001 * 0.0625, 3 * 0x1p-24, 0);
    CHECK_EQ_INT(o->step, 1);
    optim_destroy(o);
    d->ops->destroy(d);
}

/* AdamW's scalars at step 10^4 are PyTorch's: 1 - beta and the bias corrections from the betas as
 * configured, each rounded once to float32; a beta2 whose float32 is 1 still steps. */
static void test_adamw_args(void)
{
    const double b1 = 0.9, b2 = 0.999, lr = 3e-4, wd = 0.1;
    const int64_t t = 10000;
    adamw_args a = optim_adamw_args(lr, b1, b2, 1e-8, wd, t);
    CHECK(a.one_minus_beta2 == (float)(1.0 - b2) && a.one_minus_beta1 == (float)(1.0 - b1),
          "1 - beta2 %.9g, expected %.9g", a.one_minus_beta2, (float)(1.0 - b2));
    CHECK(a.bias2_sqrt == (float)sqrt(1.0 - pow(b2, (double)t)), "bias2_sqrt %.9g", a.bias2_sqrt);
    CHECK(a.step_size == (float)(lr / (1.0 - pow(b1, (double)t))) && a.decay == (float)(1.0 - lr * wd),
          "step_size %.9g, decay %.9g", a.step_size, a.decay);
    a = optim_adamw_args(lr, b1, 0.99999999, 1e-8, wd, 1);
    CHECK(a.bias2_sqrt > 0, "beta2 0.99999999 (float32: 1): bias2_sqrt %.9g", a.bias2_sqrt);
}

/* optim_set_no_decay's spans (adjacent ones, an empty one, both ends) go to a table the one update
 * per part reads: its bits must be those of one update per run of decayed or exempt elements, the
 * exempt runs with weight decay 0, as PyTorch's param groups step them. AdamW and SGD with momentum
 * and Nesterov, over the whole buffer and over a ZeRO part ([200, 900), its state at 0), 2 steps. */
static void test_exempt_spans(void)
{
    enum { N = 1000, STEPS = 2 };
    const optim_span spans[] = {{0, 3}, {3, 7}, {100, 0}, {500, 277}, {990, 10}};
    const struct { size_t lo, hi; bool exempt; } runs[] = {
        {0, 10, true}, {10, 500, false}, {500, 777, true}, {777, 990, false}, {990, N, true}};
    device *d;
    device_cpu_create(&d, NULL);
    rng r;
    rng_seed(&r, 11, 3);
    for (int kind = 0; kind < 2; kind++)
        for (int zero = 0; zero < 2; zero++) {
            optim_opts opts = kind ? fx_optim_opts(OPT_SGD, 0.1, 0.9, true, 0.05, 0)
                                  : fx_optim_opts(OPT_ADAMW, 0.01, 0, false, 0.05, 0);
            const optim_part part = zero ? (optim_part){200, 0, 700} : (optim_part){0, 0, N};
            optimizer *o;
            CHECK(optim_create_parts(&opts, d, N, &part, 1, part.count, &o, NULL) == 0, "optim_create_parts");
            CHECK(optim_set_no_decay(o, spans, 5, NULL) == 0, "optim_set_no_decay");
            static float p[N], g[N], p_ref[N], m_ref[N], v_ref[N];
            for (size_t i = 0; i < N; i++)
                p[i] = p_ref[i] = rng_uniform(&r, -1.0f, 1.0f), m_ref[i] = v_ref[i] = 0.0f;
            for (int step = 0; step < STEPS; step++) {
                for (size_t i = 0; i < N; i++)
                    g[i] = rng_uniform(&r, -1.0f, 1.0f);
                CHECK(optim_step(o, p, g, 0.01, NULL, NULL) == 0, "optim_step");
                for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
                    const size_t part_end = part.param_offset + part.count;
                    size_t lo = runs[k].lo > part.param_offset ? runs[k].lo : part.param_offset;
                    size_t hi = runs[k].hi < part_end ? runs[k].hi : part_end;
                    double wd = runs[k].exempt ? 0.0 : 0.05;
                    float *m = m_ref + (lo - part.param_offset);
                    if (hi <= lo)
                        continue;
                    if (kind) {
                        sgd_args a = {.lr = 0.01f, .momentum = 0.9f, .weight_decay = (float)wd, .nesterov = true,
                                      .first_step = step == 0};
                        CHECK(d->ops->sgd_step(d, p_ref + lo, g + lo, NULL, m, hi - lo, &a, NULL) == 0, "sgd_step");
                    } else {
                        adamw_args a = optim_adamw_args(0.01, 0.9, 0.999, 1e-8, wd, step + 1);
                        CHECK(d->ops->adamw_step(d, p_ref + lo, g + lo, NULL, m, v_ref + (lo - part.param_offset),
                                                 hi - lo, &a, NULL) == 0, "adamw_step");
                    }
                }
            }
            const float *state = kind ? o->momentum_buffer : o->exp_avg;
            CHECK(memcmp(p, p_ref, sizeof p) == 0, "%s%s: parameters differ from one update per run",
                  kind ? "sgd" : "adamw", zero ? " (part)" : "");
            CHECK(memcmp(state, m_ref, part.count * sizeof *state) == 0, "%s%s: state differs from one update per run",
                  kind ? "sgd" : "adamw", zero ? " (part)" : "");
            if (!kind)
                CHECK(memcmp(o->exp_avg_sq, v_ref, part.count * sizeof *v_ref) == 0, "adamw%s: v differs",
                      zero ? " (part)" : "");
            optim_destroy(o);
        }
    d->ops->destroy(d);
}

static void test_schedules(void)
{
    device *d;
    device_cpu_create(&d, NULL);
    optim_opts opts = fx_optim_opts(OPT_SGD, 1.0, 0, false, 0, 0);
    opts.schedule.kind = SCHED_COSINE;
    opts.schedule.warmup_steps = 10;
    opts.schedule.min_lr = 0.1;
    optimizer *o;
    CHECK(optim_create(&opts, d, 1, &o, NULL) == 0, "optim_create");
    /* warmup: lr/10, 2lr/10, ..., lr; cosine over steps 10..110 from lr to min_lr */
    CHECK_CLOSE(optim_lr_at(o, 0, 110), 0.1, 1e-12, 0);
    CHECK_CLOSE(optim_lr_at(o, 4, 110), 0.5, 1e-12, 0);
    CHECK_CLOSE(optim_lr_at(o, 9, 110), 1.0, 1e-12, 0);
    CHECK_CLOSE(optim_lr_at(o, 10, 110), 1.0, 1e-12, 0);
    CHECK_CLOSE(optim_lr_at(o, 35, 110), 0.1 + 0.45 * (1 + sqrt(0.5)), 1e-12, 0); /* a quarter: cos(pi/4) */
    CHECK_CLOSE(optim_lr_at(o, 60, 110), 0.55, 1e-12, 0);
    CHECK_CLOSE(optim_lr_at(o, 110, 110), 0.1, 1e-12, 0);
    CHECK_CLOSE(optim_lr_at(o, 500, 110), 0.1, 1e-12, 0);
    o->warmup_steps = 0;
    CHECK_CLOSE(optim_lr_at(o, 0, 100), 1.0, 1e-12, 0);
    o->sched = SCHED_CONSTANT;
    o->warmup_steps = 4;
    CHECK_CLOSE(optim_lr_at(o, 0, 100), 0.25, 1e-12, 0);
    CHECK_CLOSE(optim_lr_at(o, 3, 100), 1.0, 1e-12, 0);
    CHECK_CLOSE(optim_lr_at(o, 99, 100), 1.0, 1e-12, 0);
    /* linear after 10 warm-up steps: a straight line from lr 1 at step 10 to min_lr 0.1 at 110 */
    o->sched = SCHED_LINEAR;
    o->warmup_steps = 10;
    CHECK_CLOSE(optim_lr_at(o, 9, 110), 1.0, 1e-12, 0);
    CHECK_CLOSE(optim_lr_at(o, 10, 110), 1.0, 1e-12, 0);
    CHECK_CLOSE(optim_lr_at(o, 35, 110), 1.0 - 0.9 * 0.25, 1e-12, 0);
    CHECK_CLOSE(optim_lr_at(o, 60, 110), 0.55, 1e-12, 0);
    CHECK_CLOSE(optim_lr_at(o, 109, 110), 0.1 + 0.9 * 0.01, 1e-12, 0);
    CHECK_CLOSE(optim_lr_at(o, 110, 110), 0.1, 1e-12, 0);
    CHECK_CLOSE(optim_lr_at(o, 500, 110), 0.1, 1e-12, 0);
    /* WSD, a quarter of the 100 steps after warm-up decaying: the peak exactly through step 85,
     * then a straight line to min_lr at 110 */
    o->sched = SCHED_WSD;
    o->decay_fraction = 0.25;
    CHECK_CLOSE(optim_lr_at(o, 4, 110), 0.5, 1e-12, 0);
    CHECK(optim_lr_at(o, 10, 110) == 1.0 && optim_lr_at(o, 60, 110) == 1.0 && optim_lr_at(o, 85, 110) == 1.0,
          "wsd: the peak itself while stable");
    CHECK_CLOSE(optim_lr_at(o, 86, 110), 1.0 - 0.9 / 25, 1e-12, 0);
    CHECK_CLOSE(optim_lr_at(o, 97, 110), 0.55 + 0.9 * 0.5 / 25, 1e-12, 0);
    CHECK_CLOSE(optim_lr_at(o, 110, 110), 0.1, 1e-12, 0);
    o->decay_fraction = 1.0; /* all of it: the linear schedule */
    CHECK_CLOSE(optim_lr_at(o, 35, 110), 1.0 - 0.9 * 0.25, 1e-12, 0);
    optim_destroy(o);
    d->ops->destroy(d);
}

/* clip_grad_norm_: scale = max_norm/(norm+1e-6) only when that is below 1; off when clip is 0
 * (no scale: optim_step uses the gradients as they are). The norm is read back only on request. */
static void test_clip(void)
{
    device *d;
    device_cpu_create(&d, NULL);
    float g[2] = {3.0f, 4.0f};
    double clips[] = {0.0, 10.0, 5.0, 2.5};
    double want[] = {1.0, 1.0, 5.0 / (5.0 + 1e-6), 2.5 / (5.0 + 1e-6)};
    for (int i = 0; i < 4; i++) {
        optim_opts opts = fx_optim_opts(OPT_SGD, 0.1, 0, false, 0, clips[i]);
        optimizer *o;
        double norm = -1;
        const float *scale = NULL;
        CHECK(optim_create(&opts, d, 2, &o, NULL) == 0, "optim_create");
        CHECK(optim_read_grad_norm(o, &norm, NULL) == 0 && norm == 0.0, "norm before any step: %g", norm);
        CHECK(optim_grad_norm(o, g, &scale, NULL) == 0, "optim_grad_norm");
        CHECK(optim_read_grad_norm(o, &norm, NULL) == 0, "optim_read_grad_norm");
        CHECK_CLOSE(norm, 5.0, 1e-15, 0);
        CHECK((scale == NULL) == (clips[i] == 0.0), "clip %g: scale %p", clips[i], (const void *)scale);
        float s = 1.0f;
        if (scale)
            CHECK(d->ops->download(d, &s, scale, sizeof s, NULL) == 0, "download scale");
        CHECK_CLOSE(s, want[i], 1e-7, 0);
        optim_destroy(o);
    }
    d->ops->destroy(d);
}

int main(void)
{
    fx_check_all_trajectories(DEVICE_CPU);
    test_sgd_by_hand();
    test_adamw_first_step();
    test_adamw_args();
    test_exempt_spans();
    test_schedules();
    test_clip();
    return check_done("test_optim");
}
