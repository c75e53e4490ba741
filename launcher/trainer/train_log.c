/* train_log.c — what a training job tells its user: the header, a progress line every
 * train.log_every steps, test-set evaluation, and run.dir/metrics.jsonl (rank 0 writes it).
 * The metrics are the ones the model declares (model_io): loss always, accuracy for classifiers,
 * tokens per second and the validation loss for language models (whose test set is the val
 * split). Evaluation counts every test sample exactly once across ranks (no sampler padding).
 * Every metrics line is valid JSON: a value that is not finite is written as null. A metrics line
 * that cannot be written ends the job naming the file (a run whose record is lost must not look
 * successful). It owns the metrics file, the samples and steps trained since the last progress
 * line (train.c counts them in) and the latest evaluation (struct train_log). At a job's start it
 * removes what an earlier attempt killed in a whole-file write left in run.dir. Must not change
 * training state: it only reads it (evaluation runs the model forward only). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/base/clock.h"
#include "runtime/base/dirs.h"
#include "runtime/base/log.h"
#include "runtime/base/replace_file.h"
#include "runtime/device/device_prof.h"
#include "train_fault.h"
#include "train_finite.h"
#include "train_log.h"
#include "train_observe.h"
#include "train_plan.h"
#include "train_profile.h"
#include "train_profile_report.h"
#include "train_ranks.h"
#include "train_replica.h"
#include "train_stop.h"
#include "train_tb.h"
#include "train_zero.h"

struct train_log {
    FILE *metrics;            /* rank 0: run.dir/metrics.jsonl */
    char metrics_path[CFG_PATH_MAX + 32];
    long long metrics_bytes;  /* its size after the last line written whole */
    double t_last_log;        /* monotonic time of the last progress line (the loop's start before it) */
    double excluded_s;        /* of the time since, what evaluations and text samples took */
    double samples_acc;       /* samples trained over all ranks since the last progress line */
    double terms_acc;         /* this rank's share of their loss terms (targets the loss counts) */
    double tokens_acc;        /* this rank's share of their tokens (a packed row's padding is none) */
    int64_t steps_acc;        /* optimizer steps since the last progress line */
    train_eval eval;
};

static int metrics_flush(struct train_log *g, ddp_err *err);

/* An attempt killed while it wrote a line (a line above stdio's buffer goes out in pieces) left it
 * cut: it is removed, so that the next line does not join it into one that is no JSON. st: the
 * open file's. */
static void cut_last_line(struct train_log *g, const struct stat *st)
{
    char buf[4096];
    long long end = g->metrics_bytes;
    int fd = S_ISREG(st->st_mode) ? open(g->metrics_path, O_RDONLY | O_CLOEXEC) : -1; /* a FIFO's reader is not ours */
    if (fd < 0)
        return;
    while (end > 0) {
        long long from = end > (long long)sizeof buf ? end - (long long)sizeof buf : 0;
        ssize_t n = pread(fd, buf, (size_t)(end - from), (off_t)from);
        if (n != end - from) {
            end = g->metrics_bytes; /* unreadable: nothing to mend */
            break;
        }
        char *nl = memrchr(buf, '\n', (size_t)n);
        if (nl) {
            end = from + (nl - buf) + 1;
            break;
        }
        end = from;
    }
    close(fd);
    if (end == g->metrics_bytes || ftruncate(fileno(g->metrics), (off_t)end) != 0)
        return;
    log_warn("%s ended in a line cut short (%lld bytes, an attempt ended while writing it): removed",
             g->metrics_path, g->metrics_bytes - end);
    g->metrics_bytes = end;
}

/* run.dir/config.resolved.yaml: cfg with its relative paths made whole against this working
 * directory, which the ranks resolved them in, so that the record serves from anywhere (as given,
 * with a warning, where the directory cannot be named or a whole path would not fit). */
static int write_record(const config *cfg, ddp_err *err)
{
    char cwd[PATH_MAX], path[CFG_PATH_MAX + 32];
    config *record = malloc(sizeof *record);
    if (!record)
        return ddp_fail(err, DDP_ERUNTIME, "out of memory");
    *record = *cfg;
    ddp_err why = {0};
    if (!getcwd(cwd, sizeof cwd))
        ddp_fail(&why, DDP_ERUNTIME, "cannot name the working directory: %s", strerror(errno));
    if (why.code != DDP_OK || config_anchor_paths(record, cwd, &why) != DDP_OK) {
        log_warn("%s; the run's record (config.resolved.yaml) keeps its paths as given", why.msg);
        *record = *cfg;
    }
    snprintf(path, sizeof path, "%s/config.resolved.yaml", cfg->run.dir);
    int rc = config_write_resolved(record, path, err);
    free(record);
    return rc;
}

int train_log_open(train_job *t, ddp_err *err)
{
    struct train_log *g = calloc(1, sizeof *g);
    t->log = g;
    if (!g)
        return ddp_fail(err, DDP_ERUNTIME, "out of memory");
    if (t->ctl->rank != 0)
        return DDP_OK;
    const char *dir = t->cfg->run.dir;
    if (make_dirs(dir, err))
        return ddp_prefix(err, "run.dir");
    /* what an earlier attempt killed in a write left; under the lock, no writer of ours is alive */
    static const char *const written_whole[] = {"config.resolved.yaml", "profile.json", "trace-rank*.json"};
    for (size_t i = 0; i < sizeof written_whole / sizeof *written_whole; i++)
        replace_file_remove_temps(dir, written_whole[i]);
    int rc = write_record(t->cfg, err);
    if (rc != DDP_OK)
        return rc;
    snprintf(g->metrics_path, sizeof g->metrics_path, "%s/metrics.jsonl", dir);
    g->metrics = fopen(g->metrics_path, "ae"); /* close-on-exec: no checkpoint command inherits it */
    if (!g->metrics)
        return ddp_fail(err, DDP_ERUNTIME, "cannot open %s: %s", g->metrics_path, strerror(errno));
    struct stat st;
    if (fstat(fileno(g->metrics), &st) != 0)
        return ddp_fail(err, DDP_ERUNTIME, "cannot stat %s: %s", g->metrics_path, strerror(errno));
    g->metrics_bytes = (long long)st.st_size;
    cut_last_line(g, &st);
    if (t->step == 0 && g->metrics_bytes == 0)
        return DDP_OK;
    /* a resumed job trains again the steps after its checkpoint that an earlier attempt may have
     * logged, and one from step 0 (a restart before any checkpoint) all of them: readers drop
     * those lines before this one (scripts/plot does) */
    fprintf(g->metrics, "{\"kind\":\"resume\",\"step\":%lld}\n", (long long)t->step);
    return metrics_flush(g, err);
}

/* After each line: the line reached the file, or the job ends naming the file and the reason. A
 * line the disk took only part of is cut off again, so metrics.jsonl holds whole lines only. */
static int metrics_flush(struct train_log *g, ddp_err *err)
{
    struct stat st;
    if (fflush(g->metrics) == 0 && !ferror(g->metrics)) {
        if (fstat(fileno(g->metrics), &st) == 0)
            g->metrics_bytes = (long long)st.st_size;
        return DDP_OK;
    }
    int e = errno;
    fclose(g->metrics); /* nothing buffered may reach the file after the cut */
    g->metrics = NULL;
    bool cut = truncate(g->metrics_path, (off_t)g->metrics_bytes) == 0 || errno == EINVAL; /* EINVAL: not a file */
    return ddp_fail(err, DDP_ERUNTIME, "%s: write failed: %s%s", g->metrics_path, strerror(e),
                    cut ? "" : "; its partial last line could not be cut off");
}

int train_log_finish(train_job *t, ddp_err *err)
{
    struct train_log *g = t->log;
    if (!g || !g->metrics)
        return DDP_OK;
    FILE *f = g->metrics;
    g->metrics = NULL;
    int rc = DDP_OK;
    if (fflush(f) != 0 || ferror(f))
        rc = ddp_fail(err, DDP_ERUNTIME, "%s: write failed: %s", g->metrics_path, strerror(errno));
    else if (fsync(fileno(f)) != 0 && errno != EINVAL) /* EINVAL: a pipe or device, nothing to sync */
        rc = ddp_fail(err, DDP_ERUNTIME, "%s: fsync: %s", g->metrics_path, strerror(errno));
    if (fclose(f) != 0 && rc == DDP_OK)
        rc = ddp_fail(err, DDP_ERUNTIME, "%s: close: %s", g->metrics_path, strerror(errno));
    return rc;
}

void train_log_close(train_job *t)
{
    struct train_log *g = t->log;
    if (!g)
        return;
    if (g->metrics)
        fclose(g->metrics);
    free(g);
    t->log = NULL;
}

void train_log_header(train_job *t)
{
    log_info("ddprun: %d rank%s, device %s, gradient backend %s, %d bucket%s", t->ctl->size,
             t->ctl->size == 1 ? "" : "s", t->dev->name, t->grad_comm->ops->name, t->red->n_buckets,
             t->red->n_buckets == 1 ? "" : "s");
    log_info("model: %s, %zu parameters", t->m->description, t->m->n_params);
    int64_t global = t->batch * t->ctl->size * t->accum;
    log_info("data: %s %lld samples, %s %lld samples; global batch %lld = %lld per rank x %d ranks x %lld accumulation",
             t->train.name, (long long)t->train.n, t->test.name, (long long)t->test.n, (long long)global,
             (long long)t->batch, t->ctl->size, (long long)t->accum);
    log_info("schedule: %lld steps per epoch, %lld steps in total, starting at step %lld (epoch %lld)",
             (long long)t->steps_per_epoch, (long long)t->total_steps, (long long)t->step, (long long)t->epoch + 1);
    int64_t used = t->steps_per_epoch * global;
    if (t->cfg->data.drop_last && used < t->train.n)
        log_info("data.drop_last: %lld of the %lld training samples are left out of each epoch (%s)",
                 (long long)(t->train.n - used), (long long)t->train.n,
                 t->cfg->data.shuffle ? "other ones each epoch" : "the same ones every epoch");
    train_plan_log(t);
}

void train_log_start(train_job *t, double now)
{
    t->log->t_last_log = now;
}

void train_log_count_step(train_job *t, double samples, double terms, double tokens)
{
    t->log->samples_acc += samples;
    t->log->terms_acc += terms;
    t->log->tokens_acc += tokens;
    t->log->steps_acc++;
}

train_eval train_log_last_eval(const train_job *t)
{
    return t->log ? t->log->eval : (train_eval){0};
}

/* `,"key":value` with printf format fmt, or `,"key":null` for a value JSON cannot hold (NaN,
 * infinity): every line of metrics.jsonl stays valid JSON. */
static void json_number(FILE *f, const char *key, const char *fmt, double v)
{
    fprintf(f, ",\"%s\":", key);
    if (isfinite(v))
        fprintf(f, fmt, v);
    else
        fputs("null", f);
}

/* The model's training FLOPs per second over the ranks' peak (train_device_peak_flops), NAN when
 * either is unknown. */
static double model_flops_utilization(const train_job *t, double samples_per_s)
{
    double peak = train_device_peak_flops(t), flops = t->m->train_flops_per_sample;
    return peak > 0 && flops > 0 ? flops * samples_per_s / (peak * t->ctl->size) : NAN;
}

static int write_progress_json(train_job *t, const train_tb_progress *p, uint64_t host_waits, ddp_err *err)
{
    const model_io *io = &t->m->io;
    FILE *f = t->log->metrics;
    fprintf(f, "{\"kind\":\"train\",\"epoch\":%lld,\"step\":%lld", (long long)t->epoch + 1, (long long)t->step);
    json_number(f, "loss", "%.6g", p->loss);
    if (t->train.packed) /* fine-tuning: the trainable targets the loss is the mean over */
        json_number(f, "targets", "%.0f", p->targets);
    if (io->classifier)
        json_number(f, "acc", "%.6g", p->acc);
    json_number(f, "lr", "%.6g", p->lr);
    if (p->has_grad_norm)
        json_number(f, "grad_norm", "%.6g", p->grad_norm);
    json_number(f, "samples_per_s", "%.1f", p->samples_per_s);
    if (io->language_model)
        json_number(f, "tokens_per_s", "%.1f", p->tokens_per_s);
    if (!isnan(p->mfu))
        json_number(f, "mfu", "%.4f", p->mfu);
    json_number(f, "ms_per_step", "%.4f", p->ms_per_step);
    json_number(f, "comm_exposed_ms", "%.4f", p->comm_ms);
    fprintf(f, ",\"host_waits\":%llu", (unsigned long long)host_waits);
    train_ranks_write_json(t, f);
    fputs("}\n", f);
    return metrics_flush(t->log, err);
}

static void log_progress_line(const train_job *t, const train_tb_progress *p)
{
    const model_io *io = &t->m->io;
    char acc_text[48] = "", norm_text[32] = "", tps_text[32] = "", mfu_text[24] = "", tgt_text[40] = "";
    if (t->train.packed) /* fine-tuning: the loss is per trainable token */
        snprintf(tgt_text, sizeof tgt_text, " over %.0f targets", p->targets);
    if (io->classifier)
        snprintf(acc_text, sizeof acc_text, " acc %.1f%%", 100 * p->acc);
    if (io->language_model && t->log->eval.done)
        snprintf(acc_text, sizeof acc_text, " val loss %.4f", t->log->eval.loss);
    if (p->has_grad_norm)
        snprintf(norm_text, sizeof norm_text, " grad norm %.3g", p->grad_norm);
    if (io->language_model)
        snprintf(tps_text, sizeof tps_text, " %.0f tokens/s", p->tokens_per_s);
    if (!isnan(p->mfu))
        snprintf(mfu_text, sizeof mfu_text, " MFU %.1f%%", 100 * p->mfu);
    log_info("epoch %lld step %lld/%lld loss %.4f%s%s lr %.3e%s | %.0f samples/s%s %.2f ms/step %.2f ms comm exposed%s "
             "peak mem %.1f MiB", (long long)t->epoch + 1, (long long)t->step, (long long)t->total_steps, p->loss,
             tgt_text, acc_text, p->lr, norm_text, p->samples_per_s, tps_text, p->ms_per_step, p->comm_ms, mfu_text,
             train_ranks_peak_mib(t));
}

/* Averages the loss/accuracy of the steps since the last line (train_finite.c's per-step sums,
 * drained here) over all ranks, and the per-step communication exposed (ms the step waited for
 * gradients after backward; the drain has synchronised, so taking the timer costs no extra wait);
 * then every rank's own figures (train_ranks.c), one allgather more. */
int train_log_progress(train_job *t, double lr, ddp_err *err)
{
    struct train_log *g = t->log;
    double exposed_ms = 0, loss_sum = 0, correct_sum = 0, grad_norm = NAN;
    int rc = train_finite_drain(t, err);
    if (rc == DDP_OK)
        rc = train_observe_take_exposed_ms(t, &exposed_ms, err);
    train_finite_take_sums(t, &loss_sum, &correct_sum, &grad_norm);
    uint64_t host_waits = train_observe_take_host_waits(t);
    double sums[6] = {loss_sum, correct_sum, g->samples_acc / t->ctl->size, exposed_ms / t->ctl->size,
                      g->terms_acc, g->tokens_acc};
    if (rc == DDP_OK)
        rc = t->ctl->ops->allreduce(t->ctl, sums, sums, 6, DT_DOUBLE, OP_SUM, NULL, err);
    if (rc == DDP_OK)
        rc = train_ranks_gather(t, exposed_ms, err);
    if (rc != DDP_OK)
        return rc;
    double now = monotonic_s(), dt = fmax(now - g->t_last_log - g->excluded_s, 1e-9);
    double terms = sums[4] > 0 ? sums[4] : 1;
    double steps = g->steps_acc > 0 ? (double)g->steps_acc : 1, sps = g->samples_acc / dt;
    train_tb_progress p = {.loss = sums[0] / terms, .acc = sums[1] / terms, .lr = lr, .grad_norm = grad_norm,
                           .targets = sums[4], .has_grad_norm = t->opt->grad_clip > 0,
                           .samples_per_s = sps, .tokens_per_s = sums[5] / dt,
                           .mfu = model_flops_utilization(t, sps), .ms_per_step = 1e3 * dt / steps,
                           .comm_ms = sums[3] / steps};
    log_progress_line(t, &p);
    if (g->metrics && (rc = write_progress_json(t, &p, host_waits, err)) != DDP_OK)
        return rc;
    if ((rc = train_tb_progress_write(t, &p, err)) != DDP_OK)
        return rc;
    g->t_last_log = now;
    g->excluded_s = 0;
    g->steps_acc = 0;
    g->samples_acc = 0;
    g->terms_acc = 0;
    g->tokens_acc = 0;
    return DDP_OK;
}

/* Whether any rank was asked to stop (a signal, a preemption notice), agreed before each
 * evaluation pass: a stop ends an evaluation at once on every rank, not after it, which may take
 * longer than the stop's deadline (ddp.timeout_s). */
static int stop_agreed(train_job *t, bool *stop, ddp_err *err)
{
    int64_t v = train_stop_requested;
    snprintf(t->ctl->label, sizeof t->ctl->label, "evaluation stop agreement");
    int rc = t->ctl->ops->allreduce(t->ctl, &v, &v, 1, DT_INT64, OP_MAX, NULL, err);
    t->ctl->label[0] = '\0';
    *stop = v != TRAIN_STOP_NONE;
    return rc;
}

/* Rows [begin, end) of the test set into stats; *stopped when the ranks agreed to stop first.
 * Every rank runs the most passes any rank needs (a spare one evaluates one row into spare,
 * never counted), so that the agreements, and ZeRO-3's gathers, pair up. */
static int evaluate_range(train_job *t, int64_t begin, int64_t end, float *stats, float *spare, double *terms,
                          bool *stopped, ddp_err *err)
{
    int64_t bs = t->batch, passes = (end - begin + bs - 1) / bs;
    snprintf(t->ctl->label, sizeof t->ctl->label, "evaluation passes");
    int rc = t->ctl->ops->allreduce(t->ctl, &passes, &passes, 1, DT_INT64, OP_MAX, NULL, err);
    t->ctl->label[0] = '\0';
    *stopped = false;
    for (int64_t k = 0, i = begin; k < passes && rc == DDP_OK; k++, i += bs) {
        if ((rc = stop_agreed(t, stopped, err)) != DDP_OK || *stopped)
            break;
        train_fault_in_eval(t);
        int64_t rows = i < end ? (end - i < bs ? end - i : bs) : 1;
        model_batch b;
        train_stage_range(t, i < end ? i : 0, rows);
        rc = train_stage_batch(t, &t->test, &b, err);
        if (rc == DDP_OK)
            rc = t->m->ops->evaluate(t->m, &b, i < end ? stats : spare, err);
        if (i < end)
            *terms += (double)dataset_targets(&t->test, train_staged(t, &rows), rows);
    }
    return rc == DDP_OK ? train_zero_check_windows(t, err) : rc;
}

/* A language model's test set is its val split: its loss is reported as val_loss. */
static int log_evaluation(train_job *t, double samples, ddp_err *err)
{
    const train_eval *e = &t->log->eval;
    bool classifier = t->m->io.classifier;
    const char *split = t->m->io.language_model ? "val" : "test";
    char acc_text[48] = "", loss_key[16];
    snprintf(loss_key, sizeof loss_key, "%s_loss", split);
    if (classifier)
        snprintf(acc_text, sizeof acc_text, ", test accuracy %.2f%%", 100 * e->acc);
    log_info("eval epoch %lld step %lld: %s loss %.4f%s (%.0f samples)", (long long)t->epoch + 1,
             (long long)t->step, split, e->loss, acc_text, samples);
    FILE *f = t->log->metrics;
    if (f) {
        fprintf(f, "{\"kind\":\"eval\",\"epoch\":%lld,\"step\":%lld", (long long)t->epoch + 1, (long long)t->step);
        json_number(f, loss_key, "%.6g", e->loss);
        if (classifier)
            json_number(f, "test_acc", "%.6g", e->acc);
        fprintf(f, ",\"samples\":%.0f}\n", samples);
        int rc = metrics_flush(t->log, err);
        if (rc != DDP_OK)
            return rc;
    }
    char tag[24];
    snprintf(tag, sizeof tag, "eval/%s", loss_key);
    int rc = train_tb_scalar(t, t->step, tag, e->loss, err);
    if (rc == DDP_OK && classifier)
        rc = train_tb_scalar(t, t->step, "eval/test_acc", e->acc, err);
    return rc;
}

/* The test set's evaluation itself (train_evaluate times it). */
static int evaluate(train_job *t, ddp_err *err)
{
    device *d = t->dev;
    int64_t begin, end;
    sampler_eval_range(t->test.n, t->ctl->rank, t->ctl->size, &begin, &end);
    float *stats = NULL;
    double terms = 0; /* the targets the loss counts in this rank's range */
    bool stopped = false;
    int phase = -1;
    int rc = train_phase_begin(t, "evaluation", &phase, err);
    if (rc == DDP_OK) /* the counted sums, then the spare ones evaluate_range may need */
        rc = d->ops->alloc(d, 4 * sizeof(float), (void **)&stats, err);
    if (rc == DDP_OK)
        rc = d->ops->fill(d, TENSOR_F32, stats, 4, 0.0f, err);
    if (rc == DDP_OK)
        rc = evaluate_range(t, begin, end, stats, stats + 2, &terms, &stopped, err);
    float st[2] = {0, 0};
    if (rc == DDP_OK)
        rc = d->ops->download(d, st, stats, sizeof st, err);
    d->ops->free(d, stats);
    if (rc == DDP_OK)
        rc = train_phase_end(t, phase, err);
    if (rc == DDP_OK && stopped) { /* every rank agreed: the stop agreement after it ends the job */
        log_info("eval epoch %lld step %lld: stopped by the stop request, not recorded", (long long)t->epoch + 1,
                 (long long)t->step);
        return DDP_OK;
    }
    double sums[4] = {st[0], st[1], (double)(end - begin), terms};
    int range = device_prof_host_begin(d->prof, "evaluation sums", PROF_TRACK_HOST);
    if (rc == DDP_OK)
        rc = t->ctl->ops->allreduce(t->ctl, sums, sums, 4, DT_DOUBLE, OP_SUM, NULL, err);
    device_prof_host_end(d->prof, range);
    if (rc != DDP_OK)
        return ddp_prefix(err, "evaluation");
    train_eval *e = &t->log->eval;
    *e = (train_eval){.done = true, .step = t->step, .loss = sums[0] / sums[3], .acc = sums[1] / sums[3]};
    if (!isfinite(e->loss))
        train_finite_note(t, t->step, FINITE_EVAL_LOSS, isnan(e->loss) ? "nan" : "inf");
    return log_evaluation(t, sums[2], err);
}

void train_log_exclude(train_job *t, double seconds) { t->log->excluded_s += seconds; }

int train_evaluate(train_job *t, ddp_err *err)
{
    double t0 = monotonic_s();
    int rc = evaluate(t, err);
    train_log_exclude(t, monotonic_s() - t0);
    return rc;
}
