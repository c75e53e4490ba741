/* optim.h — optimizers (SGD with momentum/Nesterov/weight decay, AdamW), learning-rate schedules
 * and gradient clipping by global norm, over the flat parameter and gradient buffers.
 *
 * Matches PyTorch's torch.optim.SGD and AdamW step for step (see
 * tests/fixtures/README.md). State buffers live on the device; step counts and
 * the schedule position are plain integers that checkpoints store. The element-wise update runs
 * as a device op. Clipping never waits for the device: the gradient norm and the clip factor are
 * device scalars the step reads where it runs, and the norm reaches the host only when someone
 * asks for it (optim_read_grad_norm). By default the optimizer updates every parameter; under ZeRO
 * it updates only its parts (optim_create_parts): its state covers just those, its norm is theirs,
 * and the caller all-reduces the sum of squares between optim_grad_sumsq and optim_clip_scale.
 * This module must not communicate: gradients arrive already averaged. */
#ifndef DDP_OPTIM_H
#define DDP_OPTIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/device/device.h"
#include "runtime/base/err.h"

typedef enum { OPT_SGD, OPT_ADAMW } optim_kind;
/* After warm-up: the peak lr throughout (constant), a cosine or a straight line from lr to min_lr
 * over the rest of the run, or warmup-stable-decay (lr until the last decay_fraction of the steps
 * after warm-up, then a straight line to min_lr). */
typedef enum { SCHED_CONSTANT, SCHED_COSINE, SCHED_LINEAR, SCHED_WSD } sched_kind;

/* What an optimizer is made with: its kind, hyperparameters and learning-rate schedule (the
 * config's optimizer section is one of these; tests fill their own). */
typedef struct optim_opts {
    optim_kind kind;
    double lr, weight_decay, beta1, beta2, eps, momentum, grad_clip; /* grad_clip 0 = off */
    bool nesterov;
    struct { sched_kind kind; int64_t warmup_steps; double min_lr, decay_fraction; } schedule;
} optim_opts;

/* A range of the flat buffers, in elements. */
typedef struct optim_span {
    size_t offset, count;
} optim_span;

/* Parameters [param_offset, +count) that this optimizer updates (their gradients at the same
 * offsets), with their state at [state_offset, +count) of its state buffers. */
typedef struct optim_part {
    size_t param_offset, state_offset, count;
} optim_part;

typedef struct optimizer {
    optim_kind kind;
    device *dev;
    size_t n;               /* parameters in the model's flat buffer */
    size_t n_state;         /* elements of each state buffer */
    optim_part *parts;      /* what it updates: one part {0, 0, n} unless optim_create_parts */
    int n_parts;
    bool grads_by_state;    /* gradients are laid out as the state, not the parameters (optim_grads_by_state) */
    bool params_by_state;   /* ... and the parameters (optim_params_by_state) */
    float *momentum_buffer; /* SGD momentum (device, n_state floats); NULL for AdamW */
    float *exp_avg;         /* AdamW first moment (device, n_state floats); NULL for SGD */
    float *exp_avg_sq;      /* AdamW second moment (device, n_state floats); NULL for SGD */
    double *grad_sumsq;     /* device double: the latest optim_grad_norm's sum of squared gradients */
    double *part_sumsq;     /* device, one double per part when there are several (NULL otherwise) */
    float *clip_scale;      /* device float: its clip factor (written only when grad_clip > 0) */
    int64_t step;       /* optimizer steps taken so far */
    double lr, weight_decay, beta1, beta2, eps, momentum, grad_clip;
    bool nesterov;
    sched_kind sched;
    int64_t warmup_steps;
    double min_lr, decay_fraction;
    /* The spans exempt from weight decay as [start, end) bounds in one device array (the steps
     * read it where they run), adjacent spans merged; NULL and 0 until optim_set_no_decay. */
    size_t *exempt_bounds;
    size_t n_exempt_bounds;
} optimizer;

/* An optimizer of n parameters with opts' settings, its state zeroed. */
int optim_create(const optim_opts *opts, device *dev, size_t n, optimizer **out, ddp_err *err);
/* ZeRO: an optimizer of n parameters that updates only these parts (parameter ranges inside
 * [0, n), ascending, each with its state offset inside [0, n_state); a part may be empty), with
 * n_state elements per state buffer. Gradients are still passed as the whole buffer of n; only
 * the parts' are read. optim_create is this with the one part {0, 0, n}. */
int optim_create_parts(const optim_opts *opts, device *dev, size_t n, const optim_part *parts, int n_parts, size_t n_state,
                       optimizer **out, ddp_err *err);
void optim_destroy(optimizer *o);
/* Exempts these ranges (ascending, non-overlapping, inside [0, n)) from weight decay, as a
 * PyTorch param group with weight_decay 0 does; everything else keeps it. The ranges go to the
 * device once, and each step still runs as one update per part, deciding each element's decay
 * there. */
int optim_set_no_decay(optimizer *o, const optim_span *spans, int n_spans, ddp_err *err);
/* Learning rate for optimizer step `step` (0-based) of total_steps. Linear warmup from lr/warmup
 * to lr over warmup_steps; then, with d the steps after warm-up (total_steps - warmup_steps) and
 * p = (step - warmup_steps) / d: constant lr; cosine min_lr + (lr - min_lr)(1 + cos(pi p)) / 2;
 * linear min_lr + (lr - min_lr)(1 - p); WSD lr up to the last decay_fraction * d steps, then a line
 * to min_lr over those. Past total_steps: the value at total_steps (min_lr when it decays). */
double optim_lr_at(const optimizer *o, int64_t step, int64_t total_steps);
/* The steps optim_lr_at decays over, (total_steps - warmup_steps) and for wsd the last
 * decay_fraction of them, and into *start the step the decay begins at: the schedule's one
 * definition, which the config checks read too. */
double optim_decay_window(sched_kind kind, int64_t warmup_steps, double decay_fraction, int64_t total_steps,
                          double *start);
/* Computes the global L2 norm of the gradients on the device and, when clipping is on
 * (grad_clip > 0), clip_grad_norm_'s factor min(1, grad_clip/(norm+1e-6)) there too; waits for
 * nothing. *scale is the device float to hand to optim_step (o->clip_scale), or NULL when clipping
 * is off. The norm stays on the device for optim_read_grad_norm. */
int optim_grad_norm(optimizer *o, const float *grads, const float **scale, ddp_err *err);
/* optim_grad_norm in two halves, for ZeRO: the sum of squares of the parts' gradients into the
 * device double o->grad_sumsq (which the caller then all-reduces), and the clip factor from it. */
int optim_grad_sumsq(optimizer *o, const float *grads, ddp_err *err);
int optim_clip_scale(optimizer *o, const float **scale, ddp_err *err);
/* The norm of the latest optim_grad_norm (0 before the first): downloads it, so waits for the
 * device. For tests and log lines that report it; a training step never calls it. */
int optim_read_grad_norm(optimizer *o, double *norm, ddp_err *err);
/* One update with learning rate lr and gradients multiplied by *grad_scale, a device float read
 * when the update runs (optim_grad_norm's *scale; NULL: 1); increments step. */
int optim_step(optimizer *o, float *params, const float *grads, double lr, const float *grad_scale, ddp_err *err);
/* optim_step one part at a time, so a caller can send part k's parameters while part k+1 is
 * updated: optim_update_part for each part, then optim_end_step to count the step. */
int optim_update_part(optimizer *o, int part, float *params, const float *grads, double lr, const float *grad_scale,
                      ddp_err *err);
void optim_end_step(optimizer *o);
/* ZeRO-2: from now on the gradients the steps and the norm are given hold each part's at its
 * state_offset (this rank's gradient shard), not at its param_offset. */
void optim_grads_by_state(optimizer *o);
/* ZeRO-3: the same for the parameters: the steps update each part's at its state_offset (this
 * rank's parameter shard); weight decay's exemptions still go by the parameters' offsets. */
void optim_params_by_state(optimizer *o);
/* The adamw_step scalars for 1-based step `step`: 1 - beta, the bias corrections and the decay
 * computed once, in double, from the hyperparameters as configured (not from their float32
 * roundings: float32(0.999) makes 1 - beta2 1.3e-5 off, a bias the corrections stop cancelling
 * after some thousand steps), then rounded to float32, as torch.optim.AdamW does. */
adamw_args optim_adamw_args(double lr, double beta1, double beta2, double eps, double weight_decay, int64_t step);

#endif
