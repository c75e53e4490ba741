/* test_config.c — config_load, overrides, error locations, the resolved writer and the hash.
 *
 * Bad inputs are hand-written fixtures in tests/config/data/ (and override strings here); every
 * expected FILE:LINE:COL below was counted from the fixture text as written, not taken from the
 * loader's output. Good inputs: configs/fashion_mlp.yaml and tests/config/data/minimal.yaml.
 * The config reference the key table makes is checked row by row against the defaults. */
#include "tests/check.h"
#include "config/config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "models/model_config.h"

/* "model.kind A, B or C": the language models' kinds as the config's messages list them, from the
 * kinds' descriptors (so a kind added changes no expectation here). */
static const char *lm_kinds(void)
{
    static char text[256];
    const char *names[16];
    int n = 0;
    for (int i = 0; i < model_n_config_kinds && n < 16; i++)
        if (model_config_kinds[i]->language_model)
            names[n++] = model_kind_names[i];
    size_t len = (size_t)snprintf(text, sizeof text, "model.kind");
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(text + len, sizeof text - len, "%s%s", i == 0 ? " " : i == n - 1 ? " or " : ", ",
                                names[i]);
    return text;
}

#ifndef CONFIG_TEST_DATA
#error "tests/meson.build defines CONFIG_TEST_DATA and DDP_SOURCE_ROOT"
#endif

static char path_buf[1024];

static const char *fixture(const char *name)
{
    snprintf(path_buf, sizeof path_buf, "%s/%s", CONFIG_TEST_DATA, name);
    return path_buf;
}

/* Loads (file, overrides) expecting DDP_EUSAGE whose message starts with WHERE and contains
 * `also` (may be NULL). WHERE is "L:C: key.path:" after the fixture's path, or
 * "<override N>:1:C: key.path:" (then file_rel only supplies the base file; NULL = minimal.yaml). */
static void expect_fail(const char *file_rel, int n_ov, char *const ov[], const char *where, const char *also)
{
    config c;
    ddp_err err = {0};
    memset(&c, 0x5a, sizeof c);
    const char *file = file_rel ? fixture(file_rel) : fixture("minimal.yaml");
    char prefix[4096];
    if (file_rel && strncmp(where, "<override", 9) != 0)
        snprintf(prefix, sizeof prefix, "%s:%s", file, where);
    else
        snprintf(prefix, sizeof prefix, "%s", where);
    int rc = config_load(file, n_ov, ov, &c, &err);
    CHECK_EQ_INT(rc, DDP_EUSAGE);
    CHECK_EQ_INT(err.code, DDP_EUSAGE);
    CHECK(strncmp(err.msg, prefix, strlen(prefix)) == 0, "message \"%s\" does not start with \"%s\"", err.msg, prefix);
    if (also)
        CHECK_STR_CONTAINS(err.msg, also);
    CHECK(((unsigned char *)&c)[0] == 0x5a && ((unsigned char *)&c)[sizeof c - 1] == 0x5a,
          "a failed load wrote into *out (%s)", where);
}

static void test_bad_files(void)
{
    expect_fail("lr_not_number.yaml", 0, NULL, "8:7: optimizer.lr:", "expected a positive number, got \"fast\"");
    expect_fail("key_typo.yaml", 0, NULL, "3:5: model.mlp.hiden:", "unknown key, did you mean 'model.mlp.hidden'?");
    expect_fail("old_flat_key.yaml", 0, NULL, "4:3: model.hidden:", "unknown key, did you mean 'model.mlp.hidden'?");
    expect_fail("key_wrong_section.yaml", 0, NULL, "5:1: lr:", "did you mean 'optimizer.lr'?");
    expect_fail("syntax_indent.yaml", 0, NULL, "3:7: YAML syntax error", "mapping values are not allowed");
    expect_fail("int_fraction.yaml", 0, NULL, "4:15: data.batch_size:", "expected an integer in [1, 2147483647], got \"1.5\"");
    expect_fail("int_overflow.yaml", 0, NULL, "6:11: train.epochs:", "(out of range)");
    expect_fail("scalar_for_mapping.yaml", 0, NULL, "5:12: optimizer:", "expected a mapping, got \"adamw\"");
    expect_fail("list_for_scalar.yaml", 0, NULL, "4:15: data.batch_size:", "got a list");
    expect_fail("scalar_for_list.yaml", 0, NULL, "3:13: model.mlp.hidden:", "expected a list of 1 to 16 layer sizes");
    expect_fail("hidden_zero.yaml", 0, NULL, "3:18: model.mlp.hidden[1]:", "got \"0\"");
    expect_fail("hidden_too_many.yaml", 0, NULL, "3:13: model.mlp.hidden:", "got a list of 17");
    expect_fail("betas_range.yaml", 0, NULL, "6:16: optimizer.betas[1]:", "expected a number in [0, 1), got \"1.0\"");
    expect_fail("enum_typo.yaml", 0, NULL, "4:17: model.mlp.activation:", "got \"rleu\"; did you mean 'relu'?");
    expect_fail("enum_unknown.yaml", 0, NULL, "1:9: device:", "expected one of auto, cpu, cuda, got \"metal\"");
    expect_fail("duplicate_key.yaml", 0, NULL, "8:3: optimizer.lr:", "duplicate key (first given at line 6, column 3)");
    expect_fail("missing_model.yaml", 0, NULL, "1:1: model:", "required section");
    expect_fail("nccl_on_cpu.yaml", 0, NULL, "8:12: ddp.backend:", "with device cpu (");
    expect_fail("bf16_over_mpi.yaml", 0, NULL, "7:12: ddp.backend:", "got ddp.backend mpi with ddp.grad_dtype bf16");
    expect_fail("warmup_over_max_steps.yaml", 0, NULL, "10:14: train.max_steps:", "warmup_steps <= train.max_steps");
    expect_fail("min_lr_above_lr.yaml", 0, NULL, "9:7: optimizer.lr:", "min_lr <= optimizer.lr");
    expect_fail("empty.yaml", 0, NULL, "1:1: expected a mapping", "got an empty file");
    expect_fail("top_level_list.yaml", 0, NULL, "1:1: expected a mapping", "got a list");
    expect_fail("bucket_zero.yaml", 0, NULL, "6:14: ddp.bucket_mb:", "expected a positive number, got \"0\"");
    expect_fail("keep_last_zero.yaml", 0, NULL, "6:14: checkpoint.keep_last:", "expected an integer in [1,");
    expect_fail("signal_unknown.yaml", 0, NULL, "6:11: checkpoint.signal:", "one of SIGUSR1, SIGUSR2, SIGTERM, SIGINT");
    expect_fail("quoted_number.yaml", 0, NULL, "6:7: optimizer.lr:", "(quoted, so a string)");
    expect_fail("two_documents.yaml", 0, NULL, "6:1: expected one YAML document", NULL);
    expect_fail("resume_typo.yaml", 0, NULL, "6:11: checkpoint.resume:", "did you mean 'never'?");
    expect_fail("unclosed_list.yaml", 0, NULL, "4:5: YAML syntax error", "while parsing a flow sequence at line 3, column 13");
}

static void test_bad_overrides(void)
{
    expect_fail(NULL, 1, (char *[]){"optimizer.lrr=0.1"}, "<override 1>:1:11: optimizer.lrr:",
                "did you mean 'optimizer.lr'?");
    expect_fail(NULL, 1, (char *[]){"optimizer.lr=fast"}, "<override 1>:1:14: optimizer.lr:",
                "expected a positive number, got \"fast\"");
    expect_fail(NULL, 1, (char *[]){"model.mlp.hidden=[256, 0]"}, "<override 1>:1:24: model.mlp.hidden[1]:", NULL);
    /* the flat MLP keys of earlier releases, and a typo of one, point at their model.mlp home */
    expect_fail(NULL, 1, (char *[]){"model.activation=gelu"}, "<override 1>:1:7: model.activation:",
                "unknown key, did you mean 'model.mlp.activation'?");
    expect_fail(NULL, 1, (char *[]){"model.hiden=[8]"}, "<override 1>:1:7: model.hiden:",
                "unknown key, did you mean 'model.mlp.hidden'?");
    expect_fail(NULL, 1, (char *[]){"model.mlp={hidden: [8], activaton: gelu}"}, "<override 1>:1:25: model.mlp.activaton:",
                "did you mean 'model.mlp.activation'?");
    expect_fail(NULL, 2, (char *[]){"train.epochs=2", "data.batch_size=-1"}, "<override 2>:1:17: data.batch_size:",
                "got \"-1\"");
    expect_fail(NULL, 1, (char *[]){"optimizer.lr"}, "<override 1>:1:1: expected key.path=value", NULL);
    expect_fail(NULL, 1, (char *[]){"optimizer.lr.x=1"}, "<override 1>:1:14: optimizer.lr:", "not a section");
    expect_fail(NULL, 1, (char *[]){"trian.epochs=3"}, "<override 1>:1:1: trian:", "did you mean 'train'?");
    expect_fail(NULL, 1, (char *[]){"data.synthetic={train: 0}"}, "<override 1>:1:24: data.synthetic.train:", NULL);
    expect_fail(NULL, 1, (char *[]){"train.grad_accum=1e3"}, "<override 1>:1:18: train.grad_accum:",
                "expected an integer");
    expect_fail(NULL, 1, (char *[]){"optimizer.lr="}, "<override 1>:1:14: optimizer.lr:", "got nothing");
    expect_fail(NULL, 1, (char *[]){"device=gpu"}, "<override 1>:1:8: device:", "got \"gpu\"");
    /* libyaml reports the unclosed flow list at the end of the text: column 4 of "[1,2" */
    expect_fail(NULL, 1, (char *[]){"model.mlp.hidden=[1,2"}, "<override 1>:1:22: YAML syntax error", NULL);
    /* contradictions are reported at the later of the two keys */
    expect_fail("nccl_on_cpu.yaml", 1, (char *[]){"device=cpu"}, "<override 1>:1:8: device:",
                "got device cpu with ddp.backend nccl");
    expect_fail(NULL, 2, (char *[]){"device=cpu", "ddp.backend=nccl"}, "<override 2>:1:13: ddp.backend:",
                "(<override 1>:1:8)");
    char *warm[] = {"optimizer.schedule.warmup_steps=10", "train.max_steps=5"};
    expect_fail(NULL, 2, warm, "<override 2>:1:17: train.max_steps:", NULL);
    expect_fail(NULL, 1, (char *[]){"optimizer.nesterov=true"}, "<override 1>:1:20: optimizer.nesterov:",
                "only with optimizer.kind sgd");
    /* YAML's "\0" escape: the readers go by C strings, so "cpu\0x" would pass as cpu */
    expect_fail(NULL, 1, (char *[]){"run.dir=\"a\\0b\""}, "<override 1>:1:9: run.dir:", "without NUL bytes");
    expect_fail(NULL, 1, (char *[]){"device=\"cpu\\0x\""}, "<override 1>:1:8: device:", "without NUL bytes");
    expect_fail(NULL, 1, (char *[]){"run={\"dir\\0x\": a}"}, "<override 1>:1:6: run:", "key name without NUL bytes");
}

static void test_unreadable(void)
{
    config c;
    ddp_err err = {0};
    const char *missing = fixture("no-such-file.yaml");
    CHECK_EQ_INT(config_load(missing, 0, NULL, &c, &err), DDP_EUSAGE);
    CHECK_STR_CONTAINS(err.msg, missing);
    CHECK_STR_CONTAINS(err.msg, "No such file or directory");
    CHECK_EQ_INT(config_load(CONFIG_TEST_DATA, 0, NULL, &c, &err), DDP_EUSAGE);
    CHECK_STR_CONTAINS(err.msg, "is a directory");
}

/* Values as written in configs/fashion_mlp.yaml. */
static void test_example(void)
{
    config c;
    ddp_err err = {0};
    int rc = config_load(DDP_SOURCE_ROOT "/configs/fashion_mlp.yaml", 0, NULL, &c, &err);
    CHECK(rc == DDP_OK, "fashion_mlp.yaml: %s", err.msg);
    CHECK(!strcmp(c.run.dir, "runs/fashion-mlp"), "run.dir %s", c.run.dir);
    CHECK_EQ_INT(c.run.seed, 1234);
    CHECK_EQ_INT(c.device, DEVICE_AUTO);
    CHECK_EQ_INT(c.model.kind, MODEL_MLP);
    CHECK_EQ_INT(c.model.opts.mlp.n_hidden, 2);
    CHECK_EQ_INT(c.model.opts.mlp.hidden[0], 1024);
    CHECK_EQ_INT(c.model.opts.mlp.hidden[1], 1024);
    CHECK(!strcmp(act_kind_name(c.model.opts.mlp.activation), "relu"), "activation");
    CHECK(!strcmp(c.data.path, "/usr/share/datasets/fashion-mnist"), "data.path %s", c.data.path);
    CHECK_EQ_INT(c.data.batch_size, 128);
    CHECK_EQ_INT(c.train.epochs, 3);
    CHECK_EQ_INT(c.train.log_every, 50);
    CHECK_EQ_INT(c.optimizer.kind, OPT_ADAMW);
    CHECK(c.optimizer.lr == 1.0e-3 && c.optimizer.eps == 1.0e-8, "lr %g eps %g", c.optimizer.lr, c.optimizer.eps);
    CHECK(c.optimizer.beta1 == 0.9 && c.optimizer.beta2 == 0.999, "betas");
    CHECK(c.optimizer.grad_clip == 1.0 && c.optimizer.weight_decay == 0.01, "clip/wd");
    CHECK_EQ_INT(c.optimizer.schedule.kind, SCHED_COSINE);
    CHECK_EQ_INT(c.optimizer.schedule.warmup_steps, 100);
    CHECK(c.ddp.bucket_mb == 25 && c.ddp.first_bucket_mb == 1 && c.ddp.timeout_s == 300, "ddp sizes");
    CHECK_EQ_INT(c.checkpoint.every_steps, 0);
    CHECK(c.checkpoint.every_minutes == 10, "every_minutes %g", c.checkpoint.every_minutes);
    CHECK_EQ_INT(c.checkpoint.keep_last, 3);
    CHECK_EQ_INT(c.checkpoint.resume, RESUME_AUTO);
    CHECK_EQ_INT(c.checkpoint.stop_signal, SIGUSR1);
    CHECK(strstr(c.source, "configs/fashion_mlp.yaml") != NULL, "source %s", c.source);
}

/* The defaults the brief specifies, through a file that sets nothing. */
static void test_defaults(void)
{
    config c;
    ddp_err err = {0};
    CHECK(config_load(fixture("minimal.yaml"), 0, NULL, &c, &err) == DDP_OK, "minimal: %s", err.msg);
    CHECK(!strcmp(c.run.dir, "runs/default") && c.run.seed == 0 && c.device == DEVICE_AUTO && !c.cuda.tf32, "run");
    CHECK(c.model.kind == MODEL_MLP && c.model.opts.mlp.n_hidden == 2 && c.model.opts.mlp.hidden[1] == 1024 &&
          c.model.opts.mlp.activation == ACT_RELU, "model");
    CHECK(c.data.kind == DATA_FASHION_MNIST && c.data.batch_size == 128 && c.data.shuffle && c.data.drop_last, "data");
    CHECK(c.data.synthetic_train == 60000 && c.data.synthetic_test == 10000 && c.data.synthetic_features == 784 &&
          c.data.synthetic_classes == 10, "synthetic");
    CHECK(c.train.epochs == 1 && c.train.max_steps == 0 && c.train.grad_accum == 1 && c.train.log_every == 50 &&
          c.train.eval, "train");
    CHECK(c.optimizer.kind == OPT_ADAMW && c.optimizer.lr == 1e-3 && c.optimizer.weight_decay == 0.01 &&
          c.optimizer.eps == 1e-8 && c.optimizer.momentum == 0.9 && !c.optimizer.nesterov &&
          c.optimizer.grad_clip == 0, "optimizer");
    CHECK(c.optimizer.schedule.kind == SCHED_CONSTANT && c.optimizer.schedule.warmup_steps == 0 &&
          c.optimizer.schedule.min_lr == 0, "schedule");
    CHECK(c.ddp.backend == BACKEND_AUTO && !c.ddp.debug && c.ddp.grad_dtype == GRAD_FP32, "ddp");
    CHECK(c.checkpoint.every_steps == 0 && c.checkpoint.every_minutes == 0 && c.checkpoint.keep_last == 3 &&
          c.checkpoint.resume == RESUME_AUTO && c.checkpoint.stop_signal == SIGUSR1 && !c.checkpoint.init_from[0],
          "checkpoint");
}

static void test_overrides_apply(void)
{
    config c;
    ddp_err err = {0};
    char *ov[] = {"model.mlp.hidden=[256,256,128]", "optimizer.lr=3e-4", "optimizer.lr=1.0e-3", "optimizer.kind=sgd",
                  "optimizer.nesterov=true", "optimizer.schedule={kind: cosine, warmup_steps: 5}",
                  "checkpoint.resume=runs/x/ckpt-000100.ddp", "checkpoint.signal=SIGUSR2", "run.seed=18446744073709551615",
                  "data.kind=synthetic", "data.synthetic.classes=3"};
    int rc = config_load(DDP_SOURCE_ROOT "/configs/fashion_mlp.yaml", 11, ov, &c, &err);
    CHECK(rc == DDP_OK, "overrides: %s", err.msg);
    CHECK_EQ_INT(c.model.opts.mlp.n_hidden, 3);
    CHECK_EQ_INT(c.model.opts.mlp.hidden[2], 128);
    CHECK(c.optimizer.lr == 1e-3, "later override wins: lr %g", c.optimizer.lr);
    CHECK(c.optimizer.kind == OPT_SGD && c.optimizer.nesterov, "sgd nesterov");
    CHECK(c.optimizer.schedule.kind == SCHED_COSINE && c.optimizer.schedule.warmup_steps == 5, "schedule mapping");
    CHECK(c.checkpoint.resume == RESUME_PATH && !strcmp(c.checkpoint.resume_path, "runs/x/ckpt-000100.ddp"), "resume");
    CHECK_EQ_INT(c.checkpoint.stop_signal, SIGUSR2);
    CHECK(c.run.seed == UINT64_MAX, "seed");
    CHECK(c.data.kind == DATA_SYNTHETIC && c.data.synthetic_classes == 3, "synthetic");
    rc = config_load(fixture("minimal.yaml"), 1, (char *[]){"optimizer.lr=3e-4"}, &c, &err);
    CHECK(rc == DDP_OK && c.optimizer.lr == 3e-4, "3e-4: rc %d lr %g", rc, c.optimizer.lr);
    /* a model kind's whole section as one flow mapping; what it leaves out keeps its default */
    rc = config_load(fixture("minimal.yaml"), 1, (char *[]){"model.mlp={activation: gelu}"}, &c, &err);
    CHECK(rc == DDP_OK, "model.mlp mapping: %s", err.msg);
    CHECK(c.model.opts.mlp.activation == ACT_GELU && c.model.opts.mlp.n_hidden == 2 &&
          c.model.opts.mlp.hidden[0] == 1024,
          "model.mlp={activation: gelu}");
}

/* Writes c, reads it back and demands the identical struct. */
static void round_trip(const config *a, const char *dir)
{
    char path[4096];
    config b;
    ddp_err err = {0};
    snprintf(path, sizeof path, "%s/resolved.yaml", dir);
    CHECK(config_write_resolved(a, path, &err) == DDP_OK, "write: %s", err.msg);
    CHECK(config_load(path, 0, NULL, &b, &err) == DDP_OK, "read back: %s", err.msg);
    memset(b.source, 0, sizeof b.source);
    memcpy(b.source, a->source, sizeof b.source);
    CHECK(memcmp(a, &b, sizeof b) == 0, "round trip through %s changed the config", path);
    CHECK(config_hash(a) == config_hash(&b), "hash changed in round trip");
}

static void test_round_trip(void)
{
    char dir[] = "/tmp/test_config.XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    config c;
    ddp_err err = {0};
    CHECK(config_load(DDP_SOURCE_ROOT "/configs/fashion_mlp.yaml", 0, NULL, &c, &err) == DDP_OK, "%s", err.msg);
    round_trip(&c, dir);
    char *ov[] = {"run.dir='runs/with \"quotes\" and: colon #x'", "optimizer.kind=sgd", "optimizer.lr=0.1",
                  "optimizer.betas=[0.1, 0.2]", "optimizer.eps=3e-300", "checkpoint.resume=never",
                  "checkpoint.signal=SIGINT", "model.mlp.hidden=[7]", "model.mlp.activation=gelu", "device=cpu",
                  "ddp.grad_dtype=fp32", "data.shuffle=false", "cuda.tf32=true", "checkpoint.every_minutes=0.1"};
    CHECK(config_load(fixture("minimal.yaml"), 14, ov, &c, &err) == DDP_OK, "%s", err.msg);
    round_trip(&c, dir);
    CHECK(config_load(fixture("minimal.yaml"), 1, (char *[]){"checkpoint.resume=/ckpt/a b.ddp"}, &c, &err) == DDP_OK,
          "%s", err.msg);
    round_trip(&c, dir);
    char path[4096];
    snprintf(path, sizeof path, "%s/resolved.yaml", dir);
    unlink(path);
    rmdir(dir);
}

static config example_with(const char *override)
{
    config c;
    ddp_err err = {0};
    char *ov[] = {(char *)override};
    int rc = config_load(DDP_SOURCE_ROOT "/configs/fashion_mlp.yaml", override ? 1 : 0, ov, &c, &err);
    CHECK(rc == DDP_OK, "%s: %s", override ? override : "-", err.msg);
    return c;
}

static uint64_t hash_with(const char *override)
{
    config c = example_with(override);
    return config_hash(&c);
}

/* The hashed settings as text (what checkpoints keep) change exactly when the hash does, and the
 * comparison names each setting that differs with both values. */
static void test_settings_text(const char *const same[], size_t n_same, const char *const differ[], size_t n_differ)
{
    config base = example_with(NULL);
    char *text = config_hashed_settings(&base);
    CHECK(text && strstr(text, "optimizer.lr=0.001\n"), "settings text: %s", text ? text : "(none)");
    for (size_t i = 0; i < n_same + n_differ; i++) {
        const char *ov = i < n_same ? same[i] : differ[i - n_same];
        config c = example_with(ov);
        char *other = config_hashed_settings(&c), changes[1024];
        bool equal = other && text && !strcmp(other, text);
        CHECK(equal == (i < n_same), "%s: settings text %s, hash %s", ov, equal ? "equal" : "differs",
              i < n_same ? "equal" : "differs");
        int named = config_settings_changes(text, strlen(text), &c, changes, sizeof changes);
        CHECK((named > 0) == (i >= n_same), "%s: %d named (%s)", ov, named, changes);
        free(other);
    }
    config c = example_with("run.seed=1"), d = example_with("optimizer.kind=sgd");
    char changes[1024];
    CHECK_EQ_INT(config_settings_changes(text, strlen(text), &c, changes, sizeof changes), 1);
    CHECK(strcmp(changes, "run.seed 1234 (this run: 1)") == 0, "%s", changes);
    CHECK(config_settings_changes(text, strlen(text), &d, changes, sizeof changes) >= 3, "%s", changes);
    CHECK_STR_CONTAINS(changes, "optimizer.kind adamw (this run: sgd)");
    CHECK_STR_CONTAINS(changes, "optimizer.betas [0.9, 0.999] (not used by this run)");
    CHECK_STR_CONTAINS(changes, "optimizer.momentum (not used by the saved run; this run: 0.9)");
    CHECK_EQ_INT(config_settings_changes(NULL, 0, &c, changes, sizeof changes), 0);
    CHECK(changes[0] == '\0', "nothing named without a record: %s", changes);
    free(text);
}

static void test_hash(void)
{
    uint64_t base = hash_with(NULL);
    const char *const same[] = {"run.dir=elsewhere", "train.log_every=7", "train.epochs=9", "train.max_steps=1000",
                          "checkpoint.keep_last=9", "checkpoint.every_steps=5", "checkpoint.resume=never",
                          "ddp.bucket_mb=50", "optimizer.momentum=0.5", "data.synthetic.train=5"};
    const char *const differ[] = {"optimizer.lr=0.002", "model.mlp.hidden=[1024,512]", "model.mlp.activation=gelu", "run.seed=1",
                            "data.batch_size=64", "data.shuffle=false", "train.grad_accum=2", "optimizer.kind=sgd",
                            "optimizer.betas=[0.9,0.99]", "optimizer.weight_decay=0", "data.kind=synthetic"};
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++)
        CHECK(hash_with(same[i]) == base, "%s changed the hash", same[i]);
    for (size_t i = 0; i < sizeof differ / sizeof differ[0]; i++)
        CHECK(hash_with(differ[i]) != base, "%s did not change the hash", differ[i]);
    test_settings_text(same, sizeof same / sizeof same[0], differ, sizeof differ / sizeof differ[0]);
}

/* checkpoint.init_from: empty by default, a path round-trips through the resolved config, not
 * hashed (a resume does not depend on how the first attempt started), GPT-2 only. */
static void test_init_from(void)
{
    config a, b;
    ddp_err err = {0};
    CHECK(config_load(DDP_SOURCE_ROOT "/configs/gpt2_kjv.yaml", 0, NULL, &a, &err) == DDP_OK, "%s", err.msg);
    CHECK(a.checkpoint.init_from[0] == '\0', "init_from default \"%s\"", a.checkpoint.init_from);
    char *ov[] = {"checkpoint.init_from=models/gpt2_124M.bin"};
    CHECK(config_load(DDP_SOURCE_ROOT "/configs/gpt2_kjv.yaml", 1, ov, &b, &err) == DDP_OK, "%s", err.msg);
    CHECK(!strcmp(b.checkpoint.init_from, "models/gpt2_124M.bin"), "init_from \"%s\"", b.checkpoint.init_from);
    CHECK(config_hash(&a) == config_hash(&b), "checkpoint.init_from changed the hash");
    char dir[] = "/tmp/test_config.XXXXXX", path[4096];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    round_trip(&a, dir);
    round_trip(&b, dir);
    /* set back to none, as a later override may */
    char *ov2[] = {"checkpoint.init_from=models/x.bin", "checkpoint.init_from=\"\""};
    CHECK(config_load(DDP_SOURCE_ROOT "/configs/gpt2_kjv.yaml", 2, ov2, &b, &err) == DDP_OK, "%s", err.msg);
    CHECK(b.checkpoint.init_from[0] == '\0', "init_from=\"\" left \"%s\"", b.checkpoint.init_from);
    snprintf(path, sizeof path, "%s/resolved.yaml", dir);
    unlink(path);
    rmdir(dir);
    char want[512];
    snprintf(want, sizeof want, "only with %s, got checkpoint.init_from", lm_kinds());
    expect_fail(NULL, 1, (char *[]){"checkpoint.init_from=gpt2_124M.bin"},
                "<override 1>:1:22: checkpoint.init_from:", want);
    expect_fail(NULL, 1, (char *[]){"checkpoint.init_from=[a]"}, "<override 1>:1:22: checkpoint.init_from:",
                "expected a path, or \"\" for none, got a list");
}

/* A model.gpt2 shape key left out with checkpoint.init_from is 0 after the load (nothing judged
 * against it, data.seq_len included, and no resolved config written), until config_take_shape
 * gives it the file's value: a key set to another value is refused naming it, both values and the
 * file, as is a data.seq_len over the file's block_size, the config unchanged. */
static void test_init_from_shape(void)
{
    static const char *const names[] = {"n_layer", "n_head", "n_embd", "n_positions", "vocab_size"};
    const config_shape from = {.gpt2 = {2, 4, 64, 32, 300}};
    config c, kept;
    ddp_err err = {0};
    char *ov[] = {"model.kind=gpt2", "data.kind=tokens", "data.seq_len=2048", "checkpoint.init_from=hf",
                  "model.gpt2.n_head=4"};
    CHECK(config_load(NULL, 5, ov, &c, &err) == DDP_OK, "data.seq_len over the default block_size: %s", err.msg);
    CHECK(config_shape_pending(&c), "the shape left to checkpoint.init_from is not pending");
    CHECK(c.model.opts.gpt2.n_layer == 0 && c.model.opts.gpt2.n_head == 4 && c.model.opts.gpt2.block_size == 0 &&
          c.model.opts.gpt2.vocab_size == 0, "shape %lld %lld %lld", (long long)c.model.opts.gpt2.n_layer,
          (long long)c.model.opts.gpt2.n_head, (long long)c.model.opts.gpt2.block_size);
    CHECK(config_write_resolved(&c, "/nonexistent-dir/resolved.yaml", &err) == DDP_ERUNTIME, "pending written");
    CHECK_STR_CONTAINS(err.msg, "model.gpt2 shape is not yet taken from checkpoint.init_from");
    memcpy(&kept, &c, sizeof c);
    CHECK(config_take_shape(&c, &from, "hf/config.json", names, &err) == DDP_EUSAGE, "seq_len 2048 taken");
    CHECK_STR_CONTAINS(err.msg, "data.seq_len: expected data.seq_len <= model.gpt2.block_size, got data.seq_len "
                       "2048 with model.gpt2.block_size 32 (n_positions 32 of checkpoint.init_from's hf/config.json)");
    CHECK(memcmp(&c, &kept, sizeof c) == 0, "a refused take changed the config");
    c.data.seq_len = 32;
    CHECK(config_take_shape(&c, &from, "hf/config.json", names, &err) == DDP_OK, "%s", err.msg);
    CHECK(!config_shape_pending(&c) && memcmp(&c.model.opts.gpt2, &from.gpt2, sizeof from.gpt2) == 0,
          "shape not taken");

    char *other[] = {"model.kind=gpt2", "checkpoint.init_from=hf", "model.gpt2.n_head=8"};
    CHECK(config_load(NULL, 3, other, &c, &err) == DDP_OK, "%s", err.msg);
    CHECK(config_take_shape(&c, &from, "hf/config.json", names, &err) == DDP_EUSAGE, "n_head 8 taken");
    CHECK_STR_CONTAINS(err.msg, "model.gpt2.n_head is 8, but checkpoint.init_from's hf/config.json has n_head 4");
    CHECK(c.model.opts.gpt2.n_head == 8 && c.model.opts.gpt2.n_layer == 0, "a refused take changed the shape");

    /* a shape beyond the keys' ranges (a folder allows more) or with uneven heads is refused */
    char *pending[] = {"model.kind=gpt2", "checkpoint.init_from=hf"};
    CHECK(config_load(NULL, 2, pending, &c, &err) == DDP_OK, "%s", err.msg);
    config_shape wide = from;
    wide.gpt2.n_embd = 1 << 17;
    CHECK(config_take_shape(&c, &wide, "hf/config.json", names, &err) == DDP_EUSAGE, "n_embd 2^17 taken");
    CHECK_STR_CONTAINS(err.msg, "hf/config.json has n_embd 131072, outside model.gpt2.n_embd's range 1..65536");
    config_shape uneven = from;
    uneven.gpt2.n_head = 3;
    CHECK(config_take_shape(&c, &uneven, "hf/config.json", names, &err) == DDP_EUSAGE, "n_head 3 taken");
    CHECK_STR_CONTAINS(err.msg, "n_embd 64 is not divisible by n_head 3");
    CHECK(config_shape_pending(&c), "a refused take filled the shape");

    char *none[] = {"model.kind=gpt2"};
    CHECK(config_load(NULL, 1, none, &c, &err) == DDP_OK, "%s", err.msg);
    CHECK(!config_shape_pending(&c) && c.model.opts.gpt2.n_layer == 12, "no init_from: not the default shape");
}

/* The same for model.llama: every key of llama_shape left out is pending (tie_embeddings, a bool, and
 * the doubles by where they were set, not by their value), ffn_hidden is not the multiple_of rule's
 * width, and the take gives each key the folder's value; a key set to another value (an int, a
 * double, the bool) is refused naming both values and the file, as are an odd head size, uneven
 * key/value heads and a data.seq_len over max_position_embeddings. */
static void test_init_from_llama_shape(void)
{
    static const char *const names[] = {"num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                                        "hidden_size", "intermediate_size", "max_position_embeddings",
                                        "vocab_size", "rope_theta", "rms_norm_eps", "tie_word_embeddings"};
    const config_shape from = {.llama = {2, 4, 2, 64, 176, 32, 300, 500000, 1e-6, true}};
    config c, kept;
    ddp_err err = {0};
    char *ov[] = {"model.kind=llama", "data.kind=tokens", "data.seq_len=2048", "checkpoint.init_from=hf"};
    CHECK(config_load(NULL, 4, ov, &c, &err) == DDP_OK, "data.seq_len over the default block_size: %s", err.msg);
    CHECK(config_shape_pending(&c), "the llama shape left to checkpoint.init_from is not pending");
    CHECK(c.model.opts.llama.n_layer == 0 && c.model.opts.llama.ffn_hidden == 0 && c.model.opts.llama.rope_theta == 0 &&
          !c.model.opts.llama.tie_embeddings, "ffn_hidden %lld (the multiple_of rule's?), rope_theta %g",
          (long long)c.model.opts.llama.ffn_hidden, c.model.opts.llama.rope_theta);
    CHECK(config_write_resolved(&c, "/nonexistent-dir/resolved.yaml", &err) == DDP_ERUNTIME, "pending written");
    CHECK_STR_CONTAINS(err.msg, "model.llama shape is not yet taken from checkpoint.init_from");
    memcpy(&kept, &c, sizeof c);
    CHECK(config_take_shape(&c, &from, "hf/config.json", names, &err) == DDP_EUSAGE, "seq_len 2048 taken");
    CHECK_STR_CONTAINS(err.msg, "data.seq_len: expected data.seq_len <= model.llama.block_size, got data.seq_len "
                       "2048 with model.llama.block_size 32 (max_position_embeddings 32 of checkpoint.init_from's "
                       "hf/config.json)");
    CHECK(memcmp(&c, &kept, sizeof c) == 0, "a refused take changed the config");
    c.data.seq_len = 32;
    CHECK(config_take_shape(&c, &from, "hf/config.json", names, &err) == DDP_OK, "%s", err.msg);
    CHECK(!config_shape_pending(&c) && c.model.opts.llama.n_layer == 2 && c.model.opts.llama.n_kv_head == 2 &&
          c.model.opts.llama.ffn_hidden == 176 && c.model.opts.llama.block_size == 32 &&
          c.model.opts.llama.vocab_size == 300 && c.model.opts.llama.rope_theta == 500000 &&
          c.model.opts.llama.norm_eps == 1e-6 && c.model.opts.llama.tie_embeddings,
          "shape not taken");
    char path[] = "/tmp/test_config_llama_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    close(fd);
    config again;
    CHECK(config_write_resolved(&c, path, &err) == DDP_OK, "%s", err.msg);
    CHECK(config_load(path, 0, NULL, &again, &err) == DDP_OK, "resolved: %s", err.msg);
    CHECK(config_hash(&again) == config_hash(&c) && !memcmp(&again.model, &c.model, sizeof c.model),
          "the taken shape does not read back from the resolved config");
    unlink(path);

    /* keys set to the folder's values are kept; another value is refused naming both and the file */
    static const struct { const char *set, *msg; } other[] = {
        {"model.llama.n_kv_head=4", "model.llama.n_kv_head is 4, but checkpoint.init_from's hf/config.json has "
                                    "num_key_value_heads 2; leave model.llama.n_kv_head out"},
        {"model.llama.ffn_hidden=0", "model.llama.ffn_hidden is 256, but checkpoint.init_from's hf/config.json has "
                                     "intermediate_size 176"},
        {"model.llama.rope_theta=10000", "model.llama.rope_theta is 10000, but checkpoint.init_from's hf/config.json "
                                         "has rope_theta 500000"},
        {"model.llama.tie_embeddings=false", "model.llama.tie_embeddings is false, but checkpoint.init_from's "
                                             "hf/config.json has tie_word_embeddings true"},
    };
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
        char *o[] = {"model.kind=llama", "checkpoint.init_from=hf", "model.llama.n_embd=64", (char *)other[i].set};
        CHECK(config_load(NULL, 4, o, &c, &err) == DDP_OK, "%s: %s", other[i].set, err.msg);
        memcpy(&kept, &c, sizeof c);
        CHECK(config_take_shape(&c, &from, "hf/config.json", names, &err) == DDP_EUSAGE, "%s taken", other[i].set);
        CHECK_STR_CONTAINS(err.msg, other[i].msg);
        CHECK(memcmp(&c, &kept, sizeof c) == 0, "%s: a refused take changed the config", other[i].set);
    }
    char *same[] = {"model.kind=llama", "checkpoint.init_from=hf", "model.llama.norm_eps=1e-6",
                    "model.llama.tie_embeddings=true", "model.llama.ffn_hidden=176"};
    CHECK(config_load(NULL, 5, same, &c, &err) == DDP_OK, "%s", err.msg);
    CHECK(config_take_shape(&c, &from, "hf/config.json", names, &err) == DDP_OK, "the folder's values set: %s",
          err.msg);

    /* the folder's shape breaking the model's rules */
    char *pending[] = {"model.kind=llama", "checkpoint.init_from=hf"};
    CHECK(config_load(NULL, 2, pending, &c, &err) == DDP_OK, "%s", err.msg);
    config_shape odd = from;
    odd.llama.n_head = 64;
    odd.llama.n_kv_head = 1;
    CHECK(config_take_shape(&c, &odd, "hf/config.json", names, &err) == DDP_EUSAGE, "head size 1 taken");
    CHECK_STR_CONTAINS(err.msg, "hidden_size 64 / num_attention_heads 64 is an odd head size");
    config_shape kv = from;
    kv.llama.n_kv_head = 3;
    CHECK(config_take_shape(&c, &kv, "hf/config.json", names, &err) == DDP_EUSAGE, "n_kv_head 3 taken");
    CHECK_STR_CONTAINS(err.msg, "num_attention_heads 4 is not divisible by num_key_value_heads 3");
    config_shape theta = from;
    theta.llama.rope_theta = -1;
    CHECK(config_take_shape(&c, &theta, "hf/config.json", names, &err) == DDP_EUSAGE, "rope_theta -1 taken");
    CHECK_STR_CONTAINS(err.msg, "hf/config.json has rope_theta -1, but model.llama.rope_theta must be a positive");
    CHECK(config_shape_pending(&c), "a refused take filled the shape");

    /* without checkpoint.init_from: the defaults, ffn_hidden by the rule */
    char *none[] = {"model.kind=llama"};
    CHECK(config_load(NULL, 1, none, &c, &err) == DDP_OK, "%s", err.msg);
    CHECK(!config_shape_pending(&c) && c.model.opts.llama.n_layer == 12 && c.model.opts.llama.ffn_hidden == 2048,
          "no init_from: n_layer %lld ffn_hidden %lld", (long long)c.model.opts.llama.n_layer,
          (long long)c.model.opts.llama.ffn_hidden);
}

/* precision: fp32 by default; bf16 on a GPT-2 makes gradients travel in bf16 unless ddp.grad_dtype
 * (or ddp.backend mpi) says otherwise, and is refused on the CPU backend and for the MLP, at the
 * key set last. */
static void test_precision(void)
{
    config c;
    ddp_err err = {0};
    const char *kjv = DDP_SOURCE_ROOT "/configs/gpt2_kjv.yaml";
    CHECK(config_load(kjv, 0, NULL, &c, &err) == DDP_OK, "%s", err.msg);
    CHECK(c.precision == PRECISION_FP32 && c.ddp.grad_dtype == GRAD_FP32, "default precision %d", (int)c.precision);
    CHECK(config_load(kjv, 1, (char *[]){"precision=bf16"}, &c, &err) == DDP_OK, "%s", err.msg);
    CHECK(c.precision == PRECISION_BF16 && c.ddp.grad_dtype == GRAD_BF16, "bf16: grad_dtype %d", (int)c.ddp.grad_dtype);
    CHECK(config_load(kjv, 2, (char *[]){"precision=bf16", "ddp.grad_dtype=fp32"}, &c, &err) == DDP_OK, "%s",
          err.msg);
    CHECK(c.ddp.grad_dtype == GRAD_FP32, "an explicit ddp.grad_dtype fp32 was overridden");
    CHECK(config_load(kjv, 3, (char *[]){"precision=bf16", "device=cuda", "ddp.backend=mpi"}, &c, &err) == DDP_OK,
          "%s", err.msg);
    CHECK(c.ddp.grad_dtype == GRAD_FP32, "bf16 gradients derived for the MPI backend");
    expect_fail(NULL, 2, (char *[]){"device=cpu", "precision=bf16"}, "<override 2>:1:11: precision:",
                "precision bf16 only with device cuda or auto");
    char want[512];
    snprintf(want, sizeof want, "precision bf16 only with %s", lm_kinds());
    expect_fail(NULL, 1, (char *[]){"precision=bf16"}, "<override 1>:1:11: precision:", want);
    expect_fail(NULL, 1, (char *[]){"precision=fp16"}, "<override 1>:1:11: precision:", "expected one of fp32, bf16");
}

/* model.kind llama: its defaults (AdamW betas (0.9, 0.95) as GPT-2's), ffn_hidden 0 resolved by
 * Llama's multiple_of rule (the number is what the resolved config and the hash hold), a language
 * model (tokens, bf16), and each rule across its keys reported at the key set last, naming both. */
static void test_llama(void)
{
    config c, d;
    ddp_err err = {0};
    CHECK(config_load(NULL, 1, (char *[]){"model.kind=llama"}, &c, &err) == DDP_OK, "%s", err.msg);
    const llama_shape *s = &c.model.opts.llama;
    CHECK(s->n_layer == 12 && s->n_head == 12 && s->n_kv_head == 4 && s->n_embd == 768 && s->block_size == 1024 &&
          s->vocab_size == 32000 && s->rope_theta == 10000 && s->norm_eps == 1e-5 && !s->tie_embeddings,
          "llama defaults");
    CHECK(s->ffn_hidden == 2048 && c.model.opts.llama_multiple_of == 256, "ffn_hidden %lld", (long long)s->ffn_hidden);
    CHECK(c.optimizer.beta1 == 0.9 && c.optimizer.beta2 == 0.95, "llama betas %g %g", c.optimizer.beta1,
          c.optimizer.beta2);
    /* Llama 2 7B: 2·16384/3 = 10922, up to 11008; multiple_of 1 keeps 2·256/3 = 170 */
    char *l7b[] = {"model.kind=llama", "model.llama={n_embd: 4096, n_head: 32, n_kv_head: 8}"};
    CHECK(config_load(NULL, 2, l7b, &d, &err) == DDP_OK && d.model.opts.llama.ffn_hidden == 11008, "7B ffn %lld: %s",
          (long long)d.model.opts.llama.ffn_hidden, err.msg);
    char *one[] = {"model.kind=llama", "model.llama={n_embd: 64, n_head: 4, multiple_of: 1}"};
    CHECK(config_load(NULL, 2, one, &d, &err) == DDP_OK && d.model.opts.llama.ffn_hidden == 170, "ffn %lld: %s",
          (long long)d.model.opts.llama.ffn_hidden, err.msg);
    char *set[] = {"model.kind=llama", "model.llama.ffn_hidden=176", "model.llama.multiple_of=1000"};
    CHECK(config_load(NULL, 3, set, &d, &err) == DDP_OK && d.model.opts.llama.ffn_hidden == 176, "ffn %lld: %s",
          (long long)d.model.opts.llama.ffn_hidden, err.msg);
    /* the width decides the hash, not how it was given */
    char *given[] = {"model.kind=llama", "model.llama.ffn_hidden=2048", "model.llama.multiple_of=512"};
    CHECK(config_load(NULL, 3, given, &d, &err) == DDP_OK && config_hash(&c) == config_hash(&d), "%s", err.msg);
    char *wider[] = {"model.kind=llama", "model.llama.multiple_of=1000"};
    CHECK(config_load(NULL, 2, wider, &d, &err) == DDP_OK && d.model.opts.llama.ffn_hidden == 3000 &&
          config_hash(&c) != config_hash(&d), "multiple_of 1000: ffn %lld", (long long)d.model.opts.llama.ffn_hidden);
    char *other[] = {"model.kind=llama", "model.llama.tie_embeddings=true", "model.llama.rope_theta=500000",
                     "model.llama.norm_eps=1e-6", "model.llama.n_kv_head=12", "data.kind=tokens", "data.seq_len=1024",
                     "device=cuda", "precision=bf16"};
    CHECK(config_load(NULL, 9, other, &d, &err) == DDP_OK, "%s", err.msg);
    CHECK(d.model.opts.llama.tie_embeddings && d.model.opts.llama.rope_theta == 500000 &&
          d.model.opts.llama.norm_eps == 1e-6 && d.model.opts.llama.n_kv_head == 12 && d.ddp.grad_dtype == GRAD_BF16,
          "llama overrides");
    CHECK(config_hash(&c) != config_hash(&d), "the llama keys did not change the hash");
    char dir[] = "/tmp/test_config.XXXXXX", path[4096];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    round_trip(&c, dir);
    round_trip(&d, dir);
    snprintf(path, sizeof path, "%s/resolved.yaml", dir);
    unlink(path);
    rmdir(dir);

    expect_fail(NULL, 2, (char *[]){"model.kind=llama", "model.llama.n_head=5"},
                "<override 2>:1:20: model.llama.n_head:",
                "expected model.llama.n_embd divisible by model.llama.n_head, got model.llama.n_head 5 with "
                "model.llama.n_embd 768 (the default)");
    expect_fail(NULL, 3, (char *[]){"model.kind=llama", "model.llama.n_head=32", "model.llama.n_embd=96"},
                "<override 3>:1:20: model.llama.n_embd:",
                "expected an even head size model.llama.n_embd / model.llama.n_head (RoPE rotates its two halves), "
                "got model.llama.n_embd 96 with model.llama.n_head 32 (<override 2>:1:20)");
    expect_fail(NULL, 2, (char *[]){"model.kind=llama", "model.llama.n_kv_head=5"},
                "<override 2>:1:23: model.llama.n_kv_head:",
                "expected model.llama.n_head divisible by model.llama.n_kv_head, got model.llama.n_kv_head 5 with "
                "model.llama.n_head 12 (the default)");
    expect_fail(NULL, 3, (char *[]){"model.kind=llama", "data.kind=tokens", "data.seq_len=2048"},
                "<override 3>:1:14: data.seq_len:",
                "expected data.seq_len <= model.llama.block_size, got data.seq_len 2048 with model.llama.block_size "
                "1024 (the default)");
    expect_fail(NULL, 2, (char *[]){"model.kind=llama", "model.llama.n_kv_head=0"},
                "<override 2>:1:23: model.llama.n_kv_head:", "expected an integer in [1, 1024], got \"0\"");
    expect_fail(NULL, 2, (char *[]){"model.kind=llama", "model.llama.rope_theta=0"},
                "<override 2>:1:24: model.llama.rope_theta:", "expected a positive number");
    {   /* a Llama may start from a Hugging Face folder (the job checks it is one) */
        config l;
        ddp_err lerr = {0};
        CHECK(config_load(fixture("minimal.yaml"), 2, (char *[]){"model.kind=llama", "checkpoint.init_from=hf-llama"}, &l,
                          &lerr) == DDP_OK, "llama with checkpoint.init_from: %s", lerr.msg);
    }
    expect_fail(NULL, 2, (char *[]){"model.kind=gpt2", "model.llama.n_layer=2"}, "<override 2>:",
                "expected model.llama only with model.kind llama");
    char want[512];
    snprintf(want, sizeof want, "data.kind tokens only with a language model (%s)", lm_kinds());
    expect_fail(NULL, 2, (char *[]){"model.kind=mlp", "data.kind=tokens"}, "<override 2>:1:11: data.kind:", want);
    /* the only refusal of packed rows for a model that is not a language model: the trainer has none */
    expect_fail(NULL, 3, (char *[]){"model.kind=mlp", "data.kind=tokens", "data.packed=true"},
                "<override 2>:1:11: data.kind:", want);
    snprintf(want, sizeof want, "train.recompute none with a model without blocks to recompute (selective and full: %s)",
             lm_kinds());
    expect_fail(NULL, 1, (char *[]){"train.recompute=full"}, "<override 1>:1:17: train.recompute:", want);
}

/* One row of the reference's key table: "| `key` | type | `default` | allowed | meaning |", cut at
 * each "|" that is not escaped ("\\|" inside a cell), spaces trimmed; 0 when line is no key row. */
static int reference_row(char *line, char **cells, int n)
{
    if (strncmp(line, "| `", 3) != 0)
        return 0;
    int got = 0;
    char *start = line + 1;
    for (char *p = start; *p && got < n; p++) {
        if (*p != '|' || p[-1] == '\\')
            continue;
        *p = '\0';
        while (*start == ' ')
            start++;
        for (char *e = p - 1; e >= start && *e == ' '; e--)
            *e = '\0';
        cells[got++] = start;
        start = p + 1;
    }
    return got;
}

/* The reference (ddprun config reference, docs/config-reference.md) has a type and a description
 * for every key, and each row's default is the key's default: given as an override, it changes
 * nothing (a model section's keys with that model kind). */
static void test_reference(void)
{
    char *text = NULL, *cells[5];
    size_t len = 0;
    ddp_err err = {0};
    FILE *f = open_memstream(&text, &len);
    CHECK(f && config_write_reference(f, &err) == DDP_OK, "config_write_reference: %s", err.msg);
    fclose(f);
    config defaults, c;
    int rows = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (reference_row(line, cells, 5) != 5)
            continue;
        rows++;
        char key[256], def[1100], ov[1400];
        snprintf(key, sizeof key, "%.*s", (int)strlen(cells[0]) - 2, cells[0] + 1);
        snprintf(def, sizeof def, "%.*s", (int)strlen(cells[2]) - 2, cells[2] + 1);
        CHECK(*cells[1] && strlen(cells[4]) > 3, "%s: no type or description in \"%s\"", key, line);
        /* a kind's key (model.KIND.x) is set with model.kind KIND, against that kind's defaults */
        char kind[64] = "";
        for (int i = 0; model_kind_names[i]; i++) {
            size_t n = strlen(model_kind_names[i]);
            if (!strncmp(key, "model.", 6) && !strncmp(key + 6, model_kind_names[i], n) && key[6 + n] == '.')
                snprintf(kind, sizeof kind, "model.kind=%s", model_kind_names[i]);
        }
        snprintf(ov, sizeof ov, "%s=%s", key, def);
        char *ovs[] = {kind, ov};
        int with_kind = kind[0] ? 1 : 0;
        CHECK(config_load(NULL, with_kind, ovs, &defaults, &err) == DDP_OK, "%s defaults: %s", kind, err.msg);
        int rc = config_load(NULL, 1 + with_kind, ovs + 1 - with_kind, &c, &err);
        CHECK(rc == DDP_OK, "%s: the reference's default refused: %s", ov, err.msg);
        CHECK(rc || memcmp(&c, &defaults, sizeof c) == 0, "%s: not the default", ov);
    }
    CHECK(rows >= 60, "%d key rows in the reference", rows);
    free(text);
}

/* train.global_batch: the per-rank split derived at each world size (data.batch_size as set, or the
 * largest divisor up to it with train.micro_batch auto), a world size that does not divide refused
 * naming the numbers and the world sizes that would; the hash covers the global batch instead of
 * the split, and the per-rank mode's hashed settings are those it had before the key existed. */
static void expect_split(const config *c, int world, int64_t batch, int64_t accum)
{
    batch_split s = {0};
    ddp_err err = {0};
    CHECK(config_batch_split(c, world, &s, &err) == DDP_OK, "world %d: %s", world, err.msg);
    CHECK(s.batch == batch && s.accum == accum, "world %d: batch %lld x accum %lld, expected %lld x %lld", world,
          (long long)s.batch, (long long)s.accum, (long long)batch, (long long)accum);
}

static void expect_split_refused(const config *c, int world, const char *says)
{
    batch_split s = {0};
    ddp_err err = {0};
    CHECK_EQ_INT(config_batch_split(c, world, &s, &err), DDP_EUSAGE);
    CHECK_STR_CONTAINS(err.msg, says);
}

static void test_global_batch(void)
{
    config c, d;
    ddp_err err = {0};
    const char *mlp = DDP_SOURCE_ROOT "/configs/fashion_mlp.yaml";
    CHECK(config_load(mlp, 0, NULL, &c, &err) == DDP_OK, "%s", err.msg);
    CHECK(c.train.global_batch == 0 && c.train.micro_batch == MICRO_BATCH_FIXED, "defaults %lld %d",
          (long long)c.train.global_batch, (int)c.train.micro_batch);
    char *text = config_hashed_settings(&c);
    CHECK(text && strstr(text, "data.batch_size=") && strstr(text, "train.grad_accum=") &&
          !strstr(text, "train.global_batch") && !strstr(text, "train.micro_batch"),
          "per-rank mode's hashed settings: %s", text ? text : "(none)");
    free(text);
    expect_split(&c, 5, c.data.batch_size, c.train.grad_accum); /* per rank: any world size */
    CHECK_EQ_INT(config_world_at_most(&c, 5), 5);

    /* fixed: 48 = 4 per rank x world x accumulation */
    char *fixed[] = {"train.global_batch=48", "data.batch_size=4"};
    CHECK(config_load(mlp, 2, fixed, &c, &err) == DDP_OK, "%s", err.msg);
    expect_split(&c, 4, 4, 3);
    expect_split(&c, 2, 4, 6);
    expect_split(&c, 3, 4, 4);
    expect_split(&c, 12, 4, 1);
    expect_split_refused(&c, 5, "train.global_batch 48 cannot be split over 5 ranks: 48 samples do not divide "
                                "into 5 equal shares; world sizes that would: 1, 2, 3, 4, 6, 12 (train.micro_batch: "
                                "auto allows every divisor of train.global_batch)");
    expect_split_refused(&c, 8, "48 / (8 ranks x data.batch_size 4) is not a whole number of micro-steps; world "
                                "sizes that would: 1, 2, 3, 4, 6, 12");
    CHECK_EQ_INT(config_world_at_most(&c, 5), 4);
    CHECK_EQ_INT(config_world_at_most(&c, 11), 6);
    char *hashed = config_hashed_settings(&c);
    CHECK(hashed && strstr(hashed, "train.global_batch=48\n") && !strstr(hashed, "data.batch_size") &&
          !strstr(hashed, "train.grad_accum"), "global mode's hashed settings: %s", hashed ? hashed : "(none)");
    /* the split is not hashed: another data.batch_size or micro_batch continues the same run */
    char *other_split[] = {"train.global_batch=48", "data.batch_size=16", "train.micro_batch=auto"};
    CHECK(config_load(mlp, 3, other_split, &d, &err) == DDP_OK, "%s", err.msg);
    CHECK(config_hash(&c) == config_hash(&d), "the per-rank split changed the hash");
    char changes[1024];
    CHECK_EQ_INT(config_settings_changes(hashed, strlen(hashed), &d, changes, sizeof changes), 0);
    CHECK(config_load(mlp, 2, (char *[]){"train.global_batch=96", "data.batch_size=4"}, &d, &err) == DDP_OK, "%s", err.msg);
    CHECK_EQ_INT(config_settings_changes(hashed, strlen(hashed), &d, changes, sizeof changes), 1);
    CHECK(!strcmp(changes, "train.global_batch 48 (this run: 96)"), "%s", changes);
    CHECK(config_load(mlp, 0, NULL, &d, &err) == DDP_OK, "%s", err.msg);
    CHECK(config_hash(&c) != config_hash(&d), "global batch 48 hashed as the per-rank config");
    CHECK(config_settings_changes(hashed, strlen(hashed), &d, changes, sizeof changes) >= 3, "%s", changes);
    CHECK_STR_CONTAINS(changes, "train.global_batch 48 (not used by this run)");
    free(hashed);

    /* auto: the largest per-rank batch <= data.batch_size that divides global / world */
    char *autob[] = {"train.global_batch=12", "data.batch_size=4", "train.micro_batch=auto"};
    CHECK(config_load(mlp, 3, autob, &c, &err) == DDP_OK, "%s", err.msg);
    expect_split(&c, 4, 3, 1);
    expect_split(&c, 2, 3, 2);
    expect_split(&c, 3, 4, 1);
    expect_split(&c, 1, 4, 3);
    expect_split(&c, 12, 1, 1);
    expect_split_refused(&c, 5, "train.global_batch 12 cannot be split over 5 ranks: 12 samples do not divide "
                                "into 5 equal shares; world sizes that would: 1, 2, 3, 4, 6, 12");
    CHECK_EQ_INT(config_world_at_most(&c, 5), 4);
    char *prime[] = {"train.global_batch=2147483629", "data.batch_size=1000", "train.micro_batch=auto"}; /* prime */
    CHECK(config_load(mlp, 3, prime, &c, &err) == DDP_OK, "%s", err.msg);
    expect_split_refused(&c, 2, "world sizes that would: 2147483629");
    expect_split_refused(&c, 1, "it would take 2147483629 micro-steps, more than train.grad_accum's 1048576");
    char dir[] = "/tmp/test_config.XXXXXX", path[4096];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    round_trip(&c, dir);
    snprintf(path, sizeof path, "%s/resolved.yaml", dir);
    unlink(path);
    rmdir(dir);

    /* rules across keys, at the key set later */
    expect_fail(NULL, 2, (char *[]){"train.grad_accum=2", "train.global_batch=12"},
                "<override 2>:1:20: train.global_batch:", "train.grad_accum 1 with train.global_batch");
    expect_fail(NULL, 2, (char *[]){"train.global_batch=100", "data.batch_size=8"}, "<override 2>:1:17: data.batch_size:",
                "train.global_batch a multiple of data.batch_size with train.micro_batch fixed");
    expect_fail(NULL, 2, (char *[]){"train.global_batch=128", "data.drop_last=false"},
                "<override 2>:1:16: data.drop_last:", "data.drop_last true with train.global_batch");
    expect_fail(NULL, 1, (char *[]){"train.micro_batch=auto"}, "<override 1>:1:19: train.micro_batch:",
                "train.micro_batch auto only with train.global_batch > 0");
    expect_fail(NULL, 1, (char *[]){"train.micro_batch=some"}, "<override 1>:1:19: train.micro_batch:",
                "expected one of fixed, auto");
}

int main(void)
{
    test_example();
    test_defaults();
    test_overrides_apply();
    test_bad_files();
    test_bad_overrides();
    test_unreadable();
    test_round_trip();
    test_hash();
    test_init_from();
    test_init_from_shape();
    test_init_from_llama_shape();
    test_precision();
    test_llama();
    test_reference();
    test_global_batch();
    CHECK(!strcmp(act_kind_name(ACT_GELU), "gelu"), "act_kind_name");
    return check_done("test_config");
}
