/* test_cuda_mlp.c — the PyTorch reference MLP (fixtures/mlp-reference) run through the CUDA
 * device: forward/backward for ReLU and GELU (logits, loss, gradient norm, every gradient) and the
 * four 3-step optimizer trajectories (SGD+Nesterov+wd, plain SGD, AdamW, AdamW with clipping).
 *
 * Same checks and tolerances as the CPU tests (test_mlp.c, test_optim.c), so the CUDA backend is
 * held to an outside reference, not only to the CPU backend. In the emulated build the kernels
 * run under DDP_CUDA_EMU_ORDER. */
#include <math.h>
#include <stdlib.h>

#include "../../runtime/optim.h"
#include "../mlp_fixture.h"

#define FX_RTOL 1e-5
#define FX_ATOL_LOGIT 1e-5
#define FX_ATOL_GRAD 1e-7
#define SGD_ATOL 1e-6
#define ADAMW_ATOL 5e-6 /* see test_optim.c: near-eps gradients move AdamW steps by a fraction of lr */

/* fx_setup with the CUDA device instead of the CPU one. */
static int fx_setup_cuda(fx_mlp *fx, act_kind act, const char *init_prefix)
{
    memset(fx, 0, sizeof *fx);
    ddp_err err = {0};
    config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.device = DEVICE_CUDA;
    cfg.model.kind = MODEL_MLP;
    cfg.model.n_hidden = 2;
    cfg.model.hidden[0] = 64;
    cfg.model.hidden[1] = 32;
    cfg.model.activation = act;
    if (device_cuda_create(0, &cfg, &fx->dev, &err) ||
        model_create(&cfg, fx->dev, FX_IN, FX_CLASSES, FX_BATCH, &fx->m, &err)) {
        fprintf(stderr, "cuda fixture setup: %s\n", err.msg);
        return 1;
    }
    float *x = fx_load("input", FX_BATCH * FX_IN);
    int32_t *y = fx_load("labels", FX_BATCH);
    float zero[2] = {0, 0};
    int rc = !x || !y || fx_load_params(fx->m, init_prefix, fx->m->params);
    if (!rc) {
        fx->x = fx_device_copy(fx->dev, x, sizeof(float) * FX_BATCH * FX_IN);
        fx->labels = fx_device_copy(fx->dev, y, sizeof(int32_t) * FX_BATCH);
        fx->stats = fx_device_copy(fx->dev, zero, sizeof zero);
        rc = !fx->x || !fx->labels || !fx->stats;
    }
    free(x);
    free(y);
    return rc;
}

static void test_forward_backward(act_kind act, const char *name)
{
    fx_mlp fx;
    int rc = fx_setup_cuda(&fx, act, act == ACT_RELU ? "relu.init" : "gelu.init");
    CHECK(rc == 0, "cuda fixture setup for %s", name);
    if (rc) {
        fx_teardown(&fx);
        return;
    }
    fprintf(stderr, "%s fixture on %s:\n", name, fx.dev->name);
    ddp_err err = {0};
    device *d = fx.dev;
    rc = mlp_forward_backward_f32(fx.m, fx.x, fx.labels, FX_BATCH, 1.0f / FX_BATCH, false, NULL, NULL, fx.stats, &err);
    CHECK(rc == 0, "forward_backward: %s", err.msg);
    float logits[FX_BATCH * FX_CLASSES], stats[2];
    CHECK(d->ops->download(d, logits, mlp_logits(fx.m), sizeof logits, &err) == 0, "%s", err.msg);
    CHECK(d->ops->download(d, stats, fx.stats, sizeof stats, &err) == 0, "%s", err.msg);
    char key[64];
    snprintf(key, sizeof key, "%s.logits", name);
    float *exp_logits = fx_load(key, FX_BATCH * FX_CLASSES);
    snprintf(key, sizeof key, "%s.loss", name);
    float *exp_loss = fx_load(key, 1);
    snprintf(key, sizeof key, "%s.grad_global_norm", name);
    float *exp_norm = fx_load(key, 1);
    CHECK(exp_logits && exp_loss && exp_norm, "fixtures for %s", name);
    if (exp_logits && exp_loss && exp_norm) {
        fx_compare("logits", logits, exp_logits, FX_BATCH * FX_CLASSES, FX_RTOL, FX_ATOL_LOGIT);
        float mean_loss = stats[0] / FX_BATCH;
        fx_compare("loss (stats[0] / rows)", &mean_loss, exp_loss, 1, FX_RTOL, 0);
        double sumsq = -1;
        CHECK(d->ops->sumsq(d, fx.m->grads, fx.m->n_params, &sumsq, &err) == 0, "%s", err.msg);
        float norm = (float)sqrt(sumsq);
        fx_compare("grad_global_norm", &norm, exp_norm, 1, FX_RTOL, 0);
    }
    snprintf(key, sizeof key, "%s.grad", name);
    fx_compare_params(&fx, fx.m->grads, key, FX_RTOL, FX_ATOL_GRAD);
    free(exp_logits);
    free(exp_loss);
    free(exp_norm);
    fx_teardown(&fx);
}

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

/* 3 steps on the fixture batch from relu.init (fixture README). */
static void test_trajectory(const char *name, const config *cfg, double atol)
{
    fx_mlp fx;
    int rc = fx_setup_cuda(&fx, ACT_RELU, "relu.init");
    CHECK(rc == 0, "cuda fixture setup for %s", name);
    if (rc) {
        fx_teardown(&fx);
        return;
    }
    fprintf(stderr, "%s trajectory:\n", name);
    device *d = fx.dev;
    model *m = fx.m;
    optimizer *o = NULL;
    ddp_err err = {0};
    rc = optim_create(cfg, d, m->n_params, &o, &err);
    CHECK(rc == 0, "optim_create: %s", err.msg);
    float losses[3] = {0, 0, 0};
    for (int step = 0; step < 3 && rc == 0; step++) {
        float stats[2] = {0, 0};
        rc = d->ops->upload(d, fx.stats, stats, sizeof stats, &err);
        if (!rc)
            rc = mlp_forward_backward_f32(m, fx.x, fx.labels, FX_BATCH, 1.0f / FX_BATCH, false, NULL, NULL, fx.stats,
                                          &err);
        if (!rc)
            rc = d->ops->download(d, stats, fx.stats, sizeof stats, &err);
        losses[step] = stats[0] / FX_BATCH;
        double norm;
        float scale;
        if (!rc)
            rc = optim_grad_norm(o, m->grads, &norm, &scale, &err);
        if (!rc)
            rc = optim_step(o, m->params, m->grads, optim_lr_at(o, step, 3), scale, &err);
        CHECK(rc == 0, "step %d: %s", step, err.msg);
    }
    char key[64];
    snprintf(key, sizeof key, "%s.losses", name);
    float *exp_losses = fx_load(key, 3);
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

int main(void)
{
    test_forward_backward(ACT_RELU, "relu");
    test_forward_backward(ACT_GELU, "gelu");
    config sgd = optim_config(OPT_SGD, 0.1, 0.9, true, 1e-4, 0);
    config sgd_plain = optim_config(OPT_SGD, 0.1, 0, false, 0, 0);
    config adamw = optim_config(OPT_ADAMW, 1e-3, 0, false, 0.01, 0);
    config adamw_clip = optim_config(OPT_ADAMW, 1e-3, 0, false, 0.01, 0.5);
    test_trajectory("sgd", &sgd, SGD_ATOL);
    test_trajectory("sgd_plain", &sgd_plain, SGD_ATOL);
    test_trajectory("adamw", &adamw, ADAMW_ATOL);
    test_trajectory("adamw_clip", &adamw_clip, ADAMW_ATOL);
    return check_done("test_cuda_mlp");
}
