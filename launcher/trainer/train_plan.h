/* train_plan.h — the memory plan (train_plan.c): what one rank holds on its device, as the line the
 * training job's header logs and `ddprun plan` prints; and what a model is made with from the
 * config, which both the job and the plan build from. train_plan is public (ddprun-worker --plan,
 * through train.h); the rest is the trainer's. Must not need a built job to plan one. */
#ifndef DDP_TRAIN_PLAN_H
#define DDP_TRAIN_PLAN_H

#include <stdio.h>

#include "config/config.h"
#include "models/model.h"
#include "runtime/base/err.h"

struct train_job;

/* The memory plan a job of cfg on `world` ranks would log (train_plan_log's line, the same
 * function), printed to out with the model's parameter count, computed from the model's tensor
 * table and activation sizes (model_size) without a device, data or MPI. Language models only (the
 * MLP's shape follows its data); a model the config leaves to checkpoint.init_from is refused. */
int train_plan(const config *cfg, int world, FILE *out, ddp_err *err);

/* What the model is made with, from the config (its model section; bf16 under precision bf16). */
model_opts train_model_opts(const config *c);

/* The job header's memory plan line, from the built model and reducer. */
void train_plan_log(const struct train_job *t);

#endif
