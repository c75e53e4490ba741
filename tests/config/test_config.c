/* test_config.c — config_load, overrides, error locations, the resolved writer and the hash.
 *
 * Bad inputs are hand-written fixtures in tests/config/data/ (and override strings here); every
 * expected FILE:LINE:COL below was counted from the fixture text as written, not taken from the
 * loader's output. Good inputs: configs/fashion_mlp.yaml and tests/config/data/minimal.yaml.
 * The config reference the key table makes is checked row by row against the defaults. The model
 * kinds' own keys (init_from, precision, the Llama's) are test_config_models.c's; the global
 * batch's split and where keys were set, test_config_batch.c's. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "config_test_util.h"

static void test_bad_files(void)
{
    expect_fail("lr_not_number.yaml", 0, NULL, "8:7: optimizer.lr:", "expected a positive number, got \"fast\"");
    expect_fail("key_typo.yaml", 0, NULL, "3:5: model.mlp.hiden:", "unknown key, did you mean 'model.mlp.hidden'?");
    expect_fail("old_flat_key.yaml", 0, NULL, "4:3: model.hidden:", "unknown key, did you mean 'model.mlp.hidden'?");
    expect_fail("key_wrong_section.yaml", 0, NULL, "5:1: lr:", "did you mean 'optimizer.lr'?");
    expect_fail("dotted_key.yaml", 0, NULL, "4:23: optimizer.schedule.kind:",
                "a dotted name in a file: write it nested, schedule: {kind: ...}");
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
    /* the section must be the file's: an override does not stand in for it */
    expect_fail("missing_model.yaml", 1, (char *[]){"model.kind=mlp"}, "1:1: model:", "required section");
    expect_fail("nccl_on_cpu.yaml", 0, NULL, "8:12: ddp.backend:", "with device cpu (");
    expect_fail("alias.yaml", 0, NULL, "5:11: YAML alias *n: not taken", "write the value");
    config ok; /* bf16 gradients travel over MPI too (its own bf16 sum) */
    ddp_err why = {0};
    CHECK(config_load(fixture("bf16_grads_mpi.yaml"), 0, NULL, &ok, &why) == DDP_OK &&
          ok.ddp.grad_dtype == GRAD_BF16 && ok.ddp.backend == BACKEND_MPI, "bf16 gradients over MPI: %s", why.msg);
    expect_fail("warmup_over_max_steps.yaml", 0, NULL, "10:14: train.max_steps:", "warmup_steps <= train.max_steps");
    expect_fail("min_lr_above_lr.yaml", 0, NULL, "9:7: optimizer.lr:", "min_lr <= optimizer.lr");
    expect_fail("empty.yaml", 0, NULL, "1:1: expected a mapping", "got an empty file");
    expect_fail("top_level_list.yaml", 0, NULL, "1:1: expected a mapping", "got a list");
    expect_fail("bucket_zero.yaml", 0, NULL, "6:14: ddp.bucket_mb:", "expected a positive number, got \"0\"");
    expect_fail("keep_last_zero.yaml", 0, NULL, "6:14: checkpoint.keep_last:", "expected an integer in [1,");
    expect_fail("signal_unknown.yaml", 0, NULL, "6:11: checkpoint.signal:", "one of SIGUSR1, SIGUSR2");
    /* SIGTERM and SIGINT mpirun does not forward: a config naming one is refused, not replaced */
    expect_fail(NULL, 1, (char *[]){"checkpoint.signal=SIGTERM"}, "<override 1>:1:19: checkpoint.signal:",
                "one of SIGUSR1, SIGUSR2, got \"SIGTERM\"");
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
    /* a number too small for a double is not 0 ("off" for optimizer.grad_clip) */
    expect_fail(NULL, 1, (char *[]){"optimizer.grad_clip=1e-400"}, "<override 1>:1:21: optimizer.grad_clip:",
                "got \"1e-400\" (out of range)");
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
    /* more steps than the profiler's window holds stamps for is refused at load, not when it opens */
    expect_fail(NULL, 1, (char *[]){"train.profile_steps=300000"}, "<override 1>:1:21: train.profile_steps:",
                "expected an integer in [0, 1024]");
    expect_fail(NULL, 1, (char *[]){"device=gpu"}, "<override 1>:1:8: device:", "got \"gpu\"");
    expect_fail(NULL, 1, (char *[]){"checkpoint.notice_poll_s=1e10"}, "<override 1>:1:26: checkpoint.notice_poll_s:",
                "expected a number in [0.1, 120], got \"1e10\"");
    expect_fail(NULL, 1, (char *[]){"checkpoint.notice_poll_s=0.01"}, "<override 1>:1:26:", "[0.1, 120]");
    /* a shell word's " #..." would be a YAML comment, dropping what the user typed */
    expect_fail(NULL, 1, (char *[]){"data.batch_size=64 #128"}, "<override 1>:1:20: data.batch_size:",
                "\"#128\" after the value is a YAML comment");
    expect_fail(NULL, 1, (char *[]){"run.dir='/x' \t# y"}, "<override 1>:1:15: run.dir:", "YAML comment");
    /* a block mapping or list ends where the text does, past the comment: its scalars' ends are looked at */
    expect_fail(NULL, 1, (char *[]){"data=path: /data/run #2"}, "<override 1>:1:22: data:",
                "\"#2\" after the value is a YAML comment");
    expect_fail(NULL, 1, (char *[]){"model.mlp.hidden=- 256 #512"}, "<override 1>:1:24: model.mlp.hidden:",
                "\"#512\" after the value is a YAML comment");
    /* libyaml's marks count characters: "é" is one, two bytes */
    expect_fail(NULL, 1, (char *[]){"run.dir=/runs/\xc3\xa9 #x"}, "<override 1>:1:17: run.dir:", "\"#x\" after");
    config accepted;
    ddp_err aerr = {0};
    CHECK(config_load(fixture("minimal.yaml"), 1, (char *[]){"run.dir=/runs/M\xc3\xbcller-L\xc3\xbc" "denscheid#2"},
                      &accepted, &aerr) == DDP_OK && !strcmp(accepted.run.dir, "/runs/M\xc3\xbcller-L\xc3\xbc" "denscheid#2"),
          "a '#' inside a plain value after two-byte characters: %s", aerr.msg);
    /* an override is one value: a second document after it, or a value that would begin one, is
     * refused, not cut short or read otherwise than the same text in a file */
    expect_fail(NULL, 1, (char *[]){"optimizer.lr=0.5\n---\n0.2"}, "<override 1>:1:22: optimizer.lr:",
                "expected one YAML document, got a second one");
    expect_fail(NULL, 1, (char *[]){"run.dir=--- x"}, "<override 1>:1:9: run.dir:",
                "a value beginning --- would begin a YAML document: quote it");
    expect_fail(NULL, 1, (char *[]){"run.dir=---\rx"}, "<override 1>:1:9: run.dir:", /* \r ends a line too */
                "a value beginning --- would begin a YAML document: quote it");
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
    /* white space alone: a stray quote or an unset shell variable, never a folder anyone means */
    expect_fail(NULL, 1, (char *[]){"run.dir='  '"}, "<override 1>:1:9: run.dir:", "expected a non-empty path, got \"  \"");
    expect_fail(NULL, 1, (char *[]){"checkpoint.init_from=\"\\t\""}, "<override 1>:1:22: checkpoint.init_from:",
                "expected a path, or \"\" for none");
    expect_fail(NULL, 1, (char *[]){"checkpoint.resume=' '"}, "<override 1>:1:19: checkpoint.resume:",
                "expected auto, never or a checkpoint path");
    expect_fail(NULL, 1, (char *[]){"checkpoint.upload_cmd='   '"}, "<override 1>:1:23: checkpoint.upload_cmd:",
                "expected a shell command");
    expect_fail(NULL, 1, (char *[]){"device=\"cpu\\0x\""}, "<override 1>:1:8: device:", "without NUL bytes");
    /* a plain true or false is YAML's boolean, never a path (a slip for "off"); a command may be `false` */
    expect_fail(NULL, 1, (char *[]){"checkpoint.init_from=false"}, "<override 1>:1:22: checkpoint.init_from:",
                "expected a path, or \"\" for none, got the boolean false (quote it, \"false\", for a path of that name)");
    expect_fail(NULL, 1, (char *[]){"run.dir=True"}, "<override 1>:1:9: run.dir:",
                "expected a non-empty path, got the boolean True");
    expect_fail(NULL, 1, (char *[]){"checkpoint.resume=FALSE"}, "<override 1>:1:19: checkpoint.resume:",
                "expected auto, never or a checkpoint path, got the boolean FALSE");
    expect_fail(NULL, 1, (char *[]){"optimizer.betas=[!!float \"0.9\\0junk\", 0.95]"},
                "<override 1>:1:18: optimizer.betas[0]:", "without NUL bytes");
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
    /* key= clears a path or a command, as key: with nothing after it does in a file */
    rc = config_load(fixture("minimal.yaml"), 4,
                     (char *[]){"checkpoint.init_from=/a/b", "checkpoint.upload_cmd=cp {path} /x",
                                "checkpoint.init_from=", "checkpoint.upload_cmd= "}, &c, &err);
    CHECK(rc == DDP_OK && !c.checkpoint.init_from[0] && !c.checkpoint.upload_cmd[0],
          "init_from= and upload_cmd= clear them: rc %d, \"%s\", \"%s\" (%s)", rc, c.checkpoint.init_from,
          c.checkpoint.upload_cmd, err.msg);
    /* quoted (or tagged !!str), true and false are the text; a command may be the program false */
    rc = config_load(fixture("minimal.yaml"), 3,
                     (char *[]){"checkpoint.dir='false'", "run.dir=!!str true", "checkpoint.upload_cmd=false"}, &c, &err);
    CHECK(rc == DDP_OK && !strcmp(c.checkpoint.dir, "false") && !strcmp(c.run.dir, "true") &&
          !strcmp(c.checkpoint.upload_cmd, "false"), "quoted false, !!str true, the command false: rc %d (%s)", rc,
          err.msg);
}

static void test_round_trip(void)
{
    char dir[] = "/tmp/test_config.XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    config c;
    ddp_err err = {0};
    CHECK(config_load(DDP_SOURCE_ROOT "/configs/fashion_mlp.yaml", 0, NULL, &c, &err) == DDP_OK, "%s", err.msg);
    round_trip(&c);
    char *ov[] = {"run.dir='runs/with \"quotes\" and: colon #x'", "optimizer.schedule.kind=wsd", "optimizer.lr=0.1",
                  "optimizer.betas=[0.1, 0.2]", "optimizer.eps=3e-300", "checkpoint.resume=never",
                  "checkpoint.signal=SIGUSR2", "model.mlp.hidden=[7]", "model.mlp.activation=gelu", "device=cpu",
                  "ddp.grad_dtype=fp32", "data.shuffle=false", "cuda.tf32=true", "checkpoint.every_minutes=0.1"};
    CHECK(config_load(fixture("minimal.yaml"), 14, ov, &c, &err) == DDP_OK, "%s", err.msg);
    round_trip(&c);
    CHECK(config_load(fixture("minimal.yaml"), 1, (char *[]){"checkpoint.resume=/ckpt/a b.ddp"}, &c, &err) == DDP_OK,
          "%s", err.msg);
    round_trip(&c);
    /* a config whose file name YAML cannot hold (Latin-1, a newline, a control byte, U+2028 or
     * U+0085 that YAML reads as line breaks, a C1 control) or can (Japanese): the resolved file's
     * comment that names it must not stop it reading again */
    char odd[4096], text[8192];
    FILE *in = fopen(fixture("minimal.yaml"), "rb");
    size_t n = in ? fread(text, 1, sizeof text, in) : 0;
    if (in)
        fclose(in);
    static const char *const names[] = {"caf\xe9\nb: 1\x01.yaml", "a\xe2\x80\xa8" "b: 1.yaml", "c\xc2\x81\xc2\x85.yaml",
                                        "\xe6\x97\xa5\xe6\x9c\xac.yaml"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(odd, sizeof odd, "%s/%s", dir, names[i]);
        FILE *out = fopen(odd, "wb");
        CHECK(out && fwrite(text, 1, n, out) == n && n > 0, "copy minimal.yaml to %s", odd);
        if (out)
            fclose(out);
        CHECK(config_load(odd, 0, NULL, &c, &err) == DDP_OK, "%s", err.msg);
        round_trip(&c);
        unlink(odd);
    }
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
    char *text = config_settings(&base, SETTINGS_RESUME);
    CHECK(text && strstr(text, "optimizer.lr=0.001\n"), "settings text: %s", text ? text : "(none)");
    for (size_t i = 0; i < n_same + n_differ; i++) {
        const char *ov = i < n_same ? same[i] : differ[i - n_same];
        config c = example_with(ov);
        char *other = config_settings(&c, SETTINGS_RESUME), changes[1024];
        bool equal = other && text && !strcmp(other, text);
        CHECK(equal == (i < n_same), "%s: settings text %s, hash %s", ov, equal ? "equal" : "differs",
              i < n_same ? "equal" : "differs");
        int named = config_settings_changes(text, strlen(text), &c, SETTINGS_RESUME, changes, sizeof changes);
        CHECK((named > 0) == (i >= n_same), "%s: %d named (%s)", ov, named, changes);
        free(other);
    }
    config c = example_with("run.seed=1"), d = example_with("optimizer.kind=sgd");
    char changes[1024];
    CHECK_EQ_INT(config_settings_changes(text, strlen(text), &c, SETTINGS_RESUME, changes, sizeof changes), 1);
    CHECK(strcmp(changes, "run.seed 1234 (this run: 1)") == 0, "%s", changes);
    CHECK(config_settings_changes(text, strlen(text), &d, SETTINGS_RESUME, changes, sizeof changes) >= 3, "%s",
          changes);
    CHECK_STR_CONTAINS(changes, "optimizer.kind adamw (this run: sgd)");
    CHECK_STR_CONTAINS(changes, "optimizer.betas [0.9, 0.999] (not used by this run)");
    CHECK_STR_CONTAINS(changes, "optimizer.momentum (not used by the saved run; this run: 0.9)");
    CHECK_EQ_INT(config_settings_changes(NULL, 0, &c, SETTINGS_RESUME, changes, sizeof changes), 0);
    CHECK(changes[0] == '\0', "nothing named without a record: %s", changes);
    free(text);
}

/* optimizer.schedule: the four kinds by name, decay_fraction's default and range, and what each
 * kind makes the hash cover (min_lr with a decaying schedule, decay_fraction with wsd alone, so the
 * checkpoints of cosine runs keep their hash). The example config's schedule is cosine. */
static void test_schedule_keys(void)
{
    const char *names[] = {"constant", "cosine", "linear", "wsd"};
    const sched_kind kinds[] = {SCHED_CONSTANT, SCHED_COSINE, SCHED_LINEAR, SCHED_WSD};
    for (int i = 0; i < 4; i++) {
        char ov[64];
        snprintf(ov, sizeof ov, "optimizer.schedule.kind=%s", names[i]);
        config c = example_with(ov);
        CHECK(c.optimizer.schedule.kind == kinds[i], "%s: kind %d", names[i], (int)c.optimizer.schedule.kind);
        CHECK(c.optimizer.schedule.decay_fraction == 0.2, "%s: decay_fraction %g", names[i],
              c.optimizer.schedule.decay_fraction);
    }
    config one;
    ddp_err one_err = {0};
    CHECK(config_load(DDP_SOURCE_ROOT "/configs/fashion_mlp.yaml", 2,
                      (char *[]){"optimizer.schedule.kind=wsd", "optimizer.schedule.decay_fraction=1"}, &one,
                      &one_err) == DDP_OK && one.optimizer.schedule.decay_fraction == 1.0,
          "decay_fraction 1 taken: %s", one_err.msg);
    expect_fail(NULL, 1, (char *[]){"optimizer.schedule.decay_fraction=0"},
                "<override 1>:1:35: optimizer.schedule.decay_fraction:", "a number in (0, 1]");
    expect_fail(NULL, 1, (char *[]){"optimizer.schedule.decay_fraction=1.5"},
                "<override 1>:1:35: optimizer.schedule.decay_fraction:", "a number in (0, 1]");
    expect_fail(NULL, 1, (char *[]){"optimizer.schedule.kind=step"}, "<override 1>:1:25: optimizer.schedule.kind:",
                "expected one of constant, cosine, linear, wsd");
    /* pairs (schedule, setting) where the setting counts change the hash (where it has no effect it
     * is refused: test_config_idle.c) */
    const struct { const char *kind, *setting; bool hashed; } rules[] = {
        {"cosine", "optimizer.schedule.min_lr=0.0001", true},
        {"linear", "optimizer.schedule.min_lr=0.0001", true},
        {"wsd", "optimizer.schedule.min_lr=0.0001", true},
        {"wsd", "optimizer.schedule.decay_fraction=0.5", true},
    };
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
        char kind[64];
        snprintf(kind, sizeof kind, "optimizer.schedule.kind=%s", rules[i].kind);
        config a, b;
        ddp_err err = {0};
        const char *yaml = DDP_SOURCE_ROOT "/configs/fashion_mlp.yaml";
        CHECK(config_load(yaml, 1, (char *[]){kind}, &a, &err) == DDP_OK, "%s", err.msg);
        CHECK(config_load(yaml, 2, (char *[]){kind, (char *)rules[i].setting}, &b, &err) == DDP_OK, "%s", err.msg);
        CHECK((config_hash(&a) != config_hash(&b)) == rules[i].hashed, "%s under %s: hash %s", rules[i].setting,
              rules[i].kind, rules[i].hashed ? "unchanged" : "changed");
    }
}

static void test_hash(void)
{
    uint64_t base = hash_with(NULL);
    const char *const same[] = {"run.dir=elsewhere", "train.log_every=7", "train.epochs=9", "train.max_steps=1000",
                          "checkpoint.keep_last=9", "checkpoint.every_steps=5", "checkpoint.resume=never",
                          "ddp.bucket_mb=50", "ddp.timeout_s=60", "train.eval=false"};
    const char *const differ[] = {"optimizer.lr=0.002", "model.mlp.hidden=[1024,512]", "model.mlp.activation=gelu", "run.seed=1",
                            "data.batch_size=64", "data.shuffle=false", "train.grad_accum=2", "optimizer.kind=sgd",
                            "optimizer.betas=[0.9,0.99]", "optimizer.weight_decay=0", "data.kind=synthetic"};
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++)
        CHECK(hash_with(same[i]) == base, "%s changed the hash", same[i]);
    /* -0 is 0: the same value, the same hash */
    CHECK(hash_with("optimizer.weight_decay=-0.0") == hash_with("optimizer.weight_decay=0"), "-0.0 hashes apart from 0");
    for (size_t i = 0; i < sizeof differ / sizeof differ[0]; i++)
        CHECK(hash_with(differ[i]) != base, "%s did not change the hash", differ[i]);
    test_settings_text(same, sizeof same / sizeof same[0], differ, sizeof differ / sizeof differ[0]);
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
        memcpy(c.origin, defaults.origin, sizeof c.origin); /* the override set one key: only its value counts */
        CHECK(rc || memcmp(&c, &defaults, sizeof c) == 0, "%s: not the default", ov);
    }
    CHECK(rows >= 60, "%d key rows in the reference", rows);
    free(text);
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
    test_schedule_keys();
    test_reference();
    CHECK(!strcmp(act_kind_name(ACT_GELU), "gelu"), "act_kind_name");
    return check_done("test_config");
}
