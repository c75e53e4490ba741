/* test_config_limits.c — the config loader's bounds and YAML's explicit tags: nesting deeper
 * than CFG_MAX_DEPTH (100,000 nested lists in a file, and in an override) is refused naming where;
 * a file over CFG_MAX_FILE_BYTES is refused, and so is an endless stream (a FIFO that a writer
 * keeps filling), read only up to the limit; `!!str 32` is the string "32" (an integer key
 * refuses it like "32" in quotes), `!!int "32"` the integer, an unknown tag is refused, on a key
 * name too; !!int, !!float, !!bool and !!null whose text is not that, or on a key that does not
 * take that kind of value, are refused; a byte that is not UTF-8 is named at its line and column.
 * Each case can be run alone: test_config_limits CASE. */
#include "tests/check.h"
#include "config/config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[64];

static const char *write_file(const char *name, const char *text, size_t len)
{
    static char path[160];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(text, 1, len, f) == len && fclose(f) == 0, "writing %s", path);
    return path;
}

/* Loads path (with overrides) expecting a usage error that contains each of the texts. */
static void expect_refused(const char *path, int n_ov, char *const ov[], const char *a, const char *b)
{
    config c;
    ddp_err err = {0};
    int rc = config_load(path, n_ov, ov, &c, &err);
    CHECK_EQ_INT(rc, DDP_EUSAGE);
    CHECK_STR_CONTAINS(err.msg, a);
    if (b)
        CHECK_STR_CONTAINS(err.msg, b);
}

static void test_depth(void)
{
    size_t n = 100000;
    char *text = malloc(2 * n + 64);
    int head = snprintf(text, 2 * n + 64, "model: {}\ndata: {}\nrun: ");
    memset(text + head, '[', n);
    memset(text + head + n, ']', n);
    text[head + 2 * n] = '\n';
    const char *path = write_file("deep.yaml", text, (size_t)head + 2 * n + 1);
    char where[200];
    /* the top-level mapping is level 1, run's lists levels 2, 3, ...: the 32nd '[' is level 33 */
    snprintf(where, sizeof where, "%s:3:%d:", path, 6 + 31);
    expect_refused(path, 0, NULL, where, "nested deeper than 32 levels");
    char over[300];
    snprintf(over, sizeof over, "model.mlp.hidden=%.*s", 40, text + head);
    expect_refused(NULL, 1, (char *[]){over}, "<override 1>:1:", "nested deeper than 32 levels");
    /* the nesting a config really has is far from the bound */
    config c;
    ddp_err err = {0};
    CHECK(config_load(NULL, 1, (char *[]){"model={kind: mlp, mlp: {hidden: [8, 8]}}"}, &c, &err) == DDP_OK, "%s",
          err.msg);
    free(text);
}

static void test_size(void)
{
    size_t n = CFG_MAX_FILE_BYTES + 1;
    char *text = malloc(n);
    memset(text, ' ', n);
    memcpy(text, "model: {}\ndata: {}\n#", 20);
    text[n - 1] = '\n';
    const char *path = write_file("big.yaml", text, n);
    expect_refused(path, 0, NULL, path, "larger than 1048576 bytes");
    /* exactly at the limit is fine */
    const char *ok = write_file("limit.yaml", text, n - 1);
    config c;
    ddp_err err = {0};
    CHECK(config_load(ok, 0, NULL, &c, &err) == DDP_OK, "%s", err.msg);
    free(text);
}

/* A FIFO whose writer never stops: the loader reads up to the limit and refuses it. */
static void test_endless_stream(void)
{
    char fifo[128];
    snprintf(fifo, sizeof fifo, "%s/endless.yaml", dir);
    CHECK(mkfifo(fifo, 0600) == 0, "mkfifo: %s", strerror(errno));
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGPIPE, SIG_IGN);
        int fd = open(fifo, O_WRONLY);
        static const char head[] = "model: {}\ndata: {}\n", line[] = "# and so on, for ever\n";
        if (fd < 0 || write(fd, head, sizeof head - 1) < 0)
            _exit(1);
        while (write(fd, line, sizeof line - 1) > 0) {
        }
        _exit(0);
    }
    expect_refused(fifo, 0, NULL, fifo, "larger than 1048576 bytes");
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

/* A byte that is not UTF-8 is named at its line and column (libyaml gives only its offset). */
static void test_bad_encoding(void)
{
    static const char text[] = "model: {}\ndata: {}\ntrain:\n  epochs: 3\n  eval: true\nrun: {dir: 'caf\xff'}\n";
    expect_refused(write_file("bad_utf8.yaml", text, strlen(text)), 0, NULL, "bad_utf8.yaml:6:16:",
                   "YAML read error at byte 66: invalid leading UTF-8 octet");
    /* in an override, the column counts the characters before it too, not their bytes */
    expect_refused(write_file("good.yaml", "model: {}\ndata: {}\n", 19), 1, (char *[]){"run.dir=/caf\xc3\xa9\xff"},
                   "<override 1>:1:14:", "YAML read error at byte 6: invalid leading UTF-8 octet");
}

static void test_tags(void)
{
    static const char base[] = "model: {}\ndata: {}\n";
    char text[256];
    snprintf(text, sizeof text, "%strain: {epochs: !!str 32}\n", base);
    const char *path = write_file("str_tag.yaml", text, strlen(text));
    expect_refused(path, 0, NULL, ":3:17: train.epochs:", "got \"32\" (quoted, so a string)");
    snprintf(text, sizeof text, "%strain: {eval: !!str true}\n", base);
    expect_refused(write_file("str_bool.yaml", text, strlen(text)), 0, NULL, "train.eval:", "(quoted, so a string)");
    snprintf(text, sizeof text, "%scheckpoint: {dir: !!str null}\n", base);
    config c;
    ddp_err err = {0};
    CHECK(config_load(write_file("str_null.yaml", text, strlen(text)), 0, NULL, &c, &err) == DDP_OK, "%s", err.msg);
    CHECK(strcmp(c.checkpoint.dir, "null") == 0, "!!str null is the text \"null\": \"%s\"",
          c.checkpoint.dir);
    snprintf(text, sizeof text, "%strain: {epochs: !!int \"7\"}\nrun: !!map {seed: ! 5}\n", base);
    CHECK(config_load(write_file("int_tag.yaml", text, strlen(text)), 0, NULL, &c, &err) == DDP_EUSAGE,
          "! 5 (non-specific: a string) for run.seed");
    CHECK_STR_CONTAINS(err.msg, "run.seed");
    snprintf(text, sizeof text, "%strain: {epochs: !!int \"7\"}\n", base);
    CHECK(config_load(write_file("int_tag2.yaml", text, strlen(text)), 0, NULL, &c, &err) == DDP_OK, "%s", err.msg);
    CHECK_EQ_INT(c.train.epochs, 7);
    snprintf(text, sizeof text, "%strain: {epochs: !python/object 3}\n", base);
    expect_refused(write_file("odd_tag.yaml", text, strlen(text)), 0, NULL, ":3:17: train.epochs:",
                   "unsupported tag !python/object");
    snprintf(text, sizeof text, "%smodel: !!seq {}\n", "data: {}\n");
    expect_refused(write_file("seq_map.yaml", text, strlen(text)), 0, NULL, "model:", "tagged !!seq");
    expect_refused(NULL, 1, (char *[]){"train.epochs=!!str 3"}, "<override 1>:1:14: train.epochs:",
                   "(quoted, so a string)");
    /* a core tag says what its scalar is: the text must be that, and the key must take it */
    static const char *const refused[][3] = {
        {"train: {epochs: !!float 7}\n", ":3:17: train.epochs:", "tagged !!float, a kind of value this setting"},
        {"train: {epochs: !!null 7}\n", "train.epochs:", "tagged !!null, but \"7\" is not nothing"},
        {"train: {eval: !!int true}\n", "train.eval:", "tagged !!int, but \"true\" is not an integer"},
        {"optimizer: {lr: !!int 0.5}\n", "optimizer.lr:", "tagged !!int, but \"0.5\" is not an integer"},
        {"device: !!bool cpu\n", "device:", "tagged !!bool, but \"cpu\" is not true or false"},
        {"run: {dir: !!null x}\n", "run.dir:", "tagged !!null, but \"x\" is not nothing"},
        {"train: {!foo epochs: 7}\n", "train:", "unsupported tag !foo"},
        {"optimizer: {!!binary lr: 0.5}\n", "optimizer:", "unsupported tag !!binary"},
        {"train: {!!int epochs: 7}\n", "train:", "key name epochs tagged !!int: a key name is text"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        snprintf(text, sizeof text, "%s%s", base, refused[i][0]);
        expect_refused(write_file("core_tag.yaml", text, strlen(text)), 0, NULL, refused[i][1], refused[i][2]);
    }
    expect_refused(NULL, 1, (char *[]){"model.mlp.hidden=[8, !!float 8]"}, "<override 1>:1:22: model.mlp.hidden[1]:",
                   "tagged !!float");
    snprintf(text, sizeof text, "%soptimizer: {lr: !!float 5e-1, betas: [!!float 0.5, !!int 0]}\n"
             "train: {epochs: !!int 7, eval: !!bool false}\ncheckpoint: {init_from: !!null ~}\n", base);
    CHECK(config_load(write_file("core_tags.yaml", text, strlen(text)), 0, NULL, &c, &err) == DDP_OK, "%s", err.msg);
    CHECK(c.optimizer.lr == 0.5 && c.train.epochs == 7 && !c.train.eval && !c.checkpoint.init_from[0],
          "core tags that say what the value is and the key takes are read as the plain values");
}

int main(int argc, char **argv)
{
    snprintf(dir, sizeof dir, "/tmp/ddp_cfglim_XXXXXX");
    if (!mkdtemp(dir))
        return 1;
    const char *only = argc > 1 ? argv[1] : NULL;
    if (!only || !strcmp(only, "depth"))
        test_depth();
    if (!only || !strcmp(only, "size"))
        test_size();
    if (!only || !strcmp(only, "stream"))
        test_endless_stream();
    if (!only || !strcmp(only, "tags"))
        test_tags();
    if (!only || !strcmp(only, "encoding"))
        test_bad_encoding();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "note: could not remove %s\n", dir);
    return check_done("config_limits");
}
