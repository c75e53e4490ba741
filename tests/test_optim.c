/* test_optim.c — optimizers, schedules and clipping: 3-step PyTorch trajectories (fixtures) for
 * SGD+Nesterov+weight decay, plain SGD, AdamW and AdamW with clipping; hand-computed updates for
 * what the fixtures do not cover (heavy-ball momentum, grad_scale); learning-rate schedule values
 * at their key points; clip scale semantics. Runs on the CPU device. */
#include <math.h>
#include <stdlib.h>

#include "../runtime/optim.h"
#include "mlp_fixture.h"

#define TRAJ_RTOL 1e-5
#define SGD_ATOL 1e-6 /* parameters are O(0.01..0.1); a floor for the ones near zero */
/* An AdamW update is lr·m̂/(sqrt(v̂)+eps): where |g| is near eps (fixture fc1.weight[412] has
 * g = -1.4e-9 from cancellation) float32 gradient rounding moves that step by a good fraction of
 * lr = 1e-3. 5e-6 (0.5% of lr) still catches any wrong formula, which shifts steps by O(lr). */
#define ADAMW_ATOL 5e-6

static config optim_config(cfg_opt_kind kind, double lr, double momentum, bool nesterov, double wd, double clip)
{
    config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.optimizer.kind = kind;
    cfg.optimizer.lr = lr;
    cfg.optimizer.momentum = momentum;
    cfg.optimizer.nesterov = nesterov;
    cfg.optimizer.weight_decay = wd;
    cfg.optimizer.beta1 = 0.9;
    cfg.optimizer.beta2 = 0.999;
    cfg.optimizer.eps = 1e-8;
    cfg.optimizer.grad_clip = clip;
    cfg.optimizer.schedule.kind = SCHED_CONSTANT;
    return cfg;
}

/* 3 steps on the fixture batch from relu.init, as the README describes. */
static void test_trajectory(const char *name, const config *cfg, double atol)
{
    fx_mlp fx;
    int rc = fx_setup(&fx, ACT_RELU, "relu.init");
    CHECK(rc == 0, "fixture setup for %s", name);
    if (rc)
        return;
    fprintf(stderr, "%s trajectory:\n", name);
    device *d = fx.dev;
    model *m = fx.m;
    optimizer *o = NULL;
    ddp_err err = {0};
    rc = optim_create(cfg, d, m->n_params, &o, &err);
    CHECK(rc == 0, "optim_create: %s", err.msg);
    if (rc) {
        fx_teardown(&fx);
        return;
    }
    float losses[3];
    for (int step = 0; step < 3; step++) {
        float stats[2] = {0, 0};
        d->ops->upload(d, fx.stats, stats, sizeof stats, NULL);
        rc = mlp_forward_backward_f32(m, fx.x, fx.labels, FX_BATCH, 1.0f / FX_BATCH, false, NULL, NULL, fx.stats, &err);
        d->ops->download(d, stats, fx.stats, sizeof stats, NULL);
        losses[step] = stats[0] / FX_BATCH;
        double norm;
        float scale;
        if (!rc)
            rc = optim_grad_norm(o, m->grads, &norm, &scale, &err);
        if (!rc)
            rc = optim_step(o, m->params, m->grads, optim_lr_at(o, step, 3), scale, &err);
        CHECK(rc == 0, "step %d: %s", step, err.msg);
    }
    CHECK_EQ_INT(o->step, 3);
    char key[64];
    snprintf(key, sizeof key, "%s.losses", name);
    float *exp_losses = fx_load(key, 3);
    CHECK(exp_losses != NULL, "fixture %s", key);
    if (exp_losses)
        fx_compare(key, losses, exp_losses, 3, TRAJ_RTOL, 0);
    snprintf(key, sizeof key, "%s.after3", name);
    fx_compare_params(&fx, m->params, key, TRAJ_RTOL, atol);
    free(exp_losses);
    optim_destroy(o);
    fx_teardown(&fx);
}

/* Heavy-ball momentum (no Nesterov) with weight decay and grad_scale, against the formulas in
 * double: buf1 = g1', buf2 = m*buf1 + g2', p -= lr*buf, with g' = s*g + wd*p. */
static void test_sgd_by_hand(void)
{
    device *d;
    device_cpu_create(&d, NULL);
    config cfg = optim_config(OPT_SGD, 0.5, 0.8, false, 0.1, 0);
    optimizer *o;
    CHECK(optim_create(&cfg, d, 3, &o, NULL) == 0, "optim_create");
    float p[3] = {1.0f, -2.0f, 0.25f}, g[3] = {0.5f, 1.5f, -4.0f};
    double pd[3] = {1.0, -2.0, 0.25}, buf[3];
    for (int step = 0; step < 2; step++) {
        float s = step == 0 ? 0.5f : 2.0f;
        for (int i = 0; i < 3; i++) {
            double gi = s * g[i] + 0.1 * pd[i];
            buf[i] = step == 0 ? gi : 0.8 * buf[i] + gi;
            pd[i] -= 0.5 * buf[i];
        }
        CHECK(optim_step(o, p, g, 0.5, s, NULL) == 0, "sgd step %d", step);
    }
    for (int i = 0; i < 3; i++) {
        CHECK_CLOSE(p[i], pd[i], 1e-6, 1e-7);
        CHECK_CLOSE(o->state0[i], buf[i], 1e-6, 1e-7);
    }
    optim_destroy(o);
    d->ops->destroy(d);
}

/* AdamW step 1 moves every parameter by lr (times sign) after decay: m̂/sqrt(v̂) = sign(g). */
static void test_adamw_first_step(void)
{
    device *d;
    device_cpu_create(&d, NULL);
    config cfg = optim_config(OPT_ADAMW, 0.01, 0, false, 0.5, 0);
    optimizer *o;
    CHECK(optim_create(&cfg, d, 2, &o, NULL) == 0, "optim_create");
    float p[2] = {1.0f, 2.0f}, g[2] = {3.0f, -0.5f};
    CHECK(optim_step(o, p, g, 0.01, 0.5f, NULL) == 0, "adamw step");
    CHECK_CLOSE(p[0], 1.0 * (1 - 0.01 * 0.5) - 0.01, 1e-6, 0);
    CHECK_CLOSE(p[1], 2.0 * (1 - 0.01 * 0.5) + 0.01, 1e-6, 0);
    CHECK_CLOSE(o->state0[0], 0.1 * 1.5, 1e-6, 0);      /* m = (1-b1) * scaled g */
    /* v = (1-b2) * scaled g^2; beta2 travels as float 0.999f, so 1-b2 is 1.3e-5 relative off
     * 0.001 (the bias correction uses the same b2, which cancels it in v̂) */
    CHECK_CLOSE(o->state1[1], 0.001 * 0.0625, 3e-5, 0);
    CHECK_EQ_INT(o->step, 1);
    optim_destroy(o);
    d->ops->destroy(d);
}

static void test_schedules(void)
{
    device *d;
    device_cpu_create(&d, NULL);
    config cfg = optim_config(OPT_SGD, 1.0, 0, false, 0, 0);
    cfg.optimizer.schedule.kind = SCHED_COSINE;
    cfg.optimizer.schedule.warmup_steps = 10;
    cfg.optimizer.schedule.min_lr = 0.1;
    optimizer *o;
    CHECK(optim_create(&cfg, d, 1, &o, NULL) == 0, "optim_create");
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
    optim_destroy(o);
    d->ops->destroy(d);
}

/* clip_grad_norm_: scale = max_norm/(norm+1e-6) only when that is below 1; off when clip is 0. */
static void test_clip(void)
{
    device *d;
    device_cpu_create(&d, NULL);
    float g[2] = {3.0f, 4.0f};
    double clips[] = {0.0, 10.0, 5.0, 2.5};
    double want[] = {1.0, 1.0, 5.0 / (5.0 + 1e-6), 2.5 / (5.0 + 1e-6)};
    for (int i = 0; i < 4; i++) {
        config cfg = optim_config(OPT_SGD, 0.1, 0, false, 0, clips[i]);
        optimizer *o;
        double norm = 0;
        float scale = 0;
        CHECK(optim_create(&cfg, d, 2, &o, NULL) == 0, "optim_create");
        CHECK(optim_grad_norm(o, g, &norm, &scale, NULL) == 0, "optim_grad_norm");
        CHECK_CLOSE(norm, 5.0, 1e-15, 0);
        CHECK_CLOSE(scale, want[i], 1e-7, 0);
        optim_destroy(o);
    }
    d->ops->destroy(d);
}

int main(void)
{
    config sgd = optim_config(OPT_SGD, 0.1, 0.9, true, 1e-4, 0);
    config sgd_plain = optim_config(OPT_SGD, 0.1, 0, false, 0, 0);
    config adamw = optim_config(OPT_ADAMW, 1e-3, 0, false, 0.01, 0);
    config adamw_clip = optim_config(OPT_ADAMW, 1e-3, 0, false, 0.01, 0.5);
    test_trajectory("sgd", &sgd, SGD_ATOL);
    test_trajectory("sgd_plain", &sgd_plain, SGD_ATOL);
    test_trajectory("adamw", &adamw, ADAMW_ATOL);
    test_trajectory("adamw_clip", &adamw_clip, ADAMW_ATOL);
    test_sgd_by_hand();
    test_adamw_first_step();
    test_schedules();
    test_clip();
    return check_done("test_optim");
}
