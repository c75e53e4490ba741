/* test_config_batch.c — what the config says once the world size is known: train.global_batch's
 * split over the ranks (config_batch_split, config_world_at_most), and where each key was set
 * (config_where), which the checks a running job makes name. Expected line:column values were
 * counted from the fixture text (tests/config/data/global_batch.yaml). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "config_test_util.h"

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

/* Where each key was set, kept for the checks a running job makes: the file's line and column of
 * the value, an override's, or the file alone for a default; the world-size check starts with it. */
static void test_where(void)
{
    config c;
    ddp_err err = {0};
    char where[CFG_WHERE_MAX], want[CFG_WHERE_MAX];
    const char *file = fixture("global_batch.yaml");
    CHECK(config_load(file, 0, NULL, &c, &err) == DDP_OK, "%s", err.msg);
    snprintf(want, sizeof want, "%s:5:17", file);
    CHECK_STR_EQ(config_where(&c, "train.global_batch", where, sizeof where), want);
    snprintf(want, sizeof want, "%s:3:20", file);
    CHECK_STR_EQ(config_where(&c, "data.batch_size", where, sizeof where), want);
    CHECK_STR_EQ(config_where(&c, "train.epochs", where, sizeof where), file); /* a default */
    CHECK_STR_EQ(config_where(&c, "train.no_such_key", where, sizeof where), file);
    snprintf(want, sizeof want, "%s:5:17: train.global_batch 48 cannot be split over 5 ranks", file);
    batch_split s;
    CHECK_EQ_INT(config_batch_split(&c, 5, &s, &err), DDP_EUSAGE);
    CHECK(strncmp(err.msg, want, strlen(want)) == 0, "\"%s\" does not start with \"%s\"", err.msg, want);

    char *later[] = {"data.batch_size=2", "train.global_batch=12"}; /* an override's place wins over the file's */
    CHECK(config_load(file, 2, later, &c, &err) == DDP_OK, "%s", err.msg);
    CHECK_STR_EQ(config_where(&c, "train.global_batch", where, sizeof where), "<override 2>:1:20");
    CHECK_STR_EQ(config_where(&c, "data.batch_size", where, sizeof where), "<override 1>:1:17");
    CHECK(config_load(NULL, 0, NULL, &c, &err) == DDP_OK, "%s", err.msg);
    CHECK_STR_EQ(config_where(&c, "train.global_batch", where, sizeof where), "the config");
}

static void test_global_batch(void)
{
    config c, d;
    ddp_err err = {0};
    const char *mlp = DDP_SOURCE_ROOT "/configs/fashion_mlp.yaml";
    CHECK(config_load(mlp, 0, NULL, &c, &err) == DDP_OK, "%s", err.msg);
    CHECK(c.train.global_batch == 0 && c.train.micro_batch == MICRO_BATCH_FIXED, "defaults %lld %d",
          (long long)c.train.global_batch, (int)c.train.micro_batch);
    char *text = config_settings(&c, SETTINGS_RESUME);
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
    char *hashed = config_settings(&c, SETTINGS_RESUME);
    CHECK(hashed && strstr(hashed, "train.global_batch=48\n") && !strstr(hashed, "data.batch_size") &&
          !strstr(hashed, "train.grad_accum"), "global mode's hashed settings: %s", hashed ? hashed : "(none)");
    /* the split is not hashed: another data.batch_size or micro_batch continues the same run */
    char *other_split[] = {"train.global_batch=48", "data.batch_size=16", "train.micro_batch=auto"};
    CHECK(config_load(mlp, 3, other_split, &d, &err) == DDP_OK, "%s", err.msg);
    CHECK(config_hash(&c) == config_hash(&d), "the per-rank split changed the hash");
    char changes[1024];
    CHECK_EQ_INT(config_settings_changes(hashed, strlen(hashed), &d, SETTINGS_RESUME, changes, sizeof changes), 0);
    CHECK(config_load(mlp, 2, (char *[]){"train.global_batch=96", "data.batch_size=4"}, &d, &err) == DDP_OK, "%s", err.msg);
    CHECK_EQ_INT(config_settings_changes(hashed, strlen(hashed), &d, SETTINGS_RESUME, changes, sizeof changes), 1);
    CHECK(!strcmp(changes, "train.global_batch 48 (this run: 96)"), "%s", changes);
    CHECK(config_load(mlp, 0, NULL, &d, &err) == DDP_OK, "%s", err.msg);
    CHECK(config_hash(&c) != config_hash(&d), "global batch 48 hashed as the per-rank config");
    CHECK(config_settings_changes(hashed, strlen(hashed), &d, SETTINGS_RESUME, changes, sizeof changes) >= 3, "%s",
          changes);
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
    round_trip(&c);

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
    test_global_batch();
    test_where();
    return check_done("test_config_batch");
}
