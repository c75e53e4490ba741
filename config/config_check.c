/* config_check.c — checks that span keys: required sections, contradictory settings, and keys set
 * where another key's choice leaves them without effect.
 *
 * Runs once, after the file and every override were applied, so a contradiction is judged on
 * the final values and reported at whichever of the two keys was set later (an override beats
 * the file; further down the file beats further up). Single-key ranges belong to the key table
 * (config_keys.c), not here; the model kinds' sections and their own rules are checked by
 * config_model.c through each kind's descriptor (models/model_config.h). */
#include "config_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/affix.h"

/* A file without these is almost certainly not a training config (or a mis-indented one). */
static const char *const required_sections[] = {"model", "data"};

typedef struct conflict {
    const char *a, *b;               /* the two keys involved */
    bool (*bad)(const config *c);
    const char *rule;                /* completes "expected ..." ({lm}, {lm_files}: expand_rule) */
} conflict;

static bool nccl_on_cpu(const config *c) { return c->ddp.backend == BACKEND_NCCL && c->device == DEVICE_CPU; }
/* Open MPI here is not CUDA-aware: it cannot reduce device buffers (device auto on a GPU: the job says so) */
static bool mpi_on_cuda(const config *c) { return c->ddp.backend == BACKEND_MPI && c->device == DEVICE_CUDA; }
static bool bf16_on_cpu(const config *c) { return c->precision == PRECISION_BF16 && c->device == DEVICE_CPU; }
/* The models that take token sequences: the kinds whose descriptor says so. */
static bool bf16_not_lm(const config *c) { return c->precision == PRECISION_BF16 && !cfg_language_model(c); }
static bool packed_not_tokens(const config *c) { return c->data.packed && c->data.kind != DATA_TOKENS; }
static bool warmup_too_long(const config *c)
{
    return c->train.max_steps > 0 && c->optimizer.schedule.warmup_steps > c->train.max_steps;
}
static bool min_lr_above_lr(const config *c) { return c->optimizer.schedule.min_lr > c->optimizer.lr; }
static bool first_bucket_too_big(const config *c) { return c->ddp.first_bucket_mb > c->ddp.bucket_mb; }
static bool nesterov_adamw(const config *c) { return c->optimizer.nesterov && c->optimizer.kind == OPT_ADAMW; }
static bool nesterov_no_momentum(const config *c) { return c->optimizer.nesterov && c->optimizer.momentum == 0; }
/* ZeRO-2 and 3 keep no whole gradient buffer for a bf16 wire copy to be cast from */
static bool bf16_grads_zero2(const config *c) { return c->ddp.grad_dtype == GRAD_BF16 && c->ddp.zero >= 2; }

/* train.global_batch: the accumulation is derived from it; each world size's split must cover it
 * exactly, and the last partial global batch of an epoch, which drop_last false would pad to a
 * multiple of the ranks, would differ between world sizes. */
static bool global_batch_on(const config *c) { return c->train.global_batch > 0; }
static bool global_with_accum(const config *c) { return global_batch_on(c) && c->train.grad_accum != 1; }
static bool global_not_multiple(const config *c)
{
    return global_batch_on(c) && c->train.micro_batch == MICRO_BATCH_FIXED &&
           c->train.global_batch % c->data.batch_size != 0;
}
static bool global_without_drop_last(const config *c) { return global_batch_on(c) && !c->data.drop_last; }
static bool auto_without_global(const config *c)
{
    return c->train.micro_batch == MICRO_BATCH_AUTO && !global_batch_on(c);
}

static bool tokens_without_lm(const config *c) { return c->data.kind == DATA_TOKENS && !cfg_language_model(c); }
static bool lm_without_tokens(const config *c) { return cfg_language_model(c) && c->data.kind != DATA_TOKENS; }
static bool init_from_not_lm(const config *c) { return c->checkpoint.init_from[0] && !cfg_language_model(c); }
static bool recompute_not_lm(const config *c) { return c->train.recompute != RECOMPUTE_NONE && !cfg_language_model(c); }

/* A rule's "{lm}" is the language models' kind names ("a or b"), "{lm_files}" what
 * checkpoint.init_from may name for them: both composed from the kinds' descriptors. */
static void expand_rule(const char *rule, char *out, size_t n)
{
    char kinds[128], files[256];
    cfg_language_model_names(kinds, sizeof kinds);
    cfg_init_from_files(files, sizeof files);
    const struct { const char *name, *value; } words[] = {{"{lm}", kinds}, {"{lm_files}", files}};
    size_t len = 0;
    while (*rule && len + 1 < n) {
        size_t w = 0;
        while (w < 2 && !has_prefix(rule, words[w].name))
            w++;
        const char *text = w < 2 ? words[w].value : rule;
        size_t take = w < 2 ? strlen(text) : 1, room = n - 1 - len;
        memcpy(out + len, text, take < room ? take : room);
        len += take < room ? take : room;
        rule += w < 2 ? strlen(words[w].name) : 1;
    }
    out[len] = '\0';
}

/* After the active model kind's own rules (cfg_check_model_rules), in this order. */
static const conflict conflicts[] = {
    {"model.kind", "data.kind", tokens_without_lm, "data.kind tokens only with a language model (model.kind {lm})"},
    {"model.kind", "data.kind", lm_without_tokens, "data.kind tokens with a language model (model.kind {lm})"},
    {"model.kind", "checkpoint.init_from", init_from_not_lm,
     "checkpoint.init_from ({lm_files}) only with model.kind {lm}"},
    {"model.kind", "train.recompute", recompute_not_lm,
     "train.recompute none with a model without blocks to recompute (selective and full: model.kind {lm})"},
    {"device", "ddp.backend", nccl_on_cpu, "ddp.backend nccl only with device cuda or auto"},
    {"device", "ddp.backend", mpi_on_cuda,
     "ddp.backend nccl or auto with device cuda (this Open MPI is not CUDA-aware: it cannot reduce device buffers)"},
    {"ddp.zero", "ddp.grad_dtype", bf16_grads_zero2,
     "ddp.grad_dtype fp32 with ddp.zero 2 or 3 (each unit's gradients are reduce-scattered in float32)"},
    {"device", "precision", bf16_on_cpu,
     "precision bf16 only with device cuda or auto (the CPU backend computes in float32)"},
    {"model.kind", "precision", bf16_not_lm, "precision bf16 only with model.kind {lm}"},
    {"data.kind", "data.packed", packed_not_tokens, "data.packed true only with data.kind tokens"},
    {"train.max_steps", "optimizer.schedule.warmup_steps", warmup_too_long,
     "optimizer.schedule.warmup_steps <= train.max_steps when train.max_steps > 0"},
    {"optimizer.lr", "optimizer.schedule.min_lr", min_lr_above_lr, "optimizer.schedule.min_lr <= optimizer.lr"},
    {"ddp.bucket_mb", "ddp.first_bucket_mb", first_bucket_too_big, "ddp.first_bucket_mb <= ddp.bucket_mb"},
    {"train.global_batch", "train.grad_accum", global_with_accum,
     "train.grad_accum 1 with train.global_batch (each run derives the accumulation from it)"},
    {"train.global_batch", "data.batch_size", global_not_multiple,
     "train.global_batch a multiple of data.batch_size with train.micro_batch fixed (or train.micro_batch: auto)"},
    {"train.global_batch", "data.drop_last", global_without_drop_last,
     "data.drop_last true with train.global_batch (an epoch's last, partial global batch would be padded and "
     "split differently on each world size)"},
    {"train.global_batch", "train.micro_batch", auto_without_global,
     "train.micro_batch auto only with train.global_batch > 0"},
    {"optimizer.kind", "optimizer.nesterov", nesterov_adamw, "optimizer.nesterov true only with optimizer.kind sgd"},
    {"optimizer.momentum", "optimizer.nesterov", nesterov_no_momentum,
     "optimizer.nesterov true only with optimizer.momentum > 0"},
};

/* Keys that another key's choice leaves without effect. Set to anything but their default there,
 * they are refused like a contradiction: the run would silently not do what the config asks
 * (SGD momentum under AdamW, a final LR without a decay). At the default they pass, so a resolved
 * config, which writes every key, loads again. */
typedef struct idle_key {
    const char *key, *decider;
    bool (*idle)(const config *c);
    const char *rule;
} idle_key;

static bool not_sgd(const config *c) { return c->optimizer.kind != OPT_SGD; }
static bool not_adamw(const config *c) { return c->optimizer.kind != OPT_ADAMW; }
static bool lr_constant(const config *c) { return c->optimizer.schedule.kind == SCHED_CONSTANT; }
static bool not_wsd(const config *c) { return c->optimizer.schedule.kind != SCHED_WSD; }
static bool not_synthetic(const config *c) { return c->data.kind != DATA_SYNTHETIC; }
static bool not_tokens(const config *c) { return c->data.kind != DATA_TOKENS; }
static bool no_command(const config *c) { return !c->checkpoint.upload_cmd[0] && !c->checkpoint.download_cmd[0]; }
static bool no_notice(const config *c) { return c->checkpoint.preemption_notice == NOTICE_OFF; }
static bool not_lm(const config *c) { return !cfg_language_model(c); }

#define SYNTHETIC_ONLY "data.synthetic.* only with data.kind synthetic"
#define LM_ONLY(key) {key, "model.kind", not_lm, key " only with a language model (model.kind {lm})"}
static const idle_key idle_keys[] = {
    {"optimizer.momentum", "optimizer.kind", not_sgd,
     "optimizer.momentum only with optimizer.kind sgd (AdamW's moments are optimizer.betas)"},
    {"optimizer.betas", "optimizer.kind", not_adamw, "optimizer.betas only with optimizer.kind adamw"},
    {"optimizer.eps", "optimizer.kind", not_adamw, "optimizer.eps only with optimizer.kind adamw"},
    {"optimizer.schedule.min_lr", "optimizer.schedule.kind", lr_constant,
     "optimizer.schedule.min_lr only with a schedule that decays (optimizer.schedule.kind cosine, linear or wsd)"},
    {"optimizer.schedule.decay_fraction", "optimizer.schedule.kind", not_wsd,
     "optimizer.schedule.decay_fraction only with optimizer.schedule.kind wsd"},
    {"data.synthetic.train", "data.kind", not_synthetic, SYNTHETIC_ONLY},
    {"data.synthetic.test", "data.kind", not_synthetic, SYNTHETIC_ONLY},
    {"data.synthetic.features", "data.kind", not_synthetic, SYNTHETIC_ONLY},
    {"data.synthetic.classes", "data.kind", not_synthetic, SYNTHETIC_ONLY},
    {"data.seq_len", "data.kind", not_tokens, "data.seq_len only with data.kind tokens"},
    {"checkpoint.command_timeout_s", "checkpoint.upload_cmd", no_command,
     "checkpoint.command_timeout_s only with checkpoint.upload_cmd or checkpoint.download_cmd"},
    {"checkpoint.notice_poll_s", "checkpoint.preemption_notice", no_notice,
     "checkpoint.notice_poll_s only with a checkpoint.preemption_notice other than off"},
    LM_ONLY("train.sample_every"),
    LM_ONLY("train.sample_tokens"),
    LM_ONLY("train.logits_mb"),
};

static int check_required(cfg_loader *L)
{
    if (!L->c->source[0]) /* no file: defaults plus overrides, e.g. for tools and tests */
        return DDP_OK;
    for (size_t i = 0; i < sizeof required_sections / sizeof required_sections[0]; i++) {
        int k = cfg_key_find(required_sections[i]); /* in the file: overrides do not stand in for it */
        if (!L->in_file[k])
            return cfg_error(L, (cfg_pos){0, 1, 1}, required_sections[i],
                             "expected a '%s' mapping (required section), got none", required_sections[i]);
    }
    return DDP_OK;
}

static int report_conflict(cfg_loader *L, const char *a, const char *b, const char *rule)
{
    int ka = cfg_key_find(a), kb = cfg_key_find(b);
    int later = cfg_pos_later(L->c->origin[ka], L->c->origin[kb]) ? ka : kb;
    int other = later == ka ? kb : ka;
    const cfg_key *later_key = cfg_key_at(later), *other_key = cfg_key_at(other);
    char later_val[CFG_PATH_MAX], other_val[CFG_PATH_MAX], other_at[CFG_PATH_MAX + 64];
    cfg_format_value(L->c, later_key, later_val, sizeof later_val);
    cfg_format_value(L->c, other_key, other_val, sizeof other_val);
    if (!other_val[0]) /* an empty path or command: shown as YAML writes it */
        snprintf(other_val, sizeof other_val, "\"\"");
    if (!later_val[0])
        snprintf(later_val, sizeof later_val, "\"\"");
    if (L->c->origin[other].source < 0)
        snprintf(other_at, sizeof other_at, "the default");
    else
        cfg_pos_label(L, L->c->origin[other], other_at, sizeof other_at);
    cfg_pos at = L->c->origin[later];
    if (at.source < 0) /* both defaults: a bug in the key table's defaults, but still say where */
        at = (cfg_pos){0, 1, 1};
    if (ka == kb) /* a rule on one key's value */
        return cfg_error(L, at, later_key->path, "expected %s, got %.100s", rule, later_val);
    return cfg_error(L, at, later_key->path, "expected %s, got %s %.100s with %s %.100s (%s)", rule,
                     later_key->path, later_val, other_key->path, other_val, other_at);
}

/* Whether k's value in c is its default's, by the text the hash compares (which writes -0 as 0). */
static bool at_default(const config *c, const config *defaults, const cfg_key *k)
{
    char value[CFG_PATH_MAX], def[CFG_PATH_MAX];
    cfg_format_value(c, k, value, sizeof value);
    cfg_format_value(defaults, k, def, sizeof def);
    return strcmp(value, def) == 0;
}

/* The key table's defaults into a new config (*out; free it), for the first idle key set. */
static int table_defaults(cfg_loader *L, config **out)
{
    if (!(*out = malloc(sizeof **out)))
        return ddp_fail(L->err, DDP_ERUNTIME, "config: out of memory");
    cfg_loader D = {.c = *out, .err = L->err, .file = L->file};
    return cfg_defaults(&D);
}

/* The first key of idle_keys set (by the file or an override) to other than its default where its
 * decider leaves it idle, reported as a contradiction between the two; none for a run's record
 * (config_load_record). The defaults are made only when a key is set where it is idle. */
static int check_idle(cfg_loader *L)
{
    if (L->record)
        return DDP_OK;
    config *defaults = NULL;
    int rc = DDP_OK;
    for (size_t i = 0; !rc && i < sizeof idle_keys / sizeof idle_keys[0]; i++) {
        const idle_key *r = &idle_keys[i];
        int k = cfg_key_find(r->key);
        if (L->c->origin[k].source < 0 || !r->idle(L->c))
            continue;
        if (!defaults && (rc = table_defaults(L, &defaults)) != DDP_OK)
            break;
        char rule[512];
        expand_rule(r->rule, rule, sizeof rule);
        if (!at_default(L->c, defaults, cfg_key_at(k)))
            rc = report_conflict(L, r->decider, r->key, rule);
    }
    free(defaults);
    return rc;
}

/* Settings whose default follows another key: with precision bf16, gradients travel in bf16
 * unless ddp.grad_dtype says otherwise (or the MPI backend, which reduces in float, or ZeRO-2,
 * which reduces each unit's float32 gradients, is asked for); a language model reads token
 * shards unless data.kind says otherwise (which lm_without_tokens then refuses). */
static void derive_defaults(cfg_loader *L)
{
    config *c = L->c;
    if (c->precision == PRECISION_BF16 && L->c->origin[cfg_key_find("ddp.grad_dtype")].source < 0 &&
        c->ddp.backend != BACKEND_MPI && c->ddp.zero < 2)
        c->ddp.grad_dtype = GRAD_BF16;
    if (cfg_language_model(c) && L->c->origin[cfg_key_find("data.kind")].source < 0)
        c->data.kind = DATA_TOKENS;
}

int cfg_check(cfg_loader *L)
{
    derive_defaults(L);
    int rc = check_required(L);
    if (!rc)
        rc = cfg_check_model(L);
    if (!rc)
        rc = cfg_check_model_rules(L, report_conflict);
    for (size_t i = 0; !rc && i < sizeof conflicts / sizeof conflicts[0]; i++)
        if (conflicts[i].bad(L->c)) {
            char rule[512];
            expand_rule(conflicts[i].rule, rule, sizeof rule);
            rc = report_conflict(L, conflicts[i].a, conflicts[i].b, rule);
        }
    return rc ? rc : check_idle(L);
}
