/* train_plan.c — the memory plan: what one rank holds on its device (parameters, gradients
 * whole or under ZeRO-2 as a shard and its windows, optimizer state with and without ZeRO, the bf16 copies of parameters and gradients, the
 * activations of a micro-batch: the per-rank batch config_batch_split gives the world size), as one line. The training job logs it in its header from
 * the built model and reducer; `ddprun plan` (ddprun-worker --plan) prints it for a job that is not
 * started, from the model's tensor table and activation sizes (model_size) and the reducer's bucket
 * plan (reducer_zero_shard_n, reducer_zero_units_size), so both show the same numbers from the same function. Every size
 * is checked (runtime/base/checked_size.h): a plan that does not fit in 64 bits is refused naming
 * the keys it grows with, never printed wrapped. It also says what a model is made with from the
 * config (train_model_opts), which the job and the plan both build from. Must not allocate device
 * memory, read data or communicate. */
#include <stdlib.h>

#include "runtime/base/checked_size.h"
#include "runtime/base/log.h"
#include "train_job.h"
#include "train_plan.h"
#include "train_zero.h"

/* What the line is computed from. */
typedef struct memory_plan {
    size_t n_params, activation_bytes;
    size_t shard_n;             /* ZeRO: a rank's share of the optimizer state, in floats */
    size_t window_n;            /* ZeRO-2 and 3: the unit windows' elements (the gradients: shard_n + these;
                                   ZeRO-3's parameters the same in the compute type) */
    tensor_dtype compute;       /* TENSOR_BF16: a bf16 copy of the parameters */
    int64_t rows;               /* a rank's micro-batch, which the activations are sized for */
    int world;
    bool zero, units, sharded;  /* ZeRO-1, 2 or 3; ZeRO-2 or 3; ZeRO-3 */
} memory_plan;

/* The line's parts in bytes. Optimizer state (AdamW's two moments, SGD's momentum buffer) is what
 * ZeRO-1 divides: the plan shows it both ways. bf16 adds the parameters' compute copy (precision
 * bf16) and the gradients' wire copy (ddp.grad_dtype bf16, with ZeRO's padding). */
typedef struct plan_bytes {
    size_t params, grads, state, replicated, wcopy, gcopy, total;
} plan_bytes;

/* p's parts and total, every product and sum checked (runtime/base/checked_size.h): false when the
 * total does not fit in 64 bits. */
static bool plan_bytes_of(const config *c, const memory_plan *p, plan_bytes *b)
{
    size_check k = {0};
    const size_t buffers = c->optimizer.kind == OPT_ADAMW ? 2 : 1;
    const size_t whole = size_mul(&k, p->n_params, sizeof(float)), elem = tensor_dtype_size(p->compute);
    b->params = p->sharded ? size_add(&k, size_mul(&k, p->shard_n, sizeof(float)), size_mul(&k, p->window_n, elem))
                           : whole;
    b->grads = p->units ? size_mul(&k, size_add(&k, p->shard_n, p->window_n), sizeof(float)) : whole;
    b->replicated = size_mul(&k, buffers, whole);
    b->state = p->zero ? size_mul(&k, buffers, size_mul(&k, p->shard_n, sizeof(float))) : b->replicated;
    b->wcopy = p->compute == TENSOR_BF16 ? size_mul(&k, p->sharded ? p->shard_n : p->n_params, sizeof(uint16_t)) : 0;
    b->gcopy = c->ddp.grad_dtype == GRAD_BF16
                   ? size_mul(&k, size_add(&k, p->n_params, train_zero_buffers(c, p->world).param_tail), sizeof(uint16_t)) : 0;
    size_t total = size_add(&k, size_add(&k, b->params, b->grads), b->state);
    total = size_add(&k, total, size_add(&k, b->wcopy, b->gcopy));
    b->total = size_add(&k, total, p->activation_bytes);
    return !k.overflow;
}

static void format_memory_plan(const config *c, const memory_plan *p, char *out, size_t size)
{
    plan_bytes b;
    (void)plan_bytes_of(c, p, &b); /* a job's model was built, so its plan fits; train_plan checks its own */
    const double mib = 1.0 / (1 << 20), params = (double)b.params, replicated = (double)b.replicated;
    char zero[128], copies[128] = "", grads[96] = "", shard[96] = "";
    if (p->zero)
        snprintf(zero, sizeof zero, "ZeRO-%d over %d ranks; without: %.1f MiB", p->sharded ? 3 : p->units ? 2 : 1,
                 p->world, replicated * mib);
    else if (p->world > 1)
        snprintf(zero, sizeof zero, "replicated; with ddp.zero 1 over %d ranks: about %.1f MiB", p->world,
                 replicated / p->world * mib);
    else
        snprintf(zero, sizeof zero, "one rank: ddp.zero has nothing to shard");
    if (b.wcopy > 0 || b.gcopy > 0)
        snprintf(copies, sizeof copies, ", bf16 copies: parameters %.1f MiB, gradients %.1f MiB",
                 (double)b.wcopy * mib, (double)b.gcopy * mib);
    char recompute[32] = "";
    if (c->train.recompute != RECOMPUTE_NONE)
        snprintf(recompute, sizeof recompute, ", recompute %s", recompute_mode_names[c->train.recompute]);
    if (p->units)
        snprintf(grads, sizeof grads, " (ZeRO-%d: a shard of %.1f MiB and unit windows of %.1f MiB)",
                 p->sharded ? 3 : 2, (double)p->shard_n * sizeof(float) * mib, (double)p->window_n * sizeof(float) * mib);
    if (p->sharded)
        snprintf(shard, sizeof shard, " (ZeRO-3: a shard of %.1f MiB and unit windows of %.1f MiB)",
                 (double)p->shard_n * sizeof(float) * mib,
                 (double)p->window_n * tensor_dtype_size(p->compute) * mib);
    snprintf(out, size, "memory per rank: parameters %.1f MiB%s, gradients %.1f MiB%s, optimizer state %.1f MiB (%s)%s, "
             "activations %.1f MiB (%lld rows%s), %.1f MiB in all", params * mib, shard, (double)b.grads * mib, grads,
             (double)b.state * mib, zero, copies, (double)p->activation_bytes * mib, (long long)p->rows, recompute,
             (double)b.total * mib);
}

model_opts train_model_opts(const config *c)
{
    model_opts o = model_opts_make(c->model.kind, &c->model.opts,
                                   c->precision == PRECISION_BF16 ? TENSOR_BF16 : TENSOR_F32);
    o.recompute = c->train.recompute;
    /* a budget past 2^63 bytes holds any micro-batch: 0, all rows; one under a byte, still a row */
    const double bytes = c->train.logits_mb * 1048576.0;
    o.logits_bytes = bytes >= 0x1p63 ? 0 : bytes > 0 && bytes < 1 ? 1 : (size_t)bytes;
    return o;
}

/* ZeRO-2's gradient memory for m's units over p->world ranks, as the reducer allocates it. */
static int plan_units(const model *m, memory_plan *p, ddp_err *err)
{
    size_t *offs = malloc((size_t)m->n_units * sizeof *offs);
    if (!offs)
        return ddp_fail(err, DDP_ERUNTIME, "out of memory for %d unit offsets", m->n_units);
    for (int u = 0; u < m->n_units; u++)
        offs[u] = m->units[u].offset;
    reducer_zero_units_size(offs, m->n_units, m->n_params, p->world, &p->shard_n, &p->window_n);
    free(offs);
    return DDP_OK;
}

void train_plan_log(const train_job *t)
{
    memory_plan p = {.n_params = t->m->n_params, .activation_bytes = t->m->activation_bytes,
                     .shard_n = t->red->shard_n, .compute = t->m->act_dtype, .rows = t->batch,
                     .world = t->ctl->size, .zero = train_zero_active(t), .units = t->red->units,
                     .sharded = t->m->params_by_unit};
    ddp_err ignored;
    if (p.units)
        (void)plan_units(t->m, &p, &ignored); /* sizes only: the reducer allocated the same */
    char line[768];
    format_memory_plan(t->cfg, &p, line, sizeof line);
    log_info("%s", line);
}

/* The ZeRO shard the job's reducer would cut from m's tensors (ZeRO-2: units) over p->world ranks. */
static int plan_shard(const config *c, const model *m, memory_plan *p, ddp_err *err)
{
    if (p->units)
        return plan_units(m, p, err);
    if (!p->zero)
        return DDP_OK;
    size_t *offs = malloc((size_t)m->n_tensors * sizeof *offs);
    if (!offs)
        return ddp_fail(err, DDP_ERUNTIME, "out of memory for %d tensor offsets", m->n_tensors);
    for (int i = 0; i < m->n_tensors; i++)
        offs[i] = m->tensors[i].offset;
    int rc = reducer_zero_shard_n(offs, m->n_tensors, m->n_params, c->ddp.bucket_mb, c->ddp.first_bucket_mb,
                                  p->world, &p->shard_n, err);
    free(offs);
    return rc;
}

int train_plan(const config *c, int world, FILE *out, ddp_err *err)
{
    const model_opts opts = train_model_opts(c);
    if (config_shape_pending(c))
        return ddp_fail(err, DDP_EUSAGE, "%s: the model's shape is left to checkpoint.init_from; give its keys "
                        "(as overrides) to plan it", c->source);
    sample_layout data = {.input = {SAMPLE_I32, c->data.seq_len}, .target = {SAMPLE_I32, c->data.seq_len}};
    model m = {0};
    batch_split split;
    int rc = config_batch_split(c, world, &split, err);
    if (!rc)
        rc = model_size(&opts, &data, split.batch, &m, err);
    memory_plan p = {.n_params = m.n_params, .activation_bytes = m.activation_bytes, .compute = m.act_dtype,
                     .rows = split.batch, .world = world, .zero = train_zero_on(c, world),
                     .units = train_zero_units(c, world), .sharded = train_zero_sharded_params(c, world)};
    if (!rc)
        rc = plan_shard(c, &m, &p, err);
    plan_bytes b;
    if (!rc && !plan_bytes_of(c, &p, &b))
        rc = ddp_fail(err, DDP_EUSAGE, "memory per rank overflows 64 bits: %zu parameters (the model's shape) and "
                      "%zu activation bytes (data.seq_len %lld x %lld rows, data.batch_size); reduce these",
                      m.n_params, m.activation_bytes, (long long)c->data.seq_len, (long long)split.batch);
    if (!rc) {
        char line[768];
        format_memory_plan(c, &p, line, sizeof line);
        fprintf(out, "plan: %s on %d rank%s: %zu parameters in %d tensors, %lld x %lld tokens per rank\n%s\n",
                c->source, world, world == 1 ? "" : "s", m.n_params, m.n_tensors, (long long)split.batch,
                (long long)c->data.seq_len, line);
    }
    model_free_tensors(&m);
    return rc ? ddp_prefix(err, "%s", c->source) : DDP_OK;
}
