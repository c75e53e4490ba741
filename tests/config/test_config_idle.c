/* test_config_idle.c — keys another key's choice leaves without effect (config_check.c's idle
 * keys): set to anything but their default there, each is refused at FILE:LINE:COL or the
 * override's column, at whichever of it and its decider was set later, naming both values; at the
 * default, or where its decider makes it count, it is taken. A resolved config of a language model
 * under SGD (whose betas the kind's AdamW default would have changed) loads again, and one an
 * earlier ddprun wrote with such a pair loads as the record it is (config_load_record). A record's
 * relative paths are made whole against the job's working directory (config_anchor_paths), the
 * absolute ones and those unset left as they are; one that would not fit is refused naming it, and so
 * is a directory whose name is not UTF-8 (YAML's text); a UTF-8 one is written and read back. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config_test_util.h"

static const char *const example = DDP_SOURCE_ROOT "/configs/fashion_mlp.yaml";

/* Loads the example (AdamW, cosine, fashion-mnist, no commands) with overrides; whether it loaded. */
static bool loads(int n, char *ov[], config *c)
{
    ddp_err err = {0};
    int rc = config_load(example, n, ov, c, &err);
    if (rc != DDP_OK)
        fprintf(stderr, "  (refused: %s)\n", err.msg);
    return rc == DDP_OK;
}

/* Each idle key set by an override where the example leaves it idle: refused at the override. */
static void test_refused_where_idle(void)
{
    static const struct { const char *set, *where, *rule; } cases[] = {
        {"optimizer.momentum=0.95", "<override 1>:1:20: optimizer.momentum:",
         "expected optimizer.momentum only with optimizer.kind sgd (AdamW's moments are optimizer.betas), got "
         "optimizer.momentum 0.95 with optimizer.kind adamw (" DDP_SOURCE_ROOT "/configs/fashion_mlp.yaml:27:9)"},
        {"optimizer.schedule.decay_fraction=0.5", "<override 1>:1:35: optimizer.schedule.decay_fraction:",
         "only with optimizer.schedule.kind wsd, got optimizer.schedule.decay_fraction 0.5 with "
         "optimizer.schedule.kind cosine"},
        {"data.synthetic.train=5", "<override 1>:1:22: data.synthetic.train:",
         "expected data.synthetic.* only with data.kind synthetic, got data.synthetic.train 5 with data.kind "
         "fashion-mnist"},
        {"data.synthetic.classes=3", "<override 1>:1:24: data.synthetic.classes:", "only with data.kind synthetic"},
        {"data.seq_len=64", "<override 1>:1:14: data.seq_len:", "data.seq_len only with data.kind tokens"},
        {"checkpoint.command_timeout_s=60", "<override 1>:1:30: checkpoint.command_timeout_s:",
         "only with checkpoint.upload_cmd or checkpoint.download_cmd, got checkpoint.command_timeout_s 60 with "
         "checkpoint.upload_cmd \"\" (the default)"},
        {"checkpoint.notice_poll_s=1", "<override 1>:1:26: checkpoint.notice_poll_s:",
         "only with a checkpoint.preemption_notice other than off"},
        {"train.sample_every=10", "<override 1>:1:20: train.sample_every:",
         "expected train.sample_every only with a language model (model.kind gpt2, llama"},
        {"train.sample_tokens=500", "<override 1>:1:21: train.sample_tokens:", "got train.sample_tokens 500 with model.kind mlp"},
        {"train.logits_mb=5", "<override 1>:1:17: train.logits_mb:", "only with a language model"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char where[160];
        snprintf(where, sizeof where, "%s", cases[i].where);
        config c;
        ddp_err err = {0};
        memset(&c, 0x5a, sizeof c);
        int rc = config_load(example, 1, (char *[]){(char *)cases[i].set}, &c, &err);
        CHECK(rc == DDP_EUSAGE, "%s: rc %d", cases[i].set, rc);
        CHECK(strncmp(err.msg, where, strlen(where)) == 0, "%s: \"%s\" does not start with \"%s\"", cases[i].set,
              err.msg, where);
        CHECK_STR_CONTAINS(err.msg, cases[i].rule);
    }
    /* the decider set later: reported there, naming where the idle key was set */
    expect_fail(NULL, 2, (char *[]){"optimizer.betas=[0.8, 0.9]", "optimizer.kind=sgd"},
                "<override 2>:1:16: optimizer.kind:",
                "expected optimizer.betas only with optimizer.kind adamw, got optimizer.kind sgd with optimizer.betas "
                "[0.8, 0.9] (<override 1>:1:17)");
    expect_fail(NULL, 2, (char *[]){"optimizer.eps=1e-6", "optimizer.kind=sgd"}, "<override 2>:1:16: optimizer.kind:",
                "optimizer.eps only with optimizer.kind adamw");
    /* a decider at its default: said so */
    expect_fail(NULL, 1, (char *[]){"optimizer.schedule.min_lr=0.0001"},
                "<override 1>:1:27: optimizer.schedule.min_lr:",
                "only with a schedule that decays (optimizer.schedule.kind cosine, linear or wsd), got "
                "optimizer.schedule.min_lr 0.0001 with optimizer.schedule.kind constant (the default)");
}

/* The same keys where they count, or at their default where they do not, are taken. */
static void test_taken(void)
{
    config c;
    CHECK(loads(1, (char *[]){"optimizer.momentum=0.9"}, &c), "momentum at its default under AdamW");
    CHECK(loads(2, (char *[]){"optimizer.kind=sgd", "optimizer.momentum=0.5"}, &c) && c.optimizer.momentum == 0.5,
          "momentum under SGD");
    CHECK(loads(2, (char *[]){"optimizer.schedule.kind=wsd", "optimizer.schedule.decay_fraction=0.5"}, &c) &&
              c.optimizer.schedule.decay_fraction == 0.5, "decay_fraction under wsd");
    CHECK(loads(2, (char *[]){"data.kind=synthetic", "data.synthetic.train=5"}, &c) && c.data.synthetic_train == 5,
          "synthetic sizes with synthetic data");
    CHECK(loads(2, (char *[]){"checkpoint.download_cmd=true", "checkpoint.command_timeout_s=60"}, &c) &&
              c.checkpoint.command_timeout_s == 60, "command_timeout_s with a download command");
    CHECK(loads(2, (char *[]){"checkpoint.preemption_notice=aws", "checkpoint.notice_poll_s=1"}, &c) &&
              c.checkpoint.notice_poll_s == 1, "notice_poll_s with a notice");
    CHECK(loads(1, (char *[]){"optimizer.kind=sgd"}, &c), "the example's betas and eps are the defaults: SGD loads");
    /* the switches that turn a feature off leave its settings as the file has them: train.eval=false
     * (every evaluation, eval_every's too) and a profiler window of 0 steps */
    CHECK(loads(2, (char *[]){"train.eval_every=100", "train.eval=false"}, &c) && c.train.eval_every == 100,
          "eval_every with evaluation off");
    CHECK(loads(1, (char *[]){"train.profile_start=50"}, &c) && c.train.profile_start == 50,
          "profile_start with the profiler off");
    ddp_err err = {0};
    CHECK(config_load(NULL, 4, (char *[]){"model.kind=gpt2", "train.sample_every=10", "train.sample_tokens=500",
                                          "train.logits_mb=5"}, &c, &err) == DDP_OK &&
              c.train.sample_every == 10 && c.train.logits_mb == 5, "sampling and logits_mb with GPT-2: %s", err.msg);
}

/* A language model under SGD: its betas stay the table's (its kind's AdamW beta2 is not taken), so
 * its resolved config, which writes every key, loads again as the same config. */
static void test_lm_sgd_round_trip(void)
{
    config c;
    ddp_err err = {0};
    char *ov[] = {"model.kind=gpt2", "optimizer.kind=sgd"};
    CHECK(config_load(NULL, 2, ov, &c, &err) == DDP_OK, "%s", err.msg);
    CHECK(c.optimizer.beta2 == 0.999, "betas under SGD: beta2 %g", c.optimizer.beta2);
    round_trip(&c);
    CHECK(config_load(NULL, 1, ov, &c, &err) == DDP_OK, "%s", err.msg);
    CHECK(c.optimizer.beta2 == 0.95, "GPT-2's AdamW beta2 when not set: %g", c.optimizer.beta2);
}

/* A run's record ddprun wrote before the check (here: a language model under SGD with its kind's
 * AdamW betas, as the writer then gave it) loads through config_load_record, as `ckpt export` and
 * `generate` read it; as a training config (config_load) it is refused like any file. */
static void test_record(void)
{
    config c;
    ddp_err err = {0};
    char *ov[] = {"model.kind=gpt2"};
    CHECK(config_load(NULL, 1, ov, &c, &err) == DDP_OK && c.optimizer.beta2 == 0.95, "%s", err.msg);
    c.optimizer.kind = OPT_SGD; /* what the writer recorded before: SGD beside betas [0.9, 0.95] */
    char dir[] = "/tmp/test_config_idle.XXXXXX", path[4096];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(path, sizeof path, "%s/config.resolved.yaml", dir);
    CHECK(config_write_resolved(&c, path, &err) == DDP_OK, "%s", err.msg);
    config back;
    CHECK(config_load_record(path, &back, &err) == DDP_OK && back.optimizer.beta2 == 0.95 &&
              back.optimizer.kind == OPT_SGD, "an earlier record loads as written: %s", err.msg);
    CHECK(config_load(path, 0, NULL, &back, &err) == DDP_EUSAGE, "as a training config it is refused");
    CHECK_STR_CONTAINS(err.msg, "optimizer.betas only with optimizer.kind adamw");
    /* checkpoint.signal: SIGTERM, which earlier runs took (and sent SIGUSR1 for): the record loads */
    c.optimizer.kind = OPT_ADAMW;
    CHECK(config_write_resolved(&c, path, &err) == DDP_OK, "%s", err.msg);
    static char text[65536];
    FILE *f = fopen(path, "r+");
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    text[n] = '\0';
    char *at = strstr(text, "signal: SIGUSR1");
    CHECK(f && at, "the record names its signal");
    if (f && at) {
        memcpy(at, "signal: SIGTERM", strlen("signal: SIGTERM"));
        rewind(f);
        fwrite(text, 1, n, f);
    }
    if (f)
        fclose(f);
    CHECK(config_load_record(path, &back, &err) == DDP_OK && back.checkpoint.stop_signal == SIGUSR1,
          "a record's SIGTERM loads as the SIGUSR1 its run sent: %s", err.msg);
    CHECK(config_load(path, 0, NULL, &back, &err) == DDP_EUSAGE, "as a training config it is refused");
    CHECK_STR_CONTAINS(err.msg, "checkpoint.signal: expected one of SIGUSR1, SIGUSR2, got \"SIGTERM\"");
    unlink(path);
    rmdir(dir);
}

static void test_anchored(void)
{
    config c;
    ddp_err err = {0};
    char *ov[] = {"model.kind=gpt2", "run.dir=runs/a", "data.path=/data/kjv", "checkpoint.init_from=./gpt2.bin",
                  "checkpoint.resume=a/ckpt-00000002.ddp"};
    CHECK(config_load(NULL, 5, ov, &c, &err) == DDP_OK, "%s", err.msg);
    CHECK(config_anchor_paths(&c, "/work/x", &err) == DDP_OK, "%s", err.msg);
    CHECK(!strcmp(c.run.dir, "/work/x/runs/a"), "c.run.dir: %s", c.run.dir);
    CHECK(!strcmp(c.data.path, "/data/kjv"), "c.data.path: %s", c.data.path);
    CHECK(!strcmp(c.checkpoint.init_from, "/work/x/./gpt2.bin"), "c.checkpoint.init_from: %s", c.checkpoint.init_from);
    CHECK(!strcmp(c.checkpoint.resume_path, "/work/x/a/ckpt-00000002.ddp"), "c.checkpoint.resume_path: %s", c.checkpoint.resume_path);
    CHECK(!strcmp(c.checkpoint.dir, ""), "c.checkpoint.dir: %s", c.checkpoint.dir);
    static char deep[CFG_PATH_MAX];
    memset(deep, 'd', sizeof deep - 4);
    deep[0] = '/';
    deep[sizeof deep - 4] = '\0';
    CHECK(config_load(NULL, 2, ov, &c, &err) == DDP_OK, "%s", err.msg);
    CHECK(config_anchor_paths(&c, deep, &err) == DDP_EUSAGE, "runs/a in a %zu-byte directory", strlen(deep));
    CHECK_STR_CONTAINS(err.msg, "run.dir runs/a in the working directory /ddd");
    /* a directory whose name is not UTF-8 (Latin-1's é) is refused, c untouched: the record keeps
     * its paths as given rather than fail to be YAML; a UTF-8 one is taken */
    CHECK(config_load(NULL, 2, ov, &c, &err) == DDP_OK, "%s", err.msg);
    CHECK(config_anchor_paths(&c, "/data/caf\xe9", &err) == DDP_EUSAGE, "a Latin-1 working directory");
    CHECK_STR_CONTAINS(err.msg, "not UTF-8");
    CHECK(!strcmp(c.run.dir, "runs/a"), "c.run.dir: %s", c.run.dir);
    CHECK(config_anchor_paths(&c, "/data/caf\xc3\xa9", &err) == DDP_OK, "%s", err.msg);
    CHECK(!strcmp(c.run.dir, "/data/caf\xc3\xa9/runs/a"), "c.run.dir: %s", c.run.dir);
    char path[] = "/tmp/ddp-anchor-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    CHECK(config_write_resolved(&c, path, &err) == DDP_OK, "the record with a UTF-8 directory: %s", err.msg);
    config back;
    CHECK(config_load_record(path, &back, &err) == DDP_OK && !strcmp(back.run.dir, c.run.dir), "read back: %s",
          err.msg);
    unlink(path);
}

/* A number equal to its default by value (-0 is 0) is the default. */
static void test_negative_zero(void)
{
    config c;
    CHECK(loads(2, (char *[]){"optimizer.schedule.kind=constant", "optimizer.schedule.min_lr=-0.0"}, &c),
          "min_lr -0 under a constant schedule");
}

int main(void)
{
    test_refused_where_idle();
    test_taken();
    test_lm_sgd_round_trip();
    test_record();
    test_anchored();
    test_negative_zero();
    return check_done("config_idle");
}
